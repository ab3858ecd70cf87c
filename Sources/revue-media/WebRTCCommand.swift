// `revue-media webrtc`: a browser calls Revue. An HTTP server (HTTPServer.swift) serves a page
// at `/`, a WHIP/WHEP-style endpoint at `/session` (RFC 9725 signalling: POST an SDP offer,
// get the answer with 201 Created and a Location; DELETE the Location to hang up) and a WHEP
// endpoint at `/whep` for players that only receive. Each session is a `PeerConnection` that
// sends the moving test pattern and a tone (or a Y4M and a WAV file, looped) and records the
// first `/session` call's incoming video and audio to IVF and Ogg Opus. Every request must
// name an allowed Host (421), carry the token when one is set (401) and come from an allowed
// origin when a browser sends it (403); sessions are capped per client and expire.
import Dispatch
import MediaCore
import RevueCommandLine
import RevueSession
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// `revue-media webrtc`: see the file comment and docs/webrtc.md. Thread rule: `run` on the main
/// thread. Cost: the HTTP server's threads, the source's thread and one `PeerConnection` per call.
enum WebRTCCommand: Command {
    static let name = "webrtc"
    static let summary = "serve a page and a WHIP/WHEP endpoint; call Revue from a browser over WebRTC"
    static let help = """
        usage: revue-media webrtc [options]

        Serves http://HOST:PORT/ (a page that opens the camera and microphone and calls Revue),
        POST /session (an SDP offer as application/sdp; the answer comes back with 201 Created and
        a Location; DELETE that Location to hang up) and POST /whep (the same for a WHEP player:
        a receive-only offer gets Revue's stream). Revue sends VP8 video and Opus audio to every
        session and records what the first /session call sends it.

        server:
          --host ADDR          IPv4 address to listen on (default 127.0.0.1: this machine only)
          --port N             TCP port (default 8080; 0 picks a free one, printed on stderr)
          --max-sessions N     sessions at once (default 4); more get 503
          --max-sessions-per-client N
                               sessions one client address may hold (default 2); more get 429
          --connect-timeout S  end a session that has not connected after S seconds (default 30)
        access:
          --token TOKEN        require Authorization: Bearer TOKEN on POST and DELETE (the page
                               sends it when opened as http://HOST:PORT/#token=TOKEN)
          --token-file FILE    the same, the token read from FILE (its first line)
          --allow-host NAMES   Host names the server answers to, comma-separated (default:
                               localhost, 127.0.0.1, [::1] and ADDR); others get 421
          --allow-origin ORIGINS
                               browser origins granted CORS, comma-separated (scheme://host:port);
                               other origins get no grant and 403 on POST and DELETE
          --no-token-off-loopback
                               allow --host other than loopback without a token (refused otherwise)
        media:
          --input FILE.y4m     video to send, looped (default: the moving test pattern)
          --audio FILE.wav     audio to send, looped (default: a 440 Hz tone)
          --size WxH           size of the pattern and of the sent video (default 640x360, or the input's)
          --bitrate BPS        video start bitrate (default 1M)
          --record-video F.ivf record the first session's incoming video (re-encoded VP8)
          --record-audio F.ogg record the first session's incoming audio (Opus)
        run:
          --seconds S          stop after S seconds (default: until Ctrl-C)
          --quiet, -q          no progress on stderr

        Requests are bounded: 8 KiB of head, 64 header fields, a 64 KiB body, 5 s to send it all
        and at most 2 s of silence, 4 connections per client address; others get 400, 405, 411,
        413 or 431. Recordings are written atomically when Revue stops.
        """

