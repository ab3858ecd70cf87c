import Glibc
import MediaBase
import MediaTransport
import MediaWire
import Synchronization

/// What a `ReceivePipeline` receives and how it answers. Thread rule: a value type. Cost: none.
public struct ReceivePipelineConfiguration: Sendable {
    /// The sender's SRTP key (inbound SRTP/SRTCP). nil: plain RTP/RTCP (tests and tools only).
    public var remoteKey: SRTPKeyMaterial?
    /// Our key for the SRTCP we send (RR, NACK, PLI, FIR, REMB). nil: `remoteKey` is used.
    public var localKey: SRTPKeyMaterial?
    /// Video streams by payload type; a new SSRC with one of these payload types starts a stream.
    public var video: [VideoReceiveSettings] = []
    /// The audio streams' settings (Opus), or nil.
    public var audio: AudioReceiveSettings? = nil
    /// Most audio SSRCs taken, each its own stream with these settings (an SFU subscription
    /// carries one per participant); packets of further SSRCs are dropped and counted. The
    /// first SSRC plays in `ReceivePipeline.audio`, every one in `audioStreams`.
    public var maxAudioStreams = 1
    /// SSRC of our RTCP.
    public var localSSRC: UInt32 = UInt32.random(in: 1...UInt32.max)
    /// CNAME in our RTCP (RFC 3550 §6.5.1).
    public var cname = "revue-receiver"
    /// Mean regular receiver report interval in milliseconds; each interval is drawn from
    /// 0.5...1.5 times it (RFC 3550 §6.3.1). Feedback such as NACK goes out at once (RFC 4585
    /// §3.5.2 early RTCP).
    public var reportIntervalMilliseconds: Double = 500
    /// Where RTCP goes; nil: back to where the media comes from.
    public var rtcpDestination: SocketAddress? = nil
    /// Send REMB (receiver-side delay-based estimate) with reports.
    public var sendREMB = true
    /// The RFC 8285 ID of the transport-wide sequence number in the sender's packets: when set,
    /// every RTP packet carrying it (audio, video, RTX) is recorded and transport feedback
    /// (draft-holmer-rmcat-transport-wide-cc-extensions-01 §3.1) goes out every
    /// `transportFeedbackIntervalMilliseconds`. nil (default): none.
    public var transportSequenceNumberExtensionID: UInt8? = nil
    /// Interval between transport feedback packets (libwebrtc: 100 ms).
    public var transportFeedbackIntervalMilliseconds = 100
    /// Every NACK, PLI or FIR goes in a compound of its own, led by a receiver report whose one
    /// block is the stream it is about, even with a single video stream. A server that
    /// demultiplexes bundled RTCP by the first report block (Janus) drops feedback that follows
    /// a report without blocks. Always so with several video streams.
    public var feedbackLedByReportBlock = false
    /// Use FIR (RFC 5104) instead of PLI to ask for keyframes.
    public var useFullIntraRequest = false
    /// Largest number of SSRCs accepted (more are dropped and counted).
    public var maxStreams = 8
    /// Lip sync: with one audio and one video stream, the stream that plays early is delayed so
    /// both play in step, from the sender reports' capture-time mapping (`AudioVideoSync`).
    /// The video stream needs `schedulesRendering` for its share of the delay.
    public var synchronizesAudioAndVideo = true
    /// Engine tick in milliseconds: the longest the engine sleeps waiting for packets.
    public var tickMilliseconds = 5
    /// recvmmsg batch size.
    public var batchCapacity = 64

    /// An empty configuration: add `video` and/or `audio`.
    public init(remoteKey: SRTPKeyMaterial?, localKey: SRTPKeyMaterial? = nil) {
        self.remoteKey = remoteKey
        self.localKey = localKey
    }
}

/// Counters of everything that reached the pipeline's socket. Thread rule: a value type.
public struct ReceivePipelineStatistics: Sendable, Equatable {
    /// Datagrams received.
    public var datagrams = 0
    /// Datagrams classified RTP / RTCP / other (RFC 7983).
    public var rtp = 0, rtcp = 0, other = 0
    /// SRTP/SRTCP packets that failed authentication (forged, corrupted, wrong key): dropped.
    public var authFailures = 0
    /// SRTP/SRTCP packets refused as replays (already received, or older than the window): dropped.
    public var replays = 0
    /// SRTP packets refused for another reason (too short, malformed header, bad MKI): dropped.
    public var srtpErrors = 0
    /// Packets that passed SRTP but are not valid RTP/RTCP: dropped.
    public var malformed = 0
    /// Packets with a payload type no stream is configured for, or beyond `maxStreams`: dropped.
    public var unknownStream = 0
    /// Truncated datagrams (larger than the receive buffers): dropped.
    public var truncated = 0
    /// RFC 4588 retransmissions unwrapped into their original stream.
    public var rtxUnwrapped = 0
    /// RTX packets dropped: no single stream they can belong to.
    public var rtxDropped = 0
    /// Padding-only RTX packets (a sender's bandwidth probes): their transport-wide numbers are
    /// recorded for feedback, the rest dropped.
    public var rtxPadding = 0
    /// RTCP compound packets sent, and how many NACK, PLI, FIR, REMB packets they carried.
    public var rtcpSent = 0, nacksSent = 0, plisSent = 0, firsSent = 0, rembsSent = 0
    /// Transport feedback packets sent.
    public var transportFeedbackSent = 0
    /// Sender reports received.
    public var senderReportsReceived = 0
    /// Datagrams handed to `inject` (media relayed over TURN TCP) dropped because too many waited.
    public var injectedDropped = 0
}

