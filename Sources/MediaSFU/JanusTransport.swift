// How a Janus session reaches its server: the URL's scheme picks the transport. http:// and
// https:// speak the REST API (a request per connection, events by long poll); ws:// and wss://
// speak the same JSON messages over one WebSocket connection (subprotocol `janus-protocol`), on
// which Janus pushes the events. Both add the credentials (`apisecret`, `token`) to every request.
// JanusSession and JanusVideoRoom see only `JanusTransport`. docs/sfu.md.
import Dispatch
import Glibc
import MediaBase
import MediaTransport
import Synchronization

/// Where a Janus server is and how to reach it: the transport, host, port, path, TLS checks and
/// the credentials sent with every request. Thread rule: a value type. Cost: none.
package struct JanusEndpoint: Sendable, Hashable {
    /// The two API transports.
    package enum Transport: Sendable, Hashable {
        /// The REST API over HTTP/1.1 (`http`, `https`).
        case http
        /// The WebSocket API (`ws`, `wss`).
        case webSocket
    }

    /// The transport the URL's scheme names.
    package var transport: Transport
    /// The host name or numeric address (IPv6 without brackets).
    package var host: String
    /// The TCP port.
    package var port: UInt16
    /// The REST API's base path (`/janus` by default), or the WebSocket's request path (`/`).
    package var path: String
    /// TLS settings for `https` and `wss`; nil for `http` and `ws`.
    package var tls: TLSClientSettings?
    /// Janus's `api_secret`, sent as `apisecret` with every request.
    package var apiSecret: String?
    /// A token of Janus's stored-token authentication, sent as `token` with every request.
    package var token: String?

    /// A plain HTTP endpoint at the numeric address `server` with `basePath`. Cost: none.
    package init(server: SocketAddress, basePath: String = "/janus") {
        let client = JanusHTTPClient(server: server)
        transport = .http
        host = client.host
        port = client.port
        path = basePath
    }

    /// Reads `url`: `http://`, `https://`, `ws://` or `wss://`, a host name, `localhost` or a
    /// numeric address (IPv6 in brackets), an optional port (80 or 443 by default) and path
    /// (`/janus` for HTTP, `/` for WebSocket by default). No user information, query or fragment.
    /// `certificateAuthorityFile` (a PEM file) replaces the system's CAs for `https` and `wss`.
    /// Throws `.badURL` saying what is wrong. Cost: a scan of the URL; nothing is resolved here.
    package init(
        url: String, certificateAuthorityFile: String? = nil, apiSecret: String? = nil, token: String? = nil
    ) throws(JanusError) {
        guard url.utf8.count <= 2048 else { throw .badURL("longer than 2048 bytes") }
        guard url.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw .badURL("\(url) holds spaces, control or non-ASCII characters")
        }
        guard let colon = url.firstIndex(of: ":"), url[colon...].hasPrefix("://") else { throw .badURL("\(url) has no scheme") }
        let scheme = url[..<colon].lowercased()
        switch scheme {
        case "http", "https": transport = .http
        case "ws", "wss": transport = .webSocket
        default: throw .badURL("scheme \(scheme) is not http, https, ws or wss")
        }
        let secure = scheme == "https" || scheme == "wss"
        let rest = url[url.index(colon, offsetBy: 3)...]
        if rest.contains("?") || rest.contains("#") { throw .badURL("\(url) has a query or fragment") }
        let authority = rest.prefix { $0 != "/" }
        let pathPart = rest[authority.endIndex...]
        if authority.contains("@") { throw .badURL("\(url) carries user information") }
        var hostPart = Substring(authority)
        var portText: Substring?
        if hostPart.hasPrefix("[") {
            guard let close = hostPart.firstIndex(of: "]") else { throw .badURL("\(url): no ']' after the IPv6 address") }
            let after = hostPart[hostPart.index(after: close)...]
            hostPart = hostPart[hostPart.index(after: hostPart.startIndex)..<close]
            var v6 = in6_addr()
            guard inet_pton(AF_INET6, String(hostPart), &v6) == 1 else { throw .badURL("\(hostPart) is not an IPv6 address") }
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw .badURL("\(url): expected ':port' after ']'") }
                portText = after.dropFirst()
            }
        } else if let colon = hostPart.lastIndex(of: ":") {
            portText = hostPart[hostPart.index(after: colon)...]
            hostPart = hostPart[..<colon]
        }
        guard !hostPart.isEmpty, hostPart.utf8.count <= 253 else { throw .badURL("\(url) has no usable host") }
        if !hostPart.contains(":") {
            let allowed = hostPart.utf8.allSatisfy(Self.isHostByte)
            guard allowed else { throw .badURL("host \(hostPart) is not a name or address") }
        }
        if let portText {
            guard let p = UInt16(portText), p > 0 else { throw .badURL("port \(portText) is not in 1...65535") }
            port = p
        } else {
            port = secure ? 443 : 80
        }
        host = String(hostPart)
        path = pathPart.isEmpty ? (transport == .http ? "/janus" : "/") : String(pathPart)
        if transport == .http && path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        tls = secure ? TLSClientSettings(certificateAuthorityFile: certificateAuthorityFile) : nil
        self.apiSecret = apiSecret
        self.token = token
    }

    /// Whether `byte` may appear in a host name: a letter, digit, `-`, `.` or `_`.
    private static func isHostByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"):
            true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"): true
        default: false
        }
    }

    /// `message` with the credentials added. Cost: up to two dictionary copies.
    package func authenticated(_ message: JSONValue) -> JSONValue {
        var out = message
        if let apiSecret { out = out.setting("apisecret", .string(apiSecret)) }
        if let token { out = out.setting("token", .string(token)) }
        return out
    }

    /// The query string that carries the credentials on a GET (`&apisecret=...&token=...`).
    var credentialQuery: String {
        var out = ""
        if let apiSecret { out += "&apisecret=" + Self.percentEncoded(apiSecret) }
        if let token { out += "&token=" + Self.percentEncoded(token) }
        return out
    }

    /// `text` with everything but RFC 3986's unreserved characters percent-encoded.
    package static func percentEncoded(_ text: String) -> String {
        var out = ""
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 15)]], as: UTF8.self)
            }
        }
        return out
    }

    /// Opens the transport the endpoint names: an HTTP transport at once (it connects per
    /// request), a WebSocket transport once its connection and handshake are done (within
    /// `timeoutSeconds`). Thread rule: any task. Cost: for WebSocket, a connection and, with
    /// `wss`, a TLS handshake.
    package func open(timeoutSeconds: Double) async throws(JanusError) -> any JanusTransport {
        switch transport {
        case .http: return JanusHTTPTransport(endpoint: self)
        case .webSocket: return try await JanusWebSocketTransport.connect(self, timeoutSeconds: timeoutSeconds)
        }
    }
}

