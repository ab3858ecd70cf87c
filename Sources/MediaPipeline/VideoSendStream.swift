import MediaBase
import MediaCodecs
import MediaFrames
import MediaTransport
import MediaWire
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One outgoing video track: frames captured on any thread (`capturer`) are converted into pooled
/// I420 frames, queued in a lock-free ring, encoded (VP8 or VP9, real time) on the stream's own
/// worker thread, packetized (RFC 7741 / RFC 9628, MTU 1200 by default, frames spread evenly over
/// packets), paced (`RTPPacer`, on by default: 2.5x the target bitrate in 5 ms bursts, from the
/// pacer's thread), SRTP-protected in place, kept for NACK retransmission (as RFC 4588 RTX when
/// configured) and handed to a `PacketSink`.
///
/// Control never stops the pipeline: bitrate, frame rate, resolution, keyframe requests and NACKs
/// are atomics or ring pushes picked up by the worker between frames; `statistics` reads atomic
/// counters. RTCP feedback arrives through `RTPSendFeedbackTarget`.
///
/// Keyframes: every request (API `requestKeyframe`, PLI, FIR, from any number of receivers) goes
/// through one limiter on the worker: a request forces a keyframe at once unless an earlier request
/// forced one less than max(`minimumKeyframeInterval`, round-trip time) ago; requests inside that
/// window are coalesced into one keyframe at its end (times on the capture clock; deferred, never
/// lost: a new receiver still gets its keyframe). The window runs from the last keyframe a request
/// forced, as libwebrtc's `EncoderRtcpFeedback` measures it from the last request it passed to the
/// encoder, not from the last keyframe of any kind: the stream's first keyframe, one after a
/// resize and the encoder's periodic ones (`keyframeInterval`) do not delay a request (a PLI right
/// after a lost first keyframe is answered by the next frame), though each serves the requests
/// waiting when it leaves. A storm of requests still gets one keyframe per window. A NACK the
/// history cannot answer (missing, expired, resent too often) does NOT ask for a keyframe: the
/// receiver's NACK tracker gives up on that packet and sends its own PLI, which comes through the
/// limiter like any other (libwebrtc's sender behaves the same way). Keyframing on every refused
/// NACK turned one lost burst into a keyframe per NACK, whose size added loss and collapsed the
/// bandwidth estimate.
///
/// Thread rule: `capturer.capture` any thread; `start`/`stop` from one controlling thread; the
/// feedback and control methods and `statistics` from any thread. A started stream keeps itself
/// alive until `stop()`: always stop it. Cost: the worker allocates
/// nothing per frame once warm (libvpx's encode dominates); `init` allocates the pools, encoder,
/// history and SRTP session.
/// Sendable: encoder, packetizer and keyframe state are written only by the worker thread (by `stop`'s caller after
/// the join, or `pump`'s); control and feedback arrive through atomics and rings; `worker` is set once in init.
public final class VideoSendStream: RTPSendFeedbackTarget, @unchecked Sendable {
    /// Settings of a video send stream; every field has a real-time default.
    public struct Configuration: Sendable {
        /// Encoder settings: codec, size (the target resolution), frame rate, bitrate, speed,
        /// temporal layers... Default VP8 640x360, 30 fps, 1 Mbit/s.
        public var encoder: VPXEncoderConfiguration
        /// The stream's SSRC (random by default).
        public var ssrc: UInt32 = RandomBytes.ssrc()
        /// RTP payload type (dynamic, 96 by default).
        public var payloadType: UInt8 = 96
        /// Largest datagram, SRTP tag included (1200 by default, what WebRTC stacks use).
        public var mtu: Int = 1200
        /// With `srtp` nil: SRTP keys and the payload type given later, while the stream runs
        /// (a WebRTC connection's streams, made before DTLS). Packets before then are unprotected.
        package var lateProtection: LateSendProtection? = nil
        /// SRTP key material (default suite AEAD_AES_128_GCM); nil sends plain RTP.
        public var srtp: SRTPKeyMaterial? = .random(for: .aeadAES128GCM)
        /// RFC 8285 one-byte element IDs; video sends abs-send-time only.
        public var absSendTimeExtensionID: UInt8? = 3
        /// Frames that may wait for the encoder (power of two); a full ring drops the oldest.
        public var ringCapacity: Int = 4
        /// Threads that may convert at the same time (each gets its own `ColorConverter`).
        public var maxConcurrentCaptures: Int = 4
        /// libyuv filter when capture has to scale (`.box` default; `.none` never allocates).
        public var scaleFilter: ColorConverter.ScaleFilter = .box
        /// Packets kept for NACK (power of two).
        public var historyCapacity: Int = 1024
        /// Times one packet may be resent; later NACKs for it are refused (the receiver then
        /// sends PLI).
        public var maxRetransmissions: Int = 3
        /// Shortest time between two keyframes forced by requests (API, PLI, FIR), measured from
        /// the last forced one (keyframes the encoder makes anyway do not count); the live
        /// interval is the larger of this and the last round-trip time. 300 ms as libwebrtc.
        public var minimumKeyframeIntervalMilliseconds: Int = 300
        /// Skip frames arriving faster than the encoder's frame rate (counted as
        /// `droppedFrameRate`). Off by default: every captured frame is encoded.
        public var limitsFrameRate = false
        /// Encode smaller pictures when the target bitrate is too low for the size, and larger
        /// ones again when it allows (libwebrtc's quality scaling): the average quantizer, or the
        /// share of frames the rate control drops, over each second decides, in steps of 3/4 and
        /// 2/3 of each side down to 320x180 and back up to the stream's size. For streams whose
        /// target follows a congestion controller. Off by default.
        public var scalesResolution = false
        /// RFC 4588 retransmission payload type (`a=rtpmap:<pt> rtx/90000` with `apt=` the media
        /// payload type): NACKed packets are resent as RTX packets on `rtxSSRC`. nil (default):
        /// resent as they were, for receivers that do not negotiate RTX.
        public var rtxPayloadType: UInt8? = nil
        /// The SSRC of the retransmission stream (RFC 4588 §8, `a=ssrc-group:FID <media> <rtx>`);
        /// random by default, used only with `rtxPayloadType`.
        public var rtxSSRC: UInt32 = RandomBytes.ssrc()
        /// Pacing (libwebrtc's `PacingController` manner): packets leave spread at 2.5x the target
        /// bitrate, from the pacer's own thread: a keyframe in bursts of one 5 ms interval's
        /// budget, so it no longer leaves as one burst, a delta frame at once when the budget
        /// saved since the last frame covers it (`PacerSettings.deltaFrameBurstMilliseconds`);
        /// abs-send-time is stamped as each packet leaves.
        /// nil: each frame's packets leave together from the worker.
        public var pacer: PacerSettings? = PacerSettings()
        /// Transport-wide sequence numbers (draft-holmer-rmcat-transport-wide-cc-extensions-01):
        /// the RFC 8285 element ID and the counter shared by every stream on the transport; each
        /// packet (and each RTX retransmission) is numbered as it leaves. nil (default): none. A nil
        /// counter reserves the element (written as 0) for whoever numbers the packets further on,
        /// per destination (a call's fan-out to several legs).
        public var transportSequence: (id: UInt8, numbers: TransportSequenceNumbers?)? = nil
        /// First RTP sequence number (random in 0...32767 when nil).
        public var initialSequenceNumber: UInt16? = nil
        /// RTP timestamp of the first frame (random when nil).
        public var initialTimestamp: UInt32? = nil
        /// SFrame end-to-end encryption of every encoded frame (RFC 9605), between the encoder and
        /// the packetizer; nil (default) sends frames as encoded. The first bytes of each frame
        /// stay in the clear for forwarding servers (`SFrameMediaFormat`: VP8 10 or 3, VP9 1).
        public var frameEncryption: SFrameSender? = nil

