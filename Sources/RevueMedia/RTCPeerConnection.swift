// A WebRTC peer connection for Swift programs, shaped after the W3C `RTCPeerConnection` (as pion
// and aiortc shape theirs): offers and answers as typed values with SDP text, trickle ICE both
// ways, transceivers fed from the engine's capturers, remote media into a renderer and a PCM
// sink, state events and a W3C statistics report. It wraps the engine's `PeerConnection`
// (MediaWebRTC: one UDP socket, the ICE agent, DTLS-SRTP, VP8/VP9 and Opus both ways).
import Dispatch
import MediaCore
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The overall state of a connection (W3C `RTCPeerConnectionState`). This engine fails a
/// connection whose selected pair stops answering, so it never reports `disconnected`.
/// Thread rule: a value type. Cost: none.
public enum RTCPeerConnectionState: String, Sendable, Hashable {
    /// Made; no exchange completed yet.
    case new
    /// ICE checks and the DTLS handshake are running.
    case connecting
    /// DTLS verified the peer; media flows.
    case connected
    /// Not used by this engine (see the type's comment); kept for W3C parity.
    case disconnected
    /// ICE or DTLS failed, or consent was lost (`RTCPeerConnection.error` says which).
    case failed
    /// `close()` was called or the peer closed the DTLS association.
    case closed
}

/// The state of ICE (W3C `RTCIceConnectionState`; this engine does not report `completed`).
/// Thread rule: a value type. Cost: none.
public enum RTCIceConnectionState: String, Sendable, Hashable {
    /// No checks yet.
    case new
    /// Checks are running; no pair selected.
    case checking
    /// A pair is selected and media may flow.
    case connected
    /// Not used by this engine; kept for W3C parity.
    case completed
    /// The selected pair stopped answering (the connection then fails).
    case disconnected
    /// No pair worked, or consent was lost.
    case failed
    /// The connection was closed.
    case closed
}

/// Whether local candidates are still being gathered (W3C `RTCIceGatheringState`).
/// Thread rule: a value type. Cost: none.
public enum RTCIceGatheringState: String, Sendable, Hashable {
    /// Gathering has not started (no offer or answer made yet).
    case new
    /// Host, server-reflexive and relayed candidates are being gathered.
    case gathering
    /// Every candidate has been gathered (and trickled).
    case complete
}

/// Where the offer/answer exchange stands (W3C `RTCSignalingState`; no provisional answers).
/// Thread rule: a value type. Cost: none.
public enum RTCSignalingState: String, Sendable, Hashable {
    /// No exchange under way.
    case stable
    /// Our offer is set; the peer's answer is awaited.
    case haveLocalOffer = "have-local-offer"
    /// The peer's offer is set; our answer is awaited.
    case haveRemoteOffer = "have-remote-offer"
    /// The connection was closed.
    case closed
}

/// Audio or video. Thread rule: a value type. Cost: none.
public enum RTCMediaKind: String, Sendable, Hashable {
    /// Opus audio.
    case audio
    /// VP8 or VP9 video.
    case video
}

/// Which way a transceiver's media goes (W3C `RTCRtpTransceiverDirection`).
/// Thread rule: a value type. Cost: none.
public enum RTCRtpTransceiverDirection: String, Sendable, Hashable {
    /// Send and receive.
    case sendrecv
    /// Send only (publishing to a server that sends nothing back).
    case sendonly
    /// Receive only (no local track).
    case recvonly
    /// Neither; not supported when adding a transceiver.
    case inactive
}

/// A media section of the connection and, when it sends, the capturer its media goes into
/// (W3C `RTCRtpTransceiver` with its sender's source). Thread rule: any thread. Cost: none;
/// `mid` reads the local description under a lock.
public final class RTCRtpTransceiver: Sendable {
    /// Audio or video.
    public let kind: RTCMediaKind
    /// The direction asked for when it was added.
    public let direction: RTCRtpTransceiverDirection
    /// Where the app puts video frames to send (video transceivers that send; nil otherwise).
    /// Frames of any size and `PixelFormat` are scaled to `RTCConfiguration.videoWidth`x`videoHeight`;
    /// frames before the connection is up are encoded and dropped.
    public let videoCapturer: BufferCapturer?
    /// Where the app puts PCM to send (audio transceivers that send; nil otherwise): any rate
    /// from 8 to 96 kHz, Int16 or Float, mono or interleaved stereo.
    public let audioCapturer: AudioBufferCapturer?
    let engine: PeerConnection
    /// The engine's track id (sending transceivers) or the mid it fixed (receive-only ones).
    let trackID: String?
    let fixedMid: String?

