// Friend links on simulated time: each friend's link is a port of the virtual network with an ICE
// agent on the world's clock (`SimulatedWorld.linkEndpoint`), so the link's ICE runs through the
// network's NATs and a simulated TURN server exactly as the session code drives it in production.
// The session moving onto the link, the fallbacks behind symmetric NATs, a link path dying, the
// quiet consent pace, the idle lifetime after the friend went offline, a restarted friend's new
// link and what a stranger can make a peer keep. Each test prints its figures (times and routes),
// the same in every run.
import Foundation
import MediaCore
import MediaTestSupport
import MediaTools
import Testing

@testable import RevueSession

@MainActor
@Suite struct SimulatedFriendLinkTests {
    static let turnAddress = SocketAddress(ipv4: 127, 77, 0, 200, port: 3478)

    /// The outside address of the NAT in front of the `n`th peer's host.
    static func publicHost(_ n: Int) -> SocketAddress { SocketAddress(ipv4: 127, 77, 1, UInt8(1 + n), port: 0) }

    /// A world (5 ms links) whose first two hosts each sit behind a NAT of `behaviour` (private
    /// addresses not routed between networks, so host candidates do not connect), with a TURN
    /// server when asked, and two peers, alice and bob, configured with it.
    func natWorld(_ behaviour: VirtualNetwork.NATBehaviour?, turn: Bool) throws -> (
        SimulatedWorld, SimulatedPeer, SimulatedPeer, SimulatedTURNServer?
    ) {
        let world = SimulatedWorld(link: ImpairmentModel.Settings(delayMilliseconds: 5))
        if let behaviour {
            world.network.routesToPrivateAddresses = false
            for n in 0..<2 {
                world.network.addNAT(publicHost: Self.publicHost(n), behaviour: behaviour, insideHosts: [SimulatedWorld.host(n)])
            }
        }
        let server = turn ? SimulatedTURNServer(network: world.network, address: Self.turnAddress) : nil
        let tweak: (inout RevueConfiguration) -> Void = { c in
            if let server {
                c.iceServers = [.turn(server.address.description, username: server.username, password: server.password)]
            }
        }
        let alice = try world.addPeer("alice", tweak: tweak), bob = try world.addPeer("bob", tweak: tweak)
        return (world, alice, bob, server)
    }

    func link(_ p: SimulatedPeer, to friend: SimulatedPeer) -> FriendLink? { p.core.friends[friend.id]?.link }

    /// The virtual port under a link.
    func port(_ link: FriendLink) -> VirtualDatagramPort? {
        if case .transport(let t) = link.carrier { return t as? VirtualDatagramPort }
        return nil
    }

    /// Whether `p` sends to `friend` on its link now (a selected pair it heard the friend on).
    func onLink(_ world: SimulatedWorld, _ p: SimulatedPeer, _ friend: SimulatedPeer) -> Bool {
        guard let f = p.core.friends[friend.id] else { return false }
        return f.bestRoute(now: world.time.now, timeout: p.core.timeouts.connectionTimeout) == .link
    }

    /// Runs until both send on their links; how long that took (nil: not within `timeout`).
    func runUntilLinked(_ world: SimulatedWorld, _ a: SimulatedPeer, _ b: SimulatedPeer, timeout: Duration = .seconds(10))
        -> Duration?
    {
        let start = world.time.now
        return world.run(until: timeout) { onLink(world, a, b) && onLink(world, b, a) } ? world.time.now - start : nil
    }

    /// Sends `text` from `a` to `b` while recording the routes of `a`'s transport packets; whether
    /// it arrived (receipt included) within `timeout`, the time it took, and the routes.
    func deliver(_ world: SimulatedWorld, _ text: String, from a: SimulatedPeer, to b: SimulatedPeer, timeout: Duration)
        async -> (arrived: Bool, after: Duration, routes: [Route])
    {
        var routes: [Route] = []
        a.core.environment.sendTap = { bytes, route in
            if bytes.first == PacketType.transportData.rawValue { routes.append(route) }
        }
        defer { a.core.environment.sendTap = nil }
        let start = world.time.now
        let outcome = a.send(text, to: b, timeout: timeout.inSeconds)
        let done = await world.runYielding(until: timeout) { outcome.result != nil && b.messages.contains { $0.text == text } }
        return (done && (try? outcome.result?.get()) != nil, world.time.now - start, routes)
    }

