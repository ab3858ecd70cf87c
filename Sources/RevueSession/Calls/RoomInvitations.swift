// The invitations a room has in progress, one per friend, and the invitation each participant
// connected through, as a state machine: its inputs are the app's calls, a friend's invitation
// messages and the timer, each with `now` and a `Context` (the room's participants, its mode and
// timeout); its outputs are what the room then does, in order: messages to send, events to raise,
// participants to connect or drop. It sends nothing itself, so it is tested without a session.
// Each invitation ends exactly once: every transition that ends one takes its state out first and
// yields its one end (`didEnd` or `connect`); a message for an invitation no longer in progress is
// answered or ignored, never reported.
internal import MediaCore

/// Invitations in progress by friend ID, and the invitation each participant connected through
/// (to match a late cancel or reject). A value owned by `Room`, which performs its outputs.
/// Thread rule: main actor (the room's). Cost: dictionary updates and a few small arrays per
/// input; `tick` and `inProgress` sort the invitations in progress.
struct RoomInvitations {
    /// Where one invitation stands.
    enum State: Equatable {
        /// You invited; waiting for an answer until `deadline`. `sent` once it reached the stream.
        case outgoing(inv: String, message: String, deadline: MonotonicTime, sent: Bool)
        /// You were invited; waiting for your answer until `deadline`.
        case incoming(inv: String, deadline: MonotonicTime)
        /// You accepted; waiting for the inviter's `connect` until `deadline`.
        case accepting(inv: String, deadline: MonotonicTime)

        /// The invitation's token.
        var inv: String {
            switch self {
            case .outgoing(let i, _, _, _), .incoming(let i, _), .accepting(let i, _): return i
            }
        }
    }

    /// What the room does for an input, in the order given. Thread rule: a value. Cost: none.
    enum Output: Equatable {
        /// Send a call-layer message to a friend.
        case send(CallSignal, to: String)
        /// Send an invitation that is withdrawn from retransmission once it is no longer
        /// outgoing; when it reached the stream, tell the machine with `markSent`.
        case sendInvite(CallSignal, to: String)
        /// Send the `connect` answering an accept; a retransmission of it carries nothing once
        /// the friend is no longer a participant through that invitation.
        case sendConnect(CallSignal, to: String)
        /// Raise `didSendInvitation`.
        case didSend(friend: String, message: String)
        /// Raise `didReceiveInvitation`.
        case didReceive(friend: String, message: String?)
        /// Raise `didEndInvitation` with `reason`: the invitation's one end.
        case didEnd(friend: String, reason: InvitationEndReason)
        /// Make the friend a participant through `inv` (the invitation's one end), in `mode`.
        case connect(friend: String, inv: String, mode: String?)
        /// The friend ended, on their side, the invitation they connected through while our
        /// connect was on its way: drop them as a participant (remote hang-up, nobody told).
        case hangUp(friend: String)
    }

    /// What the room is when an input arrives. Thread rule: a value. Cost: a set of IDs.
    struct Context {
        /// The friend IDs of the call's participants.
        var participants: Set<String> = []
        /// The local participant's mode, as sent in `accept` and `connect`.
        var mode: String = ParticipantMode.sendAndRecv.rawValue
        /// `RevueTimeouts.invitationTimeout`: how long an inviter waits for an answer.
        var invitationTimeout: Duration = .seconds(30)

        /// The participants in ID order, as an invitation's `members`. Cost: a sort.
        var members: [String] { participants.sorted() }

        /// How much longer than the inviter the invited side waits: the inviter's end must have
        /// time to arrive, so the invited side times out only when the inviter cannot be reached.
        var answerGrace: Duration { max(.seconds(3), invitationTimeout * 0.5) }
    }

    /// Invitations in progress, by friend ID.
    private var byFriend: [String: State] = [:]
    /// The invitation each participant connected through (none for one who joined through an
    /// introduction).
    private var connectedThrough: [String: String] = [:]

    /// The invitation in progress with a friend.
    subscript(friendId: String) -> State? { byFriend[friendId] }

    /// Whether no invitation is in progress.
    var isEmpty: Bool { byFriend.isEmpty }

    /// How many invitations are in progress.
    var count: Int { byFriend.count }

