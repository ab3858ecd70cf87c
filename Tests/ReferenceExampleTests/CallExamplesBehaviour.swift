// Runs the invitation examples of "Friends" and the examples of "Events" against Revue.shared /
// Room.shared and a second instance, to check they behave as the pages say. An extension of
// FriendsExamplesBehaviour: every test that touches Revue.shared lives in that one serialized suite.
import Foundation
import Testing
import RevueSDK

@MainActor
final class OtherCallSide: RevueDelegate {
    var invitations: [String] = []
    var ended: [InvitationEndReason] = []
    func revue(_ revue: Revue, friend friendId: String, didReceiveInvitation message: String?) { invitations.append(message ?? "") }
    func revue(_ revue: Revue, friend friendId: String, didEndInvitation reason: InvitationEndReason) { ended.append(reason) }
}

extension FriendsExamplesBehaviour {
    @Test func invitationAndEventExamplesBehaveAsThePagesSay() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("revue-ref-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: base) }
        func config(_ name: String) -> RevueConfiguration {
            var c = RevueConfiguration(dataDirectory: base + "/" + name)
            c.bindHost = "127.0.0.1"
            c.rendezvousNodes = ["127.0.0.1:\(node.port)"]
            c.timeouts.rendezvousInterval = 0.2
            c.timeouts.handshakeRetryInterval = 0.2
            c.timeouts.invitationTimeout = 3
            return c
        }
        try Revue.shared.initialize(config("me"))
        defer { Revue.shared.destroy() }
        let other = Revue()
        try other.initialize(config("other"))
        defer { other.destroy() }
        let otherSide = OtherCallSide()
        other.delegates.add(delegate: otherSide)
        let otherTracker = InvitationTracker()
        var otherEnded: [String] = []
        otherTracker.onEnded = { otherEnded.append($1) }
        other.delegates.add(delegate: otherTracker)
        other.room.delegates.add(delegate: otherTracker)

        let tracker = InvitationTracker()
        var ended: [String] = []
        var connected: [String] = []
        tracker.onEnded = { ended.append($1) }
        tracker.onConnected = { connected.append($0) }
        Revue.shared.delegates.add(delegate: tracker)
        Room.shared.delegates.add(delegate: tracker)

        try other.friends.addFriend(address: Revue.shared.revueAddress, message: "hi")
        _ = try? Revue.shared.friends.addFriendNorequest(friendId: other.revueId)
        #expect(await eventually { Revue.shared.friends.getFriendPaths(friendId: other.revueId).isOnline && other.friends.getFriendPaths(friendId: Revue.shared.revueId).isOnline })
        let me = Revue.shared.revueId, friend = other.revueId

        // The friend declines.
        try startCallWithFriend(friend)
        #expect(await eventually { otherSide.invitations == ["video"] })
        try other.friends.rejectInvitation(friendId: me)
        #expect(await eventually { ended == ["Your friend declined"] })
        #expect(otherEnded == ["You declined the call"])

        // You cancel; a second cancel is harmless and reports nothing more.
        try startCallWithFriend(friend)
        #expect(await eventually { otherSide.invitations.count == 2 })
        cancelCallToFriend(friend)
        cancelCallToFriend(friend)
        #expect(await eventually { ended.count == 2 && otherEnded.count == 2 })
        #expect(ended.last == "You cancelled the call")
        #expect(otherEnded.last == "Your friend cancelled or stopped waiting")

        // Nobody answers: "No answer" here, the friend hears that you stopped waiting.
        try startCallWithFriend(friend)
        #expect(await eventually(8) { ended.count == 3 && otherEnded.count == 3 })
        #expect(ended.last == "No answer")
        #expect(otherEnded.last == "Your friend cancelled or stopped waiting")

        // The friend invites you, you answer: connected, exactly once, no didEndInvitation.
        try other.friends.sendInvitation(friendId: me, message: "audio")
        #expect(await eventually { (try? answerFriend(friend)) != nil })
        #expect(await eventually { connected == [friend] && other.room.remoteParticipants[me] != nil })
        #expect(ended.count == 3)
        #expect(Room.shared.remoteParticipants[friend]?.identity == friend)

        // Events page: the tile observer follows one participant; mute requests and messages on one layer.
        let tile = ParticipantTileObserver()
        var mutes: [Bool] = []
        tile.onMuted = { mutes.append($1) }
        tile.observe(friendId: friend)
        let prompter = MuteRequestPrompter()
        var requests: [(String, Bool)] = []
        prompter.onMuteRequest = { requests.append(($0.identity, $1)) }
        Room.shared.delegates.add(delegate: prompter)
        let chat = ChatMessageHandler()
        var texts: [String] = []
        chat.onMessage = { texts.append($1.text) }
        Room.shared.delegates.add(delegate: chat)
        let speakers = ActiveSpeakerHandler()
        Room.shared.delegates.add(delegate: speakers)

        let otherMe = other.room.remoteParticipants[me]!
        otherMe.sendMuteRequest(isMuted: true)
        #expect(await eventually { requests.count == 1 })
        #expect(requests.first?.0 == friend && requests.first?.1 == true)
        try await other.room.localParticipant.sendMessage(#"{"text":"hi from the call"}"#)
        #expect(await eventually { texts == ["hi from the call"] })
        let otherAudio = other.room.localParticipant.localTrackPublications.first { $0.kind == .audio }!
        otherAudio.mute()
        #expect(await eventually { mutes == [true] })

        // Hang up; the two are still friends and can call again.
        Room.shared.remoteParticipants[friend]!.disconnect()
        #expect(await eventually { Room.shared.remoteParticipants.isEmpty && other.room.remoteParticipants.isEmpty })
        #expect(Revue.shared.friends.getFriendList() == [friend])
        Room.shared.disconnectAll()
    }
}
