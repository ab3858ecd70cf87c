import MediaCore
// The ICE agent on simulated time over a virtual network: every assertion about time is made on
// the simulated clock and printed, and the agents draw their tie-breakers and keepalive jitter
// from seeds, so each figure is the same in every run. Host addresses are in 127.77/16 so nothing
// could leave the machine. The same agent on real sockets (address families, interfaces, forged
// datagrams) is in MediaRealtimeTests' ICEAgentTests, and against real NATs and coturn in
// InteropTests.
import MediaTestSupport
import MediaTools
import Synchronization
import Testing

private func host(_ c: UInt8, _ d: UInt8, port: UInt16 = 0) -> SocketAddress { SocketAddress(ipv4: 127, 77, c, d, port: port) }

/// Host-to-host connection, nomination, role conflicts and retransmissions.
@Suite struct SimulatedICEAgentConnectTests {
    /// Two agents 1 ms apart: the controlling one selects the first valid pair at once and
    /// nominates it; both select the other's host address, media flows both ways, and nothing is
    /// dropped. The whole exchange takes a few simulated milliseconds.
    @Test func hostToHostConnectsAndNominates() throws {
        let time = SimulatedTime()
        let network = VirtualNetwork(time: time)
        let a = SimulatedICEPeer(network, host(0, 1, port: 5000), controlling: true, seed: 1)
        let b = SimulatedICEPeer(network, host(0, 2, port: 5000), controlling: false, seed: 2)
        defer { a.close(); b.close() }
        let start = time.now
        simulatedICEConnect(a, b)
        var nominatedAt: MonotonicTime?
        let done = time.runUntil(timeout: .seconds(2), step: .milliseconds(1)) {
            if nominatedAt == nil, a.agent.nominated != nil { nominatedAt = time.now }
            return nominatedAt != nil && (b.agent.selected?.peerNominatedAt ?? .zero) > .zero
        }
        #expect(done, "\(a.agent.pairSnapshots) \(b.agent.pairSnapshots)")
        let aSelected = simulatedMilliseconds(a.changedAt(to: b.address, after: start), since: start)
        let bSelected = simulatedMilliseconds(b.changedAt(to: a.address, after: start), since: start)
        let nominated = simulatedMilliseconds(nominatedAt, since: start)
        #expect(a.selectedRemote == b.address && b.selectedRemote == a.address)
        #expect(a.agent.path.route?.peer == b.address && b.agent.path.route?.peer == a.address)
        #expect(a.agent.localCandidates.map(\.address) == [a.address])
        #expect(a.agent.isControlling && !b.agent.isControlling)
        #expect((aSelected ?? 1e9) <= 10 && (bSelected ?? 1e9) <= 10 && (nominated ?? 1e9) <= 10)
        a.sendMedia([0x80, 0xA1])
        b.sendMedia([0x80, 0xB1])
        time.advance(by: .milliseconds(5))
        #expect(b.received(tagged: [0x80, 0xA1]).count == 5 && a.received(tagged: [0x80, 0xB1]).count == 5)
        #expect(b.received(tagged: [0x80, 0xA1]).allSatisfy { $0.from == a.address })
        let sa = a.agent.statistics, sb = b.agent.statistics
        #expect(sa.droppedResponses == 0 && sb.droppedResponses == 0 && sa.droppedRequests == 0 && sb.droppedRequests == 0)
        #expect(a.gatheredAt.withLock { $0 } != nil && b.gatheredAt.withLock { $0 } != nil)
        print(
            "simulated host-to-host: a selected at \(aSelected ?? -1) ms, nominated at \(nominated ?? -1) ms, "
                + "b selected at \(bSelected ?? -1) ms; checks sent a \(sa.checksSent) b \(sb.checksSent)")
    }

    /// Both agents think they are controlling (or both controlled): the tie-breakers settle it
    /// (RFC 8445 §7.3.1.1), exactly one ends up controlling and both use the same pair.
    @Test(arguments: [true, false])
    func roleConflictResolves(bothControlling: Bool) throws {
        let time = SimulatedTime()
        let network = VirtualNetwork(time: time)
        let a = SimulatedICEPeer(network, host(0, 1, port: 5000), controlling: bothControlling, seed: 11)
        let b = SimulatedICEPeer(network, host(0, 2, port: 5000), controlling: bothControlling, seed: 12)
        defer { a.close(); b.close() }
        let start = time.now
        simulatedICEConnect(a, b)
        let done = time.runUntil(timeout: .seconds(3), step: .milliseconds(1)) {
            a.selectedRemote == b.address && b.selectedRemote == a.address && a.agent.isControlling != b.agent.isControlling
        }
        #expect(done)
        let switches = a.agent.statistics.roleSwitches + b.agent.statistics.roleSwitches
        #expect(switches >= 1)
        a.sendMedia([0x80, 0xE1])
        time.advance(by: .milliseconds(5))
        #expect(b.received(tagged: [0x80, 0xE1]).count == 5)
        print(
            "simulated role conflict (both \(bothControlling ? "controlling" : "controlled")): settled at "
                + "\(simulatedMilliseconds(time.now, since: start) ?? -1) ms, \(switches) switch(es), a controlling \(a.agent.isControlling)"
        )
    }

