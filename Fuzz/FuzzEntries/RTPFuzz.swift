import MediaCore

extension FuzzEntries {
    /// RTP packet and RFC 8285 header extensions (RFC 3550 §5.1, §5.3.1): parse, read every
    /// element through the typed accessors, re-marshal and parse again to the same packet.
    @Sendable public static func rtp(_ data: UnsafeRawBufferPointer) {
        let bytes = data.bytes
        guard let packet = try? RTPPacket(parsing: bytes) else { return }
        fuzzRequire(
            packet.headerSize + packet.payloadSize + packet.paddingSize == data.count,
            "RTP header \(packet.headerSize) + payload \(packet.payloadSize) + padding \(packet.paddingSize) != \(data.count)")
        let ext = packet.header.extensions
        for id in ext.elementIDs {
            let element = ext.data(id: id)
            fuzzRequire(element?.count == ext.length(id: id), "extension \(id) data and length disagree")
            _ = ext.audioLevel(id: id)
            _ = ext.absSendTime(id: id)
            _ = ext.transportSequenceNumber(id: id)
            _ = ext.bigEndianValue(id: id, length: 3)
            _ = ext.byte(id: id, at: 0)
        }
        if let profile = packet.extensionProfile {
            _ = try? RTPHeaderExtensions(profile: profile, body: bytes.extracting(packet.extensionRange))
        }
        let size = RTPPacket.marshalSize(header: packet.header, payloadSize: packet.payloadSize, paddingSize: packet.paddingSize)
        var out = [UInt8](repeating: 0, count: size)
        let n = out.withUnsafeMutableBytes { o in
            var span = OutputRawSpan(buffer: o, initializedCount: 0)
            let n = RTPPacket.marshal(
                header: packet.header, payload: bytes.extracting(packet.payloadRange), paddingSize: packet.paddingSize,
                into: &span)
            fuzzRequire(span.byteCount == n, "RTP marshal reported \(n) bytes, the span holds \(span.byteCount)")
            return n
        }
        fuzzRequire(n == size, "RTP marshal wrote \(n) bytes, marshalSize said \(size)")
        let again: RTPPacket
        do { again = try RTPPacket(parsing: out.span.bytes) } catch {
            fuzzRequire(false, "re-marshalled RTP packet does not parse: \(error)"); return
        }
        fuzzRequire(again.header == packet.header, "RTP header changed through marshal: \(packet.header) -> \(again.header)")
        fuzzRequire(again.paddingSize == packet.paddingSize, "RTP padding changed through marshal")
        fuzzRequire(
            out[again.payloadRange].elementsEqual(data[packet.payloadRange]), "RTP payload changed through marshal")
    }
}
