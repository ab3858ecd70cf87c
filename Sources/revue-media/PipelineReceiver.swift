// The demo's receiving end on the engine's receive pipeline: one UDP socket -> ReceivePipeline
// (SRTP unprotect, jitter buffer, NACK, PLI, depacketize, decode) -> a renderer that measures
// each picture and records it; Opus pulled every 10 ms by an AudioPlayoutClock into a sink that
// measures and records. What was seen and heard is recorded to received.ivf (VP8, re-encoded at
// a high bitrate from the decoded pictures) and received.ogg (Opus, re-encoded from the played
// PCM), so the files are the call as the receiver played it.
import RevueSDK
import Foundation

final class PipelineReceiver: @unchecked Sendable {
    let socket: UDPSocket
    let pipeline: ReceivePipeline
    let clock: AudioPlayoutClock?
    let renderer: RecordingRenderer
    let audioSink: RecordingAudioSink?

    init(key: SRTPKeyMaterial?, codec: VPXCodec, width: Int, height: Int, videoPath: String, audioPath: String,
         onVideo: @escaping DecodedVideoHandler) throws {
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
        } else { audioSink = nil; clock = nil }
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
final class RecordingRenderer: VideoRenderer, @unchecked Sendable {
    private let lock = NSLock()
    private let writer: IVFWriter
    private let encoder: VideoStreamEncoder
    private let onVideo: DecodedVideoHandler
    private var scaled: VideoFrame?
    private let converter = ColorConverter()
    private var failure: Error?
    private(set) var frames = 0

    init(path: String, codec: VPXCodec, width: Int, height: Int, onVideo: @escaping DecodedVideoHandler) throws {
        var options = VideoEncodeOptions()
        options.codec = codec
        options.bitrate = 4_000_000
        options.keyframeInterval = 60
        encoder = try VideoStreamEncoder(options: options, width: width, height: height, frameRate: ContainerRational(30, 1))
        writer = try IVFWriter(path: path, codec: codec == .vp8 ? .vp8 : .vp9, width: width, height: height, timeBase: ContainerRational(1, 30))
        self.onVideo = onVideo
    }

    func render(_ frame: DecodedVideoFrame) {
        onVideo(frame.view, frame.rtpTimestamp, frame.decodedNs)
        lock.lock(); defer { lock.unlock() }
        guard failure == nil else { return }
        do {
            var view = frame.view
            if view.width != writer.header.width || view.height != writer.header.height {
                if scaled == nil { scaled = VideoFrame(width: writer.header.width, height: writer.header.height) }
                try converter.scale(view, into: scaled!, filter: .box)
                view = scaled!.view
            }
            try encoder.encode(view) { out, index in try self.writer.write(out.data, pts: index) }
            frames += 1
        } catch { failure = error }
    }

    func finish() throws -> String? {
        lock.lock(); defer { lock.unlock() }
        if let failure { writer.abort(); throw failure }
        guard frames > 0 else { writer.abort(); return nil }
        try encoder.flush { out, index in try self.writer.write(out.data, pts: index) }
        try writer.finish()
        return writer.path
    }
}

/// Keeps the played 48 kHz audio (for the quality measurement) and records it as Ogg Opus.
/// Thread rule: `play` on the playout clock's thread; the rest after the clock stopped.
final class RecordingAudioSink: AudioSink, @unchecked Sendable {
    private let lock = NSLock()
    private let writer: OggOpusWriter
    private let encoder: OpusStreamEncoder
    private var floats = [Float](repeating: 0, count: 960)
    private var failure: Error?
    /// Everything played so far, mono Float at 48 kHz.
    private(set) var played: [Float] = []

    init(path: String) throws {
        var options = AudioEncodeOptions()
        options.bitrate = 64_000
        encoder = try OpusStreamEncoder(options: options, inputRate: 48_000, channels: 1)
        writer = try OggOpusWriter(path: path, channelCount: 1, preSkip: encoder.preSkip48k, vendor: "Revue revue-media",
                                   comments: ["ENCODER=revue-media demo (the receiver's playout)"])
    }

    func play(_ samples: UnsafeBufferPointer<Int16>, sampleRate: Int, channels: Int) {
        lock.lock(); defer { lock.unlock() }
        let frames = samples.count / max(1, channels)
        if floats.count < frames { floats = [Float](repeating: 0, count: frames) }
        for i in 0..<frames { floats[i] = Float(samples[i * channels]) / 32768 }
        played.append(contentsOf: floats[0..<frames])
        guard failure == nil else { return }
        do {
            try floats.withUnsafeBufferPointer { p in
                try encoder.feed(UnsafeBufferPointer(rebasing: p[0..<frames])) { packet, n in try writer.write(packet, sampleCount: n) }
            }
        } catch { failure = error }
    }

    var playedSamples: [Float] { lock.lock(); defer { lock.unlock() }; return played }

    func finish() throws -> String? {
        lock.lock(); defer { lock.unlock() }
        if let failure { writer.abort(); throw failure }
        guard encoder.inputFrames > 0 else { writer.abort(); return nil }
        try encoder.finish { packet, n in try writer.write(packet, sampleCount: n) }
        try writer.finish(originalSampleCount: encoder.originalSampleCount48k)
        return writer.path
    }
}