    /// A check to an address that never answers is sent again after 100, 200, 400, 800 and 1600 ms
    /// (the RTO doubling), six datagrams in all; then the pair fails.
    @Test func aCheckIsRetransmittedOnItsScheduleThenThePairFails() throws {
        let time = SimulatedTime()
        let network = VirtualNetwork(time: time)
        let a = SimulatedICEPeer(network, host(0, 1, port: 5000), controlling: true, seed: 3)
        let silent = SimulatedVictim(network, host(0, 9, port: 6000))
        defer { a.close() }
        a.agent.addRemoteCandidate(
            ICECandidate(
                foundation: "s", priority: ICECandidate.priority(type: .host, localPreference: 100), address: silent.port.address,
                type: .host))
        a.agent.setRemoteCredentials(ufrag: "silent01", password: "silent-password-0123456789")
        a.agent.start()
        time.advance(by: .seconds(6))
        let at = silent.arrivals.withLock { $0.map(\.at) }
        let gaps = zip(at.dropFirst(), at).map { simulatedMilliseconds($0.0, since: $0.1) ?? -1 }
        let stats = a.agent.statistics
        print(
            "simulated retransmissions to a silent address: \(at.count) datagrams, gaps \(gaps) ms; \(stats.checksRetransmitted) retransmitted"
        )
        #expect(gaps == [100, 200, 400, 800, 1600])
        #expect(stats.checksSent == 1 && stats.checksRetransmitted == 5)
        #expect(a.agent.pairSnapshots.allSatisfy { $0.failed && !$0.valid }, "\(a.agent.pairSnapshots)")
    }

    /// 30% loss each way: retransmissions carry the checks through and both agents select the
    /// pair; the counts are printed (and the same in every run).
    @Test func connectsThroughLossByRetransmitting() throws {
        let time = SimulatedTime()
        let network = VirtualNetwork(time: time, seed: 7)
        let lossy = ImpairmentModel.Settings(loss: 0.3, delayMilliseconds: 20)
        network.setLink(from: host(0, 1), to: host(0, 2), lossy)
        network.setLink(from: host(0, 2), to: host(0, 1), lossy)
        let a = SimulatedICEPeer(network, host(0, 1, port: 5000), controlling: true, seed: 4)
        let b = SimulatedICEPeer(network, host(0, 2, port: 5000), controlling: false, seed: 5)
        defer { a.close(); b.close() }
        let start = time.now
        simulatedICEConnect(a, b)
        let done = time.runUntil(timeout: .seconds(5), step: .milliseconds(1)) {
            a.selectedRemote == b.address && b.selectedRemote == a.address
        }
        time.advance(by: .seconds(2))
        let sa = a.agent.statistics, sb = b.agent.statistics
        print(
            "simulated 30% loss: both selected at \(simulatedMilliseconds(max(a.changes.withLock { $0.first?.at ?? start }, b.changes.withLock { $0.first?.at ?? start }), since: start) ?? -1) ms; "
                + "after 2 s more: a sent \(sa.checksSent) checks (\(sa.checksRetransmitted) retransmitted), "
                + "b sent \(sb.checksSent) (\(sb.checksRetransmitted) retransmitted); network lost \(network.counters.lost)")
        #expect(done)
        #expect(sa.checksRetransmitted + sb.checksRetransmitted > 0)
        #expect(network.counters.lost > 0)
        #expect(a.selectedRemote == b.address && b.selectedRemote == a.address)
    }
}

/// Through NATs: server-reflexive candidates across cone NATs, and a TURN relay across
/// symmetric ones. Private addresses are not routed between the NATs.
@Suite struct SimulatedICEAgentNATTests {
    /// Two hosts behind NATs with endpoint-independent mapping: each learns its public address
    /// from the STUN server, their host candidates cannot reach each other, and the pair they
    /// select joins the two server-reflexive addresses (hole punching: each side's check opens
    /// its NAT for the other's).
    @Test(arguments: [VirtualNetwork.NATBehaviour.portPreservingCone, .portRestricted])
    func coneNATsConnectThroughServerReflexiveCandidates(behaviour: VirtualNetwork.NATBehaviour) throws {
        let time = SimulatedTime()
        let network = VirtualNetwork(time: time, defaultLink: ImpairmentModel.Settings(delayMilliseconds: 10))
        network.routesToPrivateAddresses = false
        network.addNAT(publicHost: host(100, 1), behaviour: behaviour, insideHosts: [host(1, 1)])
        network.addNAT(publicHost: host(100, 2), behaviour: behaviour, insideHosts: [host(2, 1)])
        let stun = SimulatedSTUNServer(network: network, address: host(200, 1, port: 3478))
        let a = SimulatedICEPeer(network, host(1, 1, port: 5000), controlling: true, seed: 21, servers: [stun.server])
        let b = SimulatedICEPeer(network, host(2, 1, port: 5000), controlling: false, seed: 22, servers: [stun.server])
        defer { a.close(); b.close(); stun.close() }
        let start = time.now
        simulatedICEConnect(a, b)
        let done = time.runUntil(timeout: .seconds(3), step: .milliseconds(1)) {
            a.agent.selectedPair != nil && b.agent.selectedPair != nil && a.agent.nominated != nil
        }
        #expect(done, "\(a.agent.pairSnapshots) \(b.agent.pairSnapshots)")
        let aSrflx = try #require(a.agent.localCandidates.first { $0.type == .srflx })
        let bSrflx = try #require(b.agent.localCandidates.first { $0.type == .srflx })
        #expect(aSrflx.address.host == "127.77.100.1" && bSrflx.address.host == "127.77.100.2")
        #expect(a.selectedRemote == bSrflx.address && b.selectedRemote == aSrflx.address)
        #expect(a.agent.selectedPair?.local.address == aSrflx.address)
        #expect(a.agent.pairSnapshots.filter { $0.remote.address == b.address }.allSatisfy { !$0.valid })
        #expect(network.counters.filtered > 0, "the host candidates must not be reachable")
        a.sendMedia([0x80, 0xA2])
        b.sendMedia([0x80, 0xB2])
        time.advance(by: .milliseconds(30))
        #expect(b.received(tagged: [0x80, 0xA2]).count == 5 && a.received(tagged: [0x80, 0xB2]).count == 5)
        print(
            "simulated \(behaviour) NATs: a \(aSrflx.address) -> b \(bSrflx.address) selected at "
                + "\(simulatedMilliseconds(a.changes.withLock { $0.first?.at }, since: start) ?? -1) ms (a), "
                + "\(simulatedMilliseconds(b.changes.withLock { $0.first?.at }, since: start) ?? -1) ms (b); "
                + "STUN answered \(stun.answered), NAT filtered \(network.counters.filtered)")
    }

