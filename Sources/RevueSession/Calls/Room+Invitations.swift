// Invitations: sending, answering, cancelling and ending them, and what deleting a friend does
// to them. Each invitation ends exactly once, with didEndInvitation or
// participantDidConnect: every transition removes the state before queueing its one event, and a
// message for an invitation no longer in progress is answered (or ignored), never reported.

internal import MediaCore

extension FriendManager {
    /// Largest invitation message, in UTF-8 bytes.
    public static let maxInvitationMessageLength = 900

    /// Invites a friend to a call; you receive `didSendInvitation`, they `didReceiveInvitation`.
    /// `message` is passed along unread. A friend who cannot be reached now is invited as soon as
    /// they can be; an unanswered invitation ends with `.timeout` after
    /// `RevueTimeouts.invitationTimeout`. Inviting while in a call adds the friend to it.
    /// Throws `.invalidState` when an invitation with them is in progress or they are in your call.
    public func sendInvitation(friendId: String, message: String) throws(FriendCallError) {
        try room.sendInvitation(friendId: normalizedId(friendId), message: message)
    }

    /// Accepts a friend's invitation; both sides then receive `participantDidConnect`. Throws
    /// `.invalidState` when the friend is no longer inviting you, `.friendNotReachable` when they
    /// cannot be reached now (the invitation stays: retry).
    public func acceptInvitation(friendId: String) throws(FriendCallError) {
        try room.acceptInvitation(friendId: normalizedId(friendId))
    }

    /// Rejects a friend's invitation: you receive `didEndInvitation(.rejected)`, they `.finished`.
    /// Throws `.invalidState` when the invitation has already ended.
    public func rejectInvitation(friendId: String) throws(FriendCallError) {
        try room.rejectInvitation(friendId: normalizedId(friendId))
    }

    /// Cancels the invitation you sent: you receive `didEndInvitation(.cancelled)`, they
    /// `.finished`. Throws `.invalidState` when it has already ended.
    public func cancelInvitation(friendId: String) throws(FriendCallError) {
        try room.cancelInvitation(friendId: normalizedId(friendId))
    }

    private var room: Room { revue.room }
}

extension Room {
    /// `RevueTimeouts.invitationTimeout` (30 s once the session is gone).
    var invitationTimeout: Duration { core?.timeouts.invitationTimeout ?? .seconds(30) }
    /// How much longer than the inviter the invited side waits: the inviter's end must have time to
    /// arrive, so the invited side times out only when the inviter cannot be reached.
    var answerGrace: Duration { max(.seconds(3), invitationTimeout * 0.5) }
    /// `RevueTimeouts.connectionTimeout` (1.6 s once the session is gone).
    var connectionTimeout: Duration { core?.timeouts.connectionTimeout ?? .milliseconds(1600) }

    func sendInvitation(friendId id: String, message: String) throws(FriendCallError) {
        guard let core, core.friends[id] != nil else { throw .friendNotFound }
        guard message.utf8.count <= FriendManager.maxInvitationMessageLength else { throw .messageTooLong }
        guard invitations[id] == nil, remoteParticipants[id] == nil else { throw .invalidState }
        let inv = Self.randomId()
        var s = CallSignal(op: CallSignal.Op.invite, inv: inv)
        s.text = message
        s.members = remoteParticipants.keys.sorted()
        let sent = sendInvite(s, to: id)
        invitations.invite(id, inv: inv, message: message, deadline: self.now + invitationTimeout, sent: sent)
        emitRevue { $1.revue($0, friend: id, didSendInvitation: message) }
    }

    func acceptInvitation(friendId id: String) throws(FriendCallError) {
        guard case .incoming(let inv, _) = invitations[id] else { throw .invalidState }
        var s = CallSignal(op: CallSignal.Op.accept, inv: inv)
        s.members = remoteParticipants.keys.sorted()
        s.mode = localParticipant.mode.rawValue
        guard send(s, to: id) else { throw .friendNotReachable }
        invitations.accepted(id, inv: inv, deadline: self.now + answerGrace)
    }

    func rejectInvitation(friendId id: String) throws(FriendCallError) {
        guard let state = invitations[id] else { throw .invalidState }
        switch state {
        case .incoming(let inv, _), .accepting(let inv, _):
            invitations.end(id)
            send(CallSignal(op: CallSignal.Op.reject, inv: inv), to: id)
            endInvitation(id, .rejected)
        case .outgoing:
            throw .invalidState
        }
    }