    static let valueOptions: Set<String> = [
        "--host", "--port", "--max-sessions", "--max-sessions-per-client", "--connect-timeout", "--token", "--token-file",
        "--allow-host", "--allow-origin", "--input", "--audio", "--size", "--bitrate", "--record-video",
        "--record-audio", "--seconds",
    ]
    static let flagOptions: Set<String> = ["--quiet", "-q", "--no-token-off-loopback"]

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments(argv, valueOptions: valueOptions, flagOptions: flagOptions)
        if let extra = args.positional.first { throw UsageError(description: "unexpected argument '\(extra)'") }
        let host = args.string("--host") ?? "127.0.0.1"
        let port = try args.int("--port", range: 0...65_535) ?? 8080
        let maxSessions = try args.int("--max-sessions", range: 1...64) ?? 4
        let perClient = try args.int("--max-sessions-per-client", range: 1...64) ?? 2
        let connectTimeout = try args.double("--connect-timeout", range: 1...3600) ?? 30
        var tokens: [String] = []
        if let token = args.string("--token") { tokens.append(token) }
        if let file = args.string("--token-file") {
            guard let data = FileManager.default.contents(atPath: file), let text = String(data: data, encoding: .utf8) else {
                throw InputError(description: "--token-file \(file): cannot read it as text")
            }
            tokens.append(String(text.split(separator: "\n", maxSplits: 1).first ?? "").trimmingWhitespace)
        }
        for token in tokens where token.isEmpty || token.contains(where: { $0 == " " || $0.isNewline }) {
            throw UsageError(description: "a token must not be empty or hold spaces")
        }
        if tokens.isEmpty && !HTTPAccessPolicy.isLoopback(host) && !args.flag("--no-token-off-loopback") {
            throw UsageError(
                description: "--host \(host) is reachable from other machines: give --token or --token-file "
                    + "(or --no-token-off-loopback on a closed network)")
        }
        let allowedHosts = args.string("--allow-host").map { $0.split(separator: ",").map { String($0).trimmingWhitespace } }
        let allowedOrigins =
            args.string("--allow-origin").map { $0.split(separator: ",").map { String($0).trimmingWhitespace } } ?? []
        let seconds = try args.double("--seconds", range: 0.01...86_400)
        let bitrate = try args.int("--bitrate", range: 50_000...20_000_000) ?? 1_000_000
        let quiet = args.quiet
        let videoPath = args.string("--record-video"), audioPath = args.string("--record-audio")
        if let videoPath {
            guard MediaFileKind(extensionOf: videoPath) == .ivf else {
                throw UsageError(description: "--record-video \(videoPath): expected a .ivf file")
            }
            try checkOutputDirectory(videoPath, option: "--record-video")
        }
        if let audioPath {
            guard MediaFileKind(extensionOf: audioPath) == .ogg else {
                throw UsageError(description: "--record-audio \(audioPath): expected a .ogg or .opus file")
            }
            try checkOutputDirectory(audioPath, option: "--record-audio")
        }
        let size = try args.size("--size")
        let source = try WebRTCSource(
            videoPath: args.string("--input"), audioPath: args.string("--audio"),
            size: size ?? (args.string("--input") == nil ? (640, 360) : nil))
        var configuration = PeerConnectionConfiguration()
        // Browsers offer their interface addresses, not loopback: listen on every IPv4 interface.
        configuration.bindAddress = .anyIPv4(port: 0)
        configuration.videoWidth = source.width
        configuration.videoHeight = source.height
        configuration.videoBitrate = bitrate

