// What the RevueMediaAppTests share, written as an app would with `import RevueMedia` only: a
// feeder pushing the moving test pattern and a tone into a transceiver's capturers in real time,
// a probe measuring what a connection decodes against that pattern (PSNR by bar code) and tone,
// a trickle channel between two connections, and a JSON-line child process (aiortc).
import Foundation
import RevueMedia
import Synchronization
import Testing

/// Pushes pattern frame `frameOffset + n` at 30 fps and 20 ms chunks of a sine (48 kHz mono)
/// into the capturers from its own thread until stopped.
final class PatternFeeder: Sendable {
    let video: BufferCapturer?
    let audio: AudioBufferCapturer?
    let width: Int, height: Int, tone: Double, frameOffset: Int
    let stopping = Atomic<Bool>(false)
    let framesFed = Atomic<Int>(0)
    let done = DispatchSemaphore(value: 0)
    let started = Atomic<Bool>(false)

    init(video: BufferCapturer?, audio: AudioBufferCapturer?, width: Int, height: Int, tone: Double, frameOffset: Int = 0) {
        self.video = video
        self.audio = audio
        self.width = width
        self.height = height
        self.tone = tone
        self.frameOffset = frameOffset
    }

    func start() {
        started.store(true, ordering: .relaxed)
        Thread { [self] in
            defer { done.signal() }
            let frame = VideoFrame(width: width, height: height)
            var synth = SyntheticAudio(pattern: .tone(frequency: tone), sampleRate: 48_000, amplitude: 0.5)
            let start = DispatchTime.now().uptimeNanoseconds
            var n = 0, chunks = 0
            while !stopping.load(ordering: .relaxed) {
                let now = DispatchTime.now().uptimeNanoseconds - start
                while let video, UInt64(n) * 33_333_333 <= now {
                    SyntheticVideo.render(frameIndex: frameOffset + n, into: frame)
                    frame.withView { video.capture(PixelBufferView($0), timeStampNs: Int64(n) * 33_333_333) }
                    n += 1
                    framesFed.add(1, ordering: .relaxed)
                }
                while let audio, UInt64(chunks) * 20_000_000 <= now {
                    let pcm = synth.int16s(frames: 960)
                    audio.capture(pcm.span, sampleRate: 48_000, channels: 1, timeStampNs: Int64(chunks) * 20_000_000)
                    chunks += 1
                }
                usleep(2_000)
            }
        }.start()
    }

    func stop() {
        stopping.store(true, ordering: .relaxed)
        if started.exchange(false, ordering: .relaxed) { done.wait() }
    }
}

/// Measures what a connection decodes: each frame is matched to its pattern frame by the bar
/// code and compared (PSNR); PCM after the first half second, in blocks louder than -26 dBFS, is
/// measured (RMS, zero crossings per second).
final class MediaProbe: VideoRenderer, AudioSink, @unchecked Sendable {
    // Sendable: `reference` is used only by `render`, on the connection's receive thread; the
    // counts are in Mutexes.
    struct Video {
        var frames = 0, identified = 0
        var psnrSum = 0.0, psnrMin = Double.infinity
        var indexMin = Int.max, indexMax = Int.min
        var psnrMean: Double { identified > 0 ? psnrSum / Double(identified) : 0 }
    }
    struct Audio {
        var samplesSeen = 0, samples = 0, crossings = 0
        var sumSquares = 0.0
        var lastSign: Bool?
        var rms: Double { samples > 0 ? (sumSquares / Double(samples)).squareRoot() : 0 }
        var crossingsPerSecond: Double { samples > 0 ? Double(crossings) / (Double(samples) / 48_000) : 0 }
    }
    let video = Mutex(Video())
    let audio = Mutex(Audio())
    var reference: VideoFrame?
    /// Pattern frames loop every `loop` frames (a sender that loops a file).
    let loop: Int?

    init(loop: Int? = nil) { self.loop = loop }

    func render(_ frame: DecodedVideoFrame) {
        frame.withView { view in measure(view) }
    }

    func measure(_ view: I420View) {
        var psnr: Double?
        let index = SyntheticVideo.frameIndex(in: view)
        if let index {
            if reference?.width != view.width || reference?.height != view.height {
                reference = VideoFrame(width: view.width, height: view.height)
            }
            SyntheticVideo.render(frameIndex: loop.map { index % $0 } ?? index, into: reference!)
            psnr = reference!.withView { Quality.psnr(view, $0) }
        }
        video.withLock { v in
            v.frames += 1
            if let psnr, let index {
                v.identified += 1
                v.psnrSum += psnr
                v.psnrMin = min(v.psnrMin, psnr)
                v.indexMin = min(v.indexMin, index)
                v.indexMax = max(v.indexMax, index)
            }
        }
    }

