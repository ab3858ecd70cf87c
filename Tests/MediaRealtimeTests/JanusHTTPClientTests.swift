// The Janus HTTP client against local TCP servers that misbehave: a response beyond the size
// limit, a server that never answers, a port nobody listens on. Each must end in its typed error,
// in bounded time.
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
}
