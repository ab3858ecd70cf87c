// The Janus HTTP client against local TCP servers that misbehave: a response beyond the size
// limit, a server that never answers, a port nobody listens on, hostile replies (bad and huge chunk
// sizes and lengths, truncated and garbage heads, endless heads and bodies, a reply that drips),
// and WebSocket servers that misbehave (a refused or forged upgrade, huge and overflowing frame
// lengths, a bad opcode, masked frames, endless fragments, a storm of close frames). Each must end
// in its typed error, in bounded time, and the next request must still work.
import Foundation
import Glibc
import MediaCore
import MediaTestSupport
import Synchronization
import Testing

@Suite(.serialized)
struct JanusHTTPClientTests {
    /// A TCP listener on 127.0.0.1 that accepts one connection, reads the request and hands the
    /// descriptor to `serve` on its own thread.
    final class OneShotServer: @unchecked Sendable {
        let fd: Int32
        let port: UInt16
        let done = DispatchSemaphore(value: 0)

        init(readsRequest: Bool = true, serve: @escaping @Sendable (Int32) -> Void) throws {
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
            let rc = withUnsafePointer(to: &sin) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &sin) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
            }
            fd = listener
            port = UInt16(bigEndian: sin.sin_port)
            try #require(rc == 0 && listen(listener, 4) == 0)
            let done = self.done
            Thread {
                defer { done.signal() }
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                if readsRequest {
                    var buffer = [UInt8](repeating: 0, count: 4096)
                    _ = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress!, $0.count, 0) }
                }
                serve(client)
                close(client)
            }.start()
        }

        func finish() {
            shutdown(fd, Int32(SHUT_RDWR))
            close(fd)
            done.wait()
        }
    }

    @Test func oversizeResponseIsRefused() async throws {
        let server = try OneShotServer { client in
            let head = Array("HTTP/1.1 200 OK\r\nContent-Length: 3000000\r\n\r\n".utf8)
            _ = head.withUnsafeBytes { send(client, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
            let chunk = [UInt8](repeating: 0x61, count: 65_536)
            for _ in 0..<46 where chunk.withUnsafeBytes({ send(client, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }) > 0 {}
        }
        defer { server.finish() }
        var client = JanusHTTPClient(server: .loopbackIPv4(port: server.port))
        client.maxResponseBytes = 100_000
        await #expect(throws: JanusError.responseTooLarge(100_000)) {
            _ = try await client.send(method: "GET", path: "/janus/info", timeoutSeconds: 5)
        }
    }

    @Test func silentServerTimesOut() async throws {
        let server = try OneShotServer { _ in usleep(1_500_000) }
        defer { server.finish() }
        let client = JanusHTTPClient(server: .loopbackIPv4(port: server.port))
        let started = Date()
        do {
            _ = try await client.send(method: "POST", path: "/janus", body: Array("{}".utf8), timeoutSeconds: 0.3)
            Issue.record("a response from a server that sends nothing")
        } catch {
            guard case .timeout = error else { Issue.record("\(error)"); return }
            let took = Date().timeIntervalSince(started)
            #expect(took >= 0.25 && took < 1.2, "timed out after \(took) s")
        }
    }

    @Test func refusedConnectionIsATransportError() async throws {
        // A port that was free a moment ago (bound, then closed).
        let probe = try OneShotServer { _ in }
        let port = probe.port
        probe.finish()
        let client = JanusHTTPClient(server: .loopbackIPv4(port: port))
        do {
            _ = try await client.send(method: "GET", path: "/janus/info", timeoutSeconds: 2)
            Issue.record("a response from a closed port")
        } catch {
            guard case .transport = error else { Issue.record("\(error)"); return }
        }
    }

    /// Sends all of `bytes`; false once the peer has gone.
    @discardableResult
    static func sendAll(_ client: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(client, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }

    /// True once the peer has closed (or `seconds` passed without it).
    static func peerClosed(_ client: Int32, within seconds: Double) -> Bool {
        var pfd = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
        return poll(&pfd, 1, Int32(seconds * 1000)) != 0
    }

    /// A reply that is sent whole, then the connection closes.
    static func replying(_ text: String) -> @Sendable (Int32) -> Void {
        { client in sendAll(client, Array(text.utf8)) }
    }

    /// `head` once, then `piece` again and again until the client goes (at most 64 MiB).
    static func endless(_ head: String, _ piece: String) -> @Sendable (Int32) -> Void {
        { client in
            guard sendAll(client, Array(head.utf8)) else { return }
            let bytes = Array(String(repeating: piece, count: max(1, 4096 / max(piece.utf8.count, 1))).utf8)
            var total = 0
            while total < 64 << 20, sendAll(client, bytes) { total += bytes.count }
        }
    }

    /// One exchange with a server that answers with `serve`; the client's error, nil on success.
    static func failure(
        of serve: @escaping @Sendable (Int32) -> Void, timeout: Double = 5, idle: Double? = nil
    ) async throws -> JanusError? {
        let server = try OneShotServer(serve: serve)
        defer { server.finish() }
        var client = JanusHTTPClient(server: .loopbackIPv4(port: server.port))
        client.maxResponseBytes = 100_000
        client.idleTimeoutSeconds = idle
        do {
            _ = try await client.send(method: "GET", path: "/janus/info", timeoutSeconds: timeout)
            return nil
        } catch {
            return error
        }
    }

    @Test func hostileRepliesFailTypedAndTheNextRequestWorks() async throws {
        let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        let cases: [(String, @Sendable (Int32) -> Void, JanusError)] = [
            ("chunk size -1", Self.replying(chunked + "-1\r\nx\r\n0\r\n\r\n"), .invalidHTTP(.badChunkSize("-1"))),
            ("chunk size of 72 bits", Self.replying(chunked + "FFFFFFFFFFFFFFFFFF\r\n"), .invalidHTTP(.chunkSizeOverflow)),
            ("chunk size Int.max + 1", Self.replying(chunked + "8000000000000000\r\n"), .invalidHTTP(.chunkSizeOverflow)),
            ("chunk size Int.max", Self.replying(chunked + "7FFFFFFFFFFFFFFF\r\nabc"), .responseTooLarge(100_000)),
            (
                "chunk data without CRLF", Self.replying(chunked + "3\r\nabcdef"),
                .invalidHTTP(.malformedChunk("chunk data not followed by CRLF"))
            ),
            (
                "Content-Length beyond Int", Self.replying("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\nx"),
                .invalidHTTP(.badContentLength("99999999999999999999"))
            ),
            (
                "Content-Length Int.max", Self.replying("HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\nx"),
                .responseTooLarge(100_000)
            ),
            (
                "Content-Length -1", Self.replying("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nx"),
                .invalidHTTP(.badContentLength("-1"))
            ),
            (
                "conflicting Content-Length",
                Self.replying("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx"),
                .invalidHTTP(.conflictingContentLength)
            ),
            ("truncated head", Self.replying("HTTP/1.1 200 OK\r\nContent-Le"), .invalidHTTP(.truncated("inside the head"))),
            (
                "truncated body", Self.replying("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"),
                .invalidHTTP(.truncated("after 3 of 10 body bytes"))
            ),
            (
                "garbage head", Self.replying("\u{16}\u{3}\u{1}\u{2}\r\n\r\n"),
                .invalidHTTP(.malformedStartLine("\u{16}\u{3}\u{1}\u{2}"))
            ),
            ("LF line ends", Self.replying("HTTP/1.1 200 OK\nContent-Length: 0\n\n"), .invalidHTTP(.badLineEnding)),
            ("nothing at all", Self.replying(""), .invalidHTTP(.truncated("before a message started"))),
            ("endless header fields", Self.endless("HTTP/1.1 200 OK\r\n", "X-More: yes\r\n"), .responseTooLarge(100_000)),
            ("endless body", Self.endless("HTTP/1.1 200 OK\r\n\r\n", "a"), .responseTooLarge(100_000)),
            ("endless chunks", Self.endless(chunked, "10\r\n0123456789abcdef\r\n"), .responseTooLarge(100_000)),
        ]
        for (name, serve, expected) in cases {
            let started = Date()
            let error = try await Self.failure(of: serve)
            #expect(error == expected, "\(name)")
            #expect(Date().timeIntervalSince(started) < 2, "\(name) took \(Date().timeIntervalSince(started)) s")
        }

        // A reply that drips one byte a second ends at the deadline of the call.
        let drip: @Sendable (Int32) -> Void = { client in
            for byte in Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8) {
                guard Self.sendAll(client, [byte]), !Self.peerClosed(client, within: 1) else { return }
            }
        }
        var started = Date()
        let dripped = try await Self.failure(of: drip, timeout: 1.2)
        var took = Date().timeIntervalSince(started)
        if case .timeout = dripped {} else { Issue.record("drip: \(String(describing: dripped))") }
        #expect(took >= 1.1 && took < 2.5, "drip ended after \(took) s")

        // A server that sends the head and then nothing ends at the idle timeout, well before the
        // deadline.
        let stall: @Sendable (Int32) -> Void = { client in
            guard Self.sendAll(client, Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n".utf8)) else { return }
            _ = Self.peerClosed(client, within: 5)
        }
        started = Date()
        let stalled = try await Self.failure(of: stall, timeout: 5, idle: 0.3)
        took = Date().timeIntervalSince(started)
        if case .timeout = stalled {} else { Issue.record("stall: \(String(describing: stalled))") }
        #expect(took >= 0.25 && took < 1.5, "stall ended after \(took) s")

        // The process lives on, and a good server is answered as before.
        let good = try OneShotServer(
            serve: Self.replying("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;a=b\r\nok\r\n0\r\n\r\n"))
        defer { good.finish() }
        let response = try await JanusHTTPClient(server: .loopbackIPv4(port: good.port)).send(
            method: "GET", path: "/janus/info", timeoutSeconds: 5)
        #expect(response.status == 200 && response.body == Array("ok".utf8))
    }

    // MARK: WebSocket

    /// A WebSocket server on 127.0.0.1 for one connection: reads the upgrade request, answers it
    /// with `answer` (given the request's key; nil: a correct 101 for `janus-protocol`), then
    /// hands the socket and a decoder of the client's frames to `serve` on its own thread.
    static func webSocketServer(
        answer: (@Sendable (String) -> String)? = nil, serve: @escaping @Sendable (Int32, inout WebSocketDecoder) -> Void
    ) throws -> OneShotServer {
        try OneShotServer(readsRequest: false) { client in
            var request: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !request.suffix(4).elementsEqual([13, 10, 13, 10]) && request.count < 16_384 {
                let n = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress!, $0.count, 0) }
                guard n > 0 else { return }
                request += buffer[0..<n]
            }
            let text = String(decoding: request, as: UTF8.self)
            let key =
                text.split(separator: "\r\n").first { $0.lowercased().hasPrefix("sec-websocket-key:") }
                .map { $0.split(separator: ":", maxSplits: 1)[1].trimmingCharacters(in: .whitespaces) } ?? ""
            let reply =
                answer?(key)
                ?? "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(WebSocketHandshake.accept(forKey: key))\r\nSec-WebSocket-Protocol: janus-protocol\r\n\r\n"
            guard sendAll(client, Array(reply.utf8)) else { return }
            var decoder = WebSocketDecoder(role: .server)
            serve(client, &decoder)
        }
    }

    /// The next message the client sent, nil once it has gone (or after 5 s).
    static func nextMessage(_ client: Int32, _ decoder: inout WebSocketDecoder) -> WebSocketMessage? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            if let m = try? decoder.next() { return m }
            var pfd = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 5000) > 0 else { return nil }
            let n = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress!, $0.count, 0) }
            guard n > 0 else { return nil }
            decoder.append(buffer[0..<n])
        }
    }

    /// Sends raw frame bytes after reading the client's first request, then holds the connection
    /// until the client closes it or `hold` seconds pass.
    static func afterRequest(_ bytes: [UInt8], times: Int = 1, hold: Double = 3)
        -> @Sendable (Int32, inout WebSocketDecoder)
        -> Void
    {
        { client, decoder in
            _ = nextMessage(client, &decoder)
            for _ in 0..<times where sendAll(client, bytes) {}
            _ = peerClosed(client, within: hold)
        }
    }

    /// One `ping` request through a WebSocket transport to a server that answers with `serve`;
    /// the error and how long it took.
    static func webSocketFailure(
        answer: (@Sendable (String) -> String)? = nil, _ serve: @escaping @Sendable (Int32, inout WebSocketDecoder) -> Void
    ) async throws -> (JanusError?, Double) {
        let server = try webSocketServer(answer: answer, serve: serve)
        defer { server.finish() }
        let started = Date()
        do {
            let endpoint = try JanusEndpoint(url: "ws://127.0.0.1:\(server.port)/")
            let transport = try await JanusWebSocketTransport.connect(endpoint, timeoutSeconds: 3, maxMessageBytes: 100_000)
            defer { transport.close() }
            _ = try await transport.send(
                ["janus": "ping", "transaction": "t1"], session: UInt64?.none, handle: UInt64?.none, timeoutSeconds: 3)
            return (nil, Date().timeIntervalSince(started))
        } catch {
            return (error, Date().timeIntervalSince(started))
        }
    }

    @Test func hostileWebSocketServersFailTypedAndTheNextCallWorks() async throws {
        func frame(_ b0: UInt8, _ rest: [UInt8]) -> [UInt8] { [b0] + rest }
        let cases: [(String, (@Sendable (String) -> String)?, @Sendable (Int32, inout WebSocketDecoder) -> Void, JanusError)] = [
            (
                "an upgrade refused", { _ in "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n" }, Self.afterRequest([]),
                .webSocket(.handshake("status 403 Forbidden"))
            ),
            (
                "a forged accept",
                { _ in
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: AAAA\r\nSec-WebSocket-Protocol: janus-protocol\r\n\r\n"
                }, Self.afterRequest([]),
                .webSocket(.handshake("Sec-WebSocket-Accept is AAAA, not the one for our key"))
            ),
            (
                "a length of 2^63 - 1", nil, Self.afterRequest([0x81, 0x7F, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]),
                .webSocket(.messageTooLarge(limit: 100_000))
            ),
            (
                "a length with its top bit set", nil, Self.afterRequest([0x81, 0x7F, 0x80, 0, 0, 0, 0, 0, 0, 1]),
                .webSocket(.badLength("a 64-bit length with its top bit set"))
            ),
            ("opcode 3", nil, Self.afterRequest([0x83, 0x00]), .webSocket(.unknownOpcode(3))),
            ("reserved bits", nil, Self.afterRequest([0xC1, 0x00]), .webSocket(.reservedBits(4))),
            ("a masked frame", nil, Self.afterRequest([0x81, 0x81, 1, 2, 3, 4, 0x7B]), .webSocket(.badMasking(masked: true))),
            (
                "endless fragments", nil,
                { client, decoder in
                    _ = Self.nextMessage(client, &decoder)
                    guard Self.sendAll(client, [0x01, 0x7E, 0x10, 0x00] + [UInt8](repeating: 0x61, count: 4096)) else { return }
                    let piece = [0x00, 0x7E, 0x10, 0x00] + [UInt8](repeating: 0x61, count: 4096)
                    for _ in 0..<10_000 where Self.sendAll(client, piece) {}
                },
                .webSocket(.messageTooLarge(limit: 100_000))
            ),
            (
                "a storm of close frames", nil, Self.afterRequest([0x88, 0x02, 0x03, 0xE8], times: 20_000),
                .closed("the server closed the WebSocket (1000 )")
            ),
            (
                "a close with status 1005", nil, Self.afterRequest([0x88, 0x02, 0x03, 0xED]),
                .webSocket(.badClose("status code 1005"))
            ),
            ("text that is not UTF-8", nil, Self.afterRequest([0x81, 0x02, 0xC3, 0x28]), .webSocket(.invalidUTF8)),
        ]
        for (name, answer, serve, expected) in cases {
            let (error, took) = try await Self.webSocketFailure(answer: answer, serve)
            print(
                "JanusHTTPClientTests: WebSocket \(name): \(error.map { "\($0)" } ?? "no error") after \(String(format: "%.3f", took)) s"
            )
            #expect(error == expected, "\(name)")
            #expect(took < 2, "\(name) took \(took) s")
        }

        // A server that sends the head of a frame and then nothing: the request's deadline ends it.
        // The server holds the connection well past that deadline: holding it for exactly the
        // deadline (3 s) let its close arrive first on a loaded machine.
        let (stalled, took) = try await Self.webSocketFailure(Self.afterRequest([0x81, 0x7E, 0x01], hold: 8))
        if case .timeout? = stalled {} else { Issue.record("stall: \(String(describing: stalled))") }
        #expect(took >= 2.9 && took < 4, "stall ended after \(took) s")

        // The process lives on; a good server answers, after text that is not JSON (dropped and
        // counted) and a ping (answered with a pong).
        let pongSeen = Mutex(false)
        let good = try Self.webSocketServer { client, decoder in
            guard case .text(let request)? = Self.nextMessage(client, &decoder),
                let json = try? JSONValue.parse(Array(request.utf8)), let transaction = json["transaction"]?.string
            else { return }
            _ = Self.sendAll(client, WebSocketFrame.encode(.text, Array("not json".utf8), mask: nil))
            _ = Self.sendAll(client, WebSocketFrame.encode(.ping, [1, 2, 3], mask: nil))
            if case .pong([1, 2, 3])? = Self.nextMessage(client, &decoder) { pongSeen.withLock { $0 = true } }
            let reply: JSONValue = ["janus": "pong", "transaction": .string(transaction)]
            _ = Self.sendAll(client, WebSocketFrame.encode(.text, reply.bytes, mask: nil))
            _ = Self.peerClosed(client, within: 3)
        }
        defer { good.finish() }
        let transport = try await JanusWebSocketTransport.connect(
            try JanusEndpoint(url: "ws://localhost:\(good.port)/"), timeoutSeconds: 3)
        let reply = try await transport.send(
            ["janus": "ping", "transaction": "t2"], session: UInt64?.none, handle: UInt64?.none, timeoutSeconds: 3)
        #expect(reply["janus"]?.string == "pong")
        #expect(transport.droppedMessages == 1)
        #expect(pongSeen.withLock { $0 })
        transport.close()
    }

    // MARK: HTTPS

    /// A TLS server (Python's ssl module, a certificate from the test's CA) on 127.0.0.1:`port`
    /// that answers every connection the way `mode` says: `drip` (a reply a byte a second),
    /// `endless` (a body without end), `stall` (accepts and never starts the handshake), `good`.
    static let tlsServer = #"""
        import socket, ssl, sys, time
        mode, port, cert, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(8)
        while True:
            conn, _ = listener.accept()
            try:
                if mode == "stall":
                    time.sleep(4)
                    conn.close()
                    continue
                tls = ctx.wrap_socket(conn, server_side=True)
                tls.recv(65536)
                if mode == "drip":
                    for b in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok":
                        tls.send(bytes([b]))
                        time.sleep(1)
                elif mode == "endless":
                    tls.send(b"HTTP/1.1 200 OK\r\n\r\n")
                    while True:
                        tls.send(b"a" * 4096)
                else:
                    tls.send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                tls.close()
            except Exception:
                conn.close()
        """#

    /// Runs `body` against a TLS server in `mode` (see `tlsServer`); the server is stopped after.
    static func withTLSServer<T>(
        _ mode: String, _ ca: TestCertificateAuthority, _ body: (UInt16) async throws -> T
    ) async throws -> T {
        let port = cliFreePort()
        let server = try ToolProcess(
            "/usr/bin/python3", ["-c", tlsServer, mode, String(port), ca.serverCertificate, ca.serverKey])
        defer {
            server.signal(SIGKILL)
            _ = server.wait(timeout: 5)
        }
        let deadline = Date().addingTimeInterval(10)
        while (try? ClientStream.connect(host: "127.0.0.1", port: UInt16(port), tls: nil, deadline: .now + .seconds(1))) == nil {
            guard Date() < deadline, server.process.isRunning else {
                let run = server.wait(timeout: 1)
                throw JanusNotReady(detail: "python3's ssl server did not listen on \(port): \(run.stderr)")
            }
            usleep(50_000)
        }
        return try await body(UInt16(port))
    }

    @Test func hostileHTTPSServersAreBoundedToo() async throws {
        let ca = try TestCertificateAuthority()
        defer { ca.remove() }
        func client(_ port: UInt16) -> JanusHTTPClient {
            var c = JanusHTTPClient(host: "localhost", port: port, tls: TLSClientSettings(certificateAuthorityFile: ca.caFile))
            c.maxResponseBytes = 100_000
            return c
        }
        // A reply that drips a byte a second: the call's deadline ends it.
        try await Self.withTLSServer("drip", ca) { port in
            let started = Date()
            do {
                _ = try await client(port).send(method: "GET", path: "/janus/info", timeoutSeconds: 1.5)
                Issue.record("a dripping reply was taken")
            } catch let error as JanusError {
                let took = Date().timeIntervalSince(started)
                print("JanusHTTPClientTests: HTTPS drip: \(error) after \(String(format: "%.2f", took)) s")
                if case .timeout = error {} else { Issue.record("drip: \(error)") }
                #expect(took >= 1.4 && took < 2.5, "drip ended after \(took) s")
            }
        }
        // A body without end: the size limit ends it.
        try await Self.withTLSServer("endless", ca) { port in
            let started = Date()
            await #expect(throws: JanusError.responseTooLarge(100_000)) {
                _ = try await client(port).send(method: "GET", path: "/janus/info", timeoutSeconds: 5)
            }
            print(
                "JanusHTTPClientTests: HTTPS endless body refused after \(String(format: "%.2f", Date().timeIntervalSince(started))) s"
            )
        }
        // A server that never starts the handshake: the deadline ends it.
        try await Self.withTLSServer("stall", ca) { port in
            let started = Date()
            do {
                _ = try await client(port).send(method: "GET", path: "/janus/info", timeoutSeconds: 0.5)
                Issue.record("a stalled handshake answered")
            } catch let error as JanusError {
                let took = Date().timeIntervalSince(started)
                if case .timeout = error {} else { Issue.record("stall: \(error)") }
                #expect(took >= 0.45 && took < 1.5, "stall ended after \(took) s")
            }
        }
        // A good server is answered, by name and through the CA; another CA is refused.
        try await Self.withTLSServer("good", ca) { port in
            let response = try await client(port).send(method: "GET", path: "/janus/info", timeoutSeconds: 5)
            #expect(response.status == 200 && response.body == Array("ok".utf8))
            var other = client(port)
            other.tls = TLSClientSettings(certificateAuthorityFile: ca.otherCAFile)
            await #expect(throws: JanusError.self) { _ = try await other.send(method: "GET", path: "/", timeoutSeconds: 5) }
        }
    }
}
