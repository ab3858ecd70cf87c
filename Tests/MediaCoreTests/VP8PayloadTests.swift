import MediaCore
import Testing

/// Writes every packet of `payloads`, cut from `frame`, as a full RTP packet with consecutive
/// sequence numbers, through the span API (each packet appended after a few bytes already held,
/// which must stay as they are).
func writeRTPPackets(
    _ payloads: some RTPFramePayloads, of frame: [UInt8], header: inout RTPHeader, sequencer: inout RTPSequencer,
    mtu: Int = 1200
) -> [[UInt8]] {
    var out: [[UInt8]] = []
    var buf = [UInt8](repeating: 0, count: mtu + 64)
    for i in 0..<payloads.count {
        header.sequenceNumber = sequencer.next()
        buf[0] = 0xEE; buf[1] = 0xEE
        let (n, held) = buf.withUnsafeMutableBytes { raw in
            var span = OutputRawSpan(buffer: raw, initializedCount: 2)
            let n = payloads.writePacket(at: i, header: &header, of: frame.span.bytes, into: &span)
            return (n, span.byteCount)
        }
        #expect(held == 2 + n && buf[0] == 0xEE && buf[1] == 0xEE)
        #expect(n - header.marshalSize == payloads.payloadSize(at: i))
        out.append(Array(buf[2..<(2 + n)]))
    }
    return out
}

/// Deterministic pseudo-random bytes.
func rtpTestBytes(_ n: Int, seed: UInt64) -> [UInt8] {
    var x = seed | 1
    return (0..<n).map { _ in
        x ^= x << 13; x ^= x >> 7; x ^= x << 17; return UInt8(truncatingIfNeeded: x)
    }
}

func vp8DescriptorBytes(_ d: VP8PayloadDescriptor) -> [UInt8] {
    var b = [UInt8](repeating: 0, count: d.marshalSize)
    _ = b.withUnsafeMutableBytes { $0.appending { d.marshal(into: &$0) } }
    return b
}

func parseVP8Descriptor(_ b: [UInt8]) throws -> (VP8PayloadDescriptor, Int) {
    try VP8PayloadDescriptor.parse(b.span.bytes)
}

@Suite struct VP8PayloadTests {
    @Test func descriptorKnownBytes() throws {
        let d = VP8PayloadDescriptor(startOfPartition: true, pictureID: 0x1234)
        #expect(vp8DescriptorBytes(d) == [0x90, 0x80, 0x92, 0x34])
        let t = VP8PayloadDescriptor(
            nonReference: true, startOfPartition: false, partitionIndex: 3, pictureID: 0x7FFF,
            tl0PicIdx: 5, temporalLayerID: 2, layerSync: true)
        #expect(vp8DescriptorBytes(t) == [0xA3, 0xE0, 0xFF, 0xFF, 0x05, 0xA0])
        #expect(vp8DescriptorBytes(VP8PayloadDescriptor(startOfPartition: true)) == [0x10])
        let k = VP8PayloadDescriptor(pictureID: 0x55, longPictureID: false, keyIndex: 17)
        #expect(vp8DescriptorBytes(k) == [0x80, 0x90, 0x55, 0x11])
        for x in [d, t, k] {
            let (p, n) = try parseVP8Descriptor(vp8DescriptorBytes(x) + [0x00])
            #expect(p == x)
            #expect(n == x.marshalSize)
        }
    }

    @Test func descriptorRejectsTruncation() throws {
        #expect(throws: RTPError.emptyPayload) { try parseVP8Descriptor([]) }
        for bad: [UInt8] in [
            [0x90], [0x90, 0x80], [0x90, 0x80, 0x92], [0x90, 0x80, 0x92, 0x34],
            [0x90, 0x40], [0x90, 0x20], [0x90, 0x10], [0x90, 0xF0, 0x92, 0x34, 0x01],
        ] {
            #expect(throws: RTPError.truncated, "\(bad)") { try parseVP8Descriptor(bad) }
        }
    }

