// The WHIP and WHEP clients against real endpoints on loopback, written with `import RevueMedia`
// alone: a client publishes the pattern and a tone to a `WHIPServer` with a token and the server
// decodes them (PSNR against the pattern); a WHEP client plays a `WHIPServer` and `revue-media
// webrtc`'s /whep; servers that answer garbage, too much, too slowly or never give typed errors;
// sessions that never connect or outlive their lifetime are ended and free their client's
// place; stalled and trickling HTTP clients are cut off while a well-behaved one is served.
// Real time: runs in an e2e lane (scripts/test).
import Foundation
import RevueMedia
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP server on 127.0.0.1 that reads a request's head and answers with `respond` (which
/// writes whatever it likes to the socket and returns), one connection at a time.
final class CannedServer: @unchecked Sendable {
    // Sendable: `listener` is fixed; `stopping` and `requests` are atomic.
    let listener: Int32
    let port: UInt16
    let stopping = Atomic<Bool>(false)
    let requests = Atomic<Int>(0)
    let done = DispatchSemaphore(value: 0)

    init(_ respond: @escaping @Sendable (Int32) -> Void) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        listener = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard ok else { throw JSONLineProcess.Failure(description: "canned server: \(errno)") }
        port = UInt16(bigEndian: address.sin_port)
        Thread { [self] in
            defer { done.signal() }
            while !stopping.load(ordering: .relaxed) {
                var p = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
                guard poll(&p, 1, 100) > 0 else { continue }
                let c = accept(listener, nil, nil)
                guard c >= 0 else { continue }
                requests.add(1, ordering: .relaxed)
                var timeout = timeval(tv_sec: 5, tv_usec: 0)
                setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                var head = [UInt8]()
                var byte: UInt8 = 0
                while !head.suffix(4).elementsEqual([13, 10, 13, 10]), head.count < 65_536, recv(c, &byte, 1, 0) == 1 {
                    head.append(byte)
                }
                respond(c)
                shutdown(c, Int32(SHUT_WR))
                usleep(50_000)
                close(c)
            }
        }.start()
    }

    /// Writes `text` to `socket`, ignoring a peer that went away.
    static func write(_ socket: Int32, _ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return }
            sent += n
        }
    }

    func stop() {
        stopping.store(true, ordering: .relaxed)
        done.wait()
        close(listener)
    }
}

@Suite(.serialized)
struct WHIPClientTests {
    static let width = 320, height = 240

    static func configuration(gathering: Duration = .milliseconds(300), loopback: Bool = true) -> RTCConfiguration {
        var c = RTCConfiguration()
        // revue-media webrtc offers its interface addresses (it listens on all of them).
        c.localAddress = loopback ? "127.0.0.1" : "0.0.0.0"
        c.gatheringWait = gathering
        c.connectTimeout = .seconds(20)
        c.videoWidth = width
        c.videoHeight = height
        c.videoBitrate = 800_000
        return c
    }

