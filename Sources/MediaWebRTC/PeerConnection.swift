// A standard WebRTC peer connection (JSEP, RFC 8829) on the engine's own pieces: one UDP socket,
// the ICE agent on it, DTLS-SRTP over the selected pair, and the send streams and receive
// pipeline of the engine for VP8/VP9 video and Opus audio. The wiring (demultiplexing, the DTLS
// handshake, starting media) is in PeerConnection+Transport.swift; docs/webrtc.md describes it.
import Dispatch
import MediaBase
import MediaCodecs
import MediaPipeline
import MediaTransport
import MediaWire
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Where a `PeerConnection` stands (the W3C `RTCPeerConnectionState` subset this engine has).
/// Thread rule: a value type. Cost: none.
package enum PeerConnectionState: String, Sendable, Hashable {
    /// Made; no remote description yet.
    case new
    /// ICE checks and the DTLS handshake are running.
    case connecting
    /// DTLS verified the peer and SRTP media flows both ways.
    case connected
    /// ICE found no path, DTLS failed, or consent was lost (see `PeerConnection.error`); no media flows.
    case failed
    /// `close()` was called, or the peer ended the DTLS association.
    case closed
}

/// Where the offer/answer exchange of a `PeerConnection` stands (W3C `RTCSignalingState`).
/// Thread rule: a value type. Cost: none.
package enum PeerConnectionSignalingState: String, Sendable, Hashable {
    /// No exchange under way: a new offer may be made or taken.
    case stable
    /// Our offer is out; the peer's answer is awaited (`setRemoteDescription`).
    case haveLocalOffer = "have-local-offer"
    /// The peer's offer is applied; our answer is awaited (`createAnswer`).
    case haveRemoteOffer = "have-remote-offer"
}

/// Why a `PeerConnection` refused a call or failed. Thread rule: a value type. Cost: none.
package enum PeerConnectionError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A method was called in a state that does not allow it (an answer before an offer, a track
    /// after the first description, anything after `close`).
    case invalidState(String)
    /// The remote description cannot be used: no accepted audio or video section, no ICE
    /// credentials, no SHA-256 fingerprint, an unanswerable setup role; in a renegotiation, new
    /// ICE credentials (an ICE restart, which this engine does not do) or a new fingerprint.
    case invalidDescription(String)
    /// The DTLS handshake failed; `.dtls(.fingerprintMismatch)` when the peer's certificate is not
    /// the one its description announced.
    case dtls(DTLSError)
    /// No ICE candidate pair worked within `PeerConnectionConfiguration.connectTimeoutSeconds`.
    case iceFailed
    /// Connected, then the peer stopped answering ICE consent checks (RFC 7675: 30 s on every pair).
    case connectionLost
    /// A socket, codec or SRTP context could not be made (the reason).
    case setup(String)

    /// A readable description, for logs and test failures.
    package var description: String {
        switch self {
        case .invalidState(let s): "invalid state: \(s)"
        case .invalidDescription(let s): "unusable remote description: \(s)"
        case .dtls(let e): "\(e)"
        case .iceFailed: "ICE found no working candidate pair"
        case .connectionLost: "the peer stopped answering ICE consent checks"
        case .setup(let s): "media setup failed: \(s)"
        }
    }
}