    func cancelInvitation(friendId id: String) throws(FriendCallError) {
        guard case .outgoing(let inv, _, _, _) = invitations[id] else { throw .invalidState }
        invitations.end(id)
        send(CallSignal(op: CallSignal.Op.cancel, inv: inv), to: id)
        endInvitation(id, .cancelled)
    }

    func endInvitation(_ id: String, _ reason: InvitationEndReason) {
        emitRevue { $1.revue($0, friend: id, didEndInvitation: reason) }
    }

    /// `deleteFriend` ends a call or invitation first: hang up, cancel, or reject.
    /// An invitation that already ended (its event possibly still queued) is left alone, so its
    /// one didEndInvitation, with the real reason, arrives after the deletion.
    func endForDeletion(_ id: String) {
        friendRuns.forget(id)
        if let p = remoteParticipants[id] { hangUp(p, reason: .friendDeleted, notify: true) }
        introductions.endJoin(with: id)
        guard let state = invitations[id] else { return }
        switch state {
        case .outgoing: try? cancelInvitation(friendId: id)
        case .incoming, .accepting: try? rejectInvitation(friendId: id)
        }
    }

    /// Timers: invitation deadlines, resending invitations to friends who were offline.
    func tickInvitations(now: MonotonicTime) {
        for (id, state) in invitations.inProgress {
            switch state {
            case .outgoing(let inv, let message, let deadline, let sent):
                if now >= deadline {
                    invitations.end(id)
                    send(CallSignal(op: CallSignal.Op.end, inv: inv), to: id)
                    endInvitation(id, .timeout)
                } else if !sent {
                    var s = CallSignal(op: CallSignal.Op.invite, inv: inv)
                    s.text = message
                    s.members = remoteParticipants.keys.sorted()
                    if sendInvite(s, to: id) { invitations.markSent(id) }
                }
            case .incoming(_, let deadline), .accepting(_, let deadline):
                if now >= deadline {
                    invitations.end(id)
                    endInvitation(id, .timeout)
                }
            }
        }
    }

    /// Invitation messages from a friend.
    func receiveInvitationSignal(_ s: CallSignal, from id: String) {
        guard let inv = s.inv else { return }
        let state = invitations[id]
        switch s.op {
        case CallSignal.Op.invite:
            guard state == nil, remoteParticipants[id] == nil else {
                // Busy with them already (both invited at once, or already in a call): decline it.
                send(CallSignal(op: CallSignal.Op.end, inv: inv), to: id)
                return
            }
            invitations.invited(by: id, inv: inv, deadline: self.now + invitationTimeout + answerGrace)
            let text = s.text
            emitRevue { $1.revue($0, friend: id, didReceiveInvitation: text) }
        case CallSignal.Op.cancel, CallSignal.Op.end, CallSignal.Op.reject:
            if let state, state.inv == inv {
                invitations.end(id)
                endInvitation(id, .finished)
            } else if invitations.connection(of: id) == inv, let p = remoteParticipants[id] {
                // Ended on their side while our connect was on its way: the call is over.
                hangUp(p, reason: .remoteHangUp, notify: false)
            }
        case CallSignal.Op.accept:
            guard case .outgoing(let mine, _, _, _) = state, mine == inv else {
                // Already connected (through an introduction, which ended the invitation): nothing
                // to answer; otherwise there is no such invitation any more.
                if remoteParticipants[id] == nil { send(CallSignal(op: CallSignal.Op.end, inv: inv), to: id) }
                return
            }
            invitations.end(id)
            var reply = CallSignal(op: CallSignal.Op.connect, inv: inv)
            reply.members = remoteParticipants.keys.sorted()
            reply.mode = localParticipant.mode.rawValue
            // Once this leg is over, a retransmission of the connect (to a friend that restarted
            // before acknowledging it) carries nothing.
            send(reply, to: id) { $0.remoteParticipants[id] != nil && $0.invitations.connection(of: id) == inv }
            connectParticipant(id, inv: inv, mode: s.mode)
        case CallSignal.Op.connect:
            guard case .accepting(let mine, _) = state, mine == inv else {
                if remoteParticipants[id] == nil { send(CallSignal(op: CallSignal.Op.hangup), to: id) }
                return
            }
            invitations.end(id)
            connectParticipant(id, inv: inv, mode: s.mode)
        default:
            break
        }
    }
}

extension FriendManager {
    func normalizedId(_ id: String) -> String { id.trimmingWhitespace().uppercased() }
}
