// A one-way call on simulated time: the simulated media sender -> an impaired path (the impairment
// relay's model, with loss drawn per RTP stream) -> a receive pipeline driven from the clock, its
// RTCP back over an impaired path to the sender, and the audio pulled every 10 ms into a recorder.
// Everything runs in due-time order on the test's thread, so a run gives the same figures on any
// machine under any load.
import MediaCore
import MediaTools
import Synchronization

/// One direction of a simulated path with the `ImpairmentRelay`'s behaviour: the same
/// `ImpairmentModel` stages, and, with `lossPerStream`, each RTP stream's losses drawn from a model
/// of its own, seeded from the path's seed and the SSRC as the relay seeds them, so runs with and
/// without recovery (whose resends and feedback change how streams interleave) lose the same
/// packets of each stream. Datagrams that survive reach `deliver` at their delivery time, as a
/// copy the receiver may change.
/// Thread rule: the simulated clock's thread. Cost: one model decision, one copy and one scheduled
/// delivery per datagram.
/// Sendable: used only on the simulated clock's one thread.
package final class SimulatedImpairedPath: @unchecked Sendable {
    /// What the path did so far.
    package struct Counters: Sendable, Equatable {
        /// Datagrams given to `send`.
        package var sent = 0
        /// Datagrams dropped by loss (per stream or the path's) or the rate limiter's queue.
        package var lost = 0
        /// Deliveries made (a duplicated datagram counts twice).
        package var delivered = 0
    }

    /// The per-stream models' seeds come from the path's seed as in `ImpairmentRelay`.
    private static let ssrcSpread: UInt64 = 0x9E37_79B9_7F4A_7C15
    /// Streams with a loss model of their own (the relay's `maxLossStreams`).
    private static let maxLossStreams = 16

    /// The seed of a relay's reverse direction, given the forward seed (as `ImpairmentRelay`
    /// derives it).
    package static func reverseSeed(_ seed: UInt64) -> UInt64 { seed ^ 0x5EED_0F_2E7E_25E0 }

    /// What the path did so far.
    package private(set) var counters = Counters()
    /// Unowned: the clock's queue holds the deliveries, which hold the path.
    private unowned let time: SimulatedTime
    private var model: ImpairmentModel
    private var seed: UInt64
    private let lossPerStream: Bool
    private var streamLoss: [(ssrc: UInt32, model: ImpairmentModel)] = []
    private let deliver: (UnsafeMutableRawBufferPointer) -> Void

    /// A path on `time` (which must outlive it) impaired by `settings` with `seed`.
    package init(
        time: SimulatedTime, settings: ImpairmentModel.Settings, seed: UInt64, lossPerStream: Bool,
        deliver: @escaping (UnsafeMutableRawBufferPointer) -> Void
    ) {
        self.time = time
        model = ImpairmentModel(settings: settings, seed: seed)
        self.seed = seed
        self.lossPerStream = lossPerStream
        self.deliver = deliver
    }

    /// From now on the path behaves as a fresh one with `settings` and `seed` (as a sender moving
    /// to another relay): datagrams already on their way still arrive as they were scheduled.
    package func change(to settings: ImpairmentModel.Settings, seed: UInt64) {
        model = ImpairmentModel(settings: settings, seed: seed)
        self.seed = seed
        streamLoss = []
    }

    /// The path's impairment now.
    package var settings: ImpairmentModel.Settings { model.settings }

    /// A further fixed delay for the RTP packets of some payload types (as when audio and video
    /// take different routes); order within a payload type is kept. RTCP is not delayed.
    package var extraDelay: [UInt8: Duration] = [:]

    /// Sends a datagram now.
    package func send(_ bytes: UnsafeRawBufferPointer) {
        counters.sent += 1
        var applyingLoss = true
        if let stream = lossStream(of: bytes) {
            if streamLoss[stream].model.drawLoss() {
                counters.lost += 1
                return
            }
            applyingLoss = false
        }
        let now = time.now.nanoseconds
        switch model.decide(arrival: now, size: bytes.count, applyingLoss: applyingLoss) {
        case .drop:
            counters.lost += 1
        case .deliver(let at):
            schedule(Array(bytes), at: at + extra(bytes), now: now)
        case .deliverTwice(let at, let duplicateAt):
            let copy = Array(bytes)
            schedule(copy, at: at + extra(bytes), now: now)
            schedule(copy, at: duplicateAt + extra(bytes), now: now)
        }
    }

    /// `extraDelay` of the packet's payload type, nanoseconds (RTP only: RFC 5761 keeps 192-223
    /// in byte 1 for RTCP).
    private func extra(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        guard !extraDelay.isEmpty, bytes.count > 1, !(192...223).contains(bytes[1]),
            let d = extraDelay[bytes[1] & 0x7F]
        else { return 0 }
        return UInt64(d.inNanoseconds)
    }

    private func schedule(_ copy: [UInt8], at due: UInt64, now: UInt64) {
        time.schedule(after: .nanoseconds(Int64(due - min(due, now)))) { [self] in
            counters.delivered += 1
            var bytes = copy
            bytes.withUnsafeMutableBytes { deliver($0) }
        }
    }

    /// With `lossPerStream`, the index of the loss model of the RTP stream `bytes` belongs to
    /// (made when the stream first shows up); nil for RTCP and streams beyond the limit.
    private func lossStream(of bytes: UnsafeRawBufferPointer) -> Int? {
        guard lossPerStream, bytes.count >= 12, RTPDemultiplexer.classify(bytes.bytes) == .rtp else { return nil }
        let ssrc = UInt32(bytes[8]) << 24 | UInt32(bytes[9]) << 16 | UInt32(bytes[10]) << 8 | UInt32(bytes[11])
        if let i = streamLoss.firstIndex(where: { $0.ssrc == ssrc }) { return i }
        guard streamLoss.count < Self.maxLossStreams else { return nil }
        let lossOnly = ImpairmentModel.Settings(loss: model.settings.loss, burst: model.settings.burst)
        streamLoss.append((ssrc, ImpairmentModel(settings: lossOnly, seed: seed ^ (UInt64(ssrc) &* Self.ssrcSpread))))
        return streamLoss.count - 1
    }
}

