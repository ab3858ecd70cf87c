import MediaCore
// Connectivity checks and nomination (`ICEChecks`) on fixed instants, with no agent, socket or
// clock: which pair is checked when (priority, triggered checks, Ta, the relay hold), the
// retransmission schedule of a check, what the probe budget withholds, and what is sent.
import Testing

@Suite struct ICECheckSchedulingTests {
    static let t0 = MonotonicTime(nanoseconds: 1_000_000_000)
    static func at(_ ms: Int) -> MonotonicTime { t0 + .milliseconds(ms) }
    static let remoteKey = STUNMessage.shortTermKey(password: "remote-password-0123456789")

    static func credentials(controlling: Bool) -> ICEChecks.Credentials {
        ICEChecks.Credentials(
            localUfrag: "LOCL", remoteUfrag: "RMTE", remoteKey: remoteKey, tieBreaker: 42, controlling: controlling)
    }

    func pair(_ local: String, _ remote: String, relayed: Bool = false, priority: UInt64) throws -> ICECandidatePair {
        let l = try SocketAddress(parsing: local, defaultPort: 0)
        let r = try SocketAddress(parsing: remote, defaultPort: 0)
        let lc = ICECandidate(foundation: "1", priority: 0x7E00_00FF, address: l, type: relayed ? .relay : .host)
        let p = ICECandidatePair(
            local: ICELocalCandidate(candidate: lc, base: l, relay: relayed ? 0 : nil),
            remote: ICECandidate(foundation: "2", priority: 1, address: r, type: .host))
        p.priority = priority
        return p
    }

    /// The destination ports of the datagrams one call produced (every remote is 10.0.0.2).
    func ports(_ out: ICEChecks.Output) -> [UInt16] { out.datagrams.map(\.destination.port) }

    /// New checks go highest priority first, a triggered pair before the others, and an early
    /// check only when the last new one went out at least Ta (50 ms) ago. Each is a signed Binding
    /// request from the pair's base, with the controlling agent's tie-breaker and no USE-CANDIDATE.
    @Test func checksGoByPriorityTriggeredFirstPacedAtTa() throws {
        let consent = ICEConsent(configuration: ICEAgentConfiguration(controlling: true))
        var checks = ICEChecks(configuration: ICEAgentConfiguration(controlling: true), now: Self.t0)
        let low = try pair("10.0.0.1:1000", "10.0.0.2:1", priority: 10)
        let mid = try pair("10.0.0.1:1000", "10.0.0.2:2", priority: 20)
        let high = try pair("10.0.0.1:1000", "10.0.0.2:3", priority: 30)
        checks.pairs = [low, mid, high]
        let creds = Self.credentials(controlling: true)
        var out = ICEChecks.Output()
        checks.checkNext(now: Self.at(0), early: false, consent: consent, credentials: nil, into: &out)
        #expect(out.datagrams.isEmpty)
        checks.checkNext(now: Self.at(0), early: false, consent: consent, credentials: creds, into: &out)
        #expect(ports(out) == [3])
        #expect(out.sent == 1 && high.state == .inProgress && checks.checksStartedAt == Self.at(0))
        let d = out.datagrams[0]
        let base = try SocketAddress(parsing: "10.0.0.1:1000", defaultPort: 0)
        #expect(d.source == base && d.relay == nil && d.destination.addressBytes == [10, 0, 0, 2])
        let m = try STUNMessage(parsing: d.bytes)
        #expect(m.messageClass == .request && m.method == .binding)
        #expect(m.text(STUNMessage.AttributeType.username) == "RMTE:LOCL")
        #expect(m.value(STUNMessage.AttributeType.iceControlling) == [0, 0, 0, 0, 0, 0, 0, 42])
        #expect(m.value(STUNMessage.AttributeType.useCandidate) == nil)
        #expect(STUNMessage.hasValidIntegrity(d.bytes, key: Self.remoteKey) && STUNMessage.hasValidFingerprint(d.bytes))
        // Early (a candidate just arrived): not within Ta of the last new check.
        let outcome1 = checks.trigger(low)
        #expect(outcome1)
        let outcome2 = !checks.trigger(low)
        #expect(outcome2)
        out = ICEChecks.Output()
        checks.checkNext(now: Self.at(49), early: true, consent: consent, credentials: creds, into: &out)
        #expect(out.datagrams.isEmpty)
        checks.checkNext(now: Self.at(50), early: true, consent: consent, credentials: creds, into: &out)
        #expect(ports(out) == [1])
        #expect(checks.triggeredQueue.isEmpty && checks.lastNewCheckAt == Self.at(50))
        // The next tick: the last waiting pair.
        out = ICEChecks.Output()
        checks.checkNext(now: Self.at(60), early: false, consent: consent, credentials: creds, into: &out)
        #expect(ports(out) == [2])
        out = ICEChecks.Output()
        checks.checkNext(now: Self.at(110), early: false, consent: consent, credentials: creds, into: &out)
        #expect(out.datagrams.isEmpty)
        #expect(checks.hasWork)
    }

