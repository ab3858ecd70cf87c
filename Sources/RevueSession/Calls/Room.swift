internal import MediaCore

// The call: who is in it, their tracks,
// and the events of both delegate layers. One Room per Revue instance; `Room.shared` is the one of
// `Revue.shared`. Calls are meshes: every pair of participants is a pair of friends with its own
// encrypted channel, over which the call layer's reserved messages travel (docs/session.md, "Calls").
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Options the local participant joins a call with.
public struct RoomOptions: Sendable, Hashable {
    /// The mode you join in.
    public var mode: ParticipantMode = .sendAndRecv
    /// Whether your microphone track is published when you join in `sendAndRecv` (or on your first
    /// switch to `sendAndRecv` when you joined without media).
    public var micEnabled = true
    /// Whether your camera track is published likewise.
    public var cameraEnabled = true
    /// Width your camera track is encoded at (VP8), in pixels; frames of another size are scaled.
    public var videoWidth = 640
    /// Height your camera track is encoded at, in pixels.
    public var videoHeight = 360
    /// The SFU the call's media goes through (nil: peer to peer, a mesh). Every participant of a
    /// call sets the same one; it is read when the call starts.
    public var sfu: SFUServer?

    /// The defaults: send and receive, microphone and camera on.
    public init() {}
}

/// The call you are in: remote participants keyed by friend ID, yourself, the active speakers.
/// Main actor. `Room.shared` belongs to `Revue.shared`; `Revue.room` to any instance.
@MainActor
public final class Room {
    /// The room of `Revue.shared`.
    public static var shared: Room { Revue.shared.room }

    /// Delegates receiving every call event; weak references; `Revue.destroy()` empties it.
    public let delegates = DelegateList<any RoomDelegate>()
    /// The friends in the call, by friend ID (in a room joined by link: its participants, by
    /// `link-` and 16 hex digits of their key).
    public internal(set) var remoteParticipants: [String: RemoteParticipant] = [:]
    /// You.
    public let localParticipant: LocalParticipant
    /// Who is speaking now, loudest first.
    public internal(set) var activeSpeakers: [Participant] = []
    /// How you join the next call (mode, initial microphone and camera).
    public var options = RoomOptions() {
        didSet { if !joined { localParticipant.mode = options.mode } }
    }

    unowned let revue: Revue

    /// Invitations in progress and the invitation each participant connected through: the state
    /// machine the room feeds invitation inputs to and whose outputs it performs.
    var invitations = RoomInvitations()
    /// Introductions received, used, owed and held, and the joins we sent.
    var introductions = RoomIntroductions()
    /// Our epoch and each friend's, who was greeted, and unknown calls answered.
    var friendRuns = RoomFriendRuns()
    /// Publications kept per remote participant (an honest peer has two: audio and video); a
    /// `publish` past this is refused and counted in `RevueCounters.callSignalsRefused`.
    static let maxRemotePublications = 16
    /// Longest track ID and track name accepted in a `publish`, in UTF-8 bytes (ours are "audio",
    /// "video", "microphone", "camera"); longer ones are refused and counted likewise.
    static let maxTrackIdLength = 64
    static let maxTrackNameLength = 128
    /// Time without a packet on a subscribed, unmuted track after which a participant's
    /// connection quality is `.poor`.
    static let mediaStarvedAfter = Duration.seconds(2)
    /// How long a new call leg waits for its ICE agent to find a working pair before the call
    /// reports `CallError.mediaSetupFailed` for that participant (once; the agent keeps trying).
    static let mediaPathTimeout = Duration.seconds(5)
    /// How long a `join` waits for its introduction.
    static let introductionWait = Duration.seconds(3)
    /// What you want published while you send (`setMicrophone`/`setCamera`, remembered across modes).
    var wantPublished: [TrackKind: Bool] = [:]
    /// Whether each track was muted, so a track republished after a mode round trip comes back
    /// muted if it was (cleared by `setMicrophone`/`setCamera` and when a call starts).
    var wantMuted: [TrackKind: Bool] = [:]
    /// Whether the local participant is in a call (joined with its first participant).
    var joined = false
    /// Media of each call leg by friend ID, and of each local track.
    var legs: [String: MediaLeg] = [:]
    var localMedia: [TrackKind: LocalMedia] = [:]
    /// The SFU the current call uses, its media (instead of `legs` and `localMedia`), and early
    /// SFU announcements.
    var sfuLeg = RoomSFULeg()
    /// The room joined or hosted by link, if this call is one (`Room+Link.swift`).
    var linkLeg: RoomLinkLeg?
    /// SSRCs used by our send streams and receive pipelines while the current legs exist
    /// (`freshSSRC`).
    var usedSSRCs: Set<UInt32> = []
    /// When track statistics were last posted (`.zero`: the clock's start, before any tick).
    var lastStatistics = MonotonicTime.zero
    /// Media legs on or off, a media path and a forced publication failure (tests and fuzzing).
    package var environment = RoomEnvironment()

    init(revue: Revue) {
        self.revue = revue
        localParticipant = LocalParticipant(identity: "", room: nil)
        localParticipant.room = self
    }

    /// Whether you are in a call with at least one friend.
    public var isConnected: Bool { !remoteParticipants.isEmpty }

    /// Hangs up with every participant. Each side receives `participantDidDisconnect`.
    @MainActor
    public func disconnectAll() {
        for p in remoteParticipants.values.sorted(by: { $0.identity < $1.identity }) {
            hangUp(p, reason: .localHangUp, notify: true)
        }
    }