        let sessions = WebRTCSessions(
            configuration: configuration, maxSessions: maxSessions, perClient: perClient,
            connectTimeout: .milliseconds(Int(connectTimeout * 1000)), videoPath: videoPath, audioPath: audioPath, quiet: quiet)
        let server: HTTPServer
        do {
            server = try HTTPServer(host: host, port: UInt16(port)) { request in sessions.handle(request) }
            sessions.policy.withLock {
                $0 = HTTPAccessPolicy(
                    boundHost: host, port: server.port, hosts: allowedHosts, tokens: tokens, origins: allowedOrigins)
            }
        } catch .notIPv4 {
            throw UsageError(description: "--host \(host): not an IPv4 address")
        } catch {
            throw InputError(description: error.description)
        }
        server.start()
        source.start(into: sessions)
        if !quiet {
            Console.error(
                "webrtc: serving http://\(host):\(server.port)/ (POST /session, /whep)\(tokens.isEmpty ? "" : " with a token"); sending \(source.name) at \(source.width)x\(source.height)"
            )
        }
        let start = Date()
        var lastReport = Date()
        while !Interrupt.requested {
            if let seconds, Date().timeIntervalSince(start) >= seconds { break }
            usleep(50_000)
            sessions.expire()
            if !quiet, Date().timeIntervalSince(lastReport) >= 2 {
                lastReport = Date()
                Console.error("webrtc: " + sessions.progressLine(sentFrames: source.framesSent.load(ordering: .relaxed)))
            }
        }
        server.stop()
        source.stop()
        sessions.closeAll()
        let written = try sessions.finishRecordings()
        Console.out(
            "webrtc: \(sessions.total.load(ordering: .relaxed)) sessions, \(source.framesSent.load(ordering: .relaxed)) frames sent, "
                + "\(sessions.framesEncoded.load(ordering: .relaxed)) frames encoded, \(server.served.load(ordering: .relaxed)) requests served, \(server.refused.load(ordering: .relaxed)) refused"
        )
        for (path, what) in written { Console.out("recorded \(path): \(what)") }
        return 0
    }
}

/// What the server sends: Y4M or the moving pattern at 30 fps, WAV or a tone in 20 ms chunks,
/// on the wall clock, into the capturers of every connected session; files loop at their end.
/// Thread rule: `start`/`stop` from one thread; the counters from any. Cost: one thread.
final class WebRTCSource: Sendable {
    let width: Int, height: Int
    let name: String
    private let videoPath: String?, audioPath: String?
    private let stopping = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)
    /// Frames pushed into at least one session.
    let framesSent = Atomic<Int>(0)

    /// Checks the inputs (they are opened again on every loop).
    init(videoPath: String?, audioPath: String?, size: (width: Int, height: Int)?) throws {
        self.videoPath = videoPath
        self.audioPath = audioPath
        if let videoPath {
            let reader = try Y4MReader(path: videoPath)
            width = size?.width ?? reader.width
            height = size?.height ?? reader.height
        } else {
            width = size?.width ?? 640
            height = size?.height ?? 360
        }
        if let audioPath { _ = try WAVReader(path: audioPath) }
        name = (videoPath ?? "the moving pattern") + " and " + (audioPath ?? "a 440 Hz tone")
    }

    private func makeVideo() throws -> any VideoSource {
        if let videoPath {
            return try Y4MVideoSource(
                path: videoPath, size: (width, height), frameRate: ContainerRational(30, 1), limit: nil)
        }
        return PatternVideoSource(name: "moving", width: width, height: height, frameRate: ContainerRational(30, 1), frames: nil)
    }

    private func makeAudio() throws -> any AudioSource {
        if let audioPath { return try WAVAudioSource(path: audioPath, limit: nil) }
        return PatternAudioSource(pattern: .tone(frequency: 440), name: "tone", sampleRate: 48_000, channels: 1, frames: nil)
    }

    func start(into sessions: WebRTCSessions) {
        _ = TransportThread(name: "revue.webrtc.source") { [self] in
            defer { done.signal() }
            do { try loop(sessions) } catch { Console.error("webrtc: the source stopped: \(error)") }
        }
    }

    private func loop(_ sessions: WebRTCSessions) throws {
        let frame = VideoFrame(width: width, height: height)
        var video = try makeVideo(), audio = try makeAudio()
        var floats = [Float](repeating: 0, count: 4096)
        var pcm = [Int16](repeating: 0, count: 4096)
        let start = MonotonicTime.now.nanoseconds
        var n = 0, chunks = 0
        while !stopping.load(ordering: .relaxed) {
            let now = MonotonicTime.now.nanoseconds - start
            while UInt64(n) * 33_333_333 <= now {
                if try !video.next(into: frame) {
                    video = try makeVideo()
                    guard try video.next(into: frame) else { throw InputError(description: "\(name): no frames") }
                }
                let captures = sessions.capturers()
                for c in captures {
                    c.video.capture(PixelBufferView(frame.view), timeStampNs: Int64(n) * 33_333_333)
                }
                if !captures.isEmpty { framesSent.add(1, ordering: .relaxed) }
                n += 1
            }
            while UInt64(chunks) * 20_000_000 <= now {
                let rate = audio.sampleRate, channels = audio.channels
                let want = rate / 50
                if floats.count < want * channels {
                    floats = [Float](repeating: 0, count: want * channels)
                    pcm = [Int16](repeating: 0, count: want * channels)
                }
                var got = try floats.withUnsafeMutableBufferPointer {
                    try audio.read(into: UnsafeMutableBufferPointer(rebasing: $0[0..<(want * channels)]))
                }
                if got == 0 {
                    audio = try makeAudio()
                    got = try floats.withUnsafeMutableBufferPointer {
                        try audio.read(into: UnsafeMutableBufferPointer(rebasing: $0[0..<(want * channels)]))
                    }
                }
                for i in 0..<(got * channels) { pcm[i] = Int16(max(-1, min(1, floats[i])) * 32767) }
                for c in sessions.capturers() {
                    pcm.withUnsafeBufferPointer {
                        c.audio.capture(
                            UnsafeBufferPointer(rebasing: $0[0..<(got * channels)]), sampleRate: rate, channels: channels,
                            timeStampNs: Int64(chunks) * 20_000_000)
                    }
                }
                chunks += 1
            }
            usleep(2_000)
        }
    }

    func stop() {
        stopping.store(true, ordering: .relaxed)
        done.wait()
    }
}

