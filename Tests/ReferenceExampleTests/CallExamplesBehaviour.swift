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
        let pair = try SharedAndOther(invitationTimeout: 3)
        defer { pair.close() }
        let other = pair.other
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
        // Speaking: the friend talks (the engine's speaking detector on their side); the tile
        // observer sees true then false, the speakers handler the list with them, then empty.
        var speaking: [Bool] = []
        tile.onSpeaking = { speaking.append($0) }
        var speakerLists: [[String]] = []
        speakers.onSpeakersChanged = { speakerLists.append($0.map(\.identity)) }
        let capturer = otherAudio.audioCapturer!
        let talk = Task.detached {
            let speech = SyntheticAudio(pattern: .speech, sampleRate: 48_000, amplitude: 0.5)
            let hiss = SyntheticAudio(pattern: .whiteNoise, sampleRate: 48_000, amplitude: 0.0005)
            var pcm = [Int16](repeating: 0, count: 960)
            let start = DispatchTime.now().uptimeNanoseconds
            for chunk in 0..<200 {
                for i in 0..<960 {
                    let f = chunk * 960 + i
                    pcm[i] = Int16(32767 * ((50..<125).contains(chunk) ? speech.sample(atFrame: f) : hiss.sample(atFrame: f)))
                }
                pcm.withUnsafeBufferPointer { capturer.capture($0, sampleRate: 48_000, channels: 1, timeStampNs: Int64(chunk) * 20_000_000) }
                let due = start + UInt64(chunk + 1) * 20_000_000
                let now = DispatchTime.now().uptimeNanoseconds
                if due > now { usleep(UInt32((due - now) / 1000)) }
            }
        }
        await talk.value
        #expect(await eventually { speaking.count >= 2 && Room.shared.activeSpeakers.isEmpty })
        #expect(speaking.prefix(2) == [true, false])
        #expect(speakerLists.first == [friend] && speakerLists.last == [])
        otherAudio.mute()
        #expect(await eventually { mutes == [true] })

        // Hang up; the two are still friends and can call again.
        Room.shared.remoteParticipants[friend]!.disconnect()
        #expect(await eventually { Room.shared.remoteParticipants.isEmpty && other.room.remoteParticipants.isEmpty })
        #expect(Revue.shared.friends.getFriendList() == [friend])
        Room.shared.disconnectAll()
    }
}
