import MediaBase
import MediaCodecs
import MediaFrames
import MediaTransport
import MediaWire
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A speaking detector decision of one send stream, for the session layer's
/// `didUpdateIsSpeaking` and loudest-first `activeSpeakers`.
/// Thread rule: a value type. Cost: none.
public struct SpeakingEvent: Sendable, Equatable {
    /// SSRC of the stream whose audio it is.
    public var ssrc: UInt32
    /// True when speaking started, false when it stopped.
    public var isSpeaking: Bool
    /// Smoothed level of recent speech in dBov (orders speakers loudest first); -127 when stopped.
    public var levelDbov: Float
    /// Capture time (caller's clock, ns) of the 48 kHz frame that caused the change.
    public var captureNs: Int64
}

/// One outgoing audio track: buffers captured on any thread (`capturer`) are queued in a lock-free
/// ring; the stream's worker resamples them to 48 kHz (speexdsp), cuts 20 ms frames (10/40/60
/// configurable), measures the level (RFC 6464 scale) and runs the `SpeakingDetector`, encodes Opus
/// (FEC and DTX optional), and sends one RTP packet per frame (RFC 7587) with RFC 8285 one-byte
/// header extensions: RFC 6464 audio level and abs-send-time; SRTP-protected in place, kept for
/// NACK, handed to the `PacketSink`.
///
/// RTP timestamps count 48 kHz samples from a random start (RFC 7587 §4.1); when the capture
/// timestamps show a gap (the caller paused), the timestamp jumps by the gap and the next packet
/// carries the marker bit, as after DTX silence (RFC 3551 §4.1).
///
/// Thread rule: `capturer.capture` any thread; `start`/`stop` one controlling thread; control,
/// feedback and `statistics` any thread. `speakingEvents` may be iterated from any task; the
/// `onSpeakingEvent` callback runs on the worker thread (keep it short, hop to your actor). A
/// started stream keeps itself alive until `stop()`: always stop it.
/// Cost: per 20 ms frame one resampler pass, one level pass, one Opus encode (~0.3 ms at
/// complexity 10 mono); no allocation once warm (a change of input rate re-creates the resampler).
/// Sendable: encoder and frame state are used only by the worker thread (by `stop`'s caller after the join, or
/// `pump`'s); control and feedback arrive through atomics and rings; `worker` is set once in init.
public final class AudioSendStream: RTPSendFeedbackTarget, @unchecked Sendable {
    /// Settings of an audio send stream.
    public struct Configuration: Sendable {
        /// 1 (mono, default) or 2 (stereo); captured buffers are mixed to it.
        public var channels: Int = 1
        /// Opus frame duration: 10, 20 (default), 40 or 60 ms.
        public var frameDuration: OpusFrameDuration = .ms20
        /// Opus target bitrate (bits per second).
        public var bitrate: Int = 32_000
        /// Opus complexity 0...10.
        public var complexity: Int = 10
        /// Opus application mode.
        public var application: OpusApplication = .voip
        /// In-band FEC (RFC 7587 §3.3; useful with `expectedPacketLossPercent` > 0).
        public var inbandFEC = false
        /// Expected loss 0...100 % (drives FEC).
        public var expectedPacketLossPercent = 0
        /// Discontinuous transmission: silent frames are not sent.
        public var dtx = false
        /// The stream's SSRC (random by default).
        public var ssrc: UInt32 = RandomBytes.ssrc()
        /// RTP payload type (111, as browsers offer Opus).
        public var payloadType: UInt8 = 111
        /// Largest datagram, SRTP tag included.
        public var mtu: Int = 1200
        /// With `srtp` nil: SRTP keys and the payload type given later, while the stream runs
        /// (a WebRTC connection's streams, made before DTLS). Packets before then are unprotected.
        package var lateProtection: LateSendProtection? = nil
        /// SRTP key material; nil sends plain RTP.
        public var srtp: SRTPKeyMaterial? = .random(for: .aeadAES128GCM)
        /// RFC 8285 one-byte ID for the RFC 6464 audio level (1, libwebrtc's default); nil leaves it out.
        public var audioLevelExtensionID: UInt8? = 1
        /// RFC 8285 one-byte ID for abs-send-time (3, libwebrtc's default); nil leaves it out.
        public var absSendTimeExtensionID: UInt8? = 3
        /// Transport-wide sequence numbers (draft-holmer-rmcat-transport-wide-cc-extensions-01):
        /// the RFC 8285 element ID and the counter shared by every stream on the transport, as in
        /// `VideoSendStream.Configuration`. nil (default): none. A nil counter reserves the element
        /// (written as 0) for whoever numbers the packets further on, per destination.
        public var transportSequence: (id: UInt8, numbers: TransportSequenceNumbers?)? = nil
        /// Chunks (up to 20 ms at 96 kHz each) that may wait for the worker (power of two).
        public var ringCapacity: Int = 32
        /// Speaking detector tuning (its frame duration is set from `frameDuration`).
        public var speaking = SpeakingDetector.Configuration()
        /// Resampler quality for non-48 kHz input.
        public var resamplerQuality: Resampler.Quality = .voip
        /// Packets kept for NACK (power of two).
        public var historyCapacity: Int = 256
        /// Times one packet may be resent.
        public var maxRetransmissions: Int = 3
        /// First RTP sequence number (random in 0...32767 when nil).
        public var initialSequenceNumber: UInt16? = nil
        /// First RTP timestamp (random when nil).
        public var initialTimestamp: UInt32? = nil
        /// SFrame end-to-end encryption of every Opus packet (RFC 9605), between the encoder and
        /// the packetizer; nil (default) sends packets as encoded. The TOC byte stays in the clear.
        public var frameEncryption: SFrameSender? = nil
        /// Defaults.
        public init() {}
    }

