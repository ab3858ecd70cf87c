// Introductions: how a newcomer joins the members of a call it was not invited by. The member
// who connected the newcomer vouches for it to each of its other participants, on its own
// encrypted channel to them (`introduce`: a fresh random token bound to the newcomer's friend ID),
// and hands the newcomer the tokens (`intros`). The newcomer sends each member a `join` with its
// token; a member connects it only with a valid introduction: made by one of its participants,
// for this friend, not expired, not used before. docs/session.md "Introductions".

internal import MediaCore

extension Room {
    /// Vouches for a participant that just connected to each of our other participants.
    /// Cost: two small messages per other participant. A member (or the newcomer) whose stream
    /// cannot take the message now (offline inside the call's lost timeout, or a full stream) is
    /// owed the introduction: the tick sends it once both can be reached
    /// (`retryOwedIntroductions`), for `invitationTimeout` from `owedSince` (default: now).
    func introduce(_ newcomer: String, to only: [String]? = nil, owedSince: [String: MonotonicTime] = [:]) {
        let now = self.now
        var tokens: [String: String] = [:]
        var owed: [String: MonotonicTime] = [:]
        for member in (only ?? remoteParticipants.keys.sorted()) where member != newcomer && remoteParticipants[member] != nil {
            let token = Self.randomId()
            var s = CallSignal(op: CallSignal.Op.introduce, inv: token)
            s.text = newcomer
            // The member first, so the introduction is usually there before the newcomer's join.
            if send(s, to: member) { tokens[member] = token } else { owed[member] = owedSince[member] ?? now }
        }
        if !tokens.isEmpty {
            var s = CallSignal(op: CallSignal.Op.intros)
            s.intros = tokens
            // The members' introductions are then never used; they expire.
            if !send(s, to: newcomer) { for member in tokens.keys { owed[member] = owedSince[member] ?? now } }
        }
        introductions.owe(owed, introductionOf: newcomer)
    }

    /// Every 50 ms: introductions owed (see `introduce`) go out to the members that can be reached
    /// now, while the newcomer can be reached too; an owed introduction is dropped once the
    /// newcomer or the member left the call, or after `invitationTimeout`.
    func retryOwedIntroductions(now: MonotonicTime) {
        guard let core, introductions.owesIntroductions else { return }
        for newcomer in introductions.owedNewcomers {
            guard
                let (ready, owed) = introductions.takeReadyIntroductions(
                    of: newcomer, now: now, timeout: invitationTimeout, isParticipant: { remoteParticipants[$0] != nil },
                    isReachable: { core.friends[$0]?.isConnected == true })
            else { continue }
            introduce(newcomer, to: ready, owedSince: owed)
        }
    }

    /// Every 50 ms: a `join` we owe a member we were introduced to (it could not be reached when
    /// the introduction came) goes out once it can be, until the introduction's `invitationTimeout`.
    func retryOwedJoins(now: MonotonicTime) {
        guard let core, introductions.owesJoins else { return }
        for member in introductions.owedJoinMembers {
            guard let owed = introductions.owedJoin(to: member) else { continue }
            if remoteParticipants.isEmpty || remoteParticipants[member] != nil || now - owed.since > invitationTimeout {
                introductions.dropOwedJoin(to: member)
                continue
            }
            guard core.friends[member]?.isConnected == true, invitations[member] == nil, !introductions.isJoining(member) else {
                continue
            }
            var s = CallSignal(op: CallSignal.Op.join, inv: owed.token)
            s.members = remoteParticipants.keys.sorted()
            s.mode = localParticipant.mode.rawValue
            if send(s, to: member) {
                introductions.joinSent(to: member, at: now)
                introductions.dropOwedJoin(to: member)
            }
        }
    }

