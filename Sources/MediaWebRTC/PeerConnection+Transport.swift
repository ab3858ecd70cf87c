// The wiring of a PeerConnection: one socket demultiplexed by first byte (RFC 7983: STUN 0-3 and
// TURN ChannelData 64-79 to the ICE agent, DTLS 20-63 to the DTLS endpoint, RTP/RTCP 128-191 to
// the receive pipeline), DTLS over the ICE agent's selected pair, and media once DTLS exported
// the SRTP keys.
//
// Before DTLS connects, the ICE agent reads the socket (RTP that arrives that early is dropped:
// the receiver asks for a keyframe with PLI when its first frame is not one). Once connected, the
// engine's receive pipeline reads it and hands STUN and DTLS back.
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

/// What the answer agreed for media: the payload types both sides use (the offerer's). Thread
/// rule: a value type. Cost: none.
struct PeerConnectionNegotiation: Sendable {
    var opus: UInt8?
    var vp8: UInt8?
    var vp9: UInt8?
    var vp8RTX: UInt8?
    var vp9RTX: UInt8?
    /// The RFC 8285 IDs we read in the peer's packets (our description's, for extensions the
    /// answer kept): transport-wide sequence numbers (for transport feedback), abs-send-time (the
    /// video receiver's delay estimate) and the audio level.
    var transportSequenceExtensionID: UInt8?
    var absSendTimeExtensionID: UInt8?
    var audioLevelExtensionID: UInt8?

    /// The first accepted payload type of each known codec over the accepted sections of `answer`;
    /// the receive IDs from `local` (our description of the exchange; the answer when nil).
    init(answer: JSEPSessionDescription, local: JSEPSessionDescription? = nil) {
        let local = local ?? answer
        transportSequenceExtensionID = PeerConnectionHeaderExtensions.receiveID(
            SDPExtensionMap.transportSequenceNumberURI, local: local, answer: answer)
        absSendTimeExtensionID = PeerConnectionHeaderExtensions.receiveID(
            SDPExtensionMap.absoluteSendTimeURI, kind: .video, local: local, answer: answer)
        audioLevelExtensionID = PeerConnectionHeaderExtensions.receiveID(
            SDPExtensionMap.audioLevelURI, kind: .audio, local: local, answer: answer)
        for m in answer.media where !m.isRejected && m.isRTP {
            for c in m.codecs {
                let pt = UInt8(c.payloadType)
                switch c.known {
                case .opus?: if opus == nil { opus = pt }
                case .vp8?: if vp8 == nil { vp8 = pt; vp8RTX = m.retransmissionPayloadType(for: c.payloadType).map(UInt8.init) }
                case .vp9?: if vp9 == nil { vp9 = pt; vp9RTX = m.retransmissionPayloadType(for: c.payloadType).map(UInt8.init) }
                default: break
                }
            }
        }
    }
}

/// One local track: its engine send stream and the sink that protects and sends its packets.
/// Thread rule: immutable after creation; `stop` from any thread.
final class PeerConnectionLocalTrack: Sendable {
    let jsep: JSEPTrack
    /// The video codec (nil: Opus audio).
    let codec: VPXCodec?
    let video: VideoSendStream?
    let audio: AudioSendStream?
    let sender: PeerConnectionRTPSender

    init(jsep: JSEPTrack, codec: VPXCodec?, video: VideoSendStream?, audio: AudioSendStream?, sender: PeerConnectionRTPSender) {
        self.jsep = jsep
        self.codec = codec
        self.video = video
        self.audio = audio
        self.sender = sender
    }

    /// The capturer the app feeds (what `removeTrack` names the track by).
    var capturer: AnyObject { video?.capturer ?? audio!.capturer }

