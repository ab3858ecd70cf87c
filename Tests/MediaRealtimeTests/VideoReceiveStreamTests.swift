import MediaCore
import MediaTestSupport
import Testing

/// Encodes `count` SyntheticVideo frames of `codec` at 320x240 and packetizes them (MTU 600, so
/// frames span several packets): the packets of each frame, in order.
private func videoPackets(_ codec: VPXCodec, count: Int, keyframesAt: Set<Int> = [0]) throws -> [[[UInt8]]] {
    var conf = VPXEncoderConfiguration(codec: codec, width: 320, height: 240)
    conf.bitrate = 600_000
    let encoder = try VPXEncoder(conf)
    var vp8 = VP8Packetizer(pictureID: 1)
    var vp9 = VP9Packetizer(pictureID: 1)
    let frame = VideoFrame(width: 320, height: 240)
    var seq: UInt16 = 65_500  // wraps during the stream
    var out: [[[UInt8]]] = []
    for i in 0..<count {
        SyntheticVideo.render(frameIndex: i, into: frame)
        var packets: [[UInt8]] = []
        try encoder.encode(frame.view, pts: Int64(i) * 3000, forceKeyframe: keyframesAt.contains(i)) { e in
            var header = RTPHeader(payloadType: 98, timestamp: UInt32(i * 3000), ssrc: 77)
            let max = header.maxPayloadSize(mtu: 600)
            let split: any RTPFramePayloads =
                codec == .vp8
                ? vp8.packetize(frameSize: e.byteCount, maxPayloadSize: max)
                : vp9.packetize(frameSize: e.byteCount, maxPayloadSize: max, keyframe: e.isKeyframe)
            for p in 0..<split.count {
                header.sequenceNumber = seq
                seq &+= 1
                var b = [UInt8](repeating: 0, count: 700)
                let n = b.withUnsafeMutableBytes {
                    $0.appending { split.writePacket(at: p, header: &header, of: e.data.bytes, into: &$0) }
                }
                packets.append(Array(b[0..<n]))
            }
        }
        out.append(packets)
    }
    return out
}

private func feed(_ s: VideoReceiveStream, _ packet: [UInt8], at ns: UInt64) {
    packet.withUnsafeBytes { s.insert(try! RTPPacket(parsing: $0.bytes), in: $0, arrival: MonotonicTime(nanoseconds: ns)) }
}

@Suite struct VideoReceiveStreamTests {
    @Test(arguments: [VPXCodec.vp8, .vp9])
    func decodesEveryFrameInOrderFromReorderedPackets(codec: VPXCodec) throws {
        let frames = try videoPackets(codec, count: 20)
        let renderer = IndexingRenderer(width: 320, height: 240)
        let s = try VideoReceiveStream(
            ssrc: 77, settings: VideoReceiveSettings(codec: codec, payloadType: 98), renderer: renderer)
        var t: UInt64 = 1_000_000_000
        for f in frames {
            // Reverse each frame's packets: the jitter buffer puts them back in order.
            for p in f.reversed() { feed(s, p, at: t) }
            s.process(now: MonotonicTime(nanoseconds: t))
            t += 33_333_333
        }
        #expect(renderer.indices == Set(0..<20))
        #expect(renderer.minimumPSNR > 30)
        let stats = s.statsSnapshot()
        #expect(stats.framesDecoded == 20 && stats.keyFramesDecoded == 1 && stats.framesDropped == 0)
        #expect(stats.codec == (codec == .vp8 ? "VP8" : "VP9"))
        #expect(stats.frameWidth == 320 && stats.frameHeight == 240)
    }

