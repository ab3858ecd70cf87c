// ICE agent: starting (the STUN requests `ICEGathering` returns, the TURN clients, the tick),
// signalling the candidates `ICEGathering` makes (RFC 8445 §5.1), remote credentials and
// candidates, and pair formation (§6.1.2). Runs on the agent's queue.
import Dispatch
import MediaBase
import MediaWire

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

extension ICEAgent {
    func startOnQueue() {
        guard !started, !closed else { return }
        started = true
        let now = scheduler.now
        if !configuration.relayOnly { gatherHost() }
        let stun = configuration.servers.filter {
            $0.kind == .stun && transport.carries($0.address.family) && !configuration.relayOnly
        }
        for r in gathering.start(stunServers: stun, now: now) {
            r.bytes.withUnsafeBytes { _ = transport.send($0, to: r.destination, from: nil) }
        }
        for server in configuration.servers where server.kind == .turn && canUseTURN(server) {
            startTURN(server)
        }
        let tick = max(5, min(100, configuration.checkIntervalMilliseconds))
        tickPeriodMilliseconds = tick
        if let queue {
            let t = DispatchSource.makeTimerSource(queue: queue)
            t.schedule(deadline: .now() + .milliseconds(tick), repeating: .milliseconds(tick), leeway: .milliseconds(2))
            t.setEventHandler { [weak self] in self?.tick() }
            timer = t
            t.resume()
        } else {
            scheduleTick(after: tick)
        }
        checkGatheringComplete()
        if remoteUfrag != nil { processEarlyRequests() }
    }

    /// Whether a TURN server can be used: over TCP or TLS from an agent with a socket (the client
    /// connects itself), over UDP when the transport carries the server's family.
    func canUseTURN(_ server: ICEServer) -> Bool {
        server.transport.isStream ? socket != nil : transport.carries(server.address.family)
    }

    /// Starts an allocation on `server` (a TURN server) as the `turns.count`-th relay: on the
    /// socket and the agent's queue (its timers on a queue of its own, as before schedulers), or,
    /// for an agent without a socket, through the transport and on the agent's scheduler.
    private func startTURN(_ server: ICEServer) {
        let index = gathering.addRelay()
        let client: TURNClient
        if let socket, let queue {
            client = TURNClient(server: server, socket: socket, queue: queue)
        } else {
            let transport = self.transport
            let address = server.address
            client = TURNClient(socketlessServer: server, scheduler: scheduler) { bytes in
                _ = bytes.withUnsafeBytes { transport.send($0, to: address, from: nil) }
            }
        }
        client.onStateChange = { [weak self] state in self?.onQueueAsync { $0.turnStateChanged(index, state) } }
        client.onPeerData = { [weak self] peer, payload in
            let copy = Array(payload)
            self?.onQueueAsync { $0.handlePeerData(index, peer: peer, copy) }
        }
        // An IPv6 relayed address too (RFC 8656 dual allocation) when peers may reach us over
        // IPv6: we have IPv6 host candidates, or offer only relayed ones from a socket that
        // carries IPv6. A server without IPv6 relays answers with IPv4 alone.
        let ipv6 =
            gathering.locals.contains { $0.candidate.type == .host && $0.candidate.address.family == .ipv6 }
            || (configuration.relayOnly && transport.carries(.ipv6))
        client.relayFamilies = ipv6 ? .both : .ipv4
        turns.append(client)
        client.allocate()
    }

    /// TURN servers learned after the start (credentials a rendezvous node handed out): each one
    /// whose address and transport no live allocation of ours uses yet starts an allocation, whose
    /// relayed candidate is signalled as it comes (trickled). A server already in use is left
    /// alone: its allocation keeps the credentials it was made with (coturn holds an allocation's
    /// key, so an allocation outlives the credentials' expiry). STUN servers are ignored.
    /// At most `maxAddedRelays` relays are added in the agent's life (stale credentials cannot
    /// pile up allocations). Thread rule: any thread (runs on the agent's queue). Cost: one
    /// allocation (a few STUN transactions) per new server.
    package func addServers(_ servers: [ICEServer]) {
        later {
            guard self.started, !self.closed else { return }
            for server in servers where server.kind == .turn && self.canUseTURN(server) {
                let inUse = self.turns.contains { t in
                    guard t.server.address == server.address, t.server.transport == server.transport else { return false }
                    switch t.state {
                    case .failed, .closed: return false
                    default: return true
                    }
                }
                let configured = self.configuration.servers.filter { $0.kind == .turn }.count
                guard !inUse, self.turns.count < configured + Self.maxAddedRelays else { continue }
                self.startTURN(server)
            }
        }
    }

    /// Relays `addServers` may start in an agent's life.
    package static let maxAddedRelays = 8