    init(
        kind: RTCMediaKind, direction: RTCRtpTransceiverDirection, video: BufferCapturer?, audio: AudioBufferCapturer?,
        engine: PeerConnection, trackID: String?, fixedMid: String?
    ) {
        self.kind = kind
        self.direction = direction
        self.videoCapturer = video
        self.audioCapturer = audio
        self.engine = engine
        self.trackID = trackID
        self.fixedMid = fixedMid
    }

    /// The mid of its media section, once a local description gave it one.
    public var mid: String? {
        if let fixedMid { return fixedMid }
        guard let trackID, let local = engine.localDescription else { return nil }
        return local.media.first { $0.mediaStreamIDs.contains { $0.track == trackID } }?.mid
    }
}

/// A media section of the peer that sends to us, announced by `onTrack` when a remote
/// description brings it (W3C `RTCTrackEvent`). Its media reaches `remoteVideoRenderer` or
/// `remoteAudioSink`. Thread rule: a value type. Cost: none.
public struct RTCTrackEvent: Sendable, Hashable {
    /// Audio or video.
    public var kind: RTCMediaKind
    /// The section's mid.
    public var mid: String
    /// The peer's track id (its `a=msid` track part; the mid when it named none).
    public var trackID: String
    /// The peer's stream ids for the track.
    public var streamIDs: [String]
}

/// One WebRTC peer connection, in the shape of the W3C `RTCPeerConnection`.
///
/// Use: make it with an `RTCConfiguration`; add transceivers (`addTrack`, `addTransceiver`) and
/// feed their capturers; set `remoteVideoRenderer` and `remoteAudioSink` for the peer's media;
/// then either `createOffer` → `setLocalDescription` → send it → `setRemoteDescription(answer)`,
/// or `setRemoteDescription(offer)` → `createAnswer` → `setLocalDescription` → send it. Trickle
/// candidates from `onIceCandidate` to the peer and the peer's to `addIceCandidate`.
///
/// Differences from the W3C API: `createOffer`/`createAnswer` already commit the description in
/// the engine (an answer starts ICE at once), so `setLocalDescription` takes exactly the
/// description they returned (`.invalidModification` otherwise) and an offer cannot be rolled
/// back; gathering starts at `createOffer`/`createAnswer` and waits up to
/// `RTCConfiguration.gatheringWait`; the peer's first audio
/// stream is the one played, and the frames of every remote video stream go to the one
/// `remoteVideoRenderer` (`DecodedVideoFrame.ssrc` tells them apart).
///
/// Thread rule: every method from any thread or task. The `on...` handlers run one at a time,
/// in order, on the connection's private event queue; they may call back into the connection
/// (asynchronous methods from a `Task`). Decoded video reaches `remoteVideoRenderer` on the
/// engine's receive thread, PCM reaches `remoteAudioSink` on its playout thread.
/// Cost: one UDP socket; the ICE agent (a few STUN transactions a second); one DTLS handshake
/// (a few ms of CPU); per sending transceiver an encoder thread (and a pacer thread for video);
/// one receive thread and one audio playout thread once connected.
public final class RTCPeerConnection: Sendable {
    /// The settings it was made with.
    public let configuration: RTCConfiguration
    let engine: PeerConnection
    private let events = DispatchQueue(label: "revue.rtc-peer-connection.events")
    private let remoteVideo = RemoteVideoForwarder()
    private let remoteAudio = RemoteAudioForwarder()

    struct Handlers {
        var iceCandidate: (@Sendable (RTCIceCandidate?) -> Void)?
        var connectionState: (@Sendable (RTCPeerConnectionState) -> Void)?
        var iceConnectionState: (@Sendable (RTCIceConnectionState) -> Void)?
        var iceGatheringState: (@Sendable (RTCIceGatheringState) -> Void)?
        var signalingState: (@Sendable (RTCSignalingState) -> Void)?
        var track: (@Sendable (RTCTrackEvent) -> Void)?
    }

    struct State {
        var handlers = Handlers()
        /// Made by `createOffer`/`createAnswer` and not set yet.
        var created: RTCSessionDescription?
        var local: RTCSessionDescription?
        var remote: RTCSessionDescription?
        var signaling = RTCSignalingState.stable
        var connection = RTCPeerConnectionState.new
        var ice = RTCIceConnectionState.new
        var gathering = RTCIceGatheringState.new
        /// Local candidates gathered before a local description was set (trickled once it is).
        var pendingCandidates: [JSEPCandidate] = []
        var localSet = false
        var gatheringDone = false
        var endTrickled = false
        var announcedMids: Set<String> = []
        var transceivers: [RTCRtpTransceiver] = []
        /// The peer said it has no more candidates.
        var remoteEndOfCandidates = false
    }
    private let state = Mutex(State())