    @Test(arguments: [VPXCodec.vp8, .vp9])
    func unrepairableLossWaitsForAKeyframeAndAsksForOne(codec: VPXCodec) throws {
        let frames = try videoPackets(codec, count: 30, keyframesAt: [0, 20])
        let renderer = IndexingRenderer(width: 320, height: 240)
        var settings = VideoReceiveSettings(codec: codec, payloadType: 98)
        settings.nackEnabled = false
        let s = try VideoReceiveStream(ssrc: 77, settings: settings, renderer: renderer)
        var t: UInt64 = 1_000_000_000
        var plis = 0
        for (i, f) in frames.enumerated() {
            for (k, p) in f.enumerated() where !(i == 8 && k == 0) { feed(s, p, at: t) }  // frame 8 loses its first packet
            s.process(now: MonotonicTime(nanoseconds: t))
            if s.takeKeyframeRequest(now: MonotonicTime(nanoseconds: t)) { plis += 1 }
            t += 33_333_333
        }
        // Frames 0-7 decode; 8 is incomplete; 9-19 depend on it and are not decoded into garbage;
        // the keyframe at 20 restarts the picture.
        #expect(renderer.indices == Set(0..<8).union(20..<30), "\(renderer.indices.sorted())")
        #expect(renderer.unreadable == 0)
        #expect(plis >= 1)
        let stats = s.statsSnapshot()
        #expect(stats.framesDropped >= 12 && stats.keyFramesDecoded == 2)
        #expect(stats.pliCount == UInt64(plis))
        #expect(stats.freezeCount == 1, "one freeze from frame 7 to frame 20")
        #expect(stats.totalFreezesDuration > 0.4)
    }

    /// Plays a temporally layered VP8 stream (one keyframe) without the packets `drop(frame,
    /// packet)` names; returns the renderer, the stream, the keyframe requests made and each
    /// frame's (temporal layer, non-reference bit).
    private func playLayered(layers: Int, count: Int, mtu: Int = 1200, drop: (Int, Int) -> Bool = { _, _ in false })
        throws -> (IndexingRenderer, VideoReceiveStream, Int, [(layer: UInt8, nonReference: Bool, packets: Int)])
    {
        var config = sendTestVideoConfiguration()
        config.encoder.temporalLayers = layers
        config.mtu = mtu
        let (_, packets) = try VideoSendPipelineTests.sendFrames(config, count: count)
        // Group the packets by frame (RTP timestamp) and read each frame's descriptor.
        var frames: [[[UInt8]]] = []
        var info: [(layer: UInt8, nonReference: Bool, packets: Int)] = []
        var lastTimestamp: UInt32?
        for p in packets {
            let rtp = try RTPPacket(parsing: p.span.bytes)
            if rtp.header.timestamp != lastTimestamp {
                frames.append([])
                let (d, _) = try VP8PayloadDescriptor.parse(p.span.bytes.extracting(rtp.payloadRange))
                info.append((d.temporalLayerID ?? 255, d.nonReference, 0))
                lastTimestamp = rtp.header.timestamp
            }
            frames[frames.count - 1].append(p)
            info[info.count - 1].packets += 1
        }
        let renderer = IndexingRenderer(width: 320, height: 240)
        var settings = VideoReceiveSettings(codec: .vp8, payloadType: config.payloadType)
        settings.nackEnabled = false
        let s = try VideoReceiveStream(ssrc: config.ssrc, settings: settings, renderer: renderer)
        var t: UInt64 = 1_000_000_000
        var requests = 0
        for (i, f) in frames.enumerated() {
            for (k, p) in f.enumerated() where !drop(i, k) { feed(s, p, at: t) }
            s.process(now: MonotonicTime(nanoseconds: t))
            if s.takeKeyframeRequest(now: MonotonicTime(nanoseconds: t)) { requests += 1 }
            t += 33_333_333
        }
        s.process(now: MonotonicTime(nanoseconds: t + 1_000_000_000))
        return (renderer, s, requests, info)
    }

