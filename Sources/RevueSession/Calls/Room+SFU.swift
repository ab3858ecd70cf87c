// Calls through an SFU: with `RoomOptions.sfu` set, the call's signalling stays on the friend
// channels (invitations, participants, tracks, mutes, modes, messages, speaking) but the media
// goes through a Janus VideoRoom: each participant publishes its tracks once on one WebRTC
// connection to Janus and receives every other participant's feed on one more: a single
// multistream subscription whose sections Janus adds and removes by renegotiation as
// participants come and go.
// Which feed belongs to which participant is said by the participant itself, over the encrypted
// friend channel (never taken from Janus's display names), together with its SFrame key (RFC
// 9605) when the call is end-to-end encrypted. docs/session.md "Calls through an SFU".
import Dispatch
internal import MediaCore
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A Janus server (its VideoRoom plugin) that carries a call's media instead of a mesh.
///
/// Every participant of the call must configure the same server URL and room: a participant whose
/// friend uses another one (or none) gets `callDidFailWithError(.mediaSetupFailed)` for that
/// friend and no media with it. The room is created on the server by whoever joins it first, with
/// `roomSecret` and `pin` when they are set. Credentials the server refuses (a wrong `apiSecret`,
/// `token` or `pin`) and a certificate that does not check end the call's SFU media at once with
/// `.mediaSetupFailed` naming the reason. The credentials stay on this device: participants
/// compare only the URL, the room and the encryption setting.
public struct SFUServer: Sendable, Hashable {
    /// The server's API: `http://` or `https://` (the REST API, for example
    /// `https://janus.example.org/janus`) or `ws://` or `wss://` (the WebSocket API, for example
    /// `wss://janus.example.org:8989/`); a host name, `localhost` or a numeric address (IPv6 in
    /// brackets), the port (80 or 443 when absent) and the path (`/janus` for HTTP, `/` for
    /// WebSocket when absent). A host name is resolved when the call starts.
    public var url: String
    /// The VideoRoom room number (1 to 2^53-1, a JSON number Janus keeps exactly).
    public var room: UInt64
    /// Whether each frame is encrypted end to end with SFrame (RFC 9605, AES-128-GCM) before it
    /// reaches the server, with keys that only the call's participants hold. On by default; off
    /// lets a plain WebRTC subscriber (a browser) decode the media.
    public var endToEndEncryption: Bool
    /// The server's `api_secret` (Janus's `general.api_secret`), sent with every request; nil
    /// when the server has none.
    public var apiSecret: String?
    /// A token of the server's stored-token authentication (`general.token_auth`, tokens added
    /// through its admin API), sent with every request; nil when the server does not ask for one.
    public var token: String?
    /// The room's `secret`, set when this participant creates the room (needed to destroy or
    /// edit it); nil: none.
    public var roomSecret: String?
    /// The room's `pin`: needed to join it, and set when this participant creates it; nil: none.
    public var pin: String?
    /// A PEM file of the CA certificates that `https` and `wss` servers are checked against; nil:
    /// the system's CA store. The certificate must also name the URL's host.
    public var certificateAuthorityFile: String?

    /// A server and room; end-to-end encryption on unless you say otherwise; no credentials.
    /// Cost: none.
    public init(url: String, room: UInt64, endToEndEncryption: Bool = true) {
        self.url = url
        self.room = room
        self.endToEndEncryption = endToEndEncryption
    }

    /// A server and room with credentials: the server's `apiSecret` or `token`, the room's
    /// `roomSecret` and `pin`, and the CA file for `https`/`wss` (nil: the system's). Cost: none.
    public init(
        url: String, room: UInt64, endToEndEncryption: Bool = true, apiSecret: String? = nil, token: String? = nil,
        roomSecret: String? = nil, pin: String? = nil, certificateAuthorityFile: String? = nil
    ) {
        self.init(url: url, room: room, endToEndEncryption: endToEndEncryption)
        self.apiSecret = apiSecret
        self.token = token
        self.roomSecret = roomSecret
        self.pin = pin
        self.certificateAuthorityFile = certificateAuthorityFile
    }

    /// Whether `url` and `room` are a server this client can reach (an `http`, `https`, `ws` or
    /// `wss` URL with a host, a room from 1 to 2^53-1). Nothing is resolved or connected. Cheap.
    public var isUsable: Bool { endpoint() != nil }

    /// How participants compare their servers in the friend channel (no credentials).
    var identifier: String { "\(url)#\(room)#\(endToEndEncryption ? "e2ee" : "clear")" }

    /// The server's endpoint with the credentials, or nil when `url` or `room` is not usable.
    func endpoint() -> JanusEndpoint? {
        guard room > 0, room < 1 << 53 else { return nil }
        return try? JanusEndpoint(
            url: url, certificateAuthorityFile: certificateAuthorityFile, apiSecret: apiSecret, token: token)
    }
}