    /// The payload type this track sends with under `answer` (the section its `mid` names), or nil
    /// when that section is missing or rejected, its direction does not let us send, or it has
    /// not our codec. `answerIsLocal`: the answer is ours (its direction is ours), else the
    /// peer's (mirrored).
    func sendPayloadType(mid: String?, answer: JSEPSessionDescription, answerIsLocal: Bool)
        -> (payloadType: UInt8, retransmission: UInt8?)?
    {
        guard let mid, let section = answer.media.first(where: { $0.mid == mid }), !section.isRejected,
            section.kind == jsep.kind
        else { return nil }
        let sends =
            answerIsLocal
            ? section.direction == .sendrecv || section.direction == .sendonly
            : section.direction == .sendrecv || section.direction == .recvonly
        guard sends else { return nil }
        let wanted: JSEPCodec.Known =
            switch codec {
            case nil: .opus
            case .vp8?: .vp8
            case .vp9?: .vp9
            }
        guard let codec = section.codecs.first(where: { $0.known == wanted }) else { return nil }
        // RTX (RFC 4588) for video when the answer kept it for this codec: then our section
        // announced the retransmission SSRC (`a=ssrc-group:FID`) too.
        let rtx = codec.known == .opus ? nil : section.retransmissionPayloadType(for: codec.payloadType).map(UInt8.init)
        return (UInt8(codec.payloadType), rtx)
    }

    var feedbackTarget: any RTPSendFeedbackTarget { video ?? audio! }

    func stop() {
        sender.deactivate()
        video?.stop()
        audio?.stop()
    }
}

/// The `PacketSink` of one local track's send stream. The stream protects its own packets with
/// the keys DTLS exported and writes the negotiated payload type (`protection`, given at
/// activation: no copy here); this sink sends them on the ICE agent's selected pair while
/// active, and drops (and counts) every packet before the stream protects or after
/// `deactivate`. Thread rule: `write` from the stream's egress thread (under a lock, with NACK
/// resends from the same thread); `activate`/`deactivate` from any thread. Cost: an atomic load,
/// a lock and one `sendto` (or ChannelData send) per packet.
package final class PeerConnectionRTPSender: PacketSink, Sendable {
    struct State {
        var path: ICESendPath?
        var sent = 0
        var sentBytes = 0
        var dropped = 0
    }
    private let socket: UDPSocket
    /// While true the track's packets are discarded unsent; they are not counted as dropped, since
    /// a muted track is meant to send nothing.
    let isMuted = Atomic<Bool>(false)
    private let state = Mutex(State())
    /// What the stream protects with; the same object is in the stream's configuration.
    package let protection: LateSendProtection

    /// A sender on the connection's socket for a stream made with `protection`; it drops packets
    /// until `activate`.
    package init(socket: UDPSocket, protection: LateSendProtection) {
        self.socket = socket
        self.protection = protection
    }

    /// Starts sending on `path`: the stream protects with `context` (the first one given; a
    /// stream keeps it, and its rollover counter, for good) and writes `payloadType`.
    /// `retransmissionPayloadType`: the RTX payload type the answer kept for it (nil: none).
    package func activate(
        context: SRTPContext, payloadType: UInt8, retransmissionPayloadType: UInt8? = nil, path: ICESendPath
    ) {
        protection.provide(context: context, payloadType: payloadType, retransmissionPayloadType: retransmissionPayloadType)
        state.withLock { $0.path = path }
    }
    func deactivate() { state.withLock { $0.path = nil } }
    /// Whether packets go out now.
    var isActive: Bool { state.withLock { $0.path != nil } }
    /// Keeps the context and path, with a new negotiated payload type.
    func retarget(toPayloadType pt: UInt8, retransmissionPayloadType: UInt8?) {
        protection.setPayloadType(pt, retransmissionPayloadType: retransmissionPayloadType)
    }
    var counts: (sent: Int, dropped: Int) { state.withLock { ($0.sent, $0.dropped) } }
    /// Packets and bytes (SRTP, as sent) handed to the network, and packets dropped.
    var traffic: (packets: Int, bytes: Int, dropped: Int) { state.withLock { ($0.sent, $0.sentBytes, $0.dropped) } }

    /// Sends the protected `packet` on the selected pair; counts it as dropped when not active,
    /// when the stream does not protect yet, or when sending fails.
    package func write(_ packet: RawSpan) {
        packet.withUnsafeBytes { packet in
            if isMuted.load(ordering: .relaxed) { return }
            let protected = protection.adopted
            state.withLock { s in
                guard protected, let path = s.path, path.send(packet, on: socket) else {
                    s.dropped += 1
                    return
                }
                s.sent += 1
                s.sentBytes += packet.count
            }
        }
    }

    /// Nothing is buffered.
    package func flush() {}
}

