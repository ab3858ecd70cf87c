// A small HTTP/1.1 client for the Janus REST API: one request per TCP connection
// (`Connection: close`, plain or TLS through `ClientStream`), bounded in size and time, run on a
// blocking worker so that no Swift concurrency thread waits on a socket (a long poll holds its
// connection for up to 30 s).
// FoundationNetworking's URLSession works here too, but it would bring libcurl into the engine
// library for a handful of JSON requests and has no response size limit.
import Dispatch
import MediaBase
import MediaTransport

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
    /// Janus refused the credentials: a missing or wrong `api_secret` or `token` (core errors 403
    /// and 405), or a wrong room `secret` or `pin` (VideoRoom error 433). Janus's code and reason.
    case unauthorized(code: Int, reason: String)
    /// The TCP connection could not be made, or broke (the reason, with errno).
    case transport(String)
    /// The server's host name could not be resolved (the name and the resolver's reason).
    case resolutionFailed(String)
    /// The server's TLS certificate was refused (unknown CA, expired...; OpenSSL's reason).
    case certificateRejected(String)
    /// The server's TLS certificate does not name the host (or address) connected to.
    case nameMismatch(String)
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
    /// The WebSocket connection broke RFC 6455 or its message limit (or refused the upgrade).
    case webSocket(WebSocketError)
    /// The URL is not one the client can use (what is wrong with it).
    case badURL(String)
    /// The session or handle was destroyed, or the session's long poll stopped.
    case closed(String)

    /// A readable description, for logs and test failures.
    package var description: String {
        switch self {
        case .janus(let code, let reason): "Janus error \(code): \(reason)"
        case .unauthorized(let code, let reason): "Janus refused the credentials (\(code)): \(reason)"
        case .transport(let s): "transport: \(s)"
        case .resolutionFailed(let s): "name resolution failed: \(s)"
        case .certificateRejected(let s): "TLS certificate rejected: \(s)"
        case .nameMismatch(let s): "TLS certificate does not name the server: \(s)"
        case .timeout(let s): "timed out: \(s)"
        case .http(let status, let body): "HTTP \(status): \(body)"
        case .responseTooLarge(let limit): "response larger than \(limit) bytes"
        case .malformed(let s): "malformed response: \(s)"
        case .invalidHTTP(let error): "invalid HTTP response: \(error)"
        case .webSocket(let error): "\(error)"
        case .badURL(let s): "bad Janus URL: \(s)"
        case .closed(let s): "closed: \(s)"
        }
    }

    /// Janus's error `code` with `reason`: `.unauthorized` for the credential codes (403 and 405
    /// from the core, 433 from the VideoRoom plugin), `.janus` for the others. Cost: none.
    package static func fromJanus(code: Int, reason: String) -> JanusError {
        [403, 405, 433].contains(code) ? .unauthorized(code: code, reason: reason) : .janus(code: code, reason: reason)
    }

    /// The Janus error for a stream failure. Cost: none.
    package init(_ error: ClientStreamError) {
        switch error {
        case .resolutionFailed: self = .resolutionFailed(error.description)
        case .connection(let s): self = .transport(s)
        case .timeout(let s): self = .timeout(s)
        case .certificateRejected(let s): self = .certificateRejected(s)
        case .nameMismatch(let s): self = .nameMismatch(s)
        case .tls(let s): self = .transport("TLS: \(s)")
        }
    }
}

