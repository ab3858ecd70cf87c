/// The header that starts every SFrame ciphertext (RFC 9605 section 4.3): a key ID (KID) and a
/// counter (CTR), each a 64-bit value. A config byte `X KKK Y CCC` says how they are written: a
/// value below 8 lives in the config byte itself (X or Y clear, the value in KKK or CCC); a larger
/// one follows the config byte, big-endian, in the fewest bytes that hold it (X or Y set, the byte
/// count minus one in KKK or CCC). The KID bytes come before the CTR bytes; 1 to 17 bytes in all.
///
/// The header is sent in the clear and authenticated as part of the AAD.
/// Thread rule: a value type, freely shared. Cost: encoding and parsing read or write at most 17
/// bytes, no allocation.
public struct SFrameHeader: Hashable, Sendable {
    /// The key ID: which key (and so which sender and epoch) protects the frame.
    public var keyID: UInt64
    /// The frame counter, unique per key; XORed into the salt to make the nonce.
    public var counter: UInt64

    /// The longest header: the config byte, 8 KID bytes and 8 CTR bytes.
    public static let maxLength = 17

    /// A header for `keyID` and `counter`.
    public init(keyID: UInt64, counter: UInt64) {
        self.keyID = keyID
        self.counter = counter
    }

    /// Bytes needed to write `value` big-endian without leading zero bytes (at least 1).
    package static func byteCount(_ value: UInt64) -> Int { max(1, (64 - value.leadingZeroBitCount + 7) / 8) }

    /// The number of bytes `encode(into:)` writes (1 to 17).
    public var encodedLength: Int {
        1 + (keyID < 8 ? 0 : Self.byteCount(keyID)) + (counter < 8 ? 0 : Self.byteCount(counter))
    }

    /// Appends the header (`encodedLength` bytes) to `output` (traps on less free capacity) and
    /// returns the number of bytes written. Cost: no allocation.
    @discardableResult
    public func encode(into output: inout OutputRawSpan) -> Int {
        let length = encodedLength
        precondition(output.freeCapacity >= length, "SFrame header needs \(length) bytes")
        let keyIDBytes = keyID < 8 ? 0 : Self.byteCount(keyID)
        let counterBytes = counter < 8 ? 0 : Self.byteCount(counter)
        let k = keyID < 8 ? UInt8(keyID) << 4 : 0x80 | UInt8(keyIDBytes - 1) << 4
        let c = counter < 8 ? UInt8(counter) : 0x08 | UInt8(counterBytes - 1)
        output.appendU8(k | c)
        Self.appendBigEndian(keyID, count: keyIDBytes, to: &output)
        Self.appendBigEndian(counter, count: counterBytes, to: &output)
        return length
    }

    /// The encoded header as a new array (allocates; for tests and tools).
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.append(capacity: encodedLength) { encode(into: &$0) }
        return out
    }

    /// Parses the header at the start of `bytes`; returns it and its length. Throws
    /// `.malformedHeader` when the bytes end before the header does. Any header that parses is
    /// accepted, including a longer-than-needed encoding: the bytes are authenticated as they came.
    public static func parse(_ bytes: RawSpan) throws(SFrameError) -> (header: SFrameHeader, length: Int) {
        var length = 0
        guard let header = bytes.withUnsafeBytes({ parse($0, length: &length) }) else { throw .malformedHeader }
        return (header, length)
    }

    /// The non-throwing parse: the header and its length, or nil when `bytes` end before the
    /// header does. (The receiver's per-frame path uses this one: returning the tuple through a
    /// typed throw allocated in unoptimised builds.)
    static func parse(_ bytes: UnsafeRawBufferPointer, length: inout Int) -> SFrameHeader? {
        guard bytes.count > 0 else { return nil }
        let config = bytes[0]
        var at = 1
        var keyID = UInt64((config >> 4) & 0x07)
        if config & 0x80 != 0 {
            let n = Int(keyID) + 1
            guard bytes.count >= at + n else { return nil }
            keyID = readBigEndian(bytes, at: at, count: n)
            at += n
        }
        var counter = UInt64(config & 0x07)
        if config & 0x08 != 0 {
            let n = Int(counter) + 1
            guard bytes.count >= at + n else { return nil }
            counter = readBigEndian(bytes, at: at, count: n)
            at += n
        }
        length = at
        return SFrameHeader(keyID: keyID, counter: counter)
    }

    /// Parses a header from an array (see `parse(_:)` on a span).
    public static func parse(_ bytes: [UInt8]) throws(SFrameError) -> (header: SFrameHeader, length: Int) {
        try parse(bytes.span.bytes)
    }

    /// Appends the low `count` bytes of `value`, most significant first.
    private static func appendBigEndian(_ value: UInt64, count: Int, to output: inout OutputRawSpan) {
        for i in 0..<count { output.appendU8(UInt8(truncatingIfNeeded: value >> (8 * UInt64(count - 1 - i)))) }
    }

    /// Reads `count` bytes at `at` as a big-endian number.
    private static func readBigEndian(_ bytes: UnsafeRawBufferPointer, at: Int, count: Int) -> UInt64 {
        var v: UInt64 = 0
        for i in 0..<count { v = v << 8 | UInt64(bytes[at + i]) }
        return v
    }
}