/// The receive half of the engine: one UDP socket read in `recvmmsg` batches on the pipeline's own
/// thread -> demultiplex by first byte (RFC 7983) and SSRC/payload type -> SRTP/SRTCP unprotect
/// (failures counted and dropped, never passed on) -> per-SSRC `VideoReceiveStream` (jitter buffer,
/// NACK, depacketize, decode, render) or the `AudioReceiveStream` (pulled by an audio thread) ->
/// RTCP back to the sender: receiver reports (RFC 3550 §6.4.2), generic NACK (RFC 4585 §6.2.1),
/// PLI (§6.3.1) or FIR (RFC 5104 §4.3.1), REMB.
///
/// Thread rule: `start`/`stop` from one controlling thread; `statistics`, `inboundStats` and
/// `audio.pullAudio` (from one audio thread) at any time; renderers are called on the pipeline's
/// thread. Cost: per packet one unprotect in place, one copy into the jitter buffer and one into the
/// frame; no allocation in steady state (RTCP building allocates small arrays a few times a second).
/// Sendable: the handler properties are read only by `start`, which copies them into the engine before its
/// thread starts; `thread` is touched only by `start`/`stop`; `engine` is a `let` (see its note).
public final class ReceivePipeline: @unchecked Sendable {
    /// The configuration.
    public let configuration: ReceivePipelineConfiguration
    /// The socket packets arrive on (and RTCP leaves from).
    public let socket: UDPSocket
    /// The (first) audio stream, when configured: pull it with `pullAudio(into:)` or an
    /// `AudioPlayoutClock`.
    public let audio: AudioReceiveStream?

    /// Every audio stream so far with its SSRC, in order of arrival (`audio` first, once its
    /// first packet came). More appear only with `maxAudioStreams` above 1. Thread rule: any
    /// thread. Cost: one lock and a copy of the list.
    public var audioStreams: [(ssrc: UInt32, stream: AudioReceiveStream)] { engine.audioList.withLock { $0 } }

    /// Counts changes of `audioStreams`, so a reader can skip the copy while it stays the same.
    /// Thread rule: any thread. Cost: one atomic load.
    public var audioStreamsGeneration: Int { engine.audioGeneration.load(ordering: .acquiring) }
    /// Called on the pipeline's thread for datagrams that are neither RTP nor RTCP (STUN, session
    /// packets); set before `start`.
    public var otherDatagramHandler: (@Sendable (UDPDatagram) -> Void)?
    /// Called on the pipeline's thread with every RTCP compound packet that passed SRTCP (RFC 3711
    /// §3.4), unprotected, and its arrival time: when the socket also sends our
    /// media (a call leg), this is the participant's feedback about it (NACK, PLI, FIR, REMB,
    /// receiver reports) for an `RTCPSenderSession`. The span cannot outlive the call.
    /// Set before `start`.
    public var rtcpFeedbackHandler: (@Sendable (RawSpan, _ arrival: MonotonicTime) -> Void)?
    /// Where our RTCP goes when set (an ICE agent's selected pair, direct or through a TURN
    /// relay); nil: back to where the media comes from, or `rtcpDestination`. Set before `start`.
    package var sendPath: ICESendPath?

    /// The path to the sender changed (an ICE failover): every video stream asks for a keyframe
    /// (PLI, or FIR when configured) with the next feedback and stops asking for the packets lost
    /// on the old path (`VideoReceiveStream.pathChanged`). Thread rule: any thread. Cost: one
    /// atomic store.
    package func pathChanged() { engine.pathChanged.store(true, ordering: .relaxed) }

    /// Most injected datagrams waiting for the pipeline's thread; more are dropped.
    package static let maxInjected = 512

    private let engine: Engine
    private var thread: TransportThread?

    /// Prepares the pipeline on `socket` (bound by the caller). `renderer` receives every stream's
    /// decoded video. Throws when an SRTP context or a codec cannot be created.
    public init(socket: UDPSocket, configuration: ReceivePipelineConfiguration, renderer: VideoRenderer?) throws {
        self.configuration = configuration
        self.socket = socket
        var inbound: SRTPContext? = nil
        var outbound: SRTPContext? = nil
        if let key = configuration.remoteKey {
            var options = SRTPContext.Options()
            options.replayWindowSize = 1024
            inbound = try SRTPContext(material: key, direction: .inbound, options: options)
            outbound = try SRTPContext(material: configuration.localKey ?? key, direction: .outbound)
        }
        if let a = configuration.audio {
            audio = try AudioReceiveStream(ssrc: 0, settings: a)
        } else {
            audio = nil
        }
        engine = Engine(
            configuration: configuration, socket: socket, inbound: inbound, outbound: outbound,
            renderer: renderer, audio: audio)
    }

    deinit { stop() }

