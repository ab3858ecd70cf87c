// ICE agent: datagrams in, answering the peer's checks (RFC 8445 §7.3), responses to ours
// (§7.2.5), selection, and the tick that drives `ICEChecks` (checks, retransmissions,
// nomination) and `ICEConsent` (consent checks, failover, expiry) and sends what they return.
// Runs on the agent's queue.
import Dispatch
import MediaBase
import MediaWire

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension ICEAgent {
    // MARK: Datagrams in

    /// A datagram from the socket (STUN, or anything from a TURN server), and the local address
    /// it arrived at when known.
    func process(_ bytes: [UInt8], from: SocketAddress, to local: SocketAddress? = nil) {
        guard !closed, !bytes.isEmpty else { return }
        if let drop = shared.withLock({ $0.dropFilter }), drop(from) { return }
        for client in turns where client.server.transport == .udp && client.server.address == from {
            if bytes.withUnsafeBytes({ client.handleDatagram($0, from: from) }) { return }
        }
        guard STUNMessage.mayBeSTUN(firstByte: bytes[0]) else { return }
        handleSTUN(bytes, from: from, relay: nil, to: local)
    }

    /// A peer's datagram relayed by TURN client `index`: STUN checks on the relayed candidate, or media.
    func handlePeerData(_ index: Int, peer: SocketAddress, _ bytes: [UInt8]) {
        guard !closed, let first = bytes.first else { return }
        if STUNMessage.mayBeSTUN(firstByte: first) {
            handleSTUN(bytes, from: peer, relay: index)
        } else if (128...191).contains(first), let cb = shared.withLock({ $0.onRelayedMedia }) {
            bytes.withUnsafeBytes { cb($0) }
        } else if DTLSTransport.isDTLS(firstByte: first) {
            shared.withLock({ $0.onRelayedDTLS })?(bytes, peer)
        } else if !(128...191).contains(first), let cb = shared.withLock({ $0.onRelayedOther }) {
            cb(bytes, peer)
        }
    }

    func handleSTUN(_ bytes: [UInt8], from: SocketAddress, relay: Int?, to local: SocketAddress? = nil) {
        guard let m = try? STUNMessage(parsing: bytes), m.method == .binding else { return }
        switch m.messageClass {
        case .request: handleRequest(m, bytes: bytes, from: from, relay: relay, to: local)
        case .successResponse, .errorResponse: handleResponse(m, bytes: bytes, from: from, relay: relay)
        case .indication: break
        }
    }

    // MARK: Requests to us (RFC 8445 §7.3)

    /// `local`: the address the request arrived at (nil: unknown); the answer leaves from it.
    func handleRequest(_ m: STUNMessage, bytes: [UInt8], from: SocketAddress, relay: Int?, to local: SocketAddress?) {
        // Under our credentials, or (after a restart of ours) the ones before until the peer
        // checks under the new ones.
        // The sender's part of USERNAME is not checked here (RFC 8445 §7.3 asks only for ours):
        // a peer that restarted sends under its new ufrag before its description reaches us.
        guard STUNMessage.hasValidFingerprint(bytes), let user = m.text(STUNMessage.AttributeType.username),
            let colon = user.firstIndex(of: ":"),
            let credentials = [self.local, previousLocal].lazy.compactMap({ $0 }).first(where: { user[..<colon] == $0.ufrag }),
            STUNMessage.hasValidIntegrity(bytes, key: credentials.key)
        else {
            bump(\.droppedRequests)
            return
        }
        if previousLocal != nil, credentials.ufrag == self.local.ufrag { previousLocal = nil }
        let now = scheduler.now
        guard bucket.take(now: now) else {
            bump(\.rateLimitedRequests)
            return
        }
        // Role conflict (RFC 8445 §7.3.1.1).
        var conflict = false
        if controlling, let theirs = m.uint64(STUNMessage.AttributeType.iceControlling) {
            if tieBreaker >= theirs { conflict = true } else { switchRole(controlling: false) }
        } else if !controlling, let theirs = m.uint64(STUNMessage.AttributeType.iceControlled) {
            if tieBreaker >= theirs { switchRole(controlling: true) } else { conflict = true }
        }
        var answer = STUNMessage(
            method: .binding, class: conflict ? .errorResponse : .successResponse, transactionID: m.transactionID)
        if conflict {
            answer.appendErrorCode(487, reason: "Role Conflict")
        } else {
            answer.appendXORAddress(STUNMessage.AttributeType.xorMappedAddress, from)
        }
        let out = answer.encode(integrity: credentials.key, fingerprint: true)
        guard out.count <= bytes.count else {
            bump(\.rateLimitedRequests)
            return
        }
        transmit(out, to: from, relay: relay, from: local)
        bump(\.checksAnswered)
        guard !conflict else { return }
        let priority = m.uint32(STUNMessage.AttributeType.priority) ?? 0
        let useCandidate = m.value(STUNMessage.AttributeType.useCandidate) != nil
        // Answered, but learnt from only once the sender's ufrag is the one the peer's
        // description gave (a request of the peer's next generation waits for it; one of an
        // older generation is never learnt from).
        let sender = String(user[user.index(after: colon)...])
        guard let remoteUfrag, remoteUfrag == sender, started else {
            earlyRequests.removeAll { $0.from == from && $0.to == local && $0.relay == relay }
            if earlyRequests.count >= Self.maxEarlyRequests { earlyRequests.removeFirst() }
            earlyRequests.append((from, local, relay, priority, useCandidate, sender))
            return
        }
        learnFromRequest(from: from, to: local, relay: relay, priority: priority, useCandidate: useCandidate)
    }

    /// After an authenticated request: the remote candidate (peer-reflexive if new, §7.3.1.3),
    /// the pair, a triggered check (§7.3.1.4) and, on the controlled side, the nomination. The
    /// pair's local candidate is the one whose base the request arrived at (`local`), when known.
    func learnFromRequest(from: SocketAddress, to local: SocketAddress? = nil, relay: Int?, priority: UInt32, useCandidate: Bool)
    {
        guard !closed, relay != nil || (transport.carries(from.family) && !configuration.relayOnly) else { return }
        let now = scheduler.now
        checks.probeBudget.noteRequest(from: from, relay: relay)
        var remote = remotes.first { $0.address == from }
        if remote == nil {
            guard remotes.count < configuration.maxRemoteCandidates, priority != 0 else {
                bump(\.droppedRemoteCandidates)
                return
            }
            prflxCount += 1
            let c = ICECandidate(foundation: "p\(prflxCount)", priority: priority, address: from, type: .prflx)
            remotes.append(c)
            remote = c
        }
        guard let remote else { return }
        let pair: ICECandidatePair?
        if let relay {
            pair =
                checks.pairs.first { $0.local.relay == relay && $0.remote.address == from }
                ?? gathering.locals.first(where: {
                    $0.relay == relay && $0.candidate.type == .relay && $0.candidate.address.family == from.family
                }).flatMap {
                    addPair(local: $0, remote: remote)
                }
        } else {
            func arrivedAt(_ l: ICELocalCandidate) -> Bool { local.map { sameHost(l.base, $0) } ?? true }
            let direct = checks.pairs.filter { $0.local.relay == nil && $0.remote.address == from && arrivedAt($0.local) }
            // A new pair: the local candidate of the address the request arrived at, else any of its family.
            let sameFamily = gathering.locals.filter { $0.relay == nil && $0.pairs && $0.candidate.address.family == from.family }
            pair =
                direct.first { $0.valid && !$0.failedOver } ?? direct.max { $0.priority < $1.priority }
                ?? (sameFamily.first(where: arrivedAt) ?? sameFamily.first).flatMap { addPair(local: $0, remote: remote) }
        }
        guard let pair else { return }
        if useCandidate && !controlling {
            pair.peerNominatedAt = now
            if pair.valid && !pair.failedOver { select(pair, now: now) }
        }
        switch pair.state {
        case .waiting, .failed:
            if !pair.valid || pair.failedOver { trigger(pair) }
        case .inProgress, .succeeded:
            break
        }
    }

    func trigger(_ pair: ICECandidatePair) {
        if checks.trigger(pair) { kickChecks() }
    }

    func switchRole(controlling new: Bool) {
        guard new != controlling else { return }
        controlling = new
        checks.nominationTarget = nil
        checks.nominated = nil
        recomputePriorities()
        shared.withLock {
            $0.controlling = new
            $0.stats.roleSwitches += 1
        }
    }

    // MARK: Checks out (RFC 8445 §7.2)

    /// Sends on the socket (from `local` when the socket is bound to a wildcard and it is known)
    /// or through TURN allocation `relay`.
    func transmit(_ bytes: [UInt8], to: SocketAddress, relay: Int?, from local: SocketAddress? = nil) {
        if let relay {
            turns[relay].send(bytes, to: to)
        } else {
            bytes.withUnsafeBytes { _ = transport.send($0, to: to, from: sendsFromBase ? local : nil) }
        }
    }

    /// The same address (ports and scope aside): a local candidate's base against where a
    /// datagram arrived.
    func sameHost(_ a: SocketAddress, _ b: SocketAddress) -> Bool { a.family == b.family && a.addressBytes == b.addressBytes }

    /// The credentials checks are signed with (nil until the peer's are known).
    /// Our ufrag in the checks is the one the peer knows us by: the previous one until the peer
    /// checks under the new one (then `previousLocal` goes). A peer that made its checks from
    /// our old description refuses a check naming our new ufrag (libwebrtc answers 401).
    var checkCredentials: ICEChecks.Credentials? {
        remoteUfrag.map {
            ICEChecks.Credentials(
                localUfrag: previousLocal?.ufrag ?? local.ufrag, remoteUfrag: $0, remoteKey: remoteKey, tieBreaker: tieBreaker,
                controlling: controlling)
        }
    }

    /// Sends what `checks` produced, in order, and counts it.
    func emit(_ out: ICEChecks.Output) {
        for d in out.datagrams { transmit(d.bytes, to: d.destination, relay: d.relay, from: d.source) }
        guard out.sent + out.retransmitted + out.delayed + out.withheld > 0 else { return }
        shared.withLock {
            $0.stats.checksSent += out.sent
            $0.stats.checksRetransmitted += out.retransmitted
            $0.stats.checksDelayed += out.delayed
            $0.stats.checksWithheld += out.withheld
        }
    }

    /// Sends a check on `pair` (`ICEChecks.check`).
    func sendCheck(_ pair: ICECandidatePair, kind: ICECheckTransaction.Kind, nominate: Bool, now: MonotonicTime) {
        var out = ICEChecks.Output()
        checks.check(pair, kind: kind, nominate: nominate, credentials: checkCredentials, now: now, into: &out)
        emit(out)
    }

    // MARK: Responses (RFC 8445 §7.2.5)

    func handleResponse(_ m: STUNMessage, bytes: [UInt8], from: SocketAddress, relay: Int?) {
        if relay == nil, let answer = gathering.serverAnswered(m.transactionID, from: from) {
            if answer.wrongSource {
                bump(\.droppedResponses)
            } else if let server = answer.server {
                handleServerResponse(server, m)
            }
            return
        }
        guard checks.isInFlight(m.transactionID, from: from, relay: relay),
            STUNMessage.hasValidFingerprint(bytes), STUNMessage.hasValidIntegrity(bytes, key: remoteKey),
            let t = checks.answered(m.transactionID, from: from, relay: relay)
        else {
            bump(\.droppedResponses)
            // A 401 without integrity (the peer did not know the ufrag we named, as after an ICE
            // restart): the transaction ends and the pair is checked again under our current
            // credentials, instead of retransmitting the refused request (a few times at most).
            if m.messageClass == .errorResponse, m.errorCode?.code == 401,
                let t = checks.answered(m.transactionID, from: from, relay: relay)
            {
                _ = t.pair.passRetryableError()
            }
            return
        }
        bump(\.responsesReceived)
        let now = scheduler.now
        let pair = t.pair
        guard checks.pairs.contains(where: { $0 === pair }) else { return }
        if m.messageClass == .errorResponse {
            let code = m.errorCode?.code ?? 0
            if code == 487 {
                if t.sentControlling == controlling { switchRole(controlling: !t.sentControlling) }
                trigger(pair)
            } else if !pair.valid {
                // 401, 420 and 500 may pass (a peer that restarted ICE answers 401 until our
                // new credentials reach it): the pair waits for another check, a few times at
                // most. Any other error fails it.
                if !([401, 420, 500].contains(code) && pair.passRetryableError()) { pair.state = .failed }
            }
            return
        }
        guard let mapped = try? m.xorAddress(STUNMessage.AttributeType.xorMappedAddress) else {
            if !pair.valid { pair.state = .failed }
            return
        }
        // The valid pair (§7.2.5.3.2): the local candidate whose address the peer saw.
        var validPair = pair
        if pair.local.relay == nil && mapped != pair.local.candidate.address {
            var local = gathering.locals.first { $0.relay == nil && $0.candidate.address == mapped }
            if local == nil {
                let c = ICECandidate(
                    foundation: gathering.foundation(.prflx, base: pair.local.base, server: nil), priority: t.prflxPriority,
                    address: mapped, type: .prflx, relatedAddress: pair.local.base)
                let l = ICELocalCandidate(candidate: c, base: pair.local.base, relay: nil)
                addLocal(l, signal: false)
                local = gathering.locals.first { $0.relay == nil && $0.candidate.address == mapped }
            }
            if let local, let p = addPair(local: local, remote: pair.remote) { validPair = p }
        }
        pair.state = .succeeded
        validPair.state = .succeeded
        let wasUsable = consent.isUsable(validPair, now: now)
        if !wasUsable { validPair.usableSince = now }
        validPair.valid = true
        validPair.failedOver = false
        validPair.lastResponseAt = now
        if validPair !== pair {
            pair.lastResponseAt = now
            pair.failedOver = false
        }
        if validPair.nextKeepaliveAt == .zero { validPair.nextKeepaliveAt = now + consent.keepaliveInterval() }
        if checks.firstValidAt == nil { checks.firstValidAt = now }
        if let r = validPair.local.relay, channels[channelKey(r, validPair.remote.address)] == nil,
            let ch = turns[r].bindChannel(validPair.remote.address)
        {
            channels[channelKey(r, validPair.remote.address)] = ch
        }
        if controlling {
            if t.nominate, checks.nominationTarget === pair || checks.nominationTarget === validPair {
                checks.nominated = validPair
                select(validPair, now: now)
            } else if selected == nil {
                // Media starts on the first working pair at once (as libwebrtc does); nomination
                // follows and may move it to a better one.
                select(validPair, now: now)
            }
        } else {
            let nominatedAt = max(pair.peerNominatedAt, validPair.peerNominatedAt)
            if nominatedAt > .zero && (selected == nil || selected === validPair || nominatedAt >= selected!.peerNominatedAt) {
                validPair.peerNominatedAt = nominatedAt
                select(validPair, now: now)
            } else if selected == nil {
                select(validPair, now: now)  // provisional, until the controlling side nominates
            }
        }
        if !wasUsable { updateNomination(now: now) }
    }

    func channelKey(_ relay: Int, _ peer: SocketAddress) -> String { "\(relay) \(peer)" }

    // MARK: Selection and nomination

    func select(_ pair: ICECandidatePair, now: MonotonicTime) {
        guard pair !== selected else { return }
        let route: ICESendPath.Route
        if let r = pair.local.relay {
            let key = channelKey(r, pair.remote.address)
            guard let ch = channels[key] ?? turns[r].bindChannel(pair.remote.address) else { return }
            channels[key] = ch
            route = .relay(turns[r], channel: ch, peer: pair.remote.address)
        } else {
            // Media names its source only where the kernel's route would pick another one: a
            // named source costs a `sendmsg` with control data per packet instead of a `sendto`.
            let base = pair.local.base
            let named = sendsFromBase && !(transport.routeSource(toward: pair.remote.address).map { sameHost($0, base) } ?? false)
            route = .direct(pair.remote.address, from: named ? base : nil)
        }
        _ = consent.select(pair, now: now)
        path.route = route
        let cb = shared.withLock { s -> (@Sendable (ICECandidate?, ICECandidate?) -> Void)? in
            s.selected = (pair.local.candidate, pair.remote)
            s.stats.selectedPairChanges += 1
            return s.onSelectedPairChange
        }
        cb?(pair.local.candidate, pair.remote)
    }

    func deselect() {
        guard consent.deselect() else { return }
        path.route = nil
        let cb = shared.withLock { s -> (@Sendable (ICECandidate?, ICECandidate?) -> Void)? in
            s.selected = nil
            s.stats.selectedPairChanges += 1
            return s.onSelectedPairChange
        }
        cb?(nil, nil)
    }

    /// Controlling side: nominates the best usable pair, or a better one (`ICEChecks.updateNomination`).
    func updateNomination(now: MonotonicTime) {
        var out = ICEChecks.Output()
        checks.updateNomination(now: now, consent: consent, credentials: checkCredentials, into: &out)
        emit(out)
    }

    // MARK: Timer

    func tick() {
        guard !closed else { return }
        let now = scheduler.now
        // A new check first: it goes before retransmissions when the rate toward unanswered
        // addresses leaves room for only one.
        if remoteUfrag != nil { sendNextCheck(now: now) }
        // Retransmissions and timeouts.
        var out = ICEChecks.Output()
        checks.retransmit(now: now, into: &out)
        emit(out)
        for r in gathering.retransmit(now: now) {
            r.bytes.withUnsafeBytes { _ = transport.send($0, to: r.destination, from: nil) }
        }
        checkGatheringComplete(now: now)
        guard remoteUfrag != nil else { return }
        // Consent checks (`ICEConsent.dueChecks`); the controlling side's on the selected pair nominate it.
        for p in consent.dueChecks(checks.pairs, now: now) {
            sendCheck(p, kind: .keepalive, nominate: controlling && p === selected, now: now)
        }
        superviseSelection(now: now)
        updateNomination(now: now)
        retime()
    }

    /// Whether checks, retransmissions or gathering need the fast tick.
    var hasCheckWork: Bool {
        gathering.hasWork || checks.hasWork
    }

    /// Sets the tick: the check pacing (Ta), or `quietTickMilliseconds` while quiet with no check
    /// work. On the queue; cheap when nothing changes.
    func retime() {
        guard timer != nil || scheduledTick != nil, !closed else { return }
        let fast = max(5, min(100, configuration.checkIntervalMilliseconds))
        let want = consent.quiet && !hasCheckWork ? max(fast, configuration.quietTickMilliseconds) : fast
        guard want != tickPeriodMilliseconds else { return }
        tickPeriodMilliseconds = want
        if let timer {
            timer.schedule(
                deadline: .now() + .milliseconds(want), repeating: .milliseconds(want),
                leeway: .milliseconds(want > fast ? 20 : 2))
        } else {
            scheduleTick(after: want)
        }
    }

    /// Without a queue: the next tick `milliseconds` from now on the scheduler (replacing the one
    /// pending), each tick arming the one after it at the period then in force, as the repeating
    /// dispatch timer of an agent with a queue does.
    func scheduleTick(after milliseconds: Int) {
        scheduledTick?.cancel()
        scheduledTick = scheduler.schedule(after: .milliseconds(milliseconds)) { [weak self] in
            guard let self, !self.closed else { return }
            self.scheduleTick(after: self.tickPeriodMilliseconds)
            self.tick()
        }
    }

    /// Slower upkeep for a path that carries little, such as a friends' link with no call on it
    /// (`quiet`), or the full pace again: consent checks every
    /// `quietKeepaliveIntervalMilliseconds` instead of `keepaliveIntervalMilliseconds`, failover
    /// after `quietFailoverAfterMilliseconds`, and a tick of `quietTickMilliseconds` while no
    /// check is waiting (checks for new candidates still go at Ta). Leaving quiet checks every
    /// valid pair at once. Thread rule: any thread (applied on the agent's queue). Cost: none.
    package func setQuiet(_ quiet: Bool) {
        onQueueAsync { agent in
            // Leaving quiet: answers were expected only every few seconds, so the failover window
            // starts now and every valid pair is checked at once.
            guard agent.consent.setQuiet(quiet, pairs: agent.checks.pairs, now: agent.scheduler.now) else { return }
            agent.retime()
        }
    }

    /// One new connectivity check, paced at Ta (`ICEChecks.checkNext`). Called on every tick, and
    /// at once (`early`) when pairs or a triggered check appear, so a check does not wait for the
    /// next tick (with a 50 ms Ta, those waits were most of a loopback connection's set-up)
    /// unless one went out less than Ta ago. At most one early check comes between two ticks.
    func sendNextCheck(now: MonotonicTime, early: Bool = false) {
        guard !closed, started, remoteUfrag != nil else { return }
        var out = ICEChecks.Output()
        checks.checkNext(now: now, early: early, consent: consent, credentials: checkCredentials, into: &out)
        emit(out)
    }

    /// Sends the next check now if the pacing allows, after the current handler returns.
    func kickChecks() {
        later { [weak self] in
            guard let self else { return }
            self.sendNextCheck(now: self.scheduler.now, early: true)
            self.retime()
        }
    }

    /// Failover and consent (`ICEConsent.supervise`): a selected pair silent for the failover
    /// time is replaced at once by the best usable pair (nominated again on the controlling
    /// side), or, with none, the relayed pairs are checked; with no answer on any pair for
    /// `consentExpirySeconds`, the route goes away (RFC 7675 §5.1).
    func superviseSelection(now: MonotonicTime) {
        switch consent.supervise(checks.pairs, now: now) {
        case .steady:
            break
        case .expired:
            checks.nominationTarget = nil
            checks.nominated = nil
            deselect()
        case .noUsablePair:
            // Nothing answered lately: check the relayed pairs now (they were left alone while
            // the direct pair worked); the first to answer is selected.
            for p in checks.pairs where p.usesRelay && (p.valid || p.state == .waiting) { trigger(p) }
        case .failover(let next):
            select(next, now: now)
            if controlling {
                var out = ICEChecks.Output()
                checks.nominate(next, now: now, credentials: checkCredentials, into: &out)
                emit(out)
            }
        }
    }
}