    /// Invitations in progress in friend ID order (the order the timer handles them in).
    var inProgress: [(id: String, state: State)] { byFriend.sorted(by: { $0.key < $1.key }).map { ($0.key, $0.value) } }

    // MARK: - Inputs from the app

    /// You invite `id` with a new token (`inv`, drawn only when the invitation can start): an
    /// invitation to send and `didSend`. Throws `.invalidState` when an invitation with them is in
    /// progress or they are a participant.
    mutating func invite(
        _ id: String, inv newToken: @autoclosure () -> String, message: String, now: MonotonicTime, context: Context
    ) throws(FriendCallError) -> [Output] {
        guard byFriend[id] == nil, !context.participants.contains(id) else { throw .invalidState }
        let inv = newToken()
        var s = CallSignal(op: CallSignal.Op.invite, inv: inv)
        s.text = message
        s.members = context.members
        byFriend[id] = .outgoing(inv: inv, message: message, deadline: now + context.invitationTimeout, sent: false)
        return [.sendInvite(s, to: id), .didSend(friend: id, message: message)]
    }

    /// Your invitation to `id`, once held back, reached its stream.
    mutating func markSent(_ id: String) {
        guard case .outgoing(let inv, let message, let deadline, false) = byFriend[id] else { return }
        byFriend[id] = .outgoing(inv: inv, message: message, deadline: deadline, sent: true)
    }

    /// Whether your invitation to `id` with `inv` is still waiting for its answer.
    func isOutgoing(_ id: String, inv: String?) -> Bool {
        guard case .outgoing(let current, _, _, _) = byFriend[id] else { return false }
        return current == inv
    }

    /// The `accept` answering `id`'s invitation, to be sent before `accepted`; nothing changes
    /// until it was. Throws `.invalidState` when `id` is not inviting you.
    func acceptance(of id: String, context: Context) throws(FriendCallError) -> CallSignal {
        guard case .incoming(let inv, _) = byFriend[id] else { throw .invalidState }
        var s = CallSignal(op: CallSignal.Op.accept, inv: inv)
        s.members = context.members
        s.mode = context.mode
        return s
    }

    /// Your `accept` to `id` was sent: wait for its `connect` until the inviter's timeout has
    /// had time to reach you.
    mutating func accepted(_ id: String, now: MonotonicTime, context: Context) {
        guard case .incoming(let inv, _) = byFriend[id] else { return }
        byFriend[id] = .accepting(inv: inv, deadline: now + context.answerGrace)
    }

    /// You reject `id`'s invitation (accepted or not): a `reject` and `didEnd(.rejected)`. Throws
    /// `.invalidState` when none from them is in progress.
    mutating func reject(_ id: String) throws(FriendCallError) -> [Output] {
        switch byFriend[id] {
        case .incoming(let inv, _), .accepting(let inv, _):
            byFriend[id] = nil
            return [.send(CallSignal(op: CallSignal.Op.reject, inv: inv), to: id), .didEnd(friend: id, reason: .rejected)]
        case .outgoing, nil:
            throw .invalidState
        }
    }

    /// You cancel your invitation to `id`: a `cancel` and `didEnd(.cancelled)`. Throws
    /// `.invalidState` when it is not in progress.
    mutating func cancel(_ id: String) throws(FriendCallError) -> [Output] {
        guard case .outgoing(let inv, _, _, _) = byFriend[id] else { throw .invalidState }
        byFriend[id] = nil
        return [.send(CallSignal(op: CallSignal.Op.cancel, inv: inv), to: id), .didEnd(friend: id, reason: .cancelled)]
    }

    /// `id` is being deleted: yours is cancelled, theirs rejected. An invitation that already
    /// ended (its event possibly still queued) yields nothing, so its one end keeps its reason.
    mutating func friendDeleted(_ id: String) -> [Output] {
        switch byFriend[id] {
        case .outgoing: return (try? cancel(id)) ?? []
        case .incoming, .accepting: return (try? reject(id)) ?? []
        case nil: return []
        }
    }