    /// Starts the pipeline's thread. Calling it twice traps.
    public func start() {
        precondition(thread == nil, "ReceivePipeline.start() called twice")
        precondition(!engine.driven, "ReceivePipeline.start() on a pipeline driven by its caller")
        engine.other = otherDatagramHandler
        engine.feedback = rtcpFeedbackHandler
        engine.sendPath = sendPath
        engine.stopping.store(false, ordering: .releasing)
        thread = TransportThread(name: "ReceivePipeline") { [engine] in engine.run() }
    }

    /// Stops and joins the thread (within about one tick). Idempotent.
    public func stop() {
        engine.stopping.store(true, ordering: .releasing)
        thread?.join()
        thread = nil
    }

    /// Hands the pipeline a datagram that did not arrive on its socket (media relayed over a TURN
    /// TCP connection, or in a TURN Data indication); it is handled on the pipeline's thread within
    /// one tick, as if received now. Thread rule: any thread. Cost: one copy and one allocation;
    /// beyond `maxInjected` waiting, dropped (counted in `statistics.injectedDropped`).
    package func inject(_ bytes: UnsafeRawBufferPointer) {
        let copy = Array(bytes)
        engine.injected.withLock { q in
            if q.queue.count < Self.maxInjected { q.queue.append(copy) } else { q.drops += 1 }
        }
    }

    /// Changes which payload types the running pipeline takes (a WebRTC renegotiation that adds
    /// or changes a video codec, or starts or stops audio): `video` replaces the video settings,
    /// `audioPayloadType` the payload type of the audio stream (nil: audio packets are dropped;
    /// the audio stream exists only when the configuration had `audio`). Streams already running
    /// keep their settings. Applied on the pipeline's thread within one tick.
    /// Thread rule: any thread. Cost: a lock; the settings are copied.
    package func updatePayloadTypes(video: [VideoReceiveSettings], audioPayloadType: UInt8?) {
        engine.pendingUpdate.withLock { $0 = (video, audioPayloadType) }
        engine.updatePending.store(true, ordering: .releasing)
    }

    /// Socket-level counters (refreshed every engine tick).
    public var statistics: ReceivePipelineStatistics { engine.published.withLock { $0.counters } }

    /// W3C inbound-rtp statistics of every stream (refreshed every engine tick).
    public var inboundStats: [InboundRTPStreamStats] { engine.published.withLock { $0.inbound } }

    /// The longest video freeze so far in seconds, over all streams (refreshed every tick).
    public var longestFreezeSeconds: Double { engine.published.withLock { $0.longestFreeze } }

    /// The most packets any video jitter buffer held at once (at most its capacity: memory is bounded).
    public var peakBufferedPackets: Int { engine.published.withLock { $0.peakBuffered } }

    struct Published {
        var counters = ReceivePipelineStatistics()
        var inbound: [InboundRTPStreamStats] = []
        var longestFreeze: Double = 0
        var peakBuffered = 0
        var sync: AudioVideoSyncState? = nil
    }

    /// Lip sync's state (see `ReceivePipelineConfiguration.synchronizesAudioAndVideo`), refreshed
    /// about once a second once both streams have had a sender report and played.
    /// Thread rule: a value type. Cost: none.
    public struct AudioVideoSyncState: Sendable, Equatable {
        /// How much later (positive) or earlier audio plays than video, relative to their capture
        /// times, at the last measurement, in milliseconds.
        public var offsetMilliseconds: Double
        /// The extra delay given to video, in milliseconds.
        public var videoDelayMilliseconds: Double
        /// The extra delay given to audio, in milliseconds.
        public var audioDelayMilliseconds: Double
    }

    /// Lip sync's latest measurement and delays; nil while it has nothing to measure (no audio
    /// or video yet, no sender reports, or turned off). Thread rule: any thread. Cost: one lock.
    public var audioVideoSync: AudioVideoSyncState? { engine.published.withLock { $0.sync } }