    /// Every frame that played is exactly the lossless stream's frame (same PSNR to the last bit):
    /// nothing was decoded from a missing reference.
    private func expectIdenticalToLossless(_ renderer: IndexingRenderer, layers: Int, count: Int, mtu: Int = 1200) throws {
        let (whole, _, _, _) = try playLayered(layers: layers, count: count, mtu: mtu)
        let lossless = whole.lock.withLock { $0 }, withLoss = renderer.lock.withLock { $0 }
        #expect(lossless.count == count)
        for (index, psnr) in withLoss { #expect(lossless[index] == psnr, "frame \(index)") }
    }

    @Test(arguments: [false, true])
    func aCutShortNonReferenceFrameCostsOnlyItself(losesLastPacket: Bool) throws {
        // Three layers: the top layer's frames are marked non-reference. One loses a packet in its
        // middle (the gap shows inside the same picture) or its last one (the next picture's
        // PictureID follows it): only that frame is missing, and no keyframe is asked for. A small
        // MTU makes frames span packets.
        let probe = try playLayered(layers: 3, count: 24, mtu: 300)
        guard let victim = probe.3.indices.first(where: { $0 > 4 && probe.3[$0].nonReference && probe.3[$0].packets >= 3 }) else {
            Issue.record("no non-reference frame of 3 packets in \(probe.3)")
            return
        }
        let lost = losesLastPacket ? probe.3[victim].packets - 1 : 1
        let (renderer, s, requests, info) = try playLayered(layers: 3, count: 24, mtu: 300) { i, k in i == victim && k == lost }
        #expect(info[victim].layer == 2)
        #expect(renderer.indices == Set(0..<24).subtracting([victim]), "\(renderer.indices.sorted())")
        #expect(requests == 0 && s.statsSnapshot().pliCount == 0)
        try expectIdenticalToLossless(renderer, layers: 3, count: 24, mtu: 300)
    }

    @Test func aLostUpperLayerFrameKeepsTheBaseLayerPlaying() throws {
        // Two layers: TL1 frames are references for later TL1 frames (libvpx's pattern), so after
        // losing one, TL1 is skipped (never decoded into garbage) while TL0 plays on without a
        // freeze; a keyframe is asked for to bring the full rate back.
        let (renderer, s, requests, info) = try playLayered(layers: 2, count: 30) { i, _ in i == 5 }
        #expect(info[5].layer == 1 && info[6].layer == 0)
        let base = Set(info.indices.filter { info[$0].layer == 0 })
        #expect(renderer.indices.isSuperset(of: base), "every base-layer frame plays: \(renderer.indices.sorted())")
        #expect(!renderer.indices.contains(5) && renderer.unreadable == 0)
        #expect(requests >= 1)
        let stats = s.statsSnapshot()
        #expect(stats.freezeCount == 0, "the base layer keeps the picture moving")
        try expectIdenticalToLossless(renderer, layers: 2, count: 30)
    }

    @Test func aLostBaseLayerFrameStillAsksForAKeyframe() throws {
        let (renderer, _, requests, info) = try playLayered(layers: 2, count: 30) { i, _ in i == 4 }
        #expect(info[4].layer == 0)
        // Nothing after the lost base-layer frame decodes into garbage; a keyframe is requested.
        #expect(renderer.indices == Set(0..<4), "\(renderer.indices.sorted())")
        #expect(renderer.unreadable == 0)
        #expect(requests >= 1)
    }

    /// VP8 packets of `count` frames, and a stream without render scheduling that received the
    /// first two at `t`. Repair is checked at the moments packets arrive; when frames are released
    /// is the subject of `framesLeaveAtTheirPlayoutTimeSpacedAsCaptured`.
    func repairStream(frames count: Int, at t: UInt64) throws -> (frames: [[[UInt8]]], stream: VideoReceiveStream) {
        let frames = try videoPackets(.vp8, count: count)
        var settings = VideoReceiveSettings(codec: .vp8, payloadType: 98)
        settings.schedulesRendering = false
        let s = try VideoReceiveStream(ssrc: 77, settings: settings, renderer: nil)
        for p in frames[0] + frames[1] { feed(s, p, at: t) }
        s.process(now: MonotonicTime(nanoseconds: t))
        return (frames, s)
    }

    @Test func nackListNamesTheMissingPacketsAndTheHoleIsWaitedForThenSkipped() throws {
        var t: UInt64 = 1_000_000_000
        let (frames, s) = try repairStream(frames: 6, at: t)
        // Frame 2's packets go missing; frame 3 arrives.
        let missing = frames[2].map { (try! RTPHeader(parsing: $0.span.bytes)).sequenceNumber }
        t += 66_666_666
        for p in frames[3] { feed(s, p, at: t) }
        s.process(now: MonotonicTime(nanoseconds: t))
        #expect(s.takeNackList(now: MonotonicTime(nanoseconds: t)) == missing)
        #expect(s.statsSnapshot().framesDecoded == 2, "waits for the hole")
        // The retransmissions arrive: frames 2 and 3 decode.
        t += 30_000_000
        for p in frames[2] { feed(s, p, at: t) }
        s.process(now: MonotonicTime(nanoseconds: t))
        #expect(s.statsSnapshot().framesDecoded == 4)
        #expect(s.statsSnapshot().nackCount == 1)
        // Frame 4 lost for good: after the hole wait, frame 5 is skipped to (and not decoded: its
        // reference is gone), and a keyframe is requested.
        for p in frames[5] { feed(s, p, at: t) }
        s.process(now: MonotonicTime(nanoseconds: t) + s.holeWait - .nanoseconds(1))
        #expect(s.jitterBuffer.hasHole)
        s.process(now: MonotonicTime(nanoseconds: t) + s.holeWait)
        #expect(!s.jitterBuffer.hasHole)
        #expect(s.statsSnapshot().framesDecoded == 4)
        #expect(s.takeKeyframeRequest(now: MonotonicTime(nanoseconds: t) + s.holeWait))
    }

    /// After a path change, what went missing on the old path is not asked for again (a burst of
    /// stale resends would queue ahead of the keyframe at the sender); a keyframe is asked for at
    /// once, and losses on the new path are asked for as usual.
    @Test func aPathChangeAsksForAKeyframeInsteadOfTheOldPathsLosses() throws {
        var t: UInt64 = 1_000_000_000
        let (frames, s) = try repairStream(frames: 8, at: t)
        #expect(!s.takeKeyframeRequest(now: MonotonicTime(nanoseconds: t)))
        // The old path dies with frames 2-4 in flight; the new one starts with frame 5.
        s.pathChanged()
        t += 1_000_000_000
        for p in frames[5] { feed(s, p, at: t) }
        s.process(now: MonotonicTime(nanoseconds: t))
        #expect(s.takeNackList(now: MonotonicTime(nanoseconds: t)).isEmpty, "the old path's losses are not asked for")
        #expect(s.takeKeyframeRequest(now: MonotonicTime(nanoseconds: t)))
        // Frame 6 is lost on the new path: asked for as usual.
        let lost = frames[6].map { (try! RTPHeader(parsing: $0.span.bytes)).sequenceNumber }
        t += 66_666_666
        for p in frames[7] { feed(s, p, at: t) }
        s.process(now: MonotonicTime(nanoseconds: t))
        #expect(s.takeNackList(now: MonotonicTime(nanoseconds: t)) == lost)
    }

    @Test(arguments: [(VPXCodec.vp8, 1), (.vp8, 2), (.vp9, 1), (.vp9, 2)])
    func lostFirstPacketsOfTheStreamAreNackedInsteadOfCostingTheKeyframe(codec: VPXCodec, lostAtStart: Int) throws {
        let frames = try videoPackets(codec, count: 5)
        try #require(frames[0].count > lostAtStart + 1, "the keyframe spans several packets")
        let renderer = IndexingRenderer(width: 320, height: 240)
        var settings = VideoReceiveSettings(codec: codec, payloadType: 98)
        settings.schedulesRendering = false  // repair, checked at arrivals (see above)
        let s = try VideoReceiveStream(ssrc: 77, settings: settings, renderer: renderer)
        let seq = { (p: [UInt8]) in (try! RTPHeader(parsing: p.span.bytes)).sequenceNumber }
        var t: UInt64 = 1_000_000_000
        // The keyframe's first packet(s) are lost: nothing before the first packet received tells
        // the receiver they exist, except that it does not start a frame.
        for p in frames[0].dropFirst(lostAtStart) + frames[1] { feed(s, p, at: t) }
        s.process(now: MonotonicTime(nanoseconds: t))
        #expect(s.statsSnapshot().framesDecoded == 0, "the stream waits for its start")
        // One packet back at a time: each retransmission that does not start the frame either
        // makes the one before it the next hole.
        for k in (0..<lostAtStart).reversed() {
            #expect(s.takeNackList(now: MonotonicTime(nanoseconds: t)) == [seq(frames[0][k])])
            t += 25_000_000
            feed(s, frames[0][k], at: t)
            s.process(now: MonotonicTime(nanoseconds: t))
        }
        #expect(s.takeNackList(now: MonotonicTime(nanoseconds: t)).isEmpty, "nothing before the frame's start is asked for")
        for f in frames[2...] { for p in f { feed(s, p, at: t) }; s.process(now: MonotonicTime(nanoseconds: t)); t += 33_333_333 }
        #expect(renderer.indices == Set(0..<5), "\(renderer.indices.sorted())")
        #expect(!s.takeKeyframeRequest(now: MonotonicTime(nanoseconds: t)), "no PLI: NACK repaired the start")
        #expect(s.statsSnapshot().framesDropped == 0)
    }

    @Test func aVP9StreamJoinedInAPredictedFrameAsksForAKeyframeAtOnce() throws {
        // The first packet received is the middle of a predicted frame (P=1, RFC 9628 §4.2): its
        // start would not help without the key frame, so nothing is NACKed back.
        let frames = try videoPackets(.vp9, count: 4)
        try #require(frames[2].count > 1)
        let s = try VideoReceiveStream(ssrc: 77, settings: VideoReceiveSettings(codec: .vp9, payloadType: 98), renderer: nil)
        let t: UInt64 = 1_000_000_000
        for p in frames[2].dropFirst() + frames[3] { feed(s, p, at: t) }
        s.process(now: MonotonicTime(nanoseconds: t))
        #expect(s.takeNackList(now: MonotonicTime(nanoseconds: t)).isEmpty)
        #expect(s.takeKeyframeRequest(now: MonotonicTime(nanoseconds: t)))
    }

    @Test func aStreamStartThatNeverComesIsGivenUpOnAfterTheHoleWait() throws {
        let frames = try videoPackets(.vp8, count: 3)
        let s = try VideoReceiveStream(ssrc: 77, settings: VideoReceiveSettings(codec: .vp8, payloadType: 98), renderer: nil)
        let t: UInt64 = 1_000_000_000
        for p in frames[0].dropFirst() + frames[1] { feed(s, p, at: t) }
        s.process(now: MonotonicTime(nanoseconds: t))
        #expect(s.takeNackList(now: MonotonicTime(nanoseconds: t)).count == 1)
        s.process(now: MonotonicTime(nanoseconds: t) + s.holeWait - .nanoseconds(1))
        #expect(s.jitterBuffer.hasHole)
        s.process(now: MonotonicTime(nanoseconds: t) + s.holeWait)
        #expect(!s.jitterBuffer.hasHole)
        #expect(s.statsSnapshot().framesDecoded == 0)
        #expect(s.takeKeyframeRequest(now: MonotonicTime(nanoseconds: t) + s.holeWait), "then the keyframe is asked for")
    }

    @Test func steadyStateReceiveAllocatesNothingPerPacket() throws {
        let frames = try videoPackets(.vp8, count: 70)
        var settings = VideoReceiveSettings(codec: .vp8, payloadType: 98)
        settings.renderFormat = .bgra
        let renderer = LatestFrameRenderer()
        let s = try VideoReceiveStream(ssrc: 77, settings: settings, renderer: renderer)
        var t: UInt64 = 1_000_000_000
        // Warm up: the keyframe (libvpx sizes its frame pool), the BGRA buffer, the renderer's copy.
        for f in frames[0..<10] {
            for p in f { feed(s, p, at: t) }
            s.process(now: MonotonicTime(nanoseconds: t))
            _ = s.takeNackList(now: MonotonicTime(nanoseconds: t))
            t += 33_333_333
        }
        // Each packet's insert and each frame's playout (depacketize, decode, BGRA, render, NACK
        // bookkeeping) measured on its own, so the test's own loop is not counted.
        var allocations = 0
        for f in frames[10..<70] {
            for p in f {
                allocations += p.withUnsafeBytes { bytes in
                    AllocationCounter.count {
                        s.insert(try! RTPPacket(parsing: bytes.bytes), in: bytes, arrival: MonotonicTime(nanoseconds: t))
                    }
                }
            }
            allocations += AllocationCounter.count {
                s.process(now: MonotonicTime(nanoseconds: t))
                _ = s.takeNackList(now: MonotonicTime(nanoseconds: t))
            }
            t += 33_333_333
        }
        #expect(renderer.frameCount == 70)
        #expect(allocations == 0, "\(allocations) allocations for 60 frames")
    }
}

/// Records each rendered frame's bar-code index, its `renderTimeNs` and the simulated time of the
/// `render` call.
private final class TimingRenderer: VideoRenderer {
    var now: UInt64 = 0
    var frames: [(index: Int, renderNs: UInt64, calledNs: UInt64, psnr: Double)] = []
    private let reference = VideoFrame(width: 320, height: 240)

