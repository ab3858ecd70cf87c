// The frame-size-aware video jitter estimate on synthetic frames: sizes and completion times
// made from a known per-byte delay and a known jitter, so what the estimate should find is known.
import MediaCore
import MediaTestSupport
import Testing

@Suite struct VideoJitterEstimatorTests {
    /// A synthetic stream at 30 fps: frame k has RTP timestamp k x 3000 and completes at
    /// 1 s + k x 33.3 ms + `offset(k)` (its baseline arrival being 1 s + k x 33.3 ms).
    struct Stream {
        var estimator = VideoJitterEstimator()
        var frame = 0

        mutating func add(bytes: Int, offsetMs: Double, keyframe: Bool = false, repaired: Bool = false) {
            let baseNs = 1_000_000_000 + UInt64(frame) * 33_333_333
            let completed = baseNs + UInt64(max(0, offsetMs) * 1e6)
            estimator.frameCompleted(
                timestamp: UInt32(truncatingIfNeeded: frame * 3000), completedNs: completed, bytes: bytes,
                offsetNs: Double(completed - baseNs), isKeyframe: keyframe, repaired: repaired)
            frame += 1
        }
    }

    /// Delta frames of 5-15 kB leaving at 1 ms per kB (8 Mbit/s) plus a 2 ms path offset and
    /// ±1 ms of jitter: the slope converges near 1 ms/kB, the target covers a large frame's
    /// transmission plus the jitter and stays well below what 15 kB plus everything would be if
    /// added up twice.
    @Test func convergesOnThePerByteDelayAndTheJitter() {
        var s = Stream()
        var random = TestRandom(state: 7)
        var offsets: [Double] = []
        for _ in 0..<600 {
            let bytes = 5_000 + Int(Double.random(in: 0..<1, using: &random) * 10_000)
            let offset = 2 + Double(bytes) / 1_000 + (Double.random(in: 0..<1, using: &random) * 2 - 1)
            offsets.append(offset)
            s.add(bytes: bytes, offsetMs: offset)
        }
        let e = s.estimator
        let target = e.targetMilliseconds!
        print(
            "estimator on 5-15 kB at 1 ms/kB, ±1 ms: \(e.millisecondsPerByte * 1000) ms/kB, average \(e.averageFrameBytes!) B, "
                + "large \(e.largeFrameBytes) B, offset \(e.completionOffsetMilliseconds!) ms, jitter \(e.jitterMilliseconds) ms, target \(target) ms"
        )
        #expect(abs(e.millisecondsPerByte * 1000 - 1) < 0.2, "slope \(e.millisecondsPerByte * 1000) ms/kB")
        #expect(abs(e.averageFrameBytes! - 10_000) < 1_500)
        // An average frame completes at about 2 + 10 ms; the size-corrected jitter is the ±1 ms.
        #expect(abs(e.completionOffsetMilliseconds! - 12) < 1.5)
        #expect(e.jitterMilliseconds < 1.2)
        // Covers nearly every frame (the largest ones need 17 +- 1 ms), and not much more.
        let covered = offsets.suffix(300).filter { $0 <= target }.count
        #expect(covered >= 285, "\(covered) of 300 frames within \(target) ms")
        #expect(target < 20, "target \(target) ms")
    }

    /// A keyframe four times the delta frames' size completes 40 ms late, and the frame after it
    /// is queued behind it: the target stays where it was, while the keyframe still teaches the
    /// slope.
    @Test func aKeyframeAndTheFrameQueuedBehindItDoNotRaiseTheTarget() {
        var s = Stream()
        var random = TestRandom(state: 3)
        for _ in 0..<200 {
            let bytes = 9_000 + Int(Double.random(in: 0..<1, using: &random) * 2_000)
            s.add(bytes: bytes, offsetMs: Double(bytes) / 1_000 + Double.random(in: 0..<1, using: &random))
        }
        let before = s.estimator.targetMilliseconds!
        s.add(bytes: 40_000, offsetMs: 40, keyframe: true)
        s.add(bytes: 10_000, offsetMs: 25)  // left the pacer after the keyframe
        let after = s.estimator.targetMilliseconds!
        print("estimator before a keyframe \(before) ms, after it \(after) ms")
        #expect(before < 15)
        #expect(abs(after - before) < 1, "target \(before) -> \(after) ms")
    }

    /// One frame 150 ms late (a stall) moves the target by a few milliseconds at most; frames that
    /// waited for a retransmission are not measured at all; a lasting rise of the jitter is
    /// followed within a second.
    @Test func outliersMoveTheTargetLittleButALastingChangeIsFollowed() {
        var s = Stream()
        var random = TestRandom(state: 5)
        func steady(_ n: Int, jitter: Double) {
            for _ in 0..<n { s.add(bytes: 8_000, offsetMs: 8 + Double.random(in: 0..<1, using: &random) * jitter) }
        }
        steady(200, jitter: 2)
        let calm = s.estimator.targetMilliseconds!
        s.add(bytes: 8_000, offsetMs: 300, repaired: true)
        #expect(s.estimator.targetMilliseconds! == calm, "a repaired frame is not measured")
        s.add(bytes: 8_000, offsetMs: 150)
        let afterStall = s.estimator.targetMilliseconds!
        #expect(afterStall - calm < 5, "one stall: \(calm) -> \(afterStall) ms")
        steady(30, jitter: 30)
        let jittery = s.estimator.targetMilliseconds!
        print("estimator calm \(calm) ms, after one stall \(afterStall) ms, after 1 s of 0-30 ms jitter \(jittery) ms")
        // 0-30 ms uniform: mean 23 ms with the 8 ms, deviation 8.7 ms.
        #expect(jittery > 30, "target \(jittery) ms after 1 s of 0-30 ms jitter")
    }

    /// Before any measurement there is no target; a reset forgets everything.
    @Test func noTargetBeforeAMeasurementOrAfterAReset() {
        var s = Stream()
        #expect(s.estimator.targetMilliseconds == nil)
        s.add(bytes: 30_000, offsetMs: 30, keyframe: true)
        #expect(s.estimator.targetMilliseconds == nil, "a keyframe alone is not measured")
        s.add(bytes: 5_000, offsetMs: 8)
        s.add(bytes: 5_000, offsetMs: 6)
        #expect(s.estimator.targetMilliseconds != nil)
        s.estimator.reset()
        #expect(s.estimator.targetMilliseconds == nil)
    }
}
