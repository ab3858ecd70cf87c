import MediaCore
// Consent freshness and failover of the selected pair (`ICEConsent`) on fixed instants, with no
// agent, socket or clock: when consent checks fall due, when the selected pair fails over and to
// which pair, and when consent expires.
import Testing

@Suite struct ICEConsentTests {
    static let t0 = MonotonicTime(nanoseconds: 1_000_000_000)
    static func at(_ ms: Int) -> MonotonicTime { t0 + .milliseconds(ms) }

    /// A pair from `local` (relayed through TURN client 0 when `relayed`) to `remote`, valid and
    /// answered at `answeredAt` milliseconds when given.
    func pair(_ local: String, _ remote: String, relayed: Bool = false, priority: UInt64, answeredAt: Int? = nil) throws
        -> ICECandidatePair
    {
        let l = try SocketAddress(parsing: local, defaultPort: 0)
        let r = try SocketAddress(parsing: remote, defaultPort: 0)
        let lc = ICECandidate(foundation: "1", priority: 1, address: l, type: relayed ? .relay : .host)
        let p = ICECandidatePair(
            local: ICELocalCandidate(candidate: lc, base: l, relay: relayed ? 0 : nil),
            remote: ICECandidate(foundation: "2", priority: 1, address: r, type: .host))
        p.priority = priority
        if let answeredAt {
            p.valid = true
            p.state = .succeeded
            p.lastResponseAt = Self.at(answeredAt)
        }
        return p
    }

    /// The seeded jitter draws exactly what a generator with the same seed draws: 250 ms times
    /// 0.8...1.2 at the full pace, 2500 ms times it while quiet.
    @Test func consentChecksAreDueAtTheJitteredInterval() throws {
        let config = ICEAgentConfiguration(controlling: true)
        var consent = ICEConsent(configuration: config, jitter: SeededGenerator(seed: 7))
        var mirror = SeededGenerator(seed: 7)
        func expected(_ base: Double) -> Duration {
            .nanoseconds(Int64(base * Double.random(in: 0.8...1.2, using: &mirror) * 1e6))
        }
        let p = try pair("10.0.0.1:1000", "10.0.0.2:2000", priority: 10, answeredAt: 0)
        p.nextKeepaliveAt = Self.at(100)
        let outcome1 = consent.dueChecks([p], now: Self.at(99)).isEmpty
        #expect(outcome1)
        let due = consent.dueChecks([p], now: Self.at(100))
        #expect(due.count == 1 && due[0] === p)
        let next = Self.at(100) + expected(250)
        #expect(p.nextKeepaliveAt == next)
        #expect(next >= Self.at(300) && next <= Self.at(400))
        // Quiet: the next interval is ten times as long; leaving quiet makes a check due at once.
        let outcome2 = consent.setQuiet(true, pairs: [p], now: Self.at(150))
        #expect(outcome2)
        let outcome3 = !consent.setQuiet(true, pairs: [p], now: Self.at(150))
        #expect(outcome3)
        let outcome4 = consent.dueChecks([p], now: next).count == 1
        #expect(outcome4)
        #expect(p.nextKeepaliveAt == next + expected(2500))
        let outcome5 = consent.setQuiet(false, pairs: [p], now: Self.at(1000))
        #expect(outcome5)
        #expect(p.nextKeepaliveAt == Self.at(1000))
        #expect(consent.wokeAt == Self.at(1000))
    }

    /// While a direct pair works, a relayed pair gets no consent check unless it is selected.
    @Test func relayedPairsAreLeftAloneWhileADirectPairWorks() throws {
        var consent = ICEConsent(configuration: ICEAgentConfiguration(controlling: true), jitter: SeededGenerator(seed: 1))
        let direct = try pair("10.0.0.1:1000", "10.0.0.2:2000", priority: 10, answeredAt: 0)
        let relayed = try pair("203.0.113.5:3000", "10.0.0.2:2000", relayed: true, priority: 5, answeredAt: 0)
        var due = consent.dueChecks([direct, relayed], now: Self.at(10))
        #expect(due.map { $0 === direct } == [true])
        // The direct pair stops answering (failover time 1 s): the relayed one is checked again.
        due = consent.dueChecks([direct, relayed], now: Self.at(1000))
        #expect(due.count == 2)
        // Selected, a relayed pair keeps its consent checks.
        let other = try pair("203.0.113.5:3000", "10.0.0.3:2000", relayed: true, priority: 4, answeredAt: 1000)
        direct.lastResponseAt = Self.at(1000)
        let outcome6 = consent.select(other, now: Self.at(1000))
        #expect(outcome6)
        let outcome7 = !consent.select(other, now: Self.at(1000))
        #expect(outcome7)
        due = consent.dueChecks([direct, relayed, other], now: Self.at(1500))
        #expect(due.contains { $0 === other } && !due.contains { $0 === relayed })
    }