/// Our one subscription at the SFU (main actor): a VideoRoom subscriber handle and the WebRTC
/// connection Janus sends every subscribed feed on, one section per stream. Decoded video and
/// audio are routed by SSRC to the participant whose stream the section carries.
final class SFUSubscriber {
    let handle: JanusVideoRoom
    let connection: PeerConnection
    let video = SSRCRouter<RendererSwitch>()
    let audio = SSRCRouter<AudioSinkSwitch>()
    /// Every section of the subscription by mid, as Janus last described it.
    var streams: [String: JanusSubscriberStream] = [:]
    /// Each section's media SSRC in Janus's last offer, by mid.
    var ssrcs: [String: UInt32] = [:]
    /// An offer Janus made on its own (a publisher left), waiting for the next pass to answer it.
    var pending: JanusSubscriberUpdate?
    var events: Task<Void, Never>?

    init(handle: JanusVideoRoom, connection: PeerConnection) {
        self.handle = handle
        self.connection = connection
    }

    /// The feeds the subscription carries now.
    var feeds: Set<UInt64> { Set(streams.values.filter(\.active).compactMap(\.feed)) }

    /// Takes Janus's description of the subscription: its streams and, when it made one, its
    /// offer, which the connection applies and answers.
    @MainActor func apply(_ update: JanusSubscriberUpdate) async throws {
        if let sdp = update.sdp {
            let offer = try JSEPSessionDescription(parsing: sdp, type: .offer)
            try await connection.setRemoteDescription(offer)
            let answer = try await connection.createAnswer()
            try await handle.start(answer: answer.sdp)
            for m in offer.media {
                guard let mid = m.mid else { continue }
                ssrcs[mid] = m.isRejected ? nil : m.sendingSSRCs.first?.media
            }
        }
        if !update.streams.isEmpty { streams = Dictionary(update.streams.map { ($0.mid, $0) }, uniquingKeysWith: { $1 }) }
    }

    func close() {
        events?.cancel()
        connection.close()
        let handle = handle
        Task { try? await handle.detach() }
    }
}

/// One remote participant's feed as we receive it from the SFU: the sections of our subscription
/// that carry it, and the switches its decoded media goes through to the App. Main actor.
final class SFUSubscription {
    let feed: UInt64
    let videoOut = RendererSwitch()
    let audioOut = AudioSinkSwitch()
    /// The mid of each kind's section, and whether Janus forwards it now (a track the App
    /// unsubscribed from is paused at the server, not only at our sink).
    var mids: [TrackKind: String] = [:]
    var forwarding: [TrackKind: Bool] = [:]
    /// The media SSRCs of its sections (its share of the connection's statistics).
    var ssrcs: Set<UInt32> = []
    /// When the participant's expected tracks last delivered a packet (`Room.mediaStarved`).
    var arrivals = ArrivalWatch()
    /// Set when the feed's streams changed (a camera turned on or off): Janus does not add the
    /// new stream to a subscription, so the feed is unsubscribed and subscribed again.
    var stale = false

    init(feed: UInt64) { self.feed = feed }
}

/// Which participant's switch each stream of a multistream connection goes to, by SSRC, for
/// decoded frames (`VideoRenderer`) or PCM (`AudioStreamSink`). Thread rule: the media calls on
/// the pipeline's or the playout thread, `routes` from any thread. Cost: one lock and a
/// dictionary lookup per frame, or per stream every 10 ms.
final class SSRCRouter<Target: AnyObject & Sendable>: Sendable {
    private let table = Mutex<[UInt32: Target]>([:])
    var routes: [UInt32: Target] {
        get { table.withLock { $0 } }
        set { table.withLock { $0 = newValue } }
    }
    func target(_ ssrc: UInt32) -> Target? { table.withLock { $0[ssrc] } }
}

extension SSRCRouter: VideoRenderer where Target == RendererSwitch {
    func render(_ frame: DecodedVideoFrame) { target(frame.ssrc)?.render(frame) }
}

extension SSRCRouter: AudioStreamSink where Target == AudioSinkSwitch {
    func play(_ samples: Span<Int16>, sampleRate: Int, channels: Int, ssrc: UInt32) {
        target(ssrc)?.play(samples, sampleRate: sampleRate, channels: channels)
    }
}

/// The local participant's side of a call through an SFU (main actor): the Janus session, the
/// publisher handle and connection, the subscriptions, the frame keys.
final class SFUMedia {
    let server: SFUServer
    let endpoint: JanusEndpoint
    var session: JanusSession?
    var handle: JanusVideoRoom?
    var privateID: UInt64 = 0
    /// Our feed id in the room (announced to the participants).
    var feed: UInt64?
    /// The connection our tracks go out on (nil while we publish nothing), and the track kinds
    /// Janus has agreed to in the last exchange.
    var publisher: PeerConnection?
    var negotiated: Set<TrackKind> = []
    /// Capturers of our tracks on `publisher`.
    var capturers: [TrackKind: AnyObject] = [:]
    /// Feeds Janus says are publishing now, with the codecs of each (what changes when a
    /// publisher adds or removes a track).
    var liveFeeds: [UInt64: [String]] = [:]
    /// The feed each remote participant announced; our subscription, and each participant's
    /// share of it.
    var remoteFeeds: [String: UInt64] = [:]
    var subscriber: SFUSubscriber?
    var subscriptions: [String: SFUSubscription] = [:]
    /// Failed subscription exchanges in a row.
    var subscribeFailures = 0
    /// Set once the server could not be reached or refused us (the reason).
    var failure: String?
    var working = false, dirty = false, closed = false
    var events: Task<Void, Never>?
    /// Follows the session's link (`JanusSession.link`): a reclaimed session is checked against
    /// the room, a lost one rebuilt.
    var linkEvents: Task<Void, Never>?
    /// Breaks of the connection to Janus, sessions reclaimed after one, and sessions rebuilt
    /// because the server had dropped them, during this call.
    var interruptions = 0, reclaims = 0, rebuilds = 0
    /// Attempts to join again after the session was lost, with a doubling delay; nil while no
    /// rebuild is under way.
    var rebuild: JanusReconnectPlan?
    /// How long after a lost session joining again is tried before the participants are told.
    static let rebuildWindow = Duration.seconds(60)