/// How a `JanusSession` sends requests and receives events, whatever the wire.
///
/// Thread rule: every method from any task. Cost: per implementation.
package protocol JanusTransport: AnyObject, Sendable {
    /// Where the transport goes.
    var endpoint: JanusEndpoint { get }
    /// Whether a failed `events` call ends the session (a WebSocket connection that broke took
    /// the session's events with it) rather than being retried (a long poll that failed).
    var eventFailuresAreFinal: Bool { get }
    /// Sends `message` (which carries its `transaction`) with the credentials to the session
    /// and handle given (none: the server, as `create` is), and returns Janus's immediate answer
    /// (`success`, `ack`, ...). `"janus": "error"` throws (`.unauthorized` for credentials).
    func send(_ message: JSONValue, session: UInt64?, handle: UInt64?, timeoutSeconds: Double) async throws(JanusError)
        -> JSONValue
    /// Waits for the next events of `session` (a long poll, or what the server pushed); may
    /// return none.
    func events(session: UInt64) async throws(JanusError) -> [JSONValue]
    /// Asks for the server's `info` (name, version, plugins, transports).
    func info(timeoutSeconds: Double) async throws(JanusError) -> JSONValue
    /// Ends the transport; waiting calls fail with `.closed`. Idempotent.
    func close()
}

