import MediaCore
import Testing

/// Two streams as lip sync sees them, one update a second: their offset without extra delays
/// (positive: audio plays later), and each stream's delay moving toward the extra it was given
/// by at most so much per second (video's playout time by 100 ms per second of media; audio by
/// time-stretching).
private struct SimulatedStreams {
    var naturalNs: Double
    var videoRateNs: Double
    var audioRateNs: Double
    var videoInForceNs = 0.0
    var audioInForceNs = 0.0

    /// The offset lip sync measures now, plus `noiseNs` (a late render or pull).
    func offset(noiseNs: Double = 0) -> Double { naturalNs - videoInForceNs + audioInForceNs + noiseNs }

    /// One second passes: each stream moves toward its extra.
    mutating func follow(_ sync: AudioVideoSync) {
        videoInForceNs += max(-videoRateNs, min(videoRateNs, sync.videoExtraNs - videoInForceNs))
        audioInForceNs += max(-audioRateNs, min(audioRateNs, sync.audioExtraNs - audioInForceNs))
    }

    /// `updates` seconds of lip sync (measure, update, follow); the offsets measured, in ms.
    @discardableResult
    mutating func run(_ sync: inout AudioVideoSync, updates: Int) -> [Double] {
        (0..<updates).map { _ in
            let measured = offset()
            sync.update(offsetNs: measured)
            follow(sync)
            return measured / 1_000_000
        }
    }
}

extension AudioVideoSync {
    /// One update with a measured offset (only the difference of the two delays matters).
    fileprivate mutating func update(offsetNs: Double) {
        update(audioPlayNs: offsetNs, audioCaptureNs: 0, videoRenderNs: 0, videoCaptureNs: 0)
    }
}

/// The lip-sync controller against simulated streams, step by step: how soon it brings a path
/// difference within a bound, that it does not overshoot it, and how far one bad measurement
/// moves it. `LipSyncTests` checks the same end to end, with real streams and a clock.
@Suite struct AudioVideoSyncTests {
    private static let ms = 1_000_000.0

    private static func streams(naturalMs: Double, rateMs: Double = 100) -> SimulatedStreams {
        SimulatedStreams(naturalNs: naturalMs * ms, videoRateNs: rateMs * ms, audioRateNs: rateMs * ms)
    }

    @Test(arguments: [150.0, -150.0, 400.0, -60.0])
    func aPathDifferenceIsCorrectedWithoutOvershoot(naturalMs: Double) {
        // Streams that take a new delay as fast as video's playout time moves (100 ms a second),
        // and ones that take it only as fast as the step limit (80 ms a second). Audio takes it
        // faster: one pitch period (2.5-15 ms) per 20 ms packet.
        for rate in [100.0, 80.0] {
            var streams = Self.streams(naturalMs: naturalMs, rateMs: rate), sync = AudioVideoSync()
            let offsets = streams.run(&sync, updates: 12)
            let settleAt = abs(naturalMs) > 200 ? 9 : 5
            for (second, offset) in offsets.enumerated() {
                // Never past the other side by more than 10 ms.
                #expect(offset * naturalMs.sign.factor >= -10, "second \(second) at \(offset) ms, rate \(rate): \(offsets)")
                if second >= settleAt {
                    #expect(abs(offset) <= 20, "second \(second) at \(offset) ms, rate \(rate): \(offsets)")
                }
            }
            // The early stream carries the extra; the other has none.
            let early = naturalMs > 0 ? sync.videoExtraNs : sync.audioExtraNs
            let other = naturalMs > 0 ? sync.audioExtraNs : sync.videoExtraNs
            #expect(abs(early / Self.ms - abs(naturalMs)) <= 5 && other == 0, "\(sync)")
        }
    }