/// The sessions the endpoint made, the HTTP routes, and the recordings of the first session.
/// Thread rule: `handle` from any number of connection threads at once; the rest from any
/// thread. Cost: per session a `PeerConnection` (a socket, encoder and receive threads).
final class WebRTCSessions: Sendable {
    /// One call: its connection, the capturers the source feeds, who made it and when.
    struct Session {
        let connection: PeerConnection
        let video: BufferCapturer
        let audio: AudioBufferCapturer
        var client = ""
        var created = MonotonicTime.now
        var connected = false
    }

    private let configuration: PeerConnectionConfiguration
    private let maxSessions: Int
    private let perClient: Int
    private let connectTimeout: Duration
    /// Who may use the endpoints; set once the port is known (requests before get 503).
    let policy = Mutex<HTTPAccessPolicy?>(nil)
    private let quiet: Bool
    private let sessions = Mutex<[String: Session]>([:])
    /// Sessions made so far.
    let total = Atomic<Int>(0)
    /// Video frames the sessions that ended had encoded.
    let framesEncoded = Atomic<Int>(0)
    private let recorder: WebRTCRecorder?
    private let recorderTaken = Atomic<Bool>(false)

    init(
        configuration: PeerConnectionConfiguration, maxSessions: Int, perClient: Int, connectTimeout: Duration,
        videoPath: String?, audioPath: String?, quiet: Bool
    ) {
        self.configuration = configuration
        self.maxSessions = maxSessions
        self.perClient = perClient
        self.connectTimeout = connectTimeout
        self.quiet = quiet
        recorder = videoPath == nil && audioPath == nil ? nil : WebRTCRecorder(videoPath: videoPath, audioPath: audioPath)
    }

    /// The capturers of the connected sessions.
    func capturers() -> [(video: BufferCapturer, audio: AudioBufferCapturer)] {
        sessions.withLock { $0.values.filter { $0.connection.state == .connected }.map { ($0.video, $0.audio) } }
    }

