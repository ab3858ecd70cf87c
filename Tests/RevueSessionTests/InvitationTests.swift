import Foundation
import MediaCore
import Testing

@testable import RevueSession

/// The invitation matrix of revue-friends.md ("Inviting", "Why an invitation ended", "Delete a
/// friend") between in-process peers, each side's event sequence asserted.
@MainActor
@Suite(.serialized) struct InvitationTests {
    @Test func cancelEndsCancelledHereAndFinishedThere() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])

        try a.friends.sendInvitation(friendId: b.id, message: "video")
        #expect(throws: FriendCallError.invalidState) { try a.friends.sendInvitation(friendId: b.id, message: "again") }
        await b.waitCall("received(a,video)")
        #expect(throws: FriendCallError.invalidState) { try b.friends.cancelInvitation(friendId: a.id) }
        #expect(throws: FriendCallError.invalidState) { try a.friends.acceptInvitation(friendId: b.id) }
        try a.friends.cancelInvitation(friendId: b.id)
        await b.waitCall("ended(a,finished)")
        await settle(0.3)
        #expect(a.calls == ["sent(b)", "ended(b,cancelled)"])
        #expect(b.calls == ["received(a,video)", "ended(a,finished)"])
        #expect(throws: FriendCallError.invalidState) { try a.friends.cancelInvitation(friendId: b.id) }
        #expect(throws: FriendCallError.invalidState) { try b.friends.acceptInvitation(friendId: a.id) }
        #expect(throws: FriendCallError.invalidState) { try b.friends.rejectInvitation(friendId: a.id) }
        #expect(throws: FriendCallError.friendNotFound) { try a.friends.sendInvitation(friendId: a.id, message: "") }
    }

    @Test func rejectEndsFinishedForInviterAndRejectedForInvitee() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])

        try a.friends.sendInvitation(friendId: b.id, message: "audio")
        await b.waitCall("received(a,audio)")
        try b.friends.rejectInvitation(friendId: a.id)
        await a.waitCall("ended(b,finished)")
        await settle(0.3)
        #expect(a.calls == ["sent(b)", "ended(b,finished)"])
        #expect(b.calls == ["received(a,audio)", "ended(a,rejected)"])
        // A late cancel from the inviter is invalid and produces nothing.
        #expect(throws: FriendCallError.invalidState) { try a.friends.cancelInvitation(friendId: b.id) }
        #expect(throws: FriendCallError.invalidState) { try b.friends.rejectInvitation(friendId: a.id) }
    }

    @Test func unansweredInvitationTimesOutOnInvitingSideFirst() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node, invitationTimeout: 1.5), b = try CallPeer("b", node: node, invitationTimeout: 1.5)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])

        try a.friends.sendInvitation(friendId: b.id, message: "video")
        await b.waitCall("received(a,video)")
        await a.waitCall("ended(b,timeout)")
        await b.waitCall("ended(a,finished)")
        await settle(3.5)  // past the invited side's own deadline: nothing more
        #expect(a.calls == ["sent(b)", "ended(b,timeout)"])
        #expect(b.calls == ["received(a,video)", "ended(a,finished)"])
        #expect(throws: FriendCallError.invalidState) { try b.friends.acceptInvitation(friendId: a.id) }
    }

    @Test func unreachableFriendTimesOutOnBothSides() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node, invitationTimeout: 1.5), b = try CallPeer("b", node: node, invitationTimeout: 1.5)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])

        // The invited friend cannot be reached: the inviter times out.
        b.peer.stop()
        await a.peer.waitForEvent(.paths(b.id, false))
        try a.friends.sendInvitation(friendId: b.id, message: "hello?")
        await a.waitCall("ended(b,timeout)")
        #expect(a.calls == ["sent(b)", "ended(b,timeout)"])

        // The inviting side vanishes (no goodbye): the invited side times out.
        try b.peer.start()
        b.attach()
        await a.peer.wait("b back") { a.friends.getFriendPaths(friendId: b.id).isOnline }
        await b.peer.wait("a back") { b.friends.getFriendPaths(friendId: a.id).isOnline }
        try a.friends.sendInvitation(friendId: b.id, message: "bye")
        await b.waitCall("received(a,bye)")
        a.revue.abandonForTesting()
        await b.waitCall("ended(a,timeout)", timeout: 15)
        #expect(b.calls == ["received(a,bye)", "ended(a,timeout)"])
    }

    @Test func acceptConnectsBothSidesThenHangUpAndCallAgain() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])

        for round in 0..<2 {
            try a.friends.sendInvitation(friendId: b.id, message: "call \(round)")
            await b.waitCall("received(a,call \(round))")
            try b.friends.acceptInvitation(friendId: a.id)
            await a.wait("connected") { a.room.remoteParticipants[b.id] != nil }
            await b.wait("connected") { b.room.remoteParticipants[a.id] != nil }
            await settle(0.2)
            #expect(a.room.remoteParticipants[b.id]?.identity == b.id)
            #expect(b.room.remoteParticipants[a.id]?.identity == a.id)
            #expect(a.room.localParticipant.identity == a.id)
            #expect(throws: FriendCallError.invalidState) { try a.friends.sendInvitation(friendId: b.id, message: "") }
            #expect(throws: FriendCallError.invalidState) { try a.friends.cancelInvitation(friendId: b.id) }
            #expect(throws: FriendCallError.invalidState) { try b.friends.rejectInvitation(friendId: a.id) }
            // Hang up from alternating sides.
            let (hanger, other) = round == 0 ? (a, b) : (b, a)
            hanger.room.remoteParticipants[other.id]!.disconnect()
            await other.wait("gone") { other.room.remoteParticipants.isEmpty }
            await hanger.wait("gone") { hanger.room.remoteParticipants.isEmpty }
            await settle(0.2)
            #expect(hanger.recorder.room.last { $0.hasPrefix("disconnect") } == "disconnect(\(other.name),localHangUp)")
            #expect(other.recorder.room.last { $0.hasPrefix("disconnect") } == "disconnect(\(hanger.name),remoteHangUp)")
            #expect(hanger.recorder.participant.last == "disconnected(\(other.name),localHangUp)")
            #expect(other.recorder.participant.last == "disconnected(\(hanger.name),remoteHangUp)")
        }
        #expect(a.calls == ["sent(b)", "connect(b)", "disconnect(b)", "sent(b)", "connect(b)", "disconnect(b)"])
        #expect(
            b.calls == ["received(a,call 0)", "connect(a)", "disconnect(a)", "received(a,call 1)", "connect(a)", "disconnect(a)"])
    }

    @Test func cancelRacingAcceptEndsEachSideOnce() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])

        try a.friends.sendInvitation(friendId: b.id, message: "x")
        await b.waitCall("received(a,x)")
        // Both act in the same instant: the accept and the cancel cross on the wire.
        try b.friends.acceptInvitation(friendId: a.id)
        try a.friends.cancelInvitation(friendId: b.id)
        await b.waitCall("ended(a,finished)")
        await settle(0.5)
        #expect(a.calls == ["sent(b)", "ended(b,cancelled)"])
        #expect(b.calls == ["received(a,x)", "ended(a,finished)"])
        #expect(a.room.remoteParticipants.isEmpty && b.room.remoteParticipants.isEmpty)
    }

    @Test func deleteFriendEndsInvitationOrCallFirst() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        let c = try CallPeer("c", node: node), d = try CallPeer("d", node: node)
        defer { a.peer.remove(); b.peer.remove(); c.peer.remove(); d.peer.remove() }
        try await makeFriends([a, b])
        try await makeFriends([a, c])
        try await makeFriends([a, d])

        // You invited them: cancelled.
        try a.friends.sendInvitation(friendId: b.id, message: "1")
        await b.waitCall("received(a,1)")
        try a.friends.deleteFriend(friendId: b.id)
        await b.waitCall("ended(a,finished)")
        await settle(0.2)
        #expect(a.calls == ["sent(b)", "ended(b,cancelled)"])

        // They invited you: rejected.
        try c.friends.sendInvitation(friendId: a.id, message: "2")
        await a.waitCall("received(c,2)")
        try a.friends.deleteFriend(friendId: c.id)
        await c.waitCall("ended(a,finished)")
        await settle(0.2)
        #expect(a.calls.suffix(2) == ["received(c,2)", "ended(c,rejected)"])

        // Connected: hung up.
        try a.friends.sendInvitation(friendId: d.id, message: "3")
        await d.waitCall("received(a,3)")
        try d.friends.acceptInvitation(friendId: a.id)
        await a.waitCall("connect(d)")
        try a.friends.deleteFriend(friendId: d.id)
        await d.waitCall("disconnect(a)")
        await settle(0.2)
        #expect(a.calls.suffix(3) == ["sent(d)", "connect(d)", "disconnect(d)"])
        #expect(a.recorder.room.last { $0.hasPrefix("disconnect") } == "disconnect(d,friendDeleted)")
        #expect(d.calls == ["received(a,3)", "connect(a)", "disconnect(a)"])
        #expect(throws: FriendCallError.friendNotFound) { try a.friends.sendInvitation(friendId: d.id, message: "") }
    }

    @Test func deleteRightAfterTheEndWasDecidedReportsTheRealReasonOnce() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node, invitationTimeout: 5), b = try CallPeer("b", node: node, invitationTimeout: 5)
        let c = try CallPeer("c", node: node, invitationTimeout: 5)
        defer { a.peer.remove(); b.peer.remove(); c.peer.remove() }
        try await makeFriends([a, b])
        try await makeFriends([c, b])

        // The inviter's timer runs out and, in the same main-actor turn, before the event reached
        // the App, the App deletes the friend: one didEndInvitation, with .timeout, after the
        // deletion (not .cancelled).
        try a.friends.sendInvitation(friendId: b.id, message: "t")
        await b.waitCall("received(a,t)")
        let deadlinePassed = MonotonicTime.now + .seconds(10)
        a.room.tickInvitations(now: deadlinePassed)
        try a.friends.deleteFriend(friendId: b.id)
        #expect(a.calls == ["sent(b)"])
        await a.waitCall("ended(b,timeout)")
        await settle(0.3)
        #expect(a.calls == ["sent(b)", "ended(b,timeout)"])
        await b.waitCall("ended(a,finished)")

        // The invited side: the inviter's cancel arrives in the same turn as the App deletes: one
        // didEndInvitation with the real reason (.finished), not .rejected.
        try c.friends.sendInvitation(friendId: b.id, message: "u")
        await b.waitCall("received(c,u)")
        let inv = b.room.invitations[c.id]!.inv
        b.room.receive(CallSignal(op: CallSignal.Op.cancel, inv: inv), from: c.id)
        try b.friends.deleteFriend(friendId: c.id)
        #expect(!b.calls.contains { $0.hasPrefix("ended(c") })
        await b.waitCall("ended(c,finished)")
        await settle(0.3)
        #expect(b.calls.filter { $0.hasPrefix("ended(c") } == ["ended(c,finished)"])
    }
}

