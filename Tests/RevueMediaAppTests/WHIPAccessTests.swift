// The access rules of the WHIP endpoint, attacked over loopback sockets with no peer connection
// behind it: a foreign Host (DNS rebinding), a missing or wrong token, a page on another
// origin, one client taking every session place, a server bound beyond loopback without a
// token. Every refusal is checked to have made no session and never to reach the program. No
// clock: runs in the unit phase.
import Foundation
import RevueMedia
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Raw HTTP from a chosen loopback source address (127.0.0.1, 127.0.0.2: two "clients").
enum LoopbackHTTP {
    /// A socket connected from `source` to 127.0.0.1:`port`, with a 10 s receive timeout.
    static func connect(_ port: UInt16, from source: String = "127.0.0.1") throws -> Int32 {
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard s >= 0 else { throw JSONLineProcess.Failure(description: "socket: \(errno)") }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, rc == 0 else {
            close(s)
            throw JSONLineProcess.Failure(description: "connect from \(source): \(errno)")
        }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return s
    }

    /// Sends `bytes` on a fresh connection and reads until the server closes: the status, the
    /// head (header lines, lower case) and the body.
    static func exchange(_ bytes: [UInt8], port: UInt16, from source: String = "127.0.0.1") throws -> (
        status: Int, head: String, body: String
    ) {
        let s = try connect(port, from: source)
        defer { close(s) }
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(s, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { break }
            sent += n
        }
        var response = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(s, &chunk, chunk.count, 0)
            guard n > 0 else { break }
            response += chunk[0..<n]
        }
        let text = String(decoding: response, as: UTF8.self)
        let parts = text.components(separatedBy: "\r\n\r\n")
        let head = parts.first ?? ""
        let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
        return (status, head.lowercased(), parts.dropFirst().joined(separator: "\r\n\r\n"))
    }

    /// A request with `Host`, the given header lines and a body (`Content-Length` always sent).
    static func request(_ method: String, _ target: String, host: String?, headers: [String] = [], body: String = "") -> [UInt8] {
        var head = "\(method) \(target) HTTP/1.1\r\n"
        if let host { head += "Host: \(host)\r\n" }
        for h in headers { head += h + "\r\n" }
        head += "Content-Length: \(body.utf8.count)\r\n\r\n"
        return Array((head + body).utf8)
    }
}

/// What a test server's program was asked to do, in order. Thread rule: any thread (a lock).
final class CallLog: Sendable {
    let list = Mutex<[String]>([])
    func withLock<T: Sendable>(_ body: (inout [String]) -> T) -> T { list.withLock { body(&$0) } }
}

@Suite struct WHIPAccessTests {
    static let sdp = "Content-Type: application/sdp"

    /// A server whose program answers every offer with a fixed answer and counts the calls.
    static func server(_ options: WHIPServerOptions, host: String = "127.0.0.1", calls: CallLog) throws -> WHIPServer {
        try WHIPServer(host: host, port: 0, options: options) { offer, id in
            calls.withLock { $0.append("offer \(id)") }
            return RTCSessionDescription(type: .answer, sdp: "v=0\r\nanswer\r\n")
        } end: { id in
            calls.withLock { $0.append("end \(id)") }
        }
    }

    @Test func aForeignHostIsRefusedWith421AndNeverReachesTheProgram() throws {
        let calls = CallLog()
        var options = WHIPServerOptions()
        options.maxSessionsPerClient = 16
        let server = try Self.server(options, calls: calls)
        defer { server.stop() }
        let port = server.port
        // What a page on evil.example sends once its name resolves to 127.0.0.1 (DNS rebinding).
        for host in ["evil.example:\(port)", "evil.example", "127.0.0.1.evil.example:\(port)", "localhost:1", "", nil]
            as [String?]
        {
            for (method, target) in [("POST", "/whip"), ("DELETE", "/whip/0123456789abcdef"), ("OPTIONS", "/whip"), ("GET", "/")]
            {
                let r = try LoopbackHTTP.exchange(
                    LoopbackHTTP.request(
                        method, target, host: host, headers: [Self.sdp], body: method == "POST" ? "v=0\r\n" : ""),
                    port: port)
                #expect(r.status == 421, "\(method) \(target) Host \(host ?? "(none)"): \(r.status) \(r.head)")
            }
        }
        #expect(calls.withLock { $0.isEmpty }, "a misdirected request reached the program")
        #expect(server.sessionCount == 0)
        // The names a local client uses are served, with or without the port.
        for host in ["127.0.0.1:\(port)", "localhost:\(port)", "LOCALHOST", "[::1]:\(port)", "127.0.0.1"] {
            let r = try LoopbackHTTP.exchange(
                LoopbackHTTP.request("POST", "/whip", host: host, headers: [Self.sdp], body: "v=0\r\n"), port: port)
            #expect(r.status == 201, "Host \(host): \(r.status) \(r.head)")
        }
        // A configured name replaces the defaults.
        var named = WHIPServerOptions()
        named.allowedHosts = ["media.example.org"]
        let other = try Self.server(named, calls: calls)
        defer { other.stop() }
        let post = { (host: String) in
            try LoopbackHTTP.exchange(
                LoopbackHTTP.request("POST", "/whip", host: host, headers: [Self.sdp], body: "v=0\r\n"), port: other.port
            ).status
        }
        #expect(try post("media.example.org:\(other.port)") == 201)
        #expect(try post("127.0.0.1:\(other.port)") == 421)
    }

