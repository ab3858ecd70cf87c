// The Janus HTTP client against local TCP servers that misbehave: a response beyond the size
// limit, a server that never answers, a port nobody listens on, hostile replies (bad and huge chunk
// sizes and lengths, truncated and garbage heads, endless heads and bodies, a reply that drips).
// Each must end in its typed error, in bounded time, and the next request must still work.
import Foundation
import Glibc
import Testing

@testable import MediaCore

@Suite(.serialized)
struct JanusHTTPClientTests {
    /// A TCP listener on 127.0.0.1 that accepts one connection, reads the request and hands the
    /// descriptor to `serve` on its own thread.
    final class OneShotServer: @unchecked Sendable {
        let fd: Int32
        let port: UInt16
        let done = DispatchSemaphore(value: 0)

        init(serve: @escaping @Sendable (Int32) -> Void) throws {
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
                var buffer = [UInt8](repeating: 0, count: 4096)
                _ = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress!, $0.count, 0) }
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
}
