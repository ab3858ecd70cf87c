/// Receives every event of a call: participants
/// joining and leaving, and every participant event, for all participants in one place. Main
/// actor; every method has an empty default. Add it with `room.delegates.add(delegate:)` (weak).
///
/// Order of the call events: `roomDidStartCall` comes before the first `participantDidConnect` of
/// a call; `room(_:callDidFailWithError:)` (when the call failed) and then `roomDidEndCall` come
/// after the last `participantDidDisconnect`.
@MainActor
public protocol RoomDelegate: AnyObject {
    /// Your call started: the first participant is about to be reported connected. Room only.
    func roomDidStartCall(_ room: Room)
    /// Your call ended: the last participant was reported disconnected. Not sent by `destroy()`,
    /// which empties the delegate lists. Room only.
    func roomDidEndCall(_ room: Room)
    /// Something in the call failed (see `CallError`); `.connectionLost` is followed by
    /// `roomDidEndCall`. Room only.
    func room(_ room: Room, callDidFailWithError error: CallError)
    /// A track you were publishing could not be set up: it is not published and no
    /// `didPublishTrack` follows. Room only.
    func room(_ room: Room, localParticipant: LocalParticipant, didFailToPublishTrack kind: TrackKind, error: TrackPublishError)
    /// A friend joined the call (an invitation was accepted, or a group member joined), or, in a
    /// room joined by link, a participant was let in. Room only.
    func room(_ room: Room, participantDidConnect participant: RemoteParticipant)
    /// A participant left the call; `participant.disconnectReason` says why.
    func room(_ room: Room, participantDidDisconnect participant: RemoteParticipant)
    /// The friend connection of a participant changed.
    func room(_ room: Room, participant: RemoteParticipant, didUpdatePaths paths: FriendConnectionPaths)
    /// A participant's connection quality changed (from loss and round-trip time).
    func room(_ room: Room, participant: Participant, didUpdateConnectionQuality quality: ConnectionQuality)
    /// A participant's name changed (also yours); nil when it was cleared.
    func room(_ room: Room, participant: Participant, didUpdateName name: String?)
    /// A participant's status message changed (also yours); nil when it was cleared.
    func room(_ room: Room, participant: Participant, didUpdateStatusMessage statusMessage: String?)
    /// A participant's status changed (also yours).
    func room(_ room: Room, participant: Participant, didUpdateStatus status: UserStatus)
    /// You published a track.
    func room(_ room: Room, localParticipant: LocalParticipant, didPublishTrack publication: LocalTrackPublication)
    /// You unpublished a track.
    func room(_ room: Room, localParticipant: LocalParticipant, didUnpublishTrack publication: LocalTrackPublication)
    /// You started receiving a participant's track.
    func room(_ room: Room, participant: RemoteParticipant, didSubscribeTrack publication: RemoteTrackPublication)
    /// You stopped receiving a participant's track.
    func room(_ room: Room, participant: RemoteParticipant, didUnsubscribeTrack publication: RemoteTrackPublication)
    /// A participant's publication was muted or unmuted.
    func room(_ room: Room, participant: Participant, trackPublication: TrackPublication, didUpdateIsMuted isMuted: Bool)
    /// New statistics for a track (W3C webrtc-stats names).
    func room(
        _ room: Room, participant: Participant, trackPublication: TrackPublication,
        didUpdateStatistics statistics: TrackStatistics)
    /// A participant sent you an in-call message.
    func room(_ room: Room, participant: RemoteParticipant, didReceiveMessage message: String)
    /// A participant asks you to mute (`true`) or unmute (`false`) your microphone.
    func room(_ room: Room, participant: RemoteParticipant, didReceiveMuteRequest isMuted: Bool)
    /// Who is speaking now, loudest first (the same list as `room.activeSpeakers`). Room only.
    func room(_ room: Room, didUpdateSpeakingParticipants speakers: [Participant])
    /// A participant's mode changed (also yours, after `changeMode(_:)`).
    func room(_ room: Room, participant: Participant, didUpdateMode mode: ParticipantMode)
}

