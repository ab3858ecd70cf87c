import MediaCore
import Testing

@Suite struct NackTrackerTests {
    @Test func asksForMissingPacketsAtOnceThenOncePerRoundTrip() {
        let t = NackTracker(capacity: 64, maxTries: 3, minimumRetryInterval: .milliseconds(20))
        t.packetArrived(100, now: MonotonicTime(nanoseconds: 0))
        t.packetArrived(104, now: MonotonicTime(nanoseconds: 1_000_000))
        var out: [UInt16] = []
        t.collect(now: MonotonicTime(nanoseconds: 2_000_000), roundTrip: .nanoseconds(50_000_000), into: &out)
        #expect(out == [101, 102, 103])
        out.removeAll()
        t.collect(now: MonotonicTime(nanoseconds: 30_000_000), roundTrip: .nanoseconds(50_000_000), into: &out)
        #expect(out.isEmpty, "not again before a round trip")
        t.packetArrived(102, now: MonotonicTime(nanoseconds: 40_000_000))
        t.collect(now: MonotonicTime(nanoseconds: 60_000_000), roundTrip: .nanoseconds(50_000_000), into: &out)
        #expect(out == [101, 103])
        #expect(t.counters.recovered == 1)
    }

    @Test func aPacketBeforeTheFirstCanBeExpected() {
        let t = NackTracker(capacity: 64, maxTries: 3, minimumRetryInterval: .milliseconds(20))
        t.packetArrived(100, now: MonotonicTime(nanoseconds: 0))
        t.expectBefore(98)  // not adjacent: ignored
        t.expectBefore(99)
        var out: [UInt16] = []
        t.collect(now: MonotonicTime(nanoseconds: 1_000_000), roundTrip: .nanoseconds(30_000_000), into: &out)
        #expect(out == [99])
        t.expectBefore(98)  // the next one back once 99 is expected
        t.packetArrived(99, now: MonotonicTime(nanoseconds: 31_000_000))
        out.removeAll()
        t.collect(now: MonotonicTime(nanoseconds: 32_000_000), roundTrip: .nanoseconds(30_000_000), into: &out)
        #expect(out == [98])
        #expect(t.counters.recovered == 1 && t.roundTripEstimate == .milliseconds(30))
    }

    @Test func givesUpAfterMaxTries() {
        let t = NackTracker(capacity: 64, maxTries: 2, minimumRetryInterval: .nanoseconds(1))
        t.packetArrived(0, now: MonotonicTime(nanoseconds: 0))
        t.packetArrived(2, now: MonotonicTime(nanoseconds: 0))
        var out: [UInt16] = []
        var gaveUp = 0
        for k in 1...4 {
            gaveUp += t.collect(now: MonotonicTime(nanoseconds: UInt64(k) * 100), roundTrip: .nanoseconds(10), into: &out)
        }
        #expect(out == [1, 1])
        #expect(gaveUp == 1 && t.counters.givenUp == 1 && t.missingCount == 0)
    }

    @Test func forgetsWhatThePlayoutPassed() {
        let t = NackTracker(capacity: 64)
        t.packetArrived(10, now: MonotonicTime(nanoseconds: 0))
        t.packetArrived(20, now: MonotonicTime(nanoseconds: 0))
        #expect(t.missingCount == 9)
        t.forget(below: 15)
        #expect(t.missingCount == 5)
        var out: [UInt16] = []
        t.collect(now: MonotonicTime(nanoseconds: 1), roundTrip: .nanoseconds(0), into: &out)
        #expect(out == [15, 16, 17, 18, 19])
    }

    @Test func measuresRoundTripFromRequestToRetransmission() {
        let t = NackTracker(capacity: 64)
        t.packetArrived(1, now: MonotonicTime(nanoseconds: 0))
        t.packetArrived(3, now: MonotonicTime(nanoseconds: 0))
        var out: [UInt16] = []
        t.collect(now: MonotonicTime(nanoseconds: 1_000_000_000), roundTrip: .nanoseconds(0), into: &out)
        t.packetArrived(2, now: MonotonicTime(nanoseconds: 1_030_000_000))
        #expect(abs(t.roundTripEstimateNs - 30_000_000) < 1)
    }

    @Test func aJumpBeyondTheWindowStartsOver() {
        let t = NackTracker(capacity: 16)
        t.packetArrived(0, now: MonotonicTime(nanoseconds: 0))
        t.packetArrived(1000, now: MonotonicTime(nanoseconds: 0))
        #expect(t.missingCount == 0)
        t.packetArrived(1002, now: MonotonicTime(nanoseconds: 0))
        #expect(t.missingCount == 1)
    }
}