    /// Makes a connection: binds its UDP socket, makes its DTLS certificate (unless one is
    /// given) and resolves the ICE servers' names. Throws `.invalidConfiguration` for a malformed
    /// server URL, TURN without credentials, `.relay` without a TURN server, an expired
    /// certificate, an address that does not parse or a video size or bitrate out of range;
    /// `.notSupported` for `.maxCompat` or more than one certificate; `.setup` when the socket
    /// cannot be bound. Thread rule: any thread. Cost: a socket, an ECDSA key (about a
    /// millisecond), a `getaddrinfo` per server host name.
    public init(configuration: RTCConfiguration = RTCConfiguration()) throws(RTCError) {
        self.configuration = configuration
        guard configuration.bundlePolicy != .maxCompat else {
            throw .notSupported("bundlePolicy max-compat: this engine runs every section on one transport")
        }
        var c = PeerConnectionConfiguration()
        for server in configuration.iceServers { c.iceServers += try server.engineServers() }
        guard configuration.certificates.count <= 1 else {
            throw .notSupported("more than one certificate: this engine presents one DTLS identity")
        }
        if let certificate = configuration.certificates.first {
            guard certificate.expires > Date() else { throw .invalidConfiguration("the certificate expired") }
            c.certificate = certificate.identity
        }
        c.relayOnly = configuration.iceTransportPolicy == .relay
        if c.relayOnly, !c.iceServers.contains(where: { $0.kind == .turn }) {
            throw .invalidConfiguration("iceTransportPolicy relay needs a TURN server")
        }
        var host = configuration.localAddress
        if host.contains(":"), !host.hasPrefix("[") { host = "[\(host)]" }
        do { c.bindAddress = try SocketAddress(parsing: host, defaultPort: 0) } catch {
            throw .invalidConfiguration("localAddress '\(configuration.localAddress)': \(error)")
        }
        guard (16...4096).contains(configuration.videoWidth), (16...4096).contains(configuration.videoHeight),
            configuration.videoWidth % 2 == 0, configuration.videoHeight % 2 == 0
        else {
            throw .invalidConfiguration("video size \(configuration.videoWidth)x\(configuration.videoHeight): even, 16...4096")
        }
        guard (30_000...20_000_000).contains(configuration.videoBitrate) else {
            throw .invalidConfiguration("videoBitrate \(configuration.videoBitrate): 30 000...20 000 000 bit/s")
        }
        c.videoWidth = configuration.videoWidth
        c.videoHeight = configuration.videoHeight
        if let maximum = configuration.videoMaximumBitrate {
            guard (30_000...20_000_000).contains(maximum), maximum >= configuration.videoBitrate else {
                throw .invalidConfiguration(
                    "videoMaximumBitrate \(maximum): 30 000...20 000 000 bit/s and at least videoBitrate")
            }
        }
        c.videoBitrate = configuration.videoBitrate
        c.videoMaximumBitrate = configuration.videoMaximumBitrate
        c.gatheringTimeoutSeconds = Self.seconds(configuration.gatheringWait)
        c.connectTimeoutSeconds = Self.seconds(configuration.connectTimeout)
        do { engine = try PeerConnection(configuration: c) } catch { throw RTCError(error) }
        engine.videoRenderer = remoteVideo
        engine.audioSink = remoteAudio
        engine.onLocalCandidate = { [weak self] c in self?.localCandidateGathered(c) }
        engine.onGatheringComplete = { [weak self] in self?.gatheringCompleted() }
        engine.onStateChange = { [weak self] s in self?.engineStateChanged(s) }
        engine.onSelectedPairChange = { [weak self] selected in self?.selectedPairChanged(selected) }
    }

    deinit { engine.close() }

    static func seconds(_ d: Duration) -> Double {
        let c = d.components
        return max(0, Double(c.seconds) + Double(c.attoseconds) / 1e18)
    }

    // MARK: Handlers

    /// Each local candidate as it is gathered (trickle, RFC 8838), then `nil` once gathering has
    /// finished (end of candidates). Candidates start after `setLocalDescription`; those gathered
    /// earlier are delivered then (they are also in the description's SDP).
    /// Thread rule: set from any thread; runs on the event queue. Cost: a lock.
    public var onIceCandidate: (@Sendable (RTCIceCandidate?) -> Void)? {
        get { state.withLock { $0.handlers.iceCandidate } }
        set { state.withLock { $0.handlers.iceCandidate = newValue } }
    }