        /// Defaults for `codec` at `width` x `height`.
        public init(codec: VPXCodec = .vp8, width: Int = 640, height: Int = 360) {
            encoder = VPXEncoderConfiguration(codec: codec, width: width, height: height)
        }
    }

    /// What the stream has done: W3C outbound-rtp record plus the capture counters.
    public struct Statistics: Sendable, Equatable {
        /// webrtc-stats `RTCOutboundRtpStreamStats`.
        public var outbound: OutboundRTPStreamStats
        /// Frames captured and dropped by reason.
        public var capture: CaptureStats
        /// NACKed packets that could not be resent (missing, expired or resent too often).
        public var retransmissionsRefused: UInt64
        /// NACKed packets not resent because retransmissions had already used the target bitrate
        /// over the last half second (a paced stream's retransmissions may not exceed its
        /// estimate, so they do not add to the congestion that lost the packets).
        public var retransmissionsRateLimited: UInt64 = 0
        /// Times `scalesResolution` changed the encoded size (webrtc-stats
        /// `qualityLimitationResolutionChanges`).
        public var qualityLimitationResolutionChanges: UInt64 = 0
        /// Keyframe requests (API, PLI, FIR) served by a keyframe already sent or pending within
        /// the minimum keyframe interval instead of a keyframe of their own.
        public var keyframeRequestsCoalesced: UInt64
        /// Packets SRTP refused to protect (not sent).
        public var protectFailures: UInt64
        /// What the pacer did (nil without pacing).
        public var pacer: PacerStatistics?
    }

