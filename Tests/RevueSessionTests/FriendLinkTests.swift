import Foundation
import MediaCore
import Testing

@testable import RevueSession

/// One path per friend on loopback, on the production endpoint: the link's own UDP socket and an
/// ICE agent on its own queue (`FriendLinkEndpoint.udp`). What stays here needs the kernel: two
/// real sockets, the dual-stack wildcard binding and the addresses the kernel reports. The link's
/// behaviour and timing (NATs, TURN, a dying path, the quiet pace, the idle lifetime, a restarted
/// friend, strangers' and other friends' packets) run on the virtual network in
/// `SimulatedFriendLinkTests`.
@MainActor @Suite(.serialized) struct FriendLinkTests {
    func link(_ p: TestPeer, to friend: TestPeer) -> FriendLink? { p.revue.core?.friends[friend.id]?.link }

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
        #expect(try #require(la.socket).descriptor != #require(lb.socket).descriptor)

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
}