    /// An unanswered check goes again 100, 300, 700, 1500 and 3100 ms after the first send (the
    /// RTO doubling up to 1.6 s), six sends in all, and is given up at 4700 ms, leaving its pair
    /// failed. A consent check is never repeated: it is dropped after 2 s.
    @Test func anUnansweredCheckFollowsTheRetransmissionSchedule() throws {
        let consent = ICEConsent(configuration: ICEAgentConfiguration(controlling: false))
        var checks = ICEChecks(configuration: ICEAgentConfiguration(controlling: false), now: Self.t0)
        let p = try pair("10.0.0.1:1000", "10.0.0.2:1", priority: 10)
        checks.pairs = [p]
        var out = ICEChecks.Output()
        checks.checkNext(
            now: Self.at(0), early: false, consent: consent, credentials: Self.credentials(controlling: false), into: &out)
        let first = try #require(out.datagrams.first)
        var resent: [Int] = []
        var failedAt: Int?
        for ms in 1...6000 {
            var o = ICEChecks.Output()
            checks.retransmit(now: Self.at(ms), into: &o)
            for d in o.datagrams {
                #expect(d.bytes == first.bytes && d.destination == first.destination)
                resent.append(ms)
            }
            if failedAt == nil, p.state == .failed { failedAt = ms }
        }
        #expect(resent == [100, 300, 700, 1500, 3100])
        #expect(failedAt == 4700)
        #expect(checks.transactionsInFlight.isEmpty && !checks.hasWork)

        let q = try pair("10.0.0.1:1000", "10.0.0.2:2", priority: 10)
        q.valid = true
        q.state = .succeeded
        checks.pairs.append(q)
        out = ICEChecks.Output()
        checks.check(
            q, kind: .keepalive, nominate: false, credentials: Self.credentials(controlling: false), now: Self.at(6000),
            into: &out)
        #expect(out.sent == 1 && q.state == .succeeded)
        #expect(checks.transactionsInFlight.map(\.nextAt) == [Self.at(8000)])
        out = ICEChecks.Output()
        checks.retransmit(now: Self.at(8000), into: &out)
        #expect(out.datagrams.isEmpty && out.retransmitted == 0 && checks.transactionsInFlight.isEmpty)
    }

    /// With a budget of three datagrams toward an address that never answered, the check goes
    /// at 0, 100 and 300 ms and is withheld at 700 ms: the pair fails, and the next pair toward
    /// the same address is failed at once rather than checked.
    @Test func theProbeBudgetWithholdsChecksTowardASilentAddress() throws {
        var config = ICEAgentConfiguration(controlling: false)
        config.unansweredSendsPerAddress = 3
        let consent = ICEConsent(configuration: config)
        var checks = ICEChecks(configuration: config, now: Self.t0)
        let p = try pair("10.0.0.1:1000", "10.0.0.2:1", priority: 20)
        checks.pairs = [p]
        let creds = Self.credentials(controlling: false)
        var out = ICEChecks.Output()
        checks.checkNext(now: Self.at(0), early: false, consent: consent, credentials: creds, into: &out)
        for ms in [100, 300, 700] { checks.retransmit(now: Self.at(ms), into: &out) }
        #expect(out.sent == 1 && out.retransmitted == 2 && out.withheld == 1 && out.datagrams.count == 3)
        #expect(p.state == .failed)
        let q = try pair("10.0.0.9:1000", "10.0.0.2:1", priority: 10)
        checks.pairs.append(q)
        out = ICEChecks.Output()
        checks.checkNext(now: Self.at(800), early: false, consent: consent, credentials: creds, into: &out)
        #expect(out.datagrams.isEmpty && out.withheld == 1 && q.state == .failed)
    }

    /// Relayed pairs wait while direct pairs are pending, until 500 ms after the first check.
    @Test func relayedPairsWaitForTheRelayCheckDelay() throws {
        let consent = ICEConsent(configuration: ICEAgentConfiguration(controlling: true))
        var checks = ICEChecks(configuration: ICEAgentConfiguration(controlling: true), now: Self.t0)
        let direct = try pair("10.0.0.1:1000", "10.0.0.2:1", priority: 10)
        let relayed = try pair("203.0.113.5:3000", "10.0.0.2:1", relayed: true, priority: 100)
        checks.pairs = [relayed, direct]
        let creds = Self.credentials(controlling: true)
        var sent: [Int: [String]] = [:]
        for ms in stride(from: 0, through: 600, by: 50) {
            var out = ICEChecks.Output()
            checks.checkNext(now: Self.at(ms), early: false, consent: consent, credentials: creds, into: &out)
            if !out.datagrams.isEmpty { sent[ms] = out.datagrams.map { $0.relay == nil ? "direct" : "relayed" } }
        }
        #expect(sent == [0: ["direct"], 500: ["relayed"]])
    }

    /// The controlling side nominates the usable pair with a USE-CANDIDATE check, and does not
    /// repeat it within a second while it is in flight; the controlled side never nominates.
    @Test func theControllingSideNominatesTheBestUsablePairOnce() throws {
        let consent = ICEConsent(configuration: ICEAgentConfiguration(controlling: true))
        var checks = ICEChecks(configuration: ICEAgentConfiguration(controlling: true), now: Self.t0)
        let p = try pair("10.0.0.1:1000", "10.0.0.2:1", priority: 10)
        p.valid = true
        p.state = .succeeded
        p.lastResponseAt = Self.at(0)
        checks.pairs = [p]
        checks.firstValidAt = Self.at(0)
        var out = ICEChecks.Output()
        checks.updateNomination(now: Self.at(10), consent: consent, credentials: Self.credentials(controlling: false), into: &out)
        #expect(out.datagrams.isEmpty && checks.nominationTarget == nil)
        checks.updateNomination(now: Self.at(10), consent: consent, credentials: Self.credentials(controlling: true), into: &out)
        let d = try #require(out.datagrams.first)
        #expect(out.datagrams.count == 1 && checks.nominationTarget === p)
        #expect(try STUNMessage(parsing: d.bytes).value(STUNMessage.AttributeType.useCandidate) == [])
        checks.updateNomination(now: Self.at(500), consent: consent, credentials: Self.credentials(controlling: true), into: &out)
        #expect(out.datagrams.count == 1)
    }
}