    /// Two hosts behind symmetric NATs: the server-reflexive address is good for the STUN server
    /// only, so no direct pair works; once the direct pairs failed (or the relay check delay
    /// passed), the relayed pairs are checked, one through the TURN server is selected on both
    /// sides, and media flows through the relay.
    @Test func symmetricNATsConnectOnlyThroughTheRelay() throws {
        let time = SimulatedTime()
        let network = VirtualNetwork(time: time, defaultLink: ImpairmentModel.Settings(delayMilliseconds: 10))
        network.routesToPrivateAddresses = false
        network.addNAT(publicHost: host(100, 1), behaviour: .symmetric, insideHosts: [host(1, 1)])
        network.addNAT(publicHost: host(100, 2), behaviour: .symmetric, insideHosts: [host(2, 1)])
        let stun = SimulatedSTUNServer(network: network, address: host(200, 1, port: 3478))
        let turn = SimulatedTURNServer(network: network, address: host(200, 2, port: 3478))
        let servers = [stun.server, turn.server]
        let a = SimulatedICEPeer(network, host(1, 1, port: 5000), controlling: true, seed: 31, servers: servers)
        let b = SimulatedICEPeer(network, host(2, 1, port: 5000), controlling: false, seed: 32, servers: servers)
        defer { a.close(); b.close(); stun.close(); turn.close() }
        let start = time.now
        simulatedICEConnect(a, b)
        let done = time.runUntil(timeout: .seconds(5), step: .milliseconds(1)) {
            (a.agent.path.route?.isRelayed ?? false) || (b.agent.path.route?.isRelayed ?? false)
                ? a.agent.selectedPair != nil && b.agent.selectedPair != nil && a.agent.nominated != nil : false
        }
        #expect(done, "\(a.agent.pairSnapshots) \(b.agent.pairSnapshots)")
        let relays = turn.relayedAddresses.map(\.host)
        for peer in [a, b] {
            let pair = try #require(peer.agent.selectedPair)
            #expect(
                pair.local.type == .relay || pair.remote.type == .relay || relays.contains(pair.remote.address.host), "\(pair)")
            #expect(
                peer.agent.pairSnapshots.filter { $0.valid }.allSatisfy {
                    $0.local.type == .relay || relays.contains($0.remote.address.host)
                })
        }
        #expect(a.agent.localCandidates.contains { $0.type == .relay } && b.agent.localCandidates.contains { $0.type == .relay })
        let relayedBefore = turn.counters.toClients
        #expect(a.sendMedia([0x80, 0xA3]) == 5 && b.sendMedia([0x80, 0xB3]) == 5)
        time.advance(by: .milliseconds(60))
        #expect(b.received(tagged: [0x80, 0xA3]).count == 5 && a.received(tagged: [0x80, 0xB3]).count == 5)
        #expect(turn.counters.toClients >= relayedBefore + 5)
        print(
            "simulated symmetric NATs: relayed pair selected at \(simulatedMilliseconds(a.changes.withLock { $0.last?.at }, since: start) ?? -1) ms (a), "
                + "\(simulatedMilliseconds(b.changes.withLock { $0.last?.at }, since: start) ?? -1) ms (b): "
                + "a \(a.agent.selectedPair.map { "\($0.local.type) -> \($0.remote.type)" } ?? "-"), "
                + "b \(b.agent.selectedPair.map { "\($0.local.type) -> \($0.remote.type)" } ?? "-"); "
                + "TURN: \(turn.counters.allocations) allocations, \(turn.counters.toPeers) to peers, \(turn.counters.toClients) to clients"
        )
    }

    /// TURN servers given to agents already running (credentials that arrive mid-call, from a
    /// rendezvous node): between symmetric NATs nothing connects on STUN alone; once both agents
    /// get the TURN server, each allocates, trickles its relayed candidate and the call goes
    /// through the relay. The same server again starts nothing; ten more start only as many
    /// relays as an agent may add in its life (`ICEAgent.maxAddedRelays`).
    @Test func serversAddedToARunningAgentRelayTheCallWithinTheirBound() throws {
        let time = SimulatedTime()
        let network = VirtualNetwork(time: time, defaultLink: ImpairmentModel.Settings(delayMilliseconds: 10))
        network.routesToPrivateAddresses = false
        network.addNAT(publicHost: host(100, 1), behaviour: .symmetric, insideHosts: [host(1, 1)])
        network.addNAT(publicHost: host(100, 2), behaviour: .symmetric, insideHosts: [host(2, 1)])
        let stun = SimulatedSTUNServer(network: network, address: host(200, 1, port: 3478))
        let turn = SimulatedTURNServer(network: network, address: host(200, 2, port: 3478))
        let extra = (0..<10).map { SimulatedTURNServer(network: network, address: host(200, UInt8(10 + $0), port: 3478)) }
        let a = SimulatedICEPeer(network, host(1, 1, port: 5000), controlling: true, seed: 41, servers: [stun.server])
        let b = SimulatedICEPeer(network, host(2, 1, port: 5000), controlling: false, seed: 42, servers: [stun.server])
        defer { a.close(); b.close(); stun.close(); turn.close(); for t in extra { t.close() } }
        simulatedICEConnect(a, b)
        time.advance(by: .seconds(3))
        #expect(a.agent.path.route == nil && b.agent.path.route == nil, "connected without a relay: \(a.agent.pairSnapshots)")
        let added = time.now
        a.agent.addServers([turn.server])
        b.agent.addServers([turn.server])
        let done = time.runUntil(timeout: .seconds(5), step: .milliseconds(1)) {
            (a.agent.path.route?.isRelayed ?? false) || (b.agent.path.route?.isRelayed ?? false)
                ? a.agent.selectedPair != nil && b.agent.selectedPair != nil : false
        }
        #expect(done, "\(a.agent.pairSnapshots) \(b.agent.pairSnapshots)")
        let relayedAt = simulatedMilliseconds(a.changes.withLock { $0.last?.at }, since: added)
        #expect(turn.counters.allocations == 2)
        #expect(a.sendMedia([0x80, 0xA5]) == 5 && b.sendMedia([0x80, 0xB5]) == 5)
        time.advance(by: .milliseconds(60))
        #expect(b.received(tagged: [0x80, 0xA5]).count == 5 && a.received(tagged: [0x80, 0xB5]).count == 5)
        // The same server again: in use, nothing new.
        a.agent.addServers([turn.server])
        time.advance(by: .seconds(1))
        #expect(turn.counters.allocations == 2)
        // Ten more: a has added one relay, so seven more start.
        a.agent.addServers(extra.map(\.server))
        time.advance(by: .seconds(2))
        let extraAllocations = extra.map(\.counters.allocations).reduce(0, +)
        #expect(extraAllocations == ICEAgent.maxAddedRelays - 1)
        #expect(a.agent.localCandidates.filter { $0.type == .relay }.count == ICEAgent.maxAddedRelays)
        print(
            "simulated servers added mid-call: relayed route \(relayedAt ?? -1) ms after addServers; "
                + "ten more servers gave \(extraAllocations) allocations (bound \(ICEAgent.maxAddedRelays) added relays)")
    }
}