    /// Everything the pipeline's thread owns.
    /// Sendable: the `var`s belong to the pipeline's thread (`start` sets `other`, `feedback` and `sendPath` before
    /// that thread starts), or, driven (`startDriven`), to the one thread that drives it; other threads use only
    /// the Mutexes and atomics.
    final class Engine: @unchecked Sendable {
        let configuration: ReceivePipelineConfiguration
        let socket: UDPSocket
        let inbound: SRTPContext?
        let outbound: SRTPContext?
        let renderer: VideoRenderer?
        let audio: AudioReceiveStream?
        let stopping = Atomic<Bool>(false)
        let published = Mutex(Published())
        var other: (@Sendable (UDPDatagram) -> Void)?
        var feedback: (@Sendable (RawSpan, MonotonicTime) -> Void)?
        var sendPath: ICESendPath?
        /// Driven from the caller (`startDriven`): no thread, no socket reads, every time from
        /// the caller, and RTCP handed to `rtcpOutput` instead of the socket.
        var driven = false
        /// Where RTCP goes when driven: the protected compound packet and its destination.
        var rtcpOutput: ((UnsafeRawBufferPointer, SocketAddress?) -> Void)?
        /// Datagrams from `inject`, and how many did not fit (read under the lock).
        let injected = Mutex<(queue: [[UInt8]], drops: Int)>(([], 0))
        /// Settings from `updatePayloadTypes`, taken by the pipeline's thread.
        let pendingUpdate = Mutex<(video: [VideoReceiveSettings], audio: UInt8?)?>(nil)
        let updatePending = Atomic<Bool>(false)
        /// Set by `pathChanged`, taken by the pipeline's thread.
        let pathChanged = Atomic<Bool>(false)
        /// The video settings and audio payload type in force (the pipeline's thread).
        var videoSettings: [VideoReceiveSettings]
        var audioPayloadType: UInt8?
        var counters = ReceivePipelineStatistics()
        var videos: [VideoReceiveStream] = []
        /// The audio streams (the first is `audio`) and their SSRCs, in arrival order.
        var audios: [AudioReceiveStream] = []
        var audioSSRCs: [UInt32] = []
        /// `audios` as published to other threads, and its change count.
        let audioList = Mutex<[(ssrc: UInt32, stream: AudioReceiveStream)]>([])
        let audioGeneration = Atomic<Int>(0)
        var remote: SocketAddress?
        var reportSchedule: RTCPReportSchedule
        var lastPublishNs: UInt64 = 0
        var avSync = AudioVideoSync()
        var lastSyncNs: UInt64 = 0
        var syncState: AudioVideoSyncState?
        let batch: UDPReceiveBatch
        let rtcpBuffer: UnsafeMutableRawBufferPointer
        /// Where an RTX packet's original is rebuilt before it enters its stream's jitter buffer.
        let rtxBuffer: UnsafeMutableRawBufferPointer

        init(
            configuration: ReceivePipelineConfiguration, socket: UDPSocket, inbound: SRTPContext?,
            outbound: SRTPContext?, renderer: VideoRenderer?, audio: AudioReceiveStream?
        ) {
            self.configuration = configuration
            self.socket = socket
            self.inbound = inbound
            self.outbound = outbound
            self.renderer = renderer
            self.audio = audio
            videoSettings = configuration.video
            audioPayloadType = configuration.audio?.payloadType
            reportSchedule = RTCPReportSchedule(intervalMilliseconds: configuration.reportIntervalMilliseconds)
            batch = UDPReceiveBatch(capacity: configuration.batchCapacity, bufferSize: 2048)
            rtcpBuffer = .allocate(byteCount: 1500, alignment: 16)
            rtxBuffer = .allocate(byteCount: 2048, alignment: 16)
            videos.reserveCapacity(configuration.maxStreams)
        }

        deinit { rtcpBuffer.deallocate(); rtxBuffer.deallocate() }

        func run() {
            while !stopping.load(ordering: .acquiring) {
                if (try? socket.waitUntilReadable(timeoutMilliseconds: waitMilliseconds())) == true {
                    // Drain what is queued, a batch at a time, before playing out.
                    var rounds = 0
                    while rounds < 8, let n = try? batch.receive(from: socket, wait: false), n > 0 {
                        for i in 0..<n { handle(batch[i]) }
                        rounds += 1
                    }
                }
                drainInjected(now: nil)
                applyPendingUpdate()
                tick(now: .now)
            }
        }

        /// Takes the settings `updatePayloadTypes` left, if any.
        func applyPendingUpdate() {
            guard updatePending.load(ordering: .acquiring) else { return }
            updatePending.store(false, ordering: .relaxed)
            if let u = pendingUpdate.withLock({ u in
                defer { u = nil }; return u
            }) {
                videoSettings = u.video
                audioPayloadType = u.audio
            }
        }

        /// How long to wait for packets: one tick, or less when a video frame is due to leave its
        /// jitter buffer sooner (render scheduling), so frames are released within a millisecond
        /// of their playout time rather than a tick late.
        /// `now` nil: the clock is read (only when a frame is waiting).
        func waitMilliseconds(now reading: MonotonicTime? = nil) -> Int {
            let due = videos.lazy.compactMap { $0.nextRelease?.nanoseconds }.min()
            guard let due else { return configuration.tickMilliseconds }
            let now = (reading ?? MonotonicTime.now).nanoseconds
            let untilDue = due > now ? Int((due - now + 999_999) / 1_000_000) : 0
            return min(configuration.tickMilliseconds, untilDue)
        }

        /// Handles the injected datagrams as received at `now` (nil: the clock, read only when
        /// there are some).
        func drainInjected(now reading: MonotonicTime?) {
            // Taken out whole, so each datagram's storage is ours alone and is unprotected in
            // place without another copy.
            var items: [[UInt8]] = injected.withLock { q in
                counters.injectedDropped = q.drops
                guard !q.queue.isEmpty else { return [] }
                defer { q.queue = [] }
                return q.queue
            }
            guard !items.isEmpty else { return }
            let now = reading ?? MonotonicTime.now
            for i in items.indices {
                items[i].withUnsafeMutableBytes { b in
                    handle(
                        UDPDatagram(
                            bytes: UnsafeRawBufferPointer(b), source: remote, receivedAt: now, isTruncated: false))
                }
            }
        }

