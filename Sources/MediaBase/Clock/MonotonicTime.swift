#if canImport(Glibc)
    import Glibc
#endif

/// A reading of the system's monotonic clock (`CLOCK_MONOTONIC`), in nanoseconds since an
/// unspecified start (the machine's boot): the one time type of the engine and the session.
/// Packet arrivals (kernel receive timestamps), send and capture times, render deadlines and
/// every timer read this clock, so readings from any thread compare and subtract directly.
/// Differences are `Duration`s (`later - earlier`), and `time + .milliseconds(20)` moves one.
///
/// It is not wall-clock time: it does not jump when the date is set and is meaningless across
/// machines or reboots. RTCP's NTP times are separate (`NTPTime`).
///
/// Thread rule: a value; `now` may be read from any thread. Cost: `now` is one `clock_gettime`
/// (a vDSO call, about 20 ns); the arithmetic is integer arithmetic; nothing allocates.
public struct MonotonicTime: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Nanoseconds on `CLOCK_MONOTONIC`.
    public var nanoseconds: UInt64

    /// The reading `nanoseconds` on `CLOCK_MONOTONIC` (for example a kernel timestamp).
    @inlinable public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    /// The clock's start; earlier than every real reading. Useful as "never" for a last-seen time.
    public static let zero = MonotonicTime(nanoseconds: 0)

    /// The clock now.
    @inlinable public static var now: MonotonicTime {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return MonotonicTime(nanoseconds: UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec))
    }

    /// Signed nanoseconds from `earlier` to this reading (negative when `earlier` is later):
    /// the cheap form of `self - earlier` for per-packet arithmetic.
    @inlinable public func nanoseconds(since earlier: MonotonicTime) -> Int64 {
        Int64(bitPattern: nanoseconds &- earlier.nanoseconds)
    }

    /// Seconds since the clock's start, for logs and ratios.
    @inlinable public var seconds: Double { Double(nanoseconds) / 1e9 }

    /// This reading moved by `nanoseconds` (negative moves it back; stops at `zero`).
    @inlinable public func advanced(byNanoseconds delta: Int64) -> MonotonicTime {
        if delta >= 0 { return MonotonicTime(nanoseconds: nanoseconds &+ UInt64(delta)) }
        let back = delta.magnitude
        return MonotonicTime(nanoseconds: back >= nanoseconds ? 0 : nanoseconds - back)
    }

    /// Whether `a` is earlier than `b`.
    @inlinable public static func < (a: MonotonicTime, b: MonotonicTime) -> Bool { a.nanoseconds < b.nanoseconds }

    /// The time from `b` to `a`.
    @inlinable public static func - (a: MonotonicTime, b: MonotonicTime) -> Duration {
        .nanoseconds(a.nanoseconds(since: b))
    }

    /// `t` moved forward by `d`.
    @inlinable public static func + (t: MonotonicTime, d: Duration) -> MonotonicTime {
        t.advanced(byNanoseconds: d.inNanoseconds)
    }

    /// `t` moved back by `d`.
    @inlinable public static func - (t: MonotonicTime, d: Duration) -> MonotonicTime {
        t.advanced(byNanoseconds: -d.inNanoseconds)
    }

    /// Moves `t` forward by `d`.
    @inlinable public static func += (t: inout MonotonicTime, d: Duration) { t = t + d }

    /// Seconds with nanosecond digits, for logs.
    public var description: String {
        let s = nanoseconds / 1_000_000_000, ns = nanoseconds % 1_000_000_000
        let digits = String(ns)
        return "\(s).\(String(repeating: "0", count: 9 - digits.count))\(digits) s"
    }
}

extension Duration {
    /// The duration in whole nanoseconds (truncated; saturates at `Int64`'s range, about 292
    /// years).
    @inlinable public var inNanoseconds: Int64 {
        let (s, atto) = components
        let (ns, overflow) = s.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return s < 0 ? .min : .max }
        let (sum, o2) = ns.addingReportingOverflow(atto / 1_000_000_000)
        return o2 ? (ns < 0 ? .min : .max) : sum
    }

    /// The duration in seconds, as a `Double`.
    @inlinable public var inSeconds: Double {
        let (s, atto) = components
        return Double(s) + Double(atto) / 1e18
    }

    /// Longest interval a setting in seconds becomes: a hundred years, still far from
    /// overflowing a `MonotonicTime` it is added to.
    package static let longestSetting = Duration.seconds(100 * 365 * 86_400)

    /// A setting in seconds (`Double`, as apps and configurations give them) as a duration, kept
    /// within `longestSetting` either way: infinity and NaN become a hundred years, where
    /// `Duration.seconds(_:)` or `Int64(_:)` would trap. Cost: a few comparisons.
    package static func seconds(clamping seconds: Double) -> Duration {
        let limit = longestSetting.inSeconds
        guard !seconds.isNaN, seconds < limit else { return longestSetting }
        guard seconds > -limit else { return .zero - longestSetting }
        return .seconds(seconds)
    }
}
