import Foundation
import Testing

@testable import RevueSession

/// Several Revue instances in one process, on loopback through an in-process rendezvous node.
@MainActor
@Suite(.serialized) struct FriendFlowTests {
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
