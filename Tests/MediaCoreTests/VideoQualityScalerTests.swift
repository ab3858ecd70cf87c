// Quality scaling: the size a congestion-controlled stream encodes at follows what its target
// bitrate can carry. The scaler's decisions on their own, then a real VP8 stream (libvpx, driven
// on this thread with capture times the test gives) under a low and a high estimate.
import MediaCore
import MediaTestSupport
import MediaTools
import Testing

@Suite struct VideoQualityScalerTests {
    static let frameNs: Int64 = 33_333_333

    /// Steps alternate 3/4 and 2/3 of each side and stay even.
    @Test func stepsAreThreeQuartersThenTwoThirds() {
        let sizes = (0..<4).map { VideoQualityScaler.size(width: 640, height: 480, step: $0) }
        #expect(sizes.map(\.width) == [640, 480, 320, 240] && sizes.map(\.height) == [480, 360, 240, 180])
        let odd = VideoQualityScaler.size(width: 1278, height: 718, step: 1)
        #expect(odd.width % 2 == 0 && odd.height % 2 == 0)
    }

    /// A second of frames at a high quantizer goes one step down; a second with most frames
    /// dropped goes another; it never goes below 320x180; a second at a low quantizer with no
    /// drop goes back up one step; a window with too few frames decides nothing.
    @Test func decisionsFollowTheQuantizerAndTheDrops() {
        var scaler = VideoQualityScaler(width: 640, height: 480)
        // Frames 33.3 ms apart, rounded up so that 30 intervals make a full second: the first
        // window holds 31 frames (its first at 0), each later one the 30 after the frame that
        // closed the one before.
        let interval: Int64 = 33_333_334
        var t: Int64 = 0, frames = 31
        func second(_ frame: (Int) -> Int?) -> [VideoQualityScaler.Decision] {
            defer { frames = 30 }
            return (0..<frames).map { i in
                defer { t += interval }
                return scaler.observe(quantizer: frame(i), nowNs: t)
            }.filter { $0 != .keep }
        }
        #expect(second { _ in 60 } == [])  // in between: kept
        #expect(second { _ in 110 } == [.resize(width: 480, height: 360)])
        #expect(second { $0 % 3 == 0 ? 50 : nil } == [.resize(width: 320, height: 240)])  // two thirds dropped
        #expect(second { _ in 127 } == [], "240x180 is below 320x180")
        #expect(second { $0 == 5 || $0 == 20 ? nil : 20 } == [], "drops keep it from going up")
        #expect(second { _ in 20 } == [.resize(width: 480, height: 360)])
        #expect(second { _ in 20 } == [.resize(width: 640, height: 480)])
        #expect(second { _ in 20 } == [], "not above the stream's size")
        // Ten frames over a second: too few to judge.
        var sparse = VideoQualityScaler(width: 640, height: 480)
        let decisions = (0..<10).map { sparse.observe(quantizer: 127, nowNs: Int64($0) * 120_000_000) }
        #expect(decisions.allSatisfy { $0 == .keep })
        // A new full size starts over at it.
        scaler.reset(width: 320, height: 240)
        #expect(scaler.step == 0 && scaler.current == (320, 240))
    }

    /// Random grey blocks, which cost the encoder about the same at any quantizer.
    static func noise(_ frame: VideoFrame, seed: UInt64) {
        var state = seed &* 6_364_136_223_846_793_005 &+ 1
        frame.withMutablePlanes { y, u, v in
            for row in 0..<frame.height {
                for col in 0..<frame.width {
                    if col % 4 == 0 {
                        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                    }
                    y[row * frame.strideY + col] = UInt8(truncatingIfNeeded: 64 + Int(state >> 59) * 8)
                }
            }
            for i in u.indices { u[i] = 128 }
            for i in v.indices { v[i] = 128 }
        }
    }

    /// A VP8 stream of 640x360 noise under a 100 kbit/s estimate encodes smaller pictures within
    /// a few seconds (and counts each change); a flat picture under 2
    /// Mbit/s brings it back to 640x360. Without `scalesResolution` the same stream keeps its size.
    @Test(arguments: [true, false])
    func aStreamScalesDownUnderALowEstimateAndBackUp(scales: Bool) throws {
        var c = VideoSendStream.Configuration(codec: .vp8, width: 640, height: 360)
        c.encoder.bitrate = 2_000_000
        c.encoder.frameDropThreshold = VideoSendStream.congestionFrameDropThreshold
        c.scalesResolution = scales
        c.pacer = nil
        let sink = MemoryPacketSink()
        let stream = try VideoSendStream(configuration: c, sink: sink)
        stream.startWithoutWorker()
        stream.handleEstimatedBitrate(100_000)
        let source = VideoFrame(width: 640, height: 360)
        var widths: [Int] = []
        for i in 0..<150 {
            Self.noise(source, seed: UInt64(i))
            source.withView { view in
                stream.capturer.capture(PixelBufferView(view), timeStampNs: Int64(i) * Self.frameNs)
            }
            stream.pump()
            widths.append(stream.statistics.outbound.frameWidth)
        }
        let low = stream.statistics
        stream.handleEstimatedBitrate(2_000_000)
        source.withMutablePlanes { y, u, v in
            for i in y.indices { y[i] = 120 }
            for i in u.indices { u[i] = 128 }
            for i in v.indices { v[i] = 128 }
        }
        for i in 150..<450 {
            source.withView { view in
                stream.capturer.capture(PixelBufferView(view), timeStampNs: Int64(i) * Self.frameNs)
            }
            stream.pump()
            widths.append(stream.statistics.outbound.frameWidth)
        }
        stream.stop()
        let high = stream.statistics
        let changes = zip(widths, widths.dropFirst()).enumerated().filter { $0.element.0 != $0.element.1 }
            .map { "frame \($0.offset + 1): \($0.element.0) -> \($0.element.1)" }
        print(
            "quality scaling \(scales ? "on" : "off"): \(changes); at 100 kbit/s \(low.outbound.framesEncoded) encoded, "
                + "\(low.outbound.framesDroppedByEncoder) dropped; changes \(high.qualityLimitationResolutionChanges)")
        if scales {
            #expect(widths[0..<150].min()! < 640, "still 640 wide at 100 kbit/s: \(changes)")
            #expect(widths.last == 640, "not back at 640x360 at 2 Mbit/s: \(changes)")
            #expect(high.qualityLimitationResolutionChanges == UInt64(changes.count))
        } else {
            #expect(Set(widths) == [640] && high.qualityLimitationResolutionChanges == 0)
        }
    }
}
