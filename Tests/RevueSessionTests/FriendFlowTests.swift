import Foundation
import Testing

@testable import RevueSession

/// Several Revue instances in one process, on loopback through an in-process rendezvous node.
@MainActor
@Suite(.serialized) struct FriendFlowTests {
    @Test func befriendRenameMessageAndDeleteInOrder() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let alice = try TestPeer(rendezvous: node), bob = try TestPeer(rendezvous: node)
        defer { alice.remove(); bob.remove() }
        await alice.waitForEvent(.discoverable(true))

        try await befriend(alice, bob, message: "it's Alice")
        #expect(alice.revue.friends.getFriendList() == [bob.id])
        #expect(bob.revue.friends.getFriendList() == [alice.id])
        #expect(bob.friendEvents.first == .request(alice.id, "it's Alice"))
        let paths = alice.revue.friends.getFriendPaths(friendId: bob.id)
        #expect(paths.isOnline && paths.paths.first?.kind == .directLAN)

        alice.revue.setSelfName("Alice")
        alice.revue.setSelfStatusMessage("In the office until 6")
        alice.revue.setSelfStatus(.busy)
        await bob.waitForEvent(.status(alice.id, .busy))
        // (Path events are the connection's own business: the friends' link comes up about now.)
        let profileEvents = bob.friendEvents.filter { if case .paths = $0 { false } else { true } }
        #expect(
            profileEvents.suffix(3) == [
                .name(alice.id, "Alice"), .statusMessage(alice.id, "In the office until 6"), .status(alice.id, .busy),
            ])
        // Own echo: exactly once each, with the own identity.
        await alice.waitForEvent(.status(alice.id, .busy))
        #expect(alice.friendEvents.filter { if case .name = $0 { true } else { false } } == [.name(alice.id, "Alice")])
        #expect(bob.revue.friends.getFriendName(friendId: alice.id) == "Alice")
        #expect(bob.revue.friends.getFriendStatusMessage(friendId: alice.id) == "In the office until 6")
        #expect(bob.revue.friends.getFriendStatus(friendId: alice.id) == .busy)
        alice.revue.setSelfName("Alice")  // unchanged: no event anywhere

        var ids: [UInt32] = []
        for i in 0..<20 { ids.append(try await alice.revue.friends.sendMessage(friendId: bob.id, message: "m\(i)")) }
        #expect(Set(ids).count == 20)
        let received = bob.friendEvents.compactMap { if case .message(let id, let m) = $0, id == alice.id { m } else { nil } }
        #expect(received == (0..<20).map { "m\($0)" })

        // (The call layer's own messages, such as its hello, are reserved messages too.)
        let swallowed = bob.revue.counters.reservedMessagesSwallowed
        // The App cannot send the reserved format; one that arrives anyway (from another client)
        // reaches nothing but still gets a receipt.
        await #expect(throws: FriendMessageError.reservedFormat) {
            _ = try await alice.revue.friends.sendMessage(friendId: bob.id, message: #" {"type":"track","op":"publish"}"#)
        }
        _ = try await alice.revue.core!.sendMessage(friendId: bob.id, message: #"{"type":"msg","x":1}"#, timeout: .seconds(10))
            .get()
        _ = try await alice.revue.friends.sendMessage(friendId: bob.id, message: #"{"kind":"chat","type":"note"}"#)
        await bob.waitForEvent(.message(alice.id, #"{"kind":"chat","type":"note"}"#))
        #expect(bob.revue.counters.reservedMessagesSwallowed == swallowed + 1)
        #expect(!bob.events.contains(.message(alice.id, #"{"type":"msg","x":1}"#)))

        // Keepalives measure each path's round-trip time.
        await alice.wait("rtt") { alice.revue.friends.getFriendPaths(friendId: bob.id).paths.first?.roundTripTime != nil }
        let rtt = alice.revue.friends.getFriendPaths(friendId: bob.id).paths.first?.roundTripTime ?? -1
        #expect(rtt >= 0 && rtt < 1)

        // Presence comes from the rendezvous node.
        await alice.wait("presence") { alice.revue.friends.getFriendPresenceStatus(friendId: bob.id) == .online }
        await bob.wait("presence busy") { bob.revue.friends.getFriendPresenceStatus(friendId: alice.id) == .busy }

        try alice.revue.friends.deleteFriend(friendId: bob.id)
        #expect(alice.revue.friends.getFriendList().isEmpty)
        await bob.waitForEvent(.paths(alice.id, false), timeout: 2)
        #expect(throws: FriendDeleteError.notFound) { try alice.revue.friends.deleteFriend(friendId: bob.id) }
        await #expect(throws: FriendMessageError.friendNotReachable) {
            try await bob.revue.friends.sendMessage(friendId: alice.id, message: "still there?")
        }
        await settle(0.5)
        #expect(alice.friendEvents.filter { if case .message = $0 { true } else { false } }.isEmpty)
        #expect(alice.revue.counters.droppedNonFriend > 0 || alice.revue.counters.droppedUnknownSession > 0)
    }

    @Test func addFriendErrors() async throws {
        let alice = try TestPeer(), bob = try TestPeer()
        defer { alice.remove(); bob.remove() }
        let friends = alice.revue.friends
        let address = bob.revue.revueAddress
        #expect(throws: FriendAddError.invalidAddress) {
            try friends.addFriend(address: String(address.dropLast(2)), message: "")
        }
        #expect(throws: FriendAddError.invalidAddress) { try friends.addFriend(address: "hello", message: "") }
        var typo = Array(address)
        typo[10] = typo[10] == "A" ? "B" : "A"
        #expect(throws: FriendAddError.badChecksum) { try friends.addFriend(address: String(typo), message: "") }
        #expect(throws: FriendAddError.ownAddress) { try friends.addFriend(address: alice.revue.revueAddress, message: "") }
        #expect(throws: FriendAddError.ownAddress) { try friends.addFriendNorequest(friendId: alice.id) }
        #expect(throws: FriendAddError.messageTooLong) {
            try friends.addFriend(
                address: address, message: String(repeating: "x", count: FriendManager.maxRequestMessageLength + 1))
        }
        #expect(throws: FriendAddError.invalidAddress) { try friends.addFriendNorequest(friendId: "1234") }
        let id = try friends.addFriend(address: address, message: "hi")
        #expect(id == bob.id)
        #expect(throws: FriendAddError.alreadyExists) { try friends.addFriend(address: address, message: "again") }
        #expect(throws: FriendAddError.alreadyExists) { try friends.addFriendNorequest(friendId: bob.id.lowercased()) }
        #expect(throws: FriendDeleteError.notFound) { try friends.deleteFriend(friendId: alice.id) }
        await #expect(throws: FriendMessageError.friendNotFound) {
            try await friends.sendMessage(friendId: alice.id, message: "x")
        }
        await #expect(throws: FriendMessageError.friendNotReachable) {
            try await friends.sendMessage(friendId: bob.id, message: "x")
        }
        await #expect(throws: FriendMessageError.messageTooLong) {
            try await friends.sendMessage(
                friendId: bob.id, message: String(repeating: "x", count: FriendManager.maxMessageLength + 1))
        }
        let unused = Revue()
        #expect(throws: FriendAddError.notInitialized) { try unused.friends.addFriend(address: address, message: "") }
        #expect(unused.revueId == "" && unused.revueAddress == "")
    }
}
