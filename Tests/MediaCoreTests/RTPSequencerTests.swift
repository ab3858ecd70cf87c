import MediaCore
import Testing

@Suite struct RTPSequencerTests {
    @Test func randomStartIsInTheLowerHalf() {
        for _ in 0..<1000 { #expect(RTPSequencer().nextSequenceNumber < 0x8000) }
    }

    @Test func rollsOverFrom65535ToZeroAndCountsROC() {
        var s = RTPSequencer(initial: 65534)
        #expect(s.rolloverCount == 0)
        #expect(s.next() == 65534)
        #expect(s.rolloverCount == 0)
        #expect(s.next() == 65535)
        #expect(s.rolloverCount == 0)
        #expect(s.next() == 0)
        #expect(s.rolloverCount == 1)
        #expect(s.nextExtendedSequenceNumber == 0x1_0001)
        // Every wrap adds exactly one to the ROC.
        for cycle in 2...5 {
            for _ in 0..<65535 { _ = s.next() }
            #expect(s.nextSequenceNumber == 0)
            #expect(s.rolloverCount == UInt32(cycle - 1))
            #expect(s.next() == 0)
            #expect(s.rolloverCount == UInt32(cycle))
        }
    }

    @Test func everyStartValueIncrementsByOne() {
        for start in stride(from: 0, through: 65535, by: 257) {
            var s = RTPSequencer(initial: UInt16(start))
            let a = s.next(), b = s.next()
            #expect(b == a &+ 1)
        }
    }

    @Test func videoClockHasNoDriftAt30fps() {
        // 30 fps at 33_333_333 ns per frame: accumulating 3000 per frame would drift; from the
        // origin the timestamp of frame n is round(n * 33_333_333 ns * 90 kHz).
        var c = RTPClock(rate: RTPClock.videoRate, initialTimestamp: 1000)
        let origin: Int64 = 5_000_000_000
        for n in Int64(0)..<100_000 {
            let ns = origin + n * 1_000_000_000 / 30
            let ts = c.timestamp(captureNs: ns)
            let exact = (Double(n) / 30.0 * 90_000).rounded()
            #expect(ts == 1000 &+ UInt32(truncatingIfNeeded: Int64(exact)), "frame \(n)")
            if ts != 1000 &+ UInt32(truncatingIfNeeded: Int64(exact)) { break }
        }
    }

    @Test func opusClockAdvances960Per20ms() {
        var c = RTPClock(rate: RTPClock.opusRate, initialTimestamp: UInt32.max - 959)
        #expect(c.timestamp(captureNs: 7) == UInt32.max - 959)
        #expect(c.timestamp(captureNs: 7 + 20_000_000) == 0)  // wraps
        #expect(c.timestamp(captureNs: 7 + 40_000_000) == 960)
        // A day later, still exact.
        #expect(
            c.timestamp(captureNs: 7 + 86_400 * 1_000_000_000) == (UInt32.max - 959)
                &+ UInt32(truncatingIfNeeded: Int64(86_400 * 48_000)))
    }

    @Test func clockHandlesCaptureBeforeOriginAndHugeSpans() {
        var c = RTPClock(rate: 90_000, initialTimestamp: 0, originNs: 10_000_000_000)
        #expect(c.timestamp(captureNs: 10_000_000_000 - 1_000_000_000) == UInt32(bitPattern: -90_000))
        // 100 days of nanoseconds times 90 kHz would overflow Int64 if multiplied directly.
        let t = c.ticks(sinceOriginTo: 10_000_000_000 + 100 * 86_400 * 1_000_000_000)
        #expect(t == 100 * 86_400 * 90_000)
    }

    @Test func randomInitialTimestampDiffers() {
        let a = (0..<8).map { _ in RTPClock(rate: 90_000).initialTimestamp }
        #expect(Set(a).count > 1)
    }
}
