// Consent freshness (RFC 7675) and the selected pair of an ICE agent, as a state machine with no
// I/O: the agent asks it, on each tick, which valid pairs are due a consent check and what the
// silence of the selected pair means (nothing, a failover to another pair, or consent lost), and
// sends and selects accordingly. Every answer depends only on the pairs and `now` it is given.
import MediaBase

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The consent and selection state of one agent: the selected pair, the keepalive pace (full or
/// quiet) with its jitter, the silence that fails a pair over and the silence that ends consent.
/// Thread rule: a value on the agent's context. Cost: a pass over the pairs per tick.
package struct ICEConsent {
    /// What the selected pair's silence calls for (`supervise`). Thread rule: a value type.
    package enum Verdict {
        /// Nothing: the selected pair answers, or there is none.
        case steady
        /// No pair answered for `consentExpirySeconds`: every valid pair is failed over; the
        /// route must go (RFC 7675 §5.1).
        case expired
        /// The selected pair went silent and is failed; `pair` is the best usable other one.
        case failover(to: ICECandidatePair)
        /// The selected pair went silent and is failed, and no other pair is usable.
        case noUsablePair
    }

    /// Consent checks on valid pairs, milliseconds between them (before the jitter).
    package let keepaliveIntervalMilliseconds: Int
    /// The same while quiet.
    package let quietKeepaliveIntervalMilliseconds: Int
    /// The silence that fails the selected pair over.
    package let failoverAfterNormally: Duration
    /// The same while quiet.
    package let failoverAfterQuietly: Duration
    /// With no answer on any pair for this long, consent is lost.
    package let consentExpirySeconds: Double
    /// The pair media uses now (nil: none yet, or consent lost).
    package private(set) var selected: ICECandidatePair?
    /// Whether the slower, quiet pace is in force (`setQuiet`).
    package private(set) var quiet = false
    /// When the agent last left quiet: the failover window starts no earlier.
    package private(set) var wokeAt = MonotonicTime.zero
    /// The keepalive jitter's generator when seeded (else the system's).
    private var jitter: SeededGenerator?

    /// Consent for an agent with `configuration`; `jitter`: the seeded generator of a repeatable
    /// run (nil: the system's). Cost: none.
    package init(configuration: ICEAgentConfiguration, jitter: SeededGenerator? = nil) {
        keepaliveIntervalMilliseconds = configuration.keepaliveIntervalMilliseconds
        quietKeepaliveIntervalMilliseconds = configuration.quietKeepaliveIntervalMilliseconds
        failoverAfterNormally = configuration.failoverAfter
        failoverAfterQuietly = .milliseconds(max(1, configuration.quietFailoverAfterMilliseconds))
        consentExpirySeconds = configuration.consentExpirySeconds
        self.jitter = jitter
    }

    /// The silence after which a selected pair fails over (longer while quiet).
    package var failoverAfter: Duration { quiet ? failoverAfterQuietly : failoverAfterNormally }

    /// The time until a valid pair's next consent check: the interval in force times 0.8...1.2.
    /// Cost: one draw from the generator.
    package mutating func keepaliveInterval() -> Duration {
        let base = quiet ? quietKeepaliveIntervalMilliseconds : keepaliveIntervalMilliseconds
        let factor = jitter != nil ? Double.random(in: 0.8...1.2, using: &jitter!) : Double.random(in: 0.8...1.2)
        let ms = Double(max(10, base)) * factor
        return .nanoseconds(Int64(ms * 1e6))
    }

    /// Usable now: valid, not failed over, and answered within the failover time.
    package func isUsable(_ p: ICECandidatePair, now: MonotonicTime) -> Bool {
        p.valid && !p.failedOver && now - max(p.lastResponseAt, wokeAt) < failoverAfter
    }

    /// Makes `pair` the selected pair as of `now`; false when it already was.
    package mutating func select(_ pair: ICECandidatePair, now: MonotonicTime) -> Bool {
        guard pair !== selected else { return false }
        selected = pair
        pair.selectedAt = now
        return true
    }

    /// Clears the selection; false when there was none.
    package mutating func deselect() -> Bool {
        guard selected != nil else { return false }
        selected = nil
        return true
    }

    /// The slower pace, or the full one again (`ICEAgent.setQuiet`). Leaving quiet makes a
    /// consent check due at once on every valid pair of `pairs` and starts the failover window
    /// at `now`. False when nothing changed.
    package mutating func setQuiet(_ quiet: Bool, pairs: [ICECandidatePair], now: MonotonicTime) -> Bool {
        guard self.quiet != quiet else { return false }
        self.quiet = quiet
        if !quiet {
            for p in pairs where p.valid { p.nextKeepaliveAt = now }
            wokeAt = now
        }
        return true
    }

    /// The pairs of `pairs` due a consent check at `now`, in order, each given its next time:
    /// every valid pair (failed-over ones too, so they can recover), but none through a relay
    /// while a direct pair works, except the selected one.
    package mutating func dueChecks(_ pairs: [ICECandidatePair], now: MonotonicTime) -> [ICECandidatePair] {
        let directWorks = pairs.contains { !$0.usesRelay && isUsable($0, now: now) }
        var due: [ICECandidatePair] = []
        for p in pairs where p.valid && now >= p.nextKeepaliveAt && !(directWorks && p.usesRelay && p !== selected) {
            p.nextKeepaliveAt = now + keepaliveInterval()
            due.append(p)
        }
        return due
    }

    /// What silence means at `now`: with no answer on any of `pairs` for `consentExpirySeconds`
    /// while a pair is selected, every valid pair is failed over (`expired`; the caller
    /// deselects); a selected pair silent for `failoverAfter` (counted from its selection or the
    /// wake-up when later) is marked failed, and the best other usable pair is named.
    package func supervise(_ pairs: [ICECandidatePair], now: MonotonicTime) -> Verdict {
        let latest = pairs.map(\.lastResponseAt).max() ?? .zero
        if selected != nil, latest > .zero, (now - latest).inSeconds > consentExpirySeconds {
            for p in pairs where p.valid { p.failedOver = true }
            return .expired
        }
        guard let s = selected else { return .steady }
        guard now - max(s.lastResponseAt, s.selectedAt, wokeAt) > failoverAfter else { return .steady }
        s.failedOver = true
        s.state = .failed
        guard let next = pairs.filter({ $0 !== s && isUsable($0, now: now) }).max(by: { $1.isBetter(than: $0) }) else {
            return .noUsablePair
        }
        return .failover(to: next)
    }
}