/// Consent, failover and the quiet pace, timed on the simulated clock.
@Suite struct SimulatedICEAgentConsentTests {
    /// Two agents with a second path through a forwarder (a host that passes datagrams on, as a
    /// NAT would), offered at a lower priority than the direct one.
    static func twoPaths(_ network: VirtualNetwork) -> (SimulatedICEPeer, SimulatedICEPeer, VirtualDatagramPort) {
        let a = SimulatedICEPeer(network, host(0, 1, port: 5000), controlling: true, seed: 41)
        let b = SimulatedICEPeer(network, host(0, 2, port: 5000), controlling: false, seed: 42)
        let forwarder = network.bind(host(0, 3, port: 7000))
        let aAddress = a.address, bAddress = b.address
        forwarder.start(screen: nil) { [weak forwarder] bytes, from in
            if from == aAddress {
                forwarder?.send(bytes, to: bAddress)
            } else if from == bAddress {
                forwarder?.send(bytes, to: aAddress)
            }
        }
        let low = ICECandidate(
            foundation: "fwd", priority: ICECandidate.priority(type: .host, localPreference: 1), address: forwarder.address,
            type: .host)
        simulatedICEConnect(a, b)
        a.agent.addRemoteCandidate(low)
        b.agent.addRemoteCandidate(low)
        return (a, b, forwarder)
    }

    /// The direct path dies (every datagram on it lost, the forwarder's path untouched): both
    /// agents fail over to the forwarded path within failoverAfter + one keepalive interval (and no
    /// sooner than failoverAfter minus the longest keepalive interval: the last answer came at most
    /// that long before the cut), media flows there, and when the direct path comes back it is
    /// selected again.
    @Test func failsOverWithinFailoverAfterPlusAKeepaliveAndComesBack() throws {
        let time = SimulatedTime()
        let network = VirtualNetwork(time: time)
        let (a, b, forwarder) = Self.twoPaths(network)
        defer { a.close(); b.close(); forwarder.close() }
        let settled = time.runUntil(timeout: .seconds(3), step: .milliseconds(1)) {
            a.selectedRemote == b.address && b.selectedRemote == a.address
                && a.agent.pairSnapshots.filter(\.valid).count >= 2 && b.agent.pairSnapshots.filter(\.valid).count >= 2
        }
        #expect(settled, "\(a.agent.pairSnapshots) \(b.agent.pairSnapshots)")
        time.advance(by: .seconds(1))
        let c = a.agent.configuration
        let cutAt = time.now
        let dead = ImpairmentModel.Settings(loss: 1, delayMilliseconds: 1)
        network.setLink(from: a.address, to: b.address, dead)
        network.setLink(from: b.address, to: a.address, dead)
        let failedOver = time.runUntil(timeout: .seconds(3), step: .milliseconds(1)) {
            a.agent.path.route?.peer == forwarder.address && b.agent.path.route?.peer == forwarder.address
        }
        #expect(failedOver, "\(a.agent.pairSnapshots) \(b.agent.pairSnapshots)")
        let aAfter = simulatedMilliseconds(a.changedAt(to: forwarder.address, after: cutAt), since: cutAt) ?? 1e9
        let bAfter = simulatedMilliseconds(b.changedAt(to: forwarder.address, after: cutAt), since: cutAt) ?? 1e9
        let upper = Double(c.failoverAfterMilliseconds + c.keepaliveIntervalMilliseconds)
        let lower = Double(c.failoverAfterMilliseconds) - 1.2 * Double(c.keepaliveIntervalMilliseconds) - 10
        #expect(aAfter <= upper && bAfter <= upper, "a \(aAfter) ms, b \(bAfter) ms")
        #expect(aAfter >= lower && bAfter >= lower, "a \(aAfter) ms, b \(bAfter) ms")
        a.sendMedia([0x80, 0xC1])
        b.sendMedia([0x80, 0xC2])
        time.advance(by: .milliseconds(5))
        #expect(b.received(tagged: [0x80, 0xC1]).count == 5 && a.received(tagged: [0x80, 0xC2]).count == 5)
        #expect(b.received(tagged: [0x80, 0xC1]).allSatisfy { $0.from == forwarder.address })

        let healedAt = time.now
        network.setLink(from: a.address, to: b.address, ImpairmentModel.Settings(delayMilliseconds: 1))
        network.setLink(from: b.address, to: a.address, ImpairmentModel.Settings(delayMilliseconds: 1))
        let back = time.runUntil(timeout: .seconds(3), step: .milliseconds(1)) {
            a.agent.path.route?.peer == b.address && b.agent.path.route?.peer == a.address
        }
        #expect(back, "\(a.agent.pairSnapshots) \(b.agent.pairSnapshots)")
        let aBack = simulatedMilliseconds(a.changedAt(to: b.address, after: healedAt), since: healedAt) ?? -1
        let bBack = simulatedMilliseconds(b.changedAt(to: a.address, after: healedAt), since: healedAt) ?? -1
        print(
            "simulated failover: cut at +0, a on the forwarder at \(aAfter) ms, b at \(bAfter) ms (bound \(lower)...\(upper)); "
                + "healed: a direct again at \(aBack) ms, b at \(bBack) ms; a changed pairs \(a.agent.statistics.selectedPairChanges) times"
        )
        #expect(a.agent.statistics.selectedPairChanges >= 3)
    }