    @Test func payloadHeaderReadsKeyframeSize() throws {
        // RFC 7741 §4.3 / RFC 6386 §9.1: P=0 (key), show=1, start code, 640x480.
        let key: [UInt8] = [0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A, 0x80, 0x02, 0xE0, 0x01]
        let h = try key.withUnsafeBytes { try VP8PayloadHeader(parsing: $0.bytes) }
        #expect(h.isKeyframe && h.showFrame)
        #expect(h.width == 640 && h.height == 480)
        #expect(h.firstPartitionSize == 0x10)
        let inter = try [UInt8]([0x31, 0x00, 0x00]).withUnsafeBytes { try VP8PayloadHeader(parsing: $0.bytes) }
        #expect(!inter.isKeyframe && inter.width == nil)
        #expect(throws: RTPError.badPayloadDescriptor) {
            try [UInt8]([0x10, 0x02, 0x00, 0x9D, 0x01, 0x2B, 0x80, 0x02, 0xE0, 0x01]).withUnsafeBytes {
                try VP8PayloadHeader(parsing: $0.bytes)
            }
        }
        #expect(throws: RTPError.truncated) {
            try [UInt8]([0x10, 0x02, 0x00, 0x9D]).withUnsafeBytes { try VP8PayloadHeader(parsing: $0.bytes) }
        }
    }

    static let sizes: [Int] =
        [1, 2, 3, 7, 100, 1183, 1184, 1185, 1186, 2367, 2368, 2369, 5000, 12_345, 49_999, 50_000]
        + (0..<40).map { 1 + Int(rtpTestBytes(4, seed: UInt64($0 + 9)).reduce(0) { $0 << 8 | Int($1) } % 50_000) }

    @Test(arguments: sizes)
    func packetizeThenDepacketizeRestoresFrame(size: Int) throws {
        var frame = rtpTestBytes(size, seed: UInt64(size))
        frame[0] = 0x10  // key frame P bit
        var packetizer = VP8Packetizer(pictureID: 0x7FFE)
        var header = RTPHeader(payloadType: 96, timestamp: 9000, ssrc: 0x1234)
        var seq = RTPSequencer(initial: UInt16(65535 - size % 5))  // crosses the rollover for multi-packet frames
        let depacketizer = VP8Depacketizer()
        for frameIndex in 0..<2 {
            header.timestamp &+= 3000
            let plan = packetizer.packetize(frameSize: frame.count, maxPayloadSize: header.maxPayloadSize(mtu: 1200))
            let packets = writeRTPPackets(plan, of: frame, header: &header, sequencer: &seq)
            let sizes = packets.map(\.count)
            #expect(sizes.max()! <= 1200)
            #expect(sizes.max()! - sizes.min()! <= 1, "uneven split \(sizes)")
            #expect(packets.count == (size + 1200 - 12 - 4 - 1) / (1200 - 12 - 4))
            var got: [UInt8]? = nil
            for (i, p) in packets.enumerated() {
                try withParsedRTP(p) { pkt in
                    #expect(pkt.header.marker == (i == packets.count - 1))
                    let r = try depacketizer.push(pkt, in: p.span.bytes)
                    #expect(r.incompleteFrames == 0 && r.lostPackets == 0)
                    if let f = r.frame {
                        got = Array(f.data)
                        #expect(f.isKeyframe)
                        #expect(f.packetCount == packets.count)
                        #expect(f.pictureID == (frameIndex == 0 ? 0x7FFE : 0x7FFF))
                    }
                }
            }
            #expect(got == frame)
        }
        #expect(packetizer.pictureID == 0)  // 15-bit PictureID wrapped
    }

    @Test func detectsMissingPacketsAndReportsIncompleteFrames() throws {
        let frame = rtpTestBytes(5000, seed: 3)  // 5 packets
        var packetizer = VP8Packetizer(pictureID: 1)
        var header = RTPHeader(payloadType: 96, ssrc: 1)
        var seq = RTPSequencer(initial: 100)
        var all: [[[UInt8]]] = []
        for f in 0..<4 {
            header.timestamp = UInt32(f * 3000)
            all.append(
                writeRTPPackets(
                    packetizer.packetize(frameSize: frame.count, maxPayloadSize: 1188), of: frame, header: &header,
                    sequencer: &seq))
        }
        #expect(all[0].count == 5)
        // Frame 0: lose a middle packet. Frame 1: lose its first. Frame 2: lose its last. Frame 3 intact.
        var stream = all.flatMap { $0 }
        let dropped = [2, 5, 14]
        for i in dropped.reversed() { stream.remove(at: i) }
        let d = VP8Depacketizer()
        var complete: [UInt32] = [], incomplete = 0, lost = 0
        for p in stream {
            try withParsedRTP(p) { pkt in
                let r = try d.push(pkt, in: p.span.bytes)
                incomplete += r.incompleteFrames
                lost += r.lostPackets
                if let f = r.frame { complete.append(f.timestamp); #expect(Array(f.data) == frame) }
            }
        }
        #expect(complete == [9000])
        #expect(incomplete == 3)
        #expect(lost == 3)
    }

    @Test func ignoresStaleAndDuplicatePackets() throws {
        let frame = rtpTestBytes(3000, seed: 5)
        var packetizer = VP8Packetizer()
        var header = RTPHeader(payloadType: 96, ssrc: 1)
        var seq = RTPSequencer(initial: 0)
        let packets = writeRTPPackets(
            packetizer.packetize(frameSize: frame.count, maxPayloadSize: 1188), of: frame, header: &header, sequencer: &seq)
        let d = VP8Depacketizer()
        var frames = 0
        for p in [packets[0], packets[0], packets[1], packets[0], packets[2]] {
            try withParsedRTP(p) { pkt in
                let r = try d.push(pkt, in: p.span.bytes)
                if let f = r.frame {
                    frames += 1; #expect(f.byteCount == frame.count && f.withBytes { $0.withUnsafeBytes { Array($0) } } == frame)
                }
                #expect(r.incompleteFrames == 0)
            }
        }
        #expect(frames == 1)
    }

    @Test func temporalLayersAppearInEveryPacket() throws {
        var packetizer = VP8Packetizer(pictureID: 10)
        var header = RTPHeader(payloadType: 96, ssrc: 1)
        var seq = RTPSequencer(initial: 0)
        let frame = rtpTestBytes(2500, seed: 1)
        let layer = VP8Packetizer.TemporalLayer(id: 1, layerSync: true, tl0PicIdx: 200)
        let packets = writeRTPPackets(
            packetizer.packetize(frameSize: frame.count, maxPayloadSize: 1188, temporalLayer: layer, nonReference: true),
            of: frame, header: &header, sequencer: &seq)
        for (i, p) in packets.enumerated() {
            try withParsedRTP(p) { pkt in
                let (d, _) = try VP8PayloadDescriptor.parse(p.span.bytes.extracting(pkt.payloadRange))
                #expect(
                    d
                        == VP8PayloadDescriptor(
                            nonReference: true, startOfPartition: i == 0, pictureID: 10,
                            tl0PicIdx: 200, temporalLayerID: 1, layerSync: true))
            }
        }
    }

    @Test func evenSplitNeverExceedsAndDiffersByOne() {
        for data in [0, 1, 2, 10, 999, 1000, 1001, 1999, 2000, 2001, 65_536] {
            for maxPayload in [20, 21, 100, 1001, 1188] {
                for overhead in [1, 4, 6] {
                    for extra in [0, 5] where 2 * extra < maxPayload - overhead {
                        let s = RTPEvenSplit(dataSize: data, maxPayloadSize: maxPayload, overhead: overhead, firstExtra: extra)
                        var covered = 0
                        var sizes: [Int] = []
                        for i in 0..<s.count {
                            let r = s.dataRange(at: i)
                            #expect(r.lowerBound == covered)
                            covered = r.upperBound
                            #expect(s.payloadSize(at: i) <= maxPayload)
                            #expect(r.count + overhead + (i == 0 ? extra : 0) == s.payloadSize(at: i))
                            #expect(r.count >= (data > 0 ? 1 : 0))
                            sizes.append(s.payloadSize(at: i))
                        }
                        #expect(covered == data)
                        #expect(sizes.max()! - sizes.min()! <= 1)
                        // As few packets as possible.
                        #expect(s.count == max(1, (data + extra + maxPayload - overhead - 1) / (maxPayload - overhead)))
                    }
                }
            }
        }
    }
}