/// A renderer that records, for each decoded frame, the SyntheticVideo frame index it shows, its
/// PSNR against the frame the sender encoded, and its render time.
/// Thread rule: `render` on the pipeline's thread; the readers from any thread (a lock).
/// Cost: a render of the reference frame and a PSNR per frame.
package final class SimulatedFrameRecorder: VideoRenderer, Sendable {
    private struct State {
        var psnr: [Int: Double] = [:]
        var renderTimes: [Int: MonotonicTime] = [:]
        var unreadable = 0
        var packed = 0
    }
    private let state = Mutex(State())
    /// The sender's frame of the index read, rendered again; touched only inside `render`, under
    /// `state`'s lock.
    private let reference: VideoFrame

    /// A recorder of `width` x `height` frames.
    package init(width: Int, height: Int) { reference = VideoFrame(width: width, height: height) }

    package func render(_ frame: DecodedVideoFrame) {
        state.withLock { s in
            guard let index = SyntheticVideo.frameIndex(in: frame.view) else {
                s.unreadable += 1
                return
            }
            var psnr = 0.0
            if frame.view.width == reference.width && frame.view.height == reference.height {
                SyntheticVideo.render(frameIndex: index, into: reference)
                psnr = Quality.psnr(reference.view, frame.view)
            }
            if frame.packed != nil { s.packed += 1 }
            s.psnr[index] = psnr
            s.renderTimes[index] = frame.renderTime
        }
    }

    /// Indices of the frames shown.
    package var indices: Set<Int> { state.withLock { Set($0.psnr.keys) } }
    /// The lowest PSNR of a shown frame (0 when none was shown).
    package var minimumPSNR: Double { state.withLock { $0.psnr.values.min() ?? 0 } }
    /// Frames whose index could not be read.
    package var unreadable: Int { state.withLock { $0.unreadable } }
    /// Frames that came with a packed (RGB) copy.
    package var packedFrames: Int { state.withLock { $0.packed } }
    /// Each shown frame's render time, by index.
    package var renderTimes: [Int: MonotonicTime] { state.withLock { $0.renderTimes } }

    /// A 64-bit FNV-1a digest of every shown frame's index, render time and PSNR, in index order:
    /// equal digests mean the same frames were shown at the same times at the same quality.
    package var digest: UInt64 {
        state.withLock { s in
            var d = Digest()
            for index in s.psnr.keys.sorted() {
                d.add(UInt64(index))
                d.add(s.renderTimes[index]?.nanoseconds ?? 0)
                d.add(s.psnr[index]!.bitPattern)
            }
            return d.value
        }
    }
}

/// 64-bit FNV-1a over 64-bit words, for comparing runs. Thread rule: a value type. Cost: a
/// multiply per byte.
package struct Digest: Sendable {
    /// The digest so far.
    package private(set) var value: UInt64 = 0xCBF2_9CE4_8422_2325

    /// An empty digest.
    package init() {}

    /// Adds the eight bytes of `word`.
    package mutating func add(_ word: UInt64) {
        for shift in stride(from: 0, to: 64, by: 8) {
            value = (value ^ (word >> UInt64(shift) & 0xFF)) &* 0x100_0000_01B3
        }
    }
}