    /// With no answer on any pair for `consentExpirySeconds` (1.5 s here), the route goes away
    /// (RFC 7675) and the change is reported: no sooner than 1.5 s minus the longest keepalive
    /// interval after the cable is pulled, and no later than 1.5 s plus one tick.
    @Test func consentExpiresWhenTheCableIsPulled() throws {
        let time = SimulatedTime()
        let network = VirtualNetwork(time: time)
        let configure: (inout ICEAgentConfiguration) -> Void = {
            $0.consentExpirySeconds = 1.5
            $0.failoverAfterMilliseconds = 500
        }
        let a = SimulatedICEPeer(network, host(0, 1, port: 5000), controlling: true, seed: 51, configure: configure)
        let b = SimulatedICEPeer(network, host(0, 2, port: 5000), controlling: false, seed: 52, configure: configure)
        defer { a.close(); b.close() }
        simulatedICEConnect(a, b)
        #expect(
            time.runUntil(timeout: .seconds(2), step: .milliseconds(1)) { a.agent.path.route != nil && b.agent.path.route != nil }
        )
        time.advance(by: .seconds(1))
        let cutAt = time.now
        network.setCut(a.address, true)
        let expired = time.runUntil(timeout: .seconds(4), step: .milliseconds(1)) {
            a.agent.path.route == nil && b.agent.path.route == nil
        }
        #expect(expired)
        let aAt = simulatedMilliseconds(a.changedAt(to: nil, after: cutAt), since: cutAt) ?? 1e9
        let bAt = simulatedMilliseconds(b.changedAt(to: nil, after: cutAt), since: cutAt) ?? 1e9
        print("simulated consent expiry (1.5 s): cable pulled at +0, a lost its route at \(aAt) ms, b at \(bAt) ms")
        let lower = 1500 - 1.2 * Double(a.agent.configuration.keepaliveIntervalMilliseconds) - 10
        #expect(aAt >= lower && aAt <= 1550 && bAt >= lower && bAt <= 1550)
        #expect(a.agent.selectedPair == nil && b.agent.selectedPair == nil)
        #expect(a.sendMedia([0x80, 0xC3]) == 0)
    }

    /// A quiet agent keeps its pair with a consent check every 2.5 s (x 0.8...1.2) instead of
    /// every 250 ms: at most one check in two quiet seconds; woken, it checks at its next tick
    /// (within Ta) and sends about eight in the next two seconds. Its peer answers either way and
    /// the pair stays.
    @Test func aQuietAgentChecksConsentSeldomAndWakesAtOnce() throws {
        let time = SimulatedTime()
        let network = VirtualNetwork(time: time)
        let a = SimulatedICEPeer(network, host(0, 1, port: 5000), controlling: true, seed: 61)
        let b = SimulatedICEPeer(network, host(0, 2, port: 5000), controlling: false, seed: 62)
        defer { a.close(); b.close() }
        simulatedICEConnect(a, b)
        #expect(
            time.runUntil(timeout: .seconds(2), step: .milliseconds(1)) {
                a.agent.selectedPair != nil && b.agent.selectedPair != nil
            })
        a.agent.setQuiet(true)
        time.advance(by: .milliseconds(500))
        let quiet0 = a.agent.statistics.checksSent
        time.advance(by: .seconds(2))
        let quiet = a.agent.statistics.checksSent - quiet0
        #expect(quiet <= 1, "\(quiet) checks while quiet")
        #expect(a.agent.selectedPair != nil && b.agent.selectedPair != nil)
        let woken0 = a.agent.statistics.checksSent
        a.agent.setQuiet(false)
        let ta = Duration.milliseconds(a.agent.configuration.checkIntervalMilliseconds)
        time.advance(by: ta)
        let atOnce = a.agent.statistics.checksSent - woken0
        time.advance(by: .seconds(2) - ta)
        let active = a.agent.statistics.checksSent - woken0
        print("simulated quiet: \(quiet) checks in 2 quiet s; woken: \(atOnce) within Ta, \(active) in 2 s")
        #expect(atOnce >= 1, "no check within Ta of waking")
        #expect(active >= 6 && active <= 11, "\(active) checks in 2 s at full pace")
        #expect(a.agent.selectedPair != nil && b.agent.selectedPair != nil)
    }
}

/// The bounds on what the agent sends: pacing, the probe budget toward addresses that never
/// answered, and the rate limit on answering.
@Suite struct SimulatedICEAgentProbeTests {
    /// Gives `agent` one host candidate per victim, in falling priority: what a hostile
    /// description does.
    static func aim(_ agent: ICEAgent, at victims: [SimulatedVictim]) {
        for (i, v) in victims.enumerated() {
            agent.addRemoteCandidate(
                ICECandidate(
                    foundation: "v\(i)", priority: ICECandidate.priority(type: .host, localPreference: UInt32(60000 - i)),
                    address: v.port.address, type: .host))
        }
    }

