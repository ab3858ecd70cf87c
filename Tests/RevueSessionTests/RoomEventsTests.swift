import Foundation
import MediaCore
import Testing

@testable import RevueSession

/// The call as a whole on every RoomDelegate (started, ended, failed), publish failures, in-call
/// messages to several participants, and the rules the room layer inherits from the friend layer:
/// message timeouts, a failed delete, profile events, destroy().
@MainActor
@Suite(.serialized) struct RoomEventsTests {
    /// A second RoomDelegate that only records the call events, to check every delegate gets them.
    final class CallEvents: RoomDelegate {
        var events: [String] = []
        func roomDidStartCall(_ room: Room) { events.append("started") }
        func roomDidEndCall(_ room: Room) { events.append("ended") }
        func room(_ room: Room, callDidFailWithError error: CallError) { events.append("failed(\(error))") }
        func room(_ room: Room, participantDidConnect participant: RemoteParticipant) { events.append("connect") }
        func room(_ room: Room, participantDidDisconnect participant: RemoteParticipant) { events.append("disconnect") }
    }

    static func order(_ p: CallPeer) -> [String] {
        p.recorder.room.filter {
            ["started", "ended"].contains($0) || $0.hasPrefix("failed") || $0.hasPrefix("connect") || $0.hasPrefix("disconnect")
        }
    }

    @Test func callStartsBeforeTheFirstParticipantAndEndsAfterTheLastOnEveryDelegate() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let peers = try ["a", "b", "c"].map { try CallPeer($0, node: node) }
        defer { for p in peers { p.peer.remove() } }
        let (a, b, c) = (peers[0], peers[1], peers[2])
        try await makeFriends(peers)
        for p in peers { p.room.options.cameraEnabled = false }  // audio only: light beside the timing tests
        let second = CallEvents()
        a.room.delegates.add(delegate: second)