/// Collects the audio a playout pull produced. Thread rule: any thread (a lock). Cost: a copy of
/// each 10 ms block.
package final class SimulatedAudioRecorder: Sendable {
    private let collected = Mutex<[Int16]>([])

    package init() {}

    /// Appends a block.
    package func append(_ samples: UnsafeBufferPointer<Int16>) { collected.withLock { $0.append(contentsOf: samples) } }

    /// Everything played so far.
    package var samples: [Int16] { collected.withLock { $0 } }

    /// A 64-bit FNV-1a digest of everything played: equal digests mean the same samples.
    package var digest: UInt64 {
        collected.withLock { samples in
            var d = Digest()
            for s in samples { d.add(UInt64(UInt16(bitPattern: s))) }
            return d.value
        }
    }
}

/// The sending end of a `SimulatedCall`: it sends media from `start` at simulated times through
/// the output it was made with, and takes the receiver's RTCP.
/// Thread rule: the simulated clock's thread. Cost: the sender's own.
package protocol SimulatedCallSender: AnyObject, Sendable {
    /// Sends `seconds` of media from now on (work scheduled on the clock).
    func start(seconds: Double, video: Bool, audio: Bool)
    /// Handles one RTCP datagram from the receiver that reached the sender now (the bytes may be
    /// changed in place).
    func receiveRTCP(_ bytes: UnsafeMutableRawBufferPointer)
}

extension SimulatedMediaSender: SimulatedCallSender {}

/// The call whose sender is the `SimulatedMediaSender` (a model of a sender: plain resends, no
/// pacing), for the receive side's tests.
package typealias SimulatedReceiveCall = SimulatedCall<SimulatedMediaSender>

extension SimulatedCall where Sender == SimulatedMediaSender {
    /// A call with `options` whose sender is a `SimulatedMediaSender`, starting at the clock's
    /// current time (a new clock by default).
    package convenience init(_ options: Options, time: SimulatedTime = SimulatedTime()) throws {
        try self.init(options, time: time) { time, key, options, output in
            try SimulatedMediaSender(
                time: time, key: key, width: options.width, height: options.height, bitrate: options.bitrate,
                output: output)
        }
    }
}

/// What a `SimulatedCall` is made of. Thread rule: a value type. Cost: none.
package struct SimulatedCallOptions: Sendable {
    /// SRTP suite (the key is fixed, so runs repeat byte for byte).
    package var suite: SRTPSuite = .aeadAES128GCM
    /// Media direction impairment.
    package var forward = ImpairmentModel.Settings()
    /// RTCP direction impairment; nil: the same as `forward`.
    package var reverse: ImpairmentModel.Settings? = nil
    /// Seed of the forward path; the reverse one's is derived from it.
    package var seed: UInt64 = 1
    /// Loss drawn per RTP stream (`ImpairmentRelay.Configuration.lossPerStream`).
    package var lossPerStream = true
    /// The receiver asks for lost video packets (generic NACK).
    package var nack = true
    /// The receiver rebuilds lost audio packets from the next packet's in-band FEC.
    package var fec = true
    /// The RTX payload type the receiver unwraps (RFC 4588); nil: RTX is not negotiated.
    package var rtxPayloadType: UInt8? = nil
    /// The receiver delays audio or video so that they play in step (lip sync).
    package var lipSync = true
    /// The receiver sends transport-wide feedback for header extension ID 5 instead of REMB.
    package var transportFeedback = false
    /// The video size of the sender.
    package var width = 320, height = 240
    /// The sender's start bitrate (and its encoder's until the estimate changes it).
    package var bitrate = 400_000

    /// Default options: no impairment, recovery on.
    package init() {}
}