extension JanusTransport {
    /// Reads a reply: `"janus": "error"` throws, else the JSON.
    static func checked(_ json: JSONValue) throws(JanusError) -> JSONValue {
        if json["janus"]?.string == "error" {
            throw JanusError.fromJanus(
                code: Int(json["error"]?["code"]?.int ?? 0), reason: json["error"]?["reason"]?.string ?? "")
        }
        return json
    }
}

/// The REST API over HTTP/1.1 (plain or TLS): `POST path[/session[/handle]]` per request, a
/// long poll `GET path/session` for events, the credentials in the JSON body and in the long
/// poll's query. Thread rule: any task. Cost: a TCP (and TLS) connection per request; one long
/// poll held open at all times by the session.
package final class JanusHTTPTransport: JanusTransport {
    /// Where the transport goes.
    package let endpoint: JanusEndpoint
    /// The client (host, port, TLS, limits).
    package let client: JanusHTTPClient
    /// False: a failed long poll is tried again.
    package var eventFailuresAreFinal: Bool { false }

    /// A transport for an `http`/`https` endpoint. Cost: none.
    package init(endpoint: JanusEndpoint) {
        self.endpoint = endpoint
        client = JanusHTTPClient(host: endpoint.host, port: endpoint.port, tls: endpoint.tls)
    }

    /// `POST` of the message to the session or handle's path. Cost: one connection.
    package func send(_ message: JSONValue, session: UInt64?, handle: UInt64?, timeoutSeconds: Double) async throws(JanusError)
        -> JSONValue
    {
        let path = endpoint.path + (session.map { "/\($0)" } ?? "") + (handle.map { "/\($0)" } ?? "")
        let response = try await client.send(
            method: "POST", path: path, body: endpoint.authenticated(message).bytes, timeoutSeconds: timeoutSeconds)
        return try Self.checked(try Self.json(response))
    }

    /// One long poll (up to 10 events; Janus holds it up to 30 s). Cost: one connection.
    package func events(session: UInt64) async throws(JanusError) -> [JSONValue] {
        let response = try await client.send(
            method: "GET", path: endpoint.path + "/\(session)?maxev=10" + endpoint.credentialQuery, timeoutSeconds: 45)
        let json = try Self.json(response)
        return json.array ?? [json]
    }

    /// `GET path/info`. Cost: one connection.
    package func info(timeoutSeconds: Double) async throws(JanusError) -> JSONValue {
        let query = endpoint.credentialQuery.isEmpty ? "" : "?" + endpoint.credentialQuery.dropFirst()
        return try Self.checked(
            try Self.json(
                try await client.send(method: "GET", path: endpoint.path + "/info" + query, timeoutSeconds: timeoutSeconds)))
    }

    /// Nothing to end: every request has its own connection.
    package func close() {}

    private static func json(_ response: JanusHTTPClient.Response) throws(JanusError) -> JSONValue {
        guard response.status == 200 else {
            throw .http(status: response.status, body: String(decoding: response.body.prefix(200), as: UTF8.self))
        }
        return try JSONValue.parse(response.body)
    }
}