    /// New checks go out one per Ta (60 ms here), in pair-priority order, and a triggered check
    /// (for a request that just arrived) goes before the ordinary ones still waiting.
    @Test func checksArePacedInPriorityOrderWithTriggeredChecksFirst() throws {
        let time = SimulatedTime()
        let network = VirtualNetwork(time: time)
        let a = SimulatedICEPeer(network, host(0, 1, port: 5000), controlling: true, seed: 71) {
            $0.checkIntervalMilliseconds = 60
        }
        defer { a.close() }
        let targets = (0..<16).map { SimulatedVictim(network, host(5, UInt8(1 + $0), port: 6000)) }
        for (i, t) in targets.enumerated() {
            a.agent.addRemoteCandidate(
                ICECandidate(
                    foundation: "t\(i)", priority: ICECandidate.priority(type: .host, localPreference: UInt32(60000 - i * 100)),
                    address: t.port.address, type: .host))
        }
        let remoteUfrag = "targets1", remotePassword = "targets-password-0123456789"
        a.agent.setRemoteCredentials(ufrag: remoteUfrag, password: remotePassword)
        let start = time.now
        a.agent.start()
        // After the second new check, the last target asks: its check must jump the queue.
        time.runUntil(timeout: .seconds(1), step: .milliseconds(1)) { targets.filter { $0.count > 0 }.count >= 2 }
        let triggeredAfter = targets.filter { $0.count > 0 }.count
        let request = simulatedBindingRequest(
            username: "\(a.agent.localUfrag):\(remoteUfrag)", password: a.agent.localPassword, controlling: false)
        targets[15].port.send(request, to: a.address)
        time.advance(by: .milliseconds(700) - (time.now - start))
        // The first arrival at each target is its new check (retransmissions come later).
        let firsts = targets.enumerated().compactMap { i, t in
            t.arrivals.withLock { $0.first(where: \.request).map { (i, $0.at) } }
        }
        .sorted { $0.1 < $1.1 }
        let order = firsts.map(\.0)
        let gaps = zip(firsts.dropFirst(), firsts).map { simulatedMilliseconds($0.0.1, since: $0.1.1) ?? -1 }
        print("simulated pacing (Ta 60 ms): order \(order), gaps \(gaps) ms in 700 ms")
        #expect(order.count >= 4 && order.count <= 700 / 60 + 2, "\(order.count) checks")
        #expect(gaps.allSatisfy { $0 >= 60 }, "\(gaps)")
        let triggered = try #require(order.firstIndex(of: 15), "\(order)")
        #expect(triggered <= triggeredAfter, "\(order)")
        let ordinary = order.filter { $0 != 15 }
        #expect(ordinary == ordinary.sorted() && ordinary.first == 0, "\(order)")
    }

    /// 31 victims (15 ports of one host, 16 hosts of one /24) and the real peer, its candidate
    /// last in priority and in the /24 the victims already fill: over 6 s the agent (controlled,
    /// like a WHIP endpoint) sends the victims at most min(16 x 12, 40 + 20 x 6) datagrams, to at
    /// most 16 addresses and 8 per /24, while the peer's checks make the agent check it back and
    /// the pair is selected. The same agent with the bound lifted sends far more.
    @Test func aDescriptionAimedAtVictimsGetsNoMoreThanTheBound() throws {
        func run(bounded: Bool) -> (datagrams: Int, bytes: Int, addresses: Set<Int>, withheld: Int, connectedAt: Double?) {
            let time = SimulatedTime()
            let network = VirtualNetwork(time: time)
            let a = SimulatedICEPeer(network, host(3, 200, port: 5000), controlling: false, seed: 81) {
                if !bounded {
                    $0.unansweredSendsPerAddress = 1_000_000
                    $0.maxUnansweredAddresses = 1000
                    $0.maxUnansweredAddressesPerSubnet = 1000
                    $0.unansweredChecksPerSecond = 1_000_000
                    $0.unansweredBytesPerSecond = 1_000_000_000
                }
            }
            let b = SimulatedICEPeer(network, host(3, 250, port: 5000), controlling: true, seed: 82)
            let victims =
                (0..<15).map { SimulatedVictim(network, host(0, 1, port: UInt16(6000 + $0))) }
                + (0..<16).map { SimulatedVictim(network, host(3, UInt8(1 + $0), port: 6000)) }
            defer { a.close(); b.close() }
            Self.aim(a.agent, at: victims)
            b.agent.onCandidate = { [weak a] c in
                a?.agent.addRemoteCandidate(ICECandidate(foundation: "peer", priority: 1, address: c.address, type: .host))
            }
            a.agent.onCandidate = { [weak b] c in b?.agent.addRemoteCandidate(c) }
            a.agent.setRemoteCredentials(ufrag: b.agent.localUfrag, password: b.agent.localPassword)
            b.agent.setRemoteCredentials(ufrag: a.agent.localUfrag, password: a.agent.localPassword)
            let start = time.now
            a.agent.start()
            // The peer starts a moment later, as a browser that got the answer would.
            time.advance(by: .milliseconds(300))
            b.agent.start()
            var connectedAt: Double?
            time.runUntil(timeout: .milliseconds(5700), step: .milliseconds(1)) {
                if connectedAt == nil, a.selectedRemote == b.address, b.selectedRemote == a.address {
                    connectedAt = simulatedMilliseconds(time.now, since: start)
                }
                return false
            }
            #expect(a.agent.statistics.droppedRemoteCandidates == 0)
            let reached = Set(victims.indices.filter { victims[$0].count > 0 })
            return (
                victims.map(\.count).reduce(0, +), victims.map(\.bytes).reduce(0, +), reached, a.agent.statistics.checksWithheld,
                connectedAt
            )
        }
        let c = ICEAgentConfiguration(controlling: false)
        let bound = min(
            c.maxUnansweredAddresses * c.unansweredSendsPerAddress,
            2 * c.unansweredChecksPerSecond + 6 * c.unansweredChecksPerSecond)
        let byteBound = 2 * c.unansweredBytesPerSecond + 6 * c.unansweredBytesPerSecond
        let bounded = run(bounded: true)
        let open = run(bounded: false)
        print(
            "simulated victims got \(bounded.datagrams) datagrams (\(bounded.bytes) bytes) at \(bounded.addresses.count) of 31 addresses "
                + "in 6 s; bound \(bound) datagrams, \(byteBound) bytes; \(bounded.withheld) checks withheld; peer connected at "
                + "\(bounded.connectedAt ?? -1) ms; without the bound: \(open.datagrams) datagrams at \(open.addresses.count) addresses"
        )
        #expect(bounded.connectedAt != nil, "the real peer did not connect")
        #expect(open.connectedAt != nil)
        #expect(bounded.datagrams <= bound)
        #expect(bounded.bytes <= byteBound)
        #expect(bounded.addresses.count <= c.maxUnansweredAddresses)
        #expect(bounded.addresses.filter { $0 < 15 }.count <= c.maxUnansweredAddressesPerSubnet)
        #expect(bounded.addresses.filter { $0 >= 15 }.count <= c.maxUnansweredAddressesPerSubnet)
        #expect(bounded.withheld > 0)
        #expect(open.datagrams > bounded.datagrams)
    }

