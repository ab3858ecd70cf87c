import MediaCore
import Testing

@testable import RevueSession

/// The invitation state machine driven directly, at fixed times: every input's exact outputs,
/// and each invitation ending once whatever races its answer.
@Suite struct RoomInvitationsMachineTests {
    typealias Output = RoomInvitations.Output
    static let friend = "B0B"
    static let context = RoomInvitations.Context(participants: ["A11CE"], mode: "sendAndRecv", invitationTimeout: .seconds(30))

    static func at(_ seconds: Double) -> MonotonicTime { .zero + .seconds(seconds) }

    static func signal(_ op: String, _ inv: String?, mode: String? = nil) -> CallSignal {
        var s = CallSignal(op: op, inv: inv)
        s.mode = mode
        return s
    }

    /// Your invitation, sent at 0 s: an invite carrying the members, then didSendInvitation.
    static func invited() throws -> RoomInvitations {
        var m = RoomInvitations()
        let out = try m.invite(friend, inv: "I1", message: "hi", now: at(0), context: context)
        var s = CallSignal(op: CallSignal.Op.invite, inv: "I1")
        s.text = "hi"
        s.members = ["A11CE"]
        #expect(out == [.sendInvite(s, to: friend), .didSend(friend: friend, message: "hi")])
        m.markSent(friend)
        return m
    }

