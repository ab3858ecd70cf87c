// Which run of each friend the room talks to: our own epoch (random per `initialize`, sent in
// `hello`), the last epoch each friend sent, the friends greeted since they came online, and when
// a friend was last told that a call it signals does not exist here. A friend's new epoch means
// its process restarted, so a call leg with it belongs to a run that is gone.
internal import MediaCore

/// The room's view of its friends' runs, and the decisions over it: whom to greet, which `hello`
/// ends a friend's earlier run, which unknown call to answer. A value owned by `Room`; it sends
/// nothing (the room sends what it decides and reports back). Thread rule: main actor (the
/// room's). Cost: one dictionary or set update per operation.
struct RoomFriendRuns {
    /// How often at most a friend signalling an unknown call is answered.
    static let unknownCallAnswerGap = Duration.seconds(1)

    /// This run's epoch (64 random bits in hex; empty until the room attaches to a session).
    private(set) var epoch = ""
    /// The last epoch heard from each friend.
    private var friendEpochs: [String: String] = [:]
    /// Friends greeted (sent our `hello`) since they last came online.
    private var greeted: Set<String> = []
    /// When an unknown call was last answered, per friend.
    private var unknownCallAnswered: [String: MonotonicTime] = [:]

    /// Friends whose epoch is known, and friends answered for an unknown call lately, for
    /// `Room.stateCounts`.
    var counts: (epochs: Int, unknownCallAnswered: Int) { (friendEpochs.count, unknownCallAnswered.count) }

    /// A new run of ours begins with `epoch`.
    mutating func begin(epoch: String) { self.epoch = epoch }

    /// `id` sent `epoch` in its `hello`; whether that ends an earlier run of it (one was heard,
    /// and it differs).
    mutating func heard(_ epoch: String, from id: String) -> Bool {
        let old = friendEpochs.updateValue(epoch, forKey: id)
        return old != nil && old != epoch
    }

    /// Whether `id` was greeted since it came online.
    func wasGreeted(_ id: String) -> Bool { greeted.contains(id) }

    /// `id` got our `hello`.
    mutating func greeted(_ id: String) { greeted.insert(id) }

    /// `id` went offline: it is greeted again when it comes back.
    mutating func wentOffline(_ id: String) { greeted.remove(id) }

    /// Whether an unknown call of `id` may be answered at `now` (none answered within
    /// `unknownCallAnswerGap`).
    func mayAnswerUnknownCall(of id: String, now: MonotonicTime) -> Bool {
        guard let last = unknownCallAnswered[id] else { return true }
        return now - last >= Self.unknownCallAnswerGap
    }

    /// An unknown call of `id` was answered at `now`.
    mutating func answeredUnknownCall(of id: String, at now: MonotonicTime) { unknownCallAnswered[id] = now }

    /// `id` is no longer a friend.
    mutating func forget(_ id: String) {
        friendEpochs[id] = nil
        greeted.remove(id)
        unknownCallAnswered[id] = nil
    }

    // MARK: Decisions

    /// The `hello` to send `id` now, carrying our epoch (nil: greeted since it came online); once
    /// it reached the stream, `greeted(id)`.
    func greeting(for id: String) -> CallSignal? {
        guard !greeted.contains(id) else { return nil }
        var hello = CallSignal(op: CallSignal.Op.hello)
        hello.epoch = epoch
        return hello
    }

    /// A `hello` from `id`: whether it tells of a new run of the friend (so a call leg or join
    /// with it belongs to a run that is gone). One without an epoch, or with an empty or longer
    /// than 32-byte one, is ignored.
    mutating func receiveHello(_ s: CallSignal, from id: String) -> Bool {
        guard let new = s.epoch, !new.isEmpty, new.utf8.count <= 32 else { return false }
        return heard(new, from: id)
    }

    /// Whether `s` from `id`, a friend the room has no call, join or invitation with, is answered
    /// with a hang-up at `now`: in-call signalling (tracks, media keys, chat, modes, mute requests,
    /// introductions handed over) is, at most once per `unknownCallAnswerGap`; once the hang-up
    /// reached the stream, `answeredUnknownCall`.
    func answersUnknownCall(_ s: CallSignal, from id: String, now: MonotonicTime) -> Bool {
        let inCall =
            s.type == "track" || s.type == "adr"
            || [CallSignal.Op.chat, CallSignal.Op.mode, CallSignal.Op.muteRequest, CallSignal.Op.intros].contains(s.op)
        return inCall && mayAnswerUnknownCall(of: id, now: now)
    }

    /// Forgets every friend's run (our epoch stays).
    mutating func forgetFriends() {
        greeted = []
        friendEpochs = [:]
        unknownCallAnswered = [:]
    }
}
