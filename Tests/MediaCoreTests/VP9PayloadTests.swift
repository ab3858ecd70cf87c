import MediaCore
import Testing

func vp9DescriptorBytes(_ d: VP9PayloadDescriptor) -> [UInt8] {
    var b = [UInt8](repeating: 0, count: d.marshalSize)
    _ = b.withUnsafeMutableBytes { $0.appending { d.marshal(into: &$0) } }
    return b
}

func parseVP9Descriptor(_ b: [UInt8]) throws -> (VP9PayloadDescriptor, Int) {
    try VP9PayloadDescriptor.parse(b.span.bytes)
}

@Suite struct VP9PayloadTests {
    @Test func flexibleModeKnownBytes() throws {
        let inter = VP9PayloadDescriptor(
            interPicturePredicted: true, startOfFrame: true, endOfFrame: true,
            pictureID: 0x1234, referenceDiffs: [1])
        #expect(vp9DescriptorBytes(inter) == [0xDC, 0x92, 0x34, 0x02])
        let key = VP9PayloadDescriptor(
            startOfFrame: true, pictureID: 0x1234,
            scalabilityStructure: VP9ScalabilityStructure(width: 640, height: 480))
        #expect(vp9DescriptorBytes(key) == [0x9A, 0x92, 0x34, 0x10, 0x02, 0x80, 0x01, 0xE0])
        let layered = VP9PayloadDescriptor(
            interPicturePredicted: true, endOfFrame: true, pictureID: 3,
            layer: .init(temporalID: 2, switchingUpPoint: true, spatialID: 1, interLayerDependency: true),
            referenceDiffs: [1, 2, 127])
        #expect(vp9DescriptorBytes(layered) == [0xF4, 0x80, 0x03, 0x53, 0x03, 0x05, 0xFE])
        for d in [inter, key, layered] {
            let (p, n) = try parseVP9Descriptor(vp9DescriptorBytes(d) + [0x82])
            #expect(p == d)
            #expect(n == d.marshalSize)
        }
    }

    @Test func parsesNonFlexibleModeWithLayerAndTL0PICIDX() throws {
        // GStreamer-style non-flexible: I (7-bit PID 5), L with TID 1, TL0PICIDX 7, B and E.
        let (d, n) = try parseVP9Descriptor([0xAC, 0x05, 0x20, 0x07, 0x82, 0x49])
        #expect(n == 4)
        #expect(!d.flexibleMode && d.startOfFrame && d.endOfFrame)
        #expect(d.pictureID == 5 && !d.longPictureID)
        #expect(d.layer == .init(temporalID: 1, switchingUpPoint: false, spatialID: 0, interLayerDependency: false))
        #expect(d.tl0PicIdx == 7)
        #expect(d.referenceCount == 0)
        #expect(vp9DescriptorBytes(d) == [0xAC, 0x05, 0x20, 0x07])
    }

    @Test func skipsScalabilityStructureWithPictureGroup() throws {
        // V=1, B=1: SS with N_S=1 (2 layers), Y=1, G=1, N_G=2: first entry R=1 (one P_DIFF), second R=2.
        let ss: [UInt8] = [
            0x38, 0x01, 0x40, 0x00, 0xB4, 0x02, 0x80, 0x01, 0x68, 0x02,
            0x04, 0x01, 0x28, 0x01, 0x02,
        ]
        let (d, n) = try parseVP9Descriptor([0x8A, 0x80, 0x01] + ss + [0xAB])
        #expect(n == 3 + ss.count)
        let s = try #require(d.scalabilityStructure)
        #expect(s.spatialLayers == 2 && s.hasResolutions && s.pictureGroupSize == 2)
        #expect(s.width(layer: 0) == 320 && s.height(layer: 0) == 180)
        #expect(s.width(layer: 1) == 640 && s.height(layer: 1) == 360)
        // Cutting anywhere inside the SS is a truncation, never a crash.
        for cut in 1..<(3 + ss.count) {
            #expect(throws: RTPError.self) { try parseVP9Descriptor(Array(([0x8A, 0x80, 0x01] + ss).prefix(cut))) }
        }
    }