    func render(_ frame: DecodedVideoFrame) {
        let index = SyntheticVideo.frameIndex(in: frame.view) ?? -1
        if index >= 0 { SyntheticVideo.render(frameIndex: index, into: reference) }
        let psnr = index >= 0 ? Quality.psnr(reference.view, frame.view) : 0
        frames.append((index, frame.renderTime.nanoseconds, now, psnr))
    }
}

@Suite struct VideoRenderSchedulingTests {
    /// 90 frames at 30 fps over a network that delays them 20 ms and bunches them: each group of
    /// three frames arrives at once, when the third would have (plus 0-15 ms more per group), the
    /// way a congested Wi-Fi link or a paced keyframe delivers them. The stream's clock runs by
    /// hand in 1 ms steps, ahead of the real monotonic clock the decoder's timings come from.
    private func play(scheduled: Bool) throws -> (TimingRenderer, captureNs: [UInt64], arrivalNs: [UInt64]) {
        let frames = try videoPackets(.vp8, count: 90)
        let renderer = TimingRenderer()
        var settings = VideoReceiveSettings(codec: .vp8, payloadType: 98)
        settings.schedulesRendering = scheduled
        let s = try VideoReceiveStream(ssrc: 77, settings: settings, renderer: renderer)
        let base = MonotonicTime.now.nanoseconds + 100_000_000_000
        let capture = (0..<90).map { base + UInt64($0) * 33_333_333 }
        let extraMs: [UInt64] = [
            3, 15, 0, 9, 12, 6, 1, 14, 4, 10, 7, 2, 13, 5, 11, 8, 0, 15, 6, 9, 2, 11, 7, 0, 14, 5, 10, 3, 12, 8,
        ]
        var arrival: [UInt64] = []
        for i in 0..<90 {
            let groupEnd: UInt64 = capture[i / 3 * 3 + 2]
            arrival.append(groupEnd + 20_000_000 + extraMs[i / 3] * 1_000_000)
        }
        var next = 0
        var t = arrival[0]
        while t < arrival[89] + 1_000_000_000 {
            while next < 90 && arrival[next] <= t {
                for p in frames[next] { feed(s, p, at: arrival[next]) }
                next += 1
            }
            renderer.now = t
            s.process(now: MonotonicTime(nanoseconds: t))
            t += 1_000_000
        }
        return (renderer, capture, arrival)
    }

