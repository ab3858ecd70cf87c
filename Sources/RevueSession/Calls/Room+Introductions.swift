// Introductions: how a newcomer joins the members of a call it was not invited by. The member
// who connected the newcomer vouches for it to each of its other participants, on its own
// encrypted channel to them (`introduce`: a fresh random token bound to the newcomer's friend ID),
// and hands the newcomer the tokens (`intros`). The newcomer sends each member a `join` with its
// token; a member connects it only with a valid introduction: made by one of its participants,
// for this friend, not expired, not used before. docs/session.md "Introductions". The decisions
// are `RoomIntroductions`'; the room gives it its context and sends for it.

internal import MediaCore

extension Room {
    /// What `introductions` is told about the room with each input: its participants, mode,
    /// timeout, and the session's friends and invitations. Main actor. Cost: a set of the
    /// participants' IDs.
    func introductionContext(_ core: SessionCore) -> RoomIntroductions.Context {
        let invitations = self.invitations
        return RoomIntroductions.Context(
            ownId: core.ownId, participants: Set(remoteParticipants.keys), mode: localParticipant.mode.rawValue,
            invitationTimeout: invitationTimeout, isFriend: { core.friends[$0] != nil },
            isReachable: { core.friends[$0]?.isConnected == true }, isInvited: { invitations[$0] != nil })
    }

    /// How `introductions` sends, refuses and draws tokens: through this room, at once. Main actor.
    /// Cost: three closures.
    var introductionEffects: RoomIntroductions.Effects {
        RoomIntroductions.Effects(
            send: { [unowned self] s, id in send(s, to: id) },
            refuse: { [unowned self] id, answer in refuse(id, answer: answer) },
            newToken: { Self.randomId() })
    }

    /// Vouches for a participant that just connected to each of our other participants
    /// (`RoomIntroductions.introduce`; what cannot go now is owed and sent by the tick).
    func introduce(_ newcomer: String) {
        guard let core else { return }
        introductions.introduce(newcomer, now: now, context: introductionContext(core), effects: introductionEffects)
    }

    /// A participant vouches for a newcomer. Refused (and counted) from anyone not in our call.
    func receiveIntroduction(_ s: CallSignal, from id: String) {
        guard let core else { return refuse(id, answer: false) }
        admit(
            introductions.receiveIntroduction(
                s, from: id, now: now, context: introductionContext(core), effects: introductionEffects))
    }

    /// A participant handed us introductions to its other members: join each we are not with.
    func joinIntroduced(_ tokens: [String: String]) {
        guard let core else { return }
        introductions.joinIntroduced(tokens, now: now, context: introductionContext(core), effects: introductionEffects)
    }

    /// A friend asks to join our call with an introduction token.
    func receiveJoin(from id: String, token: String?, mode: String?) {
        guard let core else { return }
        admit(
            introductions.receiveJoin(
                from: id, token: token, mode: mode, now: now, context: introductionContext(core), effects: introductionEffects))
    }

    /// Lets in a join: `joined` leaves before our track announcements and media keys (the joiner
    /// adds us as a participant when `joined` arrives and drops track and media messages from
    /// friends who are not participants, so the other order left that leg without media), then
    /// the friend connects. Main actor. Cost: one message and a participant.
    func admit(_ admission: RoomIntroductions.Admission?) {
        guard let admission else { return }
        send(admission.reply, to: admission.friend)
        connectParticipant(admission.friend, inv: nil, mode: admission.mode)
    }

    /// Counts refused call signalling; `answer` tells the friend with a hang-up.
    func refuse(_ id: String, answer: Bool) {
        core?.counters.callSignalsRefused += 1
        if answer { send(CallSignal(op: CallSignal.Op.hangup), to: id) }
    }

    /// A participant left: its introductions, and any for it, are void.
    func forgetIntroductions(of id: String) { introductions.forget(participant: id) }

    /// Every 50 ms: joins we sent that were not answered within `invitationTimeout` and expired
    /// introductions go; a held join whose introduction never came is refused; what we owe goes
    /// out to those that can be reached.
    func tickIntroductions(now: MonotonicTime) {
        guard let core else {
            _ = introductions.expire(now: now, joinTimeout: invitationTimeout, holdLimit: Self.introductionWait)
            return
        }
        introductions.tick(
            now: now, holdLimit: Self.introductionWait, context: introductionContext(core), effects: introductionEffects)
    }
}