    /// Each change of `connectionState`. Thread rule: as `onIceCandidate`. Cost: a lock.
    public var onConnectionStateChange: (@Sendable (RTCPeerConnectionState) -> Void)? {
        get { state.withLock { $0.handlers.connectionState } }
        set { state.withLock { $0.handlers.connectionState = newValue } }
    }

    /// Each change of `iceConnectionState`. Thread rule: as `onIceCandidate`. Cost: a lock.
    public var onIceConnectionStateChange: (@Sendable (RTCIceConnectionState) -> Void)? {
        get { state.withLock { $0.handlers.iceConnectionState } }
        set { state.withLock { $0.handlers.iceConnectionState = newValue } }
    }

    /// Each change of `iceGatheringState`. Thread rule: as `onIceCandidate`. Cost: a lock.
    public var onIceGatheringStateChange: (@Sendable (RTCIceGatheringState) -> Void)? {
        get { state.withLock { $0.handlers.iceGatheringState } }
        set { state.withLock { $0.handlers.iceGatheringState = newValue } }
    }

    /// Each change of `signalingState`. Thread rule: as `onIceCandidate`. Cost: a lock.
    public var onSignalingStateChange: (@Sendable (RTCSignalingState) -> Void)? {
        get { state.withLock { $0.handlers.signalingState } }
        set { state.withLock { $0.handlers.signalingState = newValue } }
    }

    /// Each media section the peer sends in, when a remote description first brings it.
    /// Thread rule: as `onIceCandidate`. Cost: a lock.
    public var onTrack: (@Sendable (RTCTrackEvent) -> Void)? {
        get { state.withLock { $0.handlers.track } }
        set { state.withLock { $0.handlers.track = newValue } }
    }

    /// Where the peer's decoded video goes (I420 frames, on the engine's receive thread; keep
    /// `render` short). May be set or changed at any time. Thread rule: any thread. Cost: a lock.
    public var remoteVideoRenderer: (any VideoRenderer)? {
        get { remoteVideo.target.withLock { $0?.renderer } }
        set { remoteVideo.target.withLock { $0 = newValue.map(RendererBox.init) } }
    }

    /// Where the peer's decoded audio goes: 10 ms of 48 kHz PCM at a time, on the playout thread.
    /// May be set or changed at any time. Thread rule: any thread. Cost: a lock.
    public var remoteAudioSink: (any AudioSink)? {
        get { remoteAudio.target.withLock { $0 } }
        set { remoteAudio.target.withLock { $0 = newValue } }
    }

    // MARK: States and descriptions

    /// The overall state. Thread rule: any thread. Cost: a lock.
    public var connectionState: RTCPeerConnectionState { state.withLock { $0.connection } }
    /// The ICE state. Thread rule: any thread. Cost: a lock.
    public var iceConnectionState: RTCIceConnectionState { state.withLock { $0.ice } }
    /// The gathering state. Thread rule: any thread. Cost: a lock.
    public var iceGatheringState: RTCIceGatheringState { state.withLock { $0.gathering } }
    /// The offer/answer state. Thread rule: any thread. Cost: a lock.
    public var signalingState: RTCSignalingState { state.withLock { $0.signaling } }
    /// The local description last set. Thread rule: any thread. Cost: a copy.
    public var localDescription: RTCSessionDescription? { state.withLock { $0.local } }
    /// The remote description last set. Thread rule: any thread. Cost: a copy.
    public var remoteDescription: RTCSessionDescription? { state.withLock { $0.remote } }
    /// Why the connection failed (nil unless `connectionState` is `.failed`).
    /// Thread rule: any thread. Cost: a lock.
    public var error: RTCError? { engine.error.map(RTCError.init) }
    /// Whether the peer signalled the end of its candidates (`addIceCandidate(nil)`). This engine
    /// keeps checking the pairs it has until `connectTimeout` either way.
    /// Thread rule: any thread. Cost: a lock.
    public var remoteEndOfCandidates: Bool { state.withLock { $0.remoteEndOfCandidates } }
    /// Every transceiver added, in order. Thread rule: any thread. Cost: a copy.
    public var transceivers: [RTCRtpTransceiver] { state.withLock { $0.transceivers } }

    // MARK: Transceivers