/// The sender side of RTCP for the local tracks: the peer's NACK, PLI, FIR, REMB and receiver
/// reports (from the receive pipeline's thread) drive the send streams, and sender reports
/// (RFC 3550 §6.4.1) go out from the connection's queue. Thread rule: both under one lock.
/// Cost: parsing and building RTCP allocate small arrays, a few times a second.
/// Sendable: the session, SRTCP, the report buffer and the schedule live in a `Locked` box; the
/// rest are `let`s.
final class PeerConnectionFeedback: @unchecked Sendable {
    /// What the lock guards.
    private struct Core {
        let session: RTCPSenderSession
        /// SRTCP for the sender reports.
        let outbound: SRTPContext
        var reportSchedule = RTCPReportSchedule(intervalMilliseconds: 1000)
    }
    private let core: Locked<Core>
    private let cname: String
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)

    init(session: RTCPSenderSession, outbound: SRTPContext, cname: String) {
        core = Locked(Core(session: session, outbound: outbound))
        self.cname = cname
    }
    deinit { buffer.deallocate() }

    /// The local streams feedback and reports are about (after a track is added or removed).
    func replaceTargets(_ targets: [any RTPSendFeedbackTarget]) {
        core.withLock { $0.session.replaceTargets(targets) }
    }

    /// Whether the peer's transport feedback drives the estimate (transport-cc negotiated for
    /// what we send): matched against `numbers`' send log; nil ignores it. Any thread; a lock.
    func setTransportSequenceNumbers(_ numbers: TransportSequenceNumbers?) {
        core.withLock { $0.session.transportSequenceNumbers = numbers }
    }

    /// The estimate the video streams are held to, bits per second. Any thread; a lock.
    var targetBitrate: Int { core.withLock { $0.session.estimator.targetBitrate } }

    /// Transport feedback packets taken into the estimate. Any thread; a lock.
    var transportFeedbackReceived: Int { core.withLock { $0.session.counters.transportFeedbackReceived } }

    /// What the peer's receiver reports said about each local stream (round-trip time, loss,
    /// jitter). Any thread; a lock and a copy.
    var remoteInbound: [RemoteInboundRTPStreamStats] {
        core.withLock { Array($0.session.remoteInbound.values) }
    }

    /// The peer's RTCP about our media, unprotected (the pipeline's thread).
    func handle(_ rtcp: RawSpan, arrival: MonotonicTime) {
        core.withLock { $0.session.handle(rtcp, now: arrival) }
    }

    /// Sends a compound SR + SDES for every local stream on `path` when one is due (every
    /// 0.5-1.5 s, RFC 3550 §6.2). Called from the connection's queue timer.
    func sendReportIfDue(now: MonotonicTime, socket: UDPSocket, path: ICESendPath) {
        let buffer = buffer, cname = cname
        core.withLock { core in
            guard core.reportSchedule.isDue(now: now) else { return }
            let reports = core.session.senderReports(ntpTime: RTCPSenderSession.wallClock(), now: now)
            guard let first = reports.first else { return }
            var packets: [RTCPPacket] = reports.map { .senderReport($0) }
            packets.append(.sourceDescription(RTCPSourceDescription(ssrc: first.ssrc, cname: cname)))
            let size = RTCPCompound.marshalSize(packets)
            guard size + core.outbound.rtcpOverhead <= buffer.count else { return }
            buffer.appending { RTCPCompound.marshal(packets, into: &$0) }
            var span = buffer.mutableBytes
            guard let n = try? core.outbound.protectRTCP(&span, length: size) else { return }
            _ = path.send(UnsafeRawBufferPointer(rebasing: buffer[0..<n]), on: socket)
        }
    }
}