    /// End-to-end encryption: our senders (one key ID per track kind, one base key), the base key
    /// and key IDs announced, and the receiver holding every participant's keys (each frame
    /// names its key by ID; a participant may not claim IDs another one holds, and a stream's
    /// frames decrypt only under the IDs of the participant whose feed the server says it is).
    let video: SFrameSender?, audio: SFrameSender?
    var baseKey: [UInt8] = []
    var keyIDs: (video: UInt64, audio: UInt64) = (0, 0)
    /// Keys made (the first is 1) and the last one our senders switched to: they differ while a
    /// new key is announced and not yet used, so a participant joining then can be given it.
    var keyGeneration = 1, keyGenerationInUse = 1
    let frames: SFrameReceiver?
    /// Key IDs each participant announced, oldest first (the two latest generations are kept).
    var remoteKeyIDs: [String: [UInt64]] = [:]
    static let suite = SFrameCipherSuite.aes128GCMSHA256_128
    /// Most publishers in a room we create.
    static let maxPublishers = 64

    init?(server: SFUServer) {
        guard let e = server.endpoint() else { return nil }
        self.server = server
        endpoint = e
        if server.endToEndEncryption {
            baseKey = RandomBytes.bytes(16)
            keyIDs = Self.freshKeyIDs()
            video = try? SFrameSender(suite: Self.suite, keyID: keyIDs.video, baseKey: baseKey)
            audio = try? SFrameSender(suite: Self.suite, keyID: keyIDs.audio, baseKey: baseKey)
            // Two key IDs per participant, for two generations each (the one in flight while a
            // rotation takes effect). Each stream of the subscription is bound to the key IDs of
            // the participant whose feed it carries (`sfuBindSenders`).
            frames = SFrameReceiver(suite: Self.suite, maxKeys: 4 * Self.maxPublishers, bindsSenders: true)
        } else {
            video = nil
            audio = nil
            frames = nil
        }
    }

    /// Two distinct random key IDs below 2^32 (short SFrame headers; exact in JSON).
    static func freshKeyIDs() -> (video: UInt64, audio: UInt64) {
        let v = UInt64(RandomBytes.uint32())
        var a = UInt64(RandomBytes.uint32())
        while a == v { a = UInt64(RandomBytes.uint32()) }
        return (v, a)
    }
}

extension Room {
    /// Whether the call's media goes through an SFU.
    var usesSFU: Bool { callSFU != nil }
    /// The SFU the current call uses (`RoomSFULeg.server`).
    var callSFU: SFUServer? { sfuLeg.server }
    /// The call's media through an SFU (`RoomSFULeg.media`), instead of `legs` and `localMedia`.
    var sfu: SFUMedia? {
        get { sfuLeg.media }
        set { sfuLeg.media = newValue }
    }

    /// The SFU side of the call, made when the call starts (nil without `options.sfu`).
    @discardableResult
    func ensureSFU() -> SFUMedia? {
        if let sfu { return sfu }
        guard joined, let server = callSFU else { return nil }
        guard let s = SFUMedia(server: server) else {
            for id in remoteParticipants.keys {
                sfuFailed(
                    "\(server.url) is not an http, https, ws or wss URL with a host, or room \(server.room) is out of range",
                    for: id)
            }
            return nil
        }
        sfu = s
        sfuReconcile()
        return s
    }

    func sfuFailed(_ detail: String, for id: String) {
        post(
            nil, room: { $1.room($0, callDidFailWithError: .mediaSetupFailed(participant: id, detail: detail)) }, participant: nil
        )
    }

    /// The WebRTC connection settings toward Janus.
    func sfuConnectionConfiguration(_ sfu: SFUMedia) -> PeerConnectionConfiguration {
        var c = PeerConnectionConfiguration()
        c.videoWidth = options.videoWidth
        c.videoHeight = options.videoHeight
        c.videoBitrate =
            VideoSendStream.Configuration(codec: .vp8, width: options.videoWidth, height: options.videoHeight).encoder
            .bitrate
        c.iceServers = core?.callICEServers ?? []
        c.gatheringTimeoutSeconds = 2
        c.connectTimeoutSeconds = 15
        c.videoFrameEncryption = sfu.video
        c.audioFrameEncryption = sfu.audio
        return c
    }

    // MARK: Local tracks

