// Invitations: the app's calls and a friend's messages go to the `RoomInvitations` state machine,
// and the room performs what it decides (sends, events, participants connected or dropped). Each
// invitation ends exactly once, with didEndInvitation or participantDidConnect (see
// RoomInvitations.swift).

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
    /// `RevueTimeouts.connectionTimeout` (1.6 s once the session is gone).
    var connectionTimeout: Duration { core?.timeouts.connectionTimeout ?? .milliseconds(1600) }

    /// What `invitations` is told about the room with each input: its participants, the local
    /// mode and the invitation timeout. Main actor. Cost: a set of the participants' IDs.
    var invitationContext: RoomInvitations.Context {
        RoomInvitations.Context(
            participants: Set(remoteParticipants.keys), mode: localParticipant.mode.rawValue,
            invitationTimeout: invitationTimeout)
    }

    func sendInvitation(friendId id: String, message: String) throws(FriendCallError) {
        guard let core, core.friends[id] != nil else { throw .friendNotFound }
        guard message.utf8.count <= FriendManager.maxInvitationMessageLength else { throw .messageTooLong }
        perform(try invitations.invite(id, inv: Self.randomId(), message: message, now: now, context: invitationContext))
    }

    func acceptInvitation(friendId id: String) throws(FriendCallError) {
        let context = invitationContext
        guard send(try invitations.acceptance(of: id, context: context), to: id) else { throw .friendNotReachable }
        invitations.accepted(id, now: now, context: context)
    }

    func rejectInvitation(friendId id: String) throws(FriendCallError) {
        perform(try invitations.reject(id))
    }

    func cancelInvitation(friendId id: String) throws(FriendCallError) {
        perform(try invitations.cancel(id))
    }

    /// `deleteFriend` ends a call or invitation first: hang up, cancel, or reject.
    /// An invitation that already ended (its event possibly still queued) is left alone, so its
    /// one didEndInvitation, with the real reason, arrives after the deletion.
    func endForDeletion(_ id: String) {
        friendRuns.forget(id)
        if let p = remoteParticipants[id] { hangUp(p, reason: .friendDeleted, notify: true) }
        introductions.endJoin(with: id)
        perform(invitations.friendDeleted(id))
    }

    /// Timers: invitation deadlines, resending invitations to friends who were offline.
    func tickInvitations(now: MonotonicTime) {
        perform(invitations.tick(now: now, context: invitationContext))
    }

    /// Invitation messages from a friend.
    func receiveInvitationSignal(_ s: CallSignal, from id: String) {
        perform(invitations.receive(s, from: id, now: now, context: invitationContext))
    }

    /// Does what `invitations` decided, in order: sends, events (queued behind every other
    /// session event), participants connected or dropped. Main actor. Cost: one send or queued
    /// event per output.
    func perform(_ outputs: [RoomInvitations.Output]) {
        for output in outputs {
            switch output {
            case .send(let s, let id):
                send(s, to: id)
            case .sendInvite(let s, let id):
                if sendInvite(s, to: id) { invitations.markSent(id) }
            case .sendConnect(let s, let id):
                // Once this leg is over, a retransmission of the connect (to a friend that
                // restarted before acknowledging it) carries nothing.
                let inv = s.inv
                send(s, to: id) { $0.remoteParticipants[id] != nil && $0.invitations.connection(of: id) == inv }
            case .didSend(let id, let message):
                emitRevue { $1.revue($0, friend: id, didSendInvitation: message) }
            case .didReceive(let id, let text):
                emitRevue { $1.revue($0, friend: id, didReceiveInvitation: text) }
            case .didEnd(let id, let reason):
                emitRevue { $1.revue($0, friend: id, didEndInvitation: reason) }
            case .connect(let id, let inv, let mode):
                connectParticipant(id, inv: inv, mode: mode)
            case .hangUp(let id):
                if let p = remoteParticipants[id] { hangUp(p, reason: .remoteHangUp, notify: false) }
            }
        }
    }
}

extension FriendManager {
    func normalizedId(_ id: String) -> String { id.trimmingWhitespace().uppercased() }
}