        func handle(_ d: UDPDatagram) {
            counters.datagrams += 1
            if d.isTruncated { counters.truncated += 1; return }
            switch RTPDemultiplexer.classify(d.bytes.bytes) {
            case .rtp:
                counters.rtp += 1
                handleRTP(d)
            case .rtcp:
                counters.rtcp += 1
                handleRTCP(d)
            case .turnChannel:
                // TURN ChannelData (RFC 8656 §12.4) from our relay: RTP/RTCP inside is handled
                // here, in place; anything else (checks through the relay) goes to `other`.
                if let range = TURNChannelData.parse(d.bytes.bytes)?.data {
                    let inner = UnsafeRawBufferPointer(rebasing: d.bytes[range])
                    let kind = RTPDemultiplexer.classify(inner.bytes)
                    if kind == .rtp || kind == .rtcp {
                        let unwrapped = UDPDatagram(
                            bytes: inner, source: d.source, receivedAt: d.receivedAt, isTruncated: false)
                        if kind == .rtp {
                            counters.rtp += 1; handleRTP(unwrapped)
                        } else {
                            counters.rtcp += 1; handleRTCP(unwrapped)
                        }
                        return
                    }
                }
                counters.other += 1
                other?(d)
            default:
                counters.other += 1
                other?(d)
            }
        }

        /// Unprotects in place; nil (counted) on failure.
        private func unprotect(_ d: UDPDatagram, rtcp: Bool) -> UnsafeRawBufferPointer? {
            guard let ctx = inbound else { return d.bytes }
            let buffer = UnsafeMutableRawBufferPointer(mutating: d.bytes)
            do {
                var span = buffer.mutableBytes
                let n =
                    rtcp
                    ? try ctx.unprotectRTCP(&span, length: buffer.count)
                    : try ctx.unprotect(&span, length: buffer.count)
                return UnsafeRawBufferPointer(rebasing: d.bytes[0..<n])
            } catch {
                switch error {
                case .authFail: counters.authFailures += 1
                case .replayFail, .replayOld: counters.replays += 1
                default: counters.srtpErrors += 1
                }
                return nil
            }
        }

        private func handleRTP(_ d: UDPDatagram) {
            // Cheap checks before spending a decryption: the payload type must be one we take.
            let pt = d.bytes[1] & 0x7F
            let isVideo = videoSettings.contains { $0.payloadType == pt }
            let isAudio = audioPayloadType == pt
            if !isVideo && !isAudio && videoSettings.contains(where: { $0.rtxPayloadType == pt }) {
                handleRTX(d, payloadType: pt)
                return
            }
            guard isVideo || isAudio else { counters.unknownStream += 1; return }
            guard let bytes = unprotect(d, rtcp: false) else { return }
            guard let packet = try? RTPPacket(parsing: bytes.bytes) else { counters.malformed += 1; return }
            if remote == nil || configuration.rtcpDestination == nil { remote = configuration.rtcpDestination ?? d.source }
            let ssrc = packet.header.ssrc
            recordTransportSequence(packet, arrival: d.receivedAt)
            if isAudio {
                guard let stream = audioStream(ssrc: ssrc) else { counters.unknownStream += 1; return }
                stream.insert(packet, in: bytes, arrival: d.receivedAt)
                return
            }
            guard let stream = videoStream(ssrc: ssrc, payloadType: pt) else { counters.unknownStream += 1; return }
            stream.insert(packet, in: bytes, arrival: d.receivedAt)
        }

        /// An RFC 4588 retransmission (its own SSRC and payload type): unprotected on its SSRC (its
        /// own SRTP index and replay window), rebuilt as the original packet (RFC 4588 §4: the OSN
        /// becomes the sequence number) and inserted into the one stream whose payload type the RTX
        /// payload type is associated with (`apt`). It does not start a stream: RTX for a stream not
        /// yet seen, or shared by several streams of that payload type, is dropped and counted.
        private func handleRTX(_ d: UDPDatagram, payloadType pt: UInt8) {
            guard let bytes = unprotect(d, rtcp: false) else { return }
            if RTXPacket.originalSequenceNumber(bytes.bytes) == nil || RTXPacket.isPaddingOnly(bytes.bytes) {
                // Padding (a sender's bandwidth probe): its transport-wide number counts for the
                // sender's estimate; nothing else in it does.
                guard let packet = try? RTPPacket(parsing: bytes.bytes) else { counters.malformed += 1; return }
                recordTransportSequence(packet, arrival: d.receivedAt)
                counters.rtxPadding += 1
                return
            }
            var target: VideoReceiveStream?
            var matches = 0
            for v in videos where v.settings.rtxPayloadType == pt { target = v; matches += 1 }
            guard matches == 1, let stream = target,
                let n = RTXPacket.unwrap(bytes, payloadType: stream.settings.payloadType, ssrc: stream.ssrc, into: rtxBuffer)
            else {
                counters.rtxDropped += 1
                return
            }
            let original = UnsafeRawBufferPointer(rebasing: rtxBuffer[0..<n])
            guard let packet = try? RTPPacket(parsing: original.bytes) else {
                counters.malformed += 1
                return
            }
            counters.rtxUnwrapped += 1
            recordTransportSequence(packet, arrival: d.receivedAt)
            stream.insert(packet, in: original, arrival: d.receivedAt)
        }