    /// The per-subnet cap alone: 24 victims in one /24 and 24 in another (with the overall cap out
    /// of the way): 8 addresses of each are checked, no more.
    @Test func atMostEightAddressesOfOneSlash24AreChecked() throws {
        let time = SimulatedTime()
        let network = VirtualNetwork(time: time)
        let a = SimulatedICEPeer(network, host(0, 1, port: 5000), controlling: true, seed: 91) {
            $0.maxRemoteCandidates = 64
            $0.maxUnansweredAddresses = 64
        }
        defer { a.close() }
        let victims = (0..<48).map { SimulatedVictim(network, host($0 < 24 ? 7 : 8, UInt8(1 + $0 % 24), port: 6000)) }
        Self.aim(a.agent, at: victims)
        a.agent.setRemoteCredentials(ufrag: "victims1", password: "victims-password-0123456789")
        a.agent.start()
        time.advance(by: .seconds(2))
        let reached = Set(victims.indices.filter { victims[$0].count > 0 })
        let total = victims.map(\.count).reduce(0, +)
        print(
            "simulated per /24: \(reached.filter { $0 < 24 }.count) and \(reached.filter { $0 >= 24 }.count) addresses of 24 each "
                + "checked, \(total) datagrams, \(a.agent.statistics.checksWithheld) withheld")
        #expect(reached.filter { $0 < 24 }.count == 8)
        #expect(reached.filter { $0 >= 24 }.count == 8)
        #expect(a.agent.statistics.checksWithheld >= 32)
    }

    /// A flood of 200 correctly signed requests in one instant is answered only up to the burst
    /// (twice the rate: 20), the rest counted; a second later 10 more may be answered; no answer is
    /// larger than its request.
    @Test func floodIsRateLimited() throws {
        let time = SimulatedTime()
        let network = VirtualNetwork(time: time)
        let a = SimulatedICEPeer(network, host(0, 1, port: 5000), controlling: false, seed: 101) {
            $0.bindingRequestsPerSecond = 10
        }
        defer { a.close() }
        a.agent.start()
        let flooder = network.bind(host(0, 66, port: 6000))
        let answers = Mutex<[Int]>([])
        flooder.start(screen: nil) { bytes, _ in answers.withLock { $0.append(bytes.count) } }
        let me = "\(a.agent.localUfrag):flooder"
        var size = 0
        for _ in 0..<200 {
            let r = simulatedBindingRequest(username: me, password: a.agent.localPassword)
            size = r.count
            flooder.send(r, to: a.address)
        }
        time.advance(by: .milliseconds(10))
        let first = answers.withLock { $0.count }
        for _ in 0..<200 { flooder.send(simulatedBindingRequest(username: me, password: a.agent.localPassword), to: a.address) }
        time.advance(by: .milliseconds(10))
        let second = answers.withLock { $0.count } - first
        let stats = a.agent.statistics
        print(
            "simulated flood (10/s): \(first) of 200 answered at once, \(second) of 200 after 10 ms more; \(stats.rateLimitedRequests) limited"
        )
        #expect(first == 20)
        #expect(second == 0)
        #expect(answers.withLock { $0.allSatisfy { $0 <= size } })
        #expect(stats.rateLimitedRequests + stats.checksAnswered == 400 && stats.checksAnswered == 20)
        time.advance(by: .seconds(1))
        for _ in 0..<20 { flooder.send(simulatedBindingRequest(username: me, password: a.agent.localPassword), to: a.address) }
        time.advance(by: .milliseconds(10))
        #expect(answers.withLock { $0.count } - first == 10, "a second refills 10 tokens")
        flooder.close()
    }
}