    /// Adds a transceiver of `kind` that sends and receives; feed its capturer.
    /// Thread rule: any thread. Cost: as `addTransceiver`.
    @discardableResult
    public func addTrack(_ kind: RTCMediaKind) throws(RTCError) -> RTCRtpTransceiver {
        try addTransceiver(kind, direction: .sendrecv)
    }

    /// Adds a media section of `kind`: `.sendrecv` or `.sendonly` with a capturer to feed,
    /// `.recvonly` without one (`.inactive` is `.notSupported`). Video is sent as `videoCodec`
    /// when the peer accepts it. Before the first offer, or between exchanges (then make a new
    /// offer). Throws `.invalidState` after `close`, `.setup` when the encoder cannot be made.
    /// Thread rule: any thread. Cost: a sending transceiver starts its encoder thread (and a
    /// pacer thread for video) now, until `close`.
    public func addTransceiver(
        _ kind: RTCMediaKind, direction: RTCRtpTransceiverDirection = .sendrecv, videoCodec: VPXCodec = .vp8
    ) throws(RTCError) -> RTCRtpTransceiver {
        guard signalingState != .closed else { throw .invalidState("the connection is closed") }
        let t: RTCRtpTransceiver
        do {
            switch (direction, kind) {
            case (.sendrecv, .video), (.sendonly, .video):
                let capturer = try engine.addVideoTrack(
                    codec: videoCodec, direction: direction == .sendrecv ? .sendrecv : .sendonly)
                t = RTCRtpTransceiver(
                    kind: kind, direction: direction, video: capturer, audio: nil, engine: engine,
                    trackID: engine.trackID(of: capturer), fixedMid: nil)
            case (.sendrecv, .audio), (.sendonly, .audio):
                let capturer = try engine.addAudioTrack(direction: direction == .sendrecv ? .sendrecv : .sendonly)
                t = RTCRtpTransceiver(
                    kind: kind, direction: direction, video: nil, audio: capturer, engine: engine,
                    trackID: engine.trackID(of: capturer), fixedMid: nil)
            case (.recvonly, _):
                let mid = try engine.addReceiveOnlySection(kind: kind == .video ? .video : .audio)
                t = RTCRtpTransceiver(
                    kind: kind, direction: direction, video: nil, audio: nil, engine: engine, trackID: nil, fixedMid: mid)
            case (.inactive, _):
                throw RTCError.notSupported("an inactive transceiver")
            }
        } catch let e as RTCError {
            throw e
        } catch let e as PeerConnectionError {
            throw RTCError(e)
        } catch {
            throw .setup("\(error)")
        }
        state.withLock { $0.transceivers.append(t) }
        return t
    }

    /// Stops sending on a transceiver: its encoder stops now, and the next offer or answer makes
    /// its section receive only (make a new offer to tell the peer). Throws `.invalidState` for
    /// a transceiver that is not a live sending one of this connection.
    /// Thread rule: any thread, the handlers included. Cost: joins the encoder thread.
    public func removeTrack(_ transceiver: RTCRtpTransceiver) throws(RTCError) {
        guard let capturer: AnyObject = transceiver.videoCapturer ?? transceiver.audioCapturer else {
            throw .invalidState("a receive-only transceiver has no track")
        }
        do { try engine.removeTrack(capturer) } catch { throw RTCError(error) }
    }

    // MARK: Offer and answer

    /// Makes an offer for every transceiver, with this side's ICE credentials, DTLS fingerprint
    /// and the candidates gathered within `gatheringWait`. Set it with `setLocalDescription`.
    /// Called again before the answer, it returns the same offer.
    /// Thread rule: any task. Cost: waits for gathering (host candidates at once; server-reflexive
    /// and relayed ones after a round trip to their server).
    public func createOffer() async throws(RTCError) -> RTCSessionDescription {
        let again: RTCSessionDescription? = try state.withLock { s throws(RTCError) in
            guard s.signaling != .closed else { throw .invalidState("the connection is closed") }
            if let c = s.created, c.type == .offer { return c }
            if s.signaling == .haveLocalOffer { return s.local }
            guard s.signaling == .stable else { throw .invalidState("an offer needs a stable signalling state") }
            return nil
        }
        if let again { return again }
        startGathering()
        let offer: JSEPSessionDescription
        do { offer = try await engine.createOffer() } catch { throw RTCError(error) }
        let d = RTCSessionDescription(type: .offer, sdp: offer.sdp)
        state.withLock { $0.created = d }
        return d
    }

