import Foundation
import MediaCore
import Testing

@testable import RevueSession

/// One path per friend on loopback: the friend session moves onto the friend's link (its own
/// socket and ICE pair), the link keeps strangers' and other friends' packets out, and a friend
/// that restarts with a new link is followed.
@MainActor @Suite(.serialized) struct FriendLinkTests {
    func link(_ p: TestPeer, to friend: TestPeer) -> FriendLink? { p.revue.core?.friends[friend.id]?.link }

    func send(_ bytes: [UInt8], from socket: UDPSocket, to target: SocketAddress) {
        _ = bytes.withUnsafeBytes { try? socket.send($0, to: target) }
    }

    /// Two friends on loopback (through a rendezvous node) whose links carry their session.
    func withLinkedFriends(_ body: (TestPeer, TestPeer) async throws -> Void) async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try TestPeer(rendezvous: node), b = try TestPeer(rendezvous: node)
        defer { a.remove(); b.remove() }
        try await befriend(a, b)
        await waitForLinks(a, b)
        try await body(a, b)
    }

    /// Once friends are online, each side's link finds a pair, the session's frames (messages
    /// included) leave on it, the App sees it among the friend's paths, and the two links know
    /// each other's credentials.
    @Test func theFriendSessionMovesOntoTheLink() async throws {
        try await withLinkedFriends { a, b in try await sessionMovesOntoTheLink(a, b) }
    }

    func sessionMovesOntoTheLink(_ a: TestPeer, _ b: TestPeer) async throws {
        let la = try #require(link(a, to: b)), lb = try #require(link(b, to: a))
        #expect(la.remoteUfrag == lb.agent.localUfrag && lb.remoteUfrag == la.agent.localUfrag)
        #expect(la.socket.descriptor != lb.socket.descriptor)

        var routes: [Route] = []
        a.revue.core!.environment.sendTap = { bytes, route in
            if bytes.first == PacketType.transportData.rawValue { routes.append(route) }
        }
        defer { a.revue.core!.environment.sendTap = nil }
        _ = try await a.revue.friends.sendMessage(friendId: b.id, message: "on the link")
        await b.waitForEvent(.message(a.id, "on the link"))
        #expect(routes.contains(.link), "\(routes)")
        #expect(!routes.contains { if case .direct = $0 { false } else { $0 != .link } }, "\(routes)")
        // The App's path list names the link's remote address.
        let peer = try #require(la.route?.peer)
        await a.wait("paths name the link", timeout: 3) {
            a.revue.friends.getFriendPaths(friendId: b.id).paths.contains { $0.endpoint == peer.description }
        }
    }

    /// A link takes transport data of its own friend only: a packet of another friend's session
    /// (real, captured on its way to us) sent to the link is dropped as forged before anything
    /// is recorded; other session packet types and garbage in the session's range are dropped
    /// and counted; the friend on the link stays online.
    @Test func aLinkRefusesOtherFriendsPacketsAndStrangersGarbage() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try TestPeer(rendezvous: node), b = try TestPeer(rendezvous: node), c = try TestPeer(rendezvous: node)
        defer { a.remove(); b.remove(); c.remove() }
        try await befriend(a, b)
        try await befriend(a, c)
        await waitForLinks(a, c)
        var captured: [UInt8]?
        b.revue.core!.environment.sendTap = { bytes, _ in
            if bytes.first == PacketType.transportData.rawValue, captured == nil { captured = bytes }
        }
        _ = try await b.revue.friends.sendMessage(friendId: a.id, message: "from b")
        await a.waitForEvent(.message(b.id, "from b"))
        b.revue.core!.environment.sendTap = nil
        let packet = try #require(captured)

        let core = a.revue.core!
        let linkToC = try #require(link(a, to: c))
        let target = SocketAddress(ip: 0x7F00_0001, port: try linkToC.socket.localAddress().port)
        let attacker = try UDPSocket(bindingTo: try SocketAddress(parsing: "127.0.0.1", defaultPort: 0))
        defer { attacker.close() }
        let before = core.counters
        let bRoutes = core.friends[b.id]!.routes.keys.count
        send(packet, from: attacker, to: target)
        await a.wait("b's packet on c's link dropped as forged", timeout: 3) {
            core.counters.droppedForged == before.droppedForged + 1
        }
        #expect(core.friends[b.id]!.routes[.link] == nil || core.friends[b.id]!.routes.keys.count == bRoutes)
        #expect(core.friends[c.id]!.routes[.link] != nil)

        // A handshake initiation and a short transport packet, in the session's range.
        send([PacketType.handshakeInitiation.rawValue] + [UInt8](repeating: 1, count: 150), from: attacker, to: target)
        send([PacketType.transportData.rawValue, 1, 2], from: attacker, to: target)
        await a.wait("garbage counted", timeout: 3) { core.counters.droppedMalformed >= before.droppedMalformed + 2 }
        #expect(core.counters.handshakesCompleted == before.handshakesCompleted)
        #expect(a.revue.friends.getFriendPaths(friendId: c.id).isOnline)
    }

    /// A friend that restarts comes back with a new link: ours (kept over the short outage)
    /// takes its new credentials as an ICE restart (the old candidates and pairs go), finds a
    /// pair with it, and the session moves onto the link again.
    @Test func aRestartedFriendsNewLinkIsFollowed() async throws {
        try await withLinkedFriends { a, b in try await restartedFriendIsFollowed(a, b) }
    }

    func restartedFriendIsFollowed(_ a: TestPeer, _ b: TestPeer) async throws {
        let kept = try #require(link(a, to: b))
        let oldUfrag = try #require(link(b, to: a)).agent.localUfrag
        b.stop()
        await a.waitForEvent(.paths(b.id, false), timeout: 5)
        try b.start()
        await a.waitForEvent(.paths(b.id, true), timeout: 10)
        await waitForLinks(a, b)
        let fresh = try #require(link(b, to: a))
        #expect(fresh.agent.localUfrag != oldUfrag)
        #expect(link(a, to: b) === kept, "a's link was kept over the outage")
        #expect(kept.remoteUfrag == fresh.agent.localUfrag)
        // Only the new generation's candidates are paired.
        let ports = Set(try [fresh.socket.localAddress().port])
        #expect(kept.agent.pairSnapshots.allSatisfy { ports.contains($0.remote.address.port) }, "\(kept.agent.pairSnapshots)")
        _ = try await a.revue.friends.sendMessage(friendId: b.id, message: "again")
        await b.waitForEvent(.message(a.id, "again"))
    }
}