    /// Runs `body` on the queue: at once when already on it (TURN callbacks on our queue), else async.
    func onQueueAsync(_ body: @escaping @Sendable (ICEAgent) -> Void) {
        if isOnContext { body(self) } else { later { body(self) } }
    }

    private func gatherHost() {
        let bound = transport.boundAddress ?? (transport.family == .ipv4 ? .anyIPv4(port: 0) : .anyIPv6(port: 0))
        var addresses: [SocketAddress]
        if let given = configuration.hostAddresses {
            addresses = given.filter { transport.carries($0.family) }.map {
                var a = $0; a.port = bound.port; return a
            }
        } else {
            addresses = ICEHostAddresses.addresses(
                bound: bound, includeLoopback: ICEHostAddresses.isLoopback(bound), dualStack: transport.isDualStack)
        }
        for l in gathering.hostCandidates(addresses) { addLocal(l) }
    }

    func addLocal(_ l: ICELocalCandidate, signal: Bool = true) {
        guard gathering.add(l) else { return }
        if l.pairs { for r in remotes where Self.relayCanReach(l, r) { addPair(local: l, remote: r) } }
        guard signal else { return }
        let cb = shared.withLock { s -> (@Sendable (ICECandidate) -> Void)? in
            s.localCandidates.append(l.candidate)
            return s.onCandidate
        }
        cb?(l.candidate)
    }

    /// A server-reflexive candidate for `mapped` (`ICEGathering.serverReflexive`), signalled.
    func addServerReflexive(_ mapped: SocketAddress, server: SocketAddress) {
        if let l = gathering.serverReflexive(mapped, server: server) { addLocal(l) }
    }

    /// A STUN server's answer to our Binding request (the first one only).
    func handleServerResponse(_ server: ICEServer, _ m: STUNMessage) {
        if m.messageClass == .successResponse, let mapped = try? m.xorAddress(STUNMessage.AttributeType.xorMappedAddress),
            transport.carries(mapped.family)
        {
            addServerReflexive(mapped, server: server.address)
        }
        checkGatheringComplete()
    }

    func turnStateChanged(_ index: Int, _ state: TURNClient.State) {
        guard !closed, index < turns.count else { return }
        switch state {
        case .allocated(let relayed, let mapped):
            let server = turns[index].server.address
            let all = turns[index].relayedAddresses
            let addresses = all.contains(relayed) ? all : [relayed]
            // A lost allocation made again (TURNClient.allocationsLost): the old relayed candidates
            // go with their pairs, and the new ones are signalled like any late candidate.
            replaceRelayedCandidates(of: index, keeping: addresses)
            for l in gathering.relayedCandidates(of: index, server: server, addresses: addresses, mapped: mapped) {
                addLocal(l)
            }
            if transport.carries(mapped.family) && !configuration.relayOnly { addServerReflexive(mapped, server: server) }
            gathering.relayDone(index)
        case .failed, .closed:
            gathering.relayDone(index)
        case .idle, .allocating:
            break
        }
        checkGatheringComplete()
    }

    /// Removes the relayed candidates of TURN client `index` whose address is not in `addresses`,
    /// with every pair and check that uses them; the selected pair among them is deselected (media
    /// waits for a pair through the new allocation, or another path). Counted in
    /// `ICEAgentStatistics.relayedCandidatesReplaced`.
    func replaceRelayedCandidates(of index: Int, keeping addresses: [SocketAddress]) {
        let gone = gathering.removeRelayed(of: index, keeping: addresses)
        guard !gone.isEmpty else { return }
        let goneAddresses = Set(gone.map(\.candidate.address))
        let dead = checks.pairs.filter { $0.local.relay == index && goneAddresses.contains($0.local.candidate.address) }
        for p in dead {
            if let i = checks.pairs.firstIndex(where: { $0 === p }) { checks.removePair(at: i) }
        }
        if let n = checks.nominationTarget, dead.contains(where: { $0 === n }) { checks.nominationTarget = nil }
        if let n = checks.nominated, dead.contains(where: { $0 === n }) { checks.nominated = nil }
        if let s = selected, dead.contains(where: { $0 === s }) { deselect() }
        shared.withLock {
            $0.localCandidates.removeAll { goneAddresses.contains($0.address) && $0.type == .relay }
            $0.stats.relayedCandidatesReplaced += gone.count
        }
    }

    /// Announces the end of gathering once every server is done, or (given the time) once the
    /// deadline has passed (`ICEGathering.completes`).
    func checkGatheringComplete(now: MonotonicTime? = nil) {
        guard gathering.completes(now: now) else { return }
        shared.withLock { $0.onGatheringComplete }?()
    }

    // MARK: Remote side

    func setRemoteCredentialsOnQueue(ufrag: String, password: String, keepingRoute: Bool) {
        guard !closed, !ufrag.isEmpty, !password.isEmpty else { return }
        if let old = remoteUfrag, old == ufrag, remotePassword == password { return }
        if remoteUfrag != nil { forgetRemoteGeneration(keepingRoute: keepingRoute) }
        remoteUfrag = ufrag
        remotePassword = password
        remoteKey = STUNMessage.shortTermKey(password: password)
        if started { processEarlyRequests() }
        kickChecks()
    }