    /// Adds a local track to the publisher connection (made on the first track); the capturer.
    func sfuTrackPublished(_ pub: LocalTrackPublication, _ sfu: SFUMedia) -> TrackPublishError? {
        do {
            let pc = try sfu.publisher ?? PeerConnection(configuration: sfuConnectionConfiguration(sfu))
            sfu.publisher = pc
            switch pub.kind {
            case .video:
                let capturer = try pc.addVideoTrack(codec: .vp8, direction: .sendonly)
                pub.videoCapturer = capturer
                sfu.capturers[.video] = capturer
            case .audio:
                let capturer = try pc.addAudioTrack(direction: .sendonly) { [weak self] e in
                    DispatchQueue.main.async {
                        MainActor.assumeIsolated { self?.localSpeaking(e.isSpeaking, levelDbov: e.levelDbov) }
                    }
                }
                pub.audioCapturer = capturer
                sfu.capturers[.audio] = capturer
            }
            if pub.isMuted, let c = sfu.capturers[pub.kind] { try pc.setMuted(c, true) }
        } catch {
            return .mediaSetupFailed(detail: "\(error)")
        }
        sfuReconcile()
        return nil
    }

    func sfuTrackUnpublished(_ pub: LocalTrackPublication, _ sfu: SFUMedia) {
        if let c = sfu.capturers.removeValue(forKey: pub.kind) {
            try? sfu.publisher?.removeTrack(c)
        }
        sfuReconcile()
    }

    func sfuTrackMuteChanged(_ pub: LocalTrackPublication, _ sfu: SFUMedia) {
        if let c = sfu.capturers[pub.kind] { try? sfu.publisher?.setMuted(c, pub.isMuted) }
    }

    // MARK: Signals

    /// Tells participants our server, feed and frame key (`adr sfu`); to everyone when `to` is nil.
    func sfuAnnounce(_ sfu: SFUMedia, to ids: [String]? = nil) {
        guard let feed = sfu.feed else { return }
        var s = CallSignal(type: "adr", op: CallSignal.Op.sfu)
        s.sfu = sfu.server.identifier
        s.feed = String(feed)
        if sfu.server.endToEndEncryption {
            s.key = Data(sfu.baseKey).base64EncodedString()
            s.kids = [sfu.keyIDs.video, sfu.keyIDs.audio]
        }
        for id in ids ?? Array(remoteParticipants.keys) { send(s, to: id) }
    }

    /// A participant's `adr sfu`: its server (must be ours), its feed, its frame keys.
    func receiveSFUSignal(_ s: CallSignal, from id: String) {
        guard remoteParticipants[id] != nil else {
            // Its sender counts us in the call already; we will count it in a moment.
            if joined { sfuLeg.keepEarly(s, from: id) }
            return
        }
        guard let sfu = ensureSFU(), s.sfu == sfu.server.identifier else {
            return sfuFailed(
                "the participant's media goes through \(s.sfu ?? "another server"), ours \(callSFU?.identifier ?? "peer to peer")",
                for: id)
        }
        guard let feedText = s.feed, let feed = UInt64(feedText) else { return }
        // One feed, one participant: a second claim would have its media shown as the claimant's.
        guard !sfu.remoteFeeds.contains(where: { $0.key != id && $0.value == feed }) else {
            return refuse(id, answer: false)
        }
        if sfu.server.endToEndEncryption {
            guard let key = s.key.flatMap({ Data(base64Encoded: $0) }), key.count == 16, let kids = s.kids, kids.count == 2,
                kids[0] != kids[1], let receiver = sfu.frames,
                !sfu.remoteKeyIDs.contains(where: { $0.key != id && $0.value.contains(where: kids.contains) })
            else { return refuse(id, answer: false) }
            var held = sfu.remoteKeyIDs[id] ?? []
            if !held.contains(kids[0]) {
                // Keys of older generations go; the previous one stays for frames still in flight.
                while held.count > 2 { receiver.removeKey(keyID: held.removeFirst()) }
                do {
                    for kid in kids { try receiver.addKey(keyID: kid, baseKey: [UInt8](key)) }
                } catch {
                    return refuse(id, answer: false)
                }
                held += kids
                sfu.remoteKeyIDs[id] = held
                sfuBindSenders(sfu)
            }
        }
        if sfu.remoteFeeds[id] != feed {
            sfu.remoteFeeds[id] = feed
            sfuReconcile()
        }
    }

    /// A participant left: its subscription ends, and our frame key changes so that it cannot
    /// decrypt what we send from now on (if it kept receiving from the server). The new key goes
    /// to the remaining participants first; our senders switch to it a second later.
    func sfuParticipantLeft(_ id: String, _ sfu: SFUMedia) {
        sfu.subscriptions[id] = nil
        sfu.remoteFeeds[id] = nil
        for kid in sfu.remoteKeyIDs.removeValue(forKey: id) ?? [] { sfu.frames?.removeKey(keyID: kid) }
        sfuReconcile()
        guard sfu.server.endToEndEncryption, linkLeg == nil, !remoteParticipants.filter({ $0.key != id }).isEmpty else {
            return
        }
        sfuRotateKey(sfu, excluding: id)
    }