extension PeerConnection {
    /// Connects the agent's callbacks and reader and the DTLS endpoint's output; starts gathering.
    func wireTransport(_ agent: ICEAgent) {
        agent.onCandidate = { [weak self] c in
            guard let self else { return }
            let candidate = JSEPCandidate(c)
            if let cb = self.shared.withLock({ $0.onLocalCandidate }) { self.queue.async { cb(candidate) } }
        }
        agent.onGatheringComplete = { [weak self] in
            guard let self else { return }
            let cb = self.shared.withLock { s in
                s.gatheringComplete = true
                return s.onGatheringComplete
            }
            if let cb { self.queue.async { cb() } }
        }
        agent.onSelectedPairChange = { [weak self] local, _ in
            guard let self else { return }
            let cb = self.shared.withLock { $0.onSelectedPairChange }
            self.queue.async {
                self.pathChanged()
                cb?(local != nil)
            }
        }
        // DTLS through a TURN relay (a relayed selected pair) comes unwrapped by the agent.
        agent.onRelayedDTLS = { [weak self] bytes, peer in
            guard let self else { return }
            self.queue.async { self.handleDTLS(bytes, from: peer) }
        }
        agent.startReading { [weak self] bytes, from in
            guard let self, let first = bytes.first, DTLSTransport.isDTLS(firstByte: first) else { return }
            let copy = Array(bytes)
            self.queue.async { self.handleDTLS(copy, from: from) }
        }
        let socket = self.socket
        onQueue {
            self.dtls.onDatagram = { [weak agent] bytes in _ = agent?.path.send(bytes, on: socket) }
            self.dtls.onStateChange = { [weak self] s in self?.dtlsStateChanged(s) }
            // SCTP packets of the data channels (RFC 8261).
            self.dtls.onApplicationData = { [weak self] bytes in self?.dataChannels.input(bytes) }
        }
        agent.start()
    }

    /// Both descriptions are known: DTLS takes `role`, the media settings come from `answer`, and
    /// the handshake starts as soon as ICE has a pair.
    func startTransport(answer: JSEPSessionDescription, answerIsLocal: Bool, role: DTLSTransport.Role) throws(PeerConnectionError)
    {
        let local: JSEPSessionDescription? = answerIsLocal ? answer : shared.withLock { $0.signalling.local }
        let negotiation = PeerConnectionNegotiation(answer: answer, local: local)
        let data = answer.media.contains { $0.isDataChannel && !$0.isRejected }
        guard negotiation.opus != nil || negotiation.vp8 != nil || negotiation.vp9 != nil || data else {
            throw .invalidDescription("no codec in common")
        }
        // One step on the queue: the DTLS role is set before `handleDTLS` (which waits for
        // `negotiated`) or `pathChanged` (which waits for `.connecting`) can start the handshake.
        // Set apart, a datagram queued meanwhile started it in the default role: both ends then
        // sent a ClientHello, each dropped the other's, and both timed out.
        onQueue {
            self.shared.withLock {
                $0.negotiated = negotiation
                $0.answer = (answer, answerIsLocal)
                $0.role = role
            }
            self.dtls.setRole(role)
            self.setState(.connecting, error: nil)
            self.connectDeadline = MonotonicTime.now + .seconds(clamping: max(self.configuration.connectTimeoutSeconds, 0))
            let t = DispatchSource.makeTimerSource(queue: self.queue)
            t.schedule(deadline: .now() + .milliseconds(20), repeating: .milliseconds(20), leeway: .milliseconds(5))
            t.setEventHandler { [weak self] in self?.tick() }
            self.timer = t
            t.resume()
            self.pathChanged()
        }
    }

