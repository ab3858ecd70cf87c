// The bookkeeping of introductions and joins (docs/session.md "Introductions"): the tokens our
// participants vouched for newcomers with, the tokens already used, joins waiting for their
// introduction, introductions and joins we owe friends we could not reach, and the joins we sent;
// and, below, the state machine over them: each input comes with `now` and a `Context` from the
// room, sends and refuses through `Effects` (whose results decide what is owed), and a join let in
// is handed back as an `Admission` for the room to connect. `Room+Introductions.swift` only
// builds the context and performs the admission.
internal import MediaCore

/// What a room remembers about introductions and joins, and the decisions over it. A value owned
/// by `Room`; it raises no events and sends only through the `Effects` it is given. Thread rule:
/// main actor (the room's). Cost: every operation is a dictionary or array update over at most
/// `capacity` entries (used tokens: `usedMemory`), plus a message per member introduced.
struct RoomIntroductions {
    /// An introduction a participant sent us: `newcomer` may join the call with its token until
    /// `deadline`, once.
    struct Introduction {
        var newcomer: String
        var introducer: String
        var deadline: MonotonicTime
    }

    /// A `join` whose introduction has not arrived yet (it travels on another friend's channel).
    struct HeldJoin {
        var token: String
        var mode: String?
        var since: MonotonicTime
    }

    /// Introductions kept at once, and joins owed at once.
    static let capacity = 64
    /// Used tokens remembered (so a replayed `join` is refused at once).
    static let usedMemory = 128

    /// Introductions by token (at most `capacity`).
    private var byToken: [String: Introduction] = [:]
    /// Tokens already used, oldest first (at most `usedMemory`).
    private var used: [String] = []
    /// Held joins, one per friend.
    private var held: [String: HeldJoin] = [:]
    /// Introductions we owe (`Room.introduce`): per newcomer we connected, the members we could
    /// not reach then, with since when. Bounded by the participants.
    private var owedIntroductions: [String: [String: MonotonicTime]] = [:]
    /// Joins we owe (`Room.joinIntroduced`): per member we were introduced to but could not
    /// reach, the token and since when; at most `capacity`.
    private var owedJoins: [String: (token: String, since: MonotonicTime)] = [:]
    /// `join` messages sent to group members, by friend ID, with when.
    private var pendingJoins: [String: MonotonicTime] = [:]

    // MARK: Introductions

    /// The introduction made with `token`, if it is still open.
    subscript(token: String) -> Introduction? { byToken[token] }

    /// Open introductions, used tokens, held joins and pending joins, for `Room.stateCounts`.
    var counts: (introductions: Int, used: Int, held: Int, pending: Int) {
        (byToken.count, used.count, held.count, pendingJoins.count)
    }

    /// Whether `token` opened a join before (among the last `usedMemory`).
    func wasUsed(_ token: String) -> Bool { used.contains(token) }

    /// Keeps an introduction; at capacity the one closest to its deadline goes first.
    mutating func record(_ introduction: Introduction, token: String) {
        if byToken.count >= Self.capacity, let oldest = byToken.min(by: { $0.value.deadline < $1.value.deadline })?.key {
            byToken[oldest] = nil
        }
        byToken[token] = introduction
    }

    /// The introduction opened a join: it is gone, and its token remembered as used.
    mutating func use(_ token: String) {
        byToken[token] = nil
        used.append(token)
        if used.count > Self.usedMemory { used.removeFirst(used.count - Self.usedMemory) }
    }

    // MARK: Held joins

    /// Whether a join from `id` waits for its introduction.
    func holdsJoin(from id: String) -> Bool { held[id] != nil }

    /// Holds a join from `id` until its introduction comes (replacing any held before).
    mutating func hold(_ join: HeldJoin, from id: String) { held[id] = join }

    /// The join held from `newcomer` with `token`, taken out (nil: none with that token).
    mutating func takeHeldJoin(from newcomer: String, token: String) -> HeldJoin? {
        guard let join = held[newcomer], join.token == token else { return nil }
        held[newcomer] = nil
        return join
    }

    /// Forgets a held join from `id` (it joined, or its run ended).
    mutating func dropHeldJoin(from id: String) { held[id] = nil }

    // MARK: Joins we sent

    /// Whether we sent `id` a join it has not answered.
    func isJoining(_ id: String) -> Bool { pendingJoins[id] != nil }