    @Test func aWHIPClientPublishesWithATokenAndTheServerDecodesThePattern() async throws {
        let probe = MediaProbe()
        let ended = Mutex<[String]>([])
        var options = WHIPServerOptions()
        options.tokens = ["publish-6c1d0e"]
        let server = try WHIPServer(options: options) { _ in
            let pc = try RTCPeerConnection(configuration: Self.configuration())
            pc.remoteVideoRenderer = probe
            pc.remoteAudioSink = probe
            return pc
        } end: { id in
            ended.withLock { $0.append(id) }
        }
        defer { server.stop() }
        let url = "http://127.0.0.1:\(server.port)/whip"

        // Without the token, and with a wrong one: a typed refusal, and no session.
        for token in [nil, "publish-6c1d0f"] as [String?] {
            let stranger = try RTCPeerConnection(configuration: Self.configuration())
            defer { stranger.close() }
            _ = try stranger.addTransceiver(.video, direction: .sendonly)
            var wrong = WHIPClientOptions()
            wrong.token = token
            do {
                _ = try await WHIPClient.publish(stranger, to: url, options: wrong)
                Issue.record("published with token \(token ?? "(none)")")
            } catch {
                guard case .unauthorized(401, _) = error else { throw error }
            }
        }
        #expect(server.sessionCount == 0)

        let client = try RTCPeerConnection(configuration: Self.configuration())
        defer { client.close() }
        let video = try client.addTransceiver(.video, direction: .sendonly)
        let audio = try client.addTransceiver(.audio, direction: .sendonly)
        let feeder = PatternFeeder(
            video: video.videoCapturer, audio: audio.audioCapturer, width: Self.width, height: Self.height, tone: 440)
        feeder.start()
        defer { feeder.stop() }
        var clientOptions = WHIPClientOptions()
        clientOptions.token = "publish-6c1d0e"
        let session = try await WHIPClient.publish(client, to: url, options: clientOptions)
        #expect(session.resourceURL.hasPrefix(url + "/"), "\(session.resourceURL)")
        #expect(server.sessionCount == 1)
        let arrived = await waitFor(timeout: 30) { probe.video.withLock { $0.identified } >= 90 }
        let v = probe.video.withLock { $0 }, a = probe.audio.withLock { $0 }
        print(
            "WHIPClientTests publish: \(v.frames) frames, \(v.identified) identified, PSNR mean \(v.psnrMean) dB, audio RMS \(a.rms)"
        )
        #expect(arrived, "\(v.identified) frames identified; client \(client.connectionState)")
        #expect(v.identified >= v.frames * 9 / 10 && v.psnrMean >= 30, "PSNR \(v.psnrMean) dB")
        #expect(a.crossingsPerSecond > 800 && a.crossingsPerSecond < 960, "\(a.crossingsPerSecond) crossings/s")

        // close: the connection closes and the DELETE ends the session on the server.
        try await session.close()
        #expect(client.connectionState == .closed)
        #expect(server.sessionCount == 0)
        #expect(ended.withLock { $0.count } == 1)
        // A second DELETE finds nothing: a typed 404.
        do {
            try await session.close()
            Issue.record("a deleted session was deleted again")
        } catch {
            guard case .rejected(404, _) = error else { throw error }
        }
    }

