// The media side of a call: per call leg (pair of participants) the friends' link (their one
// socket and ICE path, `FriendLink`) and an SRTP key per direction, agreed only inside the
// friends' encrypted channel ("adr" message); per local
// track one send stream of the engine whose plain RTP is fanned out to every subscribed leg
// (`TrackFanOut`); the participant's RTCP feedback about our media, read by the leg's receive
// pipeline, drives our send streams (`CallLegFeedback`); speaking events from the engine's
// speaking detector. docs/session.md "Media".
import Dispatch
package import MediaCore
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// Ids of call legs in `TrackFanOut`s (unique in the process).
private let legRoutes = Atomic<Int>(0)

/// The receive pipeline running on a leg now, for media the ICE agent receives through a TURN
/// relay outside UDP ChannelData (TCP, Data indications). Thread rule: any thread.
final class PipelineSlot: Sendable {
    private let slot = Mutex<ReceivePipeline?>(nil)
    var pipeline: ReceivePipeline? {
        get { slot.withLock { $0 } }
        set { slot.withLock { $0 = newValue } }
    }
}

/// One call leg's media state (main actor).
final class MediaLeg {
    /// The friends' link the leg runs on, lent to it while the leg lives: its socket carries the
    /// friend session, ICE and the leg's media.
    let link: FriendLink
    /// The link's socket, which the leg's receive pipeline reads.
    let socket: MediaCore.UDPSocket
    /// The leg's RTCP sender side: the participant's NACK/PLI/FIR/REMB/reports about our media.
    let feedback: CallLegFeedback
    /// Our key for what we send on this leg; the participant receives it in an `adr` message.
    let sendKey: SRTPKeyMaterial
    /// Finds and keeps the path to the participant (RFC 8445): direct, through NATs, or through
    /// a TURN relay; checks, consent and failover share the socket with the session and the media.
    var agent: ICEAgent { link.agent }
    /// What our media and RTCP on this leg go out on: the agent's selected pair (copied on the
    /// main actor, through `RoomEnvironment.mediaPath` in tests).
    let sendPath = ICESendPath()
    /// One outbound context per local track (libsrtp contexts are not shared between threads).
    var outbound: [TrackKind: SRTPContext] = [:]
    /// Per local track, the transport-wide numbers its packets took on this leg.
    var numbering: [TrackKind: TransportNumbering] = [:]
    /// The participant's key for what it sends us.
    var remoteKey: SRTPKeyMaterial?
    /// Where our media goes now (the selected pair's remote address; nil before a pair works).
    var destination: MediaCore.SocketAddress? { sendPath.route?.peer }
    /// Which of our tracks the participant subscribed to.
    var wants: Set<TrackKind> = []
    /// The engine's receive pipeline on `socket` (once the participant's key arrived), and where
    /// its decoded video and audio go: the renderer and PCM sink the App attached.
    var pipeline: ReceivePipeline?
    var running: PipelineSlot { link.running }
    let videoOut = RendererSwitch()
    let audioOut = AudioSinkSwitch()
    var playout: AudioPlayoutClock?
    /// When the participant's expected tracks last delivered a packet (`Room.mediaStarved`).
    var arrivals = ArrivalWatch()
    /// When the leg began, and whether its ICE agent has had a working pair since (or the call
    /// reported that it found none within `Room.mediaPathTimeout`).
    var startedAt = MonotonicTime.zero
    var pathSettled = false

    func stopReceiving() {
        playout?.stop()
        playout = nil
        running.pipeline = nil
        pipeline?.stop()
        pipeline = nil
    }

    /// A leg on `link` and its `socket`, which the caller has lent it (`FriendLink.lend`).
    init(link: FriendLink, socket: MediaCore.UDPSocket, videoBitrate: Int) {
        self.link = link
        self.socket = socket
        feedback = CallLegFeedback(route: legRoutes.wrappingAdd(1, ordering: .relaxed).oldValue, videoBitrate: videoBitrate)
        sendKey = .random(for: .aeadAES128GCM)
    }

    /// Ends the leg: its pipeline stops and the link goes back to the friend session (its agent
    /// reads the socket again). The socket is not closed: the link keeps it, and a fan-out target
    /// may still hold it.
    func close() {
        stopReceiving()
        link.giveBack()
    }

    deinit {
        playout?.stop()
        pipeline?.stop()
    }
}

