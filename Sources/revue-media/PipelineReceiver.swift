// The demo's receiving end on the engine's receive pipeline: one UDP socket -> ReceivePipeline
// (SRTP unprotect, jitter buffer, NACK, PLI, depacketize, decode) -> a renderer that measures
// each picture and records it; Opus pulled every 10 ms by an AudioPlayoutClock into a sink that
// measures and records. What was seen and heard is recorded to received.ivf (VP8, re-encoded at
// a high bitrate from the decoded pictures) and received.ogg (Opus, re-encoded from the played
// PCM), so the files are the call as the receiver played it.
import MediaCore
import RevueCommandLine
import RevueSession

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

final class PipelineReceiver: Sendable {
    let socket: UDPSocket
    let pipeline: ReceivePipeline
    let clock: AudioPlayoutClock?
    let renderer: RecordingRenderer
    let audioSink: RecordingAudioSink?

    init(
        key: SRTPKeyMaterial?, codec: VPXCodec, width: Int, height: Int, videoPath: String, audioPath: String,
        onVideo: @escaping (DecodedVideoFrame) -> Void
    ) throws {
        do { socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0)) } catch {
            throw InputError(description: "cannot open the receiver's socket: \(error)")
        }
        var conf = ReceivePipelineConfiguration(remoteKey: key)
        conf.video = [VideoReceiveSettings(codec: codec, payloadType: 96)]
        var audio = AudioReceiveSettings(payloadType: 111)
        audio.channels = 1
        conf.audio = audio
        renderer = try RecordingRenderer(path: videoPath, codec: codec, width: width, height: height, onVideo: onVideo)
        do { pipeline = try ReceivePipeline(socket: socket, configuration: conf, renderer: renderer) } catch {
            throw InputError(description: "cannot create the receive pipeline: \(error)")
        }
        if let stream = pipeline.audio {
            let sink = try RecordingAudioSink(path: audioPath)
            audioSink = sink
            clock = AudioPlayoutClock(stream: stream, sink: sink)
        } else {
            audioSink = nil; clock = nil
        }
    }

    func start() { pipeline.start(); clock?.start() }
    func stop() { clock?.stop(); pipeline.stop() }

    /// Finishes both recordings; returns their paths.
    func finish() throws -> [String] {
        var written: [String] = []
        if let p = try renderer.finish() { written.append(p) }
        if let p = try audioSink?.finish() { written.append(p) }
        return written
    }
}

/// Measures each decoded picture (through `onVideo`) and records it into a VP8/VP9 IVF at 30 fps.
/// Thread rule: `render` on the pipeline's thread; `finish` after the pipeline stopped.
/// Sendable: the writer, encoder, scaler and counters live in a `Locked` box; `onVideo` runs only
/// on the pipeline's thread.
final class RecordingRenderer: VideoRenderer, @unchecked Sendable {
    private let core: Locked<RecordingRendererCore>
    private let onVideo: (DecodedVideoFrame) -> Void

    init(path: String, codec: VPXCodec, width: Int, height: Int, onVideo: @escaping (DecodedVideoFrame) -> Void) throws {
        core = Locked(try RecordingRendererCore(path: path, codec: codec, width: width, height: height))
        self.onVideo = onVideo
    }

    /// Pictures written so far.
    var frames: Int { core.withLock { $0.frames } }

    func render(_ frame: DecodedVideoFrame) {
        onVideo(frame)
        core.withLock { $0.render(frame) }
    }

    func finish() throws -> String? { try core.withLock { (core) throws -> String? in try core.finish() } }
}

/// `RecordingRenderer`'s state and work. Thread rule: one thread at a time (its box's lock).
private final class RecordingRendererCore {
    private let writer: IVFWriter
    private let encoder: VideoStreamEncoder
    private var scaled: VideoFrame?
    private let converter = ColorConverter()
    private var failure: Error?
    private(set) var frames = 0

    init(path: String, codec: VPXCodec, width: Int, height: Int) throws {
        var options = VideoEncodeOptions()
        options.codec = codec
        options.bitrate = 4_000_000
        options.keyframeInterval = 60
        encoder = try VideoStreamEncoder(options: options, width: width, height: height, frameRate: ContainerRational(30, 1))
        writer = try IVFWriter(
            path: path, codec: codec == .vp8 ? .vp8 : .vp9, width: width, height: height, timeBase: ContainerRational(1, 30))
    }

