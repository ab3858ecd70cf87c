/// REMB, receiver estimated maximum bitrate (draft-alvestrand-rmcat-remb-03 §2.2, an RTCP
/// application-layer feedback message: PT 206 FMT 15, FCI "REMB", bitrate as 6-bit exponent and
/// 18-bit mantissa, then the SSRCs it applies to).
/// Thread rule: a value type. Cost: parse allocates the SSRC array (control path).
public struct RTCPReceiverEstimatedMaxBitrate: Sendable, Equatable {
    /// SSRC of the packet sender.
    public var senderSSRC: UInt32
    /// Estimated total bitrate in bits per second (rounded down to what mantissa/exponent hold).
    public var bitrate: UInt64
    /// SSRCs of the media streams the estimate covers (at most 255).
    public var ssrcs: [UInt32]

    /// Makes a REMB.
    public init(senderSSRC: UInt32, bitrate: UInt64, ssrcs: [UInt32]) {
        self.senderSSRC = senderSSRC; self.bitrate = bitrate; self.ssrcs = ssrcs
    }

    /// The 6-bit exponent and 18-bit mantissa for `bitrate` (largest representable not above it).
    public static func encode(bitrate: UInt64) -> (exponent: UInt8, mantissa: UInt32) {
        var e: UInt8 = 0
        var m = bitrate
        while m >= 1 << 18 && e < 63 { m >>= 1; e += 1 }
        if m >= 1 << 18 { m = (1 << 18) - 1 }
        return (e, UInt32(m))
    }

    /// Bytes on the wire: 20 + 4 per SSRC.
    public var marshalSize: Int { 20 + 4 * ssrcs.count }

    /// Writes the packet; returns `marshalSize`.
    @discardableResult
    package func marshal(into out: inout OutputRawSpan) -> Int {
        precondition(out.freeCapacity >= marshalSize && ssrcs.count < 256)
        RTCPHeader(count: 15, packetType: .payloadFeedback, packetSize: marshalSize).marshal(into: &out)
        out.appendU32(senderSSRC); out.appendU32(0)
        out.appendU32(0x5245_4D42)  // "REMB"
        let (e, m) = Self.encode(bitrate: bitrate)
        out.appendU8(UInt8(ssrcs.count))
        out.appendU24(UInt32(e) << 18 | m)
        for s in ssrcs { out.appendU32(s) }
        return marshalSize
    }

    /// Whether a PSFB FMT 15 body carries the "REMB" identifier (other AFB messages exist).
    static func isREMB(_ bytes: RawSpan) -> Bool {
        bytes.byteCount >= 16 && bytes.u32(12) == 0x5245_4D42
    }

    /// Parses one REMB. Throws `wrongPacketType` (including an AFB that is not "REMB") or
    /// `badRTCPLength` when the SSRC count does not match the length.
    package init(parsing bytes: RawSpan) throws(RTPError) {
        let (_, range) = try RTCPHeader.expect(bytes, .payloadFeedback, fmt: 15, minBody: 16, what: "REMB")
        let body = bytes.extracting(range)
        guard body.u8(8) == 0x52, body.u8(9) == 0x45, body.u8(10) == 0x4D, body.u8(11) == 0x42 else {
            throw RTPError(.wrongPacketType, "application-layer feedback is not REMB (no \"REMB\" identifier)")
        }
        let n = Int(body.u8(12))
        guard 16 + 4 * n <= body.byteCount else {
            throw RTPError(.badRTCPLength, "REMB announces \(n) SSRCs but its body has \(body.byteCount) bytes")
        }
        senderSSRC = body.u32(0)
        let v = body.u24(13)
        bitrate = UInt64(v & 0x3FFFF) << UInt64(v >> 18)
        ssrcs = (0..<n).map { body.u32(16 + 4 * $0) }
    }
}