extension RoomDelegate {
    /// Does nothing unless the delegate implements it.
    public func roomDidStartCall(_ room: Room) {}
    /// Does nothing unless the delegate implements it.
    public func roomDidEndCall(_ room: Room) {}
    /// Does nothing unless the delegate implements it.
    public func room(_ room: Room, callDidFailWithError error: CallError) {}
    /// Does nothing unless the delegate implements it.
    public func room(
        _ room: Room, localParticipant: LocalParticipant, didFailToPublishTrack kind: TrackKind, error: TrackPublishError
    ) {}
    /// Does nothing unless the delegate implements it.
    public func room(_ room: Room, participantDidConnect participant: RemoteParticipant) {}
    /// Does nothing unless the delegate implements it.
    public func room(_ room: Room, participantDidDisconnect participant: RemoteParticipant) {}
    /// Does nothing unless the delegate implements it.
    public func room(_ room: Room, participant: RemoteParticipant, didUpdatePaths paths: FriendConnectionPaths) {}
    /// Does nothing unless the delegate implements it.
    public func room(_ room: Room, participant: Participant, didUpdateConnectionQuality quality: ConnectionQuality) {}
    /// Does nothing unless the delegate implements it.
    public func room(_ room: Room, participant: Participant, didUpdateName name: String?) {}
    /// Does nothing unless the delegate implements it.
    public func room(_ room: Room, participant: Participant, didUpdateStatusMessage statusMessage: String?) {}
    /// Does nothing unless the delegate implements it.
    public func room(_ room: Room, participant: Participant, didUpdateStatus status: UserStatus) {}
    /// Does nothing unless the delegate implements it.
    public func room(_ room: Room, localParticipant: LocalParticipant, didPublishTrack publication: LocalTrackPublication) {}
    /// Does nothing unless the delegate implements it.
    public func room(_ room: Room, localParticipant: LocalParticipant, didUnpublishTrack publication: LocalTrackPublication) {}
    /// Does nothing unless the delegate implements it.
    public func room(_ room: Room, participant: RemoteParticipant, didSubscribeTrack publication: RemoteTrackPublication) {}
    /// Does nothing unless the delegate implements it.
    public func room(_ room: Room, participant: RemoteParticipant, didUnsubscribeTrack publication: RemoteTrackPublication) {}
    /// Does nothing unless the delegate implements it.
    public func room(_ room: Room, participant: Participant, trackPublication: TrackPublication, didUpdateIsMuted isMuted: Bool) {
    }
    /// Does nothing unless the delegate implements it.
    public func room(
        _ room: Room, participant: Participant, trackPublication: TrackPublication,
        didUpdateStatistics statistics: TrackStatistics
    ) {}
    /// Does nothing unless the delegate implements it.
    public func room(_ room: Room, participant: RemoteParticipant, didReceiveMessage message: String) {}
    /// Does nothing unless the delegate implements it.
    public func room(_ room: Room, participant: RemoteParticipant, didReceiveMuteRequest isMuted: Bool) {}
    /// Does nothing unless the delegate implements it.
    public func room(_ room: Room, didUpdateSpeakingParticipants speakers: [Participant]) {}
    /// Does nothing unless the delegate implements it.
    public func room(_ room: Room, participant: Participant, didUpdateMode mode: ParticipantMode) {}
}

/// Receives the events of one participant, for example to drive
/// their video tile. The same events as `RoomDelegate` minus `participantDidConnect` and the
/// speakers list, plus `didUpdateIsSpeaking`. Main actor; empty defaults; held weakly.
@MainActor
public protocol ParticipantDelegate: AnyObject {
    /// The participant left the call, and why.
    func participant(_ participant: RemoteParticipant, didDisconnectWithReason reason: DisconnectReason)
    /// The participant's friend connection changed.
    func participant(_ participant: RemoteParticipant, didUpdatePaths paths: FriendConnectionPaths)
    /// The participant's connection quality changed.
    func participant(_ participant: Participant, didUpdateConnectionQuality quality: ConnectionQuality)
    /// The participant's name changed; nil when cleared.
    func participant(_ participant: Participant, didUpdateName name: String?)
    /// The participant's status message changed; nil when cleared.
    func participant(_ participant: Participant, didUpdateStatusMessage statusMessage: String?)
    /// The participant's status changed.
    func participant(_ participant: Participant, didUpdateStatus status: UserStatus)
    /// You published a track (on your `LocalParticipant`).
    func participant(_ participant: LocalParticipant, didPublishTrack publication: LocalTrackPublication)
    /// You unpublished a track.
    func participant(_ participant: LocalParticipant, didUnpublishTrack publication: LocalTrackPublication)
    /// You started receiving this participant's track.
    func participant(_ participant: RemoteParticipant, didSubscribeTrack publication: RemoteTrackPublication)
    /// You stopped receiving this participant's track.
    func participant(_ participant: RemoteParticipant, didUnsubscribeTrack publication: RemoteTrackPublication)
    /// One of the participant's publications was muted or unmuted.
    func participant(_ participant: Participant, trackPublication: TrackPublication, didUpdateIsMuted isMuted: Bool)
    /// New statistics for one of the participant's tracks.
    func participant(
        _ participant: Participant, trackPublication: TrackPublication, didUpdateStatistics statistics: TrackStatistics)
    /// The participant sent you an in-call message.
    func participant(_ participant: RemoteParticipant, didReceiveMessage message: String)
    /// The participant asks you to mute or unmute your microphone.
    func participant(_ participant: RemoteParticipant, didReceiveMuteRequest isMuted: Bool)
    /// The participant started or stopped speaking. Participant only.
    func participant(_ participant: Participant, didUpdateIsSpeaking isSpeaking: Bool)
    /// The participant's mode changed.
    func participant(_ participant: Participant, didUpdateMode mode: ParticipantMode)
}

