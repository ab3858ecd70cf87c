// What the peer-connection tests share: a feeder that pushes the moving test pattern and a tone
// into a connection's capturers in real time, a probe that receives decoded video and PCM and
// measures them against the pattern, and Y4M files for the frames aiortc sends or received.
import Foundation
import MediaCore
import Synchronization
import Testing

/// Pushes `SyntheticVideo` frame `frameOffset` + n (30 fps) and a sine (20 ms chunks, 48 kHz mono)
/// into the capturers from its own thread until stopped.
final class PeerConnectionFeeder: @unchecked Sendable {
    let video: BufferCapturer?
    let audio: AudioBufferCapturer?
    let width: Int, height: Int
    let tone: Double
    /// Added to every frame index, so that several senders show different pictures.
    let frameOffset: Int
    let stopping = Atomic<Bool>(false)
    let framesFed = Atomic<Int>(0)
    let done = DispatchSemaphore(value: 0)

    init(video: BufferCapturer?, audio: AudioBufferCapturer?, width: Int, height: Int, tone: Double, frameOffset: Int = 0) {
        self.frameOffset = frameOffset
        self.video = video
        self.audio = audio
        self.width = width
        self.height = height
        self.tone = tone
    }

    /// Set by `start`, cleared by the `stop` that waits for the thread.
    let running = Atomic<Bool>(false)

    func start() {
        running.store(true, ordering: .relaxed)
        Thread { [self] in
            defer { done.signal() }
            let frame = VideoFrame(width: width, height: height)
            var synth = SyntheticAudio(pattern: .tone(frequency: tone), sampleRate: 48_000, amplitude: 0.5)
            let start = MonotonicTime.now.nanoseconds
            var n = 0, chunks = 0
            while !stopping.load(ordering: .relaxed) {
                let now = MonotonicTime.now.nanoseconds - start
                // Video every 33.3 ms, audio every 20 ms, both on the wall clock (a slow machine
                // catches up instead of drifting).
                while let video, UInt64(n) * 33_333_333 <= now {
                    SyntheticVideo.render(frameIndex: frameOffset + n, into: frame)
                    video.capture(PixelBufferView(frame.view), timeStampNs: Int64(n) * 33_333_333)
                    n += 1
                    framesFed.add(1, ordering: .relaxed)
                }
                while let audio, UInt64(chunks) * 20_000_000 <= now {
                    let pcm = synth.int16s(frames: 960)
                    pcm.withUnsafeBufferPointer {
                        audio.capture($0, sampleRate: 48_000, channels: 1, timeStampNs: Int64(chunks) * 20_000_000)
                    }
                    chunks += 1
                }
                usleep(2_000)
            }
        }.start()
    }

    /// Stops the thread and waits for it; idempotent, and a no-op before `start`.
    func stop() {
        stopping.store(true, ordering: .relaxed)
        if running.exchange(false, ordering: .relaxed) { done.wait() }
    }
}

/// Measures what a connection receives: every decoded frame is matched to its pattern frame by
/// the bar code and compared (PSNR); PCM after the first half second, in 10 ms blocks louder than
/// -26 dBFS, is measured (RMS, zero crossings per second).
final class PeerConnectionProbe: VideoRenderer, AudioSink, @unchecked Sendable {
    struct Video {
        var frames = 0
        var identified = 0
        var psnrSum = 0.0
        var psnrMin = Double.infinity
        /// The lowest and highest bar-code index seen (which sender's pictures arrived).
        var indexMin = Int.max, indexMax = Int.min
        /// Identified frames by sender: the bar-code index divided by 10,000 (senders that offset
        /// their frames by `frameOffset`).
        var bySender: [Int: Int] = [:]
        var psnrMean: Double { identified > 0 ? psnrSum / Double(identified) : 0 }
    }
    struct Audio {
        var samplesSeen = 0
        var samples = 0
        var sumSquares = 0.0
        var crossings = 0
        var lastSign: Bool?
        /// The highest RMS of any 10 ms block played (silence stays near 0).
        var loudestBlock = 0.0
        var rms: Double { samples > 0 ? (sumSquares / Double(samples)).squareRoot() : 0 }
        var crossingsPerSecond: Double { samples > 0 ? Double(crossings) / (Double(samples) / 48_000) : 0 }
    }
    let video = Mutex(Video())
    let audio = Mutex(Audio())
    /// Reference frames by size, made on the renderer's thread only.
    nonisolated(unsafe) var reference: VideoFrame?
    /// The pattern frame for a bar-code index (`index % loop` when the sender loops a file).
    let loop: Int?

    init(loop: Int? = nil) { self.loop = loop }

    func render(_ frame: DecodedVideoFrame) {
        let view = frame.view
        var psnr: Double?
        let seen = SyntheticVideo.frameIndex(in: view)
        if let index = seen {
            if reference?.width != view.width || reference?.height != view.height {
                reference = VideoFrame(width: view.width, height: view.height)
            }
            SyntheticVideo.render(frameIndex: loop.map { index % $0 } ?? index, into: reference!)
            psnr = Quality.psnr(view, reference!.view)
        }
        video.withLock { v in
            v.frames += 1
            if let psnr {
                v.identified += 1
                v.indexMin = min(v.indexMin, seen!)
                v.indexMax = max(v.indexMax, seen!)
                v.bySender[seen! / 10_000, default: 0] += 1
                v.psnrSum += psnr
                v.psnrMin = min(v.psnrMin, psnr)
            }
        }
    }