/// A one-way VP8 + Opus call on a `SimulatedTime`: a sender (`Sender`), a forward and a
/// reverse `SimulatedImpairedPath`, and a `ReceivePipeline` driven from the clock
/// (`startDriven`): each datagram is handled at its delivery time and the engine runs after the
/// datagrams of each instant and whenever its thread would wake (`nextWakeup`); its RTCP goes back
/// over the reverse path to the sender. The audio stream is pulled every 10 ms of simulated time
/// into `audio`, video is rendered into `frames`.
/// Thread rule: one thread, the one that advances `time`. Cost: the real encoders and decoders
/// plus one scheduled item per datagram, engine wake-up and pull.
/// Sendable: used only on the simulated clock's one thread.
package final class SimulatedCall<Sender: SimulatedCallSender>: @unchecked Sendable {
    /// What the call is made of.
    package typealias Options = SimulatedCallOptions

    /// The clock everything runs on.
    package let time: SimulatedTime
    /// The receiver, driven from `time`.
    package let pipeline: ReceivePipeline
    /// The sender (set during `init`).
    package private(set) var sender: Sender!
    /// The decoded video.
    package let frames: SimulatedFrameRecorder
    /// The audio played, 10 ms a pull.
    package let audio = SimulatedAudioRecorder()
    /// The media direction (set during `init`).
    package private(set) var forward: SimulatedImpairedPath!
    /// The RTCP direction (set during `init`).
    package private(set) var reverse: SimulatedImpairedPath!
    /// When the 10 ms audio pulls started (`start`): sample k of `audio` played at this time plus
    /// k / 48,000 s.
    package private(set) var audioStart: MonotonicTime?
    /// Where the sender is (the source of its datagrams; the receiver's RTCP goes there).
    package let senderAddress = SocketAddress.loopbackIPv4(port: 5004)

    private var engineRunQueued = false
    private var wakeup: ScheduledWork?
    private var pull: ScheduledWork?
    private let pcm: UnsafeMutableBufferPointer<Int16>

    /// A call with `options` and the sender `makeSender` makes (given the clock, the call's key,
    /// the options and where its datagrams go), starting at the clock's current time.
    package init(
        _ options: Options, time: SimulatedTime,
        makeSender: (SimulatedTime, SRTPKeyMaterial, Options, @escaping (UnsafeRawBufferPointer) -> Void) throws -> Sender
    ) throws {
        self.time = time
        let keyBytes = (0..<options.suite.keyAndSaltLength).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        let key = try SRTPKeyMaterial(suite: options.suite, keyAndSalt: keyBytes)
        var conf = ReceivePipelineConfiguration(remoteKey: key)
        var video = VideoReceiveSettings(codec: .vp8, payloadType: 96)
        video.nackEnabled = options.nack
        video.rtxPayloadType = options.rtxPayloadType
        video.renderFormat = .bgra
        conf.video = [video]
        var audioSettings = AudioReceiveSettings(payloadType: 111)
        audioSettings.fecEnabled = options.fec
        conf.audio = audioSettings
        conf.reportIntervalMilliseconds = 200
        conf.localSSRC = 0x5EC0_4D01
        conf.synchronizesAudioAndVideo = options.lipSync
        if options.transportFeedback {
            conf.transportSequenceNumberExtensionID = 5
            conf.sendREMB = false
        }
        frames = SimulatedFrameRecorder(width: options.width, height: options.height)
        // Never bound or read: the pipeline is driven, and its RTCP leaves through `rtcpOutput`.
        pipeline = try ReceivePipeline(socket: UDPSocket(family: .ipv4), configuration: conf, renderer: frames)
        pcm = .allocate(capacity: pipeline.audio?.samplesPerPull ?? 480)

        forward = SimulatedImpairedPath(
            time: time, settings: options.forward, seed: options.seed, lossPerStream: options.lossPerStream
        ) { [unowned self] bytes in
            pipeline.receive(bytes, from: senderAddress, at: self.time.now)
            queueEngineRun()
        }
        reverse = SimulatedImpairedPath(
            time: time, settings: options.reverse ?? options.forward,
            seed: SimulatedImpairedPath.reverseSeed(options.seed), lossPerStream: options.lossPerStream
        ) { [unowned self] bytes in sender.receiveRTCP(bytes) }
        sender = try makeSender(time, key, options) { [unowned self] bytes in forward.send(bytes) }
        pipeline.startDriven(reportSeed: options.seed) { [unowned self] bytes, _ in reverse.send(bytes) }
    }

    deinit {
        wakeup?.cancel()
        pull?.cancel()
        pcm.deallocate()
    }

    /// Starts the 10 ms audio pull and the engine's timer, then the sender for `seconds` of media.
    /// Advance `time` to play it.
    package func start(seconds: Double, video: Bool = true, audio: Bool = true) {
        audioStart = time.now
        pull = time.scheduleRepeating(every: .milliseconds(10)) { [unowned self] in pullAudio() }
        runEngine()
        sender.start(seconds: seconds, video: video, audio: audio)
    }

    /// Plays `duration` of simulated time.
    package func advance(by duration: Duration) { time.advance(by: duration) }

    /// The datagrams of one instant are handled first, then the engine runs once, after them (a
    /// datagram's delivery was scheduled before this), as the engine's thread reads a batch and
    /// then ticks.
    private func queueEngineRun() {
        guard !engineRunQueued else { return }
        engineRunQueued = true
        time.schedule(after: .zero) { [unowned self] in runEngine() }
    }

    private func runEngine() {
        engineRunQueued = false
        let now = time.now
        pipeline.runEngine(now: now)
        wakeup?.cancel()
        let next = pipeline.nextWakeup(now: now)
        wakeup = time.schedule(after: max(next - now, .milliseconds(1))) { [unowned self] in runEngine() }
    }

    private func pullAudio() {
        guard let stream = pipeline.audio else { return }
        let n = stream.pullAudio(into: pcm, now: time.now)
        audio.append(UnsafeBufferPointer(rebasing: pcm[0..<(n * stream.settings.channels)]))
    }
}