    /// Answers the offer set with `setRemoteDescription`; set it with `setLocalDescription`.
    /// ICE checks and DTLS start now. Throws `.invalidState` without a remote offer,
    /// `.invalidDescription` when no offered section can be accepted.
    /// Thread rule: any task. Cost: as `createOffer`.
    public func createAnswer() async throws(RTCError) -> RTCSessionDescription {
        let again: RTCSessionDescription? = try state.withLock { s throws(RTCError) in
            guard s.signaling == .haveRemoteOffer else { throw .invalidState("an answer needs the remote offer first") }
            if let c = s.created, c.type == .answer { return c }
            return nil
        }
        if let again { return again }
        startGathering()
        let answer: JSEPSessionDescription
        do { answer = try await engine.createAnswer() } catch { throw RTCError(error) }
        let d = RTCSessionDescription(type: .answer, sdp: answer.sdp)
        state.withLock { $0.created = d }
        return d
    }

    /// Sets the description `createOffer` or `createAnswer` returned as the local one; trickling
    /// of local candidates starts. Throws `.invalidModification` for any other description,
    /// `.invalidState` out of order. Thread rule: any task. Cost: small.
    public func setLocalDescription(_ description: RTCSessionDescription) async throws(RTCError) {
        let (signaling, flush) = try state.withLock { s throws(RTCError) -> (RTCSignalingState?, [JSEPCandidate?]) in
            guard s.signaling != .closed else { throw .invalidState("the connection is closed") }
            if s.local == description, s.created == nil { return (nil, []) }
            guard let created = s.created, created.type == description.type else {
                throw .invalidState(
                    "set the \(description.type.rawValue) that create\(description.type == .offer ? "Offer" : "Answer") returned")
            }
            guard created.sdp == description.sdp else {
                throw .invalidModification(
                    "the SDP differs from what create\(description.type == .offer ? "Offer" : "Answer") returned")
            }
            s.created = nil
            s.local = description
            s.localSet = true
            s.signaling = description.type == .offer ? .haveLocalOffer : .stable
            var flush: [JSEPCandidate?] = s.pendingCandidates
            s.pendingCandidates = []
            if s.gatheringDone, !s.endTrickled {
                s.endTrickled = true
                flush.append(nil)
            }
            return (s.signaling, flush)
        }
        if let signaling { emit { $0.signalingState?(signaling) } }
        for c in flush {
            let candidate = c.map(trickled)
            emit { $0.iceCandidate?(candidate) }
        }
    }

    /// Makes the offer or answer the signalling state calls for and sets it (the W3C
    /// argument-less form). Thread rule: any task. Cost: as `createOffer`.
    public func setLocalDescription() async throws(RTCError) {
        let d = signalingState == .haveRemoteOffer ? try await createAnswer() : try await createOffer()
        try await setLocalDescription(d)
    }

    /// Applies the peer's offer (then `createAnswer`) or answer to our offer (then ICE and DTLS
    /// start). Announces each section the peer sends in through `onTrack`. Throws
    /// `.invalidDescription` for SDP that does not parse or has no usable section, ICE
    /// credentials or SHA-256 fingerprint (and for new ICE credentials in a renegotiation: an
    /// ICE restart, which this engine does not do); `.invalidState` out of order (an offer while
    /// ours is out: this engine has no rollback). Nothing changes when it throws.
    /// Thread rule: any task. Cost: parsing the SDP.
    public func setRemoteDescription(_ description: RTCSessionDescription) async throws(RTCError) {
        try state.withLock { s throws(RTCError) in
            switch (description.type, s.signaling) {
            case (_, .closed): throw .invalidState("the connection is closed")
            case (.offer, .stable):
                if s.created?.type == .offer { throw .invalidState("our offer is out; rollback is not supported") }
            case (.answer, .haveLocalOffer): break
            case (.offer, _): throw .invalidState("a remote offer needs a stable signalling state")
            case (.answer, _): throw .invalidState("a remote answer needs our offer first")
            }
        }
        let parsed: JSEPSessionDescription
        do {
            parsed = try JSEPSessionDescription(parsing: description.sdp, type: description.type == .offer ? .offer : .answer)
        } catch {
            throw .invalidDescription("\(error)")
        }
        do { try await engine.setRemoteDescription(parsed) } catch { throw RTCError(error) }
        let (signaling, tracks) = state.withLock { s -> (RTCSignalingState, [RTCTrackEvent]) in
            s.remote = description
            s.signaling = description.type == .offer ? .haveRemoteOffer : .stable
            var tracks: [RTCTrackEvent] = []
            for m in parsed.media where !m.isRejected && (m.kind == .audio || m.kind == .video) {
                guard let mid = m.mid, m.direction == .sendrecv || m.direction == .sendonly,
                    s.announcedMids.insert(mid).inserted
                else { continue }
                tracks.append(
                    RTCTrackEvent(
                        kind: m.kind == .video ? .video : .audio, mid: mid,
                        trackID: m.mediaStreamIDs.first?.track ?? mid, streamIDs: m.mediaStreamIDs.map(\.stream)))
            }
            return (s.signaling, tracks)
        }
        emit { $0.signalingState?(signaling) }
        for t in tracks { emit { $0.track?(t) } }
    }