    func render(_ frame: DecodedVideoFrame) {
        guard failure == nil else { return }
        do {
            var view = frame.view
            if view.width != writer.header.width || view.height != writer.header.height {
                if scaled == nil { scaled = VideoFrame(width: writer.header.width, height: writer.header.height) }
                try converter.scale(view, into: scaled!, filter: .box)
                view = scaled!.view
            }
            try encoder.encode(view) { out, index in try self.writer.write(out.data.bytes, pts: index) }
            frames += 1
        } catch { failure = error }
    }

    func finish() throws -> String? {
        if let failure { writer.abort(); throw failure }
        guard frames > 0 else { writer.abort(); return nil }
        try encoder.flush { out, index in try self.writer.write(out.data.bytes, pts: index) }
        try writer.finish()
        return writer.path
    }
}

/// Keeps the played 48 kHz audio (for the quality measurement) and records it as Ogg Opus.
/// Thread rule: `play` on the playout clock's thread; the rest after the clock stopped.
/// Sendable: the buffers, writer, encoder and `played` live in a `Locked` box (`playedSamples`
/// copies under its lock).
final class RecordingAudioSink: AudioSink, @unchecked Sendable {
    private let core: Locked<RecordingAudioSinkCore>

    init(path: String, keepsPlayed: Bool = true) throws {
        core = Locked(try RecordingAudioSinkCore(path: path, keepsPlayed: keepsPlayed))
    }

    func play(_ samples: Span<Int16>, sampleRate: Int, channels: Int) {
        core.withLock { $0.play(samples, sampleRate: sampleRate, channels: channels) }
    }

    /// Everything played so far, mono Float at 48 kHz (a copy).
    var playedSamples: [Float] { core.withLock { $0.played } }

    /// The monotonic time at which played sample `index` sounded; nil past the end.
    func playTime(ofSample index: Int) -> UInt64? { core.withLock { $0.playTime(ofSample: index) } }

    func finish() throws -> String? { try core.withLock { (core) throws -> String? in try core.finish() } }
}

/// `RecordingAudioSink`'s state and work. Thread rule: one thread at a time (its box's lock).
private final class RecordingAudioSinkCore {
    private let writer: OggOpusWriter
    private let encoder: OpusStreamEncoder
    private var floats = [Float](repeating: 0, count: 960)
    private var failure: Error?
    /// Everything played so far, mono Float at 48 kHz.
    private(set) var played: [Float] = []
    /// When each block of `played` was handed over (its first sample's index and the monotonic
    /// time of the `play` call, when the block starts sounding): the demo's lip-sync measurement.
    private(set) var blockTimes: [(firstSample: Int, ns: UInt64)] = []

    /// Whether `played` keeps the PCM (the demo measures it; a long recording should not).
    private let keepsPlayed: Bool

    init(path: String, keepsPlayed: Bool = true) throws {
        self.keepsPlayed = keepsPlayed
        var options = AudioEncodeOptions()
        options.bitrate = 64_000
        encoder = try OpusStreamEncoder(options: options, inputRate: 48_000, channels: 1)
        writer = try OggOpusWriter(
            path: path, channelCount: 1, preSkip: encoder.preSkip48k, vendor: "Revue revue-media",
            comments: ["ENCODER=revue-media demo (the receiver's playout)"])
    }

    func play(_ samples: Span<Int16>, sampleRate: Int, channels: Int) {
        let frames = samples.count / max(1, channels)
        if floats.count < frames { floats = [Float](repeating: 0, count: frames) }
        for i in 0..<frames { floats[i] = Float(samples[i * channels]) / 32768 }
        if keepsPlayed {
            blockTimes.append((played.count, MonotonicTime.now.nanoseconds))
            played.append(contentsOf: floats[0..<frames])
        }
        guard failure == nil else { return }
        do {
            try floats.withUnsafeBufferPointer { p in
                try encoder.feed(UnsafeBufferPointer(rebasing: p[0..<frames])) { packet, n in
                    try writer.write(packet.bytes, sampleCount: n)
                }
            }
        } catch { failure = error }
    }