    /// We sent `id` a join at `now`.
    mutating func joinSent(to id: String, at now: MonotonicTime) { pendingJoins[id] = now }

    /// `id` answered (or the join is void): forgets it; whether one was pending.
    @discardableResult
    mutating func endJoin(with id: String) -> Bool { pendingJoins.removeValue(forKey: id) != nil }

    // MARK: What we owe

    /// Members (by friend ID, with since when) still owed an introduction of `newcomer`; kept
    /// as they are for members already owed.
    mutating func owe(_ members: [String: MonotonicTime], introductionOf newcomer: String) {
        guard !members.isEmpty else { return }
        owedIntroductions[newcomer, default: [:]].merge(members) { old, _ in old }
    }

    /// Whether any introduction is owed.
    var owesIntroductions: Bool { !owedIntroductions.isEmpty }

    /// Newcomers whose introductions are owed, in order.
    var owedNewcomers: [String] { owedIntroductions.keys.sorted() }

    /// The owed introductions of `newcomer` that can go now, taken out: those past `timeout`
    /// from their since, or whose newcomer or member is no longer a participant, are dropped;
    /// with the newcomer reachable, the reachable members (in order) are taken. Also returns what
    /// was owed before (for the since of those that fail again). Nil: nothing to send now.
    mutating func takeReadyIntroductions(
        of newcomer: String, now: MonotonicTime, timeout: Duration, isParticipant: (String) -> Bool,
        isReachable: (String) -> Bool
    ) -> (ready: [String], owedSince: [String: MonotonicTime])? {
        let owed = (owedIntroductions[newcomer] ?? [:]).filter {
            isParticipant(newcomer) && isParticipant($0.key) && now - $0.value <= timeout
        }
        owedIntroductions[newcomer] = owed.isEmpty ? nil : owed
        guard isReachable(newcomer) else { return nil }
        let ready = owed.keys.filter(isReachable).sorted()
        guard !ready.isEmpty else { return nil }
        for member in ready { owedIntroductions[newcomer]?[member] = nil }
        if owedIntroductions[newcomer]?.isEmpty == true { owedIntroductions[newcomer] = nil }
        return (ready, owed)
    }

    /// Owes `member` a join with `token` since `since`, unless one is owed already or `capacity`
    /// are.
    mutating func oweJoin(to member: String, token: String, since: MonotonicTime) {
        guard owedJoins[member] == nil, owedJoins.count < Self.capacity else { return }
        owedJoins[member] = (token, since)
    }

    /// Whether any join is owed.
    var owesJoins: Bool { !owedJoins.isEmpty }

    /// Members owed a join, in order.
    var owedJoinMembers: [String] { owedJoins.keys.sorted() }

    /// The join owed to `member` (token, since when).
    func owedJoin(to member: String) -> (token: String, since: MonotonicTime)? { owedJoins[member] }

    /// The join owed to `member` was sent, or is void.
    mutating func dropOwedJoin(to member: String) { owedJoins[member] = nil }

    // MARK: Life cycle

    /// A participant left: its introductions, any for it, and what we owe it or about it are void.
    mutating func forget(participant id: String) {
        byToken = byToken.filter { $0.value.introducer != id && $0.value.newcomer != id }
        owedIntroductions[id] = nil
        for newcomer in owedIntroductions.keys { owedIntroductions[newcomer]?[id] = nil }
        owedJoins[id] = nil
    }

    /// A friend's run ended (a new epoch): its pending and held joins are void.
    mutating func friendRestarted(_ id: String) {
        pendingJoins[id] = nil
        held[id] = nil
    }

    /// Expired introductions go, and so do joins we sent longer than `joinTimeout` ago. Returns
    /// the friends whose held join waited `holdLimit` without its introduction (taken out, in
    /// order), to be refused.
    mutating func expire(now: MonotonicTime, joinTimeout: Duration, holdLimit: Duration) -> [String] {
        for (id, at) in pendingJoins where now - at > joinTimeout { pendingJoins[id] = nil }
        if byToken.contains(where: { $0.value.deadline <= now }) {
            byToken = byToken.filter { $0.value.deadline > now }
        }
        var refused: [String] = []
        for (id, join) in held.sorted(by: { $0.key < $1.key }) where now - join.since >= holdLimit {
            held[id] = nil
            refused.append(id)
        }
        return refused
    }