/// Forwards decoded video to the renderer the App attached to a remote video track (or nowhere).
/// Thread rule: `render` on the receive engine's thread; `target` set from the main actor.
/// Cost: one lock per frame, held while the renderer renders (so a renderer replaced or removed is
/// never called afterwards).
final class RendererSwitch: VideoRenderer, Sendable {
    /// The renderer, in the switch's lock. Sendable: the renderer crosses from the main actor to
    /// the engine thread (as `VideoRenderer`'s thread rule has it) and is called only inside the
    /// lock, one frame at a time.
    private struct Slot: @unchecked Sendable {
        var renderer: (any VideoRenderer)?
    }
    private let slot = Mutex(Slot())
    var target: (any VideoRenderer)? {
        get { slot.withLock { $0.renderer } }
        set { slot.withLock { $0.renderer = newValue } }
    }
    func render(_ frame: DecodedVideoFrame) {
        slot.withLock { $0.renderer?.render(frame) }
    }
}

/// Forwards decoded PCM to the sink the App attached to a remote audio track (or nowhere).
/// Thread rule: `play` on the playout thread; `target` from any thread. Cost: one lock per 10 ms,
/// held while the sink plays (so a sink replaced or removed is never called afterwards).
final class AudioSinkSwitch: AudioSink {
    private let slot = Mutex<(any AudioSink)?>(nil)
    var target: (any AudioSink)? {
        get { slot.withLock { $0 } }
        set { slot.withLock { $0 = newValue } }
    }
    func play(_ samples: Span<Int16>, sampleRate: Int, channels: Int) {
        slot.withLock { $0?.play(samples, sampleRate: sampleRate, channels: channels) }
    }
}

/// One local track's engine stream.
final class LocalMedia {
    let fanOut = TrackFanOut()
    /// The participants the track goes to now.
    var targetIds: Set<String> = []
    var video: VideoSendStream?
    var audio: AudioSendStream?

    func stop() {
        video?.stop()
        // After the join: the worker reads the callback without a lock.
        audio?.stop()
        audio?.onSpeakingEvent = nil
    }
}

/// How long a packet count has not changed: one per receiving connection, read every tick.
/// Main actor; cheap.
struct ArrivalWatch {
    private var count: UInt64 = 0
    private var changedAt = MonotonicTime.now

    /// Starts counting quiet time afresh from `count` at `now`.
    mutating func reset(count: UInt64, now: MonotonicTime) {
        self.count = count
        changedAt = now
    }

    /// Time since `count` last changed (zero when it changed now).
    mutating func quietFor(count: UInt64, now: MonotonicTime) -> Duration {
        if count != self.count { reset(count: count, now: now) }
        return now - changedAt
    }
}

extension Room {
    func receiveMediaSignal(_ s: CallSignal, from id: String) {
        if s.op == CallSignal.Op.sfu { return receiveSFUSignal(s, from: id) }
        if usesSFU, s.op == CallSignal.Op.media, remoteParticipants[id] != nil {
            return sfuFailed(
                "the participant sends its media peer to peer, ours goes through \(callSFU?.url ?? "an SFU")", for: id)
        }
        guard let leg = legs[id], s.op == CallSignal.Op.media else { return }
        guard let key = s.key, let suite = s.suite.flatMap(SRTPSuite.init(sdpName:)),
            let material = try? SRTPKeyMaterial(suite: suite, inline: key)
        else { return }
        leg.remoteKey = material
        if leg.pipeline == nil { startReceiving(leg) }
        if let p = remoteParticipants[id] { for pub in p.remoteTrackPublications { updateSinks(pub) } }
    }

    /// A participant's friend connection is back after an outage (`resumed`): every video track
    /// sends a keyframe at once, so the participant decodes again without waiting for its PLI.
    /// (The media path itself is the leg's ICE agent's: it fails over and recovers on its own.)
    func followPath(_ id: String, resumed: Bool) {
        if resumed, legs[id] != nil { localMedia[.video]?.video?.requestKeyframe() }
        syncMediaPath(id)
    }