    // MARK: ICE

    /// A candidate the peer trickled; `nil` or an empty `candidate` is its end of candidates.
    /// The candidate names its section by `sdpMid` or `sdpMLineIndex` (every section shares one
    /// transport, so which one does not matter beyond that it exists). TCP and mDNS candidates
    /// are accepted and ignored. Throws `.invalidState` before the remote description,
    /// `.invalidCandidate` for text that is not RFC 8839 or names no section or another ufrag.
    /// Thread rule: any task. Cost: parsing the line.
    public func addIceCandidate(_ candidate: RTCIceCandidate?) async throws(RTCError) {
        guard let remote = engine.remoteDescription, remoteDescription != nil else {
            throw .invalidState("a candidate needs the remote description first")
        }
        guard let candidate, !candidate.isEndOfCandidates else {
            state.withLock { $0.remoteEndOfCandidates = true }
            return
        }
        let section: JSEPMediaSection
        if let mid = candidate.sdpMid {
            guard let m = remote.media.first(where: { $0.mid == mid }) else {
                throw .invalidCandidate("no section with mid '\(mid)'")
            }
            section = m
        } else if let index = candidate.sdpMLineIndex {
            guard remote.media.indices.contains(index) else { throw .invalidCandidate("no section at index \(index)") }
            section = remote.media[index]
        } else {
            throw .invalidCandidate("neither sdpMid nor sdpMLineIndex")
        }
        if let ufrag = candidate.usernameFragment, let ice = remote.effectiveICE(of: section), ice.usernameFragment != ufrag {
            throw .invalidCandidate("ufrag '\(ufrag)' is not the remote description's")
        }
        guard candidate.candidate.utf8.count <= 1024, let parsed = JSEPCandidate(candidate.candidate) else {
            throw .invalidCandidate("'\(candidate.candidate.prefix(120))' is not an RFC 8839 candidate")
        }
        do { try engine.addIceCandidate(parsed) } catch { throw RTCError(error) }
    }

    /// Restarts ICE (RFC 8445 §9), as after a network change: the next `createOffer` carries new
    /// ICE credentials, and once the peer's answer is set, connectivity checks run again over
    /// every candidate pair, both sides' new candidates included. Media goes on over the pair in
    /// use while it still answers and moves to a working new pair when it does not; DTLS and
    /// SRTP keep their keys. Before the first exchange it does nothing. A peer that restarts ICE
    /// needs no call here: set its offer and answer it. Throws `.invalidState` on a closed
    /// connection. Thread rule: any thread. Cost: nothing until the next offer.
    public func restartIce() throws(RTCError) {
        guard state.withLock({ $0.signaling != .closed }) else { throw .invalidState("the connection is closed") }
        engine.restartIce()
    }

    /// Ends the connection: stops media, sends DTLS close_notify, stops ICE, closes the socket;
    /// the handlers hear the closed states (unlike the W3C API, which fires no event here) and
    /// are then released, so a handler that captured the connection does not keep it alive.
    /// Idempotent. Thread rule: any thread, the handlers included (not the renderer or sink).
    /// Cost: joins the media threads.
    public func close() {
        let wasOpen = state.withLock { s -> Bool in
            guard s.signaling != .closed else { return false }
            s.signaling = .closed
            return true
        }
        guard wasOpen else { return }
        // The closing events come from here alone: the engine's own `.closed`, arriving from its
        // queue, could set the state after the check below and emit after the handlers are gone.
        engine.onStateChange = nil
        engine.close()
        emit { $0.signalingState?(.closed) }
        update(connection: .closed, ice: .closed)
        // After the closing events: a handler that captured the connection no longer keeps it.
        events.async { self.state.withLock { $0.handlers = Handlers() } }
    }

    // MARK: Engine events

    private func startGathering() {
        let changed = state.withLock { s -> Bool in
            guard s.gathering == .new else { return false }
            s.gathering = .gathering
            return true
        }
        if changed { emit { $0.iceGatheringState?(.gathering) } }
    }

