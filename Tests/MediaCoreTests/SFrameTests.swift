import MediaCore
import MediaTestSupport
import Testing

private func hex(_ s: String) -> [UInt8] {
    let c = Array(s.filter { !$0.isWhitespace }.utf8)
    return stride(from: 0, to: c.count, by: 2).map { UInt8(String(decoding: c[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
}

private func sframeError(_ body: () throws -> Void) -> SFrameError? {
    do { try body() } catch { return error as? SFrameError ?? .cryptoFailure }
    return nil
}

/// RFC 9605 appendix C.3: one frame per suite, KID 0x123, CTR 0x4567, base key 00..0f, metadata
/// "IETF SFrame WG", plaintext "draft-ietf-sframe-enc".
struct SFrameVector: Sendable, CustomTestStringConvertible {
    let suite: SFrameCipherSuite
    let sframeKey: String
    let sframeSalt: String
    let ct: String
    var testDescription: String { "\(suite)" }
}

let sframeVectors: [SFrameVector] = [
    SFrameVector(
        suite: .aes128CTRHMACSHA256_80,
        sframeKey: "3f7d9a7c83ae8e1c8a11ae695ab59314 b367e359fadac7b9c46b2bc6f81f46e1 6b96f0811868d59402b7e870102720b3",
        sframeSalt: "50b29329a04dc0f184ac3168",
        ct: "9901234567449408b6f490086165b9d6 f62b24ae1a59a56486b4ae8ed036b889 12e24f11"),
    SFrameVector(
        suite: .aes128CTRHMACSHA256_64,
        sframeKey: "e2ec5c797540310483b16bf6e7a570d2 a27d192fe869c7ccd8584a8d9dab9154 9fbe553f5113461ec6aa83bf3865553e",
        sframeSalt: "e68ac8dd3d02fbcd368c5577",
        ct: "99012345673f31438db4d09434e43afa 0f8a2f00867a2be085046a9f5cb4f101 d607"),
    SFrameVector(
        suite: .aes128CTRHMACSHA256_32,
        sframeKey: "2c5703089cbb8c583475e4fc461d97d1 8809df79b6d550f78eb6d50ffa80d892 11d57909934f46f5405e38cd583c69fe",
        sframeSalt: "38c16e4f5159700c00c7f350",
        ct: "990123456717fc8af28a5a695afcfc6c 8df6358a17e26b2fcb3bae32e443"),
    SFrameVector(
        suite: .aes128GCMSHA256_128,
        sframeKey: "d34f547f4ca4f9a7447006fe7fcbf768",
        sframeSalt: "75234edefe07819026751816",
        ct: "9901234567b7412c2513a1b66dbb4884 1bbaf17f598751176ad847681a69c6d0 b091c07018ce4adb34eb"),
    SFrameVector(
        suite: .aes256GCMSHA512_128,
        sframeKey: "d3e27b0d4a5ae9e55df01a70e6d4d28d 969b246e2936f4b7a5d9b494da6b9633",
        sframeSalt: "84991c167b8cd23c93708ec7",
        ct: "990123456794f509d36e9beacb0e261d 99c7d1e972f1fed787d4049f17ca2135 3c1cc24d56ceabced279"),
]

private let vectorBaseKey = hex("000102030405060708090a0b0c0d0e0f")
private let vectorMetadata = hex("4945544620534672616d65205747")
private let vectorPlaintext = hex("64726166742d696574662d736672616d 652d656e63")

/// RFC 9605 appendix C.1: every KID and CTR of {0, 1, 0xff, 0x100, 0xffff, ..., 2^64-1} with its header.
private let headerVectors: [(kid: UInt64, ctr: UInt64, header: String)] = [
    (0x0, 0x0, "00"),
    (0x0, 0x1, "01"),
    (0x0, 0xff, "08ff"),
    (0x0, 0x100, "090100"),
    (0x0, 0xffff, "09ffff"),
    (0x0, 0x10000, "0a010000"),
    (0x0, 0xffffff, "0affffff"),
    (0x0, 0x1000000, "0b01000000"),
    (0x0, 0xffffffff, "0bffffffff"),
    (0x0, 0x100000000, "0c0100000000"),
    (0x0, 0xffffffffff, "0cffffffffff"),
    (0x0, 0x10000000000, "0d010000000000"),
    (0x0, 0xffffffffffff, "0dffffffffffff"),
    (0x0, 0x1000000000000, "0e01000000000000"),
    (0x0, 0xffffffffffffff, "0effffffffffffff"),
    (0x0, 0x100000000000000, "0f0100000000000000"),
    (0x0, 0xffffffffffffffff, "0fffffffffffffffff"),
    (0x1, 0x0, "10"),
    (0x1, 0x1, "11"),
    (0x1, 0xff, "18ff"),
    (0x1, 0x100, "190100"),
    (0x1, 0xffff, "19ffff"),
    (0x1, 0x10000, "1a010000"),
    (0x1, 0xffffff, "1affffff"),
    (0x1, 0x1000000, "1b01000000"),
    (0x1, 0xffffffff, "1bffffffff"),
    (0x1, 0x100000000, "1c0100000000"),
    (0x1, 0xffffffffff, "1cffffffffff"),
    (0x1, 0x10000000000, "1d010000000000"),
    (0x1, 0xffffffffffff, "1dffffffffffff"),
    (0x1, 0x1000000000000, "1e01000000000000"),
    (0x1, 0xffffffffffffff, "1effffffffffffff"),
    (0x1, 0x100000000000000, "1f0100000000000000"),
    (0x1, 0xffffffffffffffff, "1fffffffffffffffff"),
    (0xff, 0x0, "80ff"),
    (0xff, 0x1, "81ff"),
    (0xff, 0xff, "88ffff"),
    (0xff, 0x100, "89ff0100"),
    (0xff, 0xffff, "89ffffff"),
    (0xff, 0x10000, "8aff010000"),
    (0xff, 0xffffff, "8affffffff"),
    (0xff, 0x1000000, "8bff01000000"),
    (0xff, 0xffffffff, "8bffffffffff"),
    (0xff, 0x100000000, "8cff0100000000"),
    (0xff, 0xffffffffff, "8cffffffffffff"),
    (0xff, 0x10000000000, "8dff010000000000"),
    (0xff, 0xffffffffffff, "8dffffffffffffff"),
    (0xff, 0x1000000000000, "8eff01000000000000"),
    (0xff, 0xffffffffffffff, "8effffffffffffffff"),
    (0xff, 0x100000000000000, "8fff0100000000000000"),
    (0xff, 0xffffffffffffffff, "8fffffffffffffffffff"),
    (0x100, 0x0, "900100"),
    (0x100, 0x1, "910100"),
    (0x100, 0xff, "980100ff"),
    (0x100, 0x100, "9901000100"),
    (0x100, 0xffff, "990100ffff"),
    (0x100, 0x10000, "9a0100010000"),
    (0x100, 0xffffff, "9a0100ffffff"),
    (0x100, 0x1000000, "9b010001000000"),
    (0x100, 0xffffffff, "9b0100ffffffff"),
    (0x100, 0x100000000, "9c01000100000000"),
    (0x100, 0xffffffffff, "9c0100ffffffffff"),
    (0x100, 0x10000000000, "9d0100010000000000"),
    (0x100, 0xffffffffffff, "9d0100ffffffffffff"),
    (0x100, 0x1000000000000, "9e010001000000000000"),
    (0x100, 0xffffffffffffff, "9e0100ffffffffffffff"),
    (0x100, 0x100000000000000, "9f01000100000000000000"),
    (0x100, 0xffffffffffffffff, "9f0100ffffffffffffffff"),
    (0xffff, 0x0, "90ffff"),
    (0xffff, 0x1, "91ffff"),
    (0xffff, 0xff, "98ffffff"),
    (0xffff, 0x100, "99ffff0100"),
    (0xffff, 0xffff, "99ffffffff"),
    (0xffff, 0x10000, "9affff010000"),
    (0xffff, 0xffffff, "9affffffffff"),
    (0xffff, 0x1000000, "9bffff01000000"),
    (0xffff, 0xffffffff, "9bffffffffffff"),
    (0xffff, 0x100000000, "9cffff0100000000"),
    (0xffff, 0xffffffffff, "9cffffffffffffff"),
    (0xffff, 0x10000000000, "9dffff010000000000"),
    (0xffff, 0xffffffffffff, "9dffffffffffffffff"),
    (0xffff, 0x1000000000000, "9effff01000000000000"),
    (0xffff, 0xffffffffffffff, "9effffffffffffffffff"),
    (0xffff, 0x100000000000000, "9fffff0100000000000000"),
    (0xffff, 0xffffffffffffffff, "9fffffffffffffffffffff"),
    (0x10000, 0x0, "a0010000"),
    (0x10000, 0x1, "a1010000"),
    (0x10000, 0xff, "a8010000ff"),
    (0x10000, 0x100, "a90100000100"),
    (0x10000, 0xffff, "a9010000ffff"),
    (0x10000, 0x10000, "aa010000010000"),
    (0x10000, 0xffffff, "aa010000ffffff"),
    (0x10000, 0x1000000, "ab01000001000000"),
    (0x10000, 0xffffffff, "ab010000ffffffff"),
    (0x10000, 0x100000000, "ac0100000100000000"),
    (0x10000, 0xffffffffff, "ac010000ffffffffff"),
    (0x10000, 0x10000000000, "ad010000010000000000"),
    (0x10000, 0xffffffffffff, "ad010000ffffffffffff"),
    (0x10000, 0x1000000000000, "ae01000001000000000000"),
    (0x10000, 0xffffffffffffff, "ae010000ffffffffffffff"),
    (0x10000, 0x100000000000000, "af0100000100000000000000"),
    (0x10000, 0xffffffffffffffff, "af010000ffffffffffffffff"),
    (0xffffff, 0x0, "a0ffffff"),
    (0xffffff, 0x1, "a1ffffff"),
    (0xffffff, 0xff, "a8ffffffff"),
    (0xffffff, 0x100, "a9ffffff0100"),
    (0xffffff, 0xffff, "a9ffffffffff"),
    (0xffffff, 0x10000, "aaffffff010000"),
    (0xffffff, 0xffffff, "aaffffffffffff"),
    (0xffffff, 0x1000000, "abffffff01000000"),
    (0xffffff, 0xffffffff, "abffffffffffffff"),
    (0xffffff, 0x100000000, "acffffff0100000000"),
    (0xffffff, 0xffffffffff, "acffffffffffffffff"),
    (0xffffff, 0x10000000000, "adffffff010000000000"),
    (0xffffff, 0xffffffffffff, "adffffffffffffffffff"),
    (0xffffff, 0x1000000000000, "aeffffff01000000000000"),
    (0xffffff, 0xffffffffffffff, "aeffffffffffffffffffff"),
    (0xffffff, 0x100000000000000, "afffffff0100000000000000"),
    (0xffffff, 0xffffffffffffffff, "afffffffffffffffffffffff"),
    (0x1000000, 0x0, "b001000000"),
    (0x1000000, 0x1, "b101000000"),
    (0x1000000, 0xff, "b801000000ff"),
    (0x1000000, 0x100, "b9010000000100"),
    (0x1000000, 0xffff, "b901000000ffff"),
    (0x1000000, 0x10000, "ba01000000010000"),
    (0x1000000, 0xffffff, "ba01000000ffffff"),
    (0x1000000, 0x1000000, "bb0100000001000000"),
    (0x1000000, 0xffffffff, "bb01000000ffffffff"),
    (0x1000000, 0x100000000, "bc010000000100000000"),
    (0x1000000, 0xffffffffff, "bc01000000ffffffffff"),
    (0x1000000, 0x10000000000, "bd01000000010000000000"),
    (0x1000000, 0xffffffffffff, "bd01000000ffffffffffff"),
    (0x1000000, 0x1000000000000, "be0100000001000000000000"),
    (0x1000000, 0xffffffffffffff, "be01000000ffffffffffffff"),
    (0x1000000, 0x100000000000000, "bf010000000100000000000000"),
    (0x1000000, 0xffffffffffffffff, "bf01000000ffffffffffffffff"),
    (0xffffffff, 0x0, "b0ffffffff"),
    (0xffffffff, 0x1, "b1ffffffff"),
    (0xffffffff, 0xff, "b8ffffffffff"),
    (0xffffffff, 0x100, "b9ffffffff0100"),
    (0xffffffff, 0xffff, "b9ffffffffffff"),
    (0xffffffff, 0x10000, "baffffffff010000"),
    (0xffffffff, 0xffffff, "baffffffffffffff"),
    (0xffffffff, 0x1000000, "bbffffffff01000000"),
    (0xffffffff, 0xffffffff, "bbffffffffffffffff"),
    (0xffffffff, 0x100000000, "bcffffffff0100000000"),
    (0xffffffff, 0xffffffffff, "bcffffffffffffffffff"),
    (0xffffffff, 0x10000000000, "bdffffffff010000000000"),
    (0xffffffff, 0xffffffffffff, "bdffffffffffffffffffff"),
    (0xffffffff, 0x1000000000000, "beffffffff01000000000000"),
    (0xffffffff, 0xffffffffffffff, "beffffffffffffffffffffff"),
    (0xffffffff, 0x100000000000000, "bfffffffff0100000000000000"),
    (0xffffffff, 0xffffffffffffffff, "bfffffffffffffffffffffffff"),
    (0x100000000, 0x0, "c00100000000"),
    (0x100000000, 0x1, "c10100000000"),
    (0x100000000, 0xff, "c80100000000ff"),
    (0x100000000, 0x100, "c901000000000100"),
    (0x100000000, 0xffff, "c90100000000ffff"),
    (0x100000000, 0x10000, "ca0100000000010000"),
    (0x100000000, 0xffffff, "ca0100000000ffffff"),
    (0x100000000, 0x1000000, "cb010000000001000000"),
    (0x100000000, 0xffffffff, "cb0100000000ffffffff"),
    (0x100000000, 0x100000000, "cc01000000000100000000"),
    (0x100000000, 0xffffffffff, "cc0100000000ffffffffff"),
    (0x100000000, 0x10000000000, "cd0100000000010000000000"),
    (0x100000000, 0xffffffffffff, "cd0100000000ffffffffffff"),
    (0x100000000, 0x1000000000000, "ce010000000001000000000000"),
    (0x100000000, 0xffffffffffffff, "ce0100000000ffffffffffffff"),
    (0x100000000, 0x100000000000000, "cf01000000000100000000000000"),
    (0x100000000, 0xffffffffffffffff, "cf0100000000ffffffffffffffff"),
    (0xffffffffff, 0x0, "c0ffffffffff"),
    (0xffffffffff, 0x1, "c1ffffffffff"),
    (0xffffffffff, 0xff, "c8ffffffffffff"),
    (0xffffffffff, 0x100, "c9ffffffffff0100"),
    (0xffffffffff, 0xffff, "c9ffffffffffffff"),
    (0xffffffffff, 0x10000, "caffffffffff010000"),
    (0xffffffffff, 0xffffff, "caffffffffffffffff"),
    (0xffffffffff, 0x1000000, "cbffffffffff01000000"),
    (0xffffffffff, 0xffffffff, "cbffffffffffffffffff"),
    (0xffffffffff, 0x100000000, "ccffffffffff0100000000"),
    (0xffffffffff, 0xffffffffff, "ccffffffffffffffffffff"),
    (0xffffffffff, 0x10000000000, "cdffffffffff010000000000"),
    (0xffffffffff, 0xffffffffffff, "cdffffffffffffffffffffff"),
    (0xffffffffff, 0x1000000000000, "ceffffffffff01000000000000"),
    (0xffffffffff, 0xffffffffffffff, "ceffffffffffffffffffffffff"),
    (0xffffffffff, 0x100000000000000, "cfffffffffff0100000000000000"),
    (0xffffffffff, 0xffffffffffffffff, "cfffffffffffffffffffffffffff"),
    (0x10000000000, 0x0, "d0010000000000"),
    (0x10000000000, 0x1, "d1010000000000"),
    (0x10000000000, 0xff, "d8010000000000ff"),
    (0x10000000000, 0x100, "d90100000000000100"),
    (0x10000000000, 0xffff, "d9010000000000ffff"),
    (0x10000000000, 0x10000, "da010000000000010000"),
    (0x10000000000, 0xffffff, "da010000000000ffffff"),
    (0x10000000000, 0x1000000, "db01000000000001000000"),
    (0x10000000000, 0xffffffff, "db010000000000ffffffff"),
    (0x10000000000, 0x100000000, "dc0100000000000100000000"),
    (0x10000000000, 0xffffffffff, "dc010000000000ffffffffff"),
    (0x10000000000, 0x10000000000, "dd010000000000010000000000"),
    (0x10000000000, 0xffffffffffff, "dd010000000000ffffffffffff"),
    (0x10000000000, 0x1000000000000, "de01000000000001000000000000"),
    (0x10000000000, 0xffffffffffffff, "de010000000000ffffffffffffff"),
    (0x10000000000, 0x100000000000000, "df0100000000000100000000000000"),
    (0x10000000000, 0xffffffffffffffff, "df010000000000ffffffffffffffff"),
    (0xffffffffffff, 0x0, "d0ffffffffffff"),
    (0xffffffffffff, 0x1, "d1ffffffffffff"),
    (0xffffffffffff, 0xff, "d8ffffffffffffff"),
    (0xffffffffffff, 0x100, "d9ffffffffffff0100"),
    (0xffffffffffff, 0xffff, "d9ffffffffffffffff"),
    (0xffffffffffff, 0x10000, "daffffffffffff010000"),
    (0xffffffffffff, 0xffffff, "daffffffffffffffffff"),
    (0xffffffffffff, 0x1000000, "dbffffffffffff01000000"),
    (0xffffffffffff, 0xffffffff, "dbffffffffffffffffffff"),
    (0xffffffffffff, 0x100000000, "dcffffffffffff0100000000"),
    (0xffffffffffff, 0xffffffffff, "dcffffffffffffffffffffff"),
    (0xffffffffffff, 0x10000000000, "ddffffffffffff010000000000"),
    (0xffffffffffff, 0xffffffffffff, "ddffffffffffffffffffffffff"),
    (0xffffffffffff, 0x1000000000000, "deffffffffffff01000000000000"),
    (0xffffffffffff, 0xffffffffffffff, "deffffffffffffffffffffffffff"),
    (0xffffffffffff, 0x100000000000000, "dfffffffffffff0100000000000000"),
    (0xffffffffffff, 0xffffffffffffffff, "dfffffffffffffffffffffffffffff"),
    (0x1000000000000, 0x0, "e001000000000000"),
    (0x1000000000000, 0x1, "e101000000000000"),
    (0x1000000000000, 0xff, "e801000000000000ff"),
    (0x1000000000000, 0x100, "e9010000000000000100"),
    (0x1000000000000, 0xffff, "e901000000000000ffff"),
    (0x1000000000000, 0x10000, "ea01000000000000010000"),
    (0x1000000000000, 0xffffff, "ea01000000000000ffffff"),
    (0x1000000000000, 0x1000000, "eb0100000000000001000000"),
    (0x1000000000000, 0xffffffff, "eb01000000000000ffffffff"),
    (0x1000000000000, 0x100000000, "ec010000000000000100000000"),
    (0x1000000000000, 0xffffffffff, "ec01000000000000ffffffffff"),
    (0x1000000000000, 0x10000000000, "ed01000000000000010000000000"),
    (0x1000000000000, 0xffffffffffff, "ed01000000000000ffffffffffff"),
    (0x1000000000000, 0x1000000000000, "ee0100000000000001000000000000"),
    (0x1000000000000, 0xffffffffffffff, "ee01000000000000ffffffffffffff"),
    (0x1000000000000, 0x100000000000000, "ef010000000000000100000000000000"),
    (0x1000000000000, 0xffffffffffffffff, "ef01000000000000ffffffffffffffff"),
    (0xffffffffffffff, 0x0, "e0ffffffffffffff"),
    (0xffffffffffffff, 0x1, "e1ffffffffffffff"),
    (0xffffffffffffff, 0xff, "e8ffffffffffffffff"),
    (0xffffffffffffff, 0x100, "e9ffffffffffffff0100"),
    (0xffffffffffffff, 0xffff, "e9ffffffffffffffffff"),
    (0xffffffffffffff, 0x10000, "eaffffffffffffff010000"),
    (0xffffffffffffff, 0xffffff, "eaffffffffffffffffffff"),
    (0xffffffffffffff, 0x1000000, "ebffffffffffffff01000000"),
    (0xffffffffffffff, 0xffffffff, "ebffffffffffffffffffffff"),
    (0xffffffffffffff, 0x100000000, "ecffffffffffffff0100000000"),
    (0xffffffffffffff, 0xffffffffff, "ecffffffffffffffffffffffff"),
    (0xffffffffffffff, 0x10000000000, "edffffffffffffff010000000000"),
    (0xffffffffffffff, 0xffffffffffff, "edffffffffffffffffffffffffff"),
    (0xffffffffffffff, 0x1000000000000, "eeffffffffffffff01000000000000"),
    (0xffffffffffffff, 0xffffffffffffff, "eeffffffffffffffffffffffffffff"),
    (0xffffffffffffff, 0x100000000000000, "efffffffffffffff0100000000000000"),
    (0xffffffffffffff, 0xffffffffffffffff, "efffffffffffffffffffffffffffffff"),
    (0x100000000000000, 0x0, "f00100000000000000"),
    (0x100000000000000, 0x1, "f10100000000000000"),
    (0x100000000000000, 0xff, "f80100000000000000ff"),
    (0x100000000000000, 0x100, "f901000000000000000100"),
    (0x100000000000000, 0xffff, "f90100000000000000ffff"),
    (0x100000000000000, 0x10000, "fa0100000000000000010000"),
    (0x100000000000000, 0xffffff, "fa0100000000000000ffffff"),
    (0x100000000000000, 0x1000000, "fb010000000000000001000000"),
    (0x100000000000000, 0xffffffff, "fb0100000000000000ffffffff"),
    (0x100000000000000, 0x100000000, "fc01000000000000000100000000"),
    (0x100000000000000, 0xffffffffff, "fc0100000000000000ffffffffff"),
    (0x100000000000000, 0x10000000000, "fd0100000000000000010000000000"),
    (0x100000000000000, 0xffffffffffff, "fd0100000000000000ffffffffffff"),
    (0x100000000000000, 0x1000000000000, "fe010000000000000001000000000000"),
    (0x100000000000000, 0xffffffffffffff, "fe0100000000000000ffffffffffffff"),
    (0x100000000000000, 0x100000000000000, "ff01000000000000000100000000000000"),
    (0x100000000000000, 0xffffffffffffffff, "ff0100000000000000ffffffffffffffff"),
    (0xffffffffffffffff, 0x0, "f0ffffffffffffffff"),
    (0xffffffffffffffff, 0x1, "f1ffffffffffffffff"),
    (0xffffffffffffffff, 0xff, "f8ffffffffffffffffff"),
    (0xffffffffffffffff, 0x100, "f9ffffffffffffffff0100"),
    (0xffffffffffffffff, 0xffff, "f9ffffffffffffffffffff"),
    (0xffffffffffffffff, 0x10000, "faffffffffffffffff010000"),
    (0xffffffffffffffff, 0xffffff, "faffffffffffffffffffffff"),
    (0xffffffffffffffff, 0x1000000, "fbffffffffffffffff01000000"),
    (0xffffffffffffffff, 0xffffffff, "fbffffffffffffffffffffffff"),
    (0xffffffffffffffff, 0x100000000, "fcffffffffffffffff0100000000"),
    (0xffffffffffffffff, 0xffffffffff, "fcffffffffffffffffffffffffff"),
    (0xffffffffffffffff, 0x10000000000, "fdffffffffffffffff010000000000"),
    (0xffffffffffffffff, 0xffffffffffff, "fdffffffffffffffffffffffffffff"),
    (0xffffffffffffffff, 0x1000000000000, "feffffffffffffffff01000000000000"),
    (0xffffffffffffffff, 0xffffffffffffff, "feffffffffffffffffffffffffffffff"),
    (0xffffffffffffffff, 0x100000000000000, "ffffffffffffffffff0100000000000000"),
    (0xffffffffffffffff, 0xffffffffffffffff, "ffffffffffffffffffffffffffffffffff"),
]

@Suite struct SFrameTests {
    // MARK: RFC 9605 appendix C

    @Test func headerEncodingMatchesRFC9605AppendixC1() throws {
        #expect(headerVectors.count == 289)
        for v in headerVectors {
            let header = SFrameHeader(keyID: v.kid, counter: v.ctr)
            #expect(header.bytes == hex(v.header), "kid \(v.kid) ctr \(v.ctr)")
            #expect(header.encodedLength == v.header.count / 2)
            // The span form appends after what the output already holds.
            var out = [UInt8](repeating: 0xEE, count: 1 + header.encodedLength)
            let written = out.withUnsafeMutableBytes { raw in
                var span = OutputRawSpan(buffer: raw, initializedCount: 1)
                return header.encode(into: &span)
            }
            #expect(written == header.encodedLength && out == [0xEE] + hex(v.header))
            let (parsed, length) = try SFrameHeader.parse(hex(v.header))
            #expect(parsed == header)
            #expect(length == v.header.count / 2)
        }
    }

    /// Appendix C.2: AEAD.Encrypt(key, nonce, aad, pt) == ct for the AES-CTR + HMAC construction.
    @Test(arguments: [
        (SFrameCipherSuite.aes128CTRHMACSHA256_80, "6339af04ada1d064688a442b8dc69d5b 6bfa40f4bef0583e8081069cc60705"),
        (.aes128CTRHMACSHA256_64, "6339af04ada1d064688a442b8dc69d5b 6bfa40f4be6e93b7da076927bb"),
        (.aes128CTRHMACSHA256_32, "6339af04ada1d064688a442b8dc69d5b 6bfa40f4be09480509"),
    ])
    func aesCtrHmacMatchesRFC9605AppendixC2(suite: SFrameCipherSuite, ct: String) throws {
        let key = hex(
            "000102030405060708090a0b0c0d0e0f 101112131415161718191a1b1c1d1e1f 202122232425262728292a2b2c2d2e2f")
        let nonce = hex("101112131415161718191a1b")
        let aad = hex("4945544620534672616d65205747")
        let pt = hex("64726166742d696574662d736672616d 652d656e63")
        // The salt is the nonce and the counter 0, so the nonce is used as given.
        let k = try SFrameKey(suite: suite, keyID: 0, sframeKey: key, salt: nonce)
        var out = [UInt8](repeating: 0, count: pt.count + suite.tagLength)
        let sealed = out.withUnsafeMutableBytes { o in
            aad.withUnsafeBytes { a in
                pt.withUnsafeBytes { p in
                    k.seal(
                        counter: 0, aad1: a, aad2: UnsafeRawBufferPointer(start: nil, count: 0), input: p,
                        output: UnsafeMutableRawBufferPointer(rebasing: o[0..<pt.count]),
                        tag: UnsafeMutableRawBufferPointer(rebasing: o[pt.count...]))
                }
            }
        }
        #expect(sealed)
        #expect(out == hex(ct))
        var back = [UInt8](repeating: 0, count: pt.count)
        let opened = back.withUnsafeMutableBytes { o in
            aad.withUnsafeBytes { a in
                out.withUnsafeBytes { c in
                    k.open(
                        counter: 0, aad1: a, aad2: UnsafeRawBufferPointer(start: nil, count: 0),
                        input: UnsafeRawBufferPointer(rebasing: c[0..<pt.count]),
                        tag: UnsafeRawBufferPointer(rebasing: c[pt.count...]), output: o)
                }
            }
        }
        #expect(opened == 1)
        #expect(back == pt)
    }

    /// Appendix C.3: key derivation, then encrypt(ctr, kid, metadata, pt) == ct and decrypt back.
    @Test(arguments: sframeVectors)
    func sframeEncryptionMatchesRFC9605AppendixC3(vector: SFrameVector) throws {
        let key = try SFrameKey(suite: vector.suite, keyID: 0x123, baseKey: vectorBaseKey)
        #expect(key.key == hex(vector.sframeKey))
        #expect(key.salt == hex(vector.sframeSalt))
        #expect(
            SFrameKey.label("SFrame 1.0 Secret key ", 0x123, vector.suite)
                == hex("534672616d6520312e30205365637265 74206b6579200000000000000123") + [0, UInt8(vector.suite.rawValue)])
        let sender = try SFrameSender(suite: vector.suite, keyID: 0x123, baseKey: vectorBaseKey, initialCounter: 0x4567)
        let ct = try sender.encrypt(vectorPlaintext, metadata: vectorMetadata)
        #expect(ct == hex(vector.ct))
        let receiver = SFrameReceiver(suite: vector.suite)
        try receiver.addKey(keyID: 0x123, baseKey: vectorBaseKey)
        #expect(try receiver.decrypt(hex(vector.ct), metadata: vectorMetadata) == vectorPlaintext)
        #expect(receiver.statistics.framesDecrypted == 1)
    }

    // MARK: Round trips and failures

    @Test(arguments: SFrameCipherSuite.allCases)
    func framesRoundTripAtEverySuite(suite: SFrameCipherSuite) throws {
        let base: [UInt8] = Array(0..<32)
        let sender = try SFrameSender(suite: suite, keyID: 3, baseKey: base)
        let receiver = SFrameReceiver(suite: suite)
        try receiver.addKey(keyID: 3, baseKey: base)
        for size in [0, 1, 15, 16, 17, 100, 1200, 30_000] {
            let frame = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ size) }
            let ct = try sender.encrypt(frame, metadata: [9, 9])
            // KID 3 and counters 0...7 fit in the config byte.
            #expect(ct.count == frame.count + 1 + suite.tagLength)
            if size >= 16 { #expect(ct[1..<17].elementsEqual(frame[0..<16]) == false) }
            #expect(try receiver.decrypt(ct, metadata: [9, 9]) == frame)
        }
        #expect(sender.statistics.framesEncrypted == 8)
        #expect(receiver.statistics.framesDecrypted == 8)
    }

    /// Every byte of a frame (clear prefix, header, ciphertext, tag) altered in turn: the frame is
    /// rejected and counted every time, and the untouched frame still decrypts afterwards (failed
    /// frames do not move the replay window).
    @Test(arguments: SFrameCipherSuite.allCases)
    func alteringAnyByteIsRejectedAndCounted(suite: SFrameCipherSuite) throws {
        let base: [UInt8] = Array(repeating: 7, count: 16)
        let sender = try SFrameSender(suite: suite, keyID: 300, baseKey: base, initialCounter: 1000)
        let receiver = SFrameReceiver(suite: suite)
        try receiver.addKey(keyID: 300, baseKey: base)
        let frame: [UInt8] = [0x10, 0x02, 0x00, 0x9d, 0x01, 0x2a, 0x80, 0x02, 0xe0, 0x01] + (0..<90).map { UInt8($0) }
        var protected = [UInt8](repeating: 0, count: frame.count + 64)
        let n = try frame.withUnsafeBytes { f in
            try protected.withUnsafeMutableBytes { o in try sender.encryptFrame(f, clearPrefix: 10, into: o) }
        }
        protected.removeLast(protected.count - n)
        #expect(protected[0..<10].elementsEqual(frame[0..<10]))
        let headerStart = 10, headerEnd = 10 + SFrameHeader(keyID: 300, counter: 1000).encodedLength
        var out = [UInt8](repeating: 0, count: protected.count)
        var rejected: UInt64 = 0
        for i in 0..<protected.count {
            for flip: UInt8 in [0x01, 0x80] {
                var bad = protected
                bad[i] ^= flip
                let error = sframeError {
                    _ = try bad.withUnsafeBytes { f in
                        try out.withUnsafeMutableBytes { o in try receiver.decryptFrame(f, clearPrefix: 10, into: o) }
                    }
                }
                rejected += 1
                if i < headerStart || i >= headerEnd {
                    #expect(error == .authenticationFailed, "byte \(i)")
                } else {
                    // In the header: a changed KID names no key, a changed length breaks the
                    // parse, a changed counter breaks the tag.
                    #expect(error == .authenticationFailed || error == .unknownKey || error == .malformedHeader, "byte \(i)")
                }
            }
        }
        let stats = receiver.statistics
        #expect(stats.framesRejected == rejected)
        #expect(stats.framesDecrypted == 0)
        #expect(stats.authenticationFailures >= rejected - UInt64(2 * (headerEnd - headerStart)))
        let back = try protected.withUnsafeBytes { f in
            try out.withUnsafeMutableBytes { o in try receiver.decryptFrame(f, clearPrefix: 10, into: o) }
        }
        #expect(Array(out[0..<back]) == frame)
    }

    @Test func wrongKeyFailsAuthentication() throws {
        for suite in SFrameCipherSuite.allCases {
            let sender = try SFrameSender(suite: suite, keyID: 1, baseKey: [1, 2, 3, 4])
            let receiver = SFrameReceiver(suite: suite)
            try receiver.addKey(keyID: 1, baseKey: [1, 2, 3, 5])
            let ct = try sender.encrypt(Array(repeating: 0x55, count: 200))
            #expect(sframeError { _ = try receiver.decrypt(ct) } == .authenticationFailed)
            #expect(receiver.statistics.authenticationFailures == 1)
        }
    }

    @Test func replayedCounterIsRejected() throws {
        let suite = SFrameCipherSuite.aes128GCMSHA256_128
        let sender = try SFrameSender(suite: suite, keyID: 9, baseKey: [7, 7, 7])
        let receiver = SFrameReceiver(suite: suite)
        try receiver.addKey(keyID: 9, baseKey: [7, 7, 7])
        let frames = try (0..<200).map { i in try sender.encrypt([UInt8(truncatingIfNeeded: i)]) }
        #expect(try receiver.decrypt(frames[0]) == [0])
        #expect(sframeError { _ = try receiver.decrypt(frames[0]) } == .replay)
        // Out of order inside the window: accepted once each.
        #expect(try receiver.decrypt(frames[150]) == [150])
        #expect(try receiver.decrypt(frames[149]) == [149])
        #expect(try receiver.decrypt(frames[23]) == [23])
        #expect(sframeError { _ = try receiver.decrypt(frames[23]) } == .replay)
        #expect(sframeError { _ = try receiver.decrypt(frames[150]) } == .replay)
        // 150 - 22 = 128 behind the highest: outside the window.
        #expect(sframeError { _ = try receiver.decrypt(frames[22]) } == .replay)
        #expect(try receiver.decrypt(frames[199]) == [199])
        #expect(try receiver.decrypt(frames[151]) == [151])
        #expect(sframeError { _ = try receiver.decrypt(frames[71]) } == .replay)
        #expect(try receiver.decrypt(frames[72]) == [72])
        let s = receiver.statistics
        #expect(s.replays == 5)
        #expect(s.framesDecrypted == 7)
    }

    @Test func unknownKeyIDIsRejectedAndKeysAreBounded() throws {
        let suite = SFrameCipherSuite.aes128CTRHMACSHA256_80
        let sender = try SFrameSender(suite: suite, keyID: 42, baseKey: [1])
        let receiver = SFrameReceiver(suite: suite, maxKeys: 2)
        try receiver.addKey(keyID: 41, baseKey: [1])
        #expect(sframeError { _ = try receiver.decrypt(try! sender.encrypt([1, 2, 3])) } == .unknownKey)
        #expect(receiver.statistics.unknownKeys == 1)
        try receiver.addKey(keyID: 42, baseKey: [1])
        #expect(try receiver.decrypt(try sender.encrypt([1, 2, 3])) == [1, 2, 3])
        #expect(sframeError { try receiver.addKey(keyID: 43, baseKey: [1]) } == .tooManyKeys)
        #expect(receiver.removeKey(keyID: 41))
        try receiver.addKey(keyID: 43, baseKey: [1])
        #expect(receiver.keyIDs == [42, 43])
        #expect(sframeError { _ = try SFrameSender(suite: suite, keyID: 1, baseKey: []) } == .invalidKey)
    }

    @Test func truncatedFramesAreMalformed() throws {
        let suite = SFrameCipherSuite.aes128GCMSHA256_128
        let sender = try SFrameSender(suite: suite, keyID: 0x1234, baseKey: [5], initialCounter: 0x10000)
        let receiver = SFrameReceiver(suite: suite)
        try receiver.addKey(keyID: 0x1234, baseKey: [5])
        let ct = try sender.encrypt([])
        #expect(ct.count == 1 + 2 + 3 + 16)
        for length in 0..<(1 + 2 + 3 + 16) {
            #expect(sframeError { _ = try receiver.decrypt(Array(ct[0..<length])) } == .malformedHeader)
        }
        #expect(receiver.statistics.malformed == 22)
        #expect(try receiver.decrypt(ct) == [])
    }

    @Test(arguments: [UInt64(0), 7, 8, 255, 256, .max])
    func keyIDsAndCountersAtEncodingBoundariesRoundTrip(value: UInt64) throws {
        let expectedLength = value < 8 ? 0 : SFrameHeader.byteCount(value)
        #expect(expectedLength == (value < 8 ? 0 : value <= 255 ? 1 : value <= 0xffff ? 2 : 8))
        for suite in [SFrameCipherSuite.aes128CTRHMACSHA256_32, .aes256GCMSHA512_128] {
            let sender = try SFrameSender(suite: suite, keyID: value, baseKey: [3, 1, 4], initialCounter: value)
            let receiver = SFrameReceiver(suite: suite)
            try receiver.addKey(keyID: value, baseKey: [3, 1, 4])
            let ct = try sender.encrypt([0xab, 0xcd])
            #expect(ct.count == 1 + 2 * expectedLength + 2 + suite.tagLength)
            let (header, length) = try SFrameHeader.parse(ct)
            #expect(header == SFrameHeader(keyID: value, counter: value))
            #expect(length == 1 + 2 * expectedLength)
            #expect(try receiver.decrypt(ct) == [0xab, 0xcd])
            if value == .max {
                // The counter never wraps: the sender refuses until it gets a new key.
                #expect(sender.nextCounter == nil)
                #expect(sframeError { _ = try sender.encrypt([1]) } == .counterExhausted)
                try sender.setKey(keyID: 5, baseKey: [2])
                #expect(sender.nextCounter == 0)
                #expect(try SFrameHeader.parse(try sender.encrypt([1])).header == SFrameHeader(keyID: 5, counter: 0))
            }
        }
    }

    @Test func clearPrefixFollowsTheCodec() {
        func prefix(_ format: SFrameMediaFormat, _ bytes: [UInt8]) -> Int {
            format.clearPrefixLength(of: bytes.span.bytes)
        }
        let key: [UInt8] = [0x50, 0x2d, 0x01, 0x9d, 0x01, 0x2a] + Array(repeating: 0, count: 20)  // bit 0 clear
        let delta: [UInt8] = [0x31, 0x02, 0x00] + Array(repeating: 0, count: 20)
        #expect(prefix(.vp8, key) == 10)
        #expect(prefix(.vp8, delta) == 3)
        #expect(prefix(.vp8, [0x00, 1]) == 2)
        #expect(prefix(.vp8, []) == 0)
        #expect(prefix(.vp9, key) == 1)
        #expect(prefix(.opus, [0xfc, 1, 2]) == 1)
    }

    /// Encrypting and decrypting into caller buffers allocates nothing, at every suite.
    @Test func encryptAndDecryptIntoCallerBuffersDoNotAllocate() throws {
        for suite in SFrameCipherSuite.allCases {
            let sender = try SFrameSender(suite: suite, keyID: 1000, baseKey: Array(0..<16))
            let receiver = SFrameReceiver(suite: suite)
            try receiver.addKey(keyID: 1000, baseKey: Array(0..<16))
            let frame = UnsafeMutableRawBufferPointer.allocate(byteCount: 5000, alignment: 16)
            let wire = UnsafeMutableRawBufferPointer.allocate(byteCount: 5100, alignment: 16)
            let back = UnsafeMutableRawBufferPointer.allocate(byteCount: 5100, alignment: 16)
            defer { frame.deallocate(); wire.deallocate(); back.deallocate() }
            for i in 0..<frame.count { frame[i] = UInt8(truncatingIfNeeded: i &* 13) }
            var failures = 0
            func run(_ frames: Int) {
                for _ in 0..<frames {
                    guard let n = try? sender.encryptFrame(UnsafeRawBufferPointer(frame), clearPrefix: 10, into: wire),
                        let m = try? receiver.decryptFrame(
                            UnsafeRawBufferPointer(rebasing: wire[0..<n]), clearPrefix: 10, into: back),
                        m == frame.count
                    else {
                        failures += 1
                        continue
                    }
                }
            }
            run(3)
            let allocations = AllocationCounter.count { run(200) }
            #expect(failures == 0)
            #expect(allocations == 0, "\(suite)")
            #expect(back[0..<5000].elementsEqual(frame))
        }
    }

    /// A frame shorter than the clear prefix asked for is refused, not encrypted with a shorter
    /// prefix a receiver would not know about (found by fuzz-sframe).
    @Test func aFrameShorterThanItsClearPrefixIsRefused() throws {
        let sender = try SFrameSender(suite: .aes128GCMSHA256_128, keyID: 1, baseKey: [UInt8](repeating: 1, count: 16))
        var out = [UInt8](repeating: 0, count: 64)
        let frame: [UInt8] = [1, 2, 3]
        #expect(throws: SFrameError.frameShorterThanClearPrefix) {
            try out.withUnsafeMutableBytes { o in
                try frame.withUnsafeBytes { try sender.encryptFrame($0, clearPrefix: 4, into: o) }
            }
        }
        let n = try out.withUnsafeMutableBytes { o in
            try frame.withUnsafeBytes { try sender.encryptFrame($0, clearPrefix: 3, into: o) }
        }
        // The clear bytes, a one-byte header (KID 1 and counter 0 fit in its config byte), the tag.
        #expect(n == 3 + 1 + SFrameCipherSuite.aes128GCMSHA256_128.tagLength)
        #expect(sender.statistics.framesEncrypted == 1)
    }

    /// A receiver that binds senders takes a frame only on a stream bound to its KID: another
    /// participant's key (which the receiver holds) on that stream is refused as `.wrongSender`,
    /// so is any frame on a stream bound to nobody, or given without its SSRC; the bindings are
    /// bounded like the keys.
    @Test func boundStreamsTakeOnlyTheirSendersKeys() throws {
        let suite = SFrameCipherSuite.aes128GCMSHA256_128
        let alice = try SFrameSender(suite: suite, keyID: 1, baseKey: [1])
        let bob = try SFrameSender(suite: suite, keyID: 2, baseKey: [2])
        let receiver = SFrameReceiver(suite: suite, maxKeys: 2, bindsSenders: true)
        try receiver.addKey(keyID: 1, baseKey: [1])
        try receiver.addKey(keyID: 2, baseKey: [2])
        try receiver.bind(ssrc: 0xA, keyIDs: [1])
        try receiver.bind(ssrc: 0xB, keyIDs: [2])
        func open(_ frame: [UInt8], ssrc: UInt32?) -> Result<[UInt8], SFrameError> {
            var out = [UInt8](repeating: 0, count: frame.count)
            return out.withUnsafeMutableBytes { o in
                frame.withUnsafeBytes { f in
                    Result { () throws(SFrameError) in
                        try receiver.decryptFrame(f, clearPrefix: 0, into: o, recordingCounter: true, ssrc: ssrc)
                    }
                }
            }.map { Array(out[0..<$0]) }
        }
        #expect(try open(alice.encrypt([7, 7]), ssrc: 0xA).get() == [7, 7])
        #expect(try open(bob.encrypt([8]), ssrc: 0xB).get() == [8])
        // Bob's frame on Alice's stream, Alice's on Bob's: both keys are held, neither is taken.
        #expect(throws: SFrameError.wrongSender) { try open(bob.encrypt([9]), ssrc: 0xA).get() }
        #expect(throws: SFrameError.wrongSender) { try open(alice.encrypt([9]), ssrc: 0xB).get() }
        #expect(throws: SFrameError.wrongSender) { try open(alice.encrypt([9]), ssrc: 0xC).get() }
        #expect(throws: SFrameError.wrongSender) { try open(alice.encrypt([9]), ssrc: nil).get() }
        #expect(receiver.statistics.wrongSender == 4 && receiver.statistics.framesDecrypted == 2)
        // The server moves Bob to stream 0xA: from then on it is Bob's.
        try receiver.bind(ssrc: 0xA, keyIDs: [2])
        #expect(try open(bob.encrypt([5]), ssrc: 0xA).get() == [5])
        #expect(throws: SFrameError.wrongSender) { try open(alice.encrypt([5]), ssrc: 0xA).get() }
        #expect(receiver.bindings == [0xA: [2], 0xB: [2]])
        #expect(sframeError { try receiver.bind(ssrc: 0xD, keyIDs: [1]) } == .tooManyKeys)
        receiver.unbind(ssrc: 0xB)
        #expect(throws: SFrameError.wrongSender) { try open(bob.encrypt([6]), ssrc: 0xB).get() }
        try receiver.bind(ssrc: 0xD, keyIDs: [1])
        // A receiver that does not bind senders takes any held key on any stream, as before.
        let open2 = SFrameReceiver(suite: suite)
        try open2.addKey(keyID: 1, baseKey: [1])
        #expect(try open2.decrypt(alice.encrypt([4])) == [4])
    }
}
