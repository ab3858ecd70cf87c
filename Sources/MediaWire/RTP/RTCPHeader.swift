/// The common header of every RTCP packet (RFC 3550 §6.4.1):
/// `|V=2|P| count/FMT |  PT  |  length (32-bit words - 1)  |`.
/// Thread rule: a value type. Cost: O(1).
public struct RTCPHeader: Sendable, Equatable {
    /// RFC 3550 §6.4.1 "P": padding at the end of this packet.
    public var padding: Bool
    /// RFC 3550 "RC"/"SC" count, or the feedback message type "FMT" (RFC 4585 §6.1), 5 bits.
    public var count: UInt8
    /// RFC 3550 §12.1 / RFC 4585 §6.1 packet type.
    public var packetType: RTCPPacketType
    /// Length in 32-bit words minus one, as on the wire.
    public var length: UInt16

    /// Bytes of the whole packet: 4 * (length + 1).
    public var packetSize: Int { 4 * (Int(length) + 1) }

    /// Makes a header for a packet of `packetSize` bytes (a multiple of 4, at least 4).
    public init(padding: Bool = false, count: UInt8, packetType: RTCPPacketType, packetSize: Int) {
        precondition(packetSize >= 4 && packetSize % 4 == 0 && packetSize <= 4 * 65536, "bad RTCP packet size \(packetSize)")
        precondition(count < 32, "RTCP count/FMT exceeds 5 bits")
        self.padding = padding
        self.count = count
        self.packetType = packetType
        self.length = UInt16(packetSize / 4 - 1)
    }

    /// Appends the 4 header bytes. Traps on too little room.
    package func marshal(into out: inout OutputRawSpan) {
        out.appendU8(0x80 | (padding ? 0x20 : 0) | count)
        out.appendU8(packetType.rawValue)
        out.appendU16(length)
    }

    /// Parses the header at the start of `b` and checks that the packet it announces fits.
    /// Throws `truncated` (under 4 bytes), `badRTCPPacket` (version not 2) or `badRTCPLength`.
    package init(parsing b: RawSpan) throws(RTPError) {
        guard b.byteCount >= 4 else {
            throw RTPError(.truncated, "RTCP packet of \(b.byteCount) bytes is shorter than its 4-byte header (RFC 3550 §6.4.1)")
        }
        let first = b.u8(0)
        guard first >> 6 == 2 else {
            throw RTPError(.badRTCPPacket, "RTCP packet has version \(first >> 6), expected 2 (RFC 3550 §6.4.1)")
        }
        padding = first & 0x20 != 0
        count = first & 0x1F
        packetType = RTCPPacketType(rawValue: b.u8(1))
        length = b.u16(2)
        guard packetSize <= b.byteCount else {
            throw RTPError(
                .badRTCPLength, "RTCP packet type \(b.u8(1)) announces \(packetSize) bytes but only \(b.byteCount) remain")
        }
    }
}

/// RTCP packet types (RFC 3550 §12.1, RFC 4585 §6.1).
/// Thread rule: a value type. Cost: none.
public struct RTCPPacketType: RawRepresentable, Sendable, Hashable {
    /// The packet type byte as on the wire.
    public var rawValue: UInt8
    /// The value with this raw code.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// 200, sender report (RFC 3550 §6.4.1).
    public static let senderReport = RTCPPacketType(rawValue: 200)
    /// 201, receiver report (RFC 3550 §6.4.2).
    public static let receiverReport = RTCPPacketType(rawValue: 201)
    /// 202, source description (RFC 3550 §6.5).
    public static let sourceDescription = RTCPPacketType(rawValue: 202)
    /// 203, goodbye (RFC 3550 §6.6).
    public static let goodbye = RTCPPacketType(rawValue: 203)
    /// 204, application-defined (RFC 3550 §6.7).
    public static let application = RTCPPacketType(rawValue: 204)
    /// 205, transport-layer feedback (RFC 4585 §6.2): generic NACK (FMT 1), transport-cc (FMT 15).
    public static let transportFeedback = RTCPPacketType(rawValue: 205)
    /// 206, payload-specific feedback (RFC 4585 §6.3): PLI (FMT 1), FIR (FMT 4), REMB (FMT 15).
    public static let payloadFeedback = RTCPPacketType(rawValue: 206)
}

/// Walks the packets of a compound RTCP datagram (RFC 3550 §6.1) without copying: each step
/// yields one packet's header and where its bytes lie in the datagram (padding included); the
/// caller takes them with `datagram.extracting(range)`.
///
/// Every length is validated before a packet is returned; the first malformed packet throws and
/// ends the walk. RFC 3550 §6.4.1: only the last packet of a compound may carry padding.
/// Thread rule: a value type holding only a position; pass the same datagram to every `next`.
/// Cost: O(1) per packet.
package struct RTCPCompoundIterator {
    private var offset = 0
    private var sawPadding = false

    /// Starts at the first packet.
    package init() {}

    /// The next packet of `datagram`, nil at the end. Throws for an empty datagram, a header or
    /// length running past the datagram, or padding on a packet that is not the last.
    package mutating func next(in datagram: RawSpan) throws(RTPError) -> (header: RTCPHeader, range: Range<Int>)? {
        if offset == 0 && datagram.byteCount == 0 {
            throw RTPError(.truncated, "empty RTCP datagram")
        }
        guard offset < datagram.byteCount else { return nil }
        if sawPadding {
            throw RTPError(.badRTCPPacket, "RTCP packet with padding is not the last of its compound (RFC 3550 §6.4.1)")
        }
        let h = try RTCPHeader(parsing: datagram.extracting(droppingFirst: offset))
        let range = offset..<(offset + h.packetSize)
        offset += h.packetSize
        sawPadding = h.padding
        return (h, range)
    }
}

extension RTCPHeader {
    /// Where the packet's content lies in `bytes` (after the 4-byte header and before any
    /// padding), after checking the padding count (RFC 3550 §6.4.1). `bytes` is exactly one packet.
    static func body(of bytes: RawSpan, header h: RTCPHeader) throws(RTPError) -> Range<Int> {
        var end = bytes.byteCount
        if h.padding {
            let pad = Int(bytes.u8(bytes.byteCount - 1))
            guard pad > 0 && pad <= bytes.byteCount - 4 else {
                throw RTPError(
                    .badRTCPLength, "RTCP padding count \(pad) is zero or exceeds the \(bytes.byteCount - 4)-byte packet body")
            }
            end -= pad
        }
        return 4..<end
    }

    /// Parses the header of a packet that must be of `type` (and FMT `fmt` if given) and returns
    /// the header with where its body lies in `bytes` (`bytes.extracting(range)`). Throws
    /// `wrongPacketType` otherwise.
    static func expect(
        _ bytes: RawSpan, _ type: RTCPPacketType, fmt: UInt8? = nil,
        minBody: Int, what: String
    ) throws(RTPError) -> (RTCPHeader, Range<Int>) {
        let h = try RTCPHeader(parsing: bytes)
        guard h.packetType == type, fmt == nil || h.count == fmt else {
            throw RTPError(.wrongPacketType, "RTCP packet type \(h.packetType.rawValue) FMT \(h.count) is not a \(what)")
        }
        let body = try Self.body(of: bytes.extracting(0..<h.packetSize), header: h)
        guard body.count >= minBody else {
            throw RTPError(.badRTCPLength, "RTCP \(what) body of \(body.count) bytes is shorter than \(minBody)")
        }
        return (h, body)
    }
}