        /// The audio stream of `ssrc`: the first SSRC takes `audio`, later ones (up to
        /// `maxAudioStreams`) get streams of their own; nil past the limits.
        private func audioStream(ssrc: UInt32) -> AudioReceiveStream? {
            for (i, s) in audioSSRCs.enumerated() where s == ssrc { return audios[i] }
            guard let audio, audios.count < configuration.maxAudioStreams,
                videos.count + audios.count < configuration.maxStreams
            else { return nil }
            let stream: AudioReceiveStream
            if audios.isEmpty {
                stream = audio
                stream.adoptSSRC(ssrc)
            } else {
                var settings = audio.settings
                if let pt = audioPayloadType { settings.payloadType = pt }
                guard let made = try? AudioReceiveStream(ssrc: ssrc, settings: settings) else { return nil }
                stream = made
            }
            audios.append(stream)
            audioSSRCs.append(ssrc)
            let list = Array(zip(audioSSRCs, audios)).map { (ssrc: $0.0, stream: $0.1) }
            audioList.withLock { $0 = list }
            audioGeneration.add(1, ordering: .releasing)
            return stream
        }

        private func videoStream(ssrc: UInt32, payloadType: UInt8) -> VideoReceiveStream? {
            for v in videos where v.ssrc == ssrc { return v.settings.payloadType == payloadType ? v : nil }
            guard videos.count + audios.count < configuration.maxStreams,
                let settings = videoSettings.first(where: { $0.payloadType == payloadType }),
                let stream = try? VideoReceiveStream(ssrc: ssrc, settings: settings, renderer: renderer)
            else { return nil }
            stream.takesTimeFromCaller = driven
            videos.append(stream)
            return stream
        }

        private func handleRTCP(_ d: UDPDatagram) {
            guard let bytes = unprotect(d, rtcp: true) else { return }
            guard let packets = try? RTCPCompound.parse(bytes.bytes) else { counters.malformed += 1; return }
            feedback?(bytes.bytes, d.receivedAt)
            for p in packets {
                if case .senderReport(let sr) = p {
                    counters.senderReportsReceived += 1
                    for v in videos where v.ssrc == sr.ssrc {
                        v.receiveStatistics.senderReportReceived(sr, arrival: d.receivedAt)
                    }
                    for (i, a) in audioSSRCs.enumerated() where a == sr.ssrc {
                        audios[i].receiveStatistics.senderReportReceived(sr, arrival: d.receivedAt)
                    }
                }
            }
        }

        var peakBuffered = 0

        func tick(now: MonotonicTime) {
            let nowNs = now.nanoseconds
            for v in videos {
                peakBuffered = max(peakBuffered, v.jitterBuffer.count)
                v.process(now: now)
            }
            if configuration.synchronizesAudioAndVideo && nowNs >= lastSyncNs + 1_000_000_000 {
                lastSyncNs = nowNs
                synchronize()
            }
            if pathChanged.exchange(false, ordering: .relaxed) { for v in videos { v.pathChanged() } }
            sendFeedback(now: now)
            if nowNs >= lastPublishNs + 20_000_000 || stopping.load(ordering: .relaxed) {
                lastPublishNs = nowNs
                var inbound = videos.map { $0.statsSnapshot() }
                for (ssrc, audio) in zip(audioSSRCs, audios) {
                    var s = audio.statsSnapshot()
                    s.ssrc = ssrc
                    inbound.append(s)
                }
                let freeze = videos.map(\.longestFreeze).max()?.inSeconds ?? 0
                let c = counters, peak = peakBuffered
                let sync = syncState
                published.withLock {
                    $0 = Published(counters: c, inbound: inbound, longestFreeze: freeze, peakBuffered: peak, sync: sync)
                }
            }
        }

        /// One lip-sync step (about once a second): with one audio and one video stream that have
        /// both had a sender report and played, compares each one's delay from capture to play and
        /// hands each stream its extra delay.
        private func synchronize() {
            guard audios.count == 1, let audio = audios.first, videos.count == 1, let video = videos.first,
                let (renderTime, videoTimestamp) = video.lastRendered,
                let (playTime, audioTimestamp) = audio.playoutPosition,
                let videoCapture = video.receiveStatistics.senderTimeNs(ofRTPTimestamp: videoTimestamp, clockRate: 90_000),
                let audioCapture = audio.receiveStatistics.senderTimeNs(ofRTPTimestamp: audioTimestamp, clockRate: 48_000)
            else { return }
            // Unscheduled frames are decoded and rendered as they complete: no extra delay applies.
            avSync.videoCanBeDelayed = video.settings.schedulesRendering
            avSync.update(
                audioPlayNs: Double(playTime.nanoseconds), audioCaptureNs: audioCapture,
                videoRenderNs: Double(renderTime.nanoseconds),
                videoCaptureNs: videoCapture)
            video.synchronizationDelay = .nanoseconds(Int64(avSync.videoExtraNs))
            audio.setSynchronizationDelay(nanoseconds: Int64(avSync.audioExtraNs))
            syncState = AudioVideoSyncState(
                offsetMilliseconds: (avSync.lastOffsetNs ?? 0) / 1e6, videoDelayMilliseconds: avSync.videoExtraNs / 1e6,
                audioDelayMilliseconds: avSync.audioExtraNs / 1e6)
        }

