// The call layer's timing on simulated time: a crashed participant leaving within the connection
// timeout (or after an app's grace period), a lost last participant failing the call, in-call
// message deadlines, one hang-up a second for signalling about a call the peer does not have, and
// the order of the call's events over its life. Links of 1 ms one way; the rooms' media legs are
// off (signalling only: track publications and subscriptions still run). Each test prints its
// figures, which are the same in every run.
import Foundation
import MediaCore
import MediaTestSupport
import Testing

@testable import RevueSession

@MainActor
@Suite struct SimulatedCallTimingTests {
    /// A second RoomDelegate that only records the call events, to check every delegate gets them.
    final class CallEvents: RoomDelegate {
        var events: [String] = []
        func roomDidStartCall(_ room: Room) { events.append("started") }
        func roomDidEndCall(_ room: Room) { events.append("ended") }
        func room(_ room: Room, callDidFailWithError error: CallError) { events.append("failed(\(error))") }
        func room(_ room: Room, participantDidConnect participant: RemoteParticipant) { events.append("connect") }
        func room(_ room: Room, participantDidDisconnect participant: RemoteParticipant) { events.append("disconnect") }
    }

    /// The call events only (start, end, failure, connects and disconnects), in order.
    static func order(_ p: SimulatedPeer) -> [String] {
        p.recorder.room.filter {
            ["started", "ended"].contains($0) || $0.hasPrefix("failed") || $0.hasPrefix("connect") || $0.hasPrefix("disconnect")
        }
    }

    /// `a` calls `b` and runs until `a` is subscribed to both of `b`'s tracks and the events of
    /// that are delivered; whether it got there.
    func callWithTracks(_ world: SimulatedWorld, _ a: SimulatedPeer, _ b: SimulatedPeer) throws -> Bool {
        guard try world.startCall(a, b, message: "call") else { return false }
        let subscribed = world.run(until: .seconds(10)) {
            a.room.remoteParticipants[b.id]?.remoteTrackPublications.filter(\.isSubscribed).count == 2
        }
        world.run(for: .milliseconds(200))
        return subscribed
    }

    /// With no grace period (the default), a participant that crashed leaves the call as its
    /// friend goes offline: 1.1-1.65 s after the crash (pings every 0.5 s, offline 1.6 s after the
    /// last one, on a 50 ms tick). Friend offline first, then the participant's paths on both
    /// layers, its tracks unsubscribed, and the leave (participant layer first in each pair);
    /// nothing more afterwards.
    @Test func aCrashedParticipantLeavesWithinTheConnectionTimeout() throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let peers = try world.addCallPeers(["a", "b"])
        let (a, b) = (peers[0], peers[1])
        #expect(try world.befriend(a, b))
        #expect(try callWithTracks(world, a, b))
        #expect(a.configuration.timeouts.callLostTimeout == 0)  // the default: no grace
        let sids = a.room.remoteParticipants[b.id]!.remoteTrackPublications.map(\.sid)
        let mark = a.recorder.timeline.count