    /// What the stream has done.
    public struct Statistics: Sendable, Equatable {
        /// webrtc-stats `RTCOutboundRtpStreamStats` (framesEncoded counts Opus frames).
        public var outbound: OutboundRTPStreamStats
        /// webrtc-stats `RTCAudioSourceStats`.
        public var source: AudioSourceStats
        /// Buffers captured and dropped by reason.
        public var capture: CaptureStats
        /// Frames Opus coded as DTX silence and did not send.
        public var dtxFramesSkipped: UInt64
    }

    /// Takes audio from your thread(s) into this stream.
    public let capturer: AudioBufferCapturer
    /// The configuration the stream was made with.
    public let configuration: Configuration
    /// The stream's SSRC (from its configuration).
    public var ssrc: UInt32 { configuration.ssrc }
    /// Speaking decisions, in order (a buffering stream: iterate it, or set `onSpeakingEvent`).
    public let speakingEvents: AsyncStream<SpeakingEvent>
    // Safe only when set before `start` and not while running: the worker reads it without a lock.
    /// Called on the worker thread for each speaking decision. Set before `start` (starting the
    /// worker orders the write before the worker's reads), never while running.
    nonisolated(unsafe) public var onSpeakingEvent: (@Sendable (SpeakingEvent) -> Void)?

    private let counters = SendCounters()
    private let core: RTPSendCore
    private let encoder: OpusEncoder
    private var detector: SpeakingDetector
    private let continuation: AsyncStream<SpeakingEvent>.Continuation
    private var worker: WorkerThread!
    private var resampler: Resampler?
    private let frameSamples: Int  // per channel at 48 kHz
    private let pcm: UnsafeMutableBufferPointer<Float>
    private var filled = 0  // frames in `pcm`
    private let packet: UnsafeMutableRawBufferPointer
    /// Where SFrame writes the encrypted packet (with `frameEncryption`).
    private let sframePacket: UnsafeMutableRawBufferPointer
    private let initialTimestamp: UInt32
    private var samplesSent: Int64 = 0  // 48 kHz ticks since the first frame
    private var frameCaptureNs: Int64 = 0  // capture time of pcm[0]
    private var frameCapturedAtNs: UInt64 = 0  // the same instant on CLOCK_MONOTONIC (0: unknown)
    private var expectedInputNs: Int64 = .min
    private var markNext = true
    private let dtxSkipped = Atomic<UInt64>(0)
    private let requestedBitrate = Atomic<Int>(0)
    private let estimatedBitrate = Atomic<Int>(0)
    private let running = Atomic<Bool>(false)
    /// Held from `start` to `stop`: a running stream keeps itself alive (its worker refers to it).
    /// Only `start` and `stop` touch it, and both run on the one controlling thread.
    // Safe: touched only by `start` and `stop`, on the one controlling thread.
    nonisolated(unsafe) private var keepAlive: Unmanaged<AudioSendStream>?
    private var bitrate: Int
    private var estimateCap = Int.max
    /// In-band FEC as set at run time: 0 unchanged since the last frame, 1 off, 2 on.
    private let requestedFEC = Atomic<Int>(0)
    /// The latest fraction lost a receiver reported, in millionths (-1: none since the last frame).
    private let reportedLoss = Atomic<Int>(-1)
    /// Worker state: whether FEC is on, and the reported loss smoothed over reports (0...1).
    private var fecOn: Bool
    private var smoothedLoss = 0.0

