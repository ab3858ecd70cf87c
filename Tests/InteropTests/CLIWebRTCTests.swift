// `revue-media webrtc` run as a process: its HTTP server refuses oversize, malformed and
// unknown requests with the right status and keeps serving (a real offer from a PeerConnection
// afterwards is answered and connects); headless Chromium loads the served page, calls Revue
// through the endpoint and media flows both ways: Revue's recording of the fake camera decodes
// and is not black, and the page decodes nearly every frame Revue sent.
import Foundation
import MediaCore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Raw HTTP over TCP to the server under test: what a misbehaving client sends.
enum RawHTTP {
    /// A connected socket, or -1.
    static func connect(_ port: UInt16) -> Int32 {
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = port.bigEndian
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        let r = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if r != 0 {
            close(s)
            return -1
        }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return s
    }

    /// Sends `bytes` and reads the response until the server closes; (status, headers, body).
    static func exchange(_ port: UInt16, _ bytes: [UInt8]) throws -> (status: Int, head: String, body: String) {
        let s = connect(port)
        guard s >= 0 else { throw JSONLinePeer.Failure(description: "cannot connect to 127.0.0.1:\(port)") }
        defer { close(s) }
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(s, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { break }
            sent += n
        }
        var response: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(s, &chunk, chunk.count, 0)
            if n <= 0 { break }
            response += chunk[0..<n]
        }
        let text = String(decoding: response, as: UTF8.self)
        let parts = text.components(separatedBy: "\r\n\r\n")
        let head = parts.first ?? ""
        let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
        return (status, head, parts.dropFirst().joined(separator: "\r\n\r\n"))
    }

    /// A request with the given method, path, header lines and body (Content-Length added).
    static func request(_ method: String, _ path: String, headers: [String] = [], body: String? = nil) -> [UInt8] {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for h in headers { head += h + "\r\n" }
        if let body { head += "Content-Length: \(body.utf8.count)\r\n" }
        return Array((head + "\r\n" + (body ?? "")).utf8)
    }

    /// Waits until the server accepts connections.
    static func waitForServer(_ port: UInt16, timeout: Double = 20) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let s = connect(port)
            if s >= 0 {
                close(s)
                return true
            }
            usleep(50_000)
        }
        return false
    }
}