    /// Copies the leg's selected ICE pair to what its media is sent on (main actor; every tick,
    /// so an unchanged route costs two lock reads and a comparison, nothing more).
    func syncMediaPath(_ id: String) {
        guard let leg = legs[id] else { return }
        var route = leg.agent.path.route
        if case .direct(let a, let local)? = route, let map = environment.mediaPath { route = .direct(map(id, a), from: local) }
        let before = leg.sendPath.route
        if let route, route.isSame(as: before) { return }
        if route == nil && before == nil { return }
        leg.sendPath.route = route
        if (before == nil) != (route == nil) { updateTargets() }
        // Moved to another pair (the old one failed, or an address changed): what was in flight on
        // the old path is lost. Asking for all of it again (a second of video after a failover)
        // makes the participant's pacer send a burst of stale resends ahead of the keyframe the
        // gaps end in, which added about 0.6 s to the freeze; our pipeline asks for a keyframe at
        // once instead, on the new path. (The receiver asks rather than the sender sends: a
        // keyframe sent the moment our side switched can reach the participant's TURN allocation
        // before it has switched and permitted us, and be dropped there.)
        if before != nil, route != nil { leg.pipeline?.pathChanged() }
    }

    /// Starts the leg's receive pipeline with the participant's key. The SRTCP it sends is
    /// protected with our leg key, under an SSRC no other stream of ours has used with it.
    func startReceiving(_ leg: MediaLeg) {
        guard let material = leg.remoteKey else { return }
        var c = ReceivePipelineConfiguration(remoteKey: material, localKey: leg.sendKey)
        c.video = [VideoReceiveSettings(codec: .vp8, payloadType: 96)]
        c.audio = AudioReceiveSettings(payloadType: 111)
        c.localSSRC = freshSSRC()
        // Transport-cc feedback about the participant's media, for its delay-based estimate.
        c.transportSequenceNumberExtensionID = TrackFanOut.transportSequenceExtensionID
        guard let pipeline = try? ReceivePipeline(socket: leg.socket, configuration: c, renderer: leg.videoOut) else { return }
        leg.pipeline = pipeline
        // The participant's RTCP about our media arrives on this socket too, and so do the ICE
        // agent's checks, TURN traffic (RFC 7983: first byte 0-3 and 64-79) and the friend
        // session's packets (80-95), which the pipeline hands to the link; its own RTCP leaves on
        // the selected pair.
        let feedback = leg.feedback, demux = leg.link.demux
        pipeline.rtcpFeedbackHandler = { rtcp, arrival in feedback.handle(rtcp, arrival: arrival) }
        pipeline.otherDatagramHandler = { d in
            if let source = d.source { demux(d.bytes, source, d.destination) }
        }
        pipeline.sendPath = leg.sendPath
        leg.link.readByPipeline()
        pipeline.start()
        leg.running.pipeline = pipeline
        if let stream = pipeline.audio {
            let clock = AudioPlayoutClock(stream: stream, sink: leg.audioOut)
            leg.playout = clock
            clock.start()
        }
    }

    /// A participant published audio again (after a mode round trip or turning it off and on):
    /// its new stream has a new SSRC, and the receive pipeline follows one audio stream, so the
    /// leg's pipeline starts afresh (a few milliseconds; the video resumes with the next keyframe).
    func remoteAudioRepublished(_ p: RemoteParticipant) {
        // Through an SFU, Janus's `publishers` event about the feed remakes the subscription.
        if sfu != nil { return }
        guard let leg = legs[p.identity], leg.pipeline != nil else { return }
        leg.stopReceiving()
        startReceiving(leg)
        for pub in p.remoteTrackPublications { updateSinks(pub) }
    }

    /// A random SSRC that no stream sent under one of our leg keys has used while those legs
    /// exist. Every leg key protects all our streams, and AES-GCM's IV is built from the SSRC and
    /// the packet index (RFC 7714 §8.1): two streams with one SSRC under one key would reuse
    /// keystream. So audio, video, every republished track and every pipeline's SRTCP sender get
    /// distinct SSRCs.
    func freshSSRC() -> UInt32 {
        while true {
            let ssrc = RandomBytes.uint32()
            if ssrc != 0, usedSSRCs.insert(ssrc).inserted { return ssrc }
        }
    }