        let crashedAt = world.time.now
        b.revue.abandonForTesting()
        #expect(world.run(until: .seconds(5)) { a.recorder.participant.contains { $0.hasPrefix("disconnected(b,") } })
        let leftAfter = world.time.now - crashedAt
        print("crashed participant left after \(leftAfter)")
        #expect(leftAfter > .milliseconds(1100) && leftAfter <= .milliseconds(1650), "left after \(leftAfter)")
        #expect(a.room.remoteParticipants.isEmpty)
        var expected = ["friend:paths(b,false)", "participant:paths(b,false)", "room:paths(b,false)"]
        for sid in sids { expected += ["participant:unsubscribe(b,\(sid))", "room:unsubscribe(b,\(sid))"] }
        expected += ["participant:disconnected(b,connectionLost)", "room:disconnect(b,connectionLost)"]
        let from = try #require(a.recorder.timeline[mark...].firstIndex(of: "friend:paths(b,false)"))
        #expect(Array(a.recorder.timeline[from...]) == expected)
        #expect(a.calls.suffix(1) == ["disconnect(b)"])
        world.run(for: .seconds(5))  // no second leave from the timer
        #expect(Array(a.recorder.timeline[from...]) == expected)
    }

    /// With a grace period, an offline participant stays in the call for exactly that long after
    /// it went offline (on the 50 ms tick), then leaves with `.connectionLost`.
    @Test func theGraceTimeoutKeepsAnOfflineParticipantThenItLeaves() throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let grace = 6.0
        let a = try world.addCallPeers(["a"]) { $0.timeouts.callLostTimeout = grace }[0]
        let b = try world.addCallPeers(["b"])[0]
        #expect(try world.befriend(a, b))
        #expect(try callWithTracks(world, a, b))
        let mark = a.recorder.timeline.count

        b.revue.abandonForTesting()
        #expect(world.run(until: .seconds(5)) { a.recorder.timeline[mark...].contains("room:paths(b,false)") })
        let participant = try #require(a.room.remoteParticipants[b.id])
        let offlineSince = try #require(participant.offlineSince)
        #expect(participant.paths.isOnline == false)
        // Still in the call a moment before the grace period ends.
        world.run(for: .seconds(grace) - (world.time.now - offlineSince) - .milliseconds(10))
        #expect(a.room.remoteParticipants[b.id] != nil)
        #expect(!a.recorder.participant.contains { $0.hasPrefix("disconnected(b,") })
        #expect(world.run(until: .seconds(5)) { a.recorder.participant.contains { $0.hasPrefix("disconnected(b,") } })
        let leftAfter = world.time.now - offlineSince
        print("offline participant left \(leftAfter) after going offline (grace \(grace) s)")
        #expect(leftAfter >= .seconds(grace) && leftAfter <= .seconds(grace) + .milliseconds(60), "\(leftAfter)")
        #expect(a.room.remoteParticipants[b.id] == nil)
        #expect(a.recorder.participant.last == "disconnected(b,connectionLost)")
        #expect(a.recorder.room.last { $0.hasPrefix("disconnect") } == "disconnect(b,connectionLost)")
    }

    /// Losing the last participant fails the call, then ends it, in that order, as the friend
    /// goes offline.
    @Test func aLostLastParticipantFailsTheCallThenEndsIt() throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let peers = try world.addCallPeers(["a", "b"])
        let (a, b) = (peers[0], peers[1])
        #expect(try world.befriend(a, b))
        for p in peers { p.room.options.cameraEnabled = false }
        #expect(try world.startCall(a, b))
        let crashedAt = world.time.now
        b.revue.abandonForTesting()
        #expect(world.run(until: .seconds(6)) { Self.order(a).last == "ended" })
        print("the call failed and ended \(world.time.now - crashedAt) after the last participant crashed")
        #expect(Self.order(a) == ["started", "connect(b)", "disconnect(b,connectionLost)", "failed(connectionLost)", "ended"])
    }

    /// The call starts before its first participant and ends after its last, on every delegate;
    /// a second call starts again.
    @Test func theCallStartsBeforeTheFirstParticipantAndEndsAfterTheLast() throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let peers = try world.addCallPeers(["a", "b", "c"])
        let (a, b, c) = (peers[0], peers[1], peers[2])
        #expect(try world.befriendAll(peers))
        for p in peers { p.room.options.cameraEnabled = false }
        let start = world.time.now
        let second = CallEvents()
        a.room.delegates.add(delegate: second)

        #expect(try world.startCall(a, b))
        #expect(try world.startCall(a, c))
        #expect(world.run(until: .seconds(10)) { c.room.remoteParticipants[b.id] != nil })
        b.room.disconnectAll()
        #expect(world.run(until: .seconds(10)) { a.room.remoteParticipants[b.id] == nil })
        c.room.disconnectAll()
        #expect(world.run(until: .seconds(10)) { Self.order(a).last == "ended" })
        #expect(
            Self.order(a) == [
                "started", "connect(b)", "connect(c)", "disconnect(b,remoteHangUp)", "disconnect(c,remoteHangUp)", "ended",
            ])
        #expect(second.events == ["started", "connect", "connect", "disconnect", "disconnect", "ended"])
        #expect(world.run(until: .seconds(10)) { Self.order(c).last == "ended" })
        #expect(Self.order(c).first == "started" && Self.order(c).filter { $0 == "started" }.count == 1)

        #expect(try world.startCall(b, a))
        #expect(world.run(until: .seconds(10)) { a.recorder.room.filter { $0 == "started" }.count == 2 })
        #expect(Self.order(a).suffix(2) == ["started", "connect(b)"])
        b.room.disconnectAll()
        #expect(world.run(until: .seconds(10)) { Self.order(a).last == "ended" })
        print("a's call events: \(Self.order(a)) over \(world.time.now - start)")
    }

    /// An in-call message goes to every recipient at once: b has it within a round trip although
    /// c (crashed, still in the call for its 30 s grace) is first in the list and only fails at
    /// its 5 s deadline. One result per recipient.
    @Test func anInCallMessageGoesToAllAtOnceWithAResultPerRecipient() async throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let a = try world.addCallPeers(["a"]) { $0.timeouts.callLostTimeout = 30 }[0]
        let bc = try world.addCallPeers(["b", "c"])
        let (b, c) = (bc[0], bc[1])
        #expect(try world.befriendAll([a, b, c]))
        for p in [a, b, c] { p.room.options.cameraEnabled = false }
        #expect(try world.startCall(a, b))
        #expect(try world.startCall(a, c))
        c.revue.abandonForTesting()
        let recipients = [a.room.remoteParticipants[c.id]!, a.room.remoteParticipants[b.id]!]
        let started = world.time.now
        let room = a.room
        let send = Task { @MainActor in try await room.localParticipant.sendMessage("to both", to: recipients, timeout: 5) }
        #expect(await world.runYielding(until: .seconds(10)) { b.recorder.room.contains("message(a,to both)") })
        let arrivedAfter = world.time.now - started
        #expect(await world.runYielding(until: .seconds(10)) { a.core.friends[c.id]?.waiters.isEmpty == true })
        let failedAfter = world.time.now - started
        let results = try await send.value
        print("in-call message: at b after \(arrivedAfter), c's failure after \(failedAfter)")
        #expect(arrivedAfter <= .milliseconds(20), "b got the message after \(arrivedAfter)")
        #expect(failedAfter >= .seconds(5) && failedAfter <= .milliseconds(5100), "\(failedAfter)")
        #expect(Set(results.keys) == [b.id, c.id])
        if case .success = results[b.id] {} else { Issue.record("b: \(String(describing: results[b.id]))") }
        if case .failure = results[c.id] {} else { Issue.record("c: \(String(describing: results[c.id]))") }
        await #expect(throws: FriendMessageError.messageTooLong) {
            try await room.localParticipant.sendMessage(String(repeating: "x", count: FriendManager.maxMessageLength), timeout: 5)
        }
        a.room.disconnectAll()
    }

    /// Friend and in-call messages wait for their receipt until a deadline: 10 s by default, the
    /// asked timeout clamped to 5-30 s. On simulated time each deadline is exact.
    @Test func messageTimeoutsDefaultToTenSecondsAndClampToFiveAndThirty() async throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let a = try world.addCallPeers(["a"]) { $0.timeouts.callLostTimeout = 30 }[0]
        let b = try world.addCallPeers(["b"])[0]
        #expect(try world.befriend(a, b))
        for p in [a, b] { p.room.options.cameraEnabled = false }
        #expect(try world.startCall(a, b))
        b.revue.abandonForTesting()  // no receipt will come: each waiter stays until its deadline
        let f = try #require(a.core.friends[b.id])
        func newestDeadline() -> MonotonicTime? { f.waiters.max { $0.key < $1.key }?.value.deadline }
        let friends = a.friends, local = a.room.localParticipant, bId = b.id
        var tasks: [Task<Void, Never>] = []
        var figures: [String] = []
        let cases: [(inCall: Bool, timeout: Double?, expected: Double)] = [
            (false, nil, 10), (false, 100, 30), (false, 1, 5), (false, 17, 17), (true, nil, 10), (true, 100, 30), (true, 1, 5),
        ]
        for (inCall, timeout, expected) in cases {
            let count = f.waiters.count
            let t0 = world.time.now
            tasks.append(
                Task { @MainActor in
                    switch (inCall, timeout) {
                    case (false, let t?): _ = try? await friends.sendMessage(friendId: bId, message: "m", timeout: t)
                    case (false, nil): _ = try? await friends.sendMessage(friendId: bId, message: "m")
                    case (true, let t?): _ = try? await local.sendMessage("c", timeout: t)
                    case (true, nil): _ = try? await local.sendMessage("c")
                    }
                })
            #expect(await world.runYielding(until: .seconds(1)) { f.waiters.count == count + 1 })
            let deadline = try #require(newestDeadline())
            let took = deadline - t0
            figures.append("\(inCall ? "in-call" : "friend") \(timeout.map { "\($0)" } ?? "default") -> \(took)")
            #expect(
                took == .seconds(expected),
                "\(inCall ? "in-call" : "friend") message, timeout \(String(describing: timeout)): \(took)")
        }
        print("message deadlines: \(figures)")
        a.revue.destroy()  // ends the waiters
        for t in tasks { await t.value }
    }

    /// Signalling about a call the peer does not have (a stale call after a restart, say) is
    /// answered with one hang-up per burst, and again after a second, and raises no event there.
    @Test func signallingForACallThePeerDoesNotHaveIsAnsweredWithOneHangUpASecond() throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let peers = try world.addCallPeers(["a", "b"])
        let (a, b) = (peers[0], peers[1])
        #expect(try world.befriend(a, b))
        var hangUps: [MonotonicTime] = []
        let time = world.time
        a.core.reservedMessageHandler = { id, body in
            if id == b.id, CallSignal.parse(body)?.op == CallSignal.Op.hangup { hangUps.append(time.now) }
            return SessionCore.isReserved(body)
        }
        var mute = CallSignal(type: "track", op: CallSignal.Op.mute)
        mute.sid = "audio"
        mute.muted = true
        var mode = CallSignal(op: CallSignal.Op.mode)
        mode.mode = "recvOnly"
        let firstAt = world.time.now
        #expect(a.core.sendReserved(friendId: b.id, text: mute.json))
        #expect(a.core.sendReserved(friendId: b.id, text: mode.json))
        #expect(world.run(until: .seconds(10)) { !hangUps.isEmpty })
        world.run(for: .milliseconds(300))
        #expect(hangUps.count == 1, "one answer for the burst")
        #expect(b.recorder.room.isEmpty)
        world.run(for: .milliseconds(800))
        #expect(a.core.sendReserved(friendId: b.id, text: mute.json))
        #expect(world.run(until: .seconds(10)) { hangUps.count == 2 })
        print("hang-ups at \(hangUps.map { $0 - firstAt })")
        #expect(b.recorder.room.isEmpty)
    }
}