    func sfuRotateKey(_ sfu: SFUMedia, excluding gone: String?) {
        let key = RandomBytes.bytes(16)
        let kids = SFUMedia.freshKeyIDs()
        sfu.baseKey = key
        sfu.keyIDs = kids
        sfu.keyGeneration += 1
        let generation = sfu.keyGeneration
        let ids = remoteParticipants.keys.filter { $0 != gone }
        sfuAnnounce(sfu, to: Array(ids))
        let video = sfu.video, audio = sfu.audio, token = ObjectIdentifier(sfu)
        scheduler.schedule(after: Self.sfuKeySwitchDelay) { [weak self] in
            try? video?.setKey(keyID: kids.video, baseKey: key)
            try? audio?.setKey(keyID: kids.audio, baseKey: key)
            MainActor.assumeIsolated {
                guard let sfu = self?.sfu, ObjectIdentifier(sfu) == token else { return }
                sfu.keyGenerationInUse = max(sfu.keyGenerationInUse, generation)
            }
        }
    }

    /// A participant joined the call: it gets a key nothing was sent under yet, so whatever it
    /// (or the server, for it) recorded before cannot be read with it. A key announced and not
    /// yet in use is such a key already; otherwise every participant gets a new one.
    func sfuParticipantJoined(_ id: String, _ sfu: SFUMedia) {
        // A link room's keys come from its host's epochs (`Room+Link.swift`).
        if linkLeg != nil { return }
        guard sfu.server.endToEndEncryption, sfu.feed != nil, sfu.keyGeneration == sfu.keyGenerationInUse else {
            return sfuAnnounce(sfu, to: [id])
        }
        sfuRotateKey(sfu, excluding: nil)
    }

    /// Binds each stream of the subscription to the key IDs of the participant whose feed it
    /// carries, and unbinds streams no longer carried: a frame decrypts only on its sender's
    /// stream, whoever else's key would open it.
    func sfuBindSenders(_ sfu: SFUMedia) {
        guard let frames = sfu.frames else { return }
        var bound: Set<UInt32> = []
        for (id, view) in sfu.subscriptions {
            let kids = sfu.remoteKeyIDs[id] ?? []
            for ssrc in view.ssrcs where (try? frames.bind(ssrc: ssrc, keyIDs: kids)) != nil { bound.insert(ssrc) }
        }
        for ssrc in frames.bindings.keys where !bound.contains(ssrc) { frames.unbind(ssrc: ssrc) }
    }

    /// How long after announcing a new frame key our senders start using it.
    static let sfuKeySwitchDelay = Duration.seconds(1)

    // MARK: Convergence

    /// Brings the server side in line with the call: joined to the room, our tracks published,
    /// one subscription per participant that publishes while we receive. Runs one pass at a time;
    /// a change during a pass runs another.
    func sfuReconcile() {
        guard let sfu, !sfu.closed else { return }
        if sfu.working {
            sfu.dirty = true
            return
        }
        sfu.working = true
        Task { @MainActor [weak self] in
            repeat {
                sfu.dirty = false
                guard let self, self.sfu === sfu else { break }
                await self.sfuPass(sfu)
            } while sfu.dirty && !sfu.closed
            sfu.working = false
        }
    }

    private func sfuPass(_ sfu: SFUMedia) async {
        if sfu.failure != nil { return }
        if sfu.handle == nil {
            do {
                try await sfuJoin(sfu)
                sfu.rebuild = nil
            } catch {
                // Joining again after the session was lost: the network may still be down, so
                // it is tried again after a doubling delay (not when the server refuses us).
                let refused: Bool
                if case JanusError.unauthorized = error { refused = true } else { refused = false }
                if !refused, !sfu.closed, sfu.rebuild != nil, case .retry(let delay)? = sfu.rebuild?.failed(at: now) {
                    if let orphan = sfu.session { Task { await orphan.destroy() } }
                    sfu.session = nil
                    scheduler.schedule(after: delay) { [weak self] in
                        MainActor.assumeIsolated { self?.sfuReconcile() }
                    }
                    return
                }
                sfu.failure = "\(error)"
                let detail = "the SFU at \(sfu.server.url) could not be joined: \(error)"
                for id in remoteParticipants.keys { sfuFailed(detail, for: id) }
                linkJoinFailed(sfu, error, detail)
                return
            }
            guard !sfu.closed else { return }
            sfuAnnounce(sfu)
        }
        guard let handle = sfu.handle, !sfu.closed else { return }
        await linkPass(sfu, handle)
        // The session may have been made again while the link pass waited on the old one (its
        // requests wait for a reclaim to end): the pass that follows works on the new one.
        guard !sfu.closed, sfu.handle === handle else { return }
        await sfuPublish(sfu, handle)
        await sfuSubscribe(sfu)
    }

