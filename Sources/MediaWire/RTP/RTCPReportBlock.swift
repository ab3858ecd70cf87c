/// One reception report block of an SR or RR (RFC 3550 §6.4.1): what a receiver saw of one source.
/// Thread rule: a value type. Cost: 24 bytes on the wire.
public struct RTCPReportBlock: Sendable, Equatable {
    /// SSRC of the source this block reports on.
    public var ssrc: UInt32
    /// RFC 3550 §6.4.1 "fraction lost": packets lost since the last report / expected, in 1/256.
    public var fractionLost: UInt8
    /// RFC 3550 §6.4.1 "cumulative number of packets lost": 24-bit signed (negative with duplicates).
    public var cumulativeLost: Int32
    /// RFC 3550 §6.4.1 "extended highest sequence number received" (cycles << 16 | seq).
    public var extendedHighestSequence: UInt32
    /// RFC 3550 §6.4.1 "interarrival jitter" in RTP timestamp units.
    public var jitter: UInt32
    /// RFC 3550 §6.4.1 "LSR": middle 32 bits of the last SR's NTP time, 0 if none.
    public var lastSenderReport: UInt32
    /// RFC 3550 §6.4.1 "DLSR": delay since that SR in 1/65536 s, 0 if none.
    public var delaySinceLastSenderReport: UInt32

    /// Bytes of one block on the wire.
    public static let size = 24

    /// Makes a block. `cumulativeLost` is clamped to the 24-bit signed range
    /// (RFC 3550 §6.4.1 says it saturates).
    public init(
        ssrc: UInt32, fractionLost: UInt8 = 0, cumulativeLost: Int32 = 0, extendedHighestSequence: UInt32 = 0,
        jitter: UInt32 = 0, lastSenderReport: UInt32 = 0, delaySinceLastSenderReport: UInt32 = 0
    ) {
        self.ssrc = ssrc
        self.fractionLost = fractionLost
        self.cumulativeLost = max(-0x80_0000, min(0x7F_FFFF, cumulativeLost))
        self.extendedHighestSequence = extendedHighestSequence
        self.jitter = jitter
        self.lastSenderReport = lastSenderReport
        self.delaySinceLastSenderReport = delaySinceLastSenderReport
    }

    func marshal(into out: inout OutputRawSpan) {
        out.appendU32(ssrc)
        out.appendU8(fractionLost)
        out.appendU24(UInt32(bitPattern: cumulativeLost) & 0xFF_FFFF)
        out.appendU32(extendedHighestSequence)
        out.appendU32(jitter)
        out.appendU32(lastSenderReport)
        out.appendU32(delaySinceLastSenderReport)
    }

    init(parsing b: RawSpan, at o: Int) {
        let raw = b.u24(o + 5)
        // Sign-extend the 24-bit two's complement value.
        let lost = Int32(bitPattern: raw << 8) >> 8
        self.init(
            ssrc: b.u32(o), fractionLost: b.u8(o + 4), cumulativeLost: lost,
            extendedHighestSequence: b.u32(o + 8), jitter: b.u32(o + 12),
            lastSenderReport: b.u32(o + 16), delaySinceLastSenderReport: b.u32(o + 20))
    }

    /// Parses `count` blocks from `body` starting at `offset`; throws `badRTCPLength` when they
    /// run past the body.
    static func parseList(_ body: RawSpan, at offset: Int, count: Int, what: String) throws(RTPError)
        -> [RTCPReportBlock]
    {
        guard offset + count * size <= body.byteCount else {
            throw RTPError(
                .badRTCPLength, "RTCP \(what) announces \(count) report blocks but its body has \(body.byteCount) bytes")
        }
        var blocks: [RTCPReportBlock] = []
        blocks.reserveCapacity(count)
        for i in 0..<count { blocks.append(RTCPReportBlock(parsing: body, at: offset + i * size)) }
        return blocks
    }
}
