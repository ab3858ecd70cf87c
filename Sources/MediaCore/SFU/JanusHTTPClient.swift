// A small HTTP/1.1 client for the Janus REST API: one request per TCP connection
// (`Connection: close`), bounded in size and time, run on a blocking worker so that no Swift
// concurrency thread waits on a socket (a long poll holds its connection for up to 30 s).
// FoundationNetworking's URLSession works here too, but it would bring libcurl into the engine
// library for a handful of JSON requests and has no response size limit.
internal import CMediaShims
import Dispatch
import Glibc

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Why a request to Janus failed. Thread rule: a value type. Cost: none.
package enum JanusError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Janus answered with `"janus": "error"` (core error, e.g. 458 no such session) or a plugin
    /// error (`error_code`/`error` in the plugin data, e.g. 426 no such room).
    case janus(code: Int, reason: String)
    /// The TCP connection could not be made, or broke (the reason, with errno).
    case transport(String)
    /// Connecting, sending or receiving took longer than allowed (what was waited for).
    case timeout(String)
    /// An HTTP status other than 200 (the status and the start of the body).
    case http(status: Int, body: String)
    /// The response was larger than the client's limit (the limit in bytes).
    case responseTooLarge(Int)
    /// The response was not HTTP/1.x, or not the JSON Janus sends (what was wrong).
    case malformed(String)
    /// The response broke HTTP/1.1 framing or one of its limits: a bad status line, header field,
    /// Content-Length or chunk size, an oversize head, a connection that ended mid-message.
    case invalidHTTP(HTTPMessageError)
    /// The session or handle was destroyed, or the session's long poll stopped.
    case closed(String)

    /// A readable description, for logs and test failures.
    package var description: String {
        switch self {
        case .janus(let code, let reason): "Janus error \(code): \(reason)"
        case .transport(let s): "HTTP transport: \(s)"
        case .timeout(let s): "timed out: \(s)"
        case .http(let status, let body): "HTTP \(status): \(body)"
        case .responseTooLarge(let limit): "response larger than \(limit) bytes"
        case .malformed(let s): "malformed response: \(s)"
        case .invalidHTTP(let error): "invalid HTTP response: \(error)"
        case .closed(let s): "closed: \(s)"
        }
    }
}

