import Testing

@testable import MediaCore

@Suite struct NackTrackerTests {
    @Test func asksForMissingPacketsAtOnceThenOncePerRoundTrip() {
        let t = NackTracker(capacity: 64, maxTries: 3, minimumRetryIntervalNs: 20_000_000)
        t.packetArrived(100, nowNs: 0)
        t.packetArrived(104, nowNs: 1_000_000)
        var out: [UInt16] = []
        t.collect(nowNs: 2_000_000, rttNs: 50_000_000, into: &out)
        #expect(out == [101, 102, 103])
        out.removeAll()
        t.collect(nowNs: 30_000_000, rttNs: 50_000_000, into: &out)
        #expect(out.isEmpty, "not again before a round trip")
        t.packetArrived(102, nowNs: 40_000_000)
        t.collect(nowNs: 60_000_000, rttNs: 50_000_000, into: &out)
        #expect(out == [101, 103])
        #expect(t.counters.recovered == 1)
    }

    @Test func aPacketBeforeTheFirstCanBeExpected() {
        let t = NackTracker(capacity: 64, maxTries: 3, minimumRetryIntervalNs: 20_000_000)
        t.packetArrived(100, nowNs: 0)
        t.expectBefore(98)  // not adjacent: ignored
        t.expectBefore(99)
        var out: [UInt16] = []
        t.collect(nowNs: 1_000_000, rttNs: 30_000_000, into: &out)
        #expect(out == [99])
        t.expectBefore(98)  // the next one back once 99 is expected
        t.packetArrived(99, nowNs: 31_000_000)
        out.removeAll()
        t.collect(nowNs: 32_000_000, rttNs: 30_000_000, into: &out)
        #expect(out == [98])
        #expect(t.counters.recovered == 1 && t.roundTripEstimateNs == 30_000_000)
    }

    @Test func givesUpAfterMaxTries() {
        let t = NackTracker(capacity: 64, maxTries: 2, minimumRetryIntervalNs: 1)
        t.packetArrived(0, nowNs: 0)
        t.packetArrived(2, nowNs: 0)
        var out: [UInt16] = []
        var gaveUp = 0
        for k in 1...4 { gaveUp += t.collect(nowNs: UInt64(k) * 100, rttNs: 10, into: &out) }
        #expect(out == [1, 1])
        #expect(gaveUp == 1 && t.counters.givenUp == 1 && t.missingCount == 0)
    }

    @Test func forgetsWhatThePlayoutPassed() {
        let t = NackTracker(capacity: 64)
        t.packetArrived(10, nowNs: 0)
        t.packetArrived(20, nowNs: 0)
        #expect(t.missingCount == 9)
        t.forget(below: 15)
        #expect(t.missingCount == 5)
        var out: [UInt16] = []
        t.collect(nowNs: 1, rttNs: 0, into: &out)
        #expect(out == [15, 16, 17, 18, 19])
    }

    @Test func measuresRoundTripFromRequestToRetransmission() {
        let t = NackTracker(capacity: 64)
        t.packetArrived(1, nowNs: 0)
        t.packetArrived(3, nowNs: 0)
        var out: [UInt16] = []
        t.collect(nowNs: 1_000_000_000, rttNs: 0, into: &out)
        t.packetArrived(2, nowNs: 1_030_000_000)
        #expect(abs(t.roundTripEstimateNs - 30_000_000) < 1)
    }

    @Test func aJumpBeyondTheWindowStartsOver() {
        let t = NackTracker(capacity: 16)
        t.packetArrived(0, nowNs: 0)
        t.packetArrived(1000, nowNs: 0)
        #expect(t.missingCount == 0)
        t.packetArrived(1002, nowNs: 0)
        #expect(t.missingCount == 1)
    }
}