    /// The encoder's `frameDropThreshold` for a stream whose target follows a congestion
    /// controller (a WebRTC connection's): 30 % buffer fullness, libwebrtc's VP8 setting.
    public static let congestionFrameDropThreshold = 30

    /// Takes frames from your thread(s) into this stream.
    public let capturer: BufferCapturer
    /// The configuration the stream was made with (the live bitrate/frame rate/size may differ).
    public let configuration: Configuration
    /// The stream's SSRC (from its configuration).
    public var ssrc: UInt32 { configuration.ssrc }

    private let counters = SendCounters()
    private let core: RTPSendCore
    private let pacer: RTPPacer?
    private let encoder: VPXEncoder
    private var clock: RTPClock
    private var lastTicks: Int64 = -1
    private var lastEncodedNs: Int64 = .min
    private var fpsEstimate = 0.0
    private var vp8: VP8Packetizer
    private var vp9: VP9Packetizer
    private var worker: WorkerThread!
    /// Where SFrame writes the encrypted frame (with `frameEncryption`); grows to the largest
    /// frame seen, so only a frame larger than every earlier one allocates.
    private var sframeBuffer = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    private var frameRate: Int
    private var bitrate: Int
    private var estimateCap = Int.max
    /// Worker: what the stream sent beyond its encoded frames over the last half second (bits
    /// per second): retransmitted payload, RTP headers and each packet's SRTP tag; measured from
    /// `overheadWindow` (its start and those bytes then). The encoder's target leaves room for
    /// it within the estimate, which counts whole RTP packets, as libwebrtc takes packet and
    /// protection overhead off the encoder's share.
    private var overheadRate = 0
    private var overheadWindow: (startNs: UInt64, bytes: UInt64) = (0, 0)

    private let keyframeRequested = Atomic<Bool>(false)
    private let keyframeRequestsCoalesced = Atomic<UInt64>(0)
    private let roundTripTimeNs = Atomic<Int64>(0)
    /// Worker: a request waiting for the minimum interval to pass; the capture time of the frame
    /// the last request forced to a keyframe (the limiter's window starts there); whether the
    /// encoder's next frame is a keyframe anyway (its first, or the first after a resize).
    private var keyframePending = false
    private var lastForcedKeyframeNs: Int64 = .min
    private var encoderOwesKeyframe = true
    private let requestedBitrate = Atomic<Int>(0)
    private let requestedFrameRate = Atomic<Int>(0)
    private let estimatedBitrate = Atomic<Int>(0)
    /// `scalesResolution`: the scaler (worker only), and a full size set by `setResolution`
    /// waiting for the worker (width << 32 | height; 0: none).
    private var qualityScaler: VideoQualityScaler?
    private let requestedFullSize = Atomic<UInt64>(0)
    private let running = Atomic<Bool>(false)
    /// Held from `start` to `stop`: a running stream keeps itself alive (its worker refers to it).
    /// Only `start` and `stop` touch it, and both run on the one controlling thread.
    // Safe: touched only by `start` and `stop`, on the one controlling thread.
    nonisolated(unsafe) private var keepAlive: Unmanaged<VideoSendStream>?

