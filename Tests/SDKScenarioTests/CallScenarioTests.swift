// Invitation and call scenarios through `import RevueSDK`: each way an invitation can end, from
// both sides; an accepted one connects exactly once; then, in the call, a mute request, a room
// message, speaking and active-speaker updates, a remote mute and the hang-up. An extension of
// SDKScenarios because it uses Revue.shared and Room.shared.
import Foundation
import RevueMedia  // the synthetic speech-like test signal only
import RevueSDK
import Testing

extension SDKScenarios {
    @Test func everyInvitationEndIsReportedOnceOnEachSideThenACallCarriesEvents() async throws {
        let peers = try TwoPeers(invitationTimeout: 3)
        defer { peers.close() }
        let mine = EventRecorder(), theirs = EventRecorder()
        peers.me.delegates.add(delegate: mine)
        Room.shared.delegates.add(delegate: mine)
        peers.peer.delegates.add(delegate: theirs)
        peers.peer.room.delegates.add(delegate: theirs)
        #expect(try await peers.befriend())
        let myId = peers.me.revueId, peerId = peers.peer.revueId
        let friends = peers.me.friends

        // The peer declines: "finished" for the caller, "rejected" for the one who declined.
        try friends.sendInvitation(friendId: peerId, message: "video")
        #expect(await waitUntil { theirs.invitationsReceived.count == 1 })
        #expect(theirs.invitationsReceived.first?.friend == myId && theirs.invitationsReceived.first?.text == "video")
        #expect(mine.invitationsSent == [peerId])
        try peers.peer.friends.rejectInvitation(friendId: myId)
        #expect(await waitUntil { mine.endReasons == [.finished] })
        #expect(theirs.endReasons == [.rejected])

        // The caller cancels: "cancelled" here, "finished" there; cancelling again is a state error
        // and reports nothing more.
        try friends.sendInvitation(friendId: peerId, message: "video")
        #expect(await waitUntil { theirs.invitationsReceived.count == 2 })
        try friends.cancelInvitation(friendId: peerId)
        #expect(throws: FriendCallError.invalidState) { try friends.cancelInvitation(friendId: peerId) }
        #expect(await waitUntil { mine.endReasons.count == 2 && theirs.endReasons.count == 2 })
        #expect(mine.endReasons.last == .cancelled)
        #expect(theirs.endReasons.last == .finished)

        // Nobody answers within the invitation timeout: "timeout" for the caller, "finished" for
        // the peer, whose caller stopped waiting.
        try friends.sendInvitation(friendId: peerId, message: "video")
        #expect(await waitUntil(8) { mine.endReasons.count == 3 && theirs.endReasons.count == 3 })
        #expect(mine.endReasons.last == .timeout)
        #expect(theirs.endReasons.last == .finished)
        #expect(mine.invitationEnds.allSatisfy { $0.friend == peerId })

        // The peer calls and we answer: one participantDidConnect on each side, no end event.
        try peers.peer.friends.sendInvitation(friendId: myId, message: "audio")
        #expect(await waitUntil { (try? friends.acceptInvitation(friendId: peerId)) != nil })
        #expect(await waitUntil { mine.connected == [peerId] && theirs.connected == [myId] })
        #expect(mine.endReasons.count == 3)
        #expect(Room.shared.remoteParticipants[peerId]?.identity == peerId)

        // In the call: the peer's participant delegate on our side, their requests and messages.
        let tile = EventRecorder()
        Room.shared.remoteParticipants[peerId]?.delegates.add(delegate: tile)
        let meSeenByPeer = try #require(peers.peer.room.remoteParticipants[myId])
        meSeenByPeer.sendMuteRequest(isMuted: true)
        #expect(await waitUntil { mine.muteRequests.count == 1 })
        #expect(mine.muteRequests.first?.from == peerId && mine.muteRequests.first?.muted == true)
        try await peers.peer.room.localParticipant.sendMessage(#"{"body":"over the call"}"#)
        #expect(await waitUntil { mine.roomMessages.count == 1 })
        #expect(mine.roomMessages.first?.from == peerId && mine.roomMessages.first?.text == #"{"body":"over the call"}"#)

        // The peer talks for 1.5 s between quiet stretches: speaking goes true then false on the
        // participant, and the room's speaker list holds the peer, then nobody.
        let peerAudio = try #require(peers.peer.room.localParticipant.localTrackPublications.first { $0.kind == .audio })
        let capturer = try #require(peerAudio.audioCapturer)
        // On a thread of its own: the feed sleeps between chunks for 4 s, and a thread of the
        // concurrency pool it held would be missing for the tests beside it.
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            Thread {
                feedSpeechBetweenSilences(into: capturer); c.resume()
            }.start()
        }
        #expect(await waitUntil { tile.speakingChanges.count >= 2 && Room.shared.activeSpeakers.isEmpty })
        #expect(tile.speakingChanges.prefix(2) == [true, false])
        #expect(mine.speakerLists.first == [peerId] && mine.speakerLists.last == [])

        peerAudio.mute()
        #expect(await waitUntil { tile.muteChanges == [true] })

        // Hang up; both rooms empty, and the two are still friends.
        Room.shared.remoteParticipants[peerId]?.disconnect()
        #expect(await waitUntil { Room.shared.remoteParticipants.isEmpty && peers.peer.room.remoteParticipants.isEmpty })
        #expect(friends.getFriendList() == [peerId])
        Room.shared.disconnectAll()
    }
}

/// Four seconds of 20 ms mono chunks at 48 kHz, paced by the clock: faint hiss, 1.5 s of a
/// speech-like signal from chunk 50, then hiss again.
func feedSpeechBetweenSilences(into capturer: AudioBufferCapturer) {
    let speech = SyntheticAudio(pattern: .speech, sampleRate: 48_000, amplitude: 0.5)
    let hiss = SyntheticAudio(pattern: .whiteNoise, sampleRate: 48_000, amplitude: 0.0005)
    var chunk = [Int16](repeating: 0, count: 960)
    let start = DispatchTime.now().uptimeNanoseconds
    for index in 0..<200 {
        let source = (50..<125).contains(index) ? speech : hiss
        for i in 0..<960 { chunk[i] = Int16(32767 * source.sample(atFrame: index * 960 + i)) }
        chunk.withUnsafeBufferPointer {
            capturer.capture($0, sampleRate: 48_000, channels: 1, timeStampNs: Int64(index) * 20_000_000)
        }
        let due = start + UInt64(index + 1) * 20_000_000
        let now = DispatchTime.now().uptimeNanoseconds
        if due > now { usleep(UInt32((due - now) / 1000)) }
    }
}