    /// The monotonic time at which played sample `index` sounded; nil past the end.
    func playTime(ofSample index: Int) -> UInt64? {
        guard index >= 0, index < played.count else { return nil }
        // The last block starting at or before `index` (blocks are in order).
        var low = 0, high = blockTimes.count - 1
        while low < high {
            let mid = (low + high + 1) / 2
            if blockTimes[mid].firstSample <= index { low = mid } else { high = mid - 1 }
        }
        let block = blockTimes[low]
        return block.ns + UInt64(index - block.firstSample) * 1_000_000_000 / 48_000
    }

    func finish() throws -> String? {
        if let failure { writer.abort(); throw failure }
        guard encoder.inputFrames > 0 else { writer.abort(); return nil }
        try encoder.finish { packet, n in try writer.write(packet.bytes, sampleCount: n) }
        try writer.finish(originalSampleCount: encoder.originalSampleCount48k)
        return writer.path
    }
}

/// `receive` on the engine's receive pipeline: one `ReceivePipeline` on PORT (video and audio)
/// and one on PORT+2 (audio), each answering with RTCP (RR, NACK, PLI, REMB); decoded pictures
/// go to .y4m (gaps in the RTP timestamps repeat frames) and/or .ivf (re-encoded from the
/// pictures); audio pulled every 10 ms by an `AudioPlayoutClock` goes to .wav and/or .ogg
/// (re-encoded), from the first packet on.
final class PipelineFileReceiver: Sendable {
    let pipelines: [ReceivePipeline]
    private let clocks: [AudioPlayoutClock]
    let renderer: FileRenderer
    let sinks: [FileAudioSink]

    init(listen: SocketAddress, tracks: ReceiveTracks, key: SRTPKeyMaterial?, outputs: [String], frameRate: ContainerRational)
        throws
    {
        var paths: [MediaFileKind: String] = [:]
        for out in outputs { if let k = MediaFileKind(extensionOf: out) { paths[k] = out } }
        renderer = FileRenderer(y4m: paths[.y4m], ivf: paths[.ivf], codec: tracks.video?.codec ?? .vp8, frameRate: frameRate)
        var pipelines: [ReceivePipeline] = [], clocks: [AudioPlayoutClock] = [], sinks: [FileAudioSink] = []
        for (i, port) in [listen.port, listen.port &+ 2].enumerated() {
            var address = listen
            address.port = port
            var options = UDPSocket.Options()
            options.receiveBufferSize = 4 << 20
            let socket: UDPSocket
            do { socket = try UDPSocket(bindingTo: address, options: options) } catch {
                throw InputError(description: "cannot listen on \(address): \(error)")
            }
            var conf = ReceivePipelineConfiguration(remoteKey: key)
            if i == 0, let v = tracks.video { conf.video = [VideoReceiveSettings(codec: v.codec, payloadType: v.payloadType)] }
            if let a = tracks.audio {
                var settings = AudioReceiveSettings(payloadType: a.payloadType)
                settings.channels = a.channels
                conf.audio = settings
            }
            let pipeline: ReceivePipeline
            do { pipeline = try ReceivePipeline(socket: socket, configuration: conf, renderer: i == 0 ? renderer : nil) } catch {
                throw InputError(description: "cannot create the receive pipeline: \(error)")
            }
            pipelines.append(pipeline)
            if let stream = pipeline.audio, paths[.wav] != nil || paths[.ogg] != nil {
                _ = stream
                let sink = try FileAudioSink(wav: paths[.wav], ogg: paths[.ogg], channels: tracks.audio?.channels ?? 1) {
                    [weak pipeline] in
                    pipeline?.inboundStats.contains { $0.kind == "audio" && $0.packetsReceived > 0 } ?? false
                }
                sinks.append(sink)
                clocks.append(AudioPlayoutClock(stream: stream, sink: sink))
            }
        }
        self.pipelines = pipelines
        self.clocks = clocks
        self.sinks = sinks
    }

    func start() {
        for pipeline in pipelines { pipeline.start() }
        for clock in clocks { clock.start() }
    }
    func stop() {
        for clock in clocks { clock.stop() }
        for pipeline in pipelines { pipeline.stop() }
    }