    private func sfuJoin(_ sfu: SFUMedia) async throws {
        let session = try await JanusSession.create(endpoint: sfu.endpoint)
        sfu.session = session
        if sfu.closed {
            await session.destroy()
            return
        }
        sfu.linkEvents?.cancel()
        sfu.linkEvents = Task { @MainActor [weak self, weak sfu] in
            for await event in session.link {
                guard let self, let sfu, !sfu.closed, sfu.session === session else { return }
                switch event {
                case .interrupted: sfu.interruptions += 1
                case .reclaimed:
                    sfu.reclaims += 1
                    self.sfuResync(sfu)
                case .lost(let reason): self.sfuRebuild(sfu, reason)
                }
            }
        }
        let handle = try await JanusVideoRoom(session: session)
        let room = sfu.server.room
        let display = linkLeg?.display ?? localParticipant.identity
        var joined: JanusJoined
        let first: Result<JanusJoined, JanusError>
        do { first = .success(try await handle.joinAsPublisher(room: room, display: display, pin: sfu.server.pin)) } catch {
            first = .failure(error)
        }
        switch first {
        case .success(let j):
            joined = j
        case .failure(let error):
            // No such room (426): the first participant makes it (another may win the race: 427).
            // A link's joiner never makes a room: only its host does.
            guard case .janus(426, _) = error, linkLeg?.isHost ?? true else { throw error }
            var o = JanusRoomOptions()
            o.room = room
            o.publishers = SFUMedia.maxPublishers
            o.description = "revue"
            o.secret = sfu.server.roomSecret
            o.pin = sfu.server.pin
            do { _ = try await handle.createRoom(o) } catch {
                guard case .janus(427, _) = error else { throw error }
            }
            joined = try await handle.joinAsPublisher(room: room, display: display, pin: sfu.server.pin)
        }
        sfu.handle = handle
        sfu.privateID = joined.privateID
        sfu.feed = joined.id
        for p in joined.publishers { sfu.liveFeeds[p.id] = p.codecs }
        if sfu.closed {
            try? await handle.leave()
            await session.destroy()
            return
        }
        sfu.events = Task { @MainActor [weak self, weak sfu] in
            for await e in handle.events {
                guard let self, let sfu, !sfu.closed else { return }
                switch e {
                case .publishers(let list):
                    for p in list {
                        // A live feed listed again changed its streams (a camera turned on or
                        // off): Janus does not renegotiate existing subscriptions, so ours to it
                        // is made afresh.
                        // (Codecs not known yet, as after a resync, change nothing.)
                        if let codecs = sfu.liveFeeds[p.id], !codecs.isEmpty, codecs != p.codecs {
                            for sub in sfu.subscriptions.values where sub.feed == p.id { sub.stale = true }
                        }
                        sfu.liveFeeds[p.id] = p.codecs
                    }
                case .unpublished(let id), .leaving(let id):
                    sfu.liveFeeds[id] = nil
                default: continue
                }
                self.sfuReconcile()
            }
        }
    }

    /// How many times in a row the subscription is made afresh after a failed exchange.
    static let sfuSubscribeAttempts = 3

    /// Offers our current tracks to Janus when they differ from the last exchange; unpublishes
    /// when none is left.
    private func sfuPublish(_ sfu: SFUMedia, _ handle: JanusVideoRoom) async {
        let want = Set(sfu.capturers.keys)
        // A pass on a session since made again must not start an offer on the new connection.
        guard want != sfu.negotiated, sfu.handle === handle else { return }
        if want.isEmpty {
            let pc = sfu.publisher
            sfu.publisher = nil
            sfu.negotiated = []
            try? await handle.unpublish()
            pc?.close()
            return
        }
        guard let pc = sfu.publisher else { return }
        do {
            let offer = try await pc.createOffer()
            let answer: String?
            if sfu.negotiated.isEmpty {
                answer = try await handle.publish(offer: offer.sdp)
            } else {
                answer = try await handle.configure([:], offer: offer.sdp)
            }
            guard let answer else { throw JanusError.malformed("configure answered without SDP") }
            try await pc.setRemoteDescription(JSEPSessionDescription(parsing: answer, type: .answer))
            sfu.negotiated = want
        } catch {
            // An exchange on a handle that is gone (the session was lost meanwhile): the rebuild
            // publishes again.
            guard sfu.handle === handle, !sfu.closed else { return }
            let detail = "publishing to the SFU failed: \(error)"
            for id in remoteParticipants.keys { sfuFailed(detail, for: id) }
            sfu.failure = detail
        }
    }