/// The friend stream delivers at least once across a crash: an item the invitee acted on but had
/// not yet acknowledged comes again to its next run. Call signals are about the run that is gone,
/// so an answered invitation (and its connect) reach the new run withdrawn, and the next
/// invitation rings exactly once.
@MainActor
@Suite(.serialized) struct InvitationReplayTests {
    @Test func anInvitationAnsweredBeforeTheInviteesCrashDoesNotRingAgainAfterItsRestart() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])

        let bCore = try #require(b.revue.core)
        bCore.withholdReceipts = true
        let aCore = try #require(a.revue.core)
        let inviteSeq = aCore.friends[b.id]!.nextSeq
        try a.friends.sendInvitation(friendId: b.id, message: "first")
        await b.waitCall("received(a,first)")
        try b.friends.acceptInvitation(friendId: a.id)
        await a.waitCall("connect(b)")
        await b.waitCall("connect(a)")
        // a still holds the invitation (maybe already withdrawn by a retransmission) and its
        // connect, unacknowledged.
        let unacknowledged = aCore.friends[b.id]!.outbound.map { ($0.seq, String(decoding: $0.body, as: UTF8.self)) }
        #expect(unacknowledged.contains { $0.0 == inviteSeq }, "\(unacknowledged)")
        #expect(unacknowledged.contains { CallSignal.parse($0.1)?.op == CallSignal.Op.connect }, "\(unacknowledged)")

        b.revue.abandonForTesting()
        let mark = b.calls.count
        try b.peer.start()
        b.attach()
        await a.waitRoom("disconnect(b,connectionLost)", timeout: 15)
        // Everything a had queued reached the new run and was acknowledged.
        await a.wait("a's stream to b drained", timeout: 10) { aCore.friends[b.id]?.outbound.isEmpty == true }
        #expect(Array(b.calls[mark...]).isEmpty, "\(b.calls[mark...])")
        #expect(b.room.invitations.isEmpty)

        try a.friends.sendInvitation(friendId: b.id, message: "again")
        await b.waitCall("received(a,again)")
        try b.friends.acceptInvitation(friendId: a.id)
        await a.wait("b in a's room again") { a.calls.filter { $0 == "connect(b)" }.count == 2 }
        await b.wait("a in b's room again") { b.calls[mark...].contains("connect(a)") }
        #expect(Array(b.calls[mark...]) == ["received(a,again)", "connect(a)"])
        #expect(a.calls.filter { $0 == "ended(b,finished)" }.isEmpty, "\(a.calls)")
    }

    /// The race of the test above, made certain: the restarted invitee handles the replayed
    /// connect before the paths event that greets the inviter. Its answer must still come after
    /// a hello, or the inviter ends the call with `.remoteHangUp` instead of `.connectionLost`.
    @Test func anAnswerToACallOfAnEarlierRunFollowsAHello() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])
        let bCore = try #require(b.revue.core), aCore = try #require(a.revue.core)
        await b.wait("b's stream to a drained") { bCore.friends[a.id]?.outbound.isEmpty == true }
        aCore.withholdReceipts = true  // what b sends from here on stays in b's stream

        b.room.onlineFriends.remove(a.id)  // the paths event has not reached the room yet
        b.room.receive(CallSignal(op: CallSignal.Op.connect, inv: "of-a-run-that-is-gone"), from: a.id)
        let sent = bCore.friends[a.id]!.outbound.map { CallSignal.parse($0.body).map { [$0.op, $0.epoch] } }
        #expect(sent == [[CallSignal.Op.hello, b.room.epoch], [CallSignal.Op.hangup, nil]])
    }
}
