import Foundation
import MediaCore
import Testing

@testable import RevueSession

/// The session layer over IPv6: sources are counted by network, not by single address, and
/// friends find each other through an IPv6 rendezvous node and talk over IPv6.
@MainActor
@Suite(.serialized) struct IPv6SessionTests {
    /// One IPv6 site holds a whole /64, so rate limits count IPv6 sources by /64 and per-network
    /// caps by /56; IPv4 keys never collide with IPv6 ones.
    @Test func sourcesAreCountedByNetwork() throws {
        func a(_ text: String) throws -> MediaCore.SocketAddress { try MediaCore.SocketAddress(parsing: text) }
        let x = try a("[2001:db8:1:2::1]:1000"), sameSlash64 = try a("[2001:db8:1:2:ffff::9]:2000")
        let sameSlash56 = try a("[2001:db8:1:22::1]:1000"), otherSlash56 = try a("[2001:db8:1:102::1]:1000")
        #expect(x.sourceKey == sameSlash64.sourceKey)
        #expect(x.sourceKey != sameSlash56.sourceKey)
        #expect(x.prefixKey == sameSlash56.prefixKey)
        #expect(x.prefixKey != otherSlash56.prefixKey)
        let v4 = try a("192.0.2.7:1000"), v4SameSlash24 = try a("192.0.2.200:1000"), v4Other = try a("192.0.3.7:1000")
        #expect(
            v4.sourceKey != v4SameSlash24.sourceKey && v4.prefixKey == v4SameSlash24.prefixKey
                && v4.prefixKey != v4Other.prefixKey)
        // An IPv6 address whose first bytes equal an IPv4 key's low bytes still gets another key.
        let tricky = try a("[::c000:207]:1000")
        #expect(tricky.sourceKey != v4.sourceKey && tricky.prefixKey != v4.prefixKey)
        // What a public rendezvous node may not report, and what counts as a LAN path.
        #expect(
            try a("[::1]:1").isPrivateOrLoopback && (try a("[fe80::1]:1")).isPrivateOrLoopback
                && (try a("[fd00::1]:1")).isPrivateOrLoopback)
        #expect(!x.isPrivateOrLoopback && !x.isLocal)
        #expect(try a("[fd12::5]:1").isLocal)
        #expect(SocketAddress.parse("[2001:db8::5]:4000") == (try a("[2001:db8::5]:4000")))
        #expect(SocketAddress.parse(":4000") == .loopbackIPv4(port: 4000))
    }

    /// Two instances bound to ::1 and a rendezvous node on ::1: the request is found through the
    /// node (an IPv6 endpoint in its lookup reply), both come online over an IPv6 path, and
    /// messages flow both ways.
    @Test func friendsMeetThroughAnIPv6RendezvousNode() async throws {
        let node = try RendezvousNode(host: "::1")
        defer { node.stop() }
        let v6: (inout RevueConfiguration) -> Void = {
            $0.bindHost = "::1"
            $0.rendezvousNodes = ["[::1]:\(node.port)"]
        }
        let alice = try TestPeer(rendezvous: node, tweak: v6), bob = try TestPeer(rendezvous: node, tweak: v6)
        defer { alice.remove(); bob.remove() }
        await alice.waitForEvent(.discoverable(true))
        try await befriend(alice, bob, message: "over IPv6")
        let paths = alice.revue.friends.getFriendPaths(friendId: bob.id)
        #expect(paths.isOnline)
        #expect(paths.paths.first?.endpoint.hasPrefix("[::1]:") == true, "\(paths)")
        _ = try await alice.revue.friends.sendMessage(friendId: bob.id, message: "ping")
        await bob.waitForEvent(.message(alice.id, "ping"))
        _ = try await bob.revue.friends.sendMessage(friendId: alice.id, message: "pong")
        await alice.waitForEvent(.message(bob.id, "pong"))
    }

    /// A bind host that is neither an IPv4 nor an IPv6 address (nor a name) is refused.
    @Test func bindHostMustBeAnAddress() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-test-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var c = RevueConfiguration(dataDirectory: dir)
        c.bindHost = "not an address"
        let revue = Revue()
        #expect(throws: RevueError.self) { try revue.initialize(c) }
    }
}
