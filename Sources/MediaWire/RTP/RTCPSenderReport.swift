import MediaBase

/// An RTCP sender report (RFC 3550 §6.4.1, PT 200): sender info plus up to 31 report blocks.
/// Profile-specific extensions after the blocks are skipped on parse.
/// Thread rule: a value type. Cost: parse allocates the block array (control path).
public struct RTCPSenderReport: Sendable, Equatable {
    /// SSRC of the sender.
    public var ssrc: UInt32
    /// RFC 3550 §6.4.1 "NTP timestamp": wall clock when the report was sent.
    public var ntpTime: NTPTime
    /// RFC 3550 §6.4.1 "RTP timestamp": the same instant on the media clock.
    public var rtpTime: UInt32
    /// RFC 3550 §6.4.1 "sender's packet count".
    public var packetCount: UInt32
    /// RFC 3550 §6.4.1 "sender's octet count" (payload bytes).
    public var octetCount: UInt32
    /// Reception report blocks, at most 31.
    public var reports: [RTCPReportBlock]

    /// Makes a report.
    public init(
        ssrc: UInt32, ntpTime: NTPTime, rtpTime: UInt32, packetCount: UInt32, octetCount: UInt32,
        reports: [RTCPReportBlock] = []
    ) {
        self.ssrc = ssrc; self.ntpTime = ntpTime; self.rtpTime = rtpTime
        self.packetCount = packetCount; self.octetCount = octetCount; self.reports = reports
    }

    /// Bytes on the wire: 28 + 24 per block.
    public var marshalSize: Int { 28 + RTCPReportBlock.size * reports.count }

    /// Writes the packet; returns `marshalSize`. Traps on a short buffer or over 31 blocks.
    @discardableResult
    package func marshal(into out: inout OutputRawSpan) -> Int {
        precondition(reports.count < 32 && out.freeCapacity >= marshalSize)
        RTCPHeader(count: UInt8(reports.count), packetType: .senderReport, packetSize: marshalSize).marshal(into: &out)
        out.appendU32(ssrc); out.appendU64(ntpTime.rawValue); out.appendU32(rtpTime)
        out.appendU32(packetCount); out.appendU32(octetCount)
        for r in reports { r.marshal(into: &out) }
        return marshalSize
    }

    /// Parses one SR packet at the start of `bytes`. Throws `wrongPacketType` for another type
    /// and `badRTCPLength` when the blocks do not fit.
    package init(parsing bytes: RawSpan) throws(RTPError) {
        let (h, range) = try RTCPHeader.expect(bytes, .senderReport, minBody: 24, what: "sender report")
        let body = bytes.extracting(range)
        ssrc = body.u32(0); ntpTime = NTPTime(rawValue: body.u64(4)); rtpTime = body.u32(12)
        packetCount = body.u32(16); octetCount = body.u32(20)
        reports = try RTCPReportBlock.parseList(body, at: 24, count: Int(h.count), what: "sender report")
    }
}

/// An RTCP receiver report (RFC 3550 §6.4.2, PT 201): the reporter's SSRC and up to 31 blocks.
/// Thread rule: a value type. Cost: parse allocates the block array (control path).
public struct RTCPReceiverReport: Sendable, Equatable {
    /// SSRC of the reporter.
    public var ssrc: UInt32
    /// Reception report blocks, at most 31.
    public var reports: [RTCPReportBlock]

    /// Makes a report.
    public init(ssrc: UInt32, reports: [RTCPReportBlock] = []) { self.ssrc = ssrc; self.reports = reports }

    /// Bytes on the wire: 8 + 24 per block.
    public var marshalSize: Int { 8 + RTCPReportBlock.size * reports.count }

    /// Writes the packet; returns `marshalSize`.
    @discardableResult
    package func marshal(into out: inout OutputRawSpan) -> Int {
        precondition(reports.count < 32 && out.freeCapacity >= marshalSize)
        RTCPHeader(count: UInt8(reports.count), packetType: .receiverReport, packetSize: marshalSize).marshal(into: &out)
        out.appendU32(ssrc)
        for r in reports { r.marshal(into: &out) }
        return marshalSize
    }

    /// Parses one RR packet at the start of `bytes`.
    package init(parsing bytes: RawSpan) throws(RTPError) {
        let (h, range) = try RTCPHeader.expect(bytes, .receiverReport, minBody: 4, what: "receiver report")
        let body = bytes.extracting(range)
        ssrc = body.u32(0)
        reports = try RTCPReportBlock.parseList(body, at: 4, count: Int(h.count), what: "receiver report")
    }
}