    func play(_ samples: Span<Int16>, sampleRate: Int, channels: Int) {
        let step = max(channels, 1)
        var blockSquares = 0.0
        for i in stride(from: 0, to: samples.count, by: step) { blockSquares += Double(samples[i]) * Double(samples[i]) }
        let blockRMS = (blockSquares / Double(max(samples.count / step, 1))).squareRoot() / 32768
        audio.withLock { a in
            a.samplesSeen += samples.count / step
            a.loudestBlock = max(a.loudestBlock, blockRMS)
            // Measured: the tone itself, not the start-up or the silence after the sender stopped.
            guard a.samplesSeen > sampleRate / 2, blockRMS > 0.05 else {
                a.lastSign = nil
                return
            }
            for i in stride(from: 0, to: samples.count, by: step) {
                let s = Double(samples[i]) / 32768
                a.sumSquares += s * s
                let sign = s >= 0
                if let last = a.lastSign, last != sign { a.crossings += 1 }
                a.lastSign = sign
                a.samples += 1
            }
        }
    }
}

enum PeerConnectionY4M {
    /// Writes `count` pattern frames at `width`x`height` as a 30 fps 4:2:0 Y4M file.
    static func writePattern(to path: String, count: Int, width: Int, height: Int) throws {
        var data = Data("YUV4MPEG2 W\(width) H\(height) F30:1 Ip A1:1 C420jpeg\n".utf8)
        let frame = VideoFrame(width: width, height: height)
        for n in 0..<count {
            SyntheticVideo.render(frameIndex: n, into: frame)
            data.append(contentsOf: Array("FRAME\n".utf8))
            for r in 0..<height { data.append(frame.y + r * frame.strideY, count: width) }
            for r in 0..<frame.chromaHeight { data.append(frame.u + r * frame.strideUV, count: frame.chromaWidth) }
            for r in 0..<frame.chromaHeight { data.append(frame.v + r * frame.strideUV, count: frame.chromaWidth) }
        }
        try data.write(to: URL(fileURLWithPath: path))
    }

    /// Every frame of a 4:2:0 Y4M file, handed to `body` as an I420 view.
    static func forEachFrame(in path: String, _ body: (I420View) -> Void) throws {
        let data = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        guard let end = data.firstIndex(of: 10) else { return }
        var width = 0, height = 0
        for f in String(decoding: data[0..<end], as: UTF8.self).split(separator: " ") {
            if f.hasPrefix("W") { width = Int(f.dropFirst()) ?? 0 }
            if f.hasPrefix("H") { height = Int(f.dropFirst()) ?? 0 }
        }
        let frame = VideoFrame(width: width, height: height)
        let cw = frame.chromaWidth, ch = frame.chromaHeight
        let size = width * height + 2 * cw * ch
        var pos = end + 1
        while pos < data.count, let nl = data[pos...].firstIndex(of: 10), nl + 1 + size <= data.count {
            let base = nl + 1
            data.withUnsafeBufferPointer { b in
                for r in 0..<height {
                    (frame.y + r * frame.strideY).update(from: b.baseAddress! + base + r * width, count: width)
                }
                let u = base + width * height, v = u + cw * ch
                for r in 0..<ch {
                    (frame.u + r * frame.strideUV).update(from: b.baseAddress! + u + r * cw, count: cw)
                    (frame.v + r * frame.strideUV).update(from: b.baseAddress! + v + r * cw, count: cw)
                }
            }
            body(frame.view)
            pos = base + size
        }
    }
}

/// Offer and answer with a peer speaking the JSON-line media ops (aiortc_peer.py,
/// webrtcbin_peer.py): Revue offers and the peer answers with `media-answer`, or the peer offers
/// with `media-offer` and takes Revue's answer with `remote-answer`. `media` carries the peer's
/// media options (what it sends, where it writes what it receives).
func negotiateMedia(_ connection: PeerConnection, with peer: JSONLinePeer, media: [String: String], revueOffers: Bool)
    async throws
{
    var command = media
    if revueOffers {
        let offer = try await connection.createOffer()
        command["op"] = "media-answer"
        command["sdp"] = offer.sdp
        let answer = try #require(try peer.call(command)["sdp"])
        try await connection.setRemoteDescription(try JSEPSessionDescription(parsing: answer, type: .answer))
    } else {
        command["op"] = "media-offer"
        let offer = try #require(try peer.call(command)["sdp"])
        try await connection.setRemoteDescription(try JSEPSessionDescription(parsing: offer, type: .offer))
        let answer = try await connection.createAnswer()
        _ = try peer.call(["op": "remote-answer", "sdp": answer.sdp])
    }
}

/// Waits until `condition` holds or `timeout` seconds pass; returns whether it held.
func waitFor(timeout: Double, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        if Date() > deadline { return false }
        try? await Task.sleep(nanoseconds: 50_000_000)
    }
    return true
}