    func participantConnectedMedia(_ p: RemoteParticipant) {
        let bitrate = VideoSendStream.Configuration(codec: .vp8, width: options.videoWidth, height: options.videoHeight).encoder
            .bitrate
        guard let core, environment.mediaLegs else { return }
        let id = p.identity
        if usesSFU {
            if let sfu = ensureSFU() {
                sfuParticipantJoined(id, sfu)
                sfuReconcile()
            }
            if let early = sfuLeg.takeEarly(from: id) { receiveSFUSignal(early, from: id) }
            return
        }
        // The media takes the friends' link: the session's ICE path to that friend, on which
        // the friend session already runs (both sides use their link, so both agree on the path).
        // A link without a socket (a simulated network's) cannot be lent: as without a link.
        guard let f = core.friends[id], let link = core.ensureLink(f), let socket = link.socket, link.lend() else {
            let detail = "no path of its own to this friend (\(core.counters.linkFailures) links could not be made)"
            post(
                nil, room: { $1.room($0, callDidFailWithError: .mediaSetupFailed(participant: id, detail: detail)) },
                participant: nil)
            return
        }
        let leg = MediaLeg(link: link, socket: socket, videoBitrate: bitrate)
        leg.startedAt = now
        legs[id] = leg
        var s = CallSignal(type: "adr", op: CallSignal.Op.media)
        s.suite = leg.sendKey.suite.sdpName
        s.key = leg.sendKey.inlineKeyParams
        send(s, to: id)
        syncMediaPath(id)
    }

    func participantDisconnectedMedia(_ p: RemoteParticipant) {
        if let sfu { return sfuParticipantLeft(p.identity, sfu) }
        // Out of the fan-outs first; the socket closes when the last holder lets go (a send thread
        // may still be inside a write to the leg from a target list taken before).
        let leg = legs.removeValue(forKey: p.identity)
        updateTargets()
        leg?.close()
        // With no leg left, no key remembers the SSRCs used under it.
        if legs.isEmpty { usedSSRCs = Set(localMedia.values.compactMap { $0.video?.ssrc ?? $0.audio?.ssrc }) }
    }

    /// Starts the engine stream of a new local track (muted if the publication is); the error
    /// when the stream could not be created.
    func localTrackPublished(_ pub: LocalTrackPublication) -> TrackPublishError? {
        if let failure = environment.publishFailure, failure == pub.kind { return .mediaSetupFailed(detail: "forced by a test") }
        if usesSFU {
            guard let sfu = ensureSFU() else { return .mediaSetupFailed(detail: "the SFU setting is not usable") }
            return sfuTrackPublished(pub, sfu)
        }
        let media = LocalMedia()
        media.fanOut.muted.store(pub.isMuted, ordering: .relaxed)
        do {
            switch pub.kind {
            case .video:
                var c = VideoSendStream.Configuration(codec: .vp8, width: options.videoWidth, height: options.videoHeight)
                c.srtp = nil
                c.ssrc = freshSSRC()
                // The element only: `TrackFanOut` writes each leg's own number into it.
                c.transportSequence = (TrackFanOut.transportSequenceExtensionID, nil)
                let v = try VideoSendStream(configuration: c, sink: media.fanOut)
                media.video = v
                pub.videoCapturer = v.capturer
                v.start()
            case .audio:
                var c = AudioSendStream.Configuration()
                c.srtp = nil
                c.ssrc = freshSSRC()
                // The element only: `TrackFanOut` writes each leg's own number into it.
                c.transportSequence = (TrackFanOut.transportSequenceExtensionID, nil)
                let a = try AudioSendStream(configuration: c, sink: media.fanOut)
                media.audio = a
                pub.audioCapturer = a.capturer
                a.onSpeakingEvent = { [weak self] e in
                    DispatchQueue.main.async {
                        MainActor.assumeIsolated { self?.localSpeaking(e.isSpeaking, levelDbov: e.levelDbov) }
                    }
                }
                a.start()
            }
        } catch {
            media.stop()
            return .mediaSetupFailed(detail: "\(error)")
        }
        localMedia[pub.kind] = media
        // A new stream numbers its RTP afresh: no leg may take its packets for the old one's.
        for leg in legs.values { leg.numbering[pub.kind] = nil }
        updateTargets()
        return nil
    }

    func localTrackUnpublished(_ pub: LocalTrackPublication) {
        if let sfu { sfuTrackUnpublished(pub, sfu) }
        localMedia.removeValue(forKey: pub.kind)?.stop()
        pub.videoCapturer = nil
        pub.audioCapturer = nil
        updateTargets()  // the legs' feedback lets go of the stopped stream
        if pub.kind == .audio, localParticipant.isSpeaking { localSpeaking(false, levelDbov: -127) }
    }

    func localTrackMuteChanged(_ pub: LocalTrackPublication) {
        localMedia[pub.kind]?.fanOut.muted.store(pub.isMuted, ordering: .relaxed)
        if let sfu { sfuTrackMuteChanged(pub, sfu) }
        if pub.kind == .audio, pub.isMuted, localParticipant.isSpeaking { localSpeaking(false, levelDbov: -127) }
    }