        /// Builds and sends RTCP: feedback at once when due, the regular report on its interval.
        /// RTCP out: receiver reports (all blocks, SDES), NACK, PLI or FIR, REMB and transport
        /// feedback in one compound. With several video streams (an SFU subscription carrying
        /// several feeds), each stream's NACK, PLI or FIR goes in a compound of its own, led by a
        /// receiver report whose one block is that stream's: a server that demultiplexes bundled
        /// RTCP by the first report block (Janus does, as libwebrtc's per-stream RTCP leads it to)
        /// would otherwise take every request for the first stream's. With one stream the extra
        /// report blocks are not needed, and would give the sender's loss-based estimate more,
        /// shorter loss intervals than it is tuned for.
        private func sendFeedback(now: MonotonicTime) {
            let nowNs = now.nanoseconds
            guard remote != nil || sendPath != nil else { return }
            let ssrc = configuration.localSSRC
            var remb = false
            var session: [RTCPPacket] = []
            for v in videos {
                var feedback: [RTCPPacket] = []
                let lost = v.takeNackList(now: now)
                if !lost.isEmpty {
                    // A NACK packet carries at most what fits; 100 pairs is far below the MTU.
                    let nack = RTCPGenericNack(senderSSRC: ssrc, mediaSSRC: v.ssrc, lost: Array(lost.prefix(400)))
                    feedback.append(
                        .genericNack(
                            RTCPGenericNack(
                                senderSSRC: ssrc, mediaSSRC: v.ssrc,
                                pairs: Array(nack.pairs.prefix(100)))))
                    counters.nacksSent += 1
                }
                if v.takeKeyframeRequest(now: now) {
                    if configuration.useFullIntraRequest {
                        firSequence &+= 1
                        feedback.append(
                            .fullIntraRequest(
                                RTCPFullIntraRequest(
                                    senderSSRC: ssrc, entries: [.init(ssrc: v.ssrc, sequenceNumber: firSequence)])))
                        v.noteFullIntraRequestSent()
                        counters.firsSent += 1
                    } else {
                        feedback.append(.pictureLossIndication(RTCPPictureLossIndication(senderSSRC: ssrc, mediaSSRC: v.ssrc)))
                        counters.plisSent += 1
                    }
                }
                if v.bandwidth.usage == .overusing && nowNs >= lastRembNs + 200_000_000 { remb = true }
                if !feedback.isEmpty {
                    if videos.count > 1 || configuration.feedbackLedByReportBlock {
                        let block = v.receiveStatistics.makeReportBlock(now: now)
                        send([.receiverReport(RTCPReceiverReport(ssrc: ssrc, reports: [block]))] + feedback)
                    } else {
                        session += feedback
                    }
                }
            }
            if transportFeedback.hasPending,
                nowNs >= lastTransportFeedbackNs + UInt64(configuration.transportFeedbackIntervalMilliseconds) * 1_000_000,
                let tcc = transportFeedback.makeFeedback(senderSSRC: ssrc, mediaSSRC: videos.first?.ssrc ?? audioSSRCs.first ?? 0)
            {
                lastTransportFeedbackNs = nowNs
                session.append(.transportFeedback(tcc))
                counters.transportFeedbackSent += 1
            }
            let reportDue = reportSchedule.isDue(now: now)
            guard reportDue || !session.isEmpty || remb else { return }
            var blocks: [RTCPReportBlock] = []
            if reportDue {
                for v in videos { blocks.append(v.receiveStatistics.makeReportBlock(now: now)) }
                for (a, audio) in zip(audioSSRCs, audios) {
                    var b = audio.receiveStatistics.makeReportBlock(now: now)
                    b.ssrc = a
                    blocks.append(b)
                }
            }
            // A report holds at most 31 blocks (RFC 3550 §6.4.2: a 5-bit count); more streams
            // (a large SFU subscription) take further reports in the same compound.
            var packets: [RTCPPacket] = [.receiverReport(RTCPReceiverReport(ssrc: ssrc, reports: Array(blocks.prefix(31))))]
            var rest = blocks.dropFirst(31)
            while !rest.isEmpty {
                packets.append(.receiverReport(RTCPReceiverReport(ssrc: ssrc, reports: Array(rest.prefix(31)))))
                rest = rest.dropFirst(31)
            }
            if reportDue {
                packets.append(.sourceDescription(RTCPSourceDescription(ssrc: ssrc, cname: configuration.cname)))
            }
            packets += session
            if configuration.sendREMB && (reportDue || remb) {
                let estimates = videos.map(\.bandwidth.estimate).filter { $0 > 0 }
                if !estimates.isEmpty {
                    packets.append(
                        .receiverEstimatedMaxBitrate(
                            RTCPReceiverEstimatedMaxBitrate(
                                senderSSRC: ssrc, bitrate: UInt64(estimates.reduce(0, +)), ssrcs: videos.map(\.ssrc))))
                    counters.rembsSent += 1
                    lastRembNs = nowNs
                }
            }
            send(packets)
        }

