// The bookkeeping of introductions and joins (docs/session.md "Introductions"): the tokens our
// participants vouched for newcomers with, the tokens already used, joins waiting for their
// introduction, introductions and joins we owe friends we could not reach, and the joins we sent.
// `Room+Introductions.swift` decides and sends; this type only holds the state and its bounds.
internal import MediaCore

/// What a room remembers about introductions and joins. A value owned by `Room`; it sends nothing
/// and raises no events. Thread rule: main actor (the room's). Cost: every operation is a
/// dictionary or array update over at most `capacity` entries (used tokens: `usedMemory`).
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