    @Test func rejectsMalformedDescriptors() {
        #expect(throws: RTPError.emptyPayload) { try parseVP9Descriptor([]) }
        #expect(throws: RTPError.truncated) { try parseVP9Descriptor([0x88]) }  // no data after descriptor
        #expect(throws: RTPError.truncated) { try parseVP9Descriptor([0x88, 0x80]) }  // 15-bit PID cut
        #expect(throws: RTPError.truncated) { try parseVP9Descriptor([0x50, 0x03, 0x03]) }  // P_DIFF chain runs off
        #expect(throws: RTPError.badPayloadDescriptor) { try parseVP9Descriptor([0x50, 0x03, 0x03, 0x03, 0x03, 0x00]) }
        #expect(throws: RTPError.badPayloadDescriptor) { try parseVP9Descriptor([0x50, 0x00, 0x00]) }  // P_DIFF 0
        #expect(throws: RTPError.truncated) { try parseVP9Descriptor([0x20, 0x20]) }  // non-flexible L without TL0PICIDX data
    }

    @Test(arguments: [1, 2, 500, 1180, 1181, 1182, 1183, 2400, 7777, 30_000, 50_000])
    func packetizeThenDepacketizeRestoresFrame(size: Int) throws {
        let frame = rtpTestBytes(size, seed: UInt64(size) + 77)
        var packetizer = VP9Packetizer(pictureID: 0x7FFF)
        var header = RTPHeader(payloadType: 98, ssrc: 9)
        var seq = RTPSequencer(initial: 65534)
        let d = VP9Depacketizer()
        for keyframe in [true, false] {
            header.timestamp &+= 3000
            let packets = writeRTPPackets(
                packetizer.packetize(
                    frameSize: frame.count, maxPayloadSize: header.maxPayloadSize(mtu: 1200),
                    keyframe: keyframe, width: 1280, height: 720),
                of: frame, header: &header, sequencer: &seq)
            let sizes = packets.map(\.count)
            #expect(sizes.max()! <= 1200)
            #expect(sizes.max()! - sizes.min()! <= 1, "uneven split \(sizes)")
            var got: [UInt8]? = nil
            for (i, p) in packets.enumerated() {
                try withParsedRTP(p) { pkt in
                    #expect(pkt.header.marker == (i == packets.count - 1))
                    let (desc, _) = try VP9PayloadDescriptor.parse(p.span.bytes.extracting(pkt.payloadRange))
                    #expect(desc.startOfFrame == (i == 0) && desc.endOfFrame == (i == packets.count - 1))
                    #expect(desc.flexibleMode && desc.interPicturePredicted == !keyframe)
                    #expect((desc.scalabilityStructure != nil) == (keyframe && i == 0))
                    let r = try d.push(pkt, in: p.span.bytes)
                    #expect(r.incompleteFrames == 0 && r.lostPackets == 0)
                    if let f = r.frame {
                        got = Array(f.data)
                        #expect(f.isKeyframe == keyframe)
                        #expect(f.pictureID == (keyframe ? 0x7FFF : 0))
                    }
                }
            }
            #expect(got == frame)
        }
        #expect(d.scalabilityStructure?.width(layer: 0) == 1280)
        #expect(d.scalabilityStructure?.height(layer: 0) == 720)
    }

    @Test func depacketizesNonFlexibleStreamAndDetectsLoss() throws {
        // Three-packet frames in GStreamer's non-flexible layout: I (15-bit PID), B/E, no marker
        // needed for the frame end (E ends it).
        func packet(seq: UInt16, ts: UInt32, b: Bool, e: Bool, p: Bool, data: [UInt8]) -> [UInt8] {
            let d0: UInt8 = 0x80 | (p ? 0x40 : 0) | (b ? 0x08 : 0) | (e ? 0x04 : 0)
            return marshalRTP(
                RTPHeader(marker: e, payloadType: 96, sequenceNumber: seq, timestamp: ts, ssrc: 5),
                [d0, 0x80, UInt8(ts / 3000)] + data)
        }
        var stream: [[UInt8]] = []
        var seq: UInt16 = 65533
        for f in 0..<3 {
            for k in 0..<3 {
                stream.append(packet(seq: seq, ts: UInt32(f * 3000), b: k == 0, e: k == 2, p: f > 0, data: [UInt8(f), UInt8(k)]))
                seq &+= 1
            }
        }
        stream.remove(at: 4)  // middle of frame 1
        let d = VP9Depacketizer()
        var frames: [[UInt8]] = [], incomplete = 0, keys = 0
        for p in stream {
            try withParsedRTP(p) { pkt in
                let r = try d.push(pkt, in: p.span.bytes)
                incomplete += r.incompleteFrames
                if let f = r.frame { frames.append(Array(f.data)); if f.isKeyframe { keys += 1 } }
            }
        }
        #expect(frames == [[0, 0, 0, 1, 0, 2], [2, 0, 2, 1, 2, 2]])
        #expect(incomplete == 1)
        #expect(keys == 1)
    }
}