extension ParticipantDelegate {
    /// Does nothing unless the delegate implements it.
    public func participant(_ participant: RemoteParticipant, didDisconnectWithReason reason: DisconnectReason) {}
    /// Does nothing unless the delegate implements it.
    public func participant(_ participant: RemoteParticipant, didUpdatePaths paths: FriendConnectionPaths) {}
    /// Does nothing unless the delegate implements it.
    public func participant(_ participant: Participant, didUpdateConnectionQuality quality: ConnectionQuality) {}
    /// Does nothing unless the delegate implements it.
    public func participant(_ participant: Participant, didUpdateName name: String?) {}
    /// Does nothing unless the delegate implements it.
    public func participant(_ participant: Participant, didUpdateStatusMessage statusMessage: String?) {}
    /// Does nothing unless the delegate implements it.
    public func participant(_ participant: Participant, didUpdateStatus status: UserStatus) {}
    /// Does nothing unless the delegate implements it.
    public func participant(_ participant: LocalParticipant, didPublishTrack publication: LocalTrackPublication) {}
    /// Does nothing unless the delegate implements it.
    public func participant(_ participant: LocalParticipant, didUnpublishTrack publication: LocalTrackPublication) {}
    /// Does nothing unless the delegate implements it.
    public func participant(_ participant: RemoteParticipant, didSubscribeTrack publication: RemoteTrackPublication) {}
    /// Does nothing unless the delegate implements it.
    public func participant(_ participant: RemoteParticipant, didUnsubscribeTrack publication: RemoteTrackPublication) {}
    /// Does nothing unless the delegate implements it.
    public func participant(_ participant: Participant, trackPublication: TrackPublication, didUpdateIsMuted isMuted: Bool) {}
    /// Does nothing unless the delegate implements it.
    public func participant(
        _ participant: Participant, trackPublication: TrackPublication, didUpdateStatistics statistics: TrackStatistics
    ) {}
    /// Does nothing unless the delegate implements it.
    public func participant(_ participant: RemoteParticipant, didReceiveMessage message: String) {}
    /// Does nothing unless the delegate implements it.
    public func participant(_ participant: RemoteParticipant, didReceiveMuteRequest isMuted: Bool) {}
    /// Does nothing unless the delegate implements it.
    public func participant(_ participant: Participant, didUpdateIsSpeaking isSpeaking: Bool) {}
    /// Does nothing unless the delegate implements it.
    public func participant(_ participant: Participant, didUpdateMode mode: ParticipantMode) {}
}

/// Reports your own track's mute state (`LocalTrackPublication.mute()`/`unmute()`): not a
/// publication event, so it arrives here and not on the room. Main actor; held weakly.
@MainActor
public protocol TrackDelegate: AnyObject {
    /// Your publication was muted or unmuted.
    func track(_ publication: LocalTrackPublication, didUpdateIsMuted isMuted: Bool)
}

extension TrackDelegate {
    /// Does nothing unless the delegate implements it.
    public func track(_ publication: LocalTrackPublication, didUpdateIsMuted isMuted: Bool) {}
}
