/// A parsed RTP packet (RFC 3550 §5.1): the header by value and where the payload and the raw
/// header extension lie in the parsed bytes, so parsing never copies the payload.
///
/// The packet holds no pointer into the bytes it was parsed from: take the payload from those
/// bytes with `payloadRange` (`bytes.extracting(packet.payloadRange)` on a `RawSpan`).
/// Thread rule: a plain value, usable anywhere. Cost: parsing is O(header) and allocates only
/// when the packet carries CSRCs.
public struct RTPPacket: Sendable {
    /// The header fields (CSRCs, RFC 8285 elements).
    public var header: RTPHeader
    /// Length of the whole datagram as given to the parser.
    public let byteCount: Int
    /// Bytes of fixed header + CSRCs + header extension.
    public let headerSize: Int
    /// Number of padding bytes at the end (RFC 3550 §5.1 "P"), 0 without padding.
    public let paddingSize: Int
    /// The RFC 3550 §5.3.1 "defined by profile" field of the header extension, nil without one.
    public let extensionProfile: UInt16?
    /// Offsets of the header extension body (after its 4-byte header) in the parsed bytes; empty
    /// without one.
    public let extensionRange: Range<Int>

    /// Offsets of the payload (after the header, before padding) in the parsed bytes.
    public var payloadRange: Range<Int> { headerSize..<(byteCount - paddingSize) }
    /// Bytes of payload.
    public var payloadSize: Int { byteCount - headerSize - paddingSize }

    /// Parses and validates an RTP packet. Rejects, with a message naming the field:
    /// fewer than 12 bytes (`truncated`), version not 2 (`badVersion`), a CSRC count past the end
    /// (`csrcOverrun`), an extension header or length past the end (`extensionOverrun`), a
    /// malformed RFC 8285 element (`badExtensionElement`), a padding count of zero or larger than
    /// what follows the header (`badPadding`).
    public init(parsing bytes: RawSpan) throws(RTPError) {
        let n = bytes.byteCount
        guard n >= RTPHeader.fixedSize else {
            throw RTPError(.truncated, "RTP packet of \(n) bytes is shorter than the 12-byte fixed header (RFC 3550 §5.1)")
        }
        let b0 = bytes.u8(0), b1 = bytes.u8(1)
        guard b0 >> 6 == 2 else {
            throw RTPError(.badVersion, "RTP packet has version \(b0 >> 6), expected 2 (RFC 3550 §5.1)")
        }
        let cc = Int(b0 & 0x0F)
        var at = RTPHeader.fixedSize + 4 * cc
        guard at <= n else {
            throw RTPError(.csrcOverrun, "RTP packet of \(n) bytes announces \(cc) CSRCs needing \(at) header bytes")
        }
        var csrcs: [UInt32] = []
        if cc > 0 {
            csrcs.reserveCapacity(cc)
            for i in 0..<cc { csrcs.append(bytes.u32(12 + 4 * i)) }
        }
        var extensions = RTPHeaderExtensions()
        var profile: UInt16? = nil
        var body = at..<at
        if b0 & 0x10 != 0 {
            guard at + 4 <= n else {
                throw RTPError(
                    .extensionOverrun,
                    "RTP packet of \(n) bytes has X set but no room for the 4-byte extension header at offset \(at)")
            }
            let p = bytes.u16(at)
            let words = Int(bytes.u16(at + 2))
            let end = at + 4 + 4 * words
            guard end <= n else {
                throw RTPError(
                    .extensionOverrun, "RTP header extension of \(words) words at offset \(at) runs past the \(n)-byte packet")
            }
            body = (at + 4)..<end
            profile = p
            if let parsed = try RTPHeaderExtensions(profile: p, body: bytes.extracting(body)) { extensions = parsed }
            at = end
        }
        var padding = 0
        if b0 & 0x20 != 0 {
            guard n > at else {
                throw RTPError(.badPadding, "RTP packet has P set but no byte after its \(at)-byte header")
            }
            padding = Int(bytes.u8(n - 1))
            guard padding > 0 && padding <= n - at else {
                throw RTPError(
                    .badPadding, "RTP padding count \(padding) is zero or exceeds the \(n - at) bytes after the header")
            }
        }
        header = RTPHeader(
            padding: b0 & 0x20 != 0, marker: b1 & 0x80 != 0, payloadType: b1 & 0x7F,
            sequenceNumber: bytes.u16(2), timestamp: bytes.u32(4), ssrc: bytes.u32(8),
            csrcs: csrcs, extensions: extensions)
        byteCount = n
        headerSize = at
        paddingSize = padding
        extensionProfile = profile
        extensionRange = body
    }

    /// Bytes `marshal(header:payload:paddingSize:into:)` writes.
    public static func marshalSize(header: RTPHeader, payloadSize: Int, paddingSize: Int = 0) -> Int {
        header.marshalSize + payloadSize + paddingSize
    }

    /// Appends a whole packet to `out`: header (P set when `paddingSize > 0`), payload copy, and
    /// RFC 3550 §5.1 padding (zeros ending with the count byte). Returns the bytes appended.
    /// Traps when `out` has less free capacity than `marshalSize(header:payloadSize:paddingSize:)`
    /// or `paddingSize` exceeds 255. Cost: one payload copy.
    @discardableResult
    public static func marshal(header: RTPHeader, payload: RawSpan, paddingSize: Int = 0, into out: inout OutputRawSpan) -> Int {
        precondition(paddingSize >= 0 && paddingSize <= 255, "RTP padding must be 0...255 bytes")
        let size = marshalSize(header: header, payloadSize: payload.byteCount, paddingSize: paddingSize)
        precondition(out.freeCapacity >= size, "\(out.freeCapacity) bytes of room too few for a \(size)-byte RTP packet")
        var h = header
        h.padding = paddingSize > 0
        h.marshal(into: &out)
        out.appendBytes(payload)
        if paddingSize > 0 {
            out.appendZeros(paddingSize - 1)
            out.appendU8(UInt8(paddingSize))
        }
        return size
    }
}
