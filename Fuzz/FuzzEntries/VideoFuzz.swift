import MediaCore

extension FuzzEntries {
    /// VP8 payload descriptor and payload header (RFC 7741 §4.2-§4.3) and frame assembly: the
    /// input is a sequence of RTP packets (`fuzzRecords`) pushed through one `VP8Depacketizer`.
    /// A descriptor re-marshals to one that parses back equal; frames respect the capacity.
    @Sendable public static func vp8(_ data: UnsafeRawBufferPointer) {
        // Small capacity on odd first bytes, so the over-capacity path is reached too.
        let capacity = data.first.map { $0 & 1 == 1 ? 1500 : 1 << 16 } ?? 1 << 16
        let depacketizer = VP8Depacketizer(maxFrameSize: capacity)
        for record in fuzzRecords(data.count > 0 ? UnsafeRawBufferPointer(rebasing: data[1...]) : data) {
            guard let packet = try? RTPPacket(parsing: record.bytes) else { continue }
            let payload = record.bytes.extracting(packet.payloadRange)
            if let (d, size) = try? VP8PayloadDescriptor.parse(payload) {
                fuzzRequire(size < packet.payloadSize, "VP8 descriptor of \(size) bytes leaves no data")
                _ = try? VP8PayloadHeader(parsing: payload.extracting(size...))
                var out = [UInt8](repeating: 0, count: 16)
                let n = out.withUnsafeMutableBytes { $0.appending { d.marshal(into: &$0) } }
                out[n] = 0  // one byte of VP8 data so the descriptor parses
                let again = out.withUnsafeBytes {
                    try? VP8PayloadDescriptor.parse(UnsafeRawBufferPointer(rebasing: $0[..<(n + 1)]).bytes)
                }
                fuzzRequire(
                    again?.0 == d && again?.1 == n, "VP8 descriptor changed through marshal: \(d) -> \(String(describing: again))"
                )
            }
            guard let result = try? depacketizer.push(packet, in: record.bytes) else { continue }
            if let frame = result.frame {
                fuzzRequire(frame.data.count <= capacity, "VP8 frame of \(frame.data.count) bytes exceeds capacity \(capacity)")
                fuzzRequire(frame.packetCount >= 1, "VP8 frame of no packet")
                _ = try? VP8PayloadHeader(parsing: frame.data.bytes)
            }
        }
    }

    /// VP9 payload descriptor and scalability structure (RFC 9628 §4.2, §4.2.1) and frame
    /// assembly through one `VP9Depacketizer`, input as for `vp8`.
    @Sendable public static func vp9(_ data: UnsafeRawBufferPointer) {
        let capacity = data.first.map { $0 & 1 == 1 ? 1500 : 1 << 16 } ?? 1 << 16
        let depacketizer = VP9Depacketizer(maxFrameSize: capacity)
        for record in fuzzRecords(data.count > 0 ? UnsafeRawBufferPointer(rebasing: data[1...]) : data) {
            _ = try? VP9ScalabilityStructure.parse(record.bytes)
            guard let packet = try? RTPPacket(parsing: record.bytes) else { continue }
            if let (d, size) = try? VP9PayloadDescriptor.parse(record.bytes.extracting(packet.payloadRange)) {
                fuzzRequire(
                    size < packet.payloadSize || (d.scalabilityStructure != nil && !d.startOfFrame),
                    "VP9 descriptor of \(size) bytes leaves no data")
                for i in 0..<d.referenceCount { _ = d.referenceDiff(at: i) }
                if let ss = d.scalabilityStructure {
                    for i in 0..<ss.spatialLayers { _ = ss.width(layer: i); _ = ss.height(layer: i) }
                }
                var out = [UInt8](repeating: 0, count: 64)
                let n = out.withUnsafeMutableBytes { $0.appending { d.marshal(into: &$0) } }
                out[n] = 0
                let again = out.withUnsafeBytes {
                    try? VP9PayloadDescriptor.parse(UnsafeRawBufferPointer(rebasing: $0[..<(n + 1)]).bytes)
                }
                var expected = d  // the picture group description is parsed but not written back
                expected.scalabilityStructure?.pictureGroupSize = 0
                fuzzRequire(
                    again?.0 == expected && again?.1 == n,
                    "VP9 descriptor changed through marshal: \(d) -> \(String(describing: again))")
            }
            guard let result = try? depacketizer.push(packet, in: record.bytes) else { continue }
            if let frame = result.frame {
                fuzzRequire(frame.data.count <= capacity, "VP9 frame of \(frame.data.count) bytes exceeds capacity \(capacity)")
            }
        }
    }
}
