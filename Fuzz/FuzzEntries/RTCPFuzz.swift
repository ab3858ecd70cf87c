import MediaCore

extension FuzzEntries {
    /// Compound RTCP (RFC 3550 §6.1) and each packet type's own parser on every sub-packet;
    /// a parsed compound re-marshals to bytes that parse back to the same packets.
    @Sendable public static func rtcp(_ data: UnsafeRawBufferPointer) {
        let datagram = data.bytes
        _ = try? RTCPCompound.parse(datagram, requireReportFirst: true)
        var iterator = RTCPCompoundIterator()
        var seen = 0
        while seen < 64, let next = try? iterator.next(in: datagram) {
            seen += 1
            let bytes = datagram.extracting(next.range)
            _ = try? RTCPPacket(parsing: bytes)
            _ = try? RTCPSenderReport(parsing: bytes)
            _ = try? RTCPReceiverReport(parsing: bytes)
            _ = try? RTCPSourceDescription(parsing: bytes)
            _ = try? RTCPGoodbye(parsing: bytes)
            _ = try? RTCPGenericNack(parsing: bytes)
            _ = try? RTCPPictureLossIndication(parsing: bytes)
            _ = try? RTCPFullIntraRequest(parsing: bytes)
            _ = try? RTCPReceiverEstimatedMaxBitrate(parsing: bytes)
        }
        guard let packets = try? RTCPCompound.parse(datagram) else { return }
        for case .genericNack(let nack) in packets { _ = nack.lostSequenceNumbers }
        let size = RTCPCompound.marshalSize(packets)
        let bytes = RTCPCompound.bytes(packets)
        fuzzRequire(bytes.count == size, "RTCP bytes \(bytes.count) != marshalSize \(size)")
        let again: [RTCPPacket]
        do { again = try RTCPCompound.parse(bytes.span.bytes) } catch {
            fuzzRequire(false, "re-marshalled RTCP does not parse: \(error)"); return
        }
        fuzzRequire(again == packets, "RTCP changed through marshal: \(packets) -> \(again)")
    }
}