    func describe(_ routes: [Route]) -> String {
        var counts: [String: Int] = [:]
        for r in routes {
            switch r {
            case .link: counts["link", default: 0] += 1
            case .direct: counts["direct", default: 0] += 1
            case .relay: counts["relay", default: 0] += 1
            }
        }
        return counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
    }

    /// Behind cone NATs (every kind the network has) the links select a direct pair to the other
    /// side's mapped address (its NAT's outside address, not the rendezvous node nor a host
    /// address), the session moves onto it, and a message travels on the link.
    @Test(arguments: [VirtualNetwork.NATBehaviour.portPreservingCone, .addressRestricted, .portRestricted])
    func behindConeNATsTheLinkGoesStraightToTheMappedAddress(_ behaviour: VirtualNetwork.NATBehaviour) async throws {
        let (world, alice, bob, _) = try natWorld(behaviour, turn: false)
        defer { world.close() }
        let start = world.time.now
        #expect(try world.befriend(alice, bob))
        let online = world.time.now - start
        let linked = runUntilLinked(world, alice, bob)
        #expect(linked != nil)
        let la = try #require(link(alice, to: bob)), lb = try #require(link(bob, to: alice))
        let ra = try #require(la.route), rb = try #require(lb.route)
        #expect(!ra.isRelayed && !rb.isRelayed)
        #expect(ra.peer.host == Self.publicHost(1).host && rb.peer.host == Self.publicHost(0).host, "\(ra) \(rb)")
        #expect(la.remoteUfrag == lb.agent.localUfrag && lb.remoteUfrag == la.agent.localUfrag)
        let sent = await deliver(world, "over the link", from: alice, to: bob, timeout: .seconds(5))
        #expect(sent.arrived)
        #expect(sent.routes.contains(.link), "\(sent.routes)")
        #expect(!sent.routes.contains(.relay(SimulatedWorld.nodeAddress)), "\(sent.routes)")
        // The App's path list shows the link's remote address first.
        let paths = alice.friends.getFriendPaths(friendId: bob.id).paths
        #expect(paths.first?.endpoint == ra.peer.description, "\(paths)")
        print(
            "\(behaviour): online after \(online), on the link \(linked.map { "\($0)" } ?? "never") later; "
                + "alice -> \(ra), bob -> \(rb); a message in \(sent.after) (\(describe(sent.routes)))")
    }

    /// Symmetric NATs on both sides: no direct pair can work. With a TURN server the links take a
    /// pair through it and the session moves there; without one the links find no pair and the
    /// session stays on the rendezvous node's relay. Messages arrive either way.
    @Test(arguments: [true, false]) func behindSymmetricNATsTheLinkFallsBack(turn: Bool) async throws {
        let (world, alice, bob, server) = try natWorld(.symmetric, turn: turn)
        defer { world.close() }
        #expect(try world.befriend(alice, bob))
        let linked = runUntilLinked(world, alice, bob)
        let la = try #require(link(alice, to: bob)), lb = try #require(link(bob, to: alice))
        let f = try #require(alice.core.friends[bob.id])
        let best = f.bestRoute(now: world.time.now, timeout: alice.core.timeouts.connectionTimeout)
        let figures: String
        if let server {
            #expect(linked != nil)
            let ra = try #require(la.route), rb = try #require(lb.route)
            // Each side either relays through its allocation or sends to the other's relayed address.
            let turnHost = Self.turnAddress.host
            #expect(ra.isRelayed || ra.peer.host == turnHost, "\(ra)")
            #expect(rb.isRelayed || rb.peer.host == turnHost, "\(rb)")
            #expect(best == .link)
            #expect(server.counters.allocations == 2 && server.counters.toPeers > 0, "\(server.counters)")
            figures = "through TURN after \(linked.map { "\($0)" } ?? "never"): alice -> \(ra), bob -> \(rb)"
        } else {
            // Give the links time to fail every check (checks retransmit for several seconds).
            world.run(for: .seconds(10))
            #expect(linked == nil)
            #expect(la.route == nil && lb.route == nil, "\(String(describing: la.route)) \(String(describing: lb.route))")
            #expect(best == .relay(SimulatedWorld.nodeAddress), "\(String(describing: best))")
            figures = "no link pair; the session on \(best.map { "\($0)" } ?? "nothing")"
        }
        let sent = await deliver(world, "still here", from: alice, to: bob, timeout: .seconds(5))
        #expect(sent.arrived)
        #expect(sent.routes.contains(turn ? .link : .relay(SimulatedWorld.nodeAddress)), "\(sent.routes)")
        print("symmetric NATs, TURN \(turn ? "on" : "off"): \(figures); a message in \(sent.after) (\(describe(sent.routes)))")
    }