    @Test func framesLeaveAtTheirPlayoutTimeSpacedAsCaptured() throws {
        let (r, capture, arrival) = try play(scheduled: true)
        #expect(r.frames.map(\.index) == Array(0..<90), "every frame, in order")
        #expect(r.frames.allSatisfy { $0.psnr > 30 })
        // Once the delay has grown to cover the bunching (100 ms per second: the first second),
        // frames are due one frame interval apart, as captured, however they arrived; a change
        // of delay moves an interval by at most 3.3 ms.
        let steady = r.frames.dropFirst(30)
        let intervals = zip(steady.dropFirst(), steady).map { Double($0.renderNs) - Double($1.renderNs) }
        let worst = intervals.map { abs($0 - 33_333_333) }.max() ?? .infinity
        #expect(worst < 4_000_000, "render intervals \(intervals.map { ($0 / 1e6).rounded() })")
        for f in r.frames {
            // Never before the frame was whole, never long after its playout time, and
            // handed over about a render delay ahead of the time it is to be shown.
            #expect(f.calledNs >= arrival[f.index])
            #expect(f.renderNs >= f.calledNs && f.renderNs <= f.calledNs + 40_000_000)
            let latency = Double(f.renderNs - capture[f.index]) / 1e6
            #expect(latency >= 20 && latency < 160, "frame \(f.index): capture to render \(latency) ms")
        }
    }

    @Test func withoutSchedulingFramesGoAsTheyArriveBunched() throws {
        let (r, _, arrival) = try play(scheduled: false)
        #expect(r.frames.map(\.index) == Array(0..<90))
        // Rendered at arrival: three frames at once, then a gap of about 100 ms.
        for f in r.frames { #expect(f.calledNs - arrival[f.index] < 1_000_000) }
        let steady = r.frames.dropFirst(30)
        let intervals = zip(steady.dropFirst(), steady).map { Double($0.calledNs) - Double($1.calledNs) }
        #expect(intervals.filter { $0 < 2_000_000 }.count >= 35, "bunched: \(intervals.map { ($0 / 1e6).rounded() })")
    }
}