    @Test func anUnansweredInvitationTimesOutOnce() throws {
        var m = try Self.invited()
        #expect(m.tick(now: Self.at(29.9), context: Self.context) == [])
        #expect(
            m.tick(now: Self.at(30), context: Self.context) == [
                .send(Self.signal(CallSignal.Op.end, "I1"), to: Self.friend), .didEnd(friend: Self.friend, reason: .timeout),
            ])
        #expect(m.tick(now: Self.at(31), context: Self.context) == [])
        #expect(m.isEmpty)
        // Its answer, late, is declined and reports nothing.
        #expect(
            m.receive(Self.signal(CallSignal.Op.accept, "I1"), from: Self.friend, now: Self.at(32), context: Self.context) == [
                .send(Self.signal(CallSignal.Op.end, "I1"), to: Self.friend)
            ])
    }

    @Test func anInvitationHeldBackIsSentAgainUntilItLeaves() throws {
        var m = RoomInvitations()
        _ = try m.invite(Self.friend, inv: "I1", message: "hi", now: Self.at(0), context: Self.context)
        let again = m.tick(now: Self.at(1), context: Self.context)
        #expect(again.count == 1)
        guard case .sendInvite(let s, let to) = again.first else { Issue.record("no resend"); return }
        #expect(to == Self.friend && s.inv == "I1" && s.text == "hi")
        #expect(m.tick(now: Self.at(2), context: Self.context) == again)
        m.markSent(Self.friend)
        #expect(m.tick(now: Self.at(3), context: Self.context) == [])
    }

    @Test func aReceivedInvitationTimesOutAfterTheInvitersGraceOnce() {
        var m = RoomInvitations()
        var invite = Self.signal(CallSignal.Op.invite, "I2")
        invite.text = "yo"
        #expect(
            m.receive(invite, from: Self.friend, now: Self.at(0), context: Self.context) == [
                .didReceive(friend: Self.friend, message: "yo")
            ])
        // 30 s and the grace of 15 s.
        #expect(m.tick(now: Self.at(44.9), context: Self.context) == [])
        #expect(m.tick(now: Self.at(45), context: Self.context) == [.didEnd(friend: Self.friend, reason: .timeout)])
        #expect(m.tick(now: Self.at(46), context: Self.context) == [])
        #expect(throws: FriendCallError.invalidState) { try m.reject(Self.friend) }
    }

    @Test func aCancelRacingAnAcceptEndsEachSideOnce() throws {
        // The inviter cancels; the friend's accept crosses the cancel.
        var inviter = try Self.invited()
        #expect(
            try inviter.cancel(Self.friend) == [
                .send(Self.signal(CallSignal.Op.cancel, "I1"), to: Self.friend), .didEnd(friend: Self.friend, reason: .cancelled),
            ])
        #expect(
            inviter.receive(Self.signal(CallSignal.Op.accept, "I1"), from: Self.friend, now: Self.at(1), context: Self.context)
                == [
                    .send(Self.signal(CallSignal.Op.end, "I1"), to: Self.friend)
                ])
        #expect(throws: FriendCallError.invalidState) { try inviter.cancel(Self.friend) }

        // The invited side accepted; the cancel arrives, then the inviter's end for the accept.
        var invitee = RoomInvitations()
        _ = invitee.receive(Self.signal(CallSignal.Op.invite, "I1"), from: "A", now: Self.at(0), context: Self.context)
        var accept = Self.signal(CallSignal.Op.accept, "I1", mode: "sendAndRecv")
        accept.members = ["A11CE"]
        #expect(try invitee.acceptance(of: "A", context: Self.context) == accept)
        invitee.accepted("A", now: Self.at(0.5), context: Self.context)
        #expect(
            invitee.receive(Self.signal(CallSignal.Op.cancel, "I1"), from: "A", now: Self.at(1), context: Self.context) == [
                .didEnd(friend: "A", reason: .finished)
            ])
        #expect(invitee.receive(Self.signal(CallSignal.Op.end, "I1"), from: "A", now: Self.at(1.1), context: Self.context) == [])
        #expect(
            invitee.receive(Self.signal(CallSignal.Op.connect, "I1"), from: "A", now: Self.at(1.2), context: Self.context) == [
                .send(Self.signal(CallSignal.Op.hangup, nil), to: "A")
            ])
        #expect(invitee.tick(now: Self.at(100), context: Self.context) == [])
    }

    @Test func anAcceptConnectsOnceAndALateCancelDropsTheParticipant() throws {
        var m = try Self.invited()
        let out = m.receive(
            Self.signal(CallSignal.Op.accept, "I1", mode: "recvOnly"), from: Self.friend, now: Self.at(1), context: Self.context)
        var connect = Self.signal(CallSignal.Op.connect, "I1", mode: "sendAndRecv")
        connect.members = ["A11CE"]
        #expect(out == [.sendConnect(connect, to: Self.friend), .connect(friend: Self.friend, inv: "I1", mode: "recvOnly")])
        m.connected(Self.friend, through: "I1")
        var inCall = Self.context
        inCall.participants.insert(Self.friend)
        // A second accept is nothing; a cancel of the invitation they connected through drops them.
        #expect(m.receive(Self.signal(CallSignal.Op.accept, "I1"), from: Self.friend, now: Self.at(2), context: inCall) == [])
        #expect(
            m.receive(Self.signal(CallSignal.Op.cancel, "I1"), from: Self.friend, now: Self.at(2), context: inCall) == [
                .hangUp(friend: Self.friend)
            ])
        m.participantLeft(Self.friend)
        #expect(
            m.receive(Self.signal(CallSignal.Op.cancel, "I1"), from: Self.friend, now: Self.at(3), context: Self.context) == [])
    }

    @Test func invitingEachOtherAtOnceDeclinesTheirsAndKeepsYours() throws {
        var m = try Self.invited()
        #expect(
            m.receive(Self.signal(CallSignal.Op.invite, "I9"), from: Self.friend, now: Self.at(1), context: Self.context) == [
                .send(Self.signal(CallSignal.Op.end, "I9"), to: Self.friend)
            ])
        #expect(m.isOutgoing(Self.friend, inv: "I1"))
        #expect(
            m.receive(Self.signal(CallSignal.Op.end, "I1"), from: Self.friend, now: Self.at(2), context: Self.context) == [
                .didEnd(friend: Self.friend, reason: .finished)
            ])
        #expect(m.friendDeleted(Self.friend) == [])
    }

    @Test func refusalsAndDeletion() throws {
        var m = try Self.invited()
        #expect(throws: FriendCallError.invalidState) {
            try m.invite(Self.friend, inv: "I2", message: "", now: Self.at(0), context: Self.context)
        }
        #expect(throws: FriendCallError.invalidState) {
            try m.invite("A11CE", inv: "I3", message: "", now: Self.at(0), context: Self.context)
        }
        #expect(throws: FriendCallError.invalidState) { try m.reject(Self.friend) }
        #expect(throws: FriendCallError.invalidState) { try m.acceptance(of: Self.friend, context: Self.context) }
        #expect(m.farewells() == [.send(Self.signal(CallSignal.Op.cancel, "I1"), to: Self.friend)])
        #expect(
            m.friendDeleted(Self.friend) == [
                .send(Self.signal(CallSignal.Op.cancel, "I1"), to: Self.friend), .didEnd(friend: Self.friend, reason: .cancelled),
            ])
        #expect(m.isEmpty)
    }
}