    /// One line for the periodic progress.
    func progressLine(sentFrames: Int) -> String {
        let states = sessions.withLock { $0.values.map(\.connection.state.rawValue) }
        var line = "\(states.count) session(s) [\(states.joined(separator: ", "))], \(sentFrames) frames sent"
        if let recorder { line += ", " + recorder.summary }
        return line
    }

    /// Routes one request: the page, the endpoints, a session's Location. The access policy
    /// comes first: the Host for everything, the token and the origin for the endpoints.
    func handle(_ request: HTTPRequest) -> HTTPResponse {
        guard let policy = policy.withLock({ $0 }) else { return .text(503, "starting") }
        let endpoint = ["/session", "/whep"].contains { request.path == $0 || request.path.hasPrefix($0 + "/") }
        if let refusal = policy.refusal(request, needsToken: endpoint && request.method != "OPTIONS") { return refusal }
        var response = route(request, policy: policy)
        if endpoint, case .allowed(let origin) = policy.origin(request.headers["origin"]),
            !response.headers.contains(where: { $0.0 == "Access-Control-Allow-Origin" })
        {
            response.headers += policy.corsFields(origin: origin)
        }
        return response
    }

    private func route(_ request: HTTPRequest, policy: HTTPAccessPolicy) -> HTTPResponse {
        switch request.path {
        case "/", "/index.html":
            guard request.method == "GET" || request.method == "HEAD" else {
                return .text(405, "use GET", headers: [("Allow", "GET, HEAD")])
            }
            return HTTPResponse(
                status: 200, headers: [("Content-Type", "text/html; charset=utf-8")],
                body: request.method == "HEAD" ? [] : Array(WebRTCPage.html.utf8))
        case "/session", "/whep":
            if request.method == "OPTIONS" {
                return policy.preflight(request, methods: "POST, OPTIONS", extra: [("Accept-Post", "application/sdp")])
            }
            guard request.method == "POST" else { return .text(405, "POST an SDP offer", headers: [("Allow", "POST, OPTIONS")]) }
            let type = request.headers["content-type"]?.split(separator: ";").first?.trimmingWhitespace
            guard type?.lowercased() == "application/sdp" else {
                return .text(415, "the offer must be Content-Type: application/sdp")
            }
            return offer(request.body, client: request.client, path: request.path)
        default:
            guard let prefix = ["/session/", "/whep/"].first(where: { request.path.hasPrefix($0) }) else {
                return .text(404, "not found")
            }
            let id = String(request.path.dropFirst(prefix.count))
            if request.method == "OPTIONS" { return policy.preflight(request, methods: "DELETE, OPTIONS") }
            guard request.method == "DELETE" else { return .text(405, "DELETE ends the session", headers: [("Allow", "DELETE")]) }
            guard let session = sessions.withLock({ $0.removeValue(forKey: id) }) else { return .text(404, "no such session") }
            end(session)
            if !quiet { Console.error("webrtc: session \(id) ended by the peer") }
            return HTTPResponse(status: 200)
        }
    }

    /// Ends the sessions that failed or closed, and those not connected within the connect
    /// timeout, freeing their places. Called from the main loop.
    func expire() {
        let now = MonotonicTime.now
        let gone = sessions.withLock { s -> [(String, Session)] in
            var gone: [(String, Session)] = []
            for (id, session) in s {
                let state = session.connection.state
                if state == .connected {
                    s[id]?.connected = true
                } else if state == .failed || state == .closed || (!session.connected && now - session.created >= connectTimeout)
                {
                    gone.append((id, session))
                    s.removeValue(forKey: id)
                }
            }
            return gone
        }
        for (id, session) in gone {
            end(session)
            if !quiet { Console.error("webrtc: session \(id) expired (\(session.connection.state.rawValue))") }
        }
    }