@Suite(.serialized)
struct CLIWebRTCTests {
    @Test func serverRefusesBadRequestsAndKeepsServing() async throws {
        let dir = InteropTempDir()
        defer { dir.remove() }
        let port = UInt16(cliFreePort())
        let server = try ToolProcess(
            CLIBinary.path, ["webrtc", "--port", "\(port)", "--seconds", "90", "--max-sessions", "1"], cwd: dir.path)
        var stopped = false
        defer { if !stopped { server.signal(SIGKILL); _ = server.wait(timeout: 10) } }
        try #require(RawHTTP.waitForServer(port), "the server did not start")

        // A client that sends half a request and stalls holds one connection until the read
        // timeout; everything below is served meanwhile.
        let stalled = RawHTTP.connect(port)
        defer { close(stalled) }
        _ = Array("GET / HTTP/1.1\r\n".utf8).withUnsafeBytes { send(stalled, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }

        let page = try RawHTTP.exchange(port, RawHTTP.request("GET", "/"))
        #expect(page.status == 200 && page.body.contains("<video") && page.body.contains("/session"), "\(page.head)")
        let checks: [(String, [UInt8], [Int])] = [
            (
                "a body over 64 KiB",
                RawHTTP.request("POST", "/session", headers: ["Content-Type: application/sdp", "Content-Length: 70000"]), [413]
            ),
            (
                "a 70 000-byte body, sent",
                RawHTTP.request(
                    "POST", "/session", headers: ["Content-Type: application/sdp"], body: String(repeating: "a", count: 70_000)),
                [413]
            ),
            ("an unknown method", RawHTTP.request("BREW", "/"), [405]),
            ("a method the endpoint does not take", RawHTTP.request("PATCH", "/session", body: ""), [405]),
            ("GET on the endpoint", RawHTTP.request("GET", "/session"), [405]),
            ("garbage", Array("\u{1}\u{2}\u{3} hello there\r\n\r\n".utf8), [400]),
            ("no HTTP version", Array("GET /\r\n\r\n".utf8), [400]),
            ("a header line without a colon", RawHTTP.request("GET", "/", headers: ["nonsense"]), [400]),
            ("100 header fields", RawHTTP.request("GET", "/", headers: (0..<100).map { "X-Field-\($0): 1" }), [400, 431]),
            (
                "a 10 KiB header field",
                RawHTTP.request("GET", "/", headers: ["X-Big: " + String(repeating: "a", count: 10_000)]), [431]
            ),
            (
                "a POST without Content-Length", Array("POST /session HTTP/1.1\r\nContent-Type: application/sdp\r\n\r\n".utf8),
                [411]
            ),
            ("a negative Content-Length", RawHTTP.request("POST", "/session", headers: ["Content-Length: -5"]), [400]),
            ("chunked encoding", RawHTTP.request("POST", "/session", headers: ["Transfer-Encoding: chunked"]), [400, 501]),
            (
                "an offer that is not SDP",
                RawHTTP.request("POST", "/session", headers: ["Content-Type: application/sdp"], body: "hello"), [400]
            ),
            (
                "an offer as text/plain",
                RawHTTP.request("POST", "/session", headers: ["Content-Type: text/plain"], body: "v=0\r\n"), [415]
            ),
            ("an unknown path", RawHTTP.request("GET", "/nowhere"), [404]),
            ("DELETE of no session", RawHTTP.request("DELETE", "/session/none"), [404]),
        ]
        for (label, bytes, statuses) in checks {
            let r = try RawHTTP.exchange(port, bytes)
            #expect(statuses.contains(r.status), "\(label): got \(r.status) \(r.head)")
        }
        // A client that connects and closes at once.
        close(RawHTTP.connect(port))

        // A real offer afterwards: answered with 201 and a Location, and the call connects.
        var configuration = PeerConnectionConfiguration()
        configuration.videoWidth = 320
        configuration.videoHeight = 240
        let connection = try PeerConnection(configuration: configuration)
        defer { connection.close() }
        let video = try connection.addVideoTrack()
        let audio = try connection.addAudioTrack()
        let offer = try await connection.createOffer()
        let answer = try RawHTTP.exchange(
            port, RawHTTP.request("POST", "/session", headers: ["Content-Type: application/sdp"], body: offer.sdp))
        try #require(answer.status == 201, "\(answer.head)\n\(answer.body)")
        #expect(answer.head.lowercased().contains("content-type: application/sdp"), "\(answer.head)")
        let location = try #require(
            answer.head.components(separatedBy: "\r\n").first { $0.lowercased().hasPrefix("location:") }?
                .dropFirst("location:".count).trimmingCharacters(in: .whitespaces))
        try await connection.setRemoteDescription(try JSEPSessionDescription(parsing: answer.body, type: .answer))
        let state = await connection.waitUntilSettled(timeout: 30)
        #expect(state == .connected, "\(connection.error.map { "\($0)" } ?? "")")
        // One session at most (--max-sessions 1): a second offer gets 503.
        let second = try PeerConnection(configuration: configuration)
        defer { second.close() }
        _ = try second.addVideoTrack()
        let secondOffer = try await second.createOffer()
        let busy = try RawHTTP.exchange(
            port, RawHTTP.request("POST", "/session", headers: ["Content-Type: application/sdp"], body: secondOffer.sdp))
        #expect(busy.status == 503, "\(busy.head)")
        _ = (video, audio)

        let deleted = try RawHTTP.exchange(port, RawHTTP.request("DELETE", location))
        #expect(deleted.status == 200, "\(deleted.head)")
        let again = try RawHTTP.exchange(port, RawHTTP.request("DELETE", location))
        #expect(again.status == 404, "\(again.head)")

        server.signal(SIGINT)
        let run = server.wait(timeout: 30)
        stopped = true
        #expect(run.status == 0 && !run.timedOut, "\(run.stderr)")
        #expect(run.stdout.contains("1 sessions"), "\(run.stdout)")
        print("CLIWebRTCTests server: \(run.stdout)")
    }

    /// The recorded IVF decoded: frames, those that are not black (luma span over 40), size.
    static func decodeRecording(_ path: String) throws -> (frames: Int, lit: Int, width: Int, height: Int) {
        let reader = try IVFReader(path: path)
        let decoder = try VPXDecoder(codec: .vp8)
        var buffer: [UInt8] = []
        var frames = 0, lit = 0, width = 0, height = 0
        while try reader.readFrame(into: &buffer) != nil {
            let span: Int? = try buffer.withUnsafeBytes { bytes in
                try decoder.decode(bytes) { view -> Int in
                    width = view.width
                    height = view.height
                    var low = 255, high = 0
                    for r in stride(from: 0, to: view.height, by: 4) {
                        for c in stride(from: 0, to: view.width, by: 4) {
                            let y = Int(view.y[r * view.strideY + c])
                            low = min(low, y)
                            high = max(high, y)
                        }
                    }
                    return high - low
                }
            }
            if let span {
                frames += 1
                if span > 40 { lit += 1 }
            }
        }
        return (frames, lit, width, height)
    }