/// One HTTP/1.1 endpoint (a host name or address and port, plain or TLS; no redirects, no
/// proxies) that takes requests one connection at a time.
///
/// Limits: `maxResponseBytes` for the whole response (status line, headers and body), a
/// deadline for the whole exchange, optionally `idleTimeoutSeconds` between two reads. Bodies by
/// `Content-Length`, `Transfer-Encoding: chunked`, or up to the end of the connection, decoded by
/// `HTTPMessageDecoder` as they arrive, so a response that breaks the grammar or a limit fails at
/// once (`.invalidHTTP` or `.responseTooLarge`), whatever the server sends.
/// Thread rule: a value type; `send` from any task (the socket work runs on a thread of its own,
/// not on the caller's). Cost: a thread and a TCP connection per request (about 0.1 ms on
/// loopback; with TLS a handshake, about 1 ms more) plus one copy of the response.
package struct JanusHTTPClient: Sendable {
    /// The server's host name or numeric address (IPv6 without brackets).
    package var host: String
    /// The server's TCP port.
    package var port: UInt16
    /// TLS settings for `https`; nil: plain HTTP.
    package var tls: TLSClientSettings?
    /// The largest response taken (bytes); a larger one fails with `.responseTooLarge`.
    package var maxResponseBytes = 1 << 20
    /// The longest wait for the next bytes of a response (seconds); nil: only the deadline of
    /// `send` bounds it. Keep it above the server's long-poll hold time when there is one.
    package var idleTimeoutSeconds: Double?

    /// A plain HTTP client for the numeric address `server`. Cost: none.
    package init(server: SocketAddress) {
        let text = "\(server)"
        let hostPart = text[..<(text.lastIndex(of: ":") ?? text.endIndex)]
        host = String(hostPart.hasPrefix("[") ? hostPart.dropFirst().dropLast() : hostPart)
        port = server.port
    }

    /// A client for `host` at `port`, through TLS when `tls` is given. Cost: none.
    package init(host: String, port: UInt16, tls: TLSClientSettings?) {
        self.host = host
        self.port = port
        self.tls = tls
    }

    /// The Host field's value.
    var hostField: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == (tls == nil ? 80 : 443) ? name : "\(name):\(port)"
    }

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
            // A thread of its own, not a global dispatch queue: a long poll blocks for up to 30 s,
            // and on Linux the dispatch pool (which Swift's global executor shares) adds a worker
            // for blocked ones only after about a second, so every request waited that long.
            _ = TransportThread(name: "janus-http") {
                continuation.resume(
                    returning: client.exchange(method: method, path: path, body: body, timeoutSeconds: timeoutSeconds))
            }
        }
        return try result.get()
    }

    /// The blocking exchange, on the calling thread.
    func exchange(method: String, path: String, body: [UInt8]?, timeoutSeconds: Double) -> Result<Response, JanusError> {
        let deadline = MonotonicTime.now + .nanoseconds(Int64(max(timeoutSeconds, 0.001) * 1e9))
        var fields = [("Host", hostField), ("Connection", "close"), ("Accept", "application/json")]
        if let body { fields += [("Content-Type", "application/json"), ("Content-Length", "\(body.count)")] }
        var request: [UInt8]
        do throws(HTTPMessageError) {
            request = try HTTPHead.request(method, path, fields).encoded()
        } catch {
            return .failure(.badURL("cannot write the request \(method) \(path): \(error)"))
        }
        if let body { request += body }
        let stream: ClientStream
        do {
            stream = try ClientStream.connect(host: host, port: port, tls: tls, deadline: deadline)
        } catch {
            return .failure(JanusError(error))
        }
        defer { stream.close() }

        // Send the request.
        do {
            try stream.write(request, deadline: deadline)
        } catch {
            if case .timeout = error { return .failure(.timeout("sending \(method) \(path)")) }
            return .failure(JanusError(error))
        }

        // Read until the response is complete or the server closes, decoding as the bytes come.
        var decoder = HTTPMessageDecoder(.response(toMethod: method), limits: limits)
        var received = 0
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            var wait = deadline
            if let idle = idleTimeoutSeconds {
                wait = min(deadline, MonotonicTime.now + .nanoseconds(Int64(min(max(idle, 0.001), 60) * 1e9)))
            }
            let n: Int
            do {
                n = try stream.read(into: &chunk, deadline: wait)
            } catch {
                if case .timeout = error {
                    return .failure(.timeout("waiting for the response to \(method) \(path) (\(received) bytes received)"))
                }
                return .failure(JanusError(error))
            }
            if n == 0 { break }
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
    package static func parse(_ data: [UInt8], complete: Bool) throws(JanusError) -> Response? {
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