    /// The call ended: pending joins, open introductions and held joins go (used tokens and what
    /// is owed stay until they expire or their friends leave).
    mutating func callEnded() {
        pendingJoins = [:]
        byToken = [:]
        held = [:]
    }

    /// Forgets everything.
    mutating func removeAll() { self = RoomIntroductions() }
}

// MARK: - The state machine

extension RoomIntroductions {
    /// What the room is when an input arrives. Thread rule: a value, read during the input only.
    /// Cost: a set of IDs; the closures look up the session's friends.
    struct Context {
        /// Our own friend ID.
        var ownId: String
        /// The friend IDs of the call's participants.
        var participants: Set<String>
        /// The local participant's mode, as sent in `join` and `joined`.
        var mode: String
        /// `RevueTimeouts.invitationTimeout`: how long an introduction, a join we sent and what we
        /// owe last.
        var invitationTimeout: Duration
        /// Whether a friend ID is one of our friends.
        var isFriend: (String) -> Bool
        /// Whether a friend can be reached now (its link is up).
        var isReachable: (String) -> Bool
        /// Whether an invitation with a friend is in progress.
        var isInvited: (String) -> Bool

        /// The participants in ID order, as a message's `members`. Cost: a sort.
        var members: [String] { participants.sorted() }
    }

    /// Where the machine's messages go, called while an input runs (the results decide what is
    /// owed). Thread rule: the room's (main actor). Cost: whatever sending costs.
    struct Effects {
        /// Sends a call-layer message to a friend; false when its stream cannot take it now.
        var send: (CallSignal, String) -> Bool
        /// Refuses a friend's call signalling (counted); with `answer`, tells them with a hang-up.
        var refuse: (String, Bool) -> Void
        /// A fresh introduction token.
        var newToken: () -> String
    }

    /// A join let in: the room sends `reply` (`joined`, before anything else for the leg) and
    /// then connects the friend in `mode`. Thread rule: a value. Cost: none.
    struct Admission: Equatable {
        var friend: String
        var reply: CallSignal
        var mode: String?
    }

    /// Vouches for `newcomer` to each other participant (or to `only`), then hands the newcomer
    /// the tokens. A member (or the newcomer) whose stream cannot take the message now is owed the
    /// introduction, from `owedSince` (default: `now`). Cost: two small messages per member.
    mutating func introduce(
        _ newcomer: String, to only: [String]? = nil, owedSince: [String: MonotonicTime] = [:], now: MonotonicTime,
        context: Context, effects: Effects
    ) {
        var tokens: [String: String] = [:]
        var owed: [String: MonotonicTime] = [:]
        for member in (only ?? context.members) where member != newcomer && context.participants.contains(member) {
            let token = effects.newToken()
            var s = CallSignal(op: CallSignal.Op.introduce, inv: token)
            s.text = newcomer
            // The member first, so the introduction is usually there before the newcomer's join.
            if effects.send(s, member) { tokens[member] = token } else { owed[member] = owedSince[member] ?? now }
        }
        if !tokens.isEmpty {
            var s = CallSignal(op: CallSignal.Op.intros)
            s.intros = tokens
            // The members' introductions are then never used; they expire.
            if !effects.send(s, newcomer) { for member in tokens.keys { owed[member] = owedSince[member] ?? now } }
        }
        owe(owed, introductionOf: newcomer)
    }

    /// The timer at `now`: joins we sent that were not answered within the invitation timeout and
    /// expired introductions go; a held join whose introduction did not come within `holdLimit`
    /// is refused; owed introductions and joins go out to those that can be reached now.
    mutating func tick(now: MonotonicTime, holdLimit: Duration, context: Context, effects: Effects) {
        for id in expire(now: now, joinTimeout: context.invitationTimeout, holdLimit: holdLimit) {
            effects.refuse(id, true)
        }
        retryOwedIntroductions(now: now, context: context, effects: effects)
        retryOwedJoins(now: now, context: context, effects: effects)
    }

    /// Owed introductions go out to the members that can be reached now, while the newcomer can
    /// be reached too; one is dropped once the newcomer or the member left, or after the
    /// invitation timeout.
    private mutating func retryOwedIntroductions(now: MonotonicTime, context: Context, effects: Effects) {
        guard owesIntroductions else { return }
        for newcomer in owedNewcomers {
            guard
                let (ready, owed) = takeReadyIntroductions(
                    of: newcomer, now: now, timeout: context.invitationTimeout, isParticipant: context.participants.contains,
                    isReachable: context.isReachable)
            else { continue }
            introduce(newcomer, to: ready, owedSince: owed, now: now, context: context, effects: effects)
        }
    }

