// Where the media engine's threads read the time. Production reads CLOCK_MONOTONIC directly; a
// stream driven by a test reads the test's simulated clock instead, so pacing, send times, RTCP
// and the bandwidth estimate follow simulated time exactly.

/// The clock a send stream, its pacer and its RTCP endpoint read: `CLOCK_MONOTONIC` (`.monotonic`,
/// the default) or any other source of `MonotonicTime` (a simulated clock driving the stream).
///
/// Thread rule: a value type; `now` may be read from any thread the source allows (the monotonic
/// clock: any). Cost: `.monotonic` is one `clock_gettime` (vDSO), as `MonotonicTime.now`; another
/// source adds one indirect call.
package struct EngineClock: Sendable {
    private let source: (@Sendable () -> MonotonicTime)?

    /// The host's `CLOCK_MONOTONIC`, with the wall clock (`CLOCK_REALTIME`) for NTP times.
    package static let monotonic = EngineClock(source: nil)

    private init(source: (@Sendable () -> MonotonicTime)?) { self.source = source }

    /// A clock that reads `source`; its NTP time is `source` counted from a fixed instant, so
    /// round trips measured from sender reports are in the source's time too.
    package init(_ source: @escaping @Sendable () -> MonotonicTime) { self.source = source }

    /// A clock that reads `scheduler.now` (a simulated clock in tests).
    package init(_ scheduler: some TaskScheduler) { self.init { scheduler.now } }

    /// Whether this is the host's monotonic clock.
    package var isMonotonic: Bool { source == nil }

    /// The current time.
    @inline(__always) package var now: MonotonicTime {
        if let source { return source() }
        return .now
    }

    /// The current time as NTP time (RFC 3550 §4): the wall clock for `.monotonic`; for another
    /// source, its reading counted from 2023-11-14 22:13:20 UTC (Unix time 1,700,000,000 s).
    package var ntpNow: NTPTime {
        guard let source else { return NTPTime.wallClock() }
        return NTPTime(unixNanoseconds: 1_700_000_000_000_000_000 &+ source().nanoseconds)
    }
}
