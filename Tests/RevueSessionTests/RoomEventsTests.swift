import Foundation
import MediaCore
import Testing

@testable import RevueSession

/// Publish failures and the rules the room layer inherits from the friend layer: a failed delete,
/// profile events, destroy(). (SimulatedCallTimingTests has the call's events over time and the
/// in-call message deadlines.)
@MainActor
@Suite(.serialized) struct RoomEventsTests {
    @Test func aTrackThatCannotBeSetUpIsReportedAndNotPublished() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])
        a.room.publishFailureForTests = .video
        try await startCall(a, b)
        await a.wait("failure reported") { a.recorder.room.contains("publishFailed(video)") }
        await b.wait("a's audio at b") { b.room.remoteParticipants[a.id]?.trackPublications["audio"] != nil }
        await settle(0.3)
        #expect(a.recorder.room.contains("publish(audio)") && !a.recorder.room.contains("publish(video)"))
        #expect(a.room.localParticipant.publication(.video) == nil)
        #expect(b.room.remoteParticipants[a.id]?.trackPublications["video"] == nil)
        // It can be tried again once the cause is gone.
        a.room.publishFailureForTests = nil
        a.room.localParticipant.setCamera(enabled: true)
        await a.wait("published now") { a.recorder.room.contains("publish(video)") }
        #expect(a.room.localParticipant.publication(.video)?.videoCapturer != nil)
        a.room.disconnectAll()
    }

    @Test func failedDeleteKeepsTheFriendAndEndsTheCall() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])
        for p in [a, b] { p.room.options.cameraEnabled = false }  // audio only: light beside the timing tests
        try await startCall(a, b)
        // The friend list cannot be written: a directory where the temporary file would go.
        let blocker = a.peer.directory + "/profile.json.tmp"
        // (A save in flight may hold the file a moment: try until the directory is in place.)
        var blocked = false
        for _ in 0..<100 where !blocked {
            try? FileManager.default.removeItem(atPath: blocker)
            blocked = (try? FileManager.default.createDirectory(atPath: blocker, withIntermediateDirectories: false)) != nil
            if !blocked { await settle(0.01) }
        }
        try #require(blocked)
        #expect(throws: FriendDeleteError.failed(code: -1)) { try a.friends.deleteFriend(friendId: b.id) }
        try FileManager.default.removeItem(atPath: blocker)
        #expect(a.friends.getFriendList().contains(b.id))
        // The call ended first, as for a delete that works.
        #expect(a.room.remoteParticipants[b.id] == nil)
        await a.waitRoom("disconnect(b,friendDeleted)")
        await b.waitRoom("disconnect(a,remoteHangUp)")
    }

    @Test func profileEventsReachTheRoomIncludingNilWhenCleared() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])
        for p in [a, b] { p.room.options.cameraEnabled = false }  // audio only: light beside the timing tests
        try await startCall(a, b)
        b.revue.setSelfName("Bob")
        b.revue.setSelfStatusMessage("busy day")
        b.revue.setSelfStatus(.away)
        await a.waitRoom("status(b,away)")
        b.revue.setSelfName("")
        b.revue.setSelfStatusMessage("")
        await a.waitRoom("statusMessage(b,nil)")
        let profile = a.recorder.room.filter {
            $0.hasPrefix("name(b") || $0.hasPrefix("statusMessage(b") || $0.hasPrefix("status(b")
        }
        #expect(profile == ["name(b,Bob)", "statusMessage(b,busy day)", "status(b,away)", "name(b,nil)", "statusMessage(b,nil)"])
        #expect(a.recorder.participant.contains("name(b,nil)"))
        #expect(a.room.remoteParticipants[b.id]?.name == nil && a.room.remoteParticipants[b.id]?.statusMessage == nil)
        // Over-long values are cut between characters: "a" then 300 two-byte characters is 601
        // bytes; the first 512 bytes would end inside a character, so 511 arrive.
        b.revue.setSelfName("a" + String(repeating: "é", count: 300))
        b.revue.setSelfStatusMessage(String(repeating: "€", count: 200))  // 3 bytes each
        await a.wait("long name") { a.room.remoteParticipants[b.id]?.name?.hasPrefix("aé") == true }
        await a.wait("long status") { a.room.remoteParticipants[b.id]?.statusMessage != nil }
        #expect(a.room.remoteParticipants[b.id]?.name == "a" + String(repeating: "é", count: 255))
        #expect(a.room.remoteParticipants[b.id]?.statusMessage == String(repeating: "€", count: 170))
        a.room.disconnectAll()
    }

    @Test func destroyEmptiesRoomAndParticipantDelegateLists() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])
        try await startCall(a, b)
        let remote = try #require(a.room.remoteParticipants[b.id])
        await a.wait("participant delegate added") { !remote.delegates.all.isEmpty }
        let local = a.room.localParticipant
        local.delegates.add(delegate: a.recorder)
        #expect(!a.room.delegates.all.isEmpty)
        a.revue.destroy()
        #expect(a.room.delegates.all.isEmpty)
        #expect(local.delegates.all.isEmpty)
        #expect(remote.delegates.all.isEmpty)
        #expect(a.room.remoteParticipants.isEmpty)
    }
}