    func remoteSubscriptionChanged(_ pub: RemoteTrackPublication) {
        updateSinks(pub)
        sfuReconcile()
    }

    /// Connects the App's renderer / PCM sink of a remote publication while it is subscribed.
    func updateSinks(_ pub: RemoteTrackPublication) {
        guard let p = pub.participant, let out = sinks(of: p.identity) else { return }
        switch pub.kind {
        case .video: out.video.target = pub.isSubscribed ? pub.renderer : nil
        case .audio: out.audio.target = pub.isSubscribed ? pub.audioSink : nil
        }
    }

    /// Where a participant's decoded media goes: its mesh leg's or its SFU subscription's switches.
    func sinks(of id: String) -> (video: RendererSwitch, audio: AudioSinkSwitch)? {
        if let leg = legs[id] { return (leg.videoOut, leg.audioOut) }
        if let sub = sfu?.subscriptions[id] { return (sub.videoOut, sub.audioOut) }
        return nil
    }

    /// What we receive from a participant, per stream (mesh leg or SFU subscription); nil when
    /// nothing is set up.
    func inboundStats(of id: String) -> [InboundRTPStreamStats]? {
        if let leg = legs[id] { return leg.pipeline?.inboundStats }
        guard let sfu, let view = sfu.subscriptions[id], let sub = sfu.subscriber else { return nil }
        return sub.connection.inboundStats.filter { view.ssrcs.contains($0.ssrc) }
    }

    func remoteMuteChanged(_ p: RemoteParticipant, _ pub: TrackPublication) {}

    func remoteWantsTrack(_ p: RemoteParticipant, sid: String, wants: Bool) {
        guard let leg = legs[p.identity], let kind = TrackKind(rawValue: sid) else { return }
        if wants { leg.wants.insert(kind) } else { leg.wants.remove(kind) }
        // (Through an SFU the track goes to the server once, whoever wants it.)
        updateTargets()
    }

    func remoteModeChanged(_ p: RemoteParticipant) {
        sfuReconcile()
        if !p.mode.receives, let leg = legs[p.identity] { leg.wants = [] }
        updateTargets()
    }

    /// Points every local track's fan-out at the legs that want it, and every leg's RTCP feedback
    /// at our send streams.
    func updateTargets() {
        for (kind, media) in localMedia {
            var targets: [TrackFanOut.Target] = []
            for (id, leg) in legs.sorted(by: { $0.key < $1.key }) {
                guard leg.destination != nil, leg.wants.contains(kind),
                    let p = remoteParticipants[id], p.mode.receives
                else { continue }
                if leg.outbound[kind] == nil {
                    // A NACK resends the stream's plain RTP again through this context: the same
                    // bytes under the same index, so the same ciphertext (RFC 3711 §3.3.1 keystream
                    // reuse does not arise), which libsrtp allows only with allow_repeat_tx.
                    var o = SRTPContext.Options()
                    o.allowRepeatTransmission = true
                    leg.outbound[kind] = try? SRTPContext(material: leg.sendKey, direction: .outbound, options: o)
                }
                guard let context = leg.outbound[kind] else { continue }
                let numbering = leg.numbering[kind] ?? TransportNumbering(counter: leg.feedback.transportSequence)
                leg.numbering[kind] = numbering
                targets.append(
                    .init(
                        participant: id, route: leg.feedback.route, context: context, socket: leg.socket,
                        path: leg.sendPath, numbering: numbering))
            }
            media.fanOut.setTargets(targets)
            // A leg that left no longer holds the encoder down.
            if let video = media.video, let lowest = media.fanOut.lowestEstimate() { video.handleEstimatedBitrate(lowest) }
            // A new receiver needs a keyframe to start decoding: asked at once (the stream's
            // limiter coalesces it with other requests). If it still misses it (the receiver's
            // pipeline started late, or the keyframe was lost), its PLI reaches the encoder through
            // the leg's RTCP feedback.
            let ids = Set(targets.map(\.participant))
            if !ids.subtracting(media.targetIds).isEmpty { media.video?.requestKeyframe() }
            media.targetIds = ids
        }
        for leg in legs.values {
            var streams: [any RTPSendFeedbackTarget] = []
            let route = leg.feedback.route
            if let m = localMedia[.video], let v = m.video {
                streams.append(LegVideoFeedback(stream: v, fanOut: m.fanOut, route: route))
            }
            if let a = localMedia[.audio]?.audio { streams.append(LegAudioFeedback(stream: a, route: route)) }
            leg.feedback.setTargets(streams)
        }
    }