    /// A `join` owed to a member we were introduced to goes out once it can be, until the
    /// invitation timeout from the introduction.
    private mutating func retryOwedJoins(now: MonotonicTime, context: Context, effects: Effects) {
        guard owesJoins else { return }
        for member in owedJoinMembers {
            guard let owed = owedJoin(to: member) else { continue }
            if context.participants.isEmpty || context.participants.contains(member)
                || now - owed.since > context.invitationTimeout
            {
                dropOwedJoin(to: member)
                continue
            }
            guard context.isReachable(member), !context.isInvited(member), !isJoining(member) else { continue }
            var s = CallSignal(op: CallSignal.Op.join, inv: owed.token)
            s.members = context.members
            s.mode = context.mode
            if effects.send(s, member) {
                joinSent(to: member, at: now)
                dropOwedJoin(to: member)
            }
        }
    }

    /// A participant `id` vouches for a newcomer (`introduce`); refused from anyone not in our
    /// call. A join held for it is let in or refused now.
    mutating func receiveIntroduction(
        _ s: CallSignal, from id: String, now: MonotonicTime, context: Context, effects: Effects
    ) -> Admission? {
        guard context.participants.contains(id), let token = s.inv, token.utf8.count <= 32,
            let newcomer = s.text, newcomer != context.ownId, newcomer != id
        else {
            effects.refuse(id, false)
            return nil
        }
        // A newcomer who is not our friend cannot reach us anyway (members need not all be friends).
        guard context.isFriend(newcomer) else { return nil }
        // Already with us: nothing to allow (and nothing left for a later rejoin to use).
        guard !context.participants.contains(newcomer) else { return nil }
        record(Introduction(newcomer: newcomer, introducer: id, deadline: now + context.invitationTimeout), token: token)
        guard let held = takeHeldJoin(from: newcomer, token: token) else { return nil }
        return receiveJoin(from: newcomer, token: token, mode: held.mode, now: now, context: context, effects: effects)
    }

    /// A participant handed us introductions to its other members (`intros`): a `join` to each we
    /// are not with, or owed to one we cannot reach now.
    mutating func joinIntroduced(_ tokens: [String: String], now: MonotonicTime, context: Context, effects: Effects) {
        guard !context.participants.isEmpty else { return }
        for (member, token) in tokens.sorted(by: { $0.key < $1.key })
        where member != context.ownId && !context.participants.contains(member) && !context.isInvited(member)
            && !isJoining(member)
        {
            // A member who is not our friend cannot be joined (members need not all be friends).
            guard context.isFriend(member) else { continue }
            var s = CallSignal(op: CallSignal.Op.join, inv: token)
            s.members = context.members
            s.mode = context.mode
            if context.isReachable(member), effects.send(s, member) {
                joinSent(to: member, at: now)
            } else {
                oweJoin(to: member, token: token, since: now)
            }
        }
    }

    /// A friend asks to join our call with an introduction token: let in (the admission), held
    /// until its introduction comes, or refused.
    mutating func receiveJoin(
        from id: String, token: String?, mode: String?, now: MonotonicTime, context: Context, effects: Effects
    ) -> Admission? {
        if !context.participants.contains(id) {
            guard !context.isInvited(id), let token, !context.participants.isEmpty else {
                effects.refuse(id, true)
                return nil
            }
            guard let intro = self[token] else {
                if wasUsed(token) {
                    effects.refuse(id, true)
                    return nil
                }
                // Its introduction may still be on its way from the introducer: wait for it. One
                // per friend: a join held before is refused.
                if holdsJoin(from: id) { effects.refuse(id, false) }
                hold(HeldJoin(token: token, mode: mode, since: now), from: id)
                return nil
            }
            guard intro.newcomer == id, intro.deadline > now, context.participants.contains(intro.introducer) else {
                effects.refuse(id, true)
                return nil
            }
            use(token)
        } else if let token, self[token]?.newcomer == id {
            use(token)
        }
        endJoin(with: id)
        dropHeldJoin(from: id)
        var reply = CallSignal(op: CallSignal.Op.joined)
        reply.members = context.participants.filter { $0 != id }.sorted()
        reply.mode = context.mode
        return Admission(friend: id, reply: reply, mode: mode)
    }
}
