// Our own send pipeline on simulated time: the real VideoSendStream (capturer, encoder,
// packetizer, pacer, SRTP, NACK history, keyframe limiter), AudioSendStream and
// RTCPSenderEndpoint (bandwidth estimate, probing, sender reports), each driven from the test's
// clock instead of its threads, so the send side's timing behaviour repeats exactly.
import Foundation
import MediaCore

/// A VP8 + Opus sender made of the engine's own send streams, driven by a `SimulatedTime`: frames
/// and audio are captured at exact simulated times and encoded at once (`pump`); the video pacer
/// runs whenever it is woken and whenever it asked to run again; the RTCP endpoint turns every
/// 20 ms and after each RTCP datagram, as its thread does. Every packet leaves through `output`
/// at the simulated time it is sent.
///
/// Thread rule: the simulated clock's thread only (`init`, `start`, `receiveRTCP` and the work
/// they schedule). Cost: the streams' own work; one scheduled item per frame, audio packet,
/// pacer turn and endpoint turn.
/// Sendable: all state is touched on the simulated clock's one thread, from work it runs.
package final class SimulatedSendPipeline: SimulatedCallSender, @unchecked Sendable {
    /// The streams' settings before they are made.
    package struct Settings {
        /// The video stream's (VP8 at the call's size and bitrate, its SSRC and payload type 96).
        package var video: VideoSendStream.Configuration
        /// The audio stream's (Opus, in-band FEC, payload type 111).
        package var audio: AudioSendStream.Configuration
        /// The RTCP endpoint's (reports every 250 ms; the estimate starts at the call's bitrate).
        package var endpoint: RTCPSenderEndpoint.Configuration
    }

    /// The video stream.
    package let video: VideoSendStream
    /// The audio stream.
    package let audio: AudioSendStream
    /// The RTCP endpoint (statistics: reports, estimate).
    package let endpoint: RTCPSenderEndpoint
    /// Video frames and audio packets captured by the last `start`.
    package private(set) var videoFramesCaptured = 0, audioFramesCaptured = 0
    /// Runs before each video frame is captured, with the frame's index (for sampling the
    /// stream's state or asking for a keyframe).
    package var onFrame: ((Int) -> Void)?
    /// Audio of silence with a 50 ms 1 kHz beep at the start of every second of capture time
    /// (from the first `start`) instead of speech.
    package var beeps = false
    /// 48 kHz mono audio to capture instead of the synthetic speech, from its first sample at the
    /// first audio capture of the first `start` on (silence after its end); nil: synthetic speech.
    package var recording: [Int16]?
    /// Where the receiver's RTCP comes from.
    package let receiverAddress = SocketAddress.loopbackIPv4(port: 5006)

    /// Unowned: the clock's queue holds the pipeline's scheduled work, which holds the pipeline.
    private unowned let time: SimulatedTime
    private let output: (UnsafeRawBufferPointer) -> Void
    private let picture: VideoFrame
    private var audioSource = SyntheticAudio(pattern: .speech, sampleRate: 48_000)
    private var pcm = [Int16](repeating: 0, count: 960)
    private var pacerQueued = false
    private var pacerTimer: ScheduledWork?
    private var endpointTimer: ScheduledWork?
    private var firstFrame = 0
    private var audioSamplesCaptured = 0

    /// A sender of `width` x `height` VP8 at `bitrate` encrypted with `key`, its packets to
    /// `output` (lent for the call, at `time.now`); `configure` may change the streams' settings
    /// before they are made (pacing, RTX, transport-wide sequence numbers, probing...).
    /// `reportSeed` seeds the sender report intervals. `time` must outlive the sender.
    package init(
        time: SimulatedTime, key: SRTPKeyMaterial?, width: Int = 320, height: Int = 240, bitrate: Int = 400_000,
        reportSeed: UInt64 = 1, output: @escaping (UnsafeRawBufferPointer) -> Void,
        configure: (inout Settings) -> Void = { _ in }
    ) throws {
        self.time = time
        self.output = output
        picture = VideoFrame(width: width, height: height)
        var vc = VideoSendStream.Configuration(codec: .vp8, width: width, height: height)
        // Fixed SSRCs, sequence numbers and timestamps: a path that draws losses per stream seeds
        // each stream's draws from its SSRC, so a run repeats exactly.
        vc.ssrc = 0x5EED_0001
        vc.rtxSSRC = 0x5EED_0003
        vc.initialSequenceNumber = 1000
        vc.initialTimestamp = 90_000
        vc.encoder.bitrate = bitrate
        vc.srtp = key
        vc.payloadType = 96
        vc.historyCapacity = 2048
        var ac = AudioSendStream.Configuration()
        ac.ssrc = 0x5EED_0002
        ac.initialSequenceNumber = 5000
        ac.initialTimestamp = 48_000
        ac.srtp = key
        ac.payloadType = 111
        ac.inbandFEC = true
        ac.expectedPacketLossPercent = 10
        var ec = RTCPSenderEndpoint.Configuration(remoteKey: key, localKey: key)
        ec.reportIntervalMilliseconds = 250
        ec.startBitrate = bitrate
        ec.maximumBitrate = bitrate
        var settings = Settings(video: vc, audio: ac, endpoint: ec)
        configure(&settings)
        let sink = OutputSink(output)
        video = try VideoSendStream(configuration: settings.video, sink: sink)
        audio = try AudioSendStream(configuration: settings.audio, sink: sink)
        // Never bound or read: the endpoint is driven, and its reports leave through `output`.
        endpoint = try RTCPSenderEndpoint(
            socket: UDPSocket(family: .ipv4), configuration: settings.endpoint, targets: [video, audio])
        let clock = EngineClock(time)
        video.startDriven(clock: clock) { [unowned self] in queuePacerRun() }
        audio.startDriven(clock: clock)
        endpoint.startDriven(clock: clock, reportSeed: reportSeed) { bytes, _ in output(bytes) }
        endpointTimer = time.scheduleRepeating(every: .milliseconds(20)) { [unowned self] in
            endpoint.runDriven(now: self.time.now)
        }
    }

    deinit {
        pacerTimer?.cancel()
        endpointTimer?.cancel()
    }

    /// Stops the streams (what waits in the pacer leaves now) and the endpoint's turns.
    package func stop() {
        pacerTimer?.cancel()
        endpointTimer?.cancel()
        video.stop()
        audio.stop()
    }

    /// Captures 30 fps video (frame k, counted on from the last `start`, at k x 33.3 ms) and, when
    /// `audio`, 20 ms of speech every 20 ms, for `seconds` from now on; each capture is encoded
    /// and sent at once. The work is scheduled on the clock, which must then be advanced.
    package func start(seconds: Double, video: Bool = true, audio: Bool = true) {
        let start = time.now
        let endNs = UInt64(seconds * 1e9)
        firstFrame += videoFramesCaptured
        videoFramesCaptured = 0
        audioFramesCaptured = 0
        @Sendable func step() {
            let elapsed = time.now.nanoseconds - start.nanoseconds
            guard elapsed < endNs else { return }
            if audio && elapsed >= UInt64(audioFramesCaptured) * 20_000_000 {
                captureAudio()
                audioFramesCaptured += 1
            }
            if video && elapsed >= UInt64(videoFramesCaptured) * 33_333_333 {
                captureVideo(firstFrame + videoFramesCaptured)
                videoFramesCaptured += 1
            }
            var next = UInt64.max
            if video { next = min(next, UInt64(videoFramesCaptured) * 33_333_333) }
            if audio { next = min(next, UInt64(audioFramesCaptured) * 20_000_000) }
            guard next != .max else { return }
            time.schedule(after: .nanoseconds(Int64(next - elapsed))) { step() }
        }
        time.schedule(after: .zero) { step() }
    }

    /// The receiver's RTCP reached the sender now: the endpoint handles it and turns, and the
    /// streams apply what it asked for (resends, keyframes, bitrate).
    package func receiveRTCP(_ bytes: UnsafeMutableRawBufferPointer) {
        let now = time.now
        endpoint.receive(bytes, from: receiverAddress, at: now)
        endpoint.runDriven(now: now)
        video.pump()
        audio.pump()
    }

    private func captureVideo(_ index: Int) {
        onFrame?(index)
        SyntheticVideo.render(frameIndex: index, into: picture)
        withExtendedLifetime(picture) {
            video.capturer.capture(PixelBufferView(picture.view), timeStampNs: Int64(time.now.nanoseconds))
        }
        video.pump()
    }

    private func captureAudio() {
        if let recording {
            for i in 0..<960 {
                let n = audioSamplesCaptured + i
                pcm[i] = n < recording.count ? recording[n] : 0
            }
        } else if beeps {
            for i in 0..<960 {
                let n = audioSamplesCaptured + i
                pcm[i] = n % 48_000 < 2_400 ? Int16(12_000 * sin(2 * Double.pi * 1_000 * Double(n) / 48_000)) : 0
            }
        } else {
            let samples = audioSource.int16s(frames: 960)
            for i in 0..<960 { pcm[i] = samples[i] }
        }
        audioSamplesCaptured += 960
        pcm.withUnsafeBufferPointer {
            audio.capturer.capture($0, sampleRate: 48_000, channels: 1, timeStampNs: Int64(time.now.nanoseconds))
        }
        audio.pump()
    }

    /// Runs the pacer once at this instant, after the work already due (as its thread wakes after
    /// the producer's post), then again when it asks to.
    private func queuePacerRun() {
        guard !pacerQueued else { return }
        pacerQueued = true
        time.schedule(after: .zero) { [unowned self] in runPacer() }
    }

    private func runPacer() {
        pacerQueued = false
        let now = time.now
        guard let next = video.runPacer(now: now) else { return }
        pacerTimer?.cancel()
        pacerTimer = time.schedule(after: max(next - now, .nanoseconds(1))) { [unowned self] in runPacer() }
    }

    /// A packet sink that hands each packet to the pipeline's output.
    private final class OutputSink: PacketSink, @unchecked Sendable {
        let output: (UnsafeRawBufferPointer) -> Void
        init(_ output: @escaping (UnsafeRawBufferPointer) -> Void) { self.output = output }
        func write(_ packet: RawSpan) { packet.withUnsafeBytes { output($0) } }
        func flush() {}
    }
}

extension SimulatedCall where Sender == SimulatedSendPipeline {
    /// A call with `options` whose sender is our own send pipeline (`SimulatedSendPipeline`, its
    /// settings changed by `configure`), starting at the clock's current time.
    package convenience init(
        sendPipeline options: Options, time: SimulatedTime = SimulatedTime(),
        configure: @escaping (inout SimulatedSendPipeline.Settings) -> Void = { _ in }
    ) throws {
        try self.init(options, time: time) { time, key, options, output in
            try SimulatedSendPipeline(
                time: time, key: key, width: options.width, height: options.height, bitrate: options.bitrate,
                reportSeed: options.seed, output: output, configure: configure)
        }
    }
}