    private func localCandidateGathered(_ c: JSEPCandidate) {
        let now = state.withLock { s -> Bool in
            guard s.localSet else {
                s.pendingCandidates.append(c)
                return false
            }
            return true
        }
        if now {
            let candidate = trickled(c)
            emit { $0.iceCandidate?(candidate) }
        }
    }

    /// `c` as it is trickled: under the first accepted section of the local description (the
    /// BUNDLE tag; every section shares its transport) and the local ufrag.
    private func trickled(_ c: JSEPCandidate) -> RTCIceCandidate {
        let local = engine.localDescription
        let index = local?.media.firstIndex { !$0.isRejected }
        let section = index.flatMap { local?.media[$0] }
        return RTCIceCandidate(
            candidate: "candidate:" + c.value, sdpMid: section?.mid, sdpMLineIndex: index,
            usernameFragment: section.flatMap { local?.effectiveICE(of: $0)?.usernameFragment })
    }

    private func gatheringCompleted() {
        // The engine starts gathering when its ICE agent is made, which a remote offer does
        // before `createAnswer`: then `gathering` is reported here, just before `complete`.
        let (was, end) = state.withLock { s -> (RTCIceGatheringState, Bool) in
            s.gatheringDone = true
            let was = s.gathering
            s.gathering = .complete
            guard s.localSet, !s.endTrickled else { return (was, false) }
            s.endTrickled = true
            return (was, true)
        }
        if was == .new { emit { $0.iceGatheringState?(.gathering) } }
        if was != .complete { emit { $0.iceGatheringState?(.complete) } }
        if end { emit { $0.iceCandidate?(nil) } }
    }

    private func engineStateChanged(_ s: PeerConnectionState) {
        switch s {
        case .new: break
        case .connecting: update(connection: .connecting, ice: iceConnectionState == .new ? .checking : nil)
        case .connected: update(connection: .connected, ice: .connected)
        case .failed:
            let iceFailed = engine.error == .iceFailed || engine.error == .connectionLost
            update(connection: .failed, ice: iceFailed ? .failed : nil)
        case .closed: update(connection: .closed, ice: .closed)
        }
    }

    private func selectedPairChanged(_ selected: Bool) {
        update(connection: nil, ice: selected ? .connected : .disconnected)
    }

    /// Moves the states (never out of `.closed`, nor out of `.failed` but to `.closed`) and
    /// tells the handlers.
    private func update(connection: RTCPeerConnectionState?, ice: RTCIceConnectionState?) {
        let (c, i) = state.withLock { s -> (RTCPeerConnectionState?, RTCIceConnectionState?) in
            var c: RTCPeerConnectionState?, i: RTCIceConnectionState?
            if let connection, connection != s.connection, s.connection != .closed,
                s.connection != .failed || connection == .closed
            {
                s.connection = connection
                c = connection
            }
            if let ice, ice != s.ice, s.ice != .closed, s.ice != .failed || ice == .closed {
                s.ice = ice
                i = ice
            }
            return (c, i)
        }
        if let i { emit { $0.iceConnectionState?(i) } }
        if let c { emit { $0.connectionState?(c) } }
    }

    /// Runs `body` with the handlers as they are when it runs, on the event queue, in order.
    private func emit(_ body: @escaping @Sendable (Handlers) -> Void) {
        events.async { body(self.state.withLock { $0.handlers }) }
    }
}

/// A renderer handed to the engine's receive thread. Thread rule: immutable.
/// Sendable: the box only carries the reference; the engine calls the renderer only on its
/// receive thread (the renderer's own thread rule).
struct RendererBox: @unchecked Sendable {
    let renderer: any VideoRenderer
}

/// The renderer the engine always has: forwards each frame to the app's current renderer.
/// Thread rule: `render` on the receive thread; `target` from any thread. Cost: a lock per frame.
final class RemoteVideoForwarder: VideoRenderer, Sendable {
    let target = Mutex<RendererBox?>(nil)
    func render(_ frame: DecodedVideoFrame) { target.withLock { $0 }?.renderer.render(frame) }
}

/// The sink the engine always has: forwards PCM to the app's current sink.
/// Thread rule: `play` on the playout thread; `target` from any thread. Cost: a lock per 10 ms.
final class RemoteAudioForwarder: AudioSink, Sendable {
    let target = Mutex<(any AudioSink)?>(nil)
    func play(_ samples: Span<Int16>, sampleRate: Int, channels: Int) {
        target.withLock { $0 }?.play(samples, sampleRate: sampleRate, channels: channels)
    }
}