    /// Creates a stopped stream sending to `sink`. Throws `.audioEncoder` or `.srtp` when libopus
    /// or libsrtp refuse; traps on out-of-range settings.
    public init(configuration: Configuration, sink: PacketSink) throws(SendPipelineError) {
        let c = configuration
        precondition(c.channels == 1 || c.channels == 2, "audio channels \(c.channels) not 1 or 2")
        precondition([.ms10, .ms20, .ms40, .ms60].contains(c.frameDuration), "audio frames are 10, 20, 40 or 60 ms")
        self.configuration = c
        do {
            encoder = try OpusEncoder(sampleRate: .hz48000, channels: c.channels, application: c.application)
        } catch {
            throw SendPipelineError(.audioEncoder, "Opus encoder 48 kHz \(c.channels) ch: \(error)")
        }
        encoder.bitrate = OpusBitrate(bitsPerSecond: c.bitrate)
        encoder.complexity = c.complexity
        encoder.isInbandFECEnabled = c.inbandFEC
        encoder.expectedPacketLossPercent = c.expectedPacketLossPercent
        encoder.isDTXEnabled = c.dtx
        bitrate = c.bitrate
        fecOn = c.inbandFEC
        core = try RTPSendCore(
            ssrc: c.ssrc, payloadType: c.payloadType, mtu: c.mtu, srtp: c.srtp, sink: sink,
            historyCapacity: c.historyCapacity, maxRetransmissions: c.maxRetransmissions,
            absSendTimeID: c.absSendTimeExtensionID, audioLevelID: c.audioLevelExtensionID,
            initialSequenceNumber: c.initialSequenceNumber, transportSequence: c.transportSequence,
            late: c.lateProtection, counters: counters)
        capturer = AudioBufferCapturer(channels: c.channels, ringCapacity: c.ringCapacity, counters: counters)
        var speaking = c.speaking
        speaking.frameDurationMs = c.frameDuration.rawValue / 1000
        detector = SpeakingDetector(configuration: speaking)
        (speakingEvents, continuation) = AsyncStream.makeStream(of: SpeakingEvent.self)
        frameSamples = c.frameDuration.samples(at: .hz48000)
        pcm = .allocate(capacity: frameSamples * c.channels)
        pcm.initialize(repeating: 0)
        packet = .allocate(byteCount: OpusEncoder.maxPacketByteCount, alignment: 16)
        sframePacket = .allocate(
            byteCount: configuration.frameEncryption == nil
                ? 0 : OpusEncoder.maxPacketByteCount + SFrameHeader.maxLength + SFrameCipherSuite.maxTagLength,
            alignment: 16)
        initialTimestamp = c.initialTimestamp ?? RandomBytes.uint32()
        counters.targetBitrate.store(c.bitrate, ordering: .relaxed)
        worker = WorkerThread(name: "revue.audio-send.\(c.ssrc)") { [unowned self] in self.step() }
        capturer.worker = worker
    }

    deinit {
        continuation.finish()
        while let f = capturer.ring.tryPop() { capturer.pool.release(f) }
        pcm.deallocate()
        packet.deallocate()
        sframePacket.deallocate()
    }

    /// The clock the stream reads (`startDriven` may set another before the stream runs).
    private var engineClock = EngineClock.monotonic

    // MARK: Lifecycle

    /// Starts the worker and opens the capturer. Traps if already running.
    public func start() {
        precondition(!running.exchange(true, ordering: .acquiringAndReleasing), "AudioSendStream started twice")
        keepAlive = Unmanaged.passRetained(self)
        worker.start()
        capturer.setAccepting(true)
    }