    /// A participant vouches for a newcomer. Refused (and counted) from anyone not in our call.
    func receiveIntroduction(_ s: CallSignal, from id: String) {
        guard let core, remoteParticipants[id] != nil, let token = s.inv, token.utf8.count <= 32,
            let newcomer = s.text, newcomer != core.ownId, newcomer != id
        else {
            return refuse(id, answer: false)
        }
        // A newcomer who is not our friend cannot reach us anyway (members need not all be friends).
        guard core.friends[newcomer] != nil else { return }
        // Already with us: nothing to allow (and nothing left for a later rejoin to use).
        guard remoteParticipants[newcomer] == nil else { return }
        introductions.record(
            RoomIntroductions.Introduction(newcomer: newcomer, introducer: id, deadline: self.now + invitationTimeout),
            token: token)
        if let held = introductions.takeHeldJoin(from: newcomer, token: token) {
            receiveJoin(from: newcomer, token: token, mode: held.mode)
        }
    }

    /// A participant handed us introductions to its other members: join each we are not with.
    func joinIntroduced(_ tokens: [String: String]) {
        guard let core, !remoteParticipants.isEmpty else { return }
        let now = self.now
        for (member, token) in tokens.sorted(by: { $0.key < $1.key })
        where member != core.ownId && remoteParticipants[member] == nil && invitations[member] == nil
            && !introductions.isJoining(member)
        {
            // A member who is not our friend cannot be joined (members need not all be friends);
            // one we cannot reach now is owed the join (`retryOwedJoins`).
            guard let f = core.friends[member] else { continue }
            var s = CallSignal(op: CallSignal.Op.join, inv: token)
            s.members = remoteParticipants.keys.sorted()
            s.mode = localParticipant.mode.rawValue
            if f.isConnected, send(s, to: member) {
                introductions.joinSent(to: member, at: now)
            } else {
                introductions.oweJoin(to: member, token: token, since: now)
            }
        }
    }

    /// A friend asks to join our call with an introduction token.
    func receiveJoin(from id: String, token: String?, mode: String?) {
        if remoteParticipants[id] == nil {
            guard invitations[id] == nil, let token, !remoteParticipants.isEmpty else { return refuse(id, answer: true) }
            guard let intro = introductions[token] else {
                if introductions.wasUsed(token) { return refuse(id, answer: true) }
                // Its introduction may still be on its way from the introducer: wait for it. One
                // per friend: a join held before is refused.
                if introductions.holdsJoin(from: id) { refuse(id, answer: false) }
                introductions.hold(RoomIntroductions.HeldJoin(token: token, mode: mode, since: self.now), from: id)
                return
            }
            guard intro.newcomer == id, intro.deadline > self.now, remoteParticipants[intro.introducer] != nil else {
                return refuse(id, answer: true)
            }
            introductions.use(token)
        } else if let token, introductions[token]?.newcomer == id {
            introductions.use(token)
        }
        introductions.endJoin(with: id)
        introductions.dropHeldJoin(from: id)
        // `joined` leaves before our track announcements and media keys: the joiner adds us
        // as a participant when `joined` arrives and drops track and media messages from
        // friends who are not participants, so the other order left that leg without media.
        var reply = CallSignal(op: CallSignal.Op.joined)
        reply.members = remoteParticipants.keys.filter { $0 != id }.sorted()
        reply.mode = localParticipant.mode.rawValue
        send(reply, to: id)
        connectParticipant(id, inv: nil, mode: mode)
    }

    /// Counts refused call signalling; `answer` tells the friend with a hang-up.
    func refuse(_ id: String, answer: Bool) {
        core?.counters.callSignalsRefused += 1
        if answer { send(CallSignal(op: CallSignal.Op.hangup), to: id) }
    }

    /// A participant left: its introductions, and any for it, are void.
    func forgetIntroductions(of id: String) { introductions.forget(participant: id) }

    /// Every 50 ms: joins we sent that were not answered within `invitationTimeout` and expired
    /// introductions go; a held join whose introduction never came is refused.
    func tickIntroductions(now: MonotonicTime) {
        for id in introductions.expire(now: now, joinTimeout: invitationTimeout, holdLimit: Self.introductionWait) {
            refuse(id, answer: true)
        }
        retryOwedIntroductions(now: now)
        retryOwedJoins(now: now)
    }
}