    /// Creates a stopped stream sending to `sink`. Throws `.encoder` or `.srtp` when libvpx or
    /// libsrtp refuse the settings; traps on out-of-range settings (programmer errors).
    public init(configuration: Configuration, sink: PacketSink) throws(SendPipelineError) {
        let c = configuration
        self.configuration = c
        do { encoder = try VPXEncoder(c.encoder) } catch {
            throw SendPipelineError(.encoder, "video encoder \(c.encoder.codec) \(c.encoder.width)x\(c.encoder.height): \(error)")
        }
        pacer = c.pacer.map { RTPPacer(sink: nil, maxPacketSize: c.mtu + 128, targetBitrate: c.encoder.bitrate, settings: $0) }
        core = try RTPSendCore(
            ssrc: c.ssrc, payloadType: c.payloadType, mtu: c.mtu, srtp: c.srtp, sink: sink,
            historyCapacity: c.historyCapacity, maxRetransmissions: c.maxRetransmissions,
            absSendTimeID: c.absSendTimeExtensionID, audioLevelID: nil,
            initialSequenceNumber: c.initialSequenceNumber,
            rtx: c.rtxPayloadType.map { (payloadType: $0, ssrc: c.rtxSSRC) }, pacer: pacer,
            transportSequence: c.transportSequence, late: c.lateProtection, counters: counters)
        capturer = BufferCapturer(
            width: c.encoder.width, height: c.encoder.height, ringCapacity: c.ringCapacity,
            maxConcurrentCaptures: c.maxConcurrentCaptures, counters: counters,
            scaleFilter: c.scaleFilter)
        clock = RTPClock(rate: RTPClock.videoRate, initialTimestamp: c.initialTimestamp)
        initialRTPTimestamp = clock.initialTimestamp
        vp8 = VP8Packetizer()
        vp9 = VP9Packetizer()
        frameRate = c.encoder.frameRate
        bitrate = c.encoder.bitrate
        counters.targetBitrate.store(bitrate, ordering: .relaxed)
        counters.frameWidth.store(c.encoder.width, ordering: .relaxed)
        counters.frameHeight.store(c.encoder.height, ordering: .relaxed)
        if c.scalesResolution { qualityScaler = VideoQualityScaler(width: c.encoder.width, height: c.encoder.height) }
        worker = WorkerThread(name: "revue.video-send.\(c.ssrc)") { [unowned self] in self.step() }
        capturer.worker = worker
    }

    deinit {
        sframeBuffer.deallocate()
        // A started stream holds itself until `stop()`, so a stream freed here is stopped.
        for _ in 0..<capturer.ring.capacity { if let f = capturer.ring.tryPop() { capturer.recycle(f) } }
    }

    /// The clock the stream reads (`startDriven` may set another before the stream runs).
    private var engineClock = EngineClock.monotonic

    // MARK: Lifecycle

    /// Starts the worker and opens the capturer. Traps if already running.
    public func start() {
        precondition(!running.exchange(true, ordering: .acquiringAndReleasing), "VideoSendStream started twice")
        keepAlive = Unmanaged.passRetained(self)
        pacer?.start()
        worker.start()
        capturer.setAccepting(true)
    }