    /// The inbound statistics of every stream of both pipelines.
    var inbound: [InboundRTPStreamStats] { pipelines.flatMap { $0.inboundStats } }

    /// Finishes the outputs that got media (the audio of whichever port it came to); returns the
    /// paths written.
    func finish() throws -> [String] {
        var written = try renderer.finish()
        let withAudio = sinks.filter { $0.hasAudio }
        for sink in sinks where !withAudio.contains(where: { $0 === sink }) { sink.abort() }
        if let sink = withAudio.first { written += try sink.finish() }
        for sink in withAudio.dropFirst() { sink.abort() }
        return written
    }
}

/// Writes decoded pictures to .y4m (constant rate; RTP timestamp gaps repeat the picture) and/or
/// re-encodes them to .ivf. Created lazily at the first picture (its size).
/// Thread rule: `render` on the pipeline's thread; `finish` after it stopped.
/// Sendable: the writers, encoder, scaler and counters live in a `Locked` box.
final class FileRenderer: VideoRenderer, @unchecked Sendable {
    private let core: Locked<FileRendererCore>

    init(y4m: String?, ivf: String?, codec: VPXCodec, frameRate: ContainerRational) {
        core = Locked(FileRendererCore(y4m: y4m, ivf: ivf, codec: codec, frameRate: frameRate))
    }

    /// Pictures received so far.
    var frames: Int { core.withLock { $0.frames } }

    func render(_ frame: DecodedVideoFrame) { core.withLock { $0.render(frame) } }

    func finish() throws -> [String] { try core.withLock { (core) throws -> [String] in try core.finish() } }
}

/// `FileRenderer`'s state and work. Thread rule: one thread at a time (its box's lock).
private final class FileRendererCore {
    private let y4mPath: String?, ivfPath: String?
    private let codec: VPXCodec
    private let rate: ContainerRational
    private var y4m: Y4MWriter?
    private var ivf: IVFWriter?
    private var encoder: VideoStreamEncoder?
    private var scaled: VideoFrame?
    private let converter = ColorConverter()
    private var firstTimestamp: UInt32?
    private var written = 0
    private var failure: Error?
    private(set) var frames = 0

    init(y4m: String?, ivf: String?, codec: VPXCodec, frameRate: ContainerRational) {
        y4mPath = y4m; ivfPath = ivf; self.codec = codec; rate = frameRate
    }

    func render(_ frame: DecodedVideoFrame) {
        guard failure == nil, y4mPath != nil || ivfPath != nil else { return }
        do {
            let image = frame.view
            if frames == 0 {
                if let p = y4mPath { y4m = try Y4MWriter(path: p, width: image.width, height: image.height, frameRate: rate) }
                if let p = ivfPath {
                    var options = VideoEncodeOptions()
                    options.codec = codec
                    options.bitrate = min(20_000_000, max(500_000, image.width * image.height * 12))
                    options.keyframeInterval = 60
                    encoder = try VideoStreamEncoder(options: options, width: image.width, height: image.height, frameRate: rate)
                    ivf = try IVFWriter(
                        path: p, codec: codec == .vp8 ? .vp8 : .vp9, width: image.width, height: image.height,
                        timeBase: ContainerRational(rate.denominator, rate.numerator))
                }
                firstTimestamp = frame.rtpTimestamp
            }
            let w = y4m?.header.width ?? ivf?.header.width ?? image.width,
                h = y4m?.header.height ?? ivf?.header.height ?? image.height
            var view = image
            if image.width != w || image.height != h {
                if scaled == nil { scaled = VideoFrame(width: w, height: h) }
                try converter.scale(image, into: scaled!, filter: .box)
                view = scaled!.view
            }
            let ticks = Int64(Int32(bitPattern: frame.rtpTimestamp &- (firstTimestamp ?? frame.rtpTimestamp)))
            let slot = Int((Double(ticks) * rate.doubleValue / 90_000).rounded())
            let copies = written == 0 ? 1 : max(0, min(slot - written + 1, Int(rate.doubleValue * 10)))
            for _ in 0..<copies {
                try y4m?.write(view)
                if let encoder, let ivf { try encoder.encode(view) { out, index in try ivf.write(out.data.bytes, pts: index) } }
                written += 1
            }
            frames += 1
        } catch { failure = error }
    }