    @Test func noStepIsLargerThanTheLimit() {
        var streams = SimulatedStreams(naturalNs: 900 * Self.ms, videoRateNs: 1e12, audioRateNs: 1e12)
        var sync = AudioVideoSync()
        var last = 0.0
        for _ in 0..<20 {
            sync.update(offsetNs: streams.offset())
            streams.follow(sync)
            #expect(sync.videoExtraNs - last <= sync.maxStepNs + 1)
            last = sync.videoExtraNs
        }
        #expect(abs(sync.videoExtraNs - 900 * Self.ms) <= 10 * Self.ms)
    }

    @Test func oneLateMeasurementMovesTheExtraByAQuarterOfIt() {
        var streams = Self.streams(naturalMs: 150), sync = AudioVideoSync()
        streams.run(&sync, updates: 15)
        let before = sync.videoExtraNs
        // One render 100 ms late makes video look 100 ms later than it plays.
        sync.update(offsetNs: streams.offset(noiseNs: -100 * Self.ms))
        #expect(abs((sync.videoExtraNs - before) / Self.ms + 25) <= 1, "\(before / Self.ms) -> \(sync.videoExtraNs / Self.ms)")
        // Then it comes back.
        streams.follow(sync)
        streams.run(&sync, updates: 10)
        #expect(abs(streams.offset()) <= 5 * Self.ms)
    }

    /// Frames rendered as they complete take no extra delay: video late is corrected by delaying
    /// audio as before, audio late is left as it is (and no video extra piles up unused).
    @Test func whenVideoCannotWaitOnlyAudioIsDelayed() {
        for naturalMs in [150.0, -150.0] {
            var streams = Self.streams(naturalMs: naturalMs), sync = AudioVideoSync()
            sync.videoCanBeDelayed = false
            streams.run(&sync, updates: 12)
            #expect(sync.videoExtraNs == 0, "\(sync)")
            if naturalMs > 0 {
                #expect(sync.audioExtraNs == 0 && abs(streams.offset() / Self.ms - naturalMs) <= 1, "\(sync)")
            } else {
                #expect(abs(sync.audioExtraNs / Self.ms - 150) <= 5 && abs(streams.offset()) <= 5 * Self.ms, "\(sync)")
            }
        }
    }

    /// The dead band: a 20 ms offset either way is left as it is (no stream is delayed for it,
    /// so video keeps its latency), a 60 ms one is corrected to within 5 ms.
    @Test func anOffsetInsideTheDeadBandIsLeftAloneALargerOneIsCorrected() {
        for naturalMs in [20.0, -20.0] {
            var streams = Self.streams(naturalMs: naturalMs), sync = AudioVideoSync()
            let offsets = streams.run(&sync, updates: 10)
            #expect(sync.videoExtraNs == 0 && sync.audioExtraNs == 0, "\(naturalMs) ms: \(sync)")
            #expect(offsets.allSatisfy { abs($0 - naturalMs) < 0.001 }, "\(offsets)")
        }
        for naturalMs in [60.0, -60.0] {
            var streams = Self.streams(naturalMs: naturalMs), sync = AudioVideoSync()
            let offsets = streams.run(&sync, updates: 10)
            #expect(abs(streams.offset()) <= 5 * Self.ms, "\(naturalMs) ms: \(offsets)")
            #expect(!sync.isCorrecting, "settled: \(sync)")
        }
    }

    @Test func whenThePathsEvenOutTheExtraIsTakenBack() {
        var streams = Self.streams(naturalMs: 150), sync = AudioVideoSync()
        streams.run(&sync, updates: 12)
        streams.naturalNs = -50 * Self.ms  // now audio is early
        streams.run(&sync, updates: 12)
        #expect(sync.videoExtraNs <= 1 * Self.ms && abs(sync.audioExtraNs / Self.ms - 50) <= 5, "\(sync)")
        #expect(abs(streams.offset()) <= 5 * Self.ms)
    }
}

extension FloatingPointSign {
    fileprivate var factor: Double { self == .minus ? -1 : 1 }
}
