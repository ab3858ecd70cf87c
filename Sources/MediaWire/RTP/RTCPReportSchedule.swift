import MediaBase

/// When the next regular RTCP report is due: RFC 3550 §6.3.1 randomizes each interval uniformly
/// between 0.5 and 1.5 times the nominal one, so that participants that started together do not
/// keep sending their reports in lockstep. (The §6.3.1 division by e - 3/2 belongs to timer
/// reconsideration for large groups, which a two-party leg does not need; the mean interval
/// stays the nominal one.)
/// Thread rule: a value type owned by the thread that sends the reports. Cost: one random number
/// per report.
public struct RTCPReportSchedule: Sendable {
    /// The mean interval between reports.
    public var nominalInterval: Duration { .nanoseconds(Int64(nominalIntervalNs)) }
    private let nominalIntervalNs: UInt64
    /// When the next report is due; `.zero` before the first one, which is due at once.
    public var nextDue: MonotonicTime { MonotonicTime(nanoseconds: nextDueNs) }
    private var nextDueNs: UInt64 = 0
    /// The seeded source of the intervals (`init(intervalMilliseconds:seed:)`); nil: the system
    /// generator.
    private var seeded: SeededGenerator?

    /// A schedule with the given mean interval.
    public init(intervalMilliseconds: Double) {
        precondition(intervalMilliseconds > 0, "RTCP report interval must be positive")
        nominalIntervalNs = UInt64(intervalMilliseconds * 1e6)
    }

    /// A schedule whose intervals come from a generator seeded with `seed`: the same seed and
    /// the same `isDue` calls give the same report times (simulated-time tests). Cost: as the
    /// unseeded schedule.
    package init(intervalMilliseconds: Double, seed: UInt64) {
        self.init(intervalMilliseconds: intervalMilliseconds)
        seeded = SeededGenerator(seed: seed)
    }

    /// True when a report is due at `now`; it then draws the next interval from
    /// [0.5, 1.5] x the nominal one.
    public mutating func isDue(now: MonotonicTime) -> Bool {
        let nowNs = now.nanoseconds
        guard nowNs >= nextDueNs else { return false }
        let range = nominalIntervalNs / 2...nominalIntervalNs + nominalIntervalNs / 2
        let interval: UInt64
        if seeded != nil {
            interval = UInt64.random(in: range, using: &seeded!)
        } else {
            var rng = SystemRandomNumberGenerator()
            interval = UInt64.random(in: range, using: &rng)
        }
        nextDueNs = nowNs + interval
        return true
    }
}
