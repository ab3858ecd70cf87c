import MediaCore
import Testing

/// `MonotonicTime` arithmetic and settings in seconds turned into durations.
@Suite struct MonotonicTimeTests {
    /// Readings never go backwards; differences are durations and adding one moves a reading.
    @Test func readingsSubtractToDurationsAndMove() {
        let a = MonotonicTime.now, b = MonotonicTime.now
        #expect(b >= a && b - a >= .zero)
        let later = a + .milliseconds(20)
        #expect(later - a == .milliseconds(20) && later.nanoseconds(since: a) == 20_000_000)
        #expect((later - .milliseconds(20)) == a)
        #expect(Duration.milliseconds(1500).inNanoseconds == 1_500_000_000 && Duration.milliseconds(1500).inSeconds == 1.5)
    }

    /// A setting in seconds never traps: infinity, NaN and huge values become a hundred years,
    /// which a reading can still be moved by; ordinary values convert exactly.
    @Test func settingsInSecondsAreClampedNotTrapped() {
        #expect(Duration.seconds(clamping: 2.5) == .milliseconds(2500))
        #expect(Duration.seconds(clamping: .infinity) == .longestSetting)
        #expect(Duration.seconds(clamping: .nan) == .longestSetting)
        #expect(Duration.seconds(clamping: 1e300) == .longestSetting)
        #expect(Duration.seconds(clamping: -.infinity) == .zero - .longestSetting)
        let far = MonotonicTime.now + .seconds(clamping: .infinity)
        #expect(far > MonotonicTime.now)
    }
}
