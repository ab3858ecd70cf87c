import MediaCore
import Testing

@Suite struct RTCPReportScheduleTests {
    @Test func intervalsAreSpreadOverHalfToOneAndAHalfTimesTheNominalOne() {
        var schedule = RTCPReportSchedule(intervalMilliseconds: 500)
        let first = schedule.isDue(now: MonotonicTime(nanoseconds: 1_000))
        #expect(first, "the first report goes out at once")
        var now: UInt64 = 1_000
        var intervals: [UInt64] = []
        // Step a 1 ms clock and record when each report falls due.
        var last = now
        while intervals.count < 400 {
            now += 1_000_000
            if schedule.isDue(now: MonotonicTime(nanoseconds: now)) {
                intervals.append(now - last)
                last = now
            }
        }
        #expect(intervals.allSatisfy { $0 >= 250_000_000 && $0 <= 751_000_000 })
        let mean = Double(intervals.reduce(0, +)) / Double(intervals.count)
        #expect(abs(mean - 500_000_000) < 30_000_000, "mean \(mean / 1e6) ms")
        // Spread, not a fixed period: both halves of the range are used.
        #expect(intervals.contains { $0 < 400_000_000 } && intervals.contains { $0 > 600_000_000 })
    }

    @Test func notDueBeforeItsTime() {
        var schedule = RTCPReportSchedule(intervalMilliseconds: 100)
        let first = schedule.isDue(now: MonotonicTime(nanoseconds: 0))
        let early = schedule.isDue(now: MonotonicTime(nanoseconds: 49_000_000))
        let late = schedule.isDue(now: MonotonicTime(nanoseconds: 151_000_000))
        #expect(first)
        #expect(!early, "never sooner than half the interval")
        #expect(late, "never later than 1.5 times the interval")
    }
}