    /// Our subscription carries the feed of every participant that publishes one while we
    /// receive it: feeds are added (`subscribe`) and removed (`unsubscribe`) by renegotiating
    /// the one connection; each participant's sections are then routed to its switches.
    private func sfuSubscribe(_ sfu: SFUMedia) async {
        var desired: [String: UInt64] = [:]
        if localParticipant.mode.receives {
            for (id, p) in remoteParticipants {
                guard p.mode.sends, let feed = sfu.remoteFeeds[id], sfu.liveFeeds[feed] != nil,
                    p.remoteTrackPublications.contains(where: { $0.wanted })
                else { continue }
                desired[id] = feed
            }
        }
        var resubscribe: Set<UInt64> = []
        for (id, s) in sfu.subscriptions where desired[id] != s.feed || s.stale {
            sfu.subscriptions[id] = nil
            if s.stale { resubscribe.insert(s.feed) }
        }
        let wanted = Set(desired.values)
        let session = sfu.session
        do {
            if let sub = sfu.subscriber, let pending = sub.pending {
                sub.pending = nil
                try await sub.apply(pending)
            }
            if let sub = sfu.subscriber {
                let gone = sub.feeds.subtracting(wanted).union(resubscribe.intersection(sub.feeds))
                if !gone.isEmpty, !sfu.closed { try await sub.apply(sub.handle.unsubscribe(feeds: gone.sorted())) }
                let new = wanted.subtracting(sub.feeds)
                if !new.isEmpty, !sfu.closed { try await sub.apply(sub.handle.subscribe(feeds: new.sorted())) }
            } else if !wanted.isEmpty, let session = sfu.session, !sfu.closed {
                try await sfuStartSubscriber(sfu, session, feeds: wanted.sorted())
            }
            sfu.subscribeFailures = 0
        } catch {
            // The session was lost meanwhile: the rebuild subscribes again, this is no failure.
            guard sfu.session === session else { return }
            return sfuSubscriptionBroke(sfu, "\(error)")
        }
        guard !sfu.closed else { return }
        // The participant may have left, or changed feed, meanwhile.
        let carried = sfu.subscriber?.feeds ?? []
        for (id, feed) in desired.sorted(by: { $0.key < $1.key })
        where sfu.subscriptions[id] == nil && carried.contains(feed) && sfu.remoteFeeds[id] == feed
            && remoteParticipants[id] != nil
        {
            sfu.subscriptions[id] = SFUSubscription(feed: feed)
        }
        sfuRoute(sfu)
        for id in sfu.subscriptions.keys {
            if let p = remoteParticipants[id] { for pub in p.remoteTrackPublications { updateSinks(pub) } }
        }
        await sfuPauseUnsubscribed(sfu)
    }

    /// The subscription is in an unknown state (an exchange failed, or its connection did): it
    /// is made afresh a second later, up to `sfuSubscribeAttempts` times in a row before the
    /// participants it should carry are told.
    func sfuSubscriptionBroke(_ sfu: SFUMedia, _ reason: String) {
        guard !sfu.closed else { return }
        sfu.subscriber?.close()
        sfu.subscriber = nil
        sfu.subscriptions = [:]
        sfu.subscribeFailures += 1
        if sfu.subscribeFailures < Self.sfuSubscribeAttempts {
            scheduler.schedule(after: .seconds(1)) { [weak self] in
                MainActor.assumeIsolated { self?.sfuReconcile() }
            }
        } else {
            for (id, p) in remoteParticipants.sorted(by: { $0.key < $1.key }) where p.mode.sends {
                sfuFailed("subscribing to the participant's feed failed: \(reason)", for: id)
            }
        }
    }

    /// Makes the subscriber handle and its connection, subscribed to `feeds`.
    private func sfuStartSubscriber(_ sfu: SFUMedia, _ session: JanusSession, feeds: [UInt64]) async throws {
        let handle = try await JanusVideoRoom(session: session)
        let update = try await handle.joinAsSubscriber(
            room: sfu.server.room, feeds: feeds, privateID: sfu.privateID, pin: sfu.server.pin)
        var c = sfuConnectionConfiguration(sfu)
        c.frameDecryption = sfu.frames
        c.maxAudioStreams = SFUMedia.maxPublishers
        c.maxReceiveStreams = 2 * SFUMedia.maxPublishers
        c.receiveBufferBytes = 2 << 20
        let pc = try PeerConnection(configuration: c)
        let sub = SFUSubscriber(handle: handle, connection: pc)
        pc.videoRenderer = sub.video
        pc.audioStreamSink = sub.audio
        let token = ObjectIdentifier(sub)
        pc.onStateChange = { [weak self] state in
            guard state == .failed else { return }
            DispatchQueue.main.async {
                MainActor.assumeIsolated {
                    guard let self, let sfu = self.sfu, let sub = sfu.subscriber, ObjectIdentifier(sub) == token, !sfu.closed
                    else { return }
                    self.sfuSubscriptionBroke(sfu, "the connection to the SFU failed")
                }
            }
        }
        guard !sfu.closed else { return sub.close() }
        sfu.subscriber = sub
        // Janus renegotiates on its own when a subscribed publisher leaves or unpublishes.
        sub.events = Task { @MainActor [weak self, weak sfu, weak sub] in
            for await e in handle.events {
                guard case .updated(let json) = e, let sfu, let sub, !sfu.closed else { continue }
                let update = JanusSubscriberUpdate(json)
                if update.sdp != nil { sub.pending = update }
                self?.sfuReconcile()
            }
        }
        try await sub.apply(update)
    }

    /// Points each participant's share of the subscription at its sections: their mids, SSRCs
    /// and the routes of their decoded media.
    func sfuRoute(_ sfu: SFUMedia) {
        guard let sub = sfu.subscriber else { return }
        var video: [UInt32: RendererSwitch] = [:], audio: [UInt32: AudioSinkSwitch] = [:]
        for view in sfu.subscriptions.values {
            var mids: [TrackKind: String] = [:]
            for s in sub.streams.values.sorted(by: { $0.mid < $1.mid }) where s.active && s.feed == view.feed {
                guard let kind = TrackKind(rawValue: s.type), mids[kind] == nil else { continue }
                mids[kind] = s.mid
            }
            for (kind, mid) in mids where view.mids[kind] != mid { view.forwarding[kind] = true }
            view.mids = mids
            view.ssrcs = []
            for (kind, mid) in mids {
                guard let ssrc = sub.ssrcs[mid] else { continue }
                view.ssrcs.insert(ssrc)
                switch kind {
                case .video: video[ssrc] = view.videoOut
                case .audio: audio[ssrc] = view.audioOut
                }
            }
        }
        sub.video.routes = video
        sub.audio.routes = audio
        sfuBindSenders(sfu)
    }