    /// Closes the capturer, encodes what was queued (a last partial frame is padded with silence
    /// only if `flushPartialFrame`), and joins the worker. Blocks until done.
    public func stop(flushPartialFrame: Bool = false) {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        defer {
            let alive = keepAlive
            keepAlive = nil
            alive?.release()
        }
        capturer.setAccepting(false)
        worker.stop()
        while step() {}
        if flushPartialFrame && filled > 0 {
            for i in (filled * configuration.channels)..<pcm.count { pcm[i] = 0 }
            filled = frameSamples
            emitFrame()
        }
    }

    /// Tests and benchmarks: opens the capturer without starting the worker thread, so the calling
    /// thread drives the pipeline with `pump()` (same code as the worker runs). Stop with `stop()`.
    package func startWithoutWorker() {
        precondition(!running.exchange(true, ordering: .acquiringAndReleasing), "stream started twice")
        capturer.setAccepting(true)
    }

    /// Tests and benchmarks: runs the worker's steps on this thread until nothing is pending.
    /// Only when started with `startWithoutWorker()` or `startDriven(clock:)`.
    package func pump() { while step() {} }

    /// Runs the stream from its caller on `clock` (a simulated one in tests): no worker thread;
    /// the caller captures, then calls `pump()` to encode and send what was captured, and every
    /// time the stream reads (capture arrival, encode and send times) is `clock`'s. Stop with
    /// `stop()`. Thread rule: the one driving thread, for this and every later call. Cost: none.
    package func startDriven(clock: EngineClock) {
        engineClock = clock
        core.clock = clock
        capturer.clock = clock
        startWithoutWorker()
    }

    /// Whether the stream is running.
    public var isRunning: Bool { running.load(ordering: .acquiring) }

    // MARK: Control

    /// Changes the Opus target bitrate (500...512 000 bit/s) at the next frame.
    public func setTargetBitrate(_ bitsPerSecond: Int) {
        precondition(OpusBitrate.validRange.contains(bitsPerSecond), "Opus bitrate \(bitsPerSecond) out of range")
        requestedBitrate.store(bitsPerSecond, ordering: .releasing)
    }

    /// Turns Opus in-band FEC (RFC 7587 §3.3) on or off at the next frame: on when the receiver
    /// asked for it (`useinbandfec=1` in its description). While it is on, the encoder's expected
    /// loss follows what the receiver reports (`handleReceiverLoss`), so FEC costs bits only when
    /// packets are lost. Any thread; an atomic store.
    public func setInbandFEC(_ enabled: Bool) { requestedFEC.store(enabled ? 2 : 1, ordering: .releasing) }

    /// The fraction of this stream's packets a receiver reported lost (RFC 3550 §6.4.1 report
    /// block, 0...1): with in-band FEC on, the encoder protects for it (smoothed over reports,
    /// to the nearest of 1, 5 or 10 %, at least the configured `expectedPacketLossPercent`).
    /// Any thread; an atomic store.
    public func handleReceiverLoss(fractionLost: Double) {
        reportedLoss.store(Int(max(0, min(1, fractionLost)) * 1e6), ordering: .releasing)
    }

    /// Counters as W3C records; never stops the pipeline.
    public var statistics: Statistics {
        Statistics(
            outbound: counters.outboundStats(ssrc: ssrc, kind: "audio", codec: "opus"),
            source: counters.audioSourceStats, capture: counters.captureStats,
            dtxFramesSkipped: dtxSkipped.load(ordering: .relaxed))
    }

    // MARK: RTPSendFeedbackTarget

    /// Resends the requested packets from the send history (RFC 4585 §6.2.1); ones no longer held are counted. Any thread.
    public func handleNack<S: Sequence>(_ sequenceNumbers: S) where S.Element == UInt16 {
        core.enqueueNacks(sequenceNumbers)
        worker.wake()
    }
    /// A NACK from one receiver of a stream sent through a `RoutedPacketSink`: resent to `route`
    /// only. Any thread; a ring push.
    public func handleNack<S: Sequence>(_ sequenceNumbers: S, route: Int) where S.Element == UInt16 {
        core.enqueueNacks(sequenceNumbers, route: route)
        worker.wake()
    }
    /// Audio has no keyframes: counted only.
    public func handlePictureLossIndication() { counters.add(counters.pliCount) }
    /// Audio has no keyframes: counted only.
    public func handleFullIntraRequest() { counters.add(counters.firCount) }
    /// A receiver's bitrate estimate (REMB): caps the encoder's target. Any thread.
    public func handleEstimatedBitrate(_ bitsPerSecond: Int) {
        estimatedBitrate.store(max(6_000, bitsPerSecond), ordering: .releasing)
    }
    /// Packet and octet counts for the next sender report (RFC 3550 §6.4.1). Any thread.
    public var senderInfo: RTPSenderInfo { counters.senderInfo(ssrc: ssrc) }