/// Settings of a `PeerConnection`, fixed at creation. Thread rule: a value type. Cost: none.
package struct PeerConnectionConfiguration: Sendable {
    /// STUN and TURN servers the ICE agent gathers from.
    package var iceServers: [ICEServer] = []
    /// Only relayed candidates (the W3C `iceTransportPolicy: "relay"`): every packet, DTLS and
    /// media alike, goes through a TURN server in `iceServers`, and the peer never learns our
    /// addresses. False: host, server-reflexive and relayed candidates.
    package var relayOnly = false
    /// The address the one UDP socket binds (port 0: any free port).
    package var bindAddress: SocketAddress = .anyIPv4(port: 0)
    /// Host addresses to offer (nil: every up, non-loopback interface address; loopback too when
    /// `bindAddress` is loopback).
    package var hostAddresses: [SocketAddress]? = nil
    /// The DTLS role this side takes when it answers an `actpass` offer (RFC 8842 §5.3 lets the
    /// answerer choose; browsers answer `active`).
    package var answererRole: DTLSTransport.Role = .active
    /// The SRTP protection profiles offered in DTLS, most preferred first.
    package var srtpProfiles: [SRTPSuite] = [.aeadAES128GCM, .aesCM128HMACSHA1_80]
    /// The DTLS key and certificate to present (one fingerprint across connections); nil: a
    /// fresh pair per connection.
    package var certificate: DTLSIdentity? = nil
    /// From the remote description until connected: ICE and DTLS together must finish in this
    /// long, or the connection fails.
    package var connectTimeoutSeconds: Double = 30
    /// `createOffer`/`createAnswer` wait for gathering to finish at most this long, so the
    /// description carries every candidate (for peers that do not trickle).
    package var gatheringTimeoutSeconds: Double = 5
    /// Video frames are encoded at this size (the capturer scales).
    package var videoWidth = 640, videoHeight = 360
    /// The video encoder's start bitrate (RTCP feedback moves it), bits per second.
    package var videoBitrate = 1_000_000
    /// The most the video may send, bits per second, however high the estimate goes; nil: by
    /// the frame size (`defaultMaximumVideoBitrate`), and never below `videoBitrate`.
    package var videoMaximumBitrate: Int? = nil
    /// Whether local video offers an RTX stream (RFC 4588) for its repairs and probe padding.
    /// False: repairs resend the protected originals and the stream does not probe (a server
    /// that mishandles RTX).
    package var videoRetransmissionStream = true

    /// The ceiling for video of `width` x `height` when none is given, bits per second: 600 kbit/s
    /// up to 320x240, 1.7 Mbit/s up to 640x480, 2 Mbit/s up to 960x540, 2.5 Mbit/s above (the
    /// steps libwebrtc uses by default).
    package static func defaultMaximumVideoBitrate(width: Int, height: Int) -> Int {
        switch width * height {
        case ...(320 * 240): 600_000
        case ...(640 * 480): 1_700_000
        case ...(960 * 540): 2_000_000
        default: 2_500_000
        }
    }

    /// The video ceiling in use: `videoMaximumBitrate`, or the size's default, at least the start.
    package var effectiveMaximumVideoBitrate: Int {
        max(videoBitrate, videoMaximumBitrate ?? Self.defaultMaximumVideoBitrate(width: videoWidth, height: videoHeight))
    }
    /// End-to-end encryption of each local video frame with SFrame (RFC 9605) before it is
    /// packetized, for media through a server that terminates SRTP (docs/sframe.md). Give video
    /// and audio senders with different key IDs: each KID has its own replay window at receivers.
    package var videoFrameEncryption: SFrameSender? = nil
    /// The same for each local Opus packet.
    package var audioFrameEncryption: SFrameSender? = nil
    /// Decrypts the peer's SFrame-protected video frames and Opus packets (keys by KID); frames
    /// that fail are dropped and counted (`framesDecryptionFailed`). Nil: media is taken as is.
    package var frameDecryption: SFrameReceiver? = nil
    /// Most remote audio streams played (one per SSRC, each into `audioStreamSink`); with 1 the
    /// first one plays into `audioSink`. An SFU subscription to several participants sets more.
    package var maxAudioStreams = 1
    /// Most remote streams (audio and video SSRCs) taken in all; packets of further ones are
    /// dropped and counted.
    package var maxReceiveStreams = 8
    /// The socket's kernel receive buffer (`SO_RCVBUF`, capped by `net.core.rmem_max`); nil:
    /// the system default. A connection carrying many streams sets more, so a burst that
    /// arrives while the receive thread waits for a core is not dropped by the kernel.
    package var receiveBufferBytes: Int? = nil

    /// The defaults above.
    package init() {}
}