    @Test func chromiumCallsThroughThePage() async throws {
        let dir = InteropTempDir()
        defer { dir.remove() }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium") else {
            throw JSONLinePeer.Failure(description: "chromium is not installed: run scripts/install-deps")
        }
        let port = UInt16(cliFreePort())
        let videoOut = dir.file("from-chromium.ivf"), audioOut = dir.file("from-chromium.ogg")
        let server = try ToolProcess(
            CLIBinary.path,
            [
                "webrtc", "--port", "\(port)", "--seconds", "120", "--size", "320x240", "--bitrate", "800k",
                "--record-video", videoOut, "--record-audio", audioOut,
            ], cwd: dir.path)
        var stopped = false
        defer { if !stopped { server.signal(SIGKILL); _ = server.wait(timeout: 10) } }
        try #require(RawHTTP.waitForServer(port), "the server did not start")

        // The page calls Revue as soon as it has loaded.
        let peer = try JSONLinePeer(
            name: "chromium", executable: "/usr/bin/python3",
            arguments: [JSEPInteropTests.peers + "/chromium_peer.py", dir.file("profile"), "http://127.0.0.1:\(port)/"])
        defer { peer.stop() }
        func stats() -> [String: Any] {
            guard let text = try? peer.call(JSEPInteropTests.js("mediaStats"))["sdp"],
                let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
            else { return [:] }
            return object
        }
        func number(_ s: [String: Any], _ key: String) -> Int { (s[key] as? NSNumber)?.intValue ?? 0 }
        let connected = await waitFor(timeout: 60) { stats()["connection"] as? String == "connected" }
        try #require(connected, "the page did not connect: \(stats())")
        // About 8 s of media each way: 150 frames from Chromium's camera and 200 decoded from Revue.
        _ = await waitFor(timeout: 90) {
            let s = stats()
            return number(s, "framesSent") >= 150 && number(s, "framesDecoded") >= 200
        }
        _ = try peer.call(JSEPInteropTests.js("mediaStopSending"))
        try? await Task.sleep(nanoseconds: 1_000_000_000)
        let final = stats()
        let hungUp = try peer.call(JSEPInteropTests.js("hangup"))["sdp"]
        #expect(hungUp == "closed", "hangup: \(hungUp ?? "?")")

        server.signal(SIGINT)
        let run = server.wait(timeout: 60)
        stopped = true
        #expect(run.status == 0 && !run.timedOut, "\(run.stderr)")
        let encodedByRevue =
            Int(
                run.stdout.components(separatedBy: ", ").first { $0.hasSuffix("frames encoded") }?
                    .split(separator: " ").first ?? "") ?? 0
        let sentByChromium = number(final, "framesSent"), decodedByChromium = number(final, "framesDecoded")
        let recording = try Self.decodeRecording(videoOut)
        let audioBytes = (try? FileManager.default.attributesOfItem(atPath: audioOut)[.size] as? Int) ?? 0
        print(
            "CLIWebRTCTests Chromium: Chromium→Revue \(recording.frames)/\(sentByChromium) frames recorded \(recording.width)x\(recording.height), \(recording.lit) lit, Ogg \(audioBytes) bytes; Revue→Chromium \(decodedByChromium)/\(encodedByRevue) decoded; page \(final); Revue: \(run.stdout)"
        )
        #expect(sentByChromium >= 150, "Chromium sent \(sentByChromium) frames")
        #expect(
            recording.frames >= sentByChromium * 9 / 10, "recorded \(recording.frames) of Chromium's \(sentByChromium) frames")
        #expect(recording.lit >= recording.frames * 9 / 10, "\(recording.lit) of \(recording.frames) recorded frames not black")
        #expect(audioBytes > 1000, "the Ogg recording: \(audioBytes) bytes")
        #expect(final["receivedCodec"] as? String == "video/VP8", "\(final)")
        #expect(((final["totalAudioEnergy"] as? NSNumber)?.doubleValue ?? 0) > 0, "Revue's audio in the page: \(final)")
        #expect(encodedByRevue > 0)
        #expect(
            decodedByChromium >= encodedByRevue * 95 / 100, "Chromium decoded \(decodedByChromium) of Revue's \(encodedByRevue)")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix(".") }
        #expect(leftovers.isEmpty, "temporary files left behind: \(leftovers)")
    }
}