    // MARK: Worker

    private func step() -> Bool {
        let rate = requestedBitrate.exchange(0, ordering: .acquiring)
        let estimate = estimatedBitrate.exchange(0, ordering: .acquiring)
        if rate > 0 || estimate > 0 {
            if rate > 0 { bitrate = rate }
            if estimate > 0 { estimateCap = estimate }
            let target = max(6_000, min(bitrate, estimateCap))
            encoder.bitrate = OpusBitrate(bitsPerSecond: target)
            counters.targetBitrate.store(target, ordering: .relaxed)
        }
        applyLossProtection()
        var did = core.serviceNacks().didWork
        if let chunk = capturer.ring.tryPop() {
            consume(chunk)
            capturer.pool.release(chunk)
            did = true
        }
        return did
    }

    /// The expected-loss levels (percent) and the smoothed loss (percent) from which each
    /// applies: the nearest level. None above 10: at 32 kbit/s, protecting for 20 % took so
    /// many bits from the speech itself that speech through 10 % loss scored lower
    /// (`SimulatedSpeechPlayoutTests`, one seed: PESQ 1.99 against 2.37).
    static let lossLevels: [(from: Double, level: Int)] = [(0.5, 1), (3, 5), (7.5, 10)]

    /// Applies a FEC switch or a receiver's loss report, on the worker before the next frame.
    /// Each report moves the smoothed loss halfway to it (libwebrtc smooths too, so one bad
    /// second does not double the bitrate spent on FEC for long).
    private func applyLossProtection() {
        let fec = requestedFEC.exchange(0, ordering: .acquiring)
        let loss = reportedLoss.exchange(-1, ordering: .acquiring)
        guard fec != 0 || loss >= 0 else { return }
        if fec != 0 {
            fecOn = fec == 2
            encoder.isInbandFECEnabled = fecOn
        }
        if loss >= 0 { smoothedLoss = (smoothedLoss + Double(loss) / 1e6) / 2 }
        // A few levels, not every report's figure: each change of the expected loss moves the
        // encoder's split between speech and FEC bits (libwebrtc quantises the same way).
        let reported = fecOn ? Self.lossLevels.last { smoothedLoss * 100 >= $0.from }?.level ?? 0 : 0
        encoder.expectedPacketLossPercent = max(configuration.expectedPacketLossPercent, reported)
    }

    /// Appends one captured chunk (any rate) to the 48 kHz frame buffer, emitting full frames.
    private func consume(_ chunk: AudioFrame) {
        let channels = configuration.channels
        let frameNs = Int64(frameSamples) * 1_000_000_000 / 48_000
        // A gap in capture time (the caller paused) advances the RTP clock and sets the marker.
        if expectedInputNs != .min, chunk.timestampNs &- expectedInputNs > 2 * frameNs {
            samplesSent += (chunk.timestampNs &- expectedInputNs) * 48_000 / 1_000_000_000
            markNext = true
        }
        expectedInputNs = chunk.timestampNs &+ chunk.durationNs
        var input = UnsafeBufferPointer(chunk.float32Samples)
        if chunk.sampleRate == 48_000 {
            while !input.isEmpty {
                if filled == 0 {
                    frameCaptureNs =
                        chunk.timestampNs &+ Int64(chunk.frameCount - input.count / channels) * 1_000_000_000 / 48_000
                    noteFrameStart(chunk)
                }
                let n = min(frameSamples - filled, input.count / channels)
                UnsafeMutableBufferPointer(rebasing: pcm[(filled * channels)...])
                    .baseAddress!.update(from: input.baseAddress!, count: n * channels)
                filled += n
                input = UnsafeBufferPointer(rebasing: input[(n * channels)...])
                if filled == frameSamples { emitFrame() }
            }
            return
        }
        if resampler?.inputRate != chunk.sampleRate {
            resampler = try? Resampler(
                channels: channels, inputRate: chunk.sampleRate, outputRate: 48_000,
                quality: configuration.resamplerQuality)
            resampler?.skipLatency()
        }
        guard let resampler else { counters.add(counters.droppedInvalid); return }
        while true {
            if filled == 0 {
                let consumedFrames = chunk.frameCount - input.count / channels
                frameCaptureNs = chunk.timestampNs &+ Int64(consumedFrames) * 1_000_000_000 / Int64(chunk.sampleRate)
                noteFrameStart(chunk)
            }
            let out = UnsafeMutableBufferPointer(rebasing: pcm[(filled * channels)...])
            let (consumed, produced) = resampler.process(input, into: out)
            filled += produced
            input = UnsafeBufferPointer(rebasing: input[(consumed * channels)...])
            if filled == frameSamples { emitFrame() }
            if input.isEmpty || (consumed == 0 && produced == 0) { break }
        }
    }