    /// The direct path between the two NATs dies mid-session (every datagram between them lost):
    /// the session notices at once and carries a message on the rendezvous relay, and the link
    /// fails over to its TURN pair within its quiet failover time, after which the session runs
    /// on the link again.
    @Test func aDeadLinkPathIsNoticedAndTheSessionMovesOn() async throws {
        let (world, alice, bob, turn) = try natWorld(.portRestricted, turn: true)
        let server = try #require(turn)
        defer {
            world.close()
            server.close()
        }
        #expect(try world.befriend(alice, bob))
        #expect(runUntilLinked(world, alice, bob) != nil)
        let la = try #require(link(alice, to: bob))
        let before = try #require(la.route)
        #expect(!before.isRelayed && before.peer.host == Self.publicHost(1).host, "\(before)")
        // Settle, then cut the path between the NATs both ways.
        world.run(for: .seconds(3))
        var dead = ImpairmentModel.Settings(delayMilliseconds: 5)
        dead.loss = 1
        world.network.setLink(from: Self.publicHost(0), to: Self.publicHost(1), dead)
        world.network.setLink(from: Self.publicHost(1), to: Self.publicHost(0), dead)
        let cutAt = world.time.now

        // The session leaves the link once it has not heard the friend there for the connection
        // timeout, and a message goes through the rendezvous node's relay meanwhile.
        #expect(world.run(until: .seconds(5)) { !onLink(world, alice, bob) })
        let sessionLeftAfter = world.time.now - cutAt
        #expect(sessionLeftAfter <= alice.core.timeouts.connectionTimeout + .milliseconds(100), "\(sessionLeftAfter)")
        let sent = await deliver(world, "after the cut", from: alice, to: bob, timeout: .seconds(10))
        #expect(sent.arrived)
        #expect(sent.after <= .seconds(3), "\(sent.after)")
        #expect(sent.routes.contains(.relay(SimulatedWorld.nodeAddress)), "\(sent.routes)")

        // The link's agent fails the silent pair over after its quiet failover time (on its
        // 500 ms quiet tick).
        let failed = world.run(until: .seconds(10)) {
            la.agent.pairSnapshots.contains { $0.selected && $0.failed } || la.route?.isSame(as: before) == false
        }
        let agentNoticedAfter = world.time.now - cutAt
        #expect(failed, "\(la.agent.pairSnapshots)")
        let quiet = Duration.milliseconds(la.agent.configuration.quietFailoverAfterMilliseconds)
        #expect(agentNoticedAfter <= quiet + .milliseconds(600), "\(agentNoticedAfter)")
        // It then moves to a pair through the TURN server (relayed on its side or the friend's),
        // and the session follows it back onto the link.
        let moved = world.run(until: .seconds(5)) {
            guard let r = la.route else { return false }
            return r.isRelayed || r.peer.host == Self.turnAddress.host
        }
        let linkMovedAfter = world.time.now - cutAt
        #expect(moved, "\(la.agent.pairSnapshots)")
        let backOnLink = runUntilLinked(world, alice, bob)
        #expect(backOnLink != nil)
        let again = await deliver(world, "through TURN", from: alice, to: bob, timeout: .seconds(5))
        #expect(again.arrived && again.routes.contains(.link), "\(again.routes)")
        #expect(server.counters.toPeers > 0 && server.counters.toClients > 0, "\(server.counters)")
        print(
            "path cut: the session left the link \(sessionLeftAfter) after the cut, a message in \(sent.after); "
                + "the agent failed the pair \(agentNoticedAfter) after the cut and moved through TURN \(linkMovedAfter) "
                + "after it, the session back on the link \(backOnLink.map { "\($0)" } ?? "never") later; "
                + "a message in \(again.after)")
    }