    /// Runs `command` with `arguments` and waits; throws with its output when it fails.
    static func run(_ command: String, _ arguments: [String], in directory: String) throws {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: command)
        p.arguments = arguments
        p.currentDirectoryURL = URL(fileURLWithPath: directory)
        let errors = Pipe()
        p.standardError = errors
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            throw JSONLineProcess.Failure(description: "\(command) \(arguments): \(text.suffix(2000))")
        }
    }

    /// A TLS-terminating proxy on 127.0.0.1:`port` in front of 127.0.0.1:`backend` (Python's
    /// ssl module), as a WHIP server is deployed beyond loopback. Arguments: certificate, key,
    /// port, backend port. Prints "ready" once it listens.
    static let proxyScript = """
        import socket, ssl, sys, threading
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[1], sys.argv[2])
        backend = int(sys.argv[4])
        ls = socket.socket()
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(('127.0.0.1', int(sys.argv[3])))
        ls.listen(16)
        print('ready', flush=True)
        def pipe(a, b):
            try:
                while True:
                    d = a.recv(65536)
                    if not d:
                        break
                    b.sendall(d)
            except OSError:
                pass
        def serve(c):
            try:
                t = ctx.wrap_socket(c, server_side=True)
            except (ssl.SSLError, OSError):
                c.close()
                return
            u = socket.create_connection(('127.0.0.1', backend))
            threading.Thread(target=pipe, args=(t, u), daemon=True).start()
            pipe(u, t)
            t.close()
            u.close()
        while True:
            c, _ = ls.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()
        """

    @Test func aWHIPClientPublishesOverHTTPSThroughATLSProxy() async throws {
        let directory = NSTemporaryDirectory() + "whip-tls-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // A certificate authority of the test's own and a certificate for localhost signed by it.
        let openssl = "/usr/bin/openssl"
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n".write(
            toFile: directory + "/server.ext", atomically: true, encoding: .utf8)
        try Self.run(
            openssl,
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key",
                "-out", "ca.pem", "-days", "2", "-subj", "/CN=WHIP test CA",
            ], in: directory)
        try Self.run(
            openssl,
            [
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "server.key", "-out",
                "server.csr", "-subj", "/CN=localhost",
            ], in: directory)
        try Self.run(
            openssl,
            [
                "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem",
                "-days", "2", "-extfile", "server.ext",
            ], in: directory)
        try Self.proxyScript.write(toFile: directory + "/proxy.py", atomically: true, encoding: .utf8)

        // The proxy's port, chosen first: its name and port are what clients put in Host, and the
        // server lists exactly that.
        let free = try CannedServer { _ in }
        let proxyPort = free.port
        free.stop()
        let probe = MediaProbe()
        var options = WHIPServerOptions()
        options.tokens = ["tls-token-51"]
        options.allowedHosts = ["localhost:\(proxyPort)"]
        let server = try WHIPServer(options: options) { _ in
            let pc = try RTCPeerConnection(configuration: Self.configuration())
            pc.remoteVideoRenderer = probe
            return pc
        }
        defer { server.stop() }
        let proxy = Process()
        let proxyOut = Pipe()
        proxy.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        proxy.arguments = [
            "python3", directory + "/proxy.py", directory + "/server.pem", directory + "/server.key", "\(proxyPort)",
            "\(server.port)",
        ]
        proxy.standardOutput = proxyOut
        try proxy.run()
        defer {
            // SIGKILL: the test process's children may inherit SIGTERM ignored.
            kill(proxy.processIdentifier, SIGKILL)
            proxy.waitUntilExit()
        }
        let ready = proxyOut.fileHandleForReading.availableData
        try #require(String(decoding: ready, as: UTF8.self).hasPrefix("ready"), "the TLS proxy did not start")
        let url = "https://localhost:\(proxyPort)/whip"

        // Straight to the server with its own address in Host: not a name it answers to.
        let direct = try LoopbackHTTP.exchange(
            LoopbackHTTP.request(
                "POST", "/whip", host: "127.0.0.1:\(server.port)",
                headers: ["Authorization: Bearer tls-token-51", "Content-Type: application/sdp"], body: "v=0\r\n"),
            port: server.port)
        #expect(direct.status == 421)

        var clientOptions = WHIPClientOptions()
        clientOptions.token = "tls-token-51"
        // Without the test's CA the certificate is refused: a typed connection error.
        let untrusting = try RTCPeerConnection(configuration: Self.configuration(gathering: .milliseconds(100)))
        defer { untrusting.close() }
        _ = try untrusting.addTransceiver(.video, direction: .sendonly)
        do {
            _ = try await WHIPClient.publish(untrusting, to: url, options: clientOptions)
            Issue.record("published to a server whose certificate no trusted CA signed")
        } catch {
            guard case .connection(let why) = error, why.contains("certificate") else { throw error }
        }
        #expect(server.sessionCount == 0)

        clientOptions.certificateAuthorityFile = directory + "/ca.pem"
        let client = try RTCPeerConnection(configuration: Self.configuration())
        defer { client.close() }
        let video = try client.addTransceiver(.video, direction: .sendonly)
        let feeder = PatternFeeder(video: video.videoCapturer, audio: nil, width: Self.width, height: Self.height, tone: 440)
        feeder.start()
        defer { feeder.stop() }
        let session = try await WHIPClient.publish(client, to: url, options: clientOptions)
        #expect(session.resourceURL.hasPrefix(url + "/"), "\(session.resourceURL)")
        let arrived = await waitFor(timeout: 30) { probe.video.withLock { $0.identified } >= 60 }
        let v = probe.video.withLock { $0 }
        print("WHIPClientTests HTTPS: \(v.frames) frames, \(v.identified) identified, PSNR mean \(v.psnrMean) dB")
        #expect(arrived && v.psnrMean >= 30, "\(v.identified) frames, PSNR \(v.psnrMean) dB; \(client.connectionState)")
        try await session.close()
        #expect(server.sessionCount == 0)
    }

    @Test func aWHEPClientPlaysAWHIPServerThatSends() async throws {
        let feeders = Mutex<[PatternFeeder]>([])
        defer { for feeder in feeders.withLock({ $0 }) { feeder.stop() } }
        let server = try WHIPServer(path: "/whep") { _ in
            let pc = try RTCPeerConnection(configuration: Self.configuration())
            let video = try pc.addTransceiver(.video, direction: .sendonly)
            let audio = try pc.addTransceiver(.audio, direction: .sendonly)
            let feeder = PatternFeeder(
                video: video.videoCapturer, audio: audio.audioCapturer, width: Self.width, height: Self.height, tone: 660)
            feeder.start()
            feeders.withLock { $0.append(feeder) }
            return pc
        }
        defer { server.stop() }
        let probe = MediaProbe()
        let player = try RTCPeerConnection(configuration: Self.configuration())
        defer { player.close() }
        player.remoteVideoRenderer = probe
        player.remoteAudioSink = probe
        let session = try await WHEPClient.play(player, from: "http://localhost:\(server.port)/whep")
        #expect(player.transceivers.map(\.direction) == [.recvonly, .recvonly])
        let arrived = await waitFor(timeout: 30) { probe.video.withLock { $0.identified } >= 90 }
        let v = probe.video.withLock { $0 }
        print("WHIPClientTests WHEP: \(v.frames) frames, \(v.identified) identified, PSNR mean \(v.psnrMean) dB")
        #expect(arrived && v.psnrMean >= 30, "\(v.identified) frames, PSNR \(v.psnrMean) dB; \(player.connectionState)")
        // The player goes away without a DELETE: its connection closes (close_notify), and the
        // server ends the session and frees its place by itself.
        #expect(session.resourceURL.contains("/whep/"))
        player.close()
        #expect(await waitFor(timeout: 30) { server.sessionCount == 0 }, "a closed session kept its place")
    }

    @Test func aWHEPClientPlaysRevueMediaWebRTC() async throws {
        let binary = try WHIPEchoExampleTests.examplePath().replacingOccurrences(of: "/whip-echo", with: "/revue-media")
        let probe = try CannedServer { _ in }
        let port = probe.port
        probe.stop()
        let cli = Process()
        cli.executableURL = URL(fileURLWithPath: binary)
        cli.arguments = [
            "webrtc", "--port", "\(port)", "--size", "320x240", "--token", "cli-token-93", "--seconds", "120", "-q",
        ]
        cli.standardError = FileHandle.nullDevice
        cli.standardOutput = FileHandle.nullDevice
        try cli.run()
        defer {
            if cli.isRunning { cli.interrupt() }
            cli.waitUntilExit()
        }
        #expect(await waitFor(timeout: 20) { (try? LoopbackHTTP.connect(port)).map { close($0) } != nil })

        // The page and the endpoints refuse a foreign Host; the endpoint wants the token.
        let host = "127.0.0.1:\(port)"
        for target in ["/", "/whep", "/session"] {
            let method = target == "/" ? "GET" : "POST"
            let r = try LoopbackHTTP.exchange(
                LoopbackHTTP.request(method, target, host: "rebound.example:\(port)", headers: ["Content-Type: application/sdp"]),
                port: port)
            #expect(r.status == 421, "\(target): \(r.status)")
        }
        #expect(try LoopbackHTTP.exchange(LoopbackHTTP.request("GET", "/", host: host), port: port).status == 200)
        let anonymous = try LoopbackHTTP.exchange(
            LoopbackHTTP.request("POST", "/whep", host: host, headers: ["Content-Type: application/sdp"], body: "v=0\r\n"),
            port: port)
        #expect(anonymous.status == 401 && anonymous.head.contains("www-authenticate: bearer"))

        final class Counter: VideoRenderer, Sendable {
            let frames = Atomic<Int>(0)
            let sizes = Mutex<Set<String>>([])
            func render(_ frame: DecodedVideoFrame) {
                frames.add(1, ordering: .relaxed)
                sizes.withLock { _ = $0.insert("\(frame.width)x\(frame.height)") }
            }
        }
        let counter = Counter()
        let player = try RTCPeerConnection(configuration: Self.configuration(gathering: .seconds(1), loopback: false))
        defer { player.close() }
        player.remoteVideoRenderer = counter
        var options = WHIPClientOptions()
        options.token = "cli-token-93"
        let session = try await WHEPClient.play(player, from: "http://\(host)/whep", options: options)
        #expect(session.resourceURL.hasPrefix("http://\(host)/whep/"))
        let arrived = await waitFor(timeout: 30) { counter.frames.load(ordering: .relaxed) >= 60 }
        print(
            "WHIPClientTests revue-media /whep: \(counter.frames.load(ordering: .relaxed)) frames \(counter.sizes.withLock { $0 })"
        )
        #expect(arrived, "\(counter.frames.load(ordering: .relaxed)) frames; \(player.connectionState)")
        #expect(counter.sizes.withLock { $0 } == ["320x240"])
        try await session.close()
    }

    @Test func sessionsThatNeverConnectOrOutliveTheirLifetimeEndAndFreeTheirPlace() async throws {
        let ended = Mutex<[String]>([])
        var options = WHIPServerOptions()
        options.maxSessionsPerClient = 1
        options.connectTimeout = .seconds(5)
        let server = try WHIPServer(options: options) { _ in
            try RTCPeerConnection(configuration: Self.configuration())
        } end: { id in
            ended.withLock { $0.append(id) }
        }
        defer { server.stop() }
        let host = "127.0.0.1:\(server.port)"
        // An offer from a connection that is gone before the answer: it can never connect.
        func ghostOffer() async throws -> String {
            let ghost = try RTCPeerConnection(configuration: Self.configuration())
            _ = try ghost.addTransceiver(.video, direction: .sendonly)
            let offer = try await ghost.createOffer()
            try await ghost.setLocalDescription(offer)
            ghost.close()
            return offer.sdp
        }
        let post = { (sdp: String) in
            try LoopbackHTTP.exchange(
                LoopbackHTTP.request("POST", "/whip", host: host, headers: ["Content-Type: application/sdp"], body: sdp),
                port: server.port)
        }
        let first = try post(try await ghostOffer())
        #expect(first.status == 201, "\(first.head)")
        let second = try post(try await ghostOffer())
        #expect(second.status == 429, "the client's one place was not held: \(second.head)")
        // The session never connects: after the connect timeout it is ended and its place freed.
        #expect(await waitFor(timeout: 60) { server.sessionCount == 0 }, "the unconnected session was kept")
        // An expired session's `end` runs in a task of its own, after its place is freed.
        #expect(await waitFor(timeout: 10) { ended.withLock { $0.count } == 1 }, "\(ended.withLock { $0 })")
        #expect(try post(try await ghostOffer()).status == 201)

        // A lifetime ends even sessions the server does not watch.
        var lifetime = WHIPServerOptions()
        lifetime.maxSessionLifetime = .seconds(1)
        let short = try WHIPServer(options: lifetime) { _, _ in
            RTCSessionDescription(type: .answer, sdp: "v=0\r\n")
        } end: { id in
            ended.withLock { $0.append("lifetime \(id)") }
        }
        defer { short.stop() }
        let made = try LoopbackHTTP.exchange(
            LoopbackHTTP.request(
                "POST", "/whip", host: "127.0.0.1:\(short.port)", headers: ["Content-Type: application/sdp"], body: "v=0\r\n"),
            port: short.port)
        #expect(made.status == 201)
        #expect(await waitFor(timeout: 30) { short.sessionCount == 0 })
        #expect(await waitFor(timeout: 10) { ended.withLock { $0.contains { $0.hasPrefix("lifetime ") } } })
    }

    @Test func stalledAndTricklingClientsAreCutOffWhileOthersAreServed() async throws {
        let server = try WHIPServer { _, _ in RTCSessionDescription(type: .answer, sdp: "v=0\r\n") }
        defer { server.stop() }
        let port = server.port
        // One address holds as many connections as it may (half the server's): two send
        // nothing, two half a head.
        var stalled: [Int32] = []
        defer { for s in stalled { close(s) } }
        for i in 0..<(WHIPServer.maxConnections / 2) {
            let s = try LoopbackHTTP.connect(port, from: "127.0.0.2")
            stalled.append(s)
            if i % 2 == 1 { CannedServer.write(s, Array("POST /whip HTTP/1.1\r\nHost: 127.0.0.1\r\n".utf8)) }
        }
        // A further connection from that address is closed unanswered (the server accepts in
        // the order the connections were made, so it counts the four first; no wait needed).
        let extra = try LoopbackHTTP.connect(port, from: "127.0.0.2")
        defer { close(extra) }
        var byte: UInt8 = 0
        #expect(recv(extra, &byte, 1, 0) == 0, "the address got more connections than its share")
        // Another client is served meanwhile.
        let served = try LoopbackHTTP.exchange(
            LoopbackHTTP.request(
                "POST", "/whip", host: "127.0.0.1:\(port)", headers: ["Content-Type: application/sdp"], body: "v=0\r\n"),
            port: port)
        #expect(served.status == 201)
        // The stalled connections are closed by the server (after the idle timeout), at most
        // with a 408; none is kept until the test's 10 s receive timeout.
        for s in stalled {
            var response = [UInt8]()
            var chunk = [UInt8](repeating: 0, count: 512)
            var n = 0
            repeat {
                n = recv(s, &chunk, chunk.count, 0)
                if n > 0 { response += chunk[0..<n] }
            } while n > 0
            let text = String(decoding: response, as: UTF8.self)
            #expect(n == 0 && (text.isEmpty || text.hasPrefix("HTTP/1.1 408")), "recv \(n) errno \(errno): \(text.prefix(80))")
        }
        // A client that sends its head one byte a second is cut off long before it finishes.
        let trickle = try LoopbackHTTP.connect(port, from: "127.0.0.3")
        defer { close(trickle) }
        let request = Array(
            "GET /whip HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: \(String(repeating: "p", count: 40))\r\n\r\n".utf8)
        var sent = 0, closedAfter: Int? = nil
        while sent < request.count {
            var b = request[sent]
            _ = send(trickle, &b, 1, Int32(MSG_NOSIGNAL))
            sent += 1
            try await Task.sleep(nanoseconds: 1_000_000_000)
            var peek = [UInt8](repeating: 0, count: 64)
            let n = recv(trickle, &peek, peek.count, Int32(MSG_DONTWAIT))
            if n >= 0 {
                closedAfter = sent
                break
            }
        }
        #expect(closedAfter != nil && closedAfter! < request.count, "a trickling client held its connection to the end")
        // And the server still answers afterwards.
        let after = try LoopbackHTTP.exchange(
            LoopbackHTTP.request(
                "POST", "/whip", host: "127.0.0.1:\(port)", headers: ["Content-Type: application/sdp"], body: "v=0\r\n"),
            port: port, from: "127.0.0.2")
        #expect(after.status == 201)
    }

    @Test func serversThatAnswerGarbageGiveTypedErrorsAndNeverHang() async throws {
        typealias Check = (String, @Sendable (Int32) -> Void, @Sendable (WHIPClientError) -> Bool)
        let text: @Sendable (String) -> [UInt8] = { Array($0.utf8) }
        let checks: [Check] = [
            (
                "500", { CannedServer.write($0, text("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops")) },
                { if case .rejected(500, let r) = $0 { r == "oops" } else { false } }
            ),
            (
                "401", { CannedServer.write($0, text("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n")) },
                { if case .unauthorized(401, _) = $0 { true } else { false } }
            ),
            (
                "201 without Location",
                {
                    CannedServer.write(
                        $0, text("HTTP/1.1 201 Created\r\nContent-Type: application/sdp\r\nContent-Length: 5\r\n\r\nv=0\r\n"))
                },
                { if case .invalidResponse = $0 { true } else { false } }
            ),
            (
                "201 with HTML",
                {
                    CannedServer.write(
                        $0,
                        text(
                            "HTTP/1.1 201 Created\r\nLocation: /r/1\r\nContent-Type: text/html\r\nContent-Length: 6\r\n\r\n<html>"
                        ))
                },
                { if case .invalidResponse = $0 { true } else { false } }
            ),
            (
                "201 with SDP that is not",
                {
                    CannedServer.write(
                        $0,
                        text(
                            "HTTP/1.1 201 Created\r\nLocation: /r/1\r\nContent-Type: application/sdp\r\nContent-Length: 5\r\n\r\nhello"
                        ))
                },
                { if case .invalidResponse = $0 { true } else { false } }
            ),
            (
                "201 with an unusable answer",
                {
                    CannedServer.write(
                        $0,
                        text(
                            "HTTP/1.1 201 Created\r\nLocation: /r/1\r\nContent-Type: application/sdp\r\nContent-Length: 12\r\n\r\nv=0\r\nm=junk\r\n"
                        ))
                },
                { if case .peerConnection = $0 { true } else { false } }
            ),
            (
                "200", { CannedServer.write($0, text("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")) },
                { if case .invalidResponse = $0 { true } else { false } }
            ),
            (
                "not HTTP", { CannedServer.write($0, text("SSH-2.0-OpenSSH_9.2\r\n")) },
                { if case .invalidResponse = $0 { true } else { false } }
            ),
            ("nothing", { _ in }, { if case .invalidResponse = $0 { true } else { false } }),
            (
                "a 100 MB body announced",
                {
                    CannedServer.write(
                        $0,
                        text(
                            "HTTP/1.1 201 Created\r\nLocation: /r/1\r\nContent-Type: application/sdp\r\nContent-Length: 100000000\r\n\r\n"
                        ))
                    CannedServer.write($0, [UInt8](repeating: 97, count: 1 << 20))
                },
                { if case .invalidResponse = $0 { true } else { false } }
            ),
            (
                "an endless body",
                {
                    CannedServer.write(
                        $0, text("HTTP/1.1 201 Created\r\nLocation: /r/1\r\nContent-Type: application/sdp\r\n\r\n"))
                    for _ in 0..<8 { CannedServer.write($0, [UInt8](repeating: 97, count: 256 * 1024)) }
                },
                { if case .invalidResponse = $0 { true } else { false } }
            ),
            (
                "a slow body",
                {
                    CannedServer.write(
                        $0,
                        text(
                            "HTTP/1.1 201 Created\r\nLocation: /r/1\r\nContent-Type: application/sdp\r\nContent-Length: 100\r\n\r\nv=0"
                        ))
                    for _ in 0..<8 {
                        usleep(500_000)
                        CannedServer.write($0, text("a"))
                    }
                },
                { if case .timeout = $0 { true } else { false } }
            ),
            (
                "a redirect loop",
                {
                    CannedServer.write(
                        $0, text("HTTP/1.1 307 Temporary Redirect\r\nLocation: /whip\r\nContent-Length: 0\r\n\r\n"))
                },
                { if case .tooManyRedirects(3) = $0 { true } else { false } }
            ),
        ]
        var options = WHIPClientOptions()
        options.timeout = .seconds(2)
        for (name, respond, expected) in checks {
            let server = try CannedServer(respond)
            defer { server.stop() }
            let client = try RTCPeerConnection(configuration: Self.configuration(gathering: .milliseconds(100)))
            defer { client.close() }
            _ = try client.addTransceiver(.video, direction: .sendonly)
            let started = Date()
            do {
                _ = try await WHIPClient.publish(client, to: "http://127.0.0.1:\(server.port)/whip", options: options)
                Issue.record("\(name): published")
            } catch {
                #expect(expected(error), "\(name): \(error)")
            }
            #expect(Date().timeIntervalSince(started) < 30, "\(name) took \(Date().timeIntervalSince(started)) s")
        }
        // A token that would add a header field of its own: refused before anything is sent.
        let listening = try CannedServer {
            CannedServer.write($0, text("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"))
        }
        defer { listening.stop() }
        var injecting = options
        injecting.token = "t0ken\r\nX-Injected: yes"
        let victim = try RTCPeerConnection(configuration: Self.configuration(gathering: .milliseconds(100)))
        defer { victim.close() }
        _ = try victim.addTransceiver(.video, direction: .sendonly)
        do {
            _ = try await WHIPClient.publish(victim, to: "http://127.0.0.1:\(listening.port)/whip", options: injecting)
            Issue.record("published with a token holding CRLF")
        } catch {
            guard case .invalidRequest = error else { return #expect(Bool(false), "\(error)") }
        }
        #expect(listening.requests.load(ordering: .relaxed) == 0, "the server was connected to")
        // Nothing listening, and URLs that are not WHIP URLs.
        let gone = try CannedServer { _ in }
        let port = gone.port
        gone.stop()
        for (url, isURL) in [("http://127.0.0.1:\(port)/whip", false), ("ftp://127.0.0.1/whip", true), ("http:///whip", true)] {
            let client = try RTCPeerConnection(configuration: Self.configuration(gathering: .milliseconds(100)))
            defer { client.close() }
            _ = try client.addTransceiver(.video, direction: .sendonly)
            do {
                _ = try await WHIPClient.publish(client, to: url, options: options)
                Issue.record("\(url): published")
            } catch {
                switch error {
                case .invalidURL: #expect(isURL, "\(url): \(error)")
                case .connection: #expect(!isURL, "\(url): \(error)")
                default: Issue.record("\(url): \(error)")
                }
            }
        }
    }
}