    /// On the queue: the selected pair changed; the DTLS handshake starts on the first one, and a
    /// connected connection whose route went away (consent expired) fails.
    func pathChanged() {
        if state == .connected, agent?.path.route == nil { return fail(.connectionLost) }
        guard state == .connecting, agent?.path.route != nil else { return }
        if !dtlsStarted {
            dtlsStarted = true
            dtls.start(now: .now)
        }
        replayEarlyDTLS()
    }

    /// On the queue: hands the early DTLS datagrams to `handleDTLS` once it can take them.
    func replayEarlyDTLS() {
        guard !earlyDTLS.isEmpty, shared.withLock({ $0.negotiated != nil }), agent?.path.route != nil else { return }
        let early = earlyDTLS
        earlyDTLS.removeAll()
        for e in early { handleDTLS(e.bytes, from: e.from) }
    }

    /// On the queue, every 20 ms: while connecting, DTLS retransmissions and the connect deadline;
    /// once connected, sender reports.
    func tick() {
        let now = MonotonicTime.now
        if state == .connected {
            if let feedback, let agent { feedback.sendReportIfDue(now: now, socket: socket, path: agent.path) }
            dataChannels.pump()
        } else if state == .connecting {
            if !dtlsStarted { pathChanged() }
            if dtlsStarted, let d = dtls.nextDeadline(now: now), d <= now { dtls.handleTimeout(now: now) }
            if state == .connecting, let deadline = connectDeadline, now > deadline {
                fail(dtlsStarted ? .dtls(.handshakeTimeout) : .iceFailed)
            }
        } else {
            timer?.cancel()
            timer = nil
        }
    }

    /// On the queue: a DTLS datagram, straight from the socket or unwrapped from the TURN relay.
    /// Only from the selected pair's peer (the ICE-verified address),
    /// and only once the roles are known (until then kept in `earlyDTLS`).
    func handleDTLS(_ bytes: [UInt8], from: SocketAddress) {
        guard shared.withLock({ $0.negotiated != nil }), let route = agent?.path.route else {
            if state == .connecting || state == .new, earlyDTLS.count < Self.maxEarlyDTLS, bytes.count <= 2048 {
                earlyDTLS.append((bytes, from))
            }
            return
        }
        // Only from the selected pair's peer: its address on a direct route, or the address our
        // TURN allocation saw it from on a relayed one.
        guard route.peer == from else { return }
        if !dtlsStarted, state == .connecting {
            dtlsStarted = true
            dtls.start(now: .now)
        }
        dtls.handle(datagram: bytes, now: .now)
    }

    /// On the queue, inside a DTLS call.
    func dtlsStateChanged(_ s: DTLSTransport.State) {
        switch s {
        case .connected:
            guard let keys = dtls.takeKeys() else { return fail(.dtls(.protocolError(reason: "no SRTP keys exported"))) }
            startMedia(keys)
        case .failed(let e):
            fail(.dtls(e))
        case .closed:
            if state == .connected {
                stopMedia()
                dataChannels.shutdown()
                agent?.close()
                setState(.closed, error: nil)
            }
        default:
            break
        }
    }