    /// Answers an offer posted to `path`: a new session, or 400 (unusable offer), 503 (too many
    /// sessions), 429 (too many for this client).
    private func offer(_ body: [UInt8], client: String, path: String) -> HTTPResponse {
        guard let text = String(bytes: body, encoding: .utf8), !text.isEmpty else {
            return .text(400, "the offer is empty or not UTF-8 text")
        }
        let offer: JSEPSessionDescription
        do { offer = try JSEPSessionDescription(parsing: text, type: .offer) } catch {
            return .text(400, "the offer cannot be parsed: \(error)")
        }
        // Sessions that failed or closed free their place.
        let dead = sessions.withLock { s in
            let gone = s.filter { [.failed, .closed].contains($0.value.connection.state) }
            for key in gone.keys { s.removeValue(forKey: key) }
            return Array(gone.values)
        }
        for session in dead { session.connection.close() }
        // Refused before a connection is made; checked again when it is added (offers race).
        if sessions.withLock({ $0.count }) >= maxSessions { return .text(503, "\(maxSessions) sessions are open already") }
        if sessions.withLock({ $0.values.count { $0.client == client } }) >= perClient {
            return .text(429, "this client holds \(perClient) sessions already", headers: [("Retry-After", "5")])
        }
        let id = UUID().uuidString.lowercased()
        // The recorder goes to the first call to /session that gets this far, once.
        let first =
            path == "/session" && recorderTaken.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged
        let made: Result<(Session, String), PeerConnectionError> = Self.wait {
            do {
                let connection = try PeerConnection(configuration: self.configuration)
                let video = try connection.addVideoTrack(codec: .vp8)
                let audio = try connection.addAudioTrack()
                if first, let recorder = self.recorder {
                    connection.videoRenderer = recorder
                    connection.audioSink = recorder.audioSink
                }
                connection.onStateChange = { [quiet = self.quiet] state in
                    if !quiet { Console.error("webrtc: session \(id) \(state.rawValue)") }
                }
                do {
                    try await connection.setRemoteDescription(offer)
                    let answer = try await connection.createAnswer()
                    return .success((Session(connection: connection, video: video, audio: audio), answer.sdp))
                } catch {
                    connection.close()
                    throw error
                }
            } catch let error as PeerConnectionError {
                return .failure(error)
            } catch {
                return .failure(.setup("\(error)"))
            }
        }
        switch made {
        case .failure(let error):
            return .text(400, "cannot answer the offer: \(error)")
        case .success(let (session, answer)):
            var session = session
            session.client = client
            let accepted = sessions.withLock { s -> Int? in
                guard s.count < maxSessions else { return 503 }
                guard s.values.count(where: { $0.client == client }) < perClient else { return 429 }
                s[id] = session
                return nil
            }
            if let refused = accepted {
                session.connection.close()
                return .text(
                    refused,
                    refused == 503
                        ? "\(maxSessions) sessions are open already" : "this client holds \(perClient) sessions already")
            }
            total.add(1, ordering: .relaxed)
            if !quiet { Console.error("webrtc: session \(id) answered") }
            return HTTPResponse(
                status: 201, headers: [("Content-Type", "application/sdp"), ("Location", "\(path)/\(id)")],
                body: Array(answer.utf8))
        }
    }

    /// Runs `body` as a task and blocks this (connection) thread until it returns.
    private static func wait<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
        let result = Mutex<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let value = await body()
            result.withLock { $0 = value }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }

    /// Closes every session.
    func closeAll() {
        let all = sessions.withLock { s in
            let all = Array(s.values)
            s.removeAll()
            return all
        }
        for session in all { end(session) }
    }

    /// Counts what the session encoded and closes it.
    private func end(_ session: Session) {
        framesEncoded.add(Int(session.connection.videoSendStatistics?.outbound.framesEncoded ?? 0), ordering: .relaxed)
        session.connection.close()
    }

    /// Finishes the recordings; returns each file written with what it holds.
    func finishRecordings() throws -> [(String, String)] { try recorder?.finish() ?? [] }
}