    /// The peer changed its credentials: an ICE restart on its side (RFC 8445 §9). Its old
    /// candidates, every pair with them and the checks in flight go. Without `keepingRoute`,
    /// media stops until a pair of the new generation works (the old peer agent is gone or no
    /// longer answers as itself). With it (the same peer restarting, as a WebRTC peer does), the
    /// selected pair stays, checked under the new credentials: media goes on over it while it
    /// answers, and fails over to a pair of the new generation when it does not.
    func forgetRemoteGeneration(keepingRoute: Bool = false) {
        guard keepingRoute, let kept = selected else {
            remotes.removeAll()
            checks.forgetGeneration()
            deselect()
            return
        }
        remotes.removeAll { $0.address != kept.remote.address }
        checks.forgetGeneration(keeping: kept)
        kept.nextKeepaliveAt = scheduler.now
    }

    func processEarlyRequests() {
        let early = earlyRequests
        earlyRequests.removeAll()
        for r in early where r.ufrag == remoteUfrag {
            learnFromRequest(from: r.from, to: r.to, relay: r.relay, priority: r.priority, useCandidate: r.useCandidate)
        }
    }

    func addRemoteCandidateOnQueue(_ c: ICECandidate) {
        guard !closed else { return }
        if let i = remotes.firstIndex(where: { $0.address == c.address }) {
            // A peer-reflexive candidate learned from a check, now signalled: keep the signalled form.
            if remotes[i].type == .prflx && c.type != .prflx {
                remotes[i] = c
                for p in checks.pairs where p.remote.address == c.address { p.updateRemote(c) }
                recomputePriorities()
                // The selected pair's snapshot names the signalled candidate too (same path).
                if let sel = selected, sel.remote.address == c.address {
                    shared.withLock { $0.selected = (sel.local.candidate, sel.remote) }
                }
            }
            return
        }
        guard c.component == 1, c.address.port != 0, !ICEHostAddresses.isWildcard(c.address),
            remotes.count < configuration.maxRemoteCandidates
        else {
            bump(\.droppedRemoteCandidates)
            return
        }
        remotes.append(c)
        for l in gathering.locals where l.pairs && Self.relayCanReach(l, c) { addPair(local: l, remote: c) }
        kickChecks()
    }

    /// Whether a signalled remote candidate is worth pairing with local candidate `l`: always,
    /// unless `l` is relayed on a server with a global address and the remote candidate's address
    /// is private, shared, link-local or loopback space (`ICEHostAddresses.isNonGlobal`). That
    /// address belongs to the peer's own network, which the relay is not in, so the check could
    /// never succeed; and the server's attempt to send there can cost the whole allocation:
    /// coturn, on a host with no route to it ("network unreachable"), closes the allocation that
    /// sent it, and every relayed pair of ours dies with it. A peer-reflexive candidate learned
    /// through the relay is paired where it is learned (the relay did reach it).
    package static func relayCanReach(_ l: ICELocalCandidate, _ remote: ICECandidate) -> Bool {
        guard l.relay != nil, remote.type != .prflx else { return true }
        return ICEHostAddresses.isNonGlobal(l.candidate.address) || !ICEHostAddresses.isNonGlobal(remote.address)
    }

    /// Forms a pair (same family; replacing the lowest-priority idle pair when at `maxPairs`).
    @discardableResult
    func addPair(local: ICELocalCandidate, remote: ICECandidate) -> ICECandidatePair? {
        guard local.candidate.address.family == remote.address.family else { return nil }
        if let p = checks.pairs.first(where: {
            $0.local.candidate.address == local.candidate.address && $0.local.relay == local.relay
                && $0.remote.address == remote.address
        }) {
            return p
        }
        let p = ICECandidatePair(local: local, remote: remote)
        p.priority = ICECandidatePair.priority(local: local.candidate.priority, remote: remote.priority, controlling: controlling)
        if checks.pairs.count >= max(1, configuration.maxPairs) {
            guard
                let worst = checks.pairs.enumerated().filter({
                    !$0.element.valid && $0.element.state != .inProgress && $0.element !== selected
                })
                .min(by: { $0.element.priority < $1.element.priority }), worst.element.priority < p.priority
            else { return nil }
            checks.removePair(at: worst.offset)
        }
        checks.pairs.append(p)
        if let r = local.relay { turns[r].createPermission(remote.address) }
        return p
    }

    func recomputePriorities() {
        for p in checks.pairs {
            p.priority = ICECandidatePair.priority(
                local: p.local.candidate.priority, remote: p.remote.priority, controlling: controlling)
        }
    }
}