    func play(_ samples: Span<Int16>, sampleRate: Int, channels: Int) {
        let step = max(channels, 1)
        var block = 0.0
        for i in stride(from: 0, to: samples.count, by: step) { block += Double(samples[i]) * Double(samples[i]) }
        let blockRMS = (block / Double(max(samples.count / step, 1))).squareRoot() / 32768
        audio.withLock { a in
            a.samplesSeen += samples.count / step
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

/// Carries one side's trickled candidates to the other in order, once the other side has a
/// remote description (as a signalling server would hold them).
final class TrickleChannel: Sendable {
    let queued = Mutex<[RTCIceCandidate?]>([])
    let delivered = Atomic<Int>(0)
    let endsDelivered = Atomic<Int>(0)

    /// The handler to set as the sender's `onIceCandidate`.
    var handler: @Sendable (RTCIceCandidate?) -> Void { { [self] c in self.queued.withLock { $0.append(c) } } }

    /// Delivers what is queued to `target`, in order, once it has a remote description; the first
    /// candidate it refuses throws.
    func deliver(to target: RTCPeerConnection) async throws {
        guard target.remoteDescription != nil else { return }
        let batch = queued.withLock { q in
            defer { q.removeAll() }
            return q
        }
        for c in batch {
            try await target.addIceCandidate(c)
            if c == nil { endsDelivered.add(1, ordering: .relaxed) } else { delivered.add(1, ordering: .relaxed) }
        }
    }
}

/// Records every event a connection reports, in order.
final class EventLog: Sendable {
    let lines = Mutex<[String]>([])

    func attach(to pc: RTCPeerConnection) {
        pc.onSignalingStateChange = { [self] s in self.lines.withLock { $0.append("signaling:\(s.rawValue)") } }
        pc.onConnectionStateChange = { [self] s in self.lines.withLock { $0.append("connection:\(s.rawValue)") } }
        pc.onIceConnectionStateChange = { [self] s in self.lines.withLock { $0.append("ice:\(s.rawValue)") } }
        pc.onIceGatheringStateChange = { [self] s in self.lines.withLock { $0.append("gathering:\(s.rawValue)") } }
        pc.onTrack = { [self] t in self.lines.withLock { $0.append("track:\(t.kind.rawValue)") } }
    }

    /// The events of one kind (`signaling`, `connection`...), in order.
    func values(_ kind: String) -> [String] {
        lines.withLock { $0 }.filter { $0.hasPrefix(kind + ":") }.map { String($0.dropFirst(kind.count + 1)) }
    }
}

/// Waits until `condition` holds or `timeout` seconds pass; returns whether it held.
func waitFor(timeout: Double, _ condition: () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        if Date() > deadline { return false }
        try? await Task.sleep(nanoseconds: 20_000_000)
    }
    return true
}

/// The package's root directory (for scripts and the interop virtualenv).
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path

/// A child process speaking one JSON object per line on stdin and stdout (aiortc_peer.py).
final class JSONLineProcess: @unchecked Sendable {
    // Sendable: `consumed` is used only by `call`, which the test calls from one task at a time.
    struct Failure: Error, CustomStringConvertible { var description: String }
    let process = Process()
    let input = Pipe(), output = Pipe(), errors = Pipe()
    let lines = Mutex<[String]>([])
    let errorText = Mutex<String>("")
    var consumed = 0
    let name: String

    init(name: String, executable: String, arguments: [String]) throws {
        self.name = name
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw Failure(description: "\(name): \(executable) is missing (scripts/install-deps makes it)")
        }
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        let out = output.fileHandleForReading, err = errors.fileHandleForReading
        Thread { [self] in
            var pending = Data()
            while true {
                let chunk = out.availableData
                if chunk.isEmpty { return }
                pending.append(chunk)
                while let nl = pending.firstIndex(of: 10) {
                    let line = String(decoding: pending[pending.startIndex..<nl], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...nl)
                    self.lines.withLock { $0.append(line) }
                }
            }
        }.start()
        Thread { [self] in
            while true {
                let chunk = err.availableData
                if chunk.isEmpty { return }
                self.errorText.withLock { $0 += String(decoding: chunk, as: UTF8.self) }
            }
        }.start()
        try process.run()
    }

    /// Sends `command`, waits for the reply; an `error` reply, an exit or a timeout throws with
    /// the process's stderr.
    func call(_ command: [String: String], timeout: Double = 90) throws -> [String: String] {
        input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: command) + Data([10]))
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let line = lines.withLock({ $0.count > consumed ? $0[consumed] : nil }) {
                consumed += 1
                guard let obj = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String] else {
                    throw Failure(description: "\(name) wrote \(line.prefix(300))")
                }
                if let e = obj["error"] { throw Failure(description: "\(name) refused \(command["op"] ?? "?"): \(e)") }
                return obj
            }
            if !process.isRunning || Date() > deadline {
                let why = process.isRunning ? "did not answer in \(Int(timeout)) s" : "exited (\(process.terminationStatus))"
                throw Failure(
                    description:
                        "\(name) \(why) on \(command["op"] ?? "?"); stderr:\n\(errorText.withLock { String($0.suffix(3000)) })")
            }
            usleep(10_000)
        }
    }

    func stop() {
        if process.isRunning { _ = try? call(["op": "quit"], timeout: 10) }
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}
