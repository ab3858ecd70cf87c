import Foundation
import MediaCore
import Testing

@testable import RevueSession

/// The session on hosts with several addresses and on dual-stack sockets: answers leave from the
/// address they were asked at, and one instance bound to "::" has friends over IPv4 and IPv6 at
/// once, through one rendezvous node that serves both families on one socket.
@MainActor
@Suite(.serialized) struct AddressFamilySessionTests {
    /// A rendezvous node bound to every address (0.0.0.0), asked at 127.0.0.2 while the kernel's
    /// route for its answers would pick 127.0.0.1: peers believe only answers from the address
    /// they asked, so they can register and find each other only because the node answers from
    /// 127.0.0.2.
    @Test func aNodeOnSeveralAddressesAnswersFromTheOneItWasAskedAt() async throws {
        let node = try RendezvousNode(host: "0.0.0.0")
        defer { node.stop() }
        let asked: (inout RevueConfiguration) -> Void = { $0.rendezvousNodes = ["127.0.0.2:\(node.port)"] }
        let alice = try TestPeer(tweak: asked), bob = try TestPeer(tweak: asked)
        defer { alice.remove(); bob.remove() }
        await alice.waitForEvent(.discoverable(true))
        try await befriend(alice, bob, message: "via 127.0.0.2")
        _ = try await alice.revue.friends.sendMessage(friendId: bob.id, message: "ping")
        await bob.waitForEvent(.message(alice.id, "ping"))
        #expect(alice.revue.core!.counters.droppedMalformed == 0)
    }

    /// One node bound to "::" (dual stack); Alice speaks IPv4 only, Carol IPv6 only, and Bob is
    /// bound to "::" and so speaks both. Bob befriends both through the node: his path to Alice
    /// is IPv4, his path to Carol IPv6, both online at once, and messages cross both ways on each.
    @Test func aDualStackInstanceHasFriendsOverBothFamiliesThroughOneDualStackNode() async throws {
        let node = try RendezvousNode(host: "::")
        defer { node.stop() }
        let alice = try TestPeer { $0.rendezvousNodes = ["127.0.0.1:\(node.port)"] }
        let carol = try TestPeer {
            $0.bindHost = "::1"
            $0.rendezvousNodes = ["[::1]:\(node.port)"]
        }
        let bob = try TestPeer {
            $0.bindHost = "::"
            $0.rendezvousNodes = ["127.0.0.1:\(node.port)"]
        }
        defer { alice.remove(); bob.remove(); carol.remove() }
        #expect((bob.revue.core!.socket as? SessionSocket)?.isDualStack == true)
        #expect(!alice.revue.core!.socket.carries(.ipv6) && !carol.revue.core!.socket.carries(.ipv4))
        await bob.waitForEvent(.discoverable(true))
        await carol.waitForEvent(.discoverable(true))
        try await befriend(bob, alice, message: "over IPv4")
        try await befriend(bob, carol, message: "over IPv6")
        let toAlice = bob.revue.friends.getFriendPaths(friendId: alice.id)
        let toCarol = bob.revue.friends.getFriendPaths(friendId: carol.id)
        #expect(toAlice.isOnline && toCarol.isOnline)
        #expect(toAlice.paths.first?.endpoint.hasPrefix("127.0.0.1:") == true, "\(toAlice)")
        #expect(toCarol.paths.first?.endpoint.hasPrefix("[::1]:") == true, "\(toCarol)")
        for (friend, name) in [(alice, "alice"), (carol, "carol")] {
            _ = try await bob.revue.friends.sendMessage(friendId: friend.id, message: "to \(name)")
            await friend.waitForEvent(.message(bob.id, "to \(name)"))
            _ = try await friend.revue.friends.sendMessage(friendId: bob.id, message: "from \(name)")
            await bob.waitForEvent(.message(friend.id, "from \(name)"))
        }
    }

    /// The table of local addresses to answer from is bounded: past its cap the oldest peer goes,
    /// so a flood of spoofed sources cannot grow it; a peer's next datagram records its newest
    /// local address.
    @Test func theAnswerAddressTableIsBounded() {
        let table = SessionSocket.ReplySources()
        let local = SocketAddress(ipv4Address: 0x7F00_0002, port: 0)
        let cap = SessionSocket.maxReplySources
        for i in 0..<(cap * 3 + 7) { table.record(local, for: SocketAddress(ipv4Address: 0x0A00_0000 + UInt32(i), port: 9)) }
        #expect(table.count == cap)
        #expect(table.local(for: SocketAddress(ipv4Address: 0x0A00_0000, port: 9)) == nil)
        let newest = SocketAddress(ipv4Address: 0x0A00_0000 + UInt32(cap * 3 + 6), port: 9)
        #expect(table.local(for: newest) == local)
        let other = SocketAddress(ipv4Address: 0x7F00_0003, port: 0)
        table.record(other, for: newest)
        #expect(table.local(for: newest) == other && table.count == cap)
    }
}
