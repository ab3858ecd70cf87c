import MediaCore

extension FuzzEntries {
    /// RTP packet and RFC 8285 header extensions (RFC 3550 §5.1, §5.3.1): parse, read every
    /// element through the typed accessors, re-marshal and parse again to the same packet.
    @Sendable public static func rtp(_ data: UnsafeRawBufferPointer) {
        guard let packet = try? RTPPacket(parsing: data) else { return }
        fuzzRequire(
            packet.headerSize + packet.payload.count + packet.paddingSize == data.count,
            "RTP header \(packet.headerSize) + payload \(packet.payload.count) + padding \(packet.paddingSize) != \(data.count)")
        let ext = packet.header.extensions
        for id in ext.elementIDs {
            let bytes = ext.data(id: id)
            fuzzRequire(bytes?.count == ext.length(id: id), "extension \(id) data and length disagree")
            _ = ext.audioLevel(id: id)
            _ = ext.absSendTime(id: id)
            _ = ext.transportSequenceNumber(id: id)
            _ = ext.bigEndianValue(id: id, length: 3)
            _ = ext.byte(id: id, at: 0)
        }
        if let profile = packet.extensionProfile {
            _ = try? RTPHeaderExtensions(profile: profile, body: packet.extensionBody)
        }
        let size = RTPPacket.marshalSize(
            header: packet.header, payloadSize: packet.payload.count,
            paddingSize: packet.paddingSize)
        var out = [UInt8](repeating: 0, count: size)
        out.withUnsafeMutableBytes { o in
            let n = RTPPacket.marshal(
                header: packet.header, payload: packet.payload,
                paddingSize: packet.paddingSize, into: o)
            fuzzRequire(n == size, "RTP marshal wrote \(n) bytes, marshalSize said \(size)")
            let again: RTPPacket
            do { again = try RTPPacket(parsing: UnsafeRawBufferPointer(o)) } catch {
                fuzzRequire(false, "re-marshalled RTP packet does not parse: \(error)"); return
            }
            fuzzRequire(again.header == packet.header, "RTP header changed through marshal: \(packet.header) -> \(again.header)")
            fuzzRequire(again.paddingSize == packet.paddingSize, "RTP padding changed through marshal")
            fuzzRequire(again.payload.elementsEqual(packet.payload), "RTP payload changed through marshal")
        }
    }
}