/// One HTTP/1.1 endpoint (an IPv4 or IPv6 address and port; no TLS, no redirects, no proxies)
/// that takes requests one connection at a time.
///
/// Limits: `maxResponseBytes` for the whole response (status line, headers and body), a
/// deadline for the whole exchange, optionally `idleTimeoutSeconds` between two reads. Bodies by
/// `Content-Length`, `Transfer-Encoding: chunked`, or up to the end of the connection, decoded by
/// `HTTPMessageDecoder` as they arrive, so a response that breaks the grammar or a limit fails at
/// once (`.invalidHTTP` or `.responseTooLarge`), whatever the server sends.
/// Thread rule: a value type; `send` from any task (the socket work runs on a global dispatch
/// queue, not on the caller's thread). Cost: a TCP connection per request (about 0.1 ms on
/// loopback) plus one copy of the response.
package struct JanusHTTPClient: Sendable {
    /// Where requests go.
    package var server: SocketAddress
    /// The largest response taken (bytes); a larger one fails with `.responseTooLarge`.
    package var maxResponseBytes = 1 << 20
    /// The longest wait for the next bytes of a response (seconds); nil: only the deadline of
    /// `send` bounds it. Keep it above the server's long-poll hold time when there is one.
    package var idleTimeoutSeconds: Double?

    /// A client for `server`. Cost: none.
    package init(server: SocketAddress) { self.server = server }

    /// A response: the status code and the body.
    package struct Response: Sendable {
        /// The HTTP status code.
        package var status: Int
        /// The body, decoded from its transfer coding.
        package var body: [UInt8]
    }

    /// Sends `method path` with `body` (as `application/json` when given) and returns the
    /// response, within `timeoutSeconds` for the whole exchange. Thread rule: any task; the
    /// caller is suspended, no thread of the cooperative pool is blocked. Cost: one connection.
    package func send(method: String, path: String, body: [UInt8]? = nil, timeoutSeconds: Double) async throws(JanusError)
        -> Response
    {
        let client = self
        let result: Result<Response, JanusError> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(
                    returning: client.exchange(method: method, path: path, body: body, timeoutSeconds: timeoutSeconds))
            }
        }
        return try result.get()
    }

    /// The blocking exchange, on the calling thread.
    func exchange(method: String, path: String, body: [UInt8]?, timeoutSeconds: Double) -> Result<Response, JanusError> {
        let deadline = MonotonicTime.now + .nanoseconds(Int64(max(timeoutSeconds, 0.001) * 1e9))
        func remainingMs() -> Int32 {
            let now = MonotonicTime.now
            return now >= deadline ? 0 : Int32(min((deadline - now).inNanoseconds / 1_000_000 + 1, 60_000))
        }
        let fd = socket(
            server.cFamily, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(.transport("socket: errno \(errno)")) }
        defer { Glibc.close(fd) }
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))

        // Connect.
        let rc = server.withSockaddr { Glibc.connect(fd, $0, $1) }
        if rc != 0 && errno != EINPROGRESS { return .failure(.transport("connect to \(server): errno \(errno)")) }
        var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        while true {
            let n = poll(&entry, 1, remainingMs())
            if n > 0 { break }
            if n < 0 && errno == EINTR { continue }
            return .failure(.timeout("connecting to \(server)"))
        }
        var soError: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &length)
        if soError != 0 { return .failure(.transport("connect to \(server): errno \(soError)")) }

        // Send the request.
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(server)\r\nConnection: close\r\nAccept: application/json\r\n"
        if let body { head += "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n" }
        head += "\r\n"
        var request = Array(head.utf8)
        if let body { request += body }
        var sent = 0
        while sent < request.count {
            let n = request.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, request.count - sent, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                sent += n
                continue
            }
            if n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR {
                return .failure(.transport("send: errno \(errno)"))
            }
            var w = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            if poll(&w, 1, remainingMs()) == 0 { return .failure(.timeout("sending \(method) \(path)")) }
        }

        // Read until the response is complete or the server closes, decoding as the bytes come.
        var decoder = HTTPMessageDecoder(.response(toMethod: method), limits: limits)
        var received = 0
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            var wait = remainingMs()
            if let idle = idleTimeoutSeconds { wait = min(wait, Int32(min(max(idle, 0.001), 60) * 1000)) }
            var r = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let p = poll(&r, 1, wait)
            if p == 0 {
                return .failure(.timeout("waiting for the response to \(method) \(path) (\(received) bytes received)"))
            }
            if p < 0 { if errno == EINTR { continue } else { return .failure(.transport("poll: errno \(errno)")) } }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK { continue }
                return .failure(.transport("receive: errno \(errno)"))
            }
            received += n
            if received > maxResponseBytes { return .failure(.responseTooLarge(maxResponseBytes)) }
            do {
                if let message = try decoder.append(chunk[0..<n]) { return Self.response(message) }
            } catch {
                return .failure(Self.janusError(error, limit: maxResponseBytes))
            }
        }
        do {
            return Self.response(try decoder.finish())
        } catch {
            return .failure(Self.janusError(error, limit: maxResponseBytes))
        }
    }

    /// The codec limits for a response of at most `maxResponseBytes`.
    var limits: HTTPMessageLimits {
        let cap = max(maxResponseBytes, 0)
        return HTTPMessageLimits(headBytes: min(cap, 64 * 1024), fieldCount: 100, bodyBytes: cap)
    }

    private static func response(_ message: HTTPMessage) -> Result<Response, JanusError> {
        guard case .status(_, let code, _) = message.head.startLine else {
            return .failure(.malformed("not a status line"))
        }
        return .success(Response(status: code, body: message.body))
    }

    /// A size limit is `.responseTooLarge`, anything else `.invalidHTTP`.
    private static func janusError(_ error: HTTPMessageError, limit: Int) -> JanusError {
        switch error {
        case .bodyTooLarge, .headTooLarge: .responseTooLarge(limit)
        default: .invalidHTTP(error)
        }
    }

    /// Parses a response to a GET from `data` with the default limit (1 MiB): nil while
    /// incomplete (`complete`: the connection has closed, so a body without length ends here).
    /// Throws `.invalidHTTP` or `.responseTooLarge` for what is not acceptable HTTP/1.x.
    /// Thread rule: any thread. Cost: linear in `data`.
    static func parse(_ data: [UInt8], complete: Bool) throws(JanusError) -> Response? {
        let client = JanusHTTPClient(server: .loopbackIPv4(port: 0))
        let message: HTTPMessage?
        do {
            message = try HTTPMessageDecoder.decode(
                data, as: .response(toMethod: "GET"), limits: client.limits, complete: complete)
        } catch {
            throw janusError(error, limit: client.maxResponseBytes)
        }
        guard let message else { return nil }
        return try response(message).get()
    }
}
