/// One parsed RTCP packet of any type this layer understands; others are kept as raw bytes.
/// Thread rule: a value type. Cost: parsing allocates (RTCP is a control path, a few per second).
public enum RTCPPacket: Sendable, Equatable {
    case senderReport(RTCPSenderReport)
    case receiverReport(RTCPReceiverReport)
    case sourceDescription(RTCPSourceDescription)
    case goodbye(RTCPGoodbye)
    case genericNack(RTCPGenericNack)
    case pictureLossIndication(RTCPPictureLossIndication)
    case fullIntraRequest(RTCPFullIntraRequest)
    case receiverEstimatedMaxBitrate(RTCPReceiverEstimatedMaxBitrate)
    case transportFeedback(RTCPTransportFeedback)
    /// A packet of another type or FMT (APP, SLI, TMMBR...): header and a copy of its bytes.
    case other(header: RTCPHeader, bytes: [UInt8])

    /// Parses one packet from exactly its bytes (as `RTCPCompoundIterator` finds them); errors as
    /// the compound's `parse`.
    public init(parsing bytes: RawSpan) throws(RTPError) {
        let h = try RTCPHeader(parsing: bytes)
        switch (h.packetType, h.count) {
        case (.senderReport, _): self = .senderReport(try RTCPSenderReport(parsing: bytes))
        case (.receiverReport, _): self = .receiverReport(try RTCPReceiverReport(parsing: bytes))
        case (.sourceDescription, _): self = .sourceDescription(try RTCPSourceDescription(parsing: bytes))
        case (.goodbye, _): self = .goodbye(try RTCPGoodbye(parsing: bytes))
        case (.transportFeedback, 1): self = .genericNack(try RTCPGenericNack(parsing: bytes))
        case (.transportFeedback, 15): self = .transportFeedback(try RTCPTransportFeedback(parsing: bytes))
        case (.payloadFeedback, 1): self = .pictureLossIndication(try RTCPPictureLossIndication(parsing: bytes))
        case (.payloadFeedback, 4): self = .fullIntraRequest(try RTCPFullIntraRequest(parsing: bytes))
        case (.payloadFeedback, 15) where RTCPReceiverEstimatedMaxBitrate.isREMB(bytes):
            self = .receiverEstimatedMaxBitrate(try RTCPReceiverEstimatedMaxBitrate(parsing: bytes))
        default:
            self = .other(header: h, bytes: bytes.array(0, h.packetSize))
        }
    }

    /// Bytes `marshal(into:)` writes.
    public var marshalSize: Int {
        switch self {
        case .senderReport(let p): p.marshalSize
        case .receiverReport(let p): p.marshalSize
        case .sourceDescription(let p): p.marshalSize
        case .goodbye(let p): p.marshalSize
        case .genericNack(let p): p.marshalSize
        case .pictureLossIndication(let p): p.marshalSize
        case .fullIntraRequest(let p): p.marshalSize
        case .receiverEstimatedMaxBitrate(let p): p.marshalSize
        case .transportFeedback(let p): p.marshalSize
        case .other(_, let bytes): bytes.count
        }
    }

    /// Appends the packet to `out`; returns `marshalSize`. Traps when `out` has less free capacity.
    @discardableResult
    public func marshal(into out: inout OutputRawSpan) -> Int {
        switch self {
        case .senderReport(let p): return p.marshal(into: &out)
        case .receiverReport(let p): return p.marshal(into: &out)
        case .sourceDescription(let p): return p.marshal(into: &out)
        case .goodbye(let p): return p.marshal(into: &out)
        case .genericNack(let p): return p.marshal(into: &out)
        case .pictureLossIndication(let p): return p.marshal(into: &out)
        case .fullIntraRequest(let p): return p.marshal(into: &out)
        case .receiverEstimatedMaxBitrate(let p): return p.marshal(into: &out)
        case .transportFeedback(let p): return p.marshal(into: &out)
        case .other(_, let bytes):
            out.appendBytes(bytes.span.bytes)
            return bytes.count
        }
    }
}

/// Compound RTCP packets (RFC 3550 §6.1): several RTCP packets in one datagram.
/// Thread rule: stateless. Cost: `parse` allocates one array; `marshal` writes in place.
public enum RTCPCompound {
    /// Parses every packet of a datagram, validating each length (`RTCPCompoundIterator`) and
    /// each packet's content. With `requireReportFirst`, also enforces RFC 3550 §6.1 (the
    /// first packet is an SR or RR); RFC 5506 reduced-size RTCP relaxes that, so it is off by default.
    public static func parse(_ datagram: RawSpan, requireReportFirst: Bool = false) throws(RTPError) -> [RTCPPacket] {
        var it = RTCPCompoundIterator()
        var out: [RTCPPacket] = []
        while let (h, range) = try it.next(in: datagram) {
            if requireReportFirst && out.isEmpty && h.packetType != .senderReport && h.packetType != .receiverReport {
                throw RTPError(
                    .badRTCPPacket, "compound RTCP starts with packet type \(h.packetType.rawValue), not SR or RR (RFC 3550 §6.1)"
                )
            }
            out.append(try RTCPPacket(parsing: datagram.extracting(range)))
        }
        return out
    }

    /// Appends the packets back to back to `out`; returns the bytes appended. Traps when `out` has
    /// less free capacity than `marshalSize(packets)`.
    @discardableResult
    public static func marshal(_ packets: [RTCPPacket], into out: inout OutputRawSpan) -> Int {
        precondition(out.freeCapacity >= marshalSize(packets), "buffer too small for compound RTCP")
        var at = 0
        for p in packets { at += p.marshal(into: &out) }
        return at
    }

    /// Bytes `marshal(_:into:)` writes.
    public static func marshalSize(_ packets: [RTCPPacket]) -> Int { packets.reduce(0) { $0 + $1.marshalSize } }

    /// Convenience: the datagram as a new array (allocates; for tests and control paths).
    public static func bytes(_ packets: [RTCPPacket]) -> [UInt8] {
        var out: [UInt8] = []
        out.append(capacity: marshalSize(packets)) { marshal(packets, into: &$0) }
        return out
    }
}