    /// The selected pair fails over after more than 1 s without an answer (counted from its
    /// selection when later), to the best usable other pair (direct before relayed).
    @Test func aSilentSelectedPairFailsOverToTheBestUsablePair() throws {
        var consent = ICEConsent(configuration: ICEAgentConfiguration(controlling: true))
        let a = try pair("10.0.0.1:1000", "10.0.0.2:2000", priority: 30, answeredAt: 0)
        let b = try pair("10.0.0.1:1000", "10.0.0.3:2000", priority: 20, answeredAt: 900)
        let r = try pair("203.0.113.5:3000", "10.0.0.2:2000", relayed: true, priority: 90, answeredAt: 950)
        let outcome8 = consent.select(a, now: Self.at(200))
        #expect(outcome8)
        #expect(a.selectedAt == Self.at(200))
        guard case .steady = consent.supervise([a, b, r], now: Self.at(1200)) else {
            Issue.record("failed over within the failover time")
            return
        }
        guard case .failover(let next) = consent.supervise([a, b, r], now: Self.at(1201)) else {
            Issue.record("no failover after the failover time")
            return
        }
        #expect(next === b)
        #expect(a.failedOver && a.state == .failed)
        #expect(!consent.isUsable(a, now: Self.at(1201)))
        // Nothing else usable: the caller is told so.
        var lone = ICEConsent(configuration: ICEAgentConfiguration(controlling: false))
        let c = try pair("10.0.0.1:1000", "10.0.0.4:2000", priority: 1, answeredAt: 0)
        _ = lone.select(c, now: Self.at(0))
        guard case .noUsablePair = lone.supervise([c], now: Self.at(1001)) else {
            Issue.record("expected no usable pair")
            return
        }
        // Quiet: the pair may stay silent for 6 s.
        var quiet = ICEConsent(configuration: ICEAgentConfiguration(controlling: false))
        let d = try pair("10.0.0.1:1000", "10.0.0.5:2000", priority: 1, answeredAt: 0)
        _ = quiet.select(d, now: Self.at(0))
        _ = quiet.setQuiet(true, pairs: [d], now: Self.at(0))
        guard case .steady = quiet.supervise([d], now: Self.at(6000)) else {
            Issue.record("a quiet pair failed over within 6 s")
            return
        }
        guard case .noUsablePair = quiet.supervise([d], now: Self.at(6001)) else {
            Issue.record("a quiet pair did not fail over after 6 s")
            return
        }
    }

    /// With no answer on any pair for `consentExpirySeconds` (here 1.5 s), consent expires and
    /// every valid pair is failed over; with no pair selected, nothing happens.
    @Test func consentExpiresWhenNoPairAnswers() throws {
        var config = ICEAgentConfiguration(controlling: true)
        config.consentExpirySeconds = 1.5
        config.failoverAfterMilliseconds = 60_000
        var consent = ICEConsent(configuration: config)
        let a = try pair("10.0.0.1:1000", "10.0.0.2:2000", priority: 30, answeredAt: 0)
        let b = try pair("10.0.0.1:1000", "10.0.0.3:2000", priority: 20, answeredAt: 400)
        guard case .steady = consent.supervise([a, b], now: Self.at(5000)) else {
            Issue.record("consent expired with no pair selected")
            return
        }
        _ = consent.select(a, now: Self.at(0))
        guard case .steady = consent.supervise([a, b], now: Self.at(1900)) else {
            Issue.record("consent expired within 1.5 s of the last answer")
            return
        }
        #expect(!a.failedOver && !b.failedOver)
        guard case .expired = consent.supervise([a, b], now: Self.at(1901)) else {
            Issue.record("consent did not expire 1.5 s after the last answer")
            return
        }
        #expect(a.failedOver && b.failedOver)
        let outcome9 = consent.deselect()
        #expect(outcome9)
        #expect(consent.selected == nil)
        let outcome10 = !consent.deselect()
        #expect(outcome10)
    }
}