    /// On the queue: the receive pipeline takes the socket, the local tracks start sending.
    func startMedia(_ keys: DTLSTransport.SRTPKeys) {
        guard let agent, state == .connecting else { return }
        let (n, tracks, renderer) = shared.withLock { ($0.negotiated!, $0.tracks, $0.videoRenderer) }
        var c = ReceivePipelineConfiguration(remoteKey: keys.receive, localKey: keys.send)
        c.video = videoReceiveSettings(n)
        // The audio stream always exists, so a renegotiation can start audio; it takes packets
        // only under a negotiated payload type (set before the pipeline starts).
        var a = AudioReceiveSettings(payloadType: n.opus ?? 111)
        a.frameDecryption = configuration.frameDecryption
        a.audioLevelExtensionID = n.audioLevelExtensionID
        c.audio = a
        c.maxAudioStreams = configuration.maxAudioStreams
        c.maxStreams = configuration.maxReceiveStreams
        // Several participants' streams: an SFU subscription (Janus finds the stream feedback is
        // about by the first report block).
        c.feedbackLedByReportBlock = configuration.maxAudioStreams > 1
        c.localSSRC = freshSSRC()
        c.cname = cname
        // The peer numbers its packets transport-wide (browsers do when transport-cc is agreed):
        // transport feedback goes back every 100 ms for its send-side congestion control.
        c.transportSequenceNumberExtensionID = n.transportSequenceExtensionID
        // With transport feedback the sender runs its own estimate on it; a REMB from our
        // receive-side estimate beside it would only cap that (libwebrtc receivers send none then).
        c.sendREMB = n.transportSequenceExtensionID == nil
        let pipeline: ReceivePipeline
        do {
            pipeline = try ReceivePipeline(socket: socket, configuration: c, renderer: renderer?.renderer)
        } catch {
            return fail(.setup("receive pipeline: \(error)"))
        }
        guard let rtcpContext = try? SRTPContext(material: keys.send, direction: .outbound) else {
            return fail(.setup("SRTCP context"))
        }
        let feedback = PeerConnectionFeedback(
            session: RTCPSenderSession(
                targets: tracks.map(\.feedbackTarget), startBitrate: configuration.videoBitrate,
                maximumBitrate: configuration.effectiveMaximumVideoBitrate),
            outbound: rtcpContext, cname: cname)
        self.feedback = feedback
        pipeline.rtcpFeedbackHandler = { bytes, arrival in feedback.handle(bytes, arrival: arrival) }
        pipeline.otherDatagramHandler = { [weak self, weak agent] d in
            guard let source = d.source, let first = d.bytes.first else { return }
            if DTLSTransport.isDTLS(firstByte: first) {
                guard let connection = self else { return }
                let copy = Array(d.bytes)
                connection.queue.async { connection.handleDTLS(copy, from: source) }
            } else {
                agent?.handleDatagram(d.bytes, from: source, to: d.destination)
            }
        }
        pipeline.sendPath = agent.path
        pipeline.updatePayloadTypes(video: c.video, audioPayloadType: n.opus)
        agent.onRelayedMedia = { [weak pipeline] bytes in pipeline?.inject(bytes) }
        agent.stopReading()
        pipeline.start()
        self.pipeline = pipeline
        srtpKeys = keys
        shared.withLock { $0.suite = keys.suite }
        setState(.connected, error: nil)
        if let (answer, local) = shared.withLock({ $0.answer }) { applyNegotiation(answer: answer, answerIsLocal: local) }
    }

    /// The receive settings for the negotiated video codecs.
    func videoReceiveSettings(_ n: PeerConnectionNegotiation) -> [VideoReceiveSettings] {
        var out: [VideoReceiveSettings] = []
        for (codec, pt, rtx) in [(VPXCodec.vp8, n.vp8, n.vp8RTX), (.vp9, n.vp9, n.vp9RTX)] {
            guard let pt else { continue }
            var v = VideoReceiveSettings(codec: codec, payloadType: pt)
            v.frameDecryption = configuration.frameDecryption
            v.rtxPayloadType = rtx
            v.absSendTimeExtensionID = n.absSendTimeExtensionID
            out.append(v)
        }
        return out
    }