    /// Places the frame's first sample (`frameCaptureNs`, inside `chunk`) on the monotonic clock.
    private func noteFrameStart(_ chunk: AudioFrame) {
        frameCapturedAtNs =
            chunk.capturedAt == .zero
            ? 0 : chunk.capturedAt.nanoseconds &+ UInt64(max(0, frameCaptureNs &- chunk.timestampNs))
    }

    /// Level, speaking detector, Opus, RTP for the full frame in `pcm`.
    private func emitFrame() {
        filled = 0
        let samples = UnsafeBufferPointer(pcm)
        let rms = AudioLevel.rms(samples)
        let dBov = AudioLevel.dBov(rms: rms)
        let duration = Double(frameSamples) / 48_000
        counters.audioLevelBits.store(min(1, rms).bitPattern, ordering: .relaxed)
        SendCounters.store(
            counters.totalAudioEnergyBits,
            SendCounters.double(counters.totalAudioEnergyBits) + min(1, rms * rms) * duration)
        SendCounters.store(counters.totalSamplesDurationBits, SendCounters.double(counters.totalSamplesDurationBits) + duration)
        if let change = detector.process(levelDbov: Float(dBov)) {
            let event = SpeakingEvent(
                ssrc: ssrc, isSpeaking: change == .startedSpeaking,
                levelDbov: change == .startedSpeaking ? detector.speechLevel : -127,
                captureNs: frameCaptureNs)
            continuation.yield(event)
            onSpeakingEvent?(event)
        }
        let timestamp = initialTimestamp &+ UInt32(truncatingIfNeeded: samplesSent)
        samplesSent += Int64(frameSamples)
        let t0 = engineClock.now.nanoseconds
        let length: Int
        do { length = try encoder.encode(samples, into: packet) } catch {
            counters.add(counters.framesDroppedByEncoder)
            return
        }
        let encodedNs = engineClock.now.nanoseconds
        counters.add(counters.encodeTimeNs, encodedNs &- t0)
        counters.add(counters.framesEncoded)
        if length <= 2 {  // DTX silence (RFC 7587 §3.2): not sent
            dtxSkipped.add(1, ordering: .relaxed)
            markNext = true
            return
        }
        if let id = configuration.audioLevelExtensionID {
            core.header.extensions.setAudioLevel(
                RTPAudioLevel(voiceActivity: detector.isSpeaking, level: Int(AudioLevel.rfc6464Level(dBov: dBov))), id: id)
        }
        core.header.marker = markNext
        markNext = false
        var frame = UnsafeRawBufferPointer(start: packet.baseAddress, count: length)
        if let sframe = configuration.frameEncryption {
            guard
                let n = try? sframe.encryptFrame(
                    frame, clearPrefix: SFrameMediaFormat.opus.clearPrefixLength(of: frame), into: sframePacket)
            else {
                counters.add(counters.framesDroppedByEncoder)
                return
            }
            frame = UnsafeRawBufferPointer(rebasing: sframePacket[0..<n])
        }
        let payloads = OpusPayload.packetize(frameSize: frame.count, maxPayloadSize: core.maxPayloadSize)
        core.send(
            payloads, of: frame, timestamp: timestamp, captureNs: frameCaptureNs,
            capturedAt: MonotonicTime(nanoseconds: frameCapturedAtNs), now: MonotonicTime(nanoseconds: encodedNs))
    }
}
