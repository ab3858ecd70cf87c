import Foundation
import MediaCore
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
        try await startCall(a, b, message: "call")
        await a.wait("b's tracks subscribed") {
            a.room.remoteParticipants[b.id]?.remoteTrackPublications.filter(\.isSubscribed).count == 2
        }
        await settle(0.2)  // the queued connect and subscribe events are delivered
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

        let crashedAt = MonotonicTime.now
        b.revue.abandonForTesting()
        await a.wait("b left the call", timeout: timeouts.connectionTimeout + 5) {
            a.recorder.participant.contains { $0.hasPrefix("disconnected(b,") }
        }
        // The wait above is the time bound: the keepalive timeout plus slack. No tighter bound is
        // asserted: a session whose own timer stalled (a loaded machine) gives its friends two more
        // keepalive intervals before it calls them offline, by design.
        print("crashed participant left after \((MonotonicTime.now - crashedAt).inSeconds) s")
        #expect(a.room.remoteParticipants.isEmpty)
        #expect(a.room.remoteParticipants[b.id] == nil)
        // Friend offline first, then the participant's paths on both layers, its tracks
        // unsubscribed, and the leave on both layers (participant layer first in each pair).
        var expected = ["friend:paths(b,false)", "participant:paths(b,false)", "room:paths(b,false)"]
        for sid in sids { expected += ["participant:unsubscribe(b,\(sid))", "room:unsubscribe(b,\(sid))"] }
        expected += ["participant:disconnected(b,connectionLost)", "room:disconnect(b,connectionLost)"]
        // (From the friend going offline: a path event queued before the crash may come first.)
        let from = try #require(a.recorder.timeline[mark...].firstIndex(of: "friend:paths(b,false)"))
        #expect(Array(a.recorder.timeline[from...]) == expected)
        #expect(a.calls.suffix(1) == ["disconnect(b)"])
        // Nothing more afterwards (no second leave from the timer).
        await settle(0.5)
        #expect(Array(a.recorder.timeline[from...]) == expected)
    }

    @Test func graceTimeoutKeepsAnOfflineParticipantThenItLeaves() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        // Long enough that the test still sees b in the call when the main actor it shares with the
        // other session tests (floods among them) is slow to report b offline.
        let grace = 6.0
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
        // (The events are queued: wait for them, not for the room's state.)
        await a.wait("b left the call", timeout: grace + 5) {
            a.recorder.participant.contains { $0.hasPrefix("disconnected(b,") }
        }
        // Never before the grace period (a lower bound: scheduling can only make it later).
        #expect(MonotonicTime.now - offlineSince >= .seconds(grace))
        #expect(a.room.remoteParticipants[b.id] == nil)
        #expect(a.recorder.participant.last == "disconnected(b,connectionLost)")
        #expect(a.recorder.room.last { $0.hasPrefix("disconnect") } == "disconnect(b,connectionLost)")
    }
}

/// The same with real processes: a revue-node in a call is SIGKILLed; the other sees it offline,
/// then leave the call (`connectionLost`), within the default connection timeout.
@Suite(.serialized, .enabled(if: NodeProcess.binary != nil, "revue-node is not built (swift build)"))
struct CallNodeKillTests {
    @Test func sigkilledNodeLeavesTheCallWithinTheConnectionTimeout() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-kill-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (rendezvous, node) = try await NodeProcess.rendezvous()
        defer { rendezvous.kill() }
        let a = try NodeProcess(["--data", dir + "/a", "--host", "127.0.0.1", "--rendezvous", node])
        let b = try NodeProcess(["--data", dir + "/b", "--host", "127.0.0.1", "--rendezvous", node])
        defer { a.kill(); b.kill() }
        let ra = try #require(await a.wait(timeout: 20, event("ready")))
        let rb = try #require(await b.wait(timeout: 20, event("ready")))
        let aId = ra["revueId"] as! String, bId = rb["revueId"] as! String
        a.send(["cmd": "add-friend", "address": rb["address"] as! String, "message": "hi"])
        _ = try #require(await b.wait(timeout: 20, event("didReceiveFriendRequest", ["friendId": aId])))
        b.send(["cmd": "accept", "friendId": aId])
        a.send(["cmd": "invite", "friendId": bId, "message": "call"])
        _ = try #require(await b.wait(timeout: 20, event("didReceiveInvitation", ["friendId": aId])))
        b.send(["cmd": "accept-call", "friendId": aId])
        _ = try #require(await a.wait(timeout: 20, event("participantDidConnect", ["friendId": bId])))

        let timeouts = RevueTimeouts()  // revue-node runs with the defaults
        let killedAt = MonotonicTime.now
        b.kill()
        let left = await a.wait(timeout: timeouts.connectionTimeout + 5, event("participantDidDisconnect", ["friendId": bId]))
        #expect(left?["reason"] as? String == "connectionLost")
        // The wait is the time bound (see the in-process test for why there is no tighter one).
        print("killed node left after \((MonotonicTime.now - killedAt).inSeconds) s")
        // Offline first (the friend layer's didUpdatePaths), then the leave.
        let lines = a.events.compactMap { e -> String? in
            guard e["friendId"] as? String == bId, let name = e["event"] as? String else { return nil }
            if name == "didUpdatePaths" { return "paths(\(e["isOnline"] as? Bool ?? true))" }
            return name == "participantDidDisconnect" ? "disconnect" : nil
        }
        #expect(lines.suffix(2) == ["paths(false)", "disconnect"])
        a.quit()
    }
}