/// The WebSocket API: one connection (plain or TLS) with subprotocol `janus-protocol`, requests
/// as text messages carrying `session_id`/`handle_id` and the credentials, answers matched by
/// transaction, events pushed by the server and queued for `events`.
///
/// A reader thread reads and decodes every frame (`WebSocketDecoder`, at most
/// `maxMessageBytes` per message), answers pings, and on a close, an end of stream or a frame
/// that breaks RFC 6455 fails every waiting call with a typed error and ends. Text that is not
/// JSON and binary messages are dropped and counted (`droppedMessages`); at most 1024 events wait
/// (older ones are dropped and counted). Thread rule: any task; `close()` when done (the reader
/// thread keeps the transport alive until then). Cost: one connection and one thread, a masked
/// frame per request.
package final class JanusWebSocketTransport: JanusTransport, @unchecked Sendable {
    // Sendable: `stream` is safe for one reader (the thread) and one writer (`writeLock`); the
    // mutable state is in `state`; the counters are atomic.
    private struct State {
        var replies: [String: CheckedContinuation<Result<JSONValue, JanusError>, Never>] = [:]
        var events: [JSONValue] = []
        var eventWaiter: CheckedContinuation<Result<[JSONValue], JanusError>, Never>?
        var failure: JanusError?
    }

    /// Where the transport goes.
    package let endpoint: JanusEndpoint
    /// The largest message taken from the server.
    package let maxMessageBytes: Int
    /// True: events come on this connection only.
    package var eventFailuresAreFinal: Bool { true }
    /// Messages dropped: not JSON, binary, or events beyond the queue's bound.
    package var droppedMessages: Int { dropped.load(ordering: .relaxed) }

    private let stream: ClientStream
    private let state = Mutex(State())
    private let writeLock = Mutex<Void>(())
    private let dropped = Atomic<Int>(0)
    private let readerDone = DispatchSemaphore(value: 0)
    private let closing = Atomic<Bool>(false)
    private static let maxQueuedEvents = 1024

    private init(endpoint: JanusEndpoint, stream: ClientStream, maxMessageBytes: Int) {
        self.endpoint = endpoint
        self.stream = stream
        self.maxMessageBytes = maxMessageBytes
    }

    /// Connects to a `ws`/`wss` endpoint and runs the opening handshake within `timeoutSeconds`,
    /// then starts the reader thread. Thread rule: any task (the blocking work runs on a thread of
    /// its own). Cost: a connection, a TLS handshake with `wss`, a thread.
    package static func connect(
        _ endpoint: JanusEndpoint, timeoutSeconds: Double, maxMessageBytes: Int = 1 << 20
    ) async throws(JanusError) -> JanusWebSocketTransport {
        let result: Result<JanusWebSocketTransport, JanusError> = await withCheckedContinuation { continuation in
            _ = TransportThread(name: "janus-ws-open") {
                continuation.resume(
                    returning: handshake(endpoint, timeoutSeconds: timeoutSeconds, maxMessageBytes: maxMessageBytes))
            }
        }
        return try result.get()
    }

    private static func handshake(
        _ endpoint: JanusEndpoint, timeoutSeconds: Double, maxMessageBytes: Int
    ) -> Result<JanusWebSocketTransport, JanusError> {
        let deadline = MonotonicTime.now + .nanoseconds(Int64(max(timeoutSeconds, 0.001) * 1e9))
        let stream: ClientStream
        do {
            stream = try ClientStream.connect(host: endpoint.host, port: endpoint.port, tls: endpoint.tls, deadline: deadline)
        } catch {
            return .failure(JanusError(error))
        }
        let handshake = WebSocketHandshake(subprotocol: "janus-protocol")
        let name = endpoint.host.contains(":") ? "[\(endpoint.host)]" : endpoint.host
        let hostField = endpoint.port == (endpoint.tls == nil ? 80 : 443) ? name : "\(name):\(endpoint.port)"
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        let limit = 16 * 1024
        var headEnd: Int?
        let request: [UInt8]
        do throws(WebSocketError) {
            request = try handshake.request(host: hostField, path: endpoint.path)
        } catch {
            stream.close()
            return .failure(.webSocket(error))
        }
        do {
            try stream.write(request, deadline: deadline)
            while headEnd == nil {
                let n = try stream.read(into: &chunk, deadline: deadline)
                guard n > 0 else {
                    stream.close()
                    return .failure(.webSocket(.handshake("the server closed the connection during the handshake")))
                }
                let from = max(received.count - 3, 0)
                received += chunk[0..<n]
                var i = from
                while i + 3 < received.count {
                    if received[i] == 13 && received[i + 1] == 10 && received[i + 2] == 13 && received[i + 3] == 10 {
                        headEnd = i + 4
                        break
                    }
                    i += 1
                }
                if headEnd == nil && received.count > limit {
                    stream.close()
                    return .failure(.webSocket(.handshake("an answer head longer than \(limit) bytes")))
                }
            }
        } catch {
            stream.close()
            if case .timeout = error { return .failure(.timeout("the WebSocket handshake with \(endpoint.host)")) }
            return .failure(JanusError(error))
        }
        let end = headEnd ?? received.count
        do {
            var decoder = HTTPMessageDecoder(
                .response(toMethod: "GET"), limits: HTTPMessageLimits(headBytes: limit, fieldCount: 100, bodyBytes: 0))
            guard let message = try decoder.append(received[0..<end]) else {
                stream.close()
                return .failure(.webSocket(.handshake("an incomplete answer")))
            }
            try handshake.check(message.head)
        } catch let error as HTTPMessageError {
            stream.close()
            return .failure(.invalidHTTP(error))
        } catch let error as WebSocketError {
            stream.close()
            return .failure(.webSocket(error))
        } catch {
            stream.close()
            return .failure(.malformed("\(error)"))
        }
        let transport = JanusWebSocketTransport(endpoint: endpoint, stream: stream, maxMessageBytes: maxMessageBytes)
        var initial = WebSocketDecoder(role: .client, maxMessageBytes: maxMessageBytes)
        initial.append(received[end...])
        let decoder = initial
        _ = TransportThread(name: "janus-ws") { transport.read(decoder) }
        return .success(transport)
    }

    /// The reader thread: reads, decodes and routes until the connection ends.
    private func read(_ initial: WebSocketDecoder) {
        defer { readerDone.signal() }
        var decoder = initial
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            do {
                while let message = try decoder.next() {
                    switch message {
                    case .text(let text):
                        if let json = try? JSONValue.parse(Array(text.utf8)) { route(json) } else { drop() }
                    case .binary: drop()
                    case .ping(let payload): writeFrame(WebSocketFrame.encode(.pong, payload, mask: RandomBytes.bytes(4)))
                    case .pong: break
                    case .close(let code, let reason):
                        writeFrame(WebSocketFrame.close(code: 1000, mask: RandomBytes.bytes(4)))
                        fail(.closed("the server closed the WebSocket (\(code.map(String.init) ?? "no code") \(reason))"))
                        return
                    }
                }
            } catch {
                writeFrame(
                    WebSocketFrame.close(
                        code: error == .messageTooLarge(limit: maxMessageBytes) ? 1009 : 1002, mask: RandomBytes.bytes(4)))
                fail(.webSocket(error))
                return
            }
            let n: Int
            do {
                n = try stream.read(into: &chunk, deadline: .now + .seconds(1))
            } catch {
                if closing.load(ordering: .relaxed) {
                    fail(.closed("the WebSocket transport was closed"))
                    return
                }
                if case .timeout = error { continue }
                fail(JanusError(error))
                return
            }
            guard n > 0 else {
                fail(.closed("the server ended the WebSocket connection"))
                return
            }
            decoder.append(chunk[0..<n])
        }
    }

    private func drop() { dropped.add(1, ordering: .relaxed) }

    /// An answer to a waiting request, else an event.
    private func route(_ json: JSONValue) {
        let reply: CheckedContinuation<Result<JSONValue, JanusError>, Never>?
        var waiter: CheckedContinuation<Result<[JSONValue], JanusError>, Never>?
        var batch: [JSONValue] = []
        reply = state.withLock { s in
            if let t = json["transaction"]?.string, let c = s.replies.removeValue(forKey: t) { return c }
            s.events.append(json)
            if s.events.count > Self.maxQueuedEvents {
                s.events.removeFirst()
                dropped.add(1, ordering: .relaxed)
            }
            if let w = s.eventWaiter {
                waiter = w
                s.eventWaiter = nil
                batch = s.events
                s.events = []
            }
            return nil
        }
        reply?.resume(returning: .success(json))
        waiter?.resume(returning: .success(batch))
    }

    /// Fails every waiting call with `error`; later calls fail with it too.
    private func fail(_ error: JanusError) {
        let (replies, waiter) = state.withLock { s in
            if s.failure == nil { s.failure = error }
            let r = Array(s.replies.values)
            s.replies.removeAll()
            let w = s.eventWaiter
            s.eventWaiter = nil
            return (r, w)
        }
        let failure = state.withLock { $0.failure } ?? error
        for r in replies { r.resume(returning: .failure(failure)) }
        waiter?.resume(returning: .failure(failure))
    }

    /// Writes one whole frame (at most 2 s); a failure is left to the reader to notice.
    @discardableResult
    private func writeFrame(_ frame: [UInt8], seconds: Double = 2) -> ClientStreamError? {
        let stream = stream
        let deadline = MonotonicTime.now + .nanoseconds(Int64(seconds * 1e9))
        let result: Result<Void, ClientStreamError> = writeLock.withLock { _ in
            Result { () throws(ClientStreamError) in try stream.write(frame, deadline: deadline) }
        }
        if case .failure(let error) = result { return error }
        return nil
    }

    /// Sends the message as a text frame with `session_id`, `handle_id` and the credentials, and
    /// waits for the first message with its transaction. Cost: one frame written from a short-lived
    /// thread, a timer.
    package func send(_ message: JSONValue, session: UInt64?, handle: UInt64?, timeoutSeconds: Double) async throws(JanusError)
        -> JSONValue
    {
        var body = endpoint.authenticated(message)
        if let session { body = body.setting("session_id", .int(Int64(session))) }
        if let handle { body = body.setting("handle_id", .int(Int64(handle))) }
        let transaction = body["transaction"]?.string ?? ICEAgent.randomICEString(12)
        body = body.setting("transaction", .string(transaction))
        let frame = WebSocketFrame.encode(.text, body.bytes, mask: RandomBytes.bytes(4))
        let result: Result<JSONValue, JanusError> = await withCheckedContinuation { continuation in
            let failure: JanusError? = state.withLock { s in
                if let f = s.failure { return f }
                s.replies[transaction] = continuation
                return nil
            }
            if let failure {
                continuation.resume(returning: .failure(failure))
                return
            }
            // Its own thread: a server that stops reading would hold a dispatch worker here.
            _ = TransportThread(name: "janus-ws-write") {
                if let error = self.writeFrame(frame, seconds: timeoutSeconds) { self.expire(transaction, JanusError(error)) }
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + timeoutSeconds) {
                self.expire(transaction, .timeout("Janus's answer to transaction \(transaction)"))
            }
        }
        return try Self.checked(try result.get())
    }

    private func expire(_ transaction: String, _ error: JanusError) {
        state.withLock { $0.replies.removeValue(forKey: transaction) }?.resume(returning: .failure(error))
    }

    /// The events queued since the last call, waiting for the next one when none are. One caller
    /// at a time (a second waiter replaces the first, which gets none).
    package func events(session: UInt64) async throws(JanusError) -> [JSONValue] {
        let result: Result<[JSONValue], JanusError> = await withCheckedContinuation { continuation in
            let resume: (CheckedContinuation<Result<[JSONValue], JanusError>, Never>?, Result<[JSONValue], JanusError>?) =
                state.withLock { s in
                    if !s.events.isEmpty {
                        let batch = s.events
                        s.events = []
                        return (nil, .success(batch))
                    }
                    if let f = s.failure { return (nil, .failure(f)) }
                    let old = s.eventWaiter
                    s.eventWaiter = continuation
                    return (old, nil)
                }
            resume.0?.resume(returning: .success([]))
            if let now = resume.1 { continuation.resume(returning: now) }
        }
        return try result.get()
    }

    /// `{"janus": "info"}`. Cost: one frame.
    package func info(timeoutSeconds: Double) async throws(JanusError) -> JSONValue {
        try await send(["janus": "info"], session: nil, handle: nil, timeoutSeconds: timeoutSeconds)
    }

    /// Sends a close frame, ends the connection and the reader thread; waiting calls fail with
    /// `.closed`. Idempotent; returns at once (the close runs on a thread of its own).
    package func close() {
        guard !closing.exchange(true, ordering: .acquiringAndReleasing) else { return }
        fail(.closed("the WebSocket transport was closed"))
        _ = TransportThread(name: "janus-ws-close") {
            self.writeFrame(WebSocketFrame.close(code: 1000, mask: RandomBytes.bytes(4)), seconds: 0.5)
            self.stream.shutdown()
            self.readerDone.wait()
            self.stream.close()
        }
    }
}