    /// While no call uses it a link is quiet: one consent check per `quietKeepaliveIntervalMilliseconds`
    /// (2.5 s, jittered) on the selected pair, not four a second.
    @Test func anIdleLinkChecksAtTheQuietPace() throws {
        let (world, alice, bob, _) = try natWorld(nil, turn: false)
        defer { world.close() }
        #expect(try world.befriend(alice, bob))
        #expect(runUntilLinked(world, alice, bob) != nil)
        let la = try #require(link(alice, to: bob)), lb = try #require(link(bob, to: alice))
        world.run(for: .seconds(5))
        let a0 = la.agent.statistics.checksSent, b0 = lb.agent.statistics.checksSent
        world.run(for: .seconds(30))
        let a = la.agent.statistics.checksSent - a0, b = lb.agent.statistics.checksSent - b0
        let interval = Double(la.agent.configuration.quietKeepaliveIntervalMilliseconds) / 1000
        print("an idle link over 30 s: alice \(a) checks, bob \(b) (one per \(interval) s expected)")
        let expected = Int(30 / interval)
        #expect((expected - 3...expected + 3).contains(a) && (expected - 3...expected + 3).contains(b), "\(a) \(b)")
        #expect(la.route != nil && lb.route != nil)
    }

    /// A friend that goes offline keeps its link `FriendLink.idleLifetime` (so a short outage does
    /// not cost the path) and not longer: it closes on the first tick after, and its port goes.
    @Test func theLinkClosesItsIdleLifetimeAfterTheFriendWentOffline() throws {
        let (world, alice, bob, _) = try natWorld(nil, turn: false)
        defer { world.close() }
        #expect(try world.befriend(alice, bob))
        #expect(runUntilLinked(world, alice, bob) != nil)
        let la = try #require(link(alice, to: bob))
        let linkPort = try #require(port(la))
        bob.revue.abandonForTesting()
        #expect(world.run(until: .seconds(5)) { !alice.isOnline(with: bob) })
        let offlineAt = try #require(alice.onlineChanges.last { $0.friend == bob.id && !$0.online }).at
        world.run(for: FriendLink.idleLifetime - (world.time.now - offlineAt) - .milliseconds(100))
        #expect(link(alice, to: bob) === la, "closed before its idle lifetime")
        #expect(world.run(until: .seconds(1)) { link(alice, to: bob) == nil })
        let closedAfter = world.time.now - offlineAt
        print("offline, then the link closed \(closedAfter) later (idle lifetime \(FriendLink.idleLifetime))")
        #expect(closedAfter >= FriendLink.idleLifetime && closedAfter <= FriendLink.idleLifetime + .milliseconds(100))
        // The port is closed: a datagram to it reaches nobody.
        let received = linkPort.received
        world.network.inject([0, 1, 0, 0], from: SimulatedWorld.host(9), to: linkPort.address)
        world.run(for: .milliseconds(20))
        #expect(linkPort.received == received)
    }

    /// A friend that restarts comes back with a new link: ours, kept over the short outage, takes
    /// its new credentials as an ICE restart (the old candidates and pairs go), finds a pair with
    /// it, and the session moves onto the link again.
    @Test func aRestartedFriendsNewLinkIsFollowed() async throws {
        let (world, alice, bob, _) = try natWorld(.portRestricted, turn: false)
        defer { world.close() }
        #expect(try world.befriend(alice, bob))
        #expect(runUntilLinked(world, alice, bob) != nil)
        let kept = try #require(link(alice, to: bob))
        let oldUfrag = try #require(link(bob, to: alice)).agent.localUfrag
        let oldRemotes = Set(kept.agent.pairSnapshots.map(\.remote.address))
        bob.revue.destroy()
        #expect(world.run(until: .seconds(5)) { !alice.isOnline(with: bob) })
        let restartedAt = world.time.now
        try bob.restart()
        #expect(world.run(until: .seconds(10)) { alice.isOnline(with: bob) })
        let relinked = runUntilLinked(world, alice, bob)
        #expect(relinked != nil)
        let fresh = try #require(link(bob, to: alice))
        #expect(fresh.agent.localUfrag != oldUfrag)
        #expect(link(alice, to: bob) === kept, "alice's link was kept over the outage")
        #expect(kept.remoteUfrag == fresh.agent.localUfrag)
        // Only the new generation's candidates are paired.
        let peer = try #require(kept.route).peer
        #expect(!kept.agent.pairSnapshots.isEmpty)
        #expect(kept.agent.pairSnapshots.allSatisfy { !oldRemotes.contains($0.remote.address) }, "\(kept.agent.pairSnapshots)")
        let sent = await deliver(world, "again", from: alice, to: bob, timeout: .seconds(5))
        #expect(sent.arrived && sent.routes.contains(.link), "\(sent.routes)")
        print(
            "restart: back on the link \((world.time.now - restartedAt) - sent.after) after the restart, "
                + "alice -> \(peer)")
    }