    /// The engine's speaking detector decided (local audio track).
    func localSpeaking(_ speaking: Bool, levelDbov: Float) {
        let local = localParticipant
        let level = speaking ? Float(pow(10, Double(levelDbov) / 20)) : 0
        guard speaking != local.isSpeaking || (speaking && abs(level - local.audioLevel) > 0.05) else { return }
        let changed = speaking != local.isSpeaking
        local.isSpeaking = speaking
        local.audioLevel = level
        var s = CallSignal(type: "track", op: CallSignal.Op.speaking)
        s.sid = TrackKind.audio.rawValue
        s.speaking = speaking
        s.level = Double(level)
        for id in remoteParticipants.keys { send(s, to: id) }
        if changed {
            post(local, room: nil, participant: { $0.participant(local, didUpdateIsSpeaking: speaking) })
        }
        updateActiveSpeakers()
    }

    /// A participant's speaking detector decided (their `track speaking` message).
    func remoteSpeaking(_ p: RemoteParticipant, speaking: Bool, level: Double) {
        let changed = speaking != p.isSpeaking
        p.isSpeaking = speaking
        p.audioLevel = Float(level)
        if changed {
            post(p, room: nil, participant: { $0.participant(p, didUpdateIsSpeaking: speaking) })
        }
        updateActiveSpeakers()
    }

    func tickMedia(now: MonotonicTime) {
        for id in legs.keys { syncMediaPath(id) }
        for id in legs.keys.sorted() { checkMediaPath(id, now: now) }
        guard now - lastStatistics >= .seconds(1) else { return }
        lastStatistics = now
        // Every change reconciles the SFU side at once; this is the once-a-second safety net.
        sfuReconcile()
        let local = localParticipant
        for pub in local.localTrackPublications {
            var stats = TrackStatistics()
            if let media = localMedia[pub.kind] {
                stats.packetsSent = media.fanOut.packetsSent.load(ordering: .relaxed)
                stats.bytesSent = media.fanOut.bytesSent.load(ordering: .relaxed)
                if let v = media.video { stats.framesEncoded = UInt64(v.statistics.outbound.framesEncoded) }
            } else if let sfu, let pc = sfu.publisher, sfu.capturers[pub.kind] != nil {
                let sent = pc.sentTraffic(pub.kind == .video ? .video : .audio)
                stats.packetsSent = UInt64(sent.packets)
                stats.bytesSent = UInt64(sent.bytes)
                if pub.kind == .video, let v = pc.videoSendStatistics {
                    stats.framesEncoded = UInt64(v.outbound.framesEncoded)
                }
            } else {
                continue
            }
            post(
                local, room: { $1.room($0, participant: local, trackPublication: pub, didUpdateStatistics: stats) },
                participant: { $0.participant(local, trackPublication: pub, didUpdateStatistics: stats) })
        }
        for id in remoteParticipants.keys {
            guard let p = remoteParticipants[id], let inbound = inboundStats(of: id) else { continue }
            for pub in p.remoteTrackPublications where pub.isSubscribed {
                guard let s = inbound.first(where: { $0.kind == pub.kind.rawValue }) else { continue }
                var stats = TrackStatistics()
                stats.packetsReceived = s.packetsReceived
                stats.bytesReceived = s.bytesReceived
                stats.packetsLost = s.packetsLost
                stats.jitter = s.jitter
                stats.framesDecoded = s.framesDecoded
                stats.roundTripTime =
                    core?.friends[id]?.paths(now: now, timeout: connectionTimeout).paths.first?.roundTripTime
                post(
                    p, room: { $1.room($0, participant: p, trackPublication: pub, didUpdateStatistics: stats) },
                    participant: { $0.participant(p, trackPublication: pub, didUpdateStatistics: stats) })
            }
        }
    }

    /// A leg whose ICE agent found no working pair within `mediaPathTimeout` of its start: the
    /// call reports `mediaSetupFailed` for that participant once, naming why (a TURN server's
    /// refusal, refused permissions, or the checks that got no answer), instead of staying
    /// connected without a word. The agent keeps checking, and media flows if a pair works later.
    func checkMediaPath(_ id: String, now: MonotonicTime) {
        guard let leg = legs[id], !leg.pathSettled else { return }
        if leg.agent.path.route != nil {
            leg.pathSettled = true
            return
        }
        guard now - leg.startedAt >= Self.mediaPathTimeout else { return }
        leg.pathSettled = true
        let seconds = Int(Self.mediaPathTimeout.inSeconds.rounded())
        let detail = "no media path within \(seconds) s: " + leg.agent.noPathReason
        post(
            nil, room: { $1.room($0, callDidFailWithError: .mediaSetupFailed(participant: id, detail: detail)) }, participant: nil
        )
    }