        /// Marshals, protects and sends one compound RTCP packet (dropping trailing packets that
        /// do not fit the buffer).
        private func send(_ compound: [RTCPPacket]) {
            var packets = compound
            var size = RTCPCompound.marshalSize(packets)
            let room = rtcpBuffer.count - (outbound?.rtcpOverhead ?? 0)
            while size > room && packets.count > 1 { packets.removeLast(); size = RTCPCompound.marshalSize(packets) }
            rtcpBuffer.appending { RTCPCompound.marshal(packets, into: &$0) }
            if let outbound {
                var span = rtcpBuffer.mutableBytes
                guard let n = try? outbound.protectRTCP(&span, length: size) else { return }
                size = n
            }
            let bytes = UnsafeRawBufferPointer(rebasing: rtcpBuffer[0..<size])
            if let rtcpOutput {
                rtcpOutput(bytes, remote)
            } else if let sendPath {
                sendPath.send(bytes, on: socket)
            } else if let remote {
                _ = try? socket.send(bytes, to: remote)
            }
            counters.rtcpSent += 1
        }

        var firSequence: UInt8 = 0
        var lastRembNs: UInt64 = 0
        var transportFeedback = TransportFeedbackBuilder()
        var lastTransportFeedbackNs: UInt64 = 0

        /// Records the packet's transport-wide sequence number, when configured.
        @inline(__always) func recordTransportSequence(_ packet: RTPPacket, arrival: MonotonicTime) {
            if let id = configuration.transportSequenceNumberExtensionID,
                let seq = packet.header.extensions.transportSequenceNumber(id: id)
            {
                transportFeedback.packetArrived(sequenceNumber: seq, arrival: arrival)
            }
        }
    }
}

// MARK: - Driven by the caller

extension ReceivePipeline {
    /// Readies the pipeline to be run by its caller instead of its own thread: nothing reads the
    /// socket, datagrams come in through `receive(_:from:at:)`, the engine's periodic work runs in
    /// `runEngine(now:)`, and every time the engine uses (arrivals, playout, NACK and report
    /// timing, decode times) is one the caller passed in, so the pipeline runs on a simulated
    /// clock. Outgoing RTCP (receiver reports, NACK, PLI or FIR, REMB, transport feedback),
    /// SRTCP-protected as on the wire, goes to `rtcpOutput` with its destination (the last media
    /// source, or `configuration.rtcpDestination`) instead of the socket; the bytes are lent for
    /// the call. `reportSeed` seeds the receiver report intervals (RFC 3550 §6.3.1 randomizes
    /// them), so a run repeats exactly. The handler properties are taken now, as `start` takes
    /// them. Calling it after `start`, or twice, traps.
    /// Thread rule: this and every later call to `receive`, `runEngine`, `nextWakeup` and the
    /// audio streams' `pullAudio` from one thread. Cost: none beyond the engine's own work.
    package func startDriven(
        reportSeed: UInt64, rtcpOutput: @escaping (UnsafeRawBufferPointer, SocketAddress?) -> Void
    ) {
        precondition(thread == nil && !engine.driven, "ReceivePipeline.startDriven() after a start")
        engine.driven = true
        engine.rtcpOutput = rtcpOutput
        engine.other = otherDatagramHandler
        engine.feedback = rtcpFeedbackHandler
        engine.sendPath = sendPath
        engine.reportSchedule = RTCPReportSchedule(
            intervalMilliseconds: configuration.reportIntervalMilliseconds, seed: reportSeed)
    }

    /// Handles one datagram that reached the pipeline from `source` at `arrival`, as the engine's
    /// thread handles each datagram of a batch it read. The bytes are unprotected in place (the
    /// caller's buffer is changed) and not kept after the call. Follow the datagrams of one
    /// instant with one `runEngine(now:)`, as the thread does after each batch.
    /// Thread rule: the driving thread (`startDriven`). Cost: as a datagram off the socket.
    package func receive(_ bytes: UnsafeMutableRawBufferPointer, from source: SocketAddress?, at arrival: MonotonicTime) {
        precondition(engine.driven, "ReceivePipeline.receive(_:from:at:) before startDriven")
        engine.handle(
            UDPDatagram(bytes: UnsafeRawBufferPointer(bytes), source: source, receivedAt: arrival, isTruncated: false))
    }

    /// What the engine's thread does after each wait: handles injected datagrams (as received at
    /// `now`), applies `updatePayloadTypes`, then plays out, asks for what is missing and sends
    /// the RTCP that is due, all at `now`. Thread rule: the driving thread. Cost: one engine tick.
    package func runEngine(now: MonotonicTime) {
        precondition(engine.driven, "ReceivePipeline.runEngine(now:) before startDriven")
        engine.drainInjected(now: now)
        engine.applyPendingUpdate()
        engine.tick(now: now)
    }

    /// When the engine's thread, having run at `now`, would wake again if no datagram came: one
    /// tick later, or sooner when a video frame is due to leave its jitter buffer (whole
    /// milliseconds, as the thread's wait). Thread rule: the driving thread. Cost: a scan of the
    /// video streams.
    package func nextWakeup(now: MonotonicTime) -> MonotonicTime {
        now + .milliseconds(engine.waitMilliseconds(now: now))
    }
}
