// Runs the "Friends" page examples (FriendsExamples.swift) against Revue.shared and a second,
// independent instance, through an in-process rendezvous node, to check they behave as the page says.
import Foundation
import Testing
import RevueSDK

@MainActor
final class OtherSide: RevueDelegate {
    var online = false
    var chats: [String] = []
    var requests: [String] = []
    func revue(_ revue: Revue, friend friendId: String, didUpdatePaths paths: FriendConnectionPaths) { online = paths.isOnline }
    func revue(_ revue: Revue, friend friendId: String, didReceiveMessage message: String) { chats.append(message) }
    func revue(_ revue: Revue, didReceiveFriendRequest friendId: String, message: String) { requests.append(friendId) }
}

@MainActor
func eventually(_ timeout: Double = 10, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        if Date() > deadline { return false }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return true
}

/// Revue.shared and a second, independent instance, both on loopback and told about one
/// in-process rendezvous node, each with its own data directory; `close()` destroys both.
@MainActor
final class SharedAndOther {
    let node: RendezvousNode
    let base = FileManager.default.temporaryDirectory.appendingPathComponent("revue-ref-\(UUID().uuidString)").path
    let other = Revue()

    init(invitationTimeout: Double? = nil) throws {
        node = try RendezvousNode(host: "127.0.0.1")
        func config(_ name: String) -> RevueConfiguration {
            var c = RevueConfiguration(dataDirectory: base + "/" + name)
            c.bindHost = "127.0.0.1"
            c.rendezvousNodes = ["127.0.0.1:\(node.port)"]
            c.timeouts.rendezvousInterval = 0.2
            c.timeouts.handshakeRetryInterval = 0.2
            if let invitationTimeout { c.timeouts.invitationTimeout = invitationTimeout }
            return c
        }
        do {
            try Revue.shared.initialize(config("me"))
            try other.initialize(config("other"))
        } catch {
            close()
            throw error
        }
    }

    func close() {
        other.destroy()
        Revue.shared.destroy()
        node.stop()
        try? FileManager.default.removeItem(atPath: base)
    }
}

@MainActor
@Suite(.serialized) struct FriendsExamplesBehaviour {
    @Test func inboxAcceptListChatAndRemove() async throws {
        let pair = try SharedAndOther()
        defer { pair.close() }
        let other = pair.other
        let otherSide = OtherSide()
        other.delegates.add(delegate: otherSide)

        let inbox = FriendRequestInbox()
        Revue.shared.delegates.add(delegate: inbox)
        let listObserver = FriendListObserver()
        var onlineChanges: [Bool] = []
        listObserver.onOnlineChanged = { onlineChanges.append($1) }
        Revue.shared.delegates.add(delegate: listObserver)
        let receiver = FriendChatReceiver()
        var chats: [String] = []
        receiver.onChat = { chats.append($1) }
        Revue.shared.delegates.add(delegate: receiver)

        try other.friends.addFriend(address: Revue.shared.revueAddress, message: "let's be friends")
        #expect(await eventually { inbox.requests[other.revueId] == "let's be friends" })
        try inbox.accept(other.revueId)
        #expect(inbox.requests.isEmpty)
        try inbox.accept(other.revueId)  // already friends: alreadyExists is caught by the example
        #expect(await eventually { onlineChanges.last == true && otherSide.online }, "\(onlineChanges) \(otherSide.online)")
        let rows = loadFriendRows()
        #expect(rows.count == 1 && rows.first?.friendId == other.revueId && rows.first?.isOnline == true)

        #expect(await sendChat("hello", to: other.revueId))
        #expect(otherSide.chats.count == 1)
        let decoded = try JSONDecoder().decode(FriendChat.self, from: Data(otherSide.chats[0].utf8))
        #expect(decoded.text == "hello" && decoded.kind == "chat")
        _ = try await other.friends.sendMessage(friendId: Revue.shared.revueId, message: "hi back")
        #expect(await eventually { chats == ["hi back"] })

        #expect(removeFriend(other.revueId))
        #expect(removeFriend(other.revueId), "not a friend any more counts as deleted")
        #expect(loadFriendRows().isEmpty)
        #expect(!(await sendChat("gone", to: other.revueId)))
    }

    @Test func profileExamplesEchoOwnNameWithOwnIdentity() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-ref-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var config = RevueConfiguration(dataDirectory: dir)
        config.bindHost = "127.0.0.1"
        try Revue.shared.initialize(config)
        defer { Revue.shared.destroy() }
        let observer = ProfileObserver()
        var ownNames: [String] = []
        var statuses: [(String, UserStatus)] = []
        observer.onOwnName = { ownNames.append($0) }
        observer.onStatus = { statuses.append(($0, $1)) }
        Revue.shared.delegates.add(delegate: observer)
        updateMyProfile()
        let deadline = Date().addingTimeInterval(3)
        while (ownNames.isEmpty || statuses.isEmpty) && Date() < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(ownNames == ["Alice"])
        #expect(statuses.count == 1 && statuses.first?.0 == Revue.shared.revueId && statuses.first?.1 == .busy)
        #expect(loadFriendRows().isEmpty)
        #expect(removeFriend(String(repeating: "A", count: 64)))
        let sent = await sendChat("hi", to: String(repeating: "B", count: 64))
        #expect(!sent)
    }
}
