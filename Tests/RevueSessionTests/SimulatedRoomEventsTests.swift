// The room layer's events on simulated time: a track that cannot be set up, a failed delete,
// profile events (cleared ones too) and destroy(). Signalling only (media legs off).
import Foundation
import MediaCore
import MediaTestSupport
import Testing

@testable import RevueSession

@MainActor
@Suite struct SimulatedRoomEventsTests {
    /// Two friends in a call, a inviting b.
    static func call(_ world: SimulatedWorld, prepare: ([SimulatedPeer]) -> Void = { _ in }) throws -> (
        SimulatedPeer, SimulatedPeer
    ) {
        let peers = try world.addCallPeers(["a", "b"])
        #expect(try world.befriendAll(peers))
        prepare(peers)
        #expect(try world.startCall(peers[0], peers[1]))
        return (peers[0], peers[1])
    }

    @Test func aTrackThatCannotBeSetUpIsReportedAndNotPublished() throws {
        let world = SimulatedWorld(seed: 21)
        defer { world.close() }
        let (a, b) = try Self.call(world) { $0[0].room.environment.publishFailure = .video }
        #expect(world.run(a, roomEvent: "publishFailed(video)"))
        #expect(world.run(until: .seconds(10)) { b.room.remoteParticipants[a.id]?.trackPublications["audio"] != nil })
        world.run(for: .milliseconds(300))
        #expect(a.recorder.room.contains("publish(audio)") && !a.recorder.room.contains("publish(video)"))
        #expect(a.room.localParticipant.publication(.video) == nil)
        #expect(b.room.remoteParticipants[a.id]?.trackPublications["video"] == nil)
        // It can be tried again once the cause is gone.
        a.room.environment.publishFailure = nil
        a.room.localParticipant.setCamera(enabled: true)
        #expect(world.run(a, roomEvent: "publish(video)"))
        #expect(a.room.localParticipant.publication(.video)?.videoCapturer != nil)
        #expect(world.run(until: .seconds(10)) { b.room.remoteParticipants[a.id]?.trackPublications["video"] != nil })
        a.room.disconnectAll()
    }

    @Test func failedDeleteKeepsTheFriendAndEndsTheCall() throws {
        let world = SimulatedWorld(seed: 22)
        defer { world.close() }
        let (a, b) = try Self.call(world)
        // The friend list cannot be written: a directory where the temporary file would go.
        let blocker = a.configuration.dataDirectory + "/profile.json.tmp"
        try? FileManager.default.removeItem(atPath: blocker)
        try FileManager.default.createDirectory(atPath: blocker, withIntermediateDirectories: false)
        #expect(throws: FriendDeleteError.failed(code: -1)) { try a.friends.deleteFriend(friendId: b.id) }
        try FileManager.default.removeItem(atPath: blocker)
        #expect(a.friends.getFriendList().contains(b.id))
        // The call ended first, as for a delete that works.
        #expect(a.room.remoteParticipants[b.id] == nil)
        #expect(world.run(a, roomEvent: "disconnect(b,friendDeleted)"))
        #expect(world.run(b, roomEvent: "disconnect(a,remoteHangUp)"))
    }

    @Test func profileEventsReachTheRoomIncludingNilWhenCleared() throws {
        let world = SimulatedWorld(seed: 23)
        defer { world.close() }
        let (a, b) = try Self.call(world)
        b.revue.setSelfName("Bob")
        b.revue.setSelfStatusMessage("busy day")
        b.revue.setSelfStatus(.away)
        #expect(world.run(a, roomEvent: "status(b,away)"))
        b.revue.setSelfName("")
        b.revue.setSelfStatusMessage("")
        #expect(world.run(a, roomEvent: "statusMessage(b,nil)"))
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
        #expect(world.run(until: .seconds(5)) { a.room.remoteParticipants[b.id]?.statusMessage != nil })
        #expect(a.room.remoteParticipants[b.id]?.name == "a" + String(repeating: "é", count: 255))
        #expect(a.room.remoteParticipants[b.id]?.statusMessage == String(repeating: "€", count: 170))
        a.room.disconnectAll()
    }

    @Test func destroyEmptiesRoomAndParticipantDelegateLists() throws {
        let world = SimulatedWorld(seed: 24)
        defer { world.close() }
        let (a, b) = try Self.call(world)
        let remote = try #require(a.room.remoteParticipants[b.id])
        #expect(world.run(until: .seconds(5)) { !remote.delegates.all.isEmpty })
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
