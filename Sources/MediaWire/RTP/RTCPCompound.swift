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

    /// Parses one packet (exactly the bytes of one packet, as `RTCPCompoundIterator` yields).
    package init(parsing bytes: UnsafeRawBufferPointer) throws(RTPError) {
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
            self = .other(header: h, bytes: Array(bytes.view(0, h.packetSize)))
        }
    }

    /// Parses one packet from exactly its bytes; errors as the compound's `parse`.
    public init(parsing bytes: RawSpan) throws(RTPError) {
        self = try bytes.withUnsafeBytes { (b) throws(RTPError) in try RTCPPacket(parsing: b) }
    }

    /// Appends the packet to `out`; returns `marshalSize`. Traps when `out` has less free capacity.
    @discardableResult
    public func marshal(into out: inout OutputRawSpan) -> Int { out.appendWriting { marshal(into: $0) } }

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

    /// Writes the packet; returns `marshalSize`.
    @discardableResult
    package func marshal(into b: UnsafeMutableRawBufferPointer) -> Int {
        switch self {
        case .senderReport(let p): p.marshal(into: b)
        case .receiverReport(let p): p.marshal(into: b)
        case .sourceDescription(let p): p.marshal(into: b)
        case .goodbye(let p): p.marshal(into: b)
        case .genericNack(let p): p.marshal(into: b)
        case .pictureLossIndication(let p): p.marshal(into: b)
        case .fullIntraRequest(let p): p.marshal(into: b)
        case .receiverEstimatedMaxBitrate(let p): p.marshal(into: b)
        case .transportFeedback(let p): p.marshal(into: b)
        case .other(_, let bytes):
            bytes.withUnsafeBytes {
                b.copy($0, to: 0); return $0.count
            }
        }
    }
}

/// Compound RTCP packets (RFC 3550 §6.1): several RTCP packets in one datagram.
/// Thread rule: stateless. Cost: `parse` allocates one array; `marshal` writes in place.
public enum RTCPCompound {
    /// Parses every packet of a datagram, validating each length (`RTCPCompoundIterator`) and
    /// each packet's content. With `requireReportFirst`, also enforces RFC 3550 §6.1 (the
    /// first packet is an SR or RR); RFC 5506 reduced-size RTCP relaxes that, so it is off by default.
    package static func parse(_ datagram: UnsafeRawBufferPointer, requireReportFirst: Bool = false) throws(RTPError)
        -> [RTCPPacket]
    {
        var it = RTCPCompoundIterator(datagram)
        var out: [RTCPPacket] = []
        while let (h, bytes) = try it.next() {
            if requireReportFirst && out.isEmpty && h.packetType != .senderReport && h.packetType != .receiverReport {
                throw RTPError(
                    .badRTCPPacket, "compound RTCP starts with packet type \(h.packetType.rawValue), not SR or RR (RFC 3550 §6.1)"
                )
            }
            out.append(try RTCPPacket(parsing: bytes))
        }
        return out
    }

    /// Parses every packet of `datagram`; as the raw-buffer form (each length and each packet's
    /// content validated, RFC 3550 §6.1 order with `requireReportFirst`).
    public static func parse(_ datagram: RawSpan, requireReportFirst: Bool = false) throws(RTPError) -> [RTCPPacket] {
        try datagram.withUnsafeBytes { (b) throws(RTPError) in try parse(b, requireReportFirst: requireReportFirst) }
    }

    /// Appends the packets back to back to `out`; returns the bytes appended. Traps when `out` has
    /// less free capacity than `marshalSize(packets)`.
    @discardableResult
    public static func marshal(_ packets: [RTCPPacket], into out: inout OutputRawSpan) -> Int {
        out.appendWriting { marshal(packets, into: $0) }
    }

    /// Bytes `marshal(_:into:)` writes.
    public static func marshalSize(_ packets: [RTCPPacket]) -> Int { packets.reduce(0) { $0 + $1.marshalSize } }

    /// Writes the packets back to back; returns the bytes written.
    @discardableResult
    package static func marshal(_ packets: [RTCPPacket], into b: UnsafeMutableRawBufferPointer) -> Int {
        precondition(b.count >= marshalSize(packets), "buffer too small for compound RTCP")
        var at = 0
        for p in packets { at += p.marshal(into: b.tail(at)) }
        return at
    }

    /// Convenience: the datagram as a new array (allocates; for tests and control paths).
    public static func bytes(_ packets: [RTCPPacket]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: marshalSize(packets))
        out.withUnsafeMutableBytes { _ = marshal(packets, into: $0) }
        return out
    }
}
