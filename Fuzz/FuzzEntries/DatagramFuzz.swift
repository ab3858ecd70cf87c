import MediaCore

extension FuzzEntries {
    /// The receive path's first step: classify a datagram (RFC 7983 §7, RFC 5761 §4), then parse
    /// it as what it was classified as. A packet that parses as RTP with a payload type outside
    /// 64-95 must have been classified as RTP.
    @Sendable public static func datagram(_ data: UnsafeRawBufferPointer) {
        let kind = RTPDemultiplexer.classify(data.bytes)
        switch kind {
        case .rtp:
            if let p = try? RTPPacket(parsing: data.bytes) {
                fuzzRequire(!(64...95).contains(p.header.payloadType), "RTP with PT \(p.header.payloadType) classified as RTP")
            }
        case .rtcp:
            _ = try? RTCPCompound.parse(data.bytes, requireReportFirst: true)
        default:
            break
        }
        if let p = try? RTPPacket(parsing: data.bytes), !(64...95).contains(p.header.payloadType) {
            fuzzRequire(kind == .rtp, "RTP packet with PT \(p.header.payloadType) classified as \(kind)")
        }
    }
}