/// ICE restarts (RFC 8445 §9) as a WebRTC peer makes them: new credentials on both sides, the
/// peer's old candidates dropped, the selected pair kept while it answers.
@Suite struct SimulatedICERestartTests {
    /// a restarts (its offer), b follows (its answer), over a 10 ms link that stays good. Between
    /// a's new credentials and b learning them, b's consent checks still use a's old ones and
    /// are answered; afterwards the old ones are refused. The route never goes away, the pair
    /// is checked and nominated again under the new credentials, and media flows throughout.
    @Test func bothSidesTakeNewCredentialsAndTheRouteNeverGoesAway() throws {
        let time = SimulatedTime()
        let network = VirtualNetwork(time: time, defaultLink: ImpairmentModel.Settings(delayMilliseconds: 10))
        let a = SimulatedICEPeer(network, host(0, 1, port: 5000), controlling: true, seed: 31)
        let b = SimulatedICEPeer(network, host(0, 2, port: 5000), controlling: false, seed: 32)
        defer { a.close(); b.close() }
        simulatedICEConnect(a, b)
        let connected = time.runUntil(timeout: .seconds(2), step: .milliseconds(1)) {
            a.agent.nominated != nil && b.selectedRemote == a.address
        }
        try #require(connected, "\(a.agent.pairSnapshots) \(b.agent.pairSnapshots)")
        time.advance(by: .milliseconds(500))
        let old = (ufrag: a.agent.localUfrag, password: a.agent.localPassword)
        let restartAt = time.now
        let answeredBefore = a.agent.statistics.checksAnswered

        // a's offer: new credentials; b still checks under the old ones for 300 ms (the offer in flight).
        a.agent.restartLocalCredentials()
        #expect(a.agent.localUfrag != old.ufrag && a.agent.localPassword != old.password)
        time.advance(by: .milliseconds(300))
        #expect(a.agent.statistics.checksAnswered > answeredBefore, "b's checks under the old credentials went unanswered")
        #expect(a.agent.statistics.droppedRequests == 0)

        // b takes the offer (a's new generation) and answers with new credentials of its own.
        let bOld = b.agent.localUfrag
        b.agent.setRemoteCredentials(ufrag: a.agent.localUfrag, password: a.agent.localPassword, keepingRoute: true)
        for c in a.agent.localCandidates { b.agent.addRemoteCandidate(c) }
        b.agent.restartLocalCredentials()
        time.advance(by: .milliseconds(20))
        a.agent.setRemoteCredentials(ufrag: b.agent.localUfrag, password: b.agent.localPassword, keepingRoute: true)
        for c in b.agent.localCandidates { a.agent.addRemoteCandidate(c) }
        #expect(b.agent.localUfrag != bOld)
        let renominated = time.runUntil(timeout: .seconds(2), step: .milliseconds(1)) {
            a.agent.nominated != nil && (b.agent.selected?.peerNominatedAt ?? .zero) > restartAt
        }
        #expect(renominated, "\(a.agent.pairSnapshots) \(b.agent.pairSnapshots)")
        time.advance(by: .milliseconds(500))

        // The route was there all along, media still flows both ways, nothing was refused.
        let lost =
            a.changes.withLock { $0.filter { $0.at >= restartAt && $0.remote == nil }.count }
            + b.changes.withLock { $0.filter { $0.at >= restartAt && $0.remote == nil }.count }
        #expect(lost == 0, "the route went away during the restart")
        #expect(a.selectedRemote == b.address && b.selectedRemote == a.address)
        a.sendMedia([0x80, 0xD1])
        b.sendMedia([0x80, 0xD2])
        time.advance(by: .milliseconds(20))
        #expect(b.received(tagged: [0x80, 0xD1]).count == 5 && a.received(tagged: [0x80, 0xD2]).count == 5)
        let sa = a.agent.statistics, sb = b.agent.statistics
        #expect(sa.droppedRequests == 0 && sb.droppedRequests == 0 && sa.droppedResponses == 0)

        // Now that b checks under a's new credentials, the old ones are refused.
        let forged = simulatedBindingRequest(
            username: "\(old.ufrag):\(b.agent.localUfrag)", password: old.password, controlling: false)
        let intruder = network.bind(host(0, 9, port: 5000))
        defer { intruder.close() }
        intruder.send(forged, to: a.address)
        time.advance(by: .milliseconds(20))
        #expect(a.agent.statistics.droppedRequests == 1)
        print(
            "simulated ICE restart: renominated \(simulatedMilliseconds(b.agent.selected?.peerNominatedAt, since: restartAt) ?? -1) ms "
                + "after a's new credentials; checks answered under the old ones meanwhile \(a.agent.statistics.checksAnswered - answeredBefore)"
        )
    }

    /// The path in use dies while the peer restarts (its new candidate is another address):
    /// media moves to the new generation's pair within the failover time, without a path lost
    /// for longer than that.
    @Test func theKeptPairFailsOverToTheNewGenerationWhenItStopsAnswering() throws {
        let time = SimulatedTime()
        let network = VirtualNetwork(time: time, defaultLink: ImpairmentModel.Settings(delayMilliseconds: 10))
        let a = SimulatedICEPeer(network, host(0, 1, port: 5000), controlling: true, seed: 41)
        let b = SimulatedICEPeer(network, host(0, 2, port: 5000), controlling: false, seed: 42)
        defer { a.close(); b.close() }
        simulatedICEConnect(a, b)
        try #require(
            time.runUntil(timeout: .seconds(2), step: .milliseconds(1)) {
                a.agent.nominated != nil && b.selectedRemote == a.address
            })
        time.advance(by: .milliseconds(500))
        // b's network changes: its old address stops working, a new one (another agent on a new
        // endpoint, as a browser gathers new ports) takes over with new credentials.
        let b2 = SimulatedICEPeer(network, host(0, 3, port: 5000), controlling: false, seed: 43)
        defer { b2.close() }
        let cutAt = time.now
        network.setLink(from: a.address, to: b.address, ImpairmentModel.Settings(loss: 1, delayMilliseconds: 10))
        network.setLink(from: b.address, to: a.address, ImpairmentModel.Settings(loss: 1, delayMilliseconds: 10))
        a.agent.restartLocalCredentials()
        b2.agent.setRemoteCredentials(ufrag: a.agent.localUfrag, password: a.agent.localPassword)
        for c in a.agent.localCandidates { b2.agent.addRemoteCandidate(c) }
        a.agent.setRemoteCredentials(ufrag: b2.agent.localUfrag, password: b2.agent.localPassword, keepingRoute: true)
        b2.agent.onCandidate = { [weak agent = a.agent] c in agent?.addRemoteCandidate(c) }
        b2.agent.start()
        let moved = time.runUntil(timeout: .seconds(3), step: .milliseconds(1)) {
            a.selectedRemote == b2.address && b2.selectedRemote == a.address
        }
        let movedAt = simulatedMilliseconds(a.changedAt(to: b2.address, after: cutAt), since: cutAt)
        #expect(moved, "\(a.agent.pairSnapshots)")
        #expect(
            (movedAt ?? 1e9)
                <= Double(a.agent.configuration.failoverAfterMilliseconds + a.agent.configuration.keepaliveIntervalMilliseconds))
        a.sendMedia([0x80, 0xD3])
        time.advance(by: .milliseconds(20))
        #expect(b2.received(tagged: [0x80, 0xD3]).count == 5)
        print("simulated ICE restart onto a new path: a moved to b's new address \(movedAt ?? -1) ms after the old one died")
    }
}
