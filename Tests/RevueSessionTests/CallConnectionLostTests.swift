import Foundation
import Testing
@testable import RevueSession

/// A participant whose friend connection is lost (the peer crashed: no goodbye, no hang-up, its
/// socket closed) leaves the call with `.connectionLost`: the moment the friend goes offline by
/// default, that is within `RevueTimeouts.connectionTimeout`; after `callLostTimeout` more when an
/// app asks for a grace period.
@MainActor
@Suite(.serialized) struct CallConnectionLostTests {
    /// Invites `b` from `a`, waits until both see each other and `a` receives `b`'s two tracks.
    func call(_ a: CallPeer, _ b: CallPeer) async throws {
        try a.friends.sendInvitation(friendId: b.id, message: "call")
        await b.wait("invitation") { b.room.invitations[a.id] != nil }
        try b.friends.acceptInvitation(friendId: a.id)
        await a.wait("b in a's room") { a.room.remoteParticipants[b.id] != nil }
        await b.wait("a in b's room") { b.room.remoteParticipants[a.id] != nil }
        await a.wait("b's tracks subscribed") {
            a.room.remoteParticipants[b.id]?.remoteTrackPublications.filter(\.isSubscribed).count == 2
        }
    }

    @Test func crashedParticipantLeavesWithinTheConnectionTimeout() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])
        try await call(a, b)
        let timeouts = a.peer.configuration.timeouts
        #expect(timeouts.callLostTimeout == 0)  // the default: no grace
        let sids = a.room.remoteParticipants[b.id]!.remoteTrackPublications.map(\.sid)
        let mark = a.recorder.timeline.count

        let crashedAt = monotonicNow()
        b.revue.abandonForTesting()
        await a.wait("b left the call", timeout: timeouts.connectionTimeout + 5) {
            a.recorder.participant.contains { $0.hasPrefix("disconnected(b,") }
        }
        let leftAfter = monotonicNow() - crashedAt
        // The keepalive timeout, one 50 ms tick, and scheduling slack on a loaded machine.
        #expect(leftAfter < timeouts.connectionTimeout + 1.5, "left after \(leftAfter) s")
        #expect(a.room.remoteParticipants.isEmpty)
        #expect(a.room.remoteParticipants[b.id] == nil)
        // Friend offline first, then the participant's paths on both layers, its tracks
        // unsubscribed, and the leave on both layers (participant layer first in each pair).
        var expected = ["friend:paths(b,false)", "participant:paths(b,false)", "room:paths(b,false)"]
        for sid in sids { expected += ["participant:unsubscribe(b,\(sid))", "room:unsubscribe(b,\(sid))"] }
        expected += ["participant:disconnected(b,connectionLost)", "room:disconnect(b,connectionLost)"]
        #expect(Array(a.recorder.timeline[mark...]) == expected)
        #expect(a.calls.suffix(1) == ["disconnect(b)"])
        // Nothing more afterwards (no second leave from the timer).
        await settle(0.5)
        #expect(Array(a.recorder.timeline[mark...]) == expected)
    }

    @Test func graceTimeoutKeepsAnOfflineParticipantThenItLeaves() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let grace = 1.5
        let a = try CallPeer("a", node: node) { $0.timeouts.callLostTimeout = grace }
        let b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])
        try await call(a, b)
        let mark = a.recorder.timeline.count

        b.revue.abandonForTesting()
        await a.wait("b offline", timeout: 5) { a.recorder.timeline[mark...].contains("room:paths(b,false)") }
        // Offline but still in the call during the grace period.
        let participant = try #require(a.room.remoteParticipants[b.id])
        let offlineSince = try #require(participant.offlineSince)
        #expect(participant.paths.isOnline == false)
        await a.wait("b left the call", timeout: grace + 5) { a.room.remoteParticipants[b.id] == nil }
        // Never before the grace period (a lower bound: scheduling can only make it later).
        #expect(monotonicNow() - offlineSince >= grace)
        #expect(a.recorder.participant.last == "disconnected(b,connectionLost)")
        #expect(a.recorder.room.last { $0.hasPrefix("disconnect") } == "disconnect(b,connectionLost)")
    }
}