        try await startCall(a, b)
        try await startCall(a, c)
        await c.wait("c with b") { c.room.remoteParticipants[b.id] != nil }
        b.room.disconnectAll()
        await a.wait("b gone") { a.room.remoteParticipants[b.id] == nil }
        c.room.disconnectAll()
        await a.wait("a ended") { Self.order(a).last == "ended" }
        #expect(
            Self.order(a) == [
                "started", "connect(b)", "connect(c)", "disconnect(b,remoteHangUp)", "disconnect(c,remoteHangUp)", "ended",
            ])
        #expect(second.events == ["started", "connect", "connect", "disconnect", "disconnect", "ended"])
        await c.wait("c ended") { Self.order(c).last == "ended" }
        #expect(Self.order(c).first == "started" && Self.order(c).filter { $0 == "started" }.count == 1)

        // A second call starts again.
        try await startCall(b, a)
        await a.wait("second start") { a.recorder.room.filter { $0 == "started" }.count == 2 }
        #expect(Self.order(a).suffix(2) == ["started", "connect(b)"])
        b.room.disconnectAll()
        await a.wait("second end") { Self.order(a).last == "ended" }
    }

    @Test func lostLastParticipantFailsTheCallThenEndsIt() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])
        for p in [a, b] { p.room.options.cameraEnabled = false }  // audio only: light beside the timing tests
        try await startCall(a, b)
        b.revue.abandonForTesting()
        await a.wait("a ended", timeout: 6) { Self.order(a).last == "ended" }
        #expect(Self.order(a) == ["started", "connect(b)", "disconnect(b,connectionLost)", "failed(connectionLost)", "ended"])
    }

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

    @Test func inCallMessageGoesToAllAtOnceWithAResultPerRecipient() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node) { $0.timeouts.callLostTimeout = 30 }
        let b = try CallPeer("b", node: node), c = try CallPeer("c", node: node)
        defer { for p in [a, b, c] { p.peer.remove() } }
        try await makeFriends([a, b, c])
        for p in [a, b, c] { p.room.options.cameraEnabled = false }  // audio only: light beside the timing tests
        try await startCall(a, b)
        try await startCall(a, c)
        // c vanishes without a word; a keeps it in the call (grace) and cannot reach it.
        c.revue.abandonForTesting()
        // The recipients in an order where c would hold b up if they were served one by one.
        let recipients = [a.room.remoteParticipants[c.id]!, a.room.remoteParticipants[b.id]!].sorted {
            $0.identity == c.id && $1.identity != c.id
        }
        // Served one by one, b could get the message only after c's 5 s timeout; served at once,
        // it has it within a round trip. The bound is that timeout, not a guess at machine speed.
        let started = MonotonicTime.now
        let send = Task { @MainActor in try await a.room.localParticipant.sendMessage("to both", to: recipients, timeout: 5) }
        await b.waitRoom("message(a,to both)", timeout: 10)
        let arrivedAfter = (MonotonicTime.now - started).inSeconds
        #expect(arrivedAfter < 5, "b got the message after \(arrivedAfter) s: not before c's timeout")
        let results = try await send.value
        #expect(Set(results.keys) == [b.id, c.id])
        if case .success = results[b.id] {} else { Issue.record("b: \(String(describing: results[b.id]))") }
        if case .failure = results[c.id] {} else { Issue.record("c: \(String(describing: results[c.id]))") }
        // Nothing to send: only too long a message throws.
        await #expect(throws: FriendMessageError.messageTooLong) {
            try await a.room.localParticipant.sendMessage(
                String(repeating: "x", count: FriendManager.maxMessageLength), timeout: 5)
        }
        a.room.disconnectAll()
    }

    @Test func messageTimeoutsDefaultToTenSecondsAndClampToFiveAndThirty() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node) { $0.timeouts.callLostTimeout = 30 }
        let b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])
        for p in [a, b] { p.room.options.cameraEnabled = false }  // audio only: light beside the timing tests
        try await startCall(a, b)
        b.revue.abandonForTesting()  // no receipt will come: each waiter stays until its deadline
        let f = try #require(a.revue.core?.friends[b.id])
        func newestDeadline() -> MonotonicTime? { f.waiters.max { $0.key < $1.key }?.value.deadline }
        var tasks: [Task<Void, Never>] = []
        for (timeout, expected) in [(nil, 10.0), (100, 30), (1, 5), (17, 17)] as [(Double?, Double)] {
            let count = f.waiters.count
            let t0 = MonotonicTime.now
            tasks.append(
                Task { @MainActor in
                    if let timeout {
                        _ = try? await a.friends.sendMessage(friendId: b.id, message: "m", timeout: timeout)
                    } else {
                        _ = try? await a.friends.sendMessage(friendId: b.id, message: "m")
                    }
                })
            await a.wait("queued") { f.waiters.count == count + 1 }
            let deadline = try #require(newestDeadline())
            #expect(
                abs((deadline - t0).inSeconds - expected) < 0.5,
                "friend message, timeout \(String(describing: timeout)): \((deadline - t0).inSeconds)")
        }
        // In-call messages: the same default and clamp.
        for (timeout, expected) in [(nil, 10.0), (100, 30), (1, 5)] as [(Double?, Double)] {
            let count = f.waiters.count
            let t0 = MonotonicTime.now
            tasks.append(
                Task { @MainActor in
                    if let timeout {
                        _ = try? await a.room.localParticipant.sendMessage("c", timeout: timeout)
                    } else {
                        _ = try? await a.room.localParticipant.sendMessage("c")
                    }
                })
            await a.wait("queued") { f.waiters.count == count + 1 }
            let deadline = try #require(newestDeadline())
            #expect(
                abs((deadline - t0).inSeconds - expected) < 0.5,
                "in-call message, timeout \(String(describing: timeout)): \((deadline - t0).inSeconds)")
        }
        a.peer.stop()  // ends the waiters
        for t in tasks { await t.value }
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
