// Friend scenarios as an app lives them, through `import RevueSDK` only: a request arrives and is
// accepted, the friend list is built from the getters, messages go both ways, a friend is removed;
// the own profile's changes come back to the own delegate. Every test that touches Revue.shared
// lives in this one serialized suite (there is one shared instance); CallScenarioTests extends it.
import Foundation
import RevueSDK
import Testing

/// An app's own message envelope. Its "kind" key stays clear of the reserved "type" values.
struct AppEnvelope: Codable, Equatable {
    var kind: String
    var body: String
}

@MainActor
@Suite(.serialized) struct SDKScenarios {
    @Test func requestAcceptedFriendListedMessagedAndRemoved() async throws {
        let peers = try TwoPeers()
        defer { peers.close() }
        let mine = EventRecorder(), theirs = EventRecorder()
        peers.me.delegates.add(delegate: mine)
        peers.peer.delegates.add(delegate: theirs)
        let peerId = peers.peer.revueId, myId = peers.me.revueId

        try peers.peer.friends.addFriend(address: peers.me.revueAddress, message: "add me please")
        #expect(await waitUntil { mine.friendRequests.count == 1 })
        #expect(mine.friendRequests.first?.from == peerId && mine.friendRequests.first?.text == "add me please")

        // Accepting is adding without a request; a second accept reports that the friend exists.
        try peers.me.friends.addFriendNorequest(friendId: peerId)
        #expect(throws: FriendAddError.alreadyExists) { try peers.me.friends.addFriendNorequest(friendId: peerId) }
        #expect(await waitUntil { mine.onlineUpdates.last?.online == true && theirs.onlineUpdates.last?.online == true })
        #expect(mine.onlineUpdates.allSatisfy { $0.friend == peerId })

        // The list and the per-friend getters agree with the events.
        let friends = peers.me.friends
        #expect(friends.getFriendList() == [peerId])
        #expect(friends.getFriendPaths(friendId: peerId).isOnline)
        #expect(friends.getFriendName(friendId: peerId) == "")

        // A JSON message of the app's own shape arrives unchanged, in both directions.
        let outgoing = AppEnvelope(kind: "note", body: "hello")
        let text = String(decoding: try JSONEncoder().encode(outgoing), as: UTF8.self)
        _ = try await friends.sendMessage(friendId: peerId, message: text)
        #expect(theirs.friendMessages.count == 1)
        #expect(try JSONDecoder().decode(AppEnvelope.self, from: Data(theirs.friendMessages[0].text.utf8)) == outgoing)
        _ = try await peers.peer.friends.sendMessage(friendId: myId, message: "and back")
        #expect(await waitUntil { mine.friendMessages.map(\.text) == ["and back"] })

        // Removing twice: the second time the friend is not found; then nothing can be sent.
        try friends.deleteFriend(friendId: peerId)
        #expect(throws: FriendDeleteError.notFound) { try friends.deleteFriend(friendId: peerId) }
        #expect(friends.getFriendList().isEmpty)
        await #expect(throws: FriendMessageError.friendNotFound) {
            _ = try await friends.sendMessage(friendId: peerId, message: "gone")
        }
    }

    @Test func ownProfileChangesComeBackWithTheOwnIdentity() async throws {
        let dir = scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var configuration = RevueConfiguration(dataDirectory: dir)
        configuration.bindHost = "127.0.0.1"
        try Revue.shared.initialize(configuration)
        defer { Revue.shared.destroy() }
        let recorder = EventRecorder()
        Revue.shared.delegates.add(delegate: recorder)

        Revue.shared.setSelfName("Robin")
        Revue.shared.setSelfStatusMessage("back at nine")
        Revue.shared.setSelfStatus(.away)
        #expect(await waitUntil(3) { !recorder.nameUpdates.isEmpty && !recorder.statusUpdates.isEmpty })
        let me = Revue.shared.revueId
        #expect(recorder.nameUpdates.map(\.friend) == [me] && recorder.nameUpdates.map(\.name) == ["Robin"])
        #expect(recorder.statusUpdates.map(\.friend) == [me] && recorder.statusUpdates.map(\.status) == [.away])
        #expect(Revue.shared.selfName == "Robin" && Revue.shared.selfStatusMessage == "back at nine")

        // With no friends: an empty list, a delete that finds nobody, a message that cannot go.
        let stranger = String(repeating: "C", count: 64)
        #expect(Revue.shared.friends.getFriendList().isEmpty)
        #expect(throws: FriendDeleteError.notFound) { try Revue.shared.friends.deleteFriend(friendId: stranger) }
        await #expect(throws: FriendMessageError.self) {
            _ = try await Revue.shared.friends.sendMessage(friendId: stranger, message: "hi")
        }
    }
}
