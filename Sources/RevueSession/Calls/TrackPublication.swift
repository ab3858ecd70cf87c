public import MediaCore

/// What a track carries.
public enum TrackKind: String, Sendable, Hashable {
    case audio
    case video
}

/// A track a participant publishes into the call: its ID, kind and mute state. Main actor.
@MainActor
public class TrackPublication {
    /// The track ID, unique within its participant ("audio", "video").
    public let sid: String
    /// Audio or video.
    public let kind: TrackKind
    /// The track name ("microphone", "camera").
    public let name: String
    /// Whether the publisher muted it (no media flows while muted).
    public internal(set) var isMuted: Bool
    /// Who publishes it.
    public internal(set) weak var participant: Participant?

    init(sid: String, kind: TrackKind, name: String, isMuted: Bool, participant: Participant) {
        self.sid = sid
        self.kind = kind
        self.name = name
        self.isMuted = isMuted
        self.participant = participant
    }
}

/// One of your own publications. Main actor.
@MainActor
public final class LocalTrackPublication: TrackPublication {
    /// Delegates told about your own mute changes; weak references.
    public let delegates = DelegateList<any TrackDelegate>()
    /// Where your camera frames go while the video track is published (nil otherwise): call
    /// `capture` from your capture thread, never the main thread.
    public internal(set) var videoCapturer: BufferCapturer?
    /// Where your microphone PCM goes while the audio track is published (nil otherwise); any thread.
    public internal(set) var audioCapturer: AudioBufferCapturer?

    /// Mutes the track: media stops, participants receive `didUpdateIsMuted(true)`, your
    /// `TrackDelegate` receives `track(_:didUpdateIsMuted:)`. Does nothing when already muted.
    public func mute() { (participant?.room)?.setMuted(self, true) }

    /// Unmutes the track (the reverse of `mute()`).
    public func unmute() { (participant?.room)?.setMuted(self, false) }
}

/// A remote participant's publication. Subscribed automatically when you receive media; call
/// `setSubscribed(false)` to stop receiving it. Main actor.
@MainActor
public final class RemoteTrackPublication: TrackPublication {
    /// Whether you receive this track now.
    public internal(set) var isSubscribed = false
    /// Whether you want it (`setSubscribed`); auto-subscription honours it.
    var wanted = true
    /// The App's renderer of this (video) track: decoded frames arrive on the engine's receive
    /// thread while the track is subscribed. Set from the main actor.
    public var renderer: (any VideoRenderer)? {
        didSet { (participant?.room)?.updateSinks(self) }
    }
    /// The App's PCM sink of this (audio) track: 10 ms of 48 kHz PCM at a time on the playout
    /// thread while subscribed. Revue opens no audio device: play it where you want.
    public var audioSink: (any AudioSink)? {
        didSet { (participant?.room)?.updateSinks(self) }
    }

    /// Subscribes or unsubscribes: you receive `didSubscribeTrack`/`didUnsubscribeTrack` and the
    /// publisher stops or resumes sending it to you.
    public func setSubscribed(_ subscribed: Bool) {
        wanted = subscribed
        (participant?.room)?.updateSubscription(self)
    }
}