/// One WebRTC peer connection: see the file comment and docs/webrtc.md.
///
/// Use: make it, add local tracks (`addVideoTrack`, `addAudioTrack`: the capturers frames go
/// into), set `videoRenderer`/`audioSink` for the peer's media, then either `createOffer` → send it →
/// `setRemoteDescription(answer)`, or `setRemoteDescription(offer)` → `createAnswer` → send it.
/// Candidates are in the descriptions (gathering is waited for) and also trickled to
/// `onLocalCandidate`; the peer's trickled ones go to `addIceCandidate`.
///
/// Renegotiation (RFC 8829 §5.2.2, §5.3.2): once an exchange is complete, tracks may be added
/// (`addVideoTrack`/`addAudioTrack`) or removed (`removeTrack`) and a new offer made, or the
/// peer's new offer taken and answered, on the same ICE and DTLS transport. A track added later
/// sends once an exchange gives it a section; a removed track's section stays, receive only,
/// so the peer may keep sending in it. The peer's new sections reach `videoRenderer` and
/// `audioSink` like the first ones.
///
/// Data channels (RFC 8831): `createDataChannel(label:options:)` and `onDataChannel`, on one SCTP
/// association over the same DTLS transport (docs/webrtc.md, "Data channels").
///
/// Thread rule: every method from any thread or task; the callbacks (`onStateChange`,
/// `onLocalCandidate`, and the data channels' `onDataChannel`, `onOpen`, `onMessage`, `onClose`,
/// `onBufferedAmountLow`) run on the connection's private serial queue, one at a time; the
/// first two must not call back into the connection synchronously (the data channel callbacks may
/// call `send` and `close`). Decoded video reaches `videoRenderer` on the
/// receive pipeline's thread, PCM reaches `audioSink` on the playout clock's thread.
/// Cost: one socket; an ICE agent (a few STUN transactions a second); one DTLS handshake (a few
/// ms of CPU); per local track the engine's send stream (encoder thread, pacer for video), and one
/// receive pipeline thread plus one audio playout thread once connected; with a data section,
/// an SCTP association (1 MiB buffers each way) and a share of one process-wide timer thread.
/// Sendable: the queue state (`dtls`, timer, pipeline, playout, feedback...) is used only on `queue` (and in
/// deinit); shared state lives in the `shared` and `agentSlot` Mutexes; the rest are `let`s.
package final class PeerConnection: @unchecked Sendable {
    /// The settings it was made with.
    package let configuration: PeerConnectionConfiguration

    let socket: UDPSocket
    /// The ICE agent, made by the first `createOffer` (controlling) or remote offer (controlled).
    let agentSlot = Mutex<ICEAgent?>(nil)
    package var agent: ICEAgent? { agentSlot.withLock { $0 } }
    /// Serial queue owning `dtls`, the timer and the media objects below.
    let queue = DispatchQueue(label: "revue.peer-connection")
    let queueKey = DispatchSpecificKey<UInt8>()
    /// The DTLS endpoint (its certificate's fingerprint goes into every local description).
    /// Only on `queue`.
    let dtls: DTLSTransport
    let localFingerprint: DTLSFingerprint
    /// The data channels and the SCTP association under them (their state lives on `queue`).
    let dataChannels: PeerConnectionDataChannels

    // MARK: Queue state (only on `queue`)

    var timer: DispatchSourceTimer?
    var pipeline: ReceivePipeline?
    var playout: AudioPlayoutClock?
    var feedback: PeerConnectionFeedback?
    var dtlsStarted = false
    /// While connecting: when the connection fails if it has not connected.
    var connectDeadline: MonotonicTime?
    /// DTLS datagrams that came before the roles or the ICE route were known (the peer's first
    /// flight often does): replayed once both are, instead of waiting for the peer to retransmit
    /// (which cost a loopback connection about 55 ms). At most `maxEarlyDTLS` of at most 2 KiB;
    /// on the queue.
    var earlyDTLS: [(bytes: [UInt8], from: SocketAddress)] = []
    /// The SRTP keys DTLS exported (for tracks that start sending after a renegotiation).
    var srtpKeys: DTLSTransport.SRTPKeys?
    static let maxEarlyDTLS = 8

    // MARK: Shared state (any thread, under `shared`)

    struct Shared {
        var state = PeerConnectionState.new
        var error: PeerConnectionError?
        /// The offer/answer state and the descriptions in force.
        var signalling = PeerConnectionSignalling()
        var tracks: [PeerConnectionLocalTrack] = []
        /// The sections of removed tracks (receive only or inactive now), kept by mid.
        var detached: [JSEPTrack] = []
        /// The mid of the section each local track (by id) has, once a description gave it one.
        var mids: [String: String] = [:]
        /// Our DTLS role, fixed by the first exchange.
        var role: DTLSTransport.Role?
        var gatheringComplete = false
        var onStateChange: (@Sendable (PeerConnectionState) -> Void)?
        var onLocalCandidate: (@Sendable (JSEPCandidate) -> Void)?
        var onGatheringComplete: (@Sendable () -> Void)?
        var onSelectedPairChange: (@Sendable (_ selected: Bool) -> Void)?
        /// Receive-only sections this side offers (no local track), with the mids given to them.
        var receiveOnly: [JSEPTrack] = []
        var videoRenderer: PeerConnectionRendererSlot?
        var audioSink: (any AudioSink)?
        var audioStreamSink: (any AudioStreamSink)?
        var negotiated: PeerConnectionNegotiation?
        /// The answer of the last complete exchange, and whether it is ours.
        var answer: (description: JSEPSessionDescription, isLocal: Bool)?
        var suite: SRTPSuite?
    }
    let shared = Mutex(Shared())
    let cname = "revue-" + ICEAgent.randomICEString(8)
    /// The transport-wide sequence numbers of every local stream, and their send log: what the
    /// peer's transport feedback is matched against.
    let transportNumbers = TransportSequenceNumbers()
    let streamID = "revue-" + ICEAgent.randomICEString(8)

    /// Binds the socket, starts gathering and makes the DTLS certificate. Throws `.setup` when the
    /// socket cannot be bound or OpenSSL fails. Cost: a socket and an ECDSA key (about a millisecond).
    package init(configuration: PeerConnectionConfiguration = PeerConnectionConfiguration()) throws(PeerConnectionError) {
        self.configuration = configuration
        do {
            // A wildcard bind learns where each datagram arrived (its agent answers as that
            // address); "::" carries IPv4 too.
            var options = UDPSocket.Options()
            options.receiveDestinations = configuration.bindAddress.isUnspecified
            options.dualStack = configuration.bindAddress.family == .ipv6 && configuration.bindAddress.isUnspecified
            options.receiveBufferSize = configuration.receiveBufferBytes
            socket = try UDPSocket(bindingTo: configuration.bindAddress, options: options)
        } catch {
            throw .setup("cannot bind \(configuration.bindAddress): \(error)")
        }
        var dtlsConfiguration = DTLSTransport.Configuration(role: configuration.answererRole)
        dtlsConfiguration.srtpProfiles = configuration.srtpProfiles
        dtlsConfiguration.identity = configuration.certificate
        do {
            dtls = try DTLSTransport(configuration: dtlsConfiguration)
        } catch {
            socket.close()
            throw .setup("DTLS: \(error)")
        }
        localFingerprint = dtls.fingerprint
        dataChannels = PeerConnectionDataChannels(queue: queue, queueKey: queueKey)
        queue.setSpecific(key: queueKey, value: 1)
    }

    /// The agent, made on first use: the offerer controls (RFC 8445 §6.1.1). Gathering starts then.
    func makeAgent(controlling: Bool) -> ICEAgent {
        let (agent, made) = agentSlot.withLock { slot in
            if let a = slot { return (a, false) }
            var ice = ICEAgentConfiguration(controlling: controlling)
            ice.servers = configuration.iceServers
            ice.hostAddresses = configuration.hostAddresses
            ice.relayOnly = configuration.relayOnly
            let a = ICEAgent(socket: socket, configuration: ice)
            slot = a
            return (a, true)
        }
        if made { wireTransport(agent) }
        return agent
    }

    deinit {
        // The channels hold their machinery (and it them) until it shuts down: end it on its queue.
        queue.async { [dataChannels] in dataChannels.shutdown() }
        timer?.cancel()
        playout?.stop()
        pipeline?.stop()
        for t in shared.withLock({ $0.tracks }) { t.stop() }
        agent?.close()
        socket.close()
    }

    // MARK: Callbacks and sinks

    /// Called on each state change (on the connection's queue). Set before `setRemoteDescription`.
    package var onStateChange: (@Sendable (PeerConnectionState) -> Void)? {
        get { shared.withLock { $0.onStateChange } }
        set { shared.withLock { $0.onStateChange = newValue } }
    }

    /// Each local candidate as it is gathered (trickle, RFC 8838), on the connection's queue.
    /// Candidates gathered before `createOffer`/`createAnswer` returns are also in the description.
    package var onLocalCandidate: (@Sendable (JSEPCandidate) -> Void)? {
        get { shared.withLock { $0.onLocalCandidate } }
        set { shared.withLock { $0.onLocalCandidate = newValue } }
    }

    /// Where the peer's decoded video goes (called on the receive pipeline's thread). Set before
    /// the connection connects; later changes are not seen.
    package var videoRenderer: (any VideoRenderer)? {
        get { shared.withLock { $0.videoRenderer?.renderer } }
        set {
            let slot = newValue.map(PeerConnectionRendererSlot.init)
            shared.withLock { $0.videoRenderer = slot }
        }
    }

    /// Where the peer's decoded audio goes, 10 ms of 48 kHz PCM at a time (on the playout clock's
    /// thread). Set before the connection connects; later changes are not seen.
    package var audioSink: (any AudioSink)? {
        get { shared.withLock { $0.audioSink } }
        set { shared.withLock { $0.audioSink = newValue } }
    }

    /// Where each remote audio stream's PCM goes, named by its SSRC, when the connection takes
    /// several (`maxAudioStreams` above 1): all of them play on one clock thread. Set before the
    /// connection connects; later changes are not seen.
    package var audioStreamSink: (any AudioStreamSink)? {
        get { shared.withLock { $0.audioStreamSink } }
        set { shared.withLock { $0.audioStreamSink = newValue } }
    }

    // MARK: State

    /// The state now. Thread rule: any thread. Cost: a lock.
    package var state: PeerConnectionState { shared.withLock { $0.state } }

    /// Why the connection failed (nil unless `state` is `.failed`). Thread rule: any thread. Cost: a lock.
    package var error: PeerConnectionError? { shared.withLock { $0.error } }

    /// The local description (made by `createOffer`/`createAnswer`). Thread rule: any thread. Cost: a copy.
    package var localDescription: JSEPSessionDescription? { shared.withLock { $0.signalling.local } }
    /// The remote description last applied. Thread rule: any thread. Cost: a copy.
    package var remoteDescription: JSEPSessionDescription? { shared.withLock { $0.signalling.remote } }

    /// Where the offer/answer exchange stands. Thread rule: any thread. Cost: a lock.
    package var signalingState: PeerConnectionSignalingState { shared.withLock { $0.signalling.state } }

    /// The SRTP profile DTLS agreed (nil before connected). Thread rule: any thread. Cost: a lock.
    package var srtpSuite: SRTPSuite? { shared.withLock { $0.suite } }

    /// The local address of the socket (for logs and tests). Thread rule: any thread. Cost: a system call.
    package var localAddress: SocketAddress? { try? socket.localAddress() }

    /// Waits until the state is `.connected`, `.failed` or `.closed`, or `timeout` seconds pass;
    /// returns the state then. Thread rule: any task. Cost: polls every 20 ms.
    package func waitUntilSettled(timeout: Double) async -> PeerConnectionState {
        let deadline = MonotonicTime.now + .seconds(clamping: max(timeout, 0))
        while true {
            let s = state
            if s == .connected || s == .failed || s == .closed || MonotonicTime.now > deadline { return s }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
    }

    // MARK: Local tracks

    /// Adds a video track sent with `codec` (when the peer accepts it) and returns the capturer its
    /// I420 (or any `PixelFormat`) frames go into, at any rate; frames before the connection is up
    /// are encoded and dropped. `direction` is what our offer asks for its section: `.sendrecv`
    /// (the default, a call) or `.sendonly` (publishing to a server that sends nothing back on this
    /// connection, such as an SFU's publisher leg). Before the first description only. Cost: an
    /// encoder thread and a pacer thread from now until `close`.
    package func addVideoTrack(codec: VPXCodec = .vp8, direction: SDPDirection = .sendrecv) throws(PeerConnectionError)
        -> BufferCapturer
    {
        guard direction == .sendrecv || direction == .sendonly else {
            throw .invalidState("a local track sends: its direction is sendrecv or sendonly")
        }
        let sender = PeerConnectionRTPSender(
            socket: socket, protection: LateSendProtection(midReservedID: PeerConnectionHeaderExtensions.reserved.mid))
        var c = VideoSendStream.Configuration(codec: codec, width: configuration.videoWidth, height: configuration.videoHeight)
        c.lateProtection = sender.protection
        // The ceiling; the encoder starts at the start bitrate (set below as the first estimate),
        // and the estimate moves it up to here.
        c.encoder.bitrate = configuration.effectiveMaximumVideoBitrate
        // The estimate sets the target, which can fall below what the coarsest quantizer makes
        // of a busy picture: libvpx then drops frames (below 30 % of its buffer, libwebrtc's VP8
        // setting) rather than send past the estimate into a full queue.
        c.encoder.frameDropThreshold = VideoSendStream.congestionFrameDropThreshold
        // And smaller pictures when the estimate is too low for the size.
        c.scalesResolution = true
        c.frameEncryption = configuration.videoFrameEncryption
        c.srtp = nil
        // Reserved under our own IDs; the egress writes the negotiated ones (or leaves them out).
        let reserved = PeerConnectionHeaderExtensions.reserved
        c.absSendTimeExtensionID = reserved.absSendTime
        c.transportSequence = (reserved.transportSequence, transportNumbers)
        c.ssrc = freshSSRC()
        // Retransmissions and probe padding on an RTX stream of their own (RFC 4588) when the
        // peer accepts it: the payload type here only reserves the room; the answer's is written.
        if configuration.videoRetransmissionStream {
            c.rtxPayloadType = JSEPNegotiator.offeredCodecs(.video).first { $0.known == .rtx }.map { UInt8($0.payloadType) }
            c.rtxSSRC = freshSSRC(besides: [c.ssrc])
        }
        let stream: VideoSendStream
        do { stream = try VideoSendStream(configuration: c, sink: sender) } catch { throw .setup("\(error)") }
        stream.handleEstimatedBitrate(configuration.videoBitrate)
        let track = PeerConnectionLocalTrack(
            jsep: JSEPTrack(
                kind: .video, id: "video-" + ICEAgent.randomICEString(6), streamID: streamID, ssrc: c.ssrc,
                retransmissionSSRC: c.rtxPayloadType == nil ? nil : c.rtxSSRC, direction: direction),
            codec: codec, video: stream, audio: nil, sender: sender)
        try add(track)
        stream.start()
        return stream.capturer
    }

    /// Adds an Opus audio track (mono, 20 ms frames) and returns the capturer its PCM goes into
    /// (any rate 8-96 kHz, Int16 or Float); PCM before the connection is up is encoded and dropped.
    /// `direction` as for `addVideoTrack`. Before the first description only. Cost: an encoder
    /// thread from now until `close`.
    /// `onSpeakingEvent` receives the track's speaking decisions on its encoder thread (keep it
    /// short; hop to your actor).
    package func addAudioTrack(
        direction: SDPDirection = .sendrecv, onSpeakingEvent: (@Sendable (SpeakingEvent) -> Void)? = nil
    ) throws(PeerConnectionError) -> AudioBufferCapturer {
        guard direction == .sendrecv || direction == .sendonly else {
            throw .invalidState("a local track sends: its direction is sendrecv or sendonly")
        }
        let sender = PeerConnectionRTPSender(
            socket: socket, protection: LateSendProtection(midReservedID: PeerConnectionHeaderExtensions.reserved.mid))
        var c = AudioSendStream.Configuration()
        c.lateProtection = sender.protection
        c.frameEncryption = configuration.audioFrameEncryption
        c.srtp = nil
        let reserved = PeerConnectionHeaderExtensions.reserved
        c.audioLevelExtensionID = reserved.audioLevel
        c.absSendTimeExtensionID = reserved.absSendTime
        c.transportSequence = (reserved.transportSequence, transportNumbers)
        c.ssrc = freshSSRC()
        let stream: AudioSendStream
        do { stream = try AudioSendStream(configuration: c, sink: sender) } catch { throw .setup("\(error)") }
        stream.onSpeakingEvent = onSpeakingEvent
        let track = PeerConnectionLocalTrack(
            jsep: JSEPTrack(
                kind: .audio, id: "audio-" + ICEAgent.randomICEString(6), streamID: streamID, ssrc: c.ssrc, direction: direction),
            codec: nil, video: nil, audio: stream, sender: sender)
        try add(track)
        stream.start()
        return stream.capturer
    }

    private func add(_ track: PeerConnectionLocalTrack) throws(PeerConnectionError) {
        let refused: PeerConnectionError? = shared.withLock {
            guard $0.state != .failed, $0.state != .closed else {
                return .invalidState("the connection is \($0.state.rawValue)")
            }
            $0.tracks.append(track)
            return nil
        }
        if let refused {
            track.stop()
            throw refused
        }
        retargetFeedback()
    }

    /// Stops sending the local track whose capturer `addVideoTrack`/`addAudioTrack` returned: its
    /// send stream stops now (its packets are no longer sent) and the next offer or answer makes
    /// its section receive only (`recvonly`, or `inactive` for a `sendonly` track), so the peer
    /// learns it on the next exchange (call `createOffer`). Throws `.invalidState` for a capturer
    /// that is not one of this connection's live tracks. Thread rule: any thread but the
    /// connection's callbacks. Cost: joins the track's encoder thread.
    package func removeTrack(_ capturer: AnyObject) throws(PeerConnectionError) {
        let removed: PeerConnectionLocalTrack? = shared.withLock { s in
            guard let i = s.tracks.firstIndex(where: { $0.capturer === capturer }) else { return nil }
            let t = s.tracks.remove(at: i)
            if let mid = s.mids[t.jsep.id] {
                var section = t.jsep
                section.mid = mid
                section.direction = t.jsep.direction == .sendonly ? .inactive : .recvonly
                s.detached.append(section)
            }
            return t
        }
        guard let removed else { throw .invalidState("no live local track has this capturer") }
        removed.stop()
        retargetFeedback()
    }

    /// On the queue: the peer's RTCP feedback goes to the live tracks' streams.
    private func retargetFeedback() {
        onQueue { self.feedback?.replaceTargets(self.shared.withLock { $0.tracks }.map(\.feedbackTarget)) }
    }

    /// Mutes or unmutes the live local track whose capturer `addVideoTrack`/`addAudioTrack`
    /// returned: while muted its packets are discarded before protection (the stream keeps
    /// encoding, so unmuting is immediate; a video track then sends a keyframe at once). Throws
    /// `.invalidState` for a capturer that is not a live track. Thread rule: any thread. Cost: an
    /// atomic store.
    package func setMuted(_ capturer: AnyObject, _ muted: Bool) throws(PeerConnectionError) {
        guard let track = shared.withLock({ $0.tracks.first { $0.capturer === capturer } }) else {
            throw .invalidState("no live local track has this capturer")
        }
        let was = track.sender.isMuted.exchange(muted, ordering: .relaxed)
        if was, !muted { track.video?.requestKeyframe() }
    }

    /// The sections our descriptions describe: every live track (with the mid a description gave
    /// it) and the sections of removed tracks.
    static func transceivers(_ s: Shared) -> [JSEPTrack] {
        s.tracks.map { t in
            var j = t.jsep
            j.mid = s.mids[j.id]
            return j
        } + s.detached + s.receiveOnly
    }

    /// Records the mid of each live track's section in `description` (ours).
    static func recordMids(_ description: JSEPSessionDescription, in s: inout Shared) {
        for m in description.media where !m.isRejected {
            guard let mid = m.mid, let id = m.mediaStreamIDs.first?.track, s.tracks.contains(where: { $0.jsep.id == id })
            else { continue }
            s.mids[id] = mid
        }
    }

    /// A random SSRC none of our tracks uses (every stream is protected under one key: AES-GCM's
    /// IV comes from the SSRC and index, RFC 7714 §8.1, so two streams must never share one).
    /// `besides`: SSRCs taken for a track not added yet.
    func freshSSRC(besides: [UInt32] = []) -> UInt32 {
        let used = Set(shared.withLock { $0.tracks.flatMap { [$0.jsep.ssrc] + ($0.jsep.retransmissionSSRC.map { [$0] } ?? []) } })
        while true {
            let s = RandomBytes.ssrc()
            if s != 0, !used.contains(s), !besides.contains(s) { return s }
        }
    }

    // MARK: Offer and answer

    /// Makes our offer (every local track in its direction; `a=setup:actpass`; ICE credentials,
    /// the DTLS fingerprint and the candidates gathered within `gatheringTimeoutSeconds`) and sets
    /// it as the local description. After a complete exchange it is a renegotiation: earlier
    /// sections keep their mids, new tracks get new sections, removed ones become receive only.
    /// Thread rule: any task. Cost: waits for gathering (host candidates at once; server-reflexive
    /// and relayed after a round trip).
    package func createOffer() async throws(PeerConnectionError) -> JSEPSessionDescription {
        try checkSignalling(offer: true)
        let agent = makeAgent(controlling: true)
        await waitForGathering()
        if shared.withLock({ $0.signalling.takeOfferRestart(transportExists: $0.role != nil) }) {
            agent.restartLocalCredentials()
        }
        let transport = transportParameters(agent)
        let offersData = offersDataChannel(previous: shared.withLock { $0.signalling.local })
        return try shared.withLock { s throws(PeerConnectionError) in
            guard s.state != .failed, s.state != .closed else { throw .invalidState("the connection is \(s.state.rawValue)") }
            let offer = JSEPNegotiator.createOffer(
                tracks: Self.transceivers(s), transport: transport, previous: s.signalling.local,
                dataChannel: offersData ? dataChannelParameters : nil)
            try s.signalling.madeOffer(offer)
            Self.recordMids(offer, in: &s)
            return offer
        }
    }

    /// Answers the remote offer set with `setRemoteDescription` and sets the answer as the local
    /// description; this side takes `configuration.answererRole` in DTLS when the offer said
    /// `actpass`. Media starts once ICE and DTLS are done. Thread rule: any task. Cost: as
    /// `createOffer`.
    package func createAnswer() async throws(PeerConnectionError) -> JSEPSessionDescription {
        try checkSignalling(offer: false)
        let agent = makeAgent(controlling: false)
        await waitForGathering()
        let (tracks, remote, previous, current) = shared.withLock {
            (Self.transceivers($0), $0.signalling.remote!, $0.signalling.local, $0.role)
        }
        if let current, previous != nil {
            // A renegotiation: the transport stays, and so does our DTLS role (an offer that
            // restarted ICE gave us new credentials already, in `setRemoteDescription`).
            var answer = JSEPNegotiator.createAnswer(
                to: remote, tracks: tracks, transport: transportParameters(agent), previous: previous,
                dataChannel: dataChannelParameters)
            let setup: JSEPSetupRole = current == .active ? .active : .passive
            for i in answer.media.indices where !answer.media[i].isRejected { answer.media[i].setup = setup }
            if answer.setup != nil { answer.setup = setup }
            try shared.withLock { s throws(PeerConnectionError) in
                try s.signalling.madeAnswer(answer)
                Self.recordMids(answer, in: &s)
            }
            onQueue { self.applyNegotiation(answer: answer, answerIsLocal: true) }
            return answer
        }
        var answer = JSEPNegotiator.createAnswer(
            to: remote, tracks: tracks, transport: transportParameters(agent), previous: nil, dataChannel: dataChannelParameters)
        guard
            let first = answer.media.firstIndex(where: {
                !$0.isRejected && ($0.kind == .audio || $0.kind == .video || $0.isDataChannel)
            })
        else {
            throw .invalidDescription("the offer has no audio, video or data channel section this engine can accept")
        }
        let offered = remote.effectiveSetup(of: remote.media[first]) ?? .actpass
        let role: DTLSTransport.Role
        switch offered {
        case .active: role = .passive
        case .passive: role = .active
        default: role = configuration.answererRole
        }
        let setup: JSEPSetupRole = role == .active ? .active : .passive
        for i in answer.media.indices where !answer.media[i].isRejected { answer.media[i].setup = setup }
        if answer.setup != nil { answer.setup = setup }
        try shared.withLock { s throws(PeerConnectionError) in
            try s.signalling.madeAnswer(answer)
            Self.recordMids(answer, in: &s)
        }
        try startTransport(answer: answer, answerIsLocal: true, role: role)
        return answer
    }

    /// Applies the peer's description: an offer (then call `createAnswer`) or the answer to our
    /// offer (then ICE checks and DTLS start). Its candidates go to the ICE agent, its fingerprint
    /// to DTLS. Throws `.invalidDescription` for one without usable media, ICE credentials or a
    /// SHA-256 fingerprint, `.invalidState` out of order. Thread rule: any task. Cost: small.
    package func setRemoteDescription(_ description: JSEPSessionDescription) async throws(PeerConnectionError) {
        // Everything is checked before anything is kept: a refused description changes nothing.
        let usable = description.media.first { !$0.isRejected && ($0.kind == .audio || $0.kind == .video || $0.isDataChannel) }
        guard let section = usable else {
            throw .invalidDescription("no audio, video or data channel section")
        }
        guard let ice = description.effectiveICE(of: section) else { throw .invalidDescription("no a=ice-ufrag/a=ice-pwd") }
        guard let fp = description.effectiveFingerprints(of: section).first(where: { $0.algorithm.lowercased() == "sha-256" }),
            let fingerprint = DTLSFingerprint(bytes: fp.bytes)
        else { throw .invalidDescription("no sha-256 a=fingerprint") }
        var role: DTLSTransport.Role?
        if description.type == .answer {
            switch description.effectiveSetup(of: section) {
            case .active: role = .passive
            case .passive: role = .active
            default: throw .invalidDescription("the answer's a=setup must be active or passive")
            }
        }
        let change = try shared.withLock { s throws(PeerConnectionError) -> PeerConnectionSignalling.RemoteChange in
            guard s.state != .failed, s.state != .closed else { throw .invalidState("the connection is \(s.state.rawValue)") }
            // A renegotiation keeps the transport: the same certificate, and the same ICE
            // credentials unless the peer restarts ICE (RFC 8445 §9).
            return try s.signalling.setRemote(description, ice: ice, fingerprint: fp.bytes, transportExists: s.role != nil)
        }
        if change.renegotiation {
            let agent = makeAgent(controlling: description.type == .answer)
            // The peer's new generation: its old candidates go, media stays on the pair in use
            // while that answers, and moves once a new pair works.
            if change.restartsICE {
                // The peer's restart offer: our new credentials first, so no check of the new
                // generation goes out under the old ones (the peer would refuse it with 401).
                if shared.withLock({ $0.signalling.takeAnswerRestart() }) { agent.restartLocalCredentials() }
                agent.setRemoteCredentials(ufrag: ice.usernameFragment, password: ice.password, keepingRoute: true)
            }
            for m in description.media where !m.isRejected {
                for c in m.candidates { if let ic = c.iceCandidate { agent.addRemoteCandidate(ic) } }
            }
            if description.type == .answer { onQueue { self.applyNegotiation(answer: description, answerIsLocal: false) } }
            return
        }
        onQueue { self.dtls.setRemoteFingerprint(fingerprint) }
        let agent = makeAgent(controlling: description.type == .answer)
        agent.setRemoteCredentials(ufrag: ice.usernameFragment, password: ice.password)
        var seen = Set<String>()
        for m in description.media where !m.isRejected {
            for c in m.candidates where seen.insert(c.value).inserted {
                if let ic = c.iceCandidate { agent.addRemoteCandidate(ic) }
            }
        }
        if let role {
            try startTransport(answer: description, answerIsLocal: false, role: role)
        }
    }

    /// Asks for an ICE restart (RFC 8445 §9, RFC 8829 §4.1.7): the next `createOffer` carries new
    /// ICE credentials, and once the peer's answer brings its new ones, fresh checks run over
    /// every candidate pair. Media goes on meanwhile over the pair in use while that still
    /// answers, and moves to a new pair within the failover time when it does not (a path that
    /// changed). Before the first exchange it does nothing. A peer's offer that restarts ICE is
    /// followed without it (`setRemoteDescription`, then `createAnswer`). Thread rule: any thread.
    /// Cost: nothing until the next offer.
    package func restartIce() {
        shared.withLock { $0.signalling.requestICERestart() }
    }

    /// A candidate the peer trickled (`candidate:...` text parsed into a `JSEPCandidate`), after
    /// its description (`.invalidState` before, as in the W3C API). TCP candidates and mDNS names
    /// are ignored. Thread rule: any thread. Cost: small.
    package func addIceCandidate(_ candidate: JSEPCandidate) throws(PeerConnectionError) {
        guard shared.withLock({ $0.signalling.remote != nil }), let agent else {
            throw .invalidState("a candidate needs the remote description first")
        }
        if let c = candidate.iceCandidate { agent.addRemoteCandidate(c) }
    }

    /// Ends the connection: stops media, sends DTLS close_notify, stops ICE, closes the socket.
    /// Idempotent; the state becomes `.closed` (a failed connection stays `.failed`).
    /// Thread rule: any thread but the connection's callbacks. Cost: joins the media threads.
    package func close() {
        let tracks = shared.withLock { $0.tracks }
        for t in tracks { t.stop() }
        onQueue {
            self.dataChannels.shutdown()
            self.timer?.cancel()
            self.timer = nil
            self.playout?.stop()
            self.playout = nil
            self.pipeline?.stop()
            self.pipeline = nil
            self.dtls.close()
        }
        agent?.close()
        socket.close()
        setState(.closed, error: nil)
    }

    /// Counters of the receive side (nil before connected). Thread rule: any thread (waits for the connection's queue). Cost: a copy.
    package var receiveStatistics: ReceivePipelineStatistics? {
        var out: ReceivePipelineStatistics?
        onQueue { out = self.pipeline?.statistics }
        return out
    }

    /// W3C inbound-rtp statistics of every stream received (empty before connected).
    /// Thread rule: any thread (waits for the connection's queue). Cost: a copy.
    package var inboundStats: [InboundRTPStreamStats] {
        var out: [InboundRTPStreamStats] = []
        onQueue { out = self.pipeline?.inboundStats ?? [] }
        return out
    }

    /// Packets each local track handed to the network, and dropped before keys or a route existed.
    /// Thread rule: any thread. Cost: a lock per track.
    package var sentPackets: (sent: Int, dropped: Int) {
        shared.withLock { $0.tracks }.reduce((0, 0)) { acc, t in
            let c = t.sender.counts
            return (acc.0 + c.sent, acc.1 + c.dropped)
        }
    }

    /// What the local tracks of one kind handed to the network (SRTP packets and their bytes)
    /// and dropped before keys or a route existed. Thread rule: any thread. Cost: a lock per track.
    package func sentTraffic(_ kind: JSEPMediaKind) -> (packets: Int, bytes: Int, dropped: Int) {
        shared.withLock { $0.tracks }.filter { $0.jsep.kind == kind }.reduce((0, 0, 0)) { acc, t in
            let c = t.sender.traffic
            return (acc.0 + c.packets, acc.1 + c.bytes, acc.2 + c.dropped)
        }
    }

    /// Our send-side bandwidth estimate now (bits per second; the target the video encoders are
    /// held to): loss from receiver reports, the peer's REMB as a cap and, when transport-cc was
    /// negotiated, the delay-based estimate from the peer's transport feedback. Nil before
    /// connected. Thread rule: any thread (waits for the connection's queue). Cost: a lock.
    package var sendBandwidthEstimate: Int? {
        var out: Int?
        onQueue { out = self.feedback?.targetBitrate }
        return out
    }

    /// Transport feedback packets the peer sent about our packets (nil before connected).
    /// Thread rule: any thread (waits for the connection's queue). Cost: a lock.
    package var transportFeedbackReceived: Int? {
        var out: Int?
        onQueue { out = self.feedback?.transportFeedbackReceived }
        return out
    }

    /// The send statistics of the first video track (frames encoded, packets sent, keyframes,
    /// NACK/PLI counts); nil without one. Thread rule: any thread. Cost: a lock per stream.
    package var videoSendStatistics: VideoSendStream.Statistics? {
        shared.withLock { $0.tracks }.first { $0.video != nil }?.video?.statistics
    }

    // MARK: Helpers

    private func checkSignalling(offer: Bool) throws(PeerConnectionError) {
        try shared.withLock { s throws(PeerConnectionError) in
            guard s.state != .failed, s.state != .closed else { throw .invalidState("the connection is \(s.state.rawValue)") }
            try s.signalling.check(offer: offer)
        }
    }

    private func waitForGathering() async {
        let deadline = MonotonicTime.now + .seconds(clamping: max(configuration.gatheringTimeoutSeconds, 0))
        while !shared.withLock({ $0.gatheringComplete }) && MonotonicTime.now < deadline {
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
    }

    private func transportParameters(_ agent: ICEAgent) -> JSEPTransportParameters {
        let candidates = agent.localCandidates.map { JSEPCandidate($0) }
        return JSEPTransportParameters(
            ice: JSEPICEParameters(usernameFragment: agent.localUfrag, password: agent.localPassword),
            fingerprints: [JSEPFingerprint(algorithm: "sha-256", bytes: localFingerprint.bytes)],
            candidates: candidates, endOfCandidates: shared.withLock { $0.gatheringComplete }, cname: cname)
    }

    /// Runs `body` on the queue now: directly when already on it, else with `sync`.
    func onQueue(_ body: () -> Void) {
        if DispatchQueue.getSpecific(key: queueKey) != nil { body() } else { queue.sync(execute: body) }
    }

    /// Moves to `new` (never out of `.failed`/`.closed`, and never back to `.new`) and tells
    /// `onStateChange` on the queue.
    func setState(_ new: PeerConnectionState, error: PeerConnectionError?) {
        let callback: (@Sendable (PeerConnectionState) -> Void)?? = shared.withLock { s in
            guard s.state != new, s.state != .failed, s.state != .closed else { return nil }
            s.state = new
            if let error { s.error = error }
            return .some(s.onStateChange)
        }
        if case .some(let cb?) = callback { queue.async { cb(new) } }
    }
}

/// A renderer handed between threads: the app sets it, the receive pipeline calls it on its own
/// thread (the renderer's thread rule). Thread rule: immutable.
/// Sendable: the slot only carries the reference; the engine calls the renderer only on its pipeline's thread.
struct PeerConnectionRendererSlot: @unchecked Sendable {
    let renderer: any VideoRenderer
}