    @Test func aMissingOrWrongTokenGets401AndMakesNoSession() throws {
        let calls = CallLog()
        var options = WHIPServerOptions()
        options.tokens = ["first-token", "second-token-4f9a"]
        let server = try Self.server(options, calls: calls)
        defer { server.stop() }
        let port = server.port
        let host = "127.0.0.1:\(port)"
        let wrong: [[String]] = [
            [], ["Authorization: Bearer"], ["Authorization: Bearer first-toke"], ["Authorization: Bearer first-token-and-more"],
            ["Authorization: Basic Zmlyc3QtdG9rZW4="], ["Authorization: first-token"], ["Authorization: Bearer FIRST-TOKEN"],
        ]
        for headers in wrong {
            let r = try LoopbackHTTP.exchange(
                LoopbackHTTP.request("POST", "/whip", host: host, headers: [Self.sdp] + headers, body: "v=0\r\n"), port: port)
            #expect(r.status == 401, "\(headers): \(r.status)")
            #expect(r.head.contains("\r\nwww-authenticate: bearer"), "\(r.head)")
        }
        #expect(calls.withLock { $0.isEmpty } && server.sessionCount == 0, "a request without the token made a session")

        // Either token works; the scheme's case does not matter.
        let made = try LoopbackHTTP.exchange(
            LoopbackHTTP.request(
                "POST", "/whip", host: host, headers: [Self.sdp, "Authorization: Bearer first-token"], body: "v=0\r\n"),
            port: port)
        #expect(made.status == 201)
        let location = try #require(
            made.head.components(separatedBy: "\r\n").first { $0.hasPrefix("location: ") }.map { String($0.dropFirst(10)) })
        let second = try LoopbackHTTP.exchange(
            LoopbackHTTP.request(
                "POST", "/whip", host: host, headers: [Self.sdp, "authorization: bearer second-token-4f9a"], body: "v=0\r\n"),
            port: port)
        #expect(second.status == 201)
        #expect(server.sessionCount == 2)
        // The session's resource is guarded too: a DELETE without the token leaves it.
        #expect(try LoopbackHTTP.exchange(LoopbackHTTP.request("DELETE", location, host: host), port: port).status == 401)
        #expect(server.sessionCount == 2)
        let deleted = try LoopbackHTTP.exchange(
            LoopbackHTTP.request("DELETE", location, host: host, headers: ["Authorization: Bearer second-token-4f9a"]), port: port
        )
        #expect(deleted.status == 200)
        #expect(server.sessionCount == 1)
        #expect(calls.withLock { $0.filter { $0.hasPrefix("end ") }.count } == 1)
    }

    @Test func corsIsGrantedToConfiguredOriginsOnlyAndForeignPostsAreRefused() throws {
        let calls = CallLog()
        var options = WHIPServerOptions()
        options.allowedOrigins = ["https://studio.example.com"]
        let server = try Self.server(options, calls: calls)
        defer { server.stop() }
        let port = server.port
        let host = "127.0.0.1:\(port)"
        let preflight = { (origin: String) in
            try LoopbackHTTP.exchange(
                LoopbackHTTP.request(
                    "OPTIONS", "/whip", host: host,
                    headers: [
                        "Origin: \(origin)", "Access-Control-Request-Method: POST",
                        "Access-Control-Request-Headers: authorization, content-type",
                    ]), port: port)
        }
        let granted = try preflight("https://studio.example.com")
        #expect(granted.status == 204)
        for line in [
            "access-control-allow-origin: https://studio.example.com", "access-control-allow-methods: post, options",
            "access-control-allow-headers: authorization, content-type", "access-control-expose-headers: location, link, etag",
        ] {
            #expect(granted.head.contains("\r\n" + line), "missing \(line) in \(granted.head)")
        }
        for origin in ["https://evil.example", "https://studio.example.com.evil.example", "http://studio.example.com", "null"] {
            let refused = try preflight(origin)
            #expect(!refused.head.contains("access-control-allow"), "\(origin) got a grant: \(refused.head)")
            let post = try LoopbackHTTP.exchange(
                LoopbackHTTP.request("POST", "/whip", host: host, headers: [Self.sdp, "Origin: \(origin)"], body: "v=0\r\n"),
                port: port)
            #expect(post.status == 403 && !post.head.contains("access-control-allow"), "\(origin): \(post.status)")
        }
        #expect(calls.withLock { $0.isEmpty } && server.sessionCount == 0)
        // The allowed origin's POST is answered with the grant and the exposed Location.
        let post = try LoopbackHTTP.exchange(
            LoopbackHTTP.request(
                "POST", "/whip", host: host, headers: [Self.sdp, "Origin: https://studio.example.com"], body: "v=0\r\n"),
            port: port)
        #expect(post.status == 201)
        #expect(post.head.contains("\r\naccess-control-allow-origin: https://studio.example.com"))
        #expect(post.head.contains("\r\naccess-control-expose-headers: location, link, etag"))
    }

    @Test func oneClientCannotTakeEverySessionPlace() throws {
        let calls = CallLog()
        var options = WHIPServerOptions()
        options.maxSessionsPerClient = 2
        options.maxSessions = 3
        let server = try Self.server(options, calls: calls)
        defer { server.stop() }
        let port = server.port
        let host = "127.0.0.1:\(port)"
        let post = { (source: String) in
            try LoopbackHTTP.exchange(
                LoopbackHTTP.request("POST", "/whip", host: host, headers: [Self.sdp], body: "v=0\r\n"), port: port, from: source)
        }
        let first = try post("127.0.0.1"), second = try post("127.0.0.1")
        #expect(first.status == 201 && second.status == 201)
        let third = try post("127.0.0.1")
        #expect(third.status == 429, "\(third.head)")
        // Another client still gets a place; then every place is taken (503).
        #expect(try post("127.0.0.2").status == 201)
        #expect(try post("127.0.0.3").status == 503)
        #expect(server.sessionCount == 3 && calls.withLock { $0.count } == 3)
        // Deleting one of the first client's sessions frees its place.
        let location = try #require(
            first.head.components(separatedBy: "\r\n").first { $0.hasPrefix("location: ") }.map { String($0.dropFirst(10)) })
        #expect(try LoopbackHTTP.exchange(LoopbackHTTP.request("DELETE", location, host: host), port: port).status == 200)
        #expect(try post("127.0.0.1").status == 201)
    }

    @Test func oneAddressHoldsFourConnectionsAndIsServedRequestAfterRequestBesideThree() throws {
        let server = try Self.server(WHIPServerOptions(), calls: CallLog())
        defer { server.stop() }
        let port = server.port
        let request = LoopbackHTTP.request("GET", "/whip", host: "127.0.0.1:\(port)")
        // Four connections that send half a request and wait fill an address (127.0.0.3): its
        // next is closed unanswered, and another address is still served.
        var stalled: [Int32] = []
        defer { for s in stalled { close(s) } }
        func stall(from source: String) throws {
            let s = try LoopbackHTTP.connect(port, from: source)
            _ = Array("GET /whip HTTP/1.1\r\n".utf8).withUnsafeBytes { send(s, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            stalled.append(s)
        }
        for _ in 0..<4 { try stall(from: "127.0.0.3") }
        #expect(try LoopbackHTTP.exchange(request, port: port, from: "127.0.0.3").status == 0)
        #expect(try LoopbackHTTP.exchange(request, port: port, from: "127.0.0.2").status == 405)
        // 127.0.0.1 holds three of its places with stalled connections.
        for _ in 0..<3 { try stall(from: "127.0.0.1") }
        // Requests one after the other on the fourth place, each connection closed only after
        // the next request is answered (as a lazy connection pool does): each is answered,
        // although the server is still draining the one before when the next arrives.
        var unanswered = 0
        var previous: Int32 = -1
        for _ in 0..<20 {
            let s = try LoopbackHTTP.connect(port)
            _ = request.withUnsafeBytes { send(s, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var chunk = [UInt8](repeating: 0, count: 4096)
            var response = [UInt8]()
            while case let n = recv(s, &chunk, chunk.count, 0), n > 0 { response += chunk[0..<n] }
            if !response.starts(with: Array("HTTP/1.1 405".utf8)) { unanswered += 1 }
            if previous >= 0 { close(previous) }
            previous = s
        }
        close(previous)
        #expect(unanswered == 0, "\(unanswered) of 20 requests not answered")
    }

    @Test func aServerBeyondLoopbackWithoutATokenDoesNotStart() throws {
        let calls = CallLog()
        do {
            let s = try Self.server(WHIPServerOptions(), host: "0.0.0.0", calls: calls)
            s.stop()
            Issue.record("a server on 0.0.0.0 started without a token")
        } catch {
            guard case .invalidConfiguration? = error as? RTCError else { throw error }
        }
        var badToken = WHIPServerOptions()
        badToken.tokens = ["two words"]
        #expect(throws: RTCError.self) { try Self.server(badToken, calls: calls).stop() }
        var withToken = WHIPServerOptions()
        withToken.tokens = ["t0ken"]
        try Self.server(withToken, host: "0.0.0.0", calls: calls).stop()
        var closedNetwork = WHIPServerOptions()
        closedNetwork.allowsNoTokenOffLoopback = true
        try Self.server(closedNetwork, host: "0.0.0.0", calls: calls).stop()
    }
}