    /// On the queue: an exchange completed with `answer`. Before media runs it is kept for
    /// `startMedia`; once connected, the receive side takes the answer's payload types, audio
    /// playout starts when audio appears, and each local track sends (or stops) as its section
    /// now says: a track that already sends keeps its SRTP context, a newly sending one gets a
    /// fresh context and starts with a keyframe.
    func applyNegotiation(answer: JSEPSessionDescription, answerIsLocal: Bool) {
        let (local, remote) = shared.withLock { ($0.signalling.local, $0.signalling.remote) }
        let n = PeerConnectionNegotiation(answer: answer, local: answerIsLocal ? answer : local)
        let (tracks, mids, sink, streamSink) = shared.withLock { s in
            s.answer = (answer, answerIsLocal)
            // A removed track's section that this exchange rejected is gone for good: it is not
            // offered again (JSEP keeps a rejected section rejected).
            s.detached.removeAll { d in answer.media.first { $0.mid == d.mid }?.isRejected ?? true }
            if n.opus != nil || n.vp8 != nil || n.vp9 != nil { s.negotiated = n }
            return (s.tracks, s.mids, s.audioSink, s.audioStreamSink)
        }
        guard state == .connected, let keys = srtpKeys, let agent, let pipeline else { return }
        startDataChannels(answer: answer)
        pipeline.updatePayloadTypes(video: videoReceiveSettings(n), audioPayloadType: n.opus)
        if n.opus != nil, playout == nil {
            var clock: AudioPlayoutClock?
            if configuration.maxAudioStreams > 1, let streamSink {
                clock = AudioPlayoutClock(pipeline: pipeline, sink: streamSink)
            } else if let sink, let stream = pipeline.audio {
                clock = AudioPlayoutClock(stream: stream, sink: sink)
            }
            clock?.start()
            playout = clock
        }
        // Header extensions: the peer's IDs for what we send, per section (they may change with
        // each exchange); the estimate takes the peer's transport feedback when any section
        // carries transport-wide numbers.
        var numbered = false
        for t in tracks {
            let ids =
                (answerIsLocal ? remote : answer).map {
                    PeerConnectionHeaderExtensions.sendIDs(mid: mids[t.jsep.id], remote: $0, answer: answer)
                } ?? NegotiatedHeaderExtensionIDs()
            t.sender.protection.setExtensionIDs(ids)
            t.sender.protection.setMid(mids[t.jsep.id])
            // Opus in-band FEC when the peer's decoder takes it (`useinbandfec=1` in its section).
            if let audio = t.audio {
                let section = (answerIsLocal ? remote : answer)?.media.first { $0.mid == mids[t.jsep.id] }
                audio.setInbandFEC(section?.codecs.first { $0.known == .opus }?.usesInbandFEC ?? false)
            }
            if ids.transportSequence != 0 { numbered = true }
        }
        feedback?.setTransportSequenceNumbers(numbered ? transportNumbers : nil)
        for t in tracks {
            guard let (pt, rtx) = t.sendPayloadType(mid: mids[t.jsep.id], answer: answer, answerIsLocal: answerIsLocal) else {
                t.sender.deactivate()
                continue
            }
            if t.sender.isActive {
                t.sender.retarget(toPayloadType: pt, retransmissionPayloadType: rtx)
                continue
            }
            // The stream keeps the first context it is given (its rollover counter goes on when
            // a track sends again after a pause); later ones are ignored.
            guard let context = try? SRTPContext(material: keys.send, direction: .outbound) else {
                return fail(.setup("SRTP context"))
            }
            t.sender.activate(context: context, payloadType: pt, retransmissionPayloadType: rtx, path: agent.path)
            t.video?.requestKeyframe()
        }
        feedback?.replaceTargets(tracks.map(\.feedbackTarget))
    }

    /// On the queue: stops the receive side and the senders (the send streams keep running until
    /// `close`, dropping their packets).
    func stopMedia() {
        for t in shared.withLock({ $0.tracks }) { t.sender.deactivate() }
        feedback = nil
        playout?.stop()
        playout = nil
        pipeline?.stop()
        pipeline = nil
    }

    /// On the queue: the connection failed; no media flows from now on.
    func fail(_ error: PeerConnectionError) {
        stopMedia()
        dataChannels.shutdown()
        timer?.cancel()
        timer = nil
        // Not inside the DTLS endpoint's own callback.
        queue.async { self.dtls.close() }
        agent?.close()
        setState(.failed, error: error)
    }
}