    /// Asks Janus to stop (or resume) forwarding each stream whose track the App unsubscribed
    /// from (or subscribed to again): a subscriber `configure` with the stream's mid and `send`.
    private func sfuPauseUnsubscribed(_ sfu: SFUMedia) async {
        for (id, sub) in sfu.subscriptions.sorted(by: { $0.key < $1.key }) {
            guard let p = remoteParticipants[id] else { continue }
            for (kind, mid) in sub.mids.sorted(by: { $0.value < $1.value }) {
                let want = p.remoteTrackPublications.first { $0.kind == kind }?.isSubscribed ?? true
                guard sub.forwarding[kind] != want, !sfu.closed else { continue }
                sub.forwarding[kind] = want
                // A refusal is not retried every pass: the sink still follows the subscription.
                _ = try? await sfu.subscriber?.handle.configure(["streams": [["mid": .string(mid), "send": .bool(want)]]])
            }
        }
    }

    // MARK: A lost connection

    /// The session came back after its connection broke (`JanusLinkEvent.reclaimed`): its
    /// handles and WebRTC connections are the same, but events Janus sent meanwhile may be
    /// missing. The room's publishers are listed again and `liveFeeds` set to them (a feed that
    /// left during the break goes, one that came is added), then a pass brings the subscription in
    /// line. Participants themselves come and go through the friend channel, not through Janus, so
    /// nothing the App sees is repeated or lost.
    func sfuResync(_ sfu: SFUMedia) {
        guard let handle = sfu.handle else { return sfuReconcile() }
        let room = sfu.server.room
        Task { @MainActor [weak self] in
            let listed = try? await handle.listParticipants(room: room)
            guard let self, self.sfu === sfu, !sfu.closed, sfu.handle === handle else { return }
            if let listed {
                let publishing = Set(listed.filter(\.publisher).map(\.id)).subtracting(sfu.feed.map { [$0] } ?? [])
                for id in sfu.liveFeeds.keys where !publishing.contains(id) { sfu.liveFeeds[id] = nil }
                for id in publishing where sfu.liveFeeds[id] == nil { sfu.liveFeeds[id] = [] }
                // A publisher our subscription carried left meanwhile: Janus renegotiated the
                // subscription then, and its offer was lost with the connection, so the two no
                // longer agree on what it carries. It is made afresh (a gap of about a second in
                // the other feeds), without counting as a failed exchange.
                if let sub = sfu.subscriber, !sub.feeds.isSubset(of: publishing) {
                    sub.close()
                    sfu.subscriber = nil
                    sfu.subscriptions = [:]
                }
            }
            self.sfuReconcile()
        }
    }

    /// The server no longer has our session (`JanusLinkEvent.lost`): its handles, and the WebRTC
    /// connections they carried, are gone with it. Everything is made again on a new session:
    /// join (a new feed, announced to the participants, who subscribe to it), publish on a new
    /// connection (the publications get new capturers), subscribe. Joining is tried for
    /// `SFUMedia.rebuildWindow` with a doubling delay before the participants are told.
    func sfuRebuild(_ sfu: SFUMedia, _ reason: String) {
        guard !sfu.closed, self.sfu === sfu else { return }
        sfu.rebuilds += 1
        if sfu.rebuild == nil { sfu.rebuild = JanusReconnectPlan(window: SFUMedia.rebuildWindow) }
        _ = sfu.rebuild?.failed(at: now)
        sfu.events?.cancel()
        sfu.events = nil
        sfu.linkEvents?.cancel()
        sfu.linkEvents = nil
        sfu.subscriber?.close()
        sfu.subscriber = nil
        sfu.subscriptions = [:]
        sfu.subscribeFailures = 0
        sfu.handle = nil
        sfu.session = nil
        sfu.feed = nil
        sfu.liveFeeds = [:]
        sfu.negotiated = []
        if let old = sfu.publisher {
            old.close()
            sfu.publisher = nil
            let kinds = Set(sfu.capturers.keys)
            sfu.capturers = [:]
            for pub in localParticipant.localTrackPublications where kinds.contains(pub.kind) {
                if let error = sfuTrackPublished(pub, sfu) {
                    post(
                        nil,
                        room: {
                            $1.room($0, localParticipant: $0.localParticipant, didFailToPublishTrack: pub.kind, error: error)
                        },
                        participant: nil)
                }
            }
        }
        sfuReconcile()
    }

    /// Ends everything on the server side (the call ended): the connections close at once, the
    /// session is left and destroyed in the background.
    func stopSFU() {
        guard let sfu else { return }
        self.sfu = nil
        sfu.closed = true
        sfu.linkEvents?.cancel()
        sfu.events?.cancel()
        sfu.subscriber?.close()
        sfu.subscriber = nil
        sfu.subscriptions = [:]
        sfu.publisher?.close()
        sfu.publisher = nil
        let handle = sfu.handle, session = sfu.session
        Task {
            try? await handle?.leave()
            await session?.destroy()
        }
    }
}
