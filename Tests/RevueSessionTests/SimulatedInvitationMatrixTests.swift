// The invitation matrix (docs/session.md: inviting, why an invitation ended, deleting a friend)
// on simulated time: each side's event sequence, and when the deadlines fire. Links of
// 1 ms one way; the rooms' media legs are off (signalling only). Each test prints its figures,
// which are the same in every run.
import Foundation
import MediaCore
import MediaTestSupport
import Testing

@testable import RevueSession

@MainActor
@Suite struct SimulatedInvitationMatrixTests {
    @Test func cancelEndsCancelledHereAndFinishedThere() throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let peers = try world.addCallPeers(["a", "b"])
        let (a, b) = (peers[0], peers[1])
        #expect(try world.befriend(a, b))

        let sentAt = world.time.now
        try a.friends.sendInvitation(friendId: b.id, message: "video")
        #expect(throws: FriendCallError.invalidState) { try a.friends.sendInvitation(friendId: b.id, message: "again") }
        #expect(world.run(b, recorded: "received(a,video)"), "\(b.calls)")
        let receivedAfter = world.time.now - sentAt
        #expect(throws: FriendCallError.invalidState) { try b.friends.cancelInvitation(friendId: a.id) }
        #expect(throws: FriendCallError.invalidState) { try a.friends.acceptInvitation(friendId: b.id) }
        let cancelledAt = world.time.now
        try a.friends.cancelInvitation(friendId: b.id)
        #expect(world.run(b, recorded: "ended(a,finished)"), "\(b.calls)")
        print("invitation received after \(receivedAfter), the cancel ended it there after \(world.time.now - cancelledAt)")
        world.run(for: .milliseconds(300))
        // The inviter's own cancel reads `.cancelled`; the invitee learns only that it is over.
        #expect(a.calls == ["sent(b)", "ended(b,cancelled)"])
        #expect(b.calls == ["received(a,video)", "ended(a,finished)"])
        #expect(throws: FriendCallError.invalidState) { try a.friends.cancelInvitation(friendId: b.id) }
        #expect(throws: FriendCallError.invalidState) { try b.friends.acceptInvitation(friendId: a.id) }
        #expect(throws: FriendCallError.invalidState) { try b.friends.rejectInvitation(friendId: a.id) }
        #expect(throws: FriendCallError.friendNotFound) { try a.friends.sendInvitation(friendId: a.id, message: "") }
    }

    @Test func rejectEndsFinishedForInviterAndRejectedForInvitee() throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let peers = try world.addCallPeers(["a", "b"])
        let (a, b) = (peers[0], peers[1])
        #expect(try world.befriend(a, b))

        try a.friends.sendInvitation(friendId: b.id, message: "audio")
        #expect(world.run(b, recorded: "received(a,audio)"), "\(b.calls)")
        let rejectedAt = world.time.now
        try b.friends.rejectInvitation(friendId: a.id)
        #expect(world.run(a, recorded: "ended(b,finished)"), "\(a.calls)")
        print("the reject ended the invitation at the inviter after \(world.time.now - rejectedAt)")
        world.run(for: .milliseconds(300))
        #expect(a.calls == ["sent(b)", "ended(b,finished)"])
        #expect(b.calls == ["received(a,audio)", "ended(a,rejected)"])
        // A late cancel from the inviter is invalid and produces nothing.
        #expect(throws: FriendCallError.invalidState) { try a.friends.cancelInvitation(friendId: b.id) }
        #expect(throws: FriendCallError.invalidState) { try b.friends.rejectInvitation(friendId: a.id) }
        world.run(for: .milliseconds(300))
        #expect(a.calls == ["sent(b)", "ended(b,finished)"])
        #expect(b.calls == ["received(a,audio)", "ended(a,rejected)"])
    }

    /// The inviter's deadline (1.5 s) fires on its 50 ms tick and its end message reaches the
    /// invitee a millisecond later; the invitee's own, later deadline (1.5 s + a 3 s grace) then
    /// finds nothing left to end.
    @Test func unansweredInvitationTimesOutOnInvitingSideFirst() throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let peers = try world.addCallPeers(["a", "b"], invitationTimeout: 1.5)
        let (a, b) = (peers[0], peers[1])
        #expect(try world.befriend(a, b))

        let sentAt = world.time.now
        try a.friends.sendInvitation(friendId: b.id, message: "video")
        #expect(world.run(b, recorded: "received(a,video)"), "\(b.calls)")
        #expect(world.run(a, recorded: "ended(b,timeout)"), "\(a.calls)")
        let inviterEnded = world.time.now - sentAt
        #expect(world.run(b, recorded: "ended(a,finished)"), "\(b.calls)")
        let inviteeEnded = world.time.now - sentAt
        print("unanswered: inviter ended at \(inviterEnded), invitee at \(inviteeEnded)")
        #expect(inviterEnded >= .milliseconds(1500) && inviterEnded <= .milliseconds(1560), "\(inviterEnded)")
        #expect(inviteeEnded > inviterEnded && inviteeEnded <= inviterEnded + .milliseconds(20), "\(inviteeEnded)")
        world.run(for: .milliseconds(3500))  // past the invited side's own deadline: nothing more
        #expect(a.calls == ["sent(b)", "ended(b,timeout)"])
        #expect(b.calls == ["received(a,video)", "ended(a,finished)"])
        #expect(throws: FriendCallError.invalidState) { try b.friends.acceptInvitation(friendId: a.id) }
    }

    /// An invitation to a friend who is gone ends `.timeout` at the inviter's deadline; one from a
    /// friend who then crashed ends `.timeout` at the invitee's (the timeout plus a 3 s grace),
    /// neither sooner nor much later.
    @Test func unreachableFriendTimesOutOnBothSides() throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let peers = try world.addCallPeers(["a", "b"], invitationTimeout: 1.5)
        let (a, b) = (peers[0], peers[1])
        #expect(try world.befriend(a, b))

        // The invited friend cannot be reached: the inviter times out.
        b.revue.destroy()
        #expect(world.run(until: .seconds(5)) { !a.isOnline(with: b) })
        let sentAt = world.time.now
        try a.friends.sendInvitation(friendId: b.id, message: "hello?")
        #expect(world.run(a, recorded: "ended(b,timeout)"), "\(a.calls)")
        let inviterEnded = world.time.now - sentAt
        #expect(a.calls == ["sent(b)", "ended(b,timeout)"])
        #expect(inviterEnded >= .milliseconds(1500) && inviterEnded <= .milliseconds(1560), "\(inviterEnded)")

        // The inviting side vanishes (no goodbye): the invited side times out.
        try b.restart()
        #expect(world.run(until: .seconds(5)) { a.isOnline(with: b) && b.isOnline(with: a) })
        let secondSentAt = world.time.now
        try a.friends.sendInvitation(friendId: b.id, message: "bye")
        #expect(world.run(b, recorded: "received(a,bye)"), "\(b.calls)")
        a.revue.abandonForTesting()
        #expect(world.run(until: .seconds(15), b, recorded: "ended(a,timeout)"), "\(b.calls)")
        let inviteeEnded = world.time.now - secondSentAt
        print("unreachable: inviter ended at \(inviterEnded), invitee (inviter crashed) at \(inviteeEnded)")
        #expect(inviteeEnded >= .milliseconds(4500) && inviteeEnded <= .milliseconds(4570), "\(inviteeEnded)")
        #expect(b.calls == ["received(a,bye)", "ended(a,timeout)"])
    }

    @Test func acceptConnectsBothSidesThenHangUpAndCallAgain() throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let peers = try world.addCallPeers(["a", "b"])
        let (a, b) = (peers[0], peers[1])
        #expect(try world.befriend(a, b))

        for round in 0..<2 {
            let sentAt = world.time.now
            try a.friends.sendInvitation(friendId: b.id, message: "call \(round)")
            #expect(world.run(b, recorded: "received(a,call \(round))"), "\(b.calls)")
            try b.friends.acceptInvitation(friendId: a.id)
            #expect(world.run(until: .seconds(10)) { a.room.remoteParticipants[b.id] != nil })
            #expect(world.run(until: .seconds(10)) { b.room.remoteParticipants[a.id] != nil })
            let connectedAfter = world.time.now - sentAt
            world.run(for: .milliseconds(200))
            #expect(a.room.remoteParticipants[b.id]?.identity == b.id)
            #expect(b.room.remoteParticipants[a.id]?.identity == a.id)
            #expect(a.room.localParticipant.identity == a.id)
            #expect(throws: FriendCallError.invalidState) { try a.friends.sendInvitation(friendId: b.id, message: "") }
            #expect(throws: FriendCallError.invalidState) { try a.friends.cancelInvitation(friendId: b.id) }
            #expect(throws: FriendCallError.invalidState) { try b.friends.rejectInvitation(friendId: a.id) }
            // Hang up from alternating sides: the one who hangs up reads `.localHangUp`, the
            // other `.remoteHangUp`, on the room and the participant layers.
            let (hanger, other) = round == 0 ? (a, b) : (b, a)
            let hungUpAt = world.time.now
            hanger.room.remoteParticipants[other.id]!.disconnect()
            #expect(world.run(until: .seconds(10)) { other.room.remoteParticipants.isEmpty })
            #expect(world.run(until: .seconds(10)) { hanger.room.remoteParticipants.isEmpty })
            print("round \(round): connected after \(connectedAfter), hung up after \(world.time.now - hungUpAt)")
            world.run(for: .milliseconds(200))
            #expect(hanger.recorder.room.last { $0.hasPrefix("disconnect") } == "disconnect(\(other.name),localHangUp)")
            #expect(other.recorder.room.last { $0.hasPrefix("disconnect") } == "disconnect(\(hanger.name),remoteHangUp)")
            #expect(hanger.recorder.participant.last == "disconnected(\(other.name),localHangUp)")
            #expect(other.recorder.participant.last == "disconnected(\(hanger.name),remoteHangUp)")
        }
        #expect(a.calls == ["sent(b)", "connect(b)", "disconnect(b)", "sent(b)", "connect(b)", "disconnect(b)"])
        #expect(
            b.calls == ["received(a,call 0)", "connect(a)", "disconnect(a)", "received(a,call 1)", "connect(a)", "disconnect(a)"])
    }

    @Test func cancelRacingAcceptEndsEachSideOnce() throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let peers = try world.addCallPeers(["a", "b"])
        let (a, b) = (peers[0], peers[1])
        #expect(try world.befriend(a, b))

        try a.friends.sendInvitation(friendId: b.id, message: "x")
        #expect(world.run(b, recorded: "received(a,x)"), "\(b.calls)")
        // Both act in the same instant: the accept and the cancel cross on the wire.
        try b.friends.acceptInvitation(friendId: a.id)
        try a.friends.cancelInvitation(friendId: b.id)
        #expect(world.run(b, recorded: "ended(a,finished)"), "\(b.calls)")
        world.run(for: .milliseconds(500))
        #expect(a.calls == ["sent(b)", "ended(b,cancelled)"])
        #expect(b.calls == ["received(a,x)", "ended(a,finished)"])
        #expect(a.room.remoteParticipants.isEmpty && b.room.remoteParticipants.isEmpty)
    }

    @Test func deleteFriendEndsInvitationOrCallFirst() throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let peers = try world.addCallPeers(["a", "b", "c", "d"])
        let (a, b, c, d) = (peers[0], peers[1], peers[2], peers[3])
        #expect(try world.befriend(a, b))
        #expect(try world.befriend(a, c))
        #expect(try world.befriend(a, d))

        // You invited them: cancelled.
        try a.friends.sendInvitation(friendId: b.id, message: "1")
        #expect(world.run(b, recorded: "received(a,1)"), "\(b.calls)")
        try a.friends.deleteFriend(friendId: b.id)
        #expect(world.run(b, recorded: "ended(a,finished)"), "\(b.calls)")
        world.run(for: .milliseconds(200))
        #expect(a.calls == ["sent(b)", "ended(b,cancelled)"])

        // They invited you: rejected.
        try c.friends.sendInvitation(friendId: a.id, message: "2")
        #expect(world.run(a, recorded: "received(c,2)"), "\(a.calls)")
        try a.friends.deleteFriend(friendId: c.id)
        #expect(world.run(c, recorded: "ended(a,finished)"), "\(c.calls)")
        world.run(for: .milliseconds(200))
        #expect(a.calls.suffix(2) == ["received(c,2)", "ended(c,rejected)"])

        // Connected: hung up.
        try a.friends.sendInvitation(friendId: d.id, message: "3")
        #expect(world.run(d, recorded: "received(a,3)"), "\(d.calls)")
        try d.friends.acceptInvitation(friendId: a.id)
        #expect(world.run(a, recorded: "connect(d)"), "\(a.calls)")
        try a.friends.deleteFriend(friendId: d.id)
        #expect(world.run(d, recorded: "disconnect(a)"), "\(d.calls)")
        world.run(for: .milliseconds(200))
        #expect(a.calls.suffix(3) == ["sent(d)", "connect(d)", "disconnect(d)"])
        #expect(a.recorder.room.last { $0.hasPrefix("disconnect") } == "disconnect(d,friendDeleted)")
        #expect(d.calls == ["received(a,3)", "connect(a)", "disconnect(a)"])
        #expect(throws: FriendCallError.friendNotFound) { try a.friends.sendInvitation(friendId: d.id, message: "") }
    }

    @Test func deleteRightAfterTheEndWasDecidedReportsTheRealReasonOnce() throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let peers = try world.addCallPeers(["a", "b", "c"], invitationTimeout: 5)
        let (a, b, c) = (peers[0], peers[1], peers[2])
        #expect(try world.befriend(a, b))
        #expect(try world.befriend(c, b))

        // The inviter's timer runs out and, in the same main-actor turn, before the event reached
        // the App, the App deletes the friend: one didEndInvitation, with .timeout, after the
        // deletion (not .cancelled).
        try a.friends.sendInvitation(friendId: b.id, message: "t")
        #expect(world.run(b, recorded: "received(a,t)"), "\(b.calls)")
        a.room.tickInvitations(now: world.time.now + .seconds(10))
        try a.friends.deleteFriend(friendId: b.id)
        #expect(a.calls == ["sent(b)"])
        #expect(world.run(a, recorded: "ended(b,timeout)"), "\(a.calls)")
        world.run(for: .milliseconds(300))
        #expect(a.calls == ["sent(b)", "ended(b,timeout)"])
        #expect(world.run(b, recorded: "ended(a,finished)"), "\(b.calls)")

        // The invited side: the inviter's cancel arrives in the same turn as the App deletes: one
        // didEndInvitation with the real reason (.finished), not .rejected.
        try c.friends.sendInvitation(friendId: b.id, message: "u")
        #expect(world.run(b, recorded: "received(c,u)"), "\(b.calls)")
        let inv = try #require(b.room.invitations[c.id]).inv
        b.room.receive(CallSignal(op: CallSignal.Op.cancel, inv: inv), from: c.id)
        try b.friends.deleteFriend(friendId: c.id)
        #expect(!b.calls.contains { $0.hasPrefix("ended(c") })
        #expect(world.run(b, recorded: "ended(c,finished)"), "\(b.calls)")
        world.run(for: .milliseconds(300))
        #expect(b.calls.filter { $0.hasPrefix("ended(c") } == ["ended(c,finished)"])
    }

    /// The friend stream delivers at least once across a crash: an item the invitee acted on but
    /// had not yet acknowledged comes again to its next run. Call signals are about the run that
    /// is gone, so an answered invitation (and its connect) reach the new run withdrawn, and the
    /// next invitation rings exactly once.
    @Test func anInvitationAnsweredBeforeTheInviteesCrashDoesNotRingAgainAfterItsRestart() throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let peers = try world.addCallPeers(["a", "b"])
        let (a, b) = (peers[0], peers[1])
        #expect(try world.befriend(a, b))

        b.core.environment.faults.withholdReceipts = true
        let aCore = a.core
        let inviteSeq = aCore.friends[b.id]!.nextSeq
        try a.friends.sendInvitation(friendId: b.id, message: "first")
        #expect(world.run(b, recorded: "received(a,first)"), "\(b.calls)")
        try b.friends.acceptInvitation(friendId: a.id)
        #expect(world.run(a, recorded: "connect(b)"), "\(a.calls)")
        #expect(world.run(b, recorded: "connect(a)"), "\(b.calls)")
        // a still holds the invitation (perhaps already withdrawn by a retransmission) and its
        // connect, unacknowledged.
        let unacknowledged = aCore.friends[b.id]!.outbound.map { ($0.seq, String(decoding: $0.body, as: UTF8.self)) }
        #expect(unacknowledged.contains { $0.0 == inviteSeq }, "\(unacknowledged)")
        #expect(unacknowledged.contains { CallSignal.parse($0.1)?.op == CallSignal.Op.connect }, "\(unacknowledged)")

        b.revue.abandonForTesting()
        let mark = b.calls.count
        let restartedAt = world.time.now
        try b.restart()
        #expect(world.run(until: .seconds(15), a, roomEvent: "disconnect(b,connectionLost)"), "\(a.recorder.room)")
        let leftAfter = world.time.now - restartedAt
        // Everything a had queued reached the new run and was acknowledged.
        #expect(world.run(until: .seconds(10)) { aCore.friends[b.id]?.outbound.isEmpty == true })
        print(
            "the crashed invitee's call ended \(leftAfter) after its restart; a's stream drained after \(world.time.now - restartedAt)"
        )
        #expect(Array(b.calls[mark...]).isEmpty, "\(b.calls[mark...])")
        #expect(b.room.invitations.isEmpty)

        try a.friends.sendInvitation(friendId: b.id, message: "again")
        #expect(world.run(b, recorded: "received(a,again)"), "\(b.calls)")
        try b.friends.acceptInvitation(friendId: a.id)
        #expect(world.run(until: .seconds(10)) { a.calls.filter { $0 == "connect(b)" }.count == 2 }, "\(a.calls)")
        #expect(world.run(until: .seconds(10)) { b.calls[mark...].contains("connect(a)") }, "\(b.calls)")
        #expect(Array(b.calls[mark...]) == ["received(a,again)", "connect(a)"])
        #expect(a.calls.filter { $0 == "ended(b,finished)" }.isEmpty, "\(a.calls)")
    }

    /// The race of the test above, made certain: the restarted invitee handles the replayed
    /// connect before the paths event that greets the inviter. Its answer must still come after
    /// a hello, or the inviter ends the call with `.remoteHangUp` instead of `.connectionLost`.
    @Test func anAnswerToACallOfAnEarlierRunFollowsAHello() throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let peers = try world.addCallPeers(["a", "b"])
        let (a, b) = (peers[0], peers[1])
        #expect(try world.befriend(a, b))
        let bCore = b.core
        #expect(world.run(until: .seconds(10)) { bCore.friends[a.id]?.outbound.isEmpty == true })
        a.core.environment.faults.withholdReceipts = true  // what b sends from here on stays in b's stream

        b.room.friendRuns.wentOffline(a.id)  // the paths event has not reached the room yet
        b.room.receive(CallSignal(op: CallSignal.Op.connect, inv: "of-a-run-that-is-gone"), from: a.id)
        let sent = bCore.friends[a.id]!.outbound.map { CallSignal.parse($0.body).map { [$0.op, $0.epoch] } }
        #expect(sent == [[CallSignal.Op.hello, b.room.friendRuns.epoch], [CallSignal.Op.hangup, nil]])
    }
}