    /// Whether a participant's subscribed, unmuted tracks delivered no packet for
    /// `mediaStarvedAfter` (its connection quality is then `.poor`, whatever the friend
    /// channel's RTT). Called every tick; cheap (one statistics read).
    func mediaStarved(_ p: RemoteParticipant, now: MonotonicTime) -> Bool {
        let id = p.identity
        let leg = legs[id], sub = sfu?.subscriptions[id]
        guard leg != nil || sub != nil else { return false }
        let kinds = Set(p.remoteTrackPublications.filter { $0.isSubscribed && !$0.isMuted }.map(\.kind.rawValue))
        let received =
            inboundStats(of: id)?.filter { kinds.contains($0.kind) }.reduce(UInt64(0)) { $0 + $1.packetsReceived } ?? 0
        if kinds.isEmpty {
            leg?.arrivals.reset(count: received, now: now)
            sub?.arrivals.reset(count: received, now: now)
            return false
        }
        let quietFor =
            leg?.arrivals.quietFor(count: received, now: now) ?? sub?.arrivals.quietFor(count: received, now: now) ?? .zero
        return quietFor >= Self.mediaStarvedAfter
    }

    /// Fraction of media packets lost from a participant so far (RFC 3550 A.3 cumulative counts).
    func mediaLoss(_ p: RemoteParticipant) -> Double {
        guard let stats = inboundStats(of: p.identity), !stats.isEmpty else { return 0 }
        let lost = stats.reduce(Int64(0)) { $0 + max(0, $1.packetsLost) }
        let received = stats.reduce(UInt64(0)) { $0 + $1.packetsReceived }
        let expected = Double(received) + Double(lost)
        return expected > 0 ? Double(lost) / expected : 0
    }

    /// Ends every leg and stream (the call ended or the session goes away).
    func stopAllMedia() {
        stopSFU()
        for media in localMedia.values { media.stop() }
        localMedia = [:]
        for leg in legs.values { leg.close() }
        legs = [:]
        usedSSRCs = []
    }

    /// Recomputes the speakers list (loudest first) and tells the room when it changed.
    func updateActiveSpeakers() {
        var speakers: [Participant] = remoteParticipants.values.filter(\.isSpeaking)
        if localParticipant.isSpeaking { speakers.append(localParticipant) }
        speakers.sort { $0.audioLevel != $1.audioLevel ? $0.audioLevel > $1.audioLevel : $0.identity < $1.identity }
        guard speakers.map(\.identity) != activeSpeakers.map(\.identity) else { return }
        activeSpeakers = speakers
        post(nil, room: { $1.room($0, didUpdateSpeakingParticipants: speakers) }, participant: nil)
    }
}

