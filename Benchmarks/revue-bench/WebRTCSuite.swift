import Dispatch
import Foundation
// How fast a WebRTC connection comes up: from the moment the offerer applies the answer (both
// sides gathered, both descriptions set on the answerer) until both sides are connected (ICE
// checks and the DTLS handshake done), and until the receiver decoded its first video frame.
// Revue to Revue (two `PeerConnection`s on loopback in this process) against Chromium to Chromium
// (two RTCPeerConnections in one headless page, scripts/webrtc/chromium_page.html), one pair of
// each per repetition, interleaved; then Revue to Chromium. The camera (Chromium's fake device, our
// moving pattern at 320x240 and 30 fps) runs before the clock starts on both.
import MediaCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

enum WebRTCSuite {
    /// Runs `body` on a detached task and waits for it: the suites are synchronous.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let result = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            do {
                let value = try await body()
                result.withLock { $0 = .success(value) }
            } catch { result.withLock { $0 = .failure(error) } }
            done.signal()
        }
        done.wait()
        return try result.withLock { $0! }.get()
    }

    /// Feeds the moving pattern at 30 fps into a capturer from its own thread until stopped.
    final class Feeder: @unchecked Sendable {
        let capturer: BufferCapturer
        let stopping = Atomic<Bool>(false)
        let done = DispatchSemaphore(value: 0)
        let width: Int, height: Int
        let draw: @Sendable (Int, VideoFrame) -> Void
        /// Frames of `width` x `height` (the capturer scales to the encoder's size), drawn by
        /// `draw` (frame index, frame; the moving pattern unless told).
        init(
            _ capturer: BufferCapturer, width: Int = 320, height: Int = 240,
            draw: @escaping @Sendable (Int, VideoFrame) -> Void = { SyntheticVideo.render(frameIndex: $0, into: $1) }
        ) {
            self.capturer = capturer
            self.width = width
            self.height = height
            self.draw = draw
        }
        func start() {
            Thread { [self] in
                defer { done.signal() }
                let frame = VideoFrame(width: width, height: height)
                let start = nowNs()
                var n = 0
                while !stopping.load(ordering: .relaxed) {
                    if UInt64(n) * 33_333_333 <= nowNs() - start {
                        draw(n, frame)
                        capturer.capture(PixelBufferView(frame.view), timeStampNs: Int64(n) * 33_333_333)
                        n += 1
                    }
                    usleep(1_000)
                }
            }.start()
        }
        func stop() {
            stopping.store(true, ordering: .relaxed)
            done.wait()
        }
    }

    /// Remembers when the first frame was decoded (`nowNs`).
    final class FirstFrame: VideoRenderer, @unchecked Sendable {
        let at = Atomic<UInt64>(0)
        func render(_ frame: DecodedVideoFrame) {
            _ = at.compareExchange(expected: 0, desired: nowNs(), ordering: .relaxed)
        }
    }

    static func configuration(bind: SocketAddress) -> PeerConnectionConfiguration {
        var c = PeerConnectionConfiguration()
        c.bindAddress = bind
        c.videoWidth = 320
        c.videoHeight = 240
        c.videoBitrate = 800_000
        return c
    }

    /// Waits (polling every 0.5 ms) until `condition` holds; throws after `timeout` seconds.
    static func poll(_ what: String, timeout: Double = 20, _ condition: () -> Bool) throws {
        let deadline = nowNs() + UInt64(timeout * 1e9)
        while !condition() {
            if nowNs() > deadline { throw BenchError(description: "webrtc: \(what) did not happen within \(timeout) s") }
            usleep(500)
        }
    }

    /// Two Revue connections on loopback, video from `a` to `b`: (connected ms, first frame ms).
    static func revueToRevue() throws -> (connected: Double, firstFrame: Double) {
        let a = try PeerConnection(configuration: configuration(bind: .loopbackIPv4(port: 0)))
        let b = try PeerConnection(configuration: configuration(bind: .loopbackIPv4(port: 0)))
        defer {
            a.close()
            b.close()
        }
        let feeder = Feeder(try a.addVideoTrack(codec: .vp8))
        let first = FirstFrame()
        b.videoRenderer = first
        feeder.start()
        defer { feeder.stop() }
        let answer = try blocking {
            let offer = try await a.createOffer()
            try await b.setRemoteDescription(offer)
            return try await b.createAnswer()
        }
        let t0 = nowNs()
        try blocking { try await a.setRemoteDescription(answer) }
        var connectedAt: UInt64 = 0
        try poll("Revue to Revue connected and first frame") {
            if connectedAt == 0, a.state == .connected, b.state == .connected { connectedAt = nowNs() }
            if a.state == .failed || b.state == .failed { return true }
            return connectedAt != 0 && first.at.load(ordering: .relaxed) != 0
        }
        guard connectedAt != 0 else {
            throw BenchError(description: "webrtc: Revue to Revue failed: \(a.error.map { "\($0)" } ?? "?")")
        }
        return (Double(connectedAt - t0) / 1e6, Double(first.at.load(ordering: .relaxed) - t0) / 1e6)
    }

    /// scripts/webrtc/chromium_peer.py with the page: one JSON command per line, one reply per line.
    /// Thread rule: `call` and `stop` from one thread; the reader thread only appends to `lines`.
    final class Chromium: @unchecked Sendable {
        let process = Process()
        let input = Pipe(), output = Pipe()
        let lines = Mutex<[String]>([])
        let profile: String
        var consumed = 0

        /// Starts the browser; with `namespace`, inside that network namespace (`ip netns exec`, root only).
        init(namespace: String? = nil) throws {
            let scripts = FileManager.default.currentDirectoryPath + "/scripts/webrtc"
            guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium"),
                FileManager.default.fileExists(atPath: scripts + "/chromium_peer.py")
            else {
                throw BenchError(
                    description: "webrtc: needs /usr/bin/chromium (scripts/install-deps) and to run from the repository root")
            }
            profile = NSTemporaryDirectory() + "revue-bench-chromium-\(getpid())-\(nowNs())"
            try FileManager.default.createDirectory(atPath: profile, withIntermediateDirectories: true)
            let peer = [scripts + "/chromium_peer.py", profile + "/profile", scripts + "/chromium_page.html"]
            if let namespace {
                process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
                process.arguments = ["netns", "exec", namespace, "/usr/bin/python3"] + peer
            } else {
                process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
                process.arguments = peer
            }
            process.standardInput = input
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            let reader = output.fileHandleForReading
            Thread { [weak self] in
                var pending = Data()
                while true {
                    let chunk = reader.availableData
                    if chunk.isEmpty { return }
                    pending.append(chunk)
                    while let nl = pending.firstIndex(of: 10) {
                        let line = String(decoding: pending[pending.startIndex..<nl], as: UTF8.self)
                        pending.removeSubrange(pending.startIndex...nl)
                        self?.lines.withLock { $0.append(line) }
                    }
                }
            }.start()
            try process.run()
        }

        /// Evaluates `function(argument)` in the page and returns its string value.
        func call(_ function: String, _ argument: String? = nil, timeout: Double = 60) throws -> String {
            let js: String
            if let argument {
                let quoted = String(decoding: try JSONSerialization.data(withJSONObject: [argument]), as: UTF8.self)
                js = "\(function)(...\(quoted))"
            } else {
                js = "\(function)()"
            }
            input.fileHandleForWriting.write(try JSONSerialization.data(withJSONObject: ["op": function, "js": js]) + Data([10]))
            let deadline = nowNs() + UInt64(timeout * 1e9)
            while true {
                if let line = lines.withLock({ $0.count > consumed ? $0[consumed] : nil }) {
                    consumed += 1
                    let reply = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: String] ?? [:]
                    if let value = reply["sdp"] { return value }
                    throw BenchError(description: "webrtc: Chromium \(function): \(reply["error"] ?? line)")
                }
                if !process.isRunning || nowNs() > deadline {
                    throw BenchError(description: "webrtc: Chromium did not answer \(function)")
                }
                usleep(1_000)
            }
        }

        func stop() {
            if process.isRunning {
                input.fileHandleForWriting.write(Data("{\"op\": \"quit\"}\n".utf8))
                let deadline = nowNs() + 5_000_000_000
                while process.isRunning && nowNs() < deadline { usleep(10_000) }
                if process.isRunning { process.terminate() }
            }
            process.waitUntilExit()
            try? FileManager.default.removeItem(atPath: profile)
        }
    }

    static func json(_ text: String) -> [String: Double] {
        let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
        return object.compactMapValues { ($0 as? NSNumber)?.doubleValue }
    }

    /// Two Chromium connections in one page: (connected ms, first frame ms).
    static func chromiumToChromium(_ chromium: Chromium) throws -> (connected: Double, firstFrame: Double) {
        let times = json(try chromium.call("loopbackTimes"))
        guard let connected = times["connected"], let first = times["firstFrame"], connected > 0, first > 0 else {
            throw BenchError(description: "webrtc: Chromium to Chromium did not connect: \(times)")
        }
        return (connected, first)
    }

    /// Revue offers video, Chromium answers with its camera: (both connected ms, first frame at
    /// Chromium ms, first frame at Revue ms).
    static func revueAndChromium() throws -> (connected: Double, toChromium: Double, toRevue: Double) {
        let chromium = try Chromium()
        defer { chromium.stop() }
        let connection = try PeerConnection(configuration: configuration(bind: .anyIPv4(port: 0)))
        defer { connection.close() }
        let feeder = Feeder(try connection.addVideoTrack(codec: .vp8))
        let first = FirstFrame()
        connection.videoRenderer = first
        feeder.start()
        defer { feeder.stop() }
        let offer = try blocking { try await connection.createOffer() }
        let answer = try JSEPSessionDescription(parsing: try chromium.call("mediaAnswer", offer.sdp), type: .answer)
        _ = try chromium.call("watchMedia")
        let t0 = nowNs(), t0Epoch = Date().timeIntervalSince1970 * 1000
        try blocking { try await connection.setRemoteDescription(answer) }
        var connectedAt: UInt64 = 0
        try poll("Revue to Chromium connected and first frame at Revue") {
            if connectedAt == 0, connection.state == .connected { connectedAt = nowNs() }
            if connection.state == .failed { return true }
            return connectedAt != 0 && first.at.load(ordering: .relaxed) != 0
        }
        guard connectedAt != 0 else {
            throw BenchError(description: "webrtc: Revue to Chromium failed: \(connection.error.map { "\($0)" } ?? "?")")
        }
        var marks: [String: Double] = [:]
        try poll("Chromium connected and first frame at Chromium") {
            marks = json((try? chromium.call("mediaMarks")) ?? "{}")
            return marks["connected"] != nil && marks["firstFrame"] != nil
        }
        let revueConnected = Double(connectedAt - t0) / 1e6
        return (
            max(revueConnected, marks["connected"]! - t0Epoch), marks["firstFrame"]! - t0Epoch,
            Double(first.at.load(ordering: .relaxed) - t0) / 1e6
        )
    }

    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        let chromium = try Chromium()
        defer { chromium.stop() }
        for _ in 0..<options.warmup {
            _ = try revueToRevue()
            _ = try chromiumToChromium(chromium)
        }
        var revue: [(connected: Double, firstFrame: Double)] = []
        var browser: [(connected: Double, firstFrame: Double)] = []
        var mixed: [(connected: Double, toChromium: Double, toRevue: Double)] = []
        for _ in 0..<options.repetitions {
            revue.append(try revueToRevue())
            browser.append(try chromiumToChromium(chromium))
            mixed.append(try revueAndChromium())
        }
        let anchorName = "Chromium to Chromium (one page, loopback)"
        addPair(
            reporter, options, case: "connected (ICE + DTLS) after the answer, Revue to Revue", ours: revue.map(\.connected),
            anchor: browser.map(\.connected), anchorName: anchorName)
        addPair(
            reporter, options, case: "first decoded frame after the answer, Revue to Revue", ours: revue.map(\.firstFrame),
            anchor: browser.map(\.firstFrame), anchorName: anchorName)
        record(
            reporter, options, suite: "webrtc", case: "connected (both sides) after the answer, Revue and Chromium",
            metric: "ms", unit: "ms", higherIsBetter: false, values: mixed.map(\.connected))
        record(
            reporter, options, suite: "webrtc", case: "first frame decoded by Chromium from Revue", metric: "ms",
            unit: "ms", higherIsBetter: false, values: mixed.map(\.toChromium))
        record(
            reporter, options, suite: "webrtc", case: "first frame decoded by Revue from Chromium", metric: "ms",
            unit: "ms", higherIsBetter: false, values: mixed.map(\.toRevue))
    }

    /// A record of paired samples (ours and the anchor from the same repetition).
    static func addPair(
        _ reporter: Reporter, _ options: BenchOptions, case name: String, ours: [Double], anchor: [Double],
        anchorName: String
    ) {
        let sa = Summary(ours), sb = Summary(anchor)
        let ratios = zip(ours, anchor).compactMap { $1 > 0 ? $0 / $1 : nil }
        reporter.add(
            BenchRecord(
                suite: "webrtc", case: name, metric: "ms", unit: "ms", ours: sa.median, anchor: sb.median,
                anchorName: anchorName, ratio: ratios.isEmpty ? nil : Summary(ratios).median,
                ratioSummary: ratios.isEmpty ? nil : Summary(ratios), higherIsBetter: false,
                repetitions: ours.count, oursSummary: sa, anchorSummary: sb, machine: .current))
    }
}