    /// The session goes away politely: a `cancel` for each invitation you sent and a `reject`
    /// for each you received; no events (the states are forgotten with the room's).
    func farewells() -> [Output] {
        byFriend.map { id, state in
            switch state {
            case .outgoing(let inv, _, _, _): return .send(CallSignal(op: CallSignal.Op.cancel, inv: inv), to: id)
            case .incoming(let inv, _), .accepting(let inv, _):
                return .send(CallSignal(op: CallSignal.Op.reject, inv: inv), to: id)
            }
        }
    }

    // MARK: - Inputs from the timer and from friends

    /// The timer at `now`, in friend ID order: an invitation past its deadline ends with
    /// `didEnd(.timeout)` (yours also tells the friend with `end`); yours held back while the
    /// friend was unreachable is sent again.
    mutating func tick(now: MonotonicTime, context: Context) -> [Output] {
        var out: [Output] = []
        for (id, state) in inProgress {
            switch state {
            case .outgoing(let inv, let message, let deadline, let sent):
                if now >= deadline {
                    byFriend[id] = nil
                    out.append(.send(CallSignal(op: CallSignal.Op.end, inv: inv), to: id))
                    out.append(.didEnd(friend: id, reason: .timeout))
                } else if !sent {
                    var s = CallSignal(op: CallSignal.Op.invite, inv: inv)
                    s.text = message
                    s.members = context.members
                    out.append(.sendInvite(s, to: id))
                }
            case .incoming(_, let deadline), .accepting(_, let deadline):
                if now >= deadline {
                    byFriend[id] = nil
                    out.append(.didEnd(friend: id, reason: .timeout))
                }
            }
        }
        return out
    }

    /// An invitation message (`invite`, `cancel`, `end`, `reject`, `accept`, `connect`) from `id`.
    mutating func receive(_ s: CallSignal, from id: String, now: MonotonicTime, context: Context) -> [Output] {
        guard let inv = s.inv else { return [] }
        let state = byFriend[id]
        let isParticipant = context.participants.contains(id)
        switch s.op {
        case CallSignal.Op.invite:
            guard state == nil, !isParticipant else {
                // Busy with them already (both invited at once, or already in a call): decline it.
                return [.send(CallSignal(op: CallSignal.Op.end, inv: inv), to: id)]
            }
            byFriend[id] = .incoming(inv: inv, deadline: now + context.invitationTimeout + context.answerGrace)
            return [.didReceive(friend: id, message: s.text)]
        case CallSignal.Op.cancel, CallSignal.Op.end, CallSignal.Op.reject:
            if let state, state.inv == inv {
                byFriend[id] = nil
                return [.didEnd(friend: id, reason: .finished)]
            } else if connectedThrough[id] == inv, isParticipant {
                // Ended on their side while our connect was on its way: the call is over.
                return [.hangUp(friend: id)]
            }
            return []
        case CallSignal.Op.accept:
            guard case .outgoing(let mine, _, _, _) = state, mine == inv else {
                // Already connected (through an introduction, which ended the invitation): nothing
                // to answer; otherwise there is no such invitation any more.
                return isParticipant ? [] : [.send(CallSignal(op: CallSignal.Op.end, inv: inv), to: id)]
            }
            byFriend[id] = nil
            var reply = CallSignal(op: CallSignal.Op.connect, inv: inv)
            reply.members = context.members
            reply.mode = context.mode
            return [.sendConnect(reply, to: id), .connect(friend: id, inv: inv, mode: s.mode)]
        case CallSignal.Op.connect:
            guard case .accepting(let mine, _) = state, mine == inv else {
                return isParticipant ? [] : [.send(CallSignal(op: CallSignal.Op.hangup), to: id)]
            }
            byFriend[id] = nil
            return [.connect(friend: id, inv: inv, mode: s.mode)]
        default:
            return []
        }
    }

    // MARK: - Inputs from the call

    /// `id` became a participant, through `inv` (nil: an introduction); an invitation with them
    /// still in progress ends here (`participantDidConnect` is its one end).
    mutating func connected(_ id: String, through inv: String?) {
        connectedThrough[id] = inv
        byFriend[id] = nil
    }

    /// The invitation participant `id` connected through.
    func connection(of id: String) -> String? { connectedThrough[id] }

    /// Participant `id` left.
    mutating func participantLeft(_ id: String) { connectedThrough[id] = nil }

    /// Forgets every invitation and connection.
    mutating func removeAll() { self = RoomInvitations() }
}