    /// Changes your own mode: to
    /// `signallingOnly`/`recvOnly` stops publishing (microphone and camera off, remembered); back to
    /// `sendAndRecv` publishes again what was on before, or, the first time after joining without
    /// media, what `options` asks for. Every participant, you included, receives `didUpdateMode`.
    /// Throws `.alreadyInRequestedState` when you are in that mode already.
    public func changeMode(_ mode: ParticipantMode) async throws(RoomError) {
        guard revue.core != nil else { throw .notInitialized }
        let old = localParticipant.mode
        guard mode != old else { throw .alreadyInRequestedState }
        localParticipant.mode = mode
        if !joined { options.mode = mode }
        if joined {
            // The mode first, so participants know what we receive before our subscriptions change.
            var s = CallSignal(op: CallSignal.Op.mode)
            s.mode = mode.rawValue
            for id in remoteParticipants.keys { send(s, to: id) }
            applyPublishing()
            if mode.receives != old.receives {
                for p in remoteParticipants.values { for pub in p.remoteTrackPublications { updateSubscription(pub) } }
            }
        }
        let local = localParticipant
        post(
            local, room: { $1.room($0, participant: local, didUpdateMode: mode) },
            participant: { $0.participant(local, didUpdateMode: mode) })
    }

    // MARK: - Plumbing

    var core: SessionCore? { revue.core }

    /// The session's clock and timers (the real ones once the session is gone).
    var scheduler: any TaskScheduler { core?.scheduler ?? DispatchTaskScheduler.main }
    var now: MonotonicTime { scheduler.now }

    /// Sends a call-layer message to a friend on the encrypted reliable stream; false when offline.
    /// With `wanted`, a retransmission (to a friend that restarted before acknowledging) carries
    /// nothing once `wanted` answers false for the room: an answered invitation must not ring again.
    @discardableResult
    func send(_ signal: CallSignal, to friendId: String, while wanted: ((Room) -> Bool)? = nil) -> Bool {
        let stillWanted = wanted.map { wanted in { [weak self] in self.map(wanted) ?? false } }
        return core?.sendReserved(friendId: friendId, text: signal.json, stillWanted: stillWanted) ?? false
    }

    /// Sends an invitation that is withdrawn from retransmission once it was answered, cancelled
    /// or timed out.
    func sendInvite(_ signal: CallSignal, to friendId: String) -> Bool {
        let inv = signal.inv
        return send(signal, to: friendId) { room in
            room.invitations.isOutgoing(friendId, inv: inv)
        }
    }

    /// Queues an event for the room delegates and the participant's delegates, in order with every
    /// other session event.
    func post(
        _ p: Participant?, room roomEvent: ((Room, any RoomDelegate) -> Void)?,
        participant participantEvent: ((any ParticipantDelegate) -> Void)?
    ) {
        core?.schedule(
            .action { [weak self, weak p] in
                guard let self else { return }
                if let participantEvent, let p { for d in p.delegates.all { participantEvent(d) } }
                if let roomEvent { for d in self.delegates.all { roomEvent(self, d) } }
            })
    }

    /// Queues a RevueDelegate event.
    func emitRevue(_ e: @escaping (Revue, any RevueDelegate) -> Void) { core?.emit(e) }

    /// Connects the room to a freshly initialized session.
    func attach(_ core: SessionCore) {
        localParticipant.identity = core.ownId
        friendRuns.begin(epoch: Self.randomId())
        refreshLocalProfile(core)
        localParticipant.mode = options.mode
        core.reservedMessageHandler = { [weak self] id, body in
            self?.receiveReserved(body, from: id) ?? SessionCore.isReserved(body)
        }
        core.friendWillBeDeleted = { [weak self] id in self?.endForDeletion(id) }
        core.tickHook = { [weak self] now in self?.tick(now: now) }
        core.friendPathsChanged = { [weak self] id, paths in self?.pathsChanged(id, paths) }
        core.linkRouteChanged = { [weak self] id in self?.syncMediaPath(id) }
        core.profileObserver = { [weak self] id, field in self?.profileChanged(id, field) }
    }

    /// Ends everything before the session goes away: friends are told when `polite`.
    func detach(polite: Bool) {
        if polite {
            perform(invitations.farewells())
            for id in remoteParticipants.keys { send(CallSignal(op: CallSignal.Op.hangup), to: id) }
        }
        for p in remoteParticipants.values {
            p.disconnectReason = .destroyed
            p.delegates.removeAll()
        }
        forgetCallState()
        delegates.removeAll()
        localParticipant.delegates.removeAll()
    }

    func refreshLocalProfile(_ core: SessionCore) {
        localParticipant.name = core.profile.name.isEmpty ? nil : core.profile.name
        localParticipant.statusMessage = core.profile.statusMessage.isEmpty ? nil : core.profile.statusMessage
        localParticipant.status = UserStatus(rawValue: core.profile.status) ?? .none
    }

    /// A 64-bit random identifier in hex.
    static func randomId() -> String {
        let hex = String(UInt64(RandomBytes.uint32()) << 32 | UInt64(RandomBytes.uint32()), radix: 16, uppercase: true)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

extension Revue {
    /// An app's message timeout in seconds, clamped to 5...30 s (NaN gives 5 s).
    static func clampTimeout(_ t: Double) -> Duration { .seconds(min(30, max(5, t))) }
}

extension Room {
    /// Stops all media and forgets every call, invitation, introduction and publication, without
    /// telling anyone or raising events (the caller did what had to be said). Main actor.
    func forgetCallState() {
        stopAllMedia()
        remoteParticipants = [:]
        invitations.removeAll()
        sfuLeg.forgetEarly()
        linkRoomEnded()
        introductions.removeAll()
        friendRuns.forgetFriends()
        localParticipant.trackPublications = [:]
        activeSpeakers = []
        joined = false
        wantPublished = [:]
        wantMuted = [:]
    }
}
