// Connectivity checks and nomination (RFC 8445 §6.1.4, §7.2, §8.1) of an ICE agent, as a state
// machine with no I/O: the check list, the triggered-check queue, the transactions in flight with
// their retransmission schedule, the pacing Ta, the hold on relayed pairs, the nomination and the
// probe budget toward addresses that never answered. The agent calls it with `now` and the
// credentials; it answers with the datagrams to send (`Output`), which the agent transmits in
// order, and counts what it withheld or delayed.
import MediaBase
import MediaWire

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The check list and everything that decides when a check goes (see the file comment). Thread
/// rule: a value on the agent's context. Cost: a pass over the pairs per new check, a sort of the
/// transactions in flight per tick, one STUN encoding per check.
package struct ICEChecks {
    /// A datagram to send: a check or a retransmission. Thread rule: a value type.
    package struct Datagram {
        /// The Binding request, signed.
        package var bytes: [UInt8]
        /// The remote candidate's address.
        package var destination: SocketAddress
        /// The TURN client (index) it goes through; nil: the socket.
        package var relay: Int?
        /// The local base it leaves from (a wildcard-bound socket names it).
        package var source: SocketAddress
    }

    /// What a call produced: datagrams to send in order, and counters for `ICEAgentStatistics`.
    /// Thread rule: a value type.
    package struct Output {
        /// To send, in this order.
        package var datagrams: [Datagram] = []
        /// New checks (`checksSent`).
        package var sent = 0
        /// Retransmissions (`checksRetransmitted`).
        package var retransmitted = 0
        /// Waits for the rate toward unanswered addresses (`checksDelayed`).
        package var delayed = 0
        /// Checks and transactions given up by the probe budget (`checksWithheld`).
        package var withheld = 0

        /// Nothing to send or count.
        package init() {}
    }

    /// What a Binding request is signed and marked with. Thread rule: a value type.
    package struct Credentials {
        /// Our ufrag (the second half of USERNAME).
        package var localUfrag: String
        /// The peer's ufrag (the first half of USERNAME).
        package var remoteUfrag: String
        /// The short-term key of the peer's password.
        package var remoteKey: [UInt8]
        /// Our tie-breaker (ICE-CONTROLLING or ICE-CONTROLLED).
        package var tieBreaker: UInt64
        /// Our role now: ICE-CONTROLLING, and USE-CANDIDATE when nominating, or ICE-CONTROLLED.
        package var controlling: Bool

        /// Credentials of a request.
        package init(localUfrag: String, remoteUfrag: String, remoteKey: [UInt8], tieBreaker: UInt64, controlling: Bool) {
            self.localUfrag = localUfrag
            self.remoteUfrag = remoteUfrag
            self.remoteKey = remoteKey
            self.tieBreaker = tieBreaker
            self.controlling = controlling
        }
    }

    /// Transactions kept per pair; a new one beyond them replaces the oldest.
    static let maxOutstandingPerPair = 8

    /// Ta, the pacing of new checks.
    package let checkInterval: Duration
    /// How long relayed pairs wait after the first check while direct pairs are pending.
    package let relayCheckDelay: Duration
    /// How long a better pair must have worked before the selection moves to it.
    package let renominationAfter: Duration
    /// The candidate pairs (RFC 8445 §6.1.2), in the order they were formed.
    package var pairs: [ICECandidatePair] = []
    /// Pairs waiting for a triggered check (§7.3.1.4), first come first served.
    package private(set) var triggeredQueue: [ICECandidatePair] = []
    /// Checks in flight by transaction ID.
    var transactions: [[UInt8]: ICECheckTransaction] = [:]
    /// Check transactions started in the agent's life (`ICECheckTransaction.serial`).
    private var transactionSerial: UInt64 = 0
    /// When the first pair became valid (nil: none yet).
    package var firstValidAt: MonotonicTime?
    /// When the first connectivity check went out (nil: none yet).
    package private(set) var checksStartedAt: MonotonicTime?
    /// When the last new (not retransmitted, not keepalive) check went out (nil: none yet).
    package private(set) var lastNewCheckAt: MonotonicTime?
    /// What may still go toward addresses that never answered.
    package var probeBudget: ICEProbeBudget
    /// Controlling side: the pair our latest USE-CANDIDATE check is for.
    package var nominationTarget: ICECandidatePair?
    /// Controlling side: the pair whose nominating check last succeeded.
    package var nominated: ICECandidatePair?
    /// When the latest nominating check went out.
    package var nominationStartedAt: MonotonicTime?

    /// An empty check list for an agent with `configuration`, its budget's clock starting at `now`.
    package init(configuration: ICEAgentConfiguration, now: MonotonicTime) {
        checkInterval = configuration.checkInterval
        relayCheckDelay = configuration.relayCheckDelay
        renominationAfter = configuration.keepaliveInterval * 2
        probeBudget = ICEProbeBudget(configuration: configuration, now: now)
    }

    /// Whether checks or retransmissions are waiting (the agent keeps its fast tick then).
    package var hasWork: Bool {
        !triggeredQueue.isEmpty || transactions.values.contains { $0.kind == .check }
            || pairs.contains { $0.state == .waiting || $0.state == .inProgress }
    }

    /// The transactions in flight, oldest first.
    package var transactionsInFlight: [ICECheckTransaction] {
        transactions.values.sorted { $0.startedBefore($1) }
    }

    /// Puts `pair` in the triggered-check queue (waiting); false when it already was there.
    package mutating func trigger(_ pair: ICECandidatePair) -> Bool {
        pair.state = .waiting
        guard !pair.triggered else { return false }
        pair.triggered = true
        triggeredQueue.append(pair)
        return true
    }

    /// Removes the pair at `i` with its triggered check and transactions.
    package mutating func removePair(at i: Int) {
        let p = pairs.remove(at: i)
        triggeredQueue.removeAll { $0 === p }
        transactions = transactions.filter { $0.value.pair !== p }
    }

    /// Drops the queue and every transaction (the agent closed).
    package mutating func stop() {
        transactions.removeAll()
        triggeredQueue.removeAll()
    }

    /// The peer's candidates of an old generation are gone: every pair (but `kept`, the one media
    /// still uses while the new generation is checked), check and nomination, and the probe
    /// budget's address caps start again.
    package mutating func forgetGeneration(keeping kept: ICECandidatePair? = nil) {
        pairs.removeAll { $0 !== kept }
        kept?.triggered = false
        triggeredQueue.removeAll()
        transactions.removeAll()
        nominationTarget = nil
        nominated = nil
        nominationStartedAt = nil
        firstValidAt = nil
        checksStartedAt = nil
        lastNewCheckAt = nil
        probeBudget.newGeneration()
    }

    /// Takes the transaction `id` answered (nil: none such, or not from `from` over `relay`);
    /// the caller has checked the answer's integrity.
    package mutating func answered(_ id: [UInt8], from: SocketAddress, relay: Int?) -> ICECheckTransaction? {
        guard let t = transactions[id], t.destination == from, t.relay == relay else { return nil }
        transactions[id] = nil
        probeBudget.noteAnswer(from: from)
        return t
    }

    /// Whether `id` names a transaction in flight from `from` over `relay`.
    package func isInFlight(_ id: [UInt8], from: SocketAddress, relay: Int?) -> Bool {
        guard let t = transactions[id] else { return false }
        return t.destination == from && t.relay == relay
    }

    /// Starts a check on `pair` (a new transaction) when the probe budget lets it go: its
    /// datagram is added to `out`. The verdict says whether it went, may go later, or may not go
    /// until the address answers. Without credentials nothing goes (`later`).
    @discardableResult
    package mutating func check(
        _ pair: ICECandidatePair, kind: ICECheckTransaction.Kind, nominate: Bool, credentials: Credentials?,
        now: MonotonicTime, into out: inout Output
    ) -> ICEProbeBudget.Verdict {
        guard let c = credentials else { return .later }
        var m = STUNMessage(method: .binding, class: .request)
        m.appendText(STUNMessage.AttributeType.username, "\(c.remoteUfrag):\(c.localUfrag)")
        let lp = (pair.local.candidate.priority >> 8) & 0xFFFF
        let prflx = ICECandidate.priority(type: .prflx, localPreference: lp)
        m.appendUInt32(STUNMessage.AttributeType.priority, prflx)
        if c.controlling {
            m.appendUInt64(STUNMessage.AttributeType.iceControlling, c.tieBreaker)
            if nominate { m.attributes.append(.init(type: STUNMessage.AttributeType.useCandidate, value: [])) }
        } else {
            m.appendUInt64(STUNMessage.AttributeType.iceControlled, c.tieBreaker)
        }
        let bytes = m.encode(integrity: c.remoteKey, fingerprint: true)
        switch probeBudget.admit(pair.remote.address, relay: pair.local.relay, size: bytes.count, now: now) {
        case .send: break
        case .later:
            out.delayed += 1
            return .later
        case .never:
            out.withheld += 1
            return .never
        }
        let outstanding = transactions.filter { $0.value.pair === pair }
        if outstanding.count >= Self.maxOutstandingPerPair,
            let oldest = outstanding.min(by: { $0.value.startedBefore($1.value) })
        {
            transactions[oldest.key] = nil
        }
        let rto: Duration = kind == .check ? .milliseconds(100) : .seconds(2)
        transactions[m.transactionID] = ICECheckTransaction(
            pair: pair, bytes: bytes, destination: pair.remote.address, relay: pair.local.relay, kind: kind,
            nominate: nominate && c.controlling, sentControlling: c.controlling, prflxPriority: prflx,
            rto: rto, nextAt: now + rto, startedAt: now, serial: transactionSerial)
        transactionSerial &+= 1
        if kind == .check && !pair.valid { pair.state = .inProgress }
        out.datagrams.append(
            Datagram(bytes: bytes, destination: pair.remote.address, relay: pair.local.relay, source: pair.local.base))
        out.sent += 1
        return .send
    }

    /// Whether pairs through a relay are held back now: a direct pair works, or direct pairs
    /// exist, some not yet failed, and the first check went out less than `relayCheckDelay` ago.
    package func relayHeld(now: MonotonicTime, consent: ICEConsent) -> Bool {
        if pairs.contains(where: { !$0.usesRelay && consent.isUsable($0, now: now) }) { return true }
        let directPending = pairs.contains { !$0.usesRelay && $0.state != .failed }
        guard directPending else { return false }
        guard let started = checksStartedAt else { return true }
        return now - started < relayCheckDelay
    }

    /// One new connectivity check, paced at Ta (RFC 8445 §6.1.4.2): a triggered pair first, then
    /// the best waiting one. `early` (pairs or a triggered check just appeared): only if no new
    /// check went out less than Ta ago. A pair whose address may not be checked (the probe
    /// budget) fails and the next one is tried at once; one that must wait for the rate stays
    /// first in line.
    package mutating func checkNext(
        now: MonotonicTime, early: Bool, consent: ICEConsent, credentials: Credentials?, into out: inout Output
    ) {
        guard credentials != nil else { return }
        if early, let last = lastNewCheckAt, now - last < checkInterval { return }
        let directWorksNow = pairs.contains { !$0.usesRelay && consent.isUsable($0, now: now) }
        let held = relayHeld(now: now, consent: consent)
        for _ in 0...pairs.count {
            var next: ICECandidatePair?
            var fromTriggered = false
            while next == nil, !triggeredQueue.isEmpty {
                let p = triggeredQueue.removeFirst()
                p.triggered = false
                // A relayed pair waits (untriggered) while a direct pair works.
                if p.state == .waiting && !(directWorksNow && p.usesRelay) {
                    next = p
                    fromTriggered = true
                }
            }
            if next == nil {
                next = pairs.filter { $0.state == .waiting && !$0.valid && !(held && $0.usesRelay) }.max {
                    $0.priority < $1.priority
                }
            }
            guard let next else { return }
            switch check(next, kind: .check, nominate: false, credentials: credentials, now: now, into: &out) {
            case .send:
                if checksStartedAt == nil { checksStartedAt = now }
                lastNewCheckAt = now
                return
            case .later:
                if fromTriggered {
                    next.triggered = true
                    triggeredQueue.insert(next, at: 0)
                }
                return
            case .never:
                if !next.valid { next.state = .failed }
            }
        }
    }

    /// Retransmissions and timeouts due at `now`, oldest transaction first: a check unanswered
    /// after its RTO (100 ms, doubled per send up to 1.6 s) goes again, up to six sends; a
    /// consent check is not repeated; a transaction given up leaves its pair failed when it was
    /// the pair's last one in flight.
    package mutating func retransmit(now: MonotonicTime, into out: inout Output) {
        for (id, t) in transactions.sorted(by: { $0.value.startedBefore($1.value) }) where t.nextAt <= now {
            var giveUp = t.kind == .keepalive || t.sends >= 6
            if !giveUp {
                switch probeBudget.admit(t.destination, relay: t.relay, size: t.bytes.count, now: now) {
                case .send: break
                case .later:
                    out.delayed += 1
                    continue
                case .never:
                    out.withheld += 1
                    giveUp = true
                }
            }
            if giveUp {
                transactions[id] = nil
                if t.kind == .check, t.pair.state == .inProgress, !transactions.values.contains(where: { $0.pair === t.pair }) {
                    t.pair.state = .failed
                }
                continue
            }
            var u = t
            u.sends += 1
            u.rto = min(u.rto * 2, .milliseconds(1600))
            u.nextAt = now + u.rto
            transactions[id] = u
            out.datagrams.append(
                Datagram(bytes: t.bytes, destination: t.destination, relay: t.relay, source: t.pair.local.base))
            out.retransmitted += 1
        }
    }

    /// Controlling side: nominates the best usable pair when none is nominated (after the first
    /// valid pair, once higher-priority pairs are done or 200 ms passed), or a better one than the
    /// nominated pair once it has worked for `renominationAfter`; the nominating check goes to
    /// `out`. A nomination in flight is not repeated within a second.
    package mutating func updateNomination(
        now: MonotonicTime, consent: ICEConsent, credentials: Credentials?, into out: inout Output
    ) {
        guard let credentials, credentials.controlling else { return }
        guard let best = pairs.filter({ consent.isUsable($0, now: now) }).max(by: { $1.isBetter(than: $0) }) else { return }
        if best === nominated { return }
        if let s = nominated, consent.isUsable(s, now: now) {
            // Leaving a working pair: only for a better one that has kept answering for a while,
            // so a flaky path does not make the selection flap.
            guard best.isBetter(than: s), now - best.usableSince >= renominationAfter else { return }
        }
        if nominated == nil {
            let pending = pairs.contains {
                !$0.valid && ($0.state == .waiting || $0.state == .inProgress) && $0.priority > best.priority
            }
            if pending, let first = firstValidAt, now - first < .milliseconds(200) { return }
        }
        if nominationTarget === best, let started = nominationStartedAt, now - started < .seconds(1) { return }
        nominate(best, now: now, credentials: credentials, into: &out)
    }

    /// Sends a nominating check on `pair` and makes it the nomination target.
    package mutating func nominate(
        _ pair: ICECandidatePair, now: MonotonicTime, credentials: Credentials?, into out: inout Output
    ) {
        nominationTarget = pair
        nominationStartedAt = now
        check(pair, kind: .check, nominate: true, credentials: credentials, now: now, into: &out)
    }
}