    func finish() throws -> [String] {
        if let failure { y4m?.abort(); ivf?.abort(); throw failure }
        var out: [String] = []
        if let y4m { try y4m.finish(); out.append(y4m.path) }
        if let ivf, let encoder {
            try encoder.flush { o, index in try ivf.write(o.data.bytes, pts: index) }
            try ivf.finish(); out.append(ivf.path)
        }
        return out
    }
}

/// Records the played audio of one stream to .wav and/or .ogg (re-encoded), from the first
/// packet received on. Thread rule: `play` on the playout thread; the rest after it stopped.
/// Sendable: the writers, encoder and flags live in a `Locked` box.
final class FileAudioSink: AudioSink, @unchecked Sendable {
    private let core: Locked<FileAudioSinkCore>

    init(wav wavPath: String?, ogg oggPath: String?, channels: Int, hasPackets: @escaping @Sendable () -> Bool) throws {
        core = Locked(try FileAudioSinkCore(wav: wavPath, ogg: oggPath, channels: channels, hasPackets: hasPackets))
    }

    /// Whether any audio was played (once packets had arrived).
    var hasAudio: Bool { core.withLock { $0.hasAudio } }

    func play(_ samples: Span<Int16>, sampleRate: Int, channels: Int) {
        core.withLock { $0.play(samples, sampleRate: sampleRate, channels: channels) }
    }

    func finish() throws -> [String] { try core.withLock { (core) throws -> [String] in try core.finish() } }

    func abort() { core.withLock { $0.abort() } }
}

/// `FileAudioSink`'s state and work. Thread rule: one thread at a time (its box's lock).
private final class FileAudioSinkCore {
    private let hasPackets: @Sendable () -> Bool
    private let wav: WAVWriter?
    private let ogg: OggOpusWriter?
    private let encoder: OpusStreamEncoder?
    private var floats: [Float] = []
    private var failure: Error?
    private(set) var hasAudio = false

    init(wav wavPath: String?, ogg oggPath: String?, channels: Int, hasPackets: @escaping @Sendable () -> Bool) throws {
        self.hasPackets = hasPackets
        wav = try wavPath.map { try WAVWriter(path: $0, sampleRate: 48_000, channelCount: channels, format: .int16) }
        if let oggPath {
            var options = AudioEncodeOptions()
            options.bitrate = 64_000 * channels
            let e = try OpusStreamEncoder(options: options, inputRate: 48_000, channels: channels)
            encoder = e
            ogg = try OggOpusWriter(
                path: oggPath, channelCount: channels, preSkip: e.preSkip48k, vendor: "Revue revue-media",
                comments: ["ENCODER=revue-media receive (the receiver's playout)"])
        } else {
            encoder = nil; ogg = nil
        }
    }

    func play(_ samples: Span<Int16>, sampleRate: Int, channels: Int) {
        if !hasAudio {
            guard hasPackets() else { return }
            hasAudio = true
        }
        guard failure == nil else { return }
        do {
            if let wav { try wav.write(samples) }
            if let encoder, let ogg {
                if floats.count < samples.count { floats = [Float](repeating: 0, count: samples.count) }
                for i in 0..<samples.count { floats[i] = Float(samples[i]) / 32768 }
                try floats.withUnsafeBufferPointer { p in
                    try encoder.feed(UnsafeBufferPointer(rebasing: p[0..<samples.count])) { packet, n in
                        try ogg.write(packet.bytes, sampleCount: n)
                    }
                }
            }
        } catch { failure = error }
    }

    func finish() throws -> [String] {
        if let failure { wav?.abort(); ogg?.abort(); throw failure }
        var out: [String] = []
        if let wav { try wav.finish(); out.append(wav.path) }
        if let ogg, let encoder {
            try encoder.finish { packet, n in try ogg.write(packet.bytes, sampleCount: n) }
            try ogg.finish(originalSampleCount: encoder.originalSampleCount48k)
            out.append(ogg.path)
        }
        return out
    }

    func abort() { wav?.abort(); ogg?.abort() }
}