/// Records one session's incoming media: video re-encoded to VP8 IVF at the size of the first
/// frame, audio re-encoded to Ogg Opus (both through the receive-side recorders the demo uses).
/// Thread rule: `render` on the receive pipeline's thread, the audio sink on the playout
/// thread, `finish` after the connection closed. Cost: a VP8 and an Opus encoder.
/// Sendable: the recorder and the first failure live in a `Locked` box, `frames` is atomic, the
/// rest are `let`s.
final class WebRTCRecorder: VideoRenderer, @unchecked Sendable {
    private struct State {
        var video: RecordingRenderer?
        var failure: Error?
    }
    private let videoPath: String?
    private let state = Locked(State())
    let audioSink: WebRTCAudioRecorder?
    private let frames = Atomic<Int>(0)

    init(videoPath: String?, audioPath: String?) {
        self.videoPath = videoPath
        audioSink = audioPath.map { WebRTCAudioRecorder(path: $0) }
    }

    var summary: String {
        "\(frames.load(ordering: .relaxed)) frames received" + (audioSink.map { ", \($0.summary)" } ?? "")
    }

    func render(_ frame: DecodedVideoFrame) {
        frames.add(1, ordering: .relaxed)
        guard let videoPath else { return }
        state.withLock { state in
            guard state.failure == nil else { return }
            if state.video == nil {
                do {
                    state.video = try RecordingRenderer(
                        path: videoPath, codec: .vp8, width: frame.view.width, height: frame.view.height, onVideo: { _ in })
                } catch {
                    state.failure = error
                    return
                }
            }
            state.video?.render(frame)
        }
    }

    func finish() throws -> [(String, String)] {
        var written: [(String, String)] = []
        let (video, failure) = state.withLock { ($0.video, $0.failure) }
        var firstError = failure
        if let video {
            do {
                if let path = try video.finish() { written.append((path, "\(video.frames) VP8 frames")) }
            } catch { firstError = firstError ?? error }
        }
        if let audioSink {
            do {
                if let entry = try audioSink.finish() { written.append(entry) }
            } catch { firstError = firstError ?? error }
        }
        if let firstError { throw InputError(description: "recording failed: \(firstError)") }
        if let videoPath, video == nil { Console.error("webrtc: no video arrived; \(videoPath) not written") }
        return written
    }
}

/// Records played PCM to Ogg Opus, made at the first block (so that no file is started when no
/// audio arrives). Thread rule: `play` on the playout thread; `finish` after it stopped.
/// Cost: an Opus encoder.
/// Sendable: the sink, the failure and the count live in a `Locked` box; `path` is a `let`.
final class WebRTCAudioRecorder: AudioSink, @unchecked Sendable {
    private struct State {
        var sink: RecordingAudioSink?
        var failure: Error?
        var samples = 0
    }
    private let path: String
    private let state = Locked(State())

    init(path: String) { self.path = path }

    var summary: String { "\((Double(state.withLock { $0.samples }) / 48_000).fixed(1)) s of audio received" }

    func play(_ samples: Span<Int16>, sampleRate: Int, channels: Int) {
        state.withLock { state in
            guard state.failure == nil else { return }
            if state.sink == nil {
                do { state.sink = try RecordingAudioSink(path: path, keepsPlayed: false) } catch {
                    state.failure = error
                    return
                }
            }
            state.samples += samples.count / max(1, channels)
            state.sink?.play(samples, sampleRate: sampleRate, channels: channels)
        }
    }

    func finish() throws -> (String, String)? {
        try state.withLock { (state) throws -> (String, String)? in
            if let failure = state.failure { throw failure }
            guard let sink = state.sink, let written = try sink.finish() else {
                Console.error("webrtc: no audio arrived; \(path) not written")
                return nil
            }
            return (written, "\((Double(state.samples) / 48_000).fixed(1)) s of Opus")
        }
    }
}