    /// What a stranger can make a peer keep through links: nothing. A link exists only for a
    /// friend whose handshake completed (its static key is in the friend list), so the links are
    /// bounded by the friends; a stranger's friend request makes none. On a friend's link, a
    /// stranger's unauthenticated checks make no pair or candidate, a packet of another friend's
    /// session replayed onto it is dropped as forged, other session packets and garbage are
    /// dropped and counted, and the friend on the link stays online.
    @Test func aStrangerMakesNoLinkAndALinkRefusesWhatIsNotItsFriends() async throws {
        let world = SimulatedWorld(link: ImpairmentModel.Settings(delayMilliseconds: 5))
        defer { world.close() }
        let alice = try world.addPeer("alice"), bob = try world.addPeer("bob"), carol = try world.addPeer("carol")
        let mallory = try world.addPeer("mallory")
        #expect(try world.befriend(alice, bob))
        #expect(try world.befriend(alice, carol))
        #expect(runUntilLinked(world, alice, carol) != nil)
        try mallory.friends.addFriend(address: alice.revue.revueAddress, message: "let me in")
        #expect(world.run(until: .seconds(5)) { alice.requests.contains(mallory.id) })
        world.run(for: .seconds(2))
        let core = alice.core
        let links = core.friends.values.compactMap(\.link)
        #expect(links.count == 2, "\(links.count) links")
        #expect(core.friends[mallory.id]?.link == nil)

        // A packet of bob's session, captured on its way to alice, sent to carol's link.
        var captured: [UInt8]?
        bob.core.environment.sendTap = { bytes, _ in
            if bytes.first == PacketType.transportData.rawValue, captured == nil { captured = bytes }
        }
        let fromBob = bob.send("from bob", to: alice)
        #expect(await world.runYielding(until: .seconds(5)) { fromBob.result != nil })
        bob.core.environment.sendTap = nil
        let packet = try #require(captured)
        let linkToCarol = try #require(link(alice, to: carol))
        let target = try #require(port(linkToCarol)).address
        let stranger = SocketAddress(SimulatedWorld.host(9), port: 9999)
        let pairsBefore = linkToCarol.agent.pairSnapshots.count
        let refusedBefore = linkToCarol.agent.statistics.droppedRequests
        let before = core.counters
        world.network.inject(packet, from: stranger, to: target)
        world.run(for: .milliseconds(50))
        #expect(core.counters.droppedForged == before.droppedForged + 1)
        // A handshake initiation and a short transport packet, in the session's range, and an
        // unauthenticated Binding request.
        world.network.inject(
            [PacketType.handshakeInitiation.rawValue] + [UInt8](repeating: 1, count: 150), from: stranger, to: target)
        world.network.inject([PacketType.transportData.rawValue, 1, 2], from: stranger, to: target)
        var binding = STUNMessage(method: .binding, class: .request)
        binding.appendText(STUNMessage.AttributeType.username, "abcd:efgh")
        world.network.inject(binding.encode(fingerprint: true), from: stranger, to: target)
        world.run(for: .milliseconds(50))
        #expect(core.counters.droppedMalformed >= before.droppedMalformed + 2)
        #expect(core.counters.handshakesCompleted == before.handshakesCompleted)
        #expect(linkToCarol.agent.pairSnapshots.count == pairsBefore)
        #expect(linkToCarol.agent.statistics.droppedRequests == refusedBefore + 1)
        #expect(!linkToCarol.agent.pairSnapshots.contains { $0.remote.address == stranger })
        world.run(for: .seconds(2))
        #expect(alice.isOnline(with: carol) && onLink(world, alice, carol))
        print(
            "a stranger: \(links.count) links for 2 friends and 1 request; forged \(core.counters.droppedForged - before.droppedForged), "
                + "malformed \(core.counters.droppedMalformed - before.droppedMalformed), pairs \(pairsBefore) before and after")
    }
}