    /// Closes the capturer (later frames count as `droppedInactive`), encodes and sends every frame
    /// already queued, and joins the worker. Blocks until done. Does nothing if not running.
    public func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        defer {
            let alive = keepAlive
            keepAlive = nil
            alive?.release()
        }
        capturer.setAccepting(false)
        worker.stop()
        // The worker has joined: this thread now owns the encoder; finish what was queued.
        while step() {}
        pacer?.stop()  // sends what still waits
    }

    /// Tests and benchmarks: opens the capturer without starting the worker thread, so the calling
    /// thread drives the pipeline with `pump()` (same code as the worker runs). Stop with `stop()`.
    package func startWithoutWorker() {
        precondition(!running.exchange(true, ordering: .acquiringAndReleasing), "stream started twice")
        capturer.setAccepting(true)
    }

    /// Tests and benchmarks: runs the worker's steps on this thread until nothing is pending.
    /// Only when started with `startWithoutWorker()` or `startDriven(clock:pacerWake:)`.
    package func pump() { while step() {} }

    /// Runs the stream from its caller on `clock` (a simulated one in tests): no worker thread
    /// and no pacer thread; the caller captures, then calls `pump()` to encode what was captured,
    /// and runs the pacer with `runPacer(now:)` when `pacerWake` asks (called inside `pump()` and
    /// the NACK and probe handlers, on the driving thread) and when the previous run said. Every
    /// time the stream reads (capture arrival, encode and send times, pacing, resend ages) is
    /// `clock`'s. Stop with `stop()`. Thread rule: the one driving thread, for this and every
    /// later call, feedback included. Cost: none.
    package func startDriven(clock: EngineClock, pacerWake: @escaping @Sendable () -> Void) {
        engineClock = clock
        core.clock = clock
        capturer.clock = clock
        if let pacer {
            pacer.clock = clock
            pacer.startDriven(wake: pacerWake)
        }
        startWithoutWorker()
    }

    /// One turn of the pacer at `now` (driven streams); returns when to run it again, or nil when
    /// the stream has no pacer. Thread rule: the driving thread. Cost: one pacing interval.
    package func runPacer(now: MonotonicTime) -> MonotonicTime? { pacer?.runDriven(now: now) }

    /// Whether the stream is running.
    public var isRunning: Bool { running.load(ordering: .acquiring) }

    // MARK: Control (any thread)

    /// Asks for a keyframe: the next frame when no request forced one within the minimum keyframe
    /// interval, else the first frame after it (an API request; PLI/FIR count separately).
    public func requestKeyframe() {
        if keyframeRequested.exchange(true, ordering: .acquiringAndReleasing) {
            keyframeRequestsCoalesced.add(1, ordering: .relaxed)
        }
        capturer.worker?.wake()
    }

    /// Changes the encoder's target bitrate (bits per second, 8 kbit/s...100 Mbit/s) at the next frame.
    public func setTargetBitrate(_ bitsPerSecond: Int) {
        precondition((8_000...100_000_000).contains(bitsPerSecond), "bitrate \(bitsPerSecond) out of range")
        requestedBitrate.store(bitsPerSecond, ordering: .releasing)
    }

    /// Changes the encoder's frame rate (1...240) at the next frame; with `limitsFrameRate`, faster
    /// captures are skipped.
    public func setFrameRate(_ framesPerSecond: Int) {
        precondition((1...240).contains(framesPerSecond), "frame rate \(framesPerSecond) out of 1...240")
        requestedFrameRate.store(framesPerSecond, ordering: .releasing)
    }

    /// Changes the target resolution: frames captured from now on are scaled to it and the encoder
    /// follows (with a keyframe). The first use of a size allocates its frame pool.
    /// With `scalesResolution`, this becomes the largest size the stream scales back up to.
    public func setResolution(width: Int, height: Int) {
        if configuration.scalesResolution {
            requestedFullSize.store(UInt64(width) << 32 | UInt64(height), ordering: .releasing)
        }
        capturer.setTargetDimensions(width: width, height: height)
    }

    /// Counters as W3C records; never stops the pipeline.
    public var statistics: Statistics {
        Statistics(
            outbound: counters.outboundStats(
                ssrc: ssrc, kind: "video",
                codec: configuration.encoder.codec == .vp8 ? "VP8" : "VP9"),
            capture: counters.captureStats,
            retransmissionsRefused: SendCounters.load(counters.retransmissionsRefused),
            retransmissionsRateLimited: SendCounters.load(counters.retransmissionsRateLimited),
            qualityLimitationResolutionChanges: SendCounters.load(counters.resolutionChanges),
            keyframeRequestsCoalesced: keyframeRequestsCoalesced.load(ordering: .relaxed),
            protectFailures: SendCounters.load(counters.protectFailures),
            pacer: pacer?.statistics)
    }

    // MARK: RTPSendFeedbackTarget

    /// Resends the requested packets from the send history (RFC 4585 §6.2.1), as RTX packets when
    /// configured; ones no longer held are counted (the receiver's PLI asks for the keyframe). Any
    /// thread; queued for the egress (the worker, or the pacer's thread).
    public func handleNack<S: Sequence>(_ sequenceNumbers: S) where S.Element == UInt16 {
        core.enqueueNacks(sequenceNumbers)
        capturer.worker?.wake()
        pacer?.wake()
    }

    /// A NACK from one receiver of a stream sent through a `RoutedPacketSink`: the packets are
    /// resent to `route` only (the sink's id of that receiver). Any thread; a ring push.
    public func handleNack<S: Sequence>(_ sequenceNumbers: S, route: Int) where S.Element == UInt16 {
        core.enqueueNacks(sequenceNumbers, route: route)
        capturer.worker?.wake()
        pacer?.wake()
    }

    /// A receiver lost a picture (RFC 4585 §6.3.1): asks for a keyframe through the shared limiter. Any thread.
    public func handlePictureLossIndication() {
        counters.add(counters.pliCount)
        requestKeyframe()
    }

    /// A full intra request (RFC 5104 §4.3.1): asks for a keyframe through the shared limiter. Any thread.
    public func handleFullIntraRequest() {
        counters.add(counters.firCount)
        requestKeyframe()
    }

    /// A receiver's bitrate estimate (REMB): caps the encoder's target bitrate. Any thread.
    public func handleEstimatedBitrate(_ bitsPerSecond: Int) {
        estimatedBitrate.store(max(8_000, bitsPerSecond), ordering: .releasing)
    }

    /// Packet and octet counts for the next sender report (RFC 3550 §6.4.1). Any thread.
    public var senderInfo: RTPSenderInfo { counters.senderInfo(ssrc: ssrc) }

    /// True: keyframe requests apply.
    public var carriesVideo: Bool { true }

    /// Whether the stream takes probe clusters: its pacer's thread runs and it has RTX to pad
    /// with (and its keys). Any thread.
    public var canProbe: Bool { (pacer?.isRunning ?? false) && core.canPad }

    /// Sends probe `cluster` from the pacer (`RTPPacer.requestProbe`): at the cluster's rate,
    /// queued media first, RTX padding when none waits, each packet logged with the cluster in
    /// the transport-wide send log. False when the stream cannot probe. Any thread; a lock.
    public func handleProbe(_ cluster: ProbeCluster) -> Bool {
        guard canProbe, let pacer else { return false }
        return pacer.requestProbe(cluster)
    }

    /// The latest round-trip time: forced keyframes are spaced at least max(300 ms, RTT) apart. Any thread.
    public func handleRoundTripTime(_ seconds: Double) {
        guard seconds.isFinite && seconds >= 0 else { return }
        roundTripTimeNs.store(Int64(min(seconds, 10) * 1e9), ordering: .relaxed)
    }

    /// RTP timestamp of the first frame (known once the stream is made; any thread).
    public let initialRTPTimestamp: UInt32

    // MARK: Worker

    /// One unit of work: pending control, NACKs, then at most one frame. Worker thread (or the
    /// stopping thread after the join).
    private func step() -> Bool {
        applyControl()
        var did = false
        // Refused resends are counted by the core; the receiver's PLI asks for the keyframe.
        if core.serviceNacks().didWork { did = true }
        if let frame = capturer.ring.tryPop() {
            encode(frame)
            capturer.recycle(frame)
            did = true
        }
        return did
    }

    private func applyControl() {
        if keyframeRequested.exchange(false, ordering: .acquiring) {
            if keyframePending { keyframeRequestsCoalesced.add(1, ordering: .relaxed) }
            keyframePending = true
        }
        let fps = requestedFrameRate.exchange(0, ordering: .acquiring)
        let rate = requestedBitrate.exchange(0, ordering: .acquiring)
        let estimate = estimatedBitrate.exchange(0, ordering: .acquiring)
        let fullSize = requestedFullSize.exchange(0, ordering: .acquiring)
        if fullSize != 0 { qualityScaler?.reset(width: Int(fullSize >> 32), height: Int(fullSize & 0xFFFF_FFFF)) }
        if rate > 0 { bitrate = rate }
        if estimate > 0 { estimateCap = estimate }
        if fps > 0 { frameRate = fps }
        let overheadChanged = estimateCap != Int.max && measureOverheadRate()
        guard fps > 0 || rate > 0 || estimate > 0 || overheadChanged else { return }
        var c = encoder.configuration
        c.frameRate = frameRate
        // Under an estimate, the overhead (at most half of it) comes out of the encoder's share.
        let room = estimateCap == Int.max ? estimateCap : estimateCap - min(overheadRate, estimateCap / 2)
        c.bitrate = min(bitrate, max(8_000, room))
        if c != encoder.configuration {
            do {
                try encoder.reconfigure(c)
            } catch {
                // libvpx kept the previous settings
            }
        }
        counters.targetBitrate.store(encoder.configuration.bitrate, ordering: .relaxed)
        pacer?.setTargetBitrate(encoder.configuration.bitrate)
    }

    /// Every half second: the overhead rate over the window that ended; whether it moved by
    /// more than 10 kbit/s (the encoder's target then follows). Worker thread.
    private func measureOverheadRate() -> Bool {
        let nowNs = engineClock.now.nanoseconds
        let window = overheadWindow
        guard nowNs &- window.startNs >= 500_000_000 else { return false }
        let packets = SendCounters.load(counters.packetsSent) &+ SendCounters.load(counters.retransmittedPacketsSent)
        let perPacket = UInt64(core.reservedOverhead)
        let bytes =
            SendCounters.load(counters.retransmittedBytesSent) &+ SendCounters.load(counters.headerBytesSent)
            &+ packets &* perPacket
        overheadWindow = (nowNs, bytes)
        guard window.startNs != 0 else { return false }
        let measured = Int(Double(bytes &- window.bytes) * 8e9 / Double(nowNs &- window.startNs))
        guard abs(measured - overheadRate) > 10_000 else { return false }
        overheadRate = measured
        return true
    }

    private func encode(_ frame: VideoFrame) {
        let interval = 1_000_000_000 / Int64(frameRate)
        if configuration.limitsFrameRate && lastEncodedNs != .min
            && frame.timestampNs &- lastEncodedNs < interval - interval / 4
        {
            counters.add(counters.droppedFrameRate)
            return
        }
        if frame.width != encoder.configuration.width || frame.height != encoder.configuration.height {
            do { try encoder.resize(width: frame.width, height: frame.height) } catch {
                counters.add(counters.framesDroppedByEncoder)
                return
            }
            counters.frameWidth.store(frame.width, ordering: .relaxed)
            counters.frameHeight.store(frame.height, ordering: .relaxed)
            encoderOwesKeyframe = true  // the re-created encoder starts with one
        }
        if keyframePending {
            if encoderOwesKeyframe {
                // This frame is a keyframe anyway: it serves the request without forcing anything,
                // so it does not start a window.
                keyframePending = false
            } else {
                // The window runs from the last keyframe a request forced (libwebrtc's
                // EncoderRtcpFeedback: from the last request it passed on), on the capture clock
                // (real time for live sources, deterministic in tests); a clock that went back
                // counts as elapsed.
                let interval = max(
                    Int64(configuration.minimumKeyframeIntervalMilliseconds) * 1_000_000,
                    roundTripTimeNs.load(ordering: .relaxed))
                let now = frame.timestampNs
                let last = lastForcedKeyframeNs
                if last == .min || now < last || now - last >= interval {
                    encoder.requestKeyframe()
                    keyframePending = false
                    lastForcedKeyframeNs = now
                }
            }
        }
        // 90 kHz ticks from the first capture time (RFC 7741 §4.1), strictly increasing even when
        // several producers' timestamps interleave.
        if clock.originNs == nil { _ = clock.timestamp(captureNs: frame.timestampNs) }
        let ticks = max(clock.ticks(sinceOriginTo: frame.timestampNs), lastTicks + 1)
        // The rate control gives each frame the budget of the time it covers: the interval since
        // the previous frame (at most a second), not the configured rate's, so a source slower
        // than the configured frame rate still gets the whole target and frames are not dropped
        // for want of budget.
        let duration = lastTicks < 0 ? nil : min(ticks - lastTicks, RTPClock.videoRate)
        lastTicks = ticks
        let rtpTimestamp = clock.initialTimestamp &+ UInt32(truncatingIfNeeded: ticks)
        let captureNs = frame.timestampNs, capturedAtNs = frame.capturedAt.nanoseconds
        let t0 = engineClock.now.nanoseconds
        let result: VPXEncodeResult
        do {
            result = try encoder.encode(frame.view, pts: ticks, duration: duration) { encoded in
                // The encode's end is also the packets' send time (abs-send-time, history, sender
                // report): packetizing takes microseconds, so one clock read serves both.
                let t1 = engineClock.now.nanoseconds
                counters.add(counters.encodeTimeNs, t1 &- t0)
                packetizeAndSend(
                    encoded, rtpTimestamp: rtpTimestamp, captureNs: captureNs, capturedAtNs: capturedAtNs,
                    sendNs: t1)
            }
        } catch {
            counters.add(counters.framesDroppedByEncoder)
            return
        }
        if var scaler = qualityScaler {
            let decision = scaler.observe(quantizer: result == .dropped ? nil : encoder.lastQuantizer, nowNs: captureNs)
            qualityScaler = scaler
            if case .resize(let width, let height) = decision {
                capturer.setTargetDimensions(width: width, height: height)
                counters.add(counters.resolutionChanges)
            }
        }
        if result == .dropped {
            counters.add(counters.framesDroppedByEncoder)
            return
        }
        if lastEncodedNs != .min && captureNs > lastEncodedNs {
            let instant = 1e9 / Double(captureNs - lastEncodedNs)
            fpsEstimate = fpsEstimate == 0 ? instant : 0.9 * fpsEstimate + 0.1 * instant
            SendCounters.store(counters.framesPerSecondBits, fpsEstimate)
        }
        lastEncodedNs = captureNs
    }

    private func packetizeAndSend(
        _ encoded: EncodedVideoFrame, rtpTimestamp: UInt32, captureNs: Int64,
        capturedAtNs: UInt64, sendNs: UInt64
    ) {
        counters.add(counters.framesEncoded)
        if encoded.isKeyframe {
            counters.add(counters.keyFramesEncoded)
            encoderOwesKeyframe = false
            // Any keyframe (forced, periodic, resize) serves the requests waiting for the window
            // to end; only forced ones start a window (see `encode`).
            if keyframePending {
                keyframePending = false
                keyframeRequestsCoalesced.add(1, ordering: .relaxed)
            }
        }
        counters.add(counters.qpSum, UInt64(encoded.quantizer))
        let maxPayload = core.maxPayloadSize
        var frame = encoded.data
        if let sframe = configuration.frameEncryption {
            let format: SFrameMediaFormat = encoded.codec == .vp8 ? .vp8 : .vp9
            let need = sframe.maxEncryptedLength(plaintextLength: frame.count)
            if sframeBuffer.count < need {
                sframeBuffer.deallocate()
                sframeBuffer = .allocate(byteCount: max(need, 2 * sframeBuffer.count, 64 << 10), alignment: 16)
            }
            guard
                let n = try? sframe.encryptFrame(
                    frame, clearPrefix: format.clearPrefixLength(of: frame), into: sframeBuffer)
            else {
                // Only a sender at the end of its counter fails: nothing can be sent until a new key.
                counters.add(counters.framesDroppedByEncoder)
                return
            }
            frame = UnsafeRawBufferPointer(rebasing: sframeBuffer[0..<n])
        }
        switch encoded.codec {
        case .vp8:
            let layer =
                encoded.temporalLayerCount > 1
                ? VP8Packetizer.TemporalLayer(
                    id: UInt8(encoded.temporalLayerId), layerSync: encoded.isLayerSync,
                    tl0PicIdx: encoded.tl0PicIndex)
                : nil
            let packets = vp8.packetize(
                frameSize: frame.count, maxPayloadSize: maxPayload, temporalLayer: layer,
                nonReference: encoded.isDroppable)
            core.send(
                packets, of: frame, timestamp: rtpTimestamp, captureNs: captureNs,
                capturedAt: MonotonicTime(nanoseconds: capturedAtNs), now: MonotonicTime(nanoseconds: sendNs),
                keyframe: encoded.isKeyframe)
        case .vp9:
            let layer =
                encoded.temporalLayerCount > 1
                ? VP9PayloadDescriptor.Layer(
                    temporalID: UInt8(encoded.temporalLayerId),
                    switchingUpPoint: encoded.isLayerSync)
                : nil
            let packets = vp9.packetize(
                frameSize: frame.count, maxPayloadSize: maxPayload, keyframe: encoded.isKeyframe,
                width: encoded.width, height: encoded.height, layer: layer)
            core.send(
                packets, of: frame, timestamp: rtpTimestamp, captureNs: captureNs,
                capturedAt: MonotonicTime(nanoseconds: capturedAtNs), now: MonotonicTime(nanoseconds: sendNs),
                keyframe: encoded.isKeyframe)
        }
    }
}
