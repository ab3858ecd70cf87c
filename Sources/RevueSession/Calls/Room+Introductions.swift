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
        if !owed.isEmpty { owedIntroductions[newcomer, default: [:]].merge(owed) { old, _ in old } }
    }

    /// Every 50 ms: introductions owed (see `introduce`) go out to the members that can be reached
    /// now, while the newcomer can be reached too; an owed introduction is dropped once the
    /// newcomer or the member left the call, or after `invitationTimeout`.
    func retryOwedIntroductions(now: MonotonicTime) {
        guard let core, !owedIntroductions.isEmpty else { return }
        for newcomer in owedIntroductions.keys.sorted() {
            let owed = (owedIntroductions[newcomer] ?? [:]).filter {
                remoteParticipants[newcomer] != nil && remoteParticipants[$0.key] != nil && now - $0.value <= invitationTimeout
            }
            owedIntroductions[newcomer] = owed.isEmpty ? nil : owed
            guard core.friends[newcomer]?.isConnected == true else { continue }
            let ready = owed.keys.filter { core.friends[$0]?.isConnected == true }.sorted()
            guard !ready.isEmpty else { continue }
            for member in ready { owedIntroductions[newcomer]?[member] = nil }
            if owedIntroductions[newcomer]?.isEmpty == true { owedIntroductions[newcomer] = nil }
            introduce(newcomer, to: ready, owedSince: owed)
        }
    }

    /// Every 50 ms: a `join` we owe a member we were introduced to (it could not be reached when
    /// the introduction came) goes out once it can be, until the introduction's `invitationTimeout`.
    func retryOwedJoins(now: MonotonicTime) {
        guard let core, !owedJoins.isEmpty else { return }
        for member in owedJoins.keys.sorted() {
            guard let owed = owedJoins[member] else { continue }
            if remoteParticipants.isEmpty || remoteParticipants[member] != nil || now - owed.since > invitationTimeout {
                owedJoins[member] = nil
                continue
            }
            guard core.friends[member]?.isConnected == true, invitations[member] == nil, pendingJoins[member] == nil else {
                continue
            }
            var s = CallSignal(op: CallSignal.Op.join, inv: owed.token)
            s.members = remoteParticipants.keys.sorted()
            s.mode = localParticipant.mode.rawValue
            if send(s, to: member) {
                pendingJoins[member] = now
                owedJoins[member] = nil
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
        if introductions.count >= Self.maxIntroductions,
            let oldest = introductions.min(by: { $0.value.deadline < $1.value.deadline })?.key
        {
            introductions[oldest] = nil
        }
        introductions[token] = Introduction(newcomer: newcomer, introducer: id, deadline: self.now + invitationTimeout)
        if let held = heldJoins[newcomer], held.token == token {
            heldJoins[newcomer] = nil
            receiveJoin(from: newcomer, token: token, mode: held.mode)
        }
    }

    /// A participant handed us introductions to its other members: join each we are not with.
    func joinIntroduced(_ tokens: [String: String]) {
        guard let core, !remoteParticipants.isEmpty else { return }
        let now = self.now
        for (member, token) in tokens.sorted(by: { $0.key < $1.key })
        where member != core.ownId && remoteParticipants[member] == nil && invitations[member] == nil
            && pendingJoins[member] == nil
        {
            // A member who is not our friend cannot be joined (members need not all be friends);
            // one we cannot reach now is owed the join (`retryOwedJoins`).
            guard let f = core.friends[member] else { continue }
            var s = CallSignal(op: CallSignal.Op.join, inv: token)
            s.members = remoteParticipants.keys.sorted()
            s.mode = localParticipant.mode.rawValue
            if f.isConnected, send(s, to: member) {
                pendingJoins[member] = now
            } else if owedJoins[member] == nil, owedJoins.count < Self.maxIntroductions {
                owedJoins[member] = (token, now)
            }
        }
    }

    /// A friend asks to join our call with an introduction token.
    func receiveJoin(from id: String, token: String?, mode: String?) {
        if remoteParticipants[id] == nil {
            guard invitations[id] == nil, let token, !remoteParticipants.isEmpty else { return refuse(id, answer: true) }
            guard let intro = introductions[token] else {
                if usedIntroductions.contains(token) { return refuse(id, answer: true) }
                // Its introduction may still be on its way from the introducer: wait for it. One
                // per friend: a join held before is refused.
                if heldJoins[id] != nil { refuse(id, answer: false) }
                heldJoins[id] = HeldJoin(token: token, mode: mode, since: self.now)
                return
            }
            guard intro.newcomer == id, intro.deadline > self.now, remoteParticipants[intro.introducer] != nil else {
                return refuse(id, answer: true)
            }
            useIntroduction(token)
        } else if let token, introductions[token]?.newcomer == id {
            useIntroduction(token)
        }
        pendingJoins[id] = nil
        heldJoins[id] = nil
        // `joined` leaves before our track announcements and media keys: the joiner adds us
        // as a participant when `joined` arrives and drops track and media messages from
        // friends who are not participants, so the other order left that leg without media.
        var reply = CallSignal(op: CallSignal.Op.joined)
        reply.members = remoteParticipants.keys.filter { $0 != id }.sorted()
        reply.mode = localParticipant.mode.rawValue
        send(reply, to: id)
        connectParticipant(id, inv: nil, mode: mode)
    }

    func useIntroduction(_ token: String) {
        introductions[token] = nil
        usedIntroductions.append(token)
        if usedIntroductions.count > 128 { usedIntroductions.removeFirst(usedIntroductions.count - 128) }
    }

    /// Counts refused call signalling; `answer` tells the friend with a hang-up.
    func refuse(_ id: String, answer: Bool) {
        core?.counters.callSignalsRefused += 1
        if answer { send(CallSignal(op: CallSignal.Op.hangup), to: id) }
    }

    /// A participant left: its introductions, and any for it, are void.
    func forgetIntroductions(of id: String) {
        introductions = introductions.filter { $0.value.introducer != id && $0.value.newcomer != id }
        owedIntroductions[id] = nil
        for newcomer in owedIntroductions.keys { owedIntroductions[newcomer]?[id] = nil }
        owedJoins[id] = nil
    }

    /// Every 50 ms: expired introductions go; a held join whose introduction never came is refused.
    func tickIntroductions(now: MonotonicTime) {
        if introductions.contains(where: { $0.value.deadline <= now }) {
            introductions = introductions.filter { $0.value.deadline > now }
        }
        for (id, held) in heldJoins.sorted(by: { $0.key < $1.key }) where now - held.since >= Self.introductionWait {
            heldJoins[id] = nil
            refuse(id, answer: true)
        }
        retryOwedIntroductions(now: now)
        retryOwedJoins(now: now)
    }
}
