internal import MediaCore

/// Someone in the call: you (`LocalParticipant`) or a friend (`RemoteParticipant`). Main actor.
/// Name, status message and status follow the friend's (yours for the local participant).
@MainActor
public class Participant {
    /// The friend ID (your own `revueId` for the local participant).
    public internal(set) var identity: String
    /// The participant's name; nil when they have none.
    public internal(set) var name: String?
    /// The participant's status message; nil when they have none.
    public internal(set) var statusMessage: String?
    /// The participant's status.
    public internal(set) var status: UserStatus = .none
    /// How the participant takes part in the call.
    public internal(set) var mode: ParticipantMode = .sendAndRecv
    /// Whether the speaking detector says the participant is talking now.
    public internal(set) var isSpeaking = false
    /// The participant's last audio level, 0 (silence) ... 1 (full scale).
    public internal(set) var audioLevel: Float = 0
    /// How well media reaches the participant.
    public internal(set) var connectionQuality: ConnectionQuality = .unknown
    /// The participant's publications by track ID.
    public internal(set) var trackPublications: [String: TrackPublication] = [:]
    /// Delegates following this participant only; weak references.
    public let delegates = DelegateList<any ParticipantDelegate>()

    weak var room: Room?

    init(identity: String, room: Room?) {
        self.identity = identity
        self.room = room
    }

    /// The audio publications (at most one in this SDK).
    public var audioTracks: [TrackPublication] { trackPublications.values.filter { $0.kind == .audio } }
    /// The video publications (at most one in this SDK).
    public var videoTracks: [TrackPublication] { trackPublications.values.filter { $0.kind == .video } }
}

/// A friend in the call; `identity` is the friend ID (in a room joined by link, `link-` and 16 hex
/// digits naming the participant's key, and `name` the name it chose). Main actor.
@MainActor
public final class RemoteParticipant: Participant {
    /// Why the participant left; nil while connected.
    public internal(set) var disconnectReason: DisconnectReason?
    /// The friend connection (the same value as `FriendManager.getFriendPaths(friendId:)`).
    public internal(set) var paths = FriendConnectionPaths.offline
    /// When the friend connection was lost during the call (nil while a path works).
    var offlineSince: MonotonicTime?
    /// Whether it published audio before in this call (a second audio stream restarts the leg's
    /// receive pipeline, `Room.remoteAudioRepublished`).
    var audioPublished = false

    /// The participant's publications as remote publications.
    public var remoteTrackPublications: [RemoteTrackPublication] {
        trackPublications.values.compactMap { $0 as? RemoteTrackPublication }.sorted { $0.sid < $1.sid }
    }

    /// Hangs up with this participant (you stay in the call with the others). Both sides receive
    /// `participantDidDisconnect`; does nothing when the participant already left. In a room joined
    /// by link, the host removes the participant (`Room.removeLinkParticipant(_:)`); anyone else
    /// cannot leave one participant alone and this does nothing (`Room.disconnectAll()` leaves).
    @MainActor
    public func disconnect() {
        room?.disconnectParticipant(self)
    }

    /// Asks the participant to mute (`true`) or unmute (`false`) their microphone; they receive
    /// `didReceiveMuteRequest` and decide. False when the participant is not reachable.
    @discardableResult
    public func sendMuteRequest(isMuted: Bool) -> Bool {
        var s = CallSignal(op: CallSignal.Op.muteRequest)
        s.muted = isMuted
        return room?.send(s, to: identity) ?? false
    }
}

/// You, in the call. Publishes your microphone and camera tracks, sends in-call messages. Main actor.
@MainActor
public final class LocalParticipant: Participant {
    /// Whether your microphone track is published and not muted.
    public var isMicrophoneEnabled: Bool { publication(.audio).map { !$0.isMuted } ?? false }
    /// Whether your camera track is published and not muted.
    public var isCameraEnabled: Bool { publication(.video).map { !$0.isMuted } ?? false }

    /// The local publications.
    public var localTrackPublications: [LocalTrackPublication] {
        trackPublications.values.compactMap { $0 as? LocalTrackPublication }.sorted { $0.sid < $1.sid }
    }

    func publication(_ kind: TrackKind) -> LocalTrackPublication? {
        trackPublications.values.first { $0.kind == kind } as? LocalTrackPublication
    }

    /// Publishes (`true`) or unpublishes (`false`) your microphone track. Participants receive
    /// `didSubscribeTrack`/`didUnsubscribeTrack`; you receive `didPublishTrack`/`didUnpublishTrack`.
    /// Does nothing in `signallingOnly`/`recvOnly` mode except remember the wish for the next
    /// switch back to `sendAndRecv`.
    public func setMicrophone(enabled: Bool) { room?.setPublished(.audio, enabled) }

    /// Publishes or unpublishes your camera track (as `setMicrophone(enabled:)`).
    public func setCamera(enabled: Bool) { room?.setPublished(.video, enabled) }

    /// Sends an in-call message to every remote participant (or to `participants`), to all of them
    /// at once, and waits until each device confirmed it or failed: the result has, per friend ID,
    /// the message ID or that recipient's `FriendMessageError` (a slow or offline recipient holds
    /// up no other). `timeout` is clamped to 5...30 s like friend messages. Throws only when
    /// nothing was sent: `.messageTooLong`, `.friendNotFound` (not initialized).
    @discardableResult
    public func sendMessage(
        _ message: String, to participants: [RemoteParticipant]? = nil,
        timeout: Double = 10
    ) async throws(FriendMessageError) -> [String: Result<UInt32, FriendMessageError>] {
        guard let room else { throw .friendNotFound }
        return try await room.sendChat(
            message, to: participants ?? Array(room.remoteParticipants.values), timeout: Revue.clampTimeout(timeout))
    }
}