extension Room {
    /// A call leg's ICE state, for diagnostics (revue-node's `media-stats`): the selected pair's
    /// candidate types and addresses, the route media takes, our gathered candidates, and the
    /// agent's counters. nil without a leg to that participant. Main actor; cheap.
    package func mediaPathDiagnostics(_ id: String) -> [String: JSONValue]? {
        func received(_ st: ReceivePipelineStatistics) -> JSONValue {
            [
                "datagrams": .integer(st.datagrams), "rtp": .integer(st.rtp), "rtcp": .integer(st.rtcp),
                "other": .integer(st.other), "authFailures": .integer(st.authFailures),
                "unknownStream": .integer(st.unknownStream),
            ]
        }
        if legs[id] == nil, let sfu {
            var out: [String: JSONValue] = [
                "sfu": .string(sfu.server.url), "room": .string(String(sfu.server.room)), "subscribed": false,
            ]
            // Our publishing connection to the server (what carries our media to everyone).
            out["publisherState"] = .text(sfu.publisher?.state.rawValue)
            if sfu.server.endToEndEncryption {
                // Frame keys by ID (never the keys): ours last announced and whether our senders use
                // them yet, and the ones this participant announced to us. A script waits until every
                // sender uses its newest IDs and every receiver holds them.
                out["ownKeyIDs"] = .strings([sfu.keyIDs.video, sfu.keyIDs.audio].map { String($0) })
                out["ownKeysInUse"] = .bool(sfu.keyGeneration == sfu.keyGenerationInUse)
                out["keyIDs"] = .strings((sfu.remoteKeyIDs[id] ?? []).map { String($0) })
            }
            if let leg = linkLeg {
                // A room joined by link: the host's latest epoch we hold, and the one our senders use.
                out["linkEpoch"] = .string(String(leg.epoch))
                out["linkEpochInUse"] = .string(String(leg.epochInUse))
            }
            guard let view = sfu.subscriptions[id], let sub = sfu.subscriber else { return out }
            out["subscribed"] = true
            out["feed"] = .string(String(view.feed))
            out["mids"] = .strings(view.mids.values.sorted())
            out["ssrcs"] = .strings(view.ssrcs.sorted().map(String.init))
            out["forwarding"] = .strings(view.forwarding.filter(\.value).map(\.key.rawValue).sorted())
            let inbound = sub.connection.inboundStats.filter { view.ssrcs.contains($0.ssrc) }
            out["packets"] = .integer(Int(inbound.reduce(0) { $0 + $1.packetsReceived }))
            out["decryptionFailures"] = .integer(Int(inbound.reduce(0) { $0 + $1.framesDecryptionFailed }))
            out["framesDropped"] = .integer(Int(inbound.reduce(0) { $0 + $1.framesDropped }))
            out["state"] = .string(sub.connection.state.rawValue)
            if let st = sub.connection.receiveStatistics { out["received"] = received(st) }
            return out
        }
        guard let leg = legs[id] else { return nil }
        var out: [String: JSONValue] = [:]
        if let pair = leg.agent.selectedPair {
            out["local"] = .string(pair.local.description)
            out["remote"] = .string(pair.remote.description)
            out["localType"] = .string(pair.local.type.rawValue)
            out["remoteType"] = .string(pair.remote.type.rawValue)
        }
        if let core, let f = core.friends[id] {
            // One path per friend: the session sends on this leg's link (which it does only while
            // it was heard on it lately).
            let onLink = f.bestRoute(now: .now, timeout: core.timeouts.connectionTimeout) == .link
            out["sessionOnLink"] = .bool(f.link === leg.link && onLink)
        }
        out["route"] = .text(leg.sendPath.route?.description)
        out["relayed"] = .bool(leg.sendPath.route?.isRelayed ?? false)
        out["candidates"] = .strings(leg.agent.localCandidates.map(\.description))
        let s = leg.agent.statistics
        out["checksSent"] = .integer(s.checksSent)
        out["responsesReceived"] = .integer(s.responsesReceived)
        out["selectedPairChanges"] = .integer(s.selectedPairChanges)
        out["checksAnswered"] = .integer(s.checksAnswered)
        out["droppedRequests"] = .integer(s.droppedRequests)
        out["droppedResponses"] = .integer(s.droppedResponses)
        out["turn"] = .strings(leg.agent.turnStatistics.map { "\($0)" })
        if let st = leg.pipeline?.statistics { out["received"] = received(st) }
        out["sent"] = .integer(leg.sendPath.packetCounts.sent)
        out["pairs"] = .strings(
            leg.agent.pairSnapshots.map { p in
                "\(p.local) -> \(p.remote)" + (p.valid ? " valid" : "") + (p.failed ? " failed" : "")
                    + (p.selected ? " selected" : "")
            })
        return out
    }
}

extension Room {
    /// Bytes of media (SRTP, as sent) our tracks have handed to the network in this call: summed
    /// over the legs in a mesh, the one publisher connection through an SFU. Main actor; cheap.
    package var uplinkBytes: Int {
        if let sfu, let pc = sfu.publisher { return pc.sentTraffic(.video).bytes + pc.sentTraffic(.audio).bytes }
        return localMedia.values.reduce(0) { $0 + Int($1.fanOut.bytesSent.load(ordering: .relaxed)) }
    }

    /// What our video send stream has done in this call (frames captured, dropped by reason,
    /// encoded; the pacer's queue): the mesh's one stream, or the publisher's through an SFU; nil
    /// without a video track. Main actor; takes a snapshot of counters.
    package var videoSendStatistics: VideoSendStream.Statistics? {
        if let sfu, let pc = sfu.publisher { return pc.videoSendStatistics }
        return localMedia[.video]?.video?.statistics
    }
}
