// A small HTTP/1.1 server over a TCP socket, for `revue-media webrtc` and the WHIP endpoint of
// RevueMedia: one request per connection (the response closes it), bounded in every direction so
// that a bad client costs a thread for at most the read timeout and a few dozen KiB, and never
// more than `maxConnections` threads at once (and one client address never more than
// `connectionsPerClient` of them). Requests that break the limits or the grammar get 400, 405,
// 411, 413 or 431.
internal import CMediaShims
import Dispatch
import MediaBase
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Why an `HTTPServer` could not start. Thread rule: a value. Cost: none.
package enum HTTPServerError: Error, CustomStringConvertible {
    /// The host is not an IPv4 address.
    case notIPv4(String)
    /// The socket could not be opened, bound or listened on (why).
    case cannotListen(String)

    package var description: String {
        switch self {
        case .notIPv4(let host): "\(host) is not an IPv4 address"
        case .cannotListen(let why): why
        }
    }
}

/// One parsed request. Thread rule: a value. Cost: none.
package struct HTTPRequest {
    /// The method token as sent (`GET`, `POST`).
    package var method: String
    /// The request target's path (the query, if any, is dropped).
    package var path: String
    /// Header fields with lower-case names; a repeated field keeps its last value.
    package var headers: [String: String]
    /// The body (`Content-Length` bytes).
    package var body: [UInt8]
    /// The client's numeric address (`127.0.0.1`, `::1`), without the port; empty when unknown.
    package var client: String = ""
}

/// A response: status, extra header fields, body. Thread rule: a value. Cost: none.
package struct HTTPResponse {
    /// The status code.
    package var status: Int
    /// Header fields besides Content-Length, Connection and Cache-Control, which `write` adds.
    package var headers: [(String, String)] = []
    /// The body.
    package var body: [UInt8] = []

    /// A response with `status`, `headers` and `body`.
    package init(status: Int, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A plain-text response (for errors).
    package static func text(_ status: Int, _ message: String, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: [("Content-Type", "text/plain; charset=utf-8")] + headers,
            body: Array((message + "\n").utf8))
    }

    /// The reason phrase for the statuses this server sends.
    package static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 201: return "Created"
        case 204: return "No Content"
        case 400: return "Bad Request"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 408: return "Request Timeout"
        case 411: return "Length Required"
        case 413: return "Content Too Large"
        case 415: return "Unsupported Media Type"
        case 421: return "Misdirected Request"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 503: return "Service Unavailable"
        default: return "Status"
        }
    }
}

/// The listening socket, its accept thread and one thread per connection.
/// Thread rule: `start` and `stop` from one thread; the handler runs on connection threads, any
/// number at once (up to `maxConnections`). Cost: one thread, plus one per open connection.
package final class HTTPServer: Sendable {
    /// Limits on what a client may send. Thread rule: a value. Cost: none.
    package struct Limits {
        /// Request line and header fields together, bytes.
        package var headerBytes = 8 * 1024
        /// Header fields.
        package var headerCount = 64
        /// Body bytes (`Content-Length`).
        package var bodyBytes = 64 * 1024
        /// Seconds a client may take to send the whole request.
        package var readTimeout = 5.0
        /// Seconds a client may stay silent between two reads (a connection that sends nothing,
        /// or trickles its head a byte at a time slower than this, is closed).
        package var idleTimeout = 2.0
        /// Connections served at once; more wait in the listen backlog.
        package var maxConnections = 16
        /// Connections one client address may hold at once; a further one is closed unanswered
        /// as soon as it is accepted, so one address cannot hold every slot.
        package var connectionsPerClient = 4

        package init() {}
    }

    /// Methods this server knows; any other token gets 405 (a malformed one gets 400).
    package static let knownMethods: Set<String> = [
        "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT",
    ]

    package let limits: Limits
    /// The port bound (the one asked for, or the one the system chose for port 0).
    package let port: UInt16
    private let listener: TCPSocket
    private let handler: @Sendable (HTTPRequest) -> HTTPResponse
    private let open = DispatchSemaphore(value: 0)
    private let stopping = Atomic<Bool>(false)
    private let acceptDone = DispatchSemaphore(value: 0)
    /// Requests answered, and requests refused before the handler (bad grammar or limits).
    package let served = Atomic<Int>(0), refused = Atomic<Int>(0)
    /// Connections closed because the client stalled (the idle or read timeout passed), and
    /// connections closed at accept because their address held `connectionsPerClient` already.
    package let timedOut = Atomic<Int>(0), turnedAway = Atomic<Int>(0)
    /// Open connections per client address (an entry goes when its count reaches zero).
    private let perClient = Mutex<[String: Int]>([:])

    /// Binds `host:port` (an IPv4 address) and listens. Throws `HTTPServerError` when it cannot.
    package init(
        host: String, port: UInt16, limits: Limits = Limits(), handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse
    ) throws(HTTPServerError) {
        self.limits = limits
        self.handler = handler
        var numeric = in_addr()
        guard inet_pton(AF_INET, host, &numeric) == 1, let address = try? SocketAddress(host: host, port: port) else {
            throw .notIPv4(host)
        }
        do throws(Errno) {
            let listener = try TCPSocket.listen(on: address)
            do throws(Errno) {
                self.port = try listener.localAddress().port
            } catch {
                listener.close()
                throw error
            }
            self.listener = listener
        } catch {
            throw .cannotListen("cannot listen on \(host):\(port): \(error)")
        }
        for _ in 0..<limits.maxConnections { open.signal() }
    }

    /// Starts accepting on a thread of its own.
    package func start() {
        _ = TransportThread(name: "revue.http.accept") { [self] in
            defer { acceptDone.signal() }
            while !stopping.load(ordering: .relaxed) {
                guard (try? listener.poll(.readable, timeoutMilliseconds: 100)) == true, let client = try? listener.accept()
                else {
                    continue
                }
                let address = (try? client.peerAddress())?.host ?? ""
                let admitted = perClient.withLock { counts -> Bool in
                    guard counts[address, default: 0] < limits.connectionsPerClient else { return false }
                    counts[address, default: 0] += 1
                    return true
                }
                guard admitted else {
                    turnedAway.add(1, ordering: .relaxed)
                    client.close()
                    continue
                }
                open.wait()
                _ = TransportThread(name: "revue.http.connection") { [self] in
                    let slot = ClientSlot { [self] in
                        perClient.withLock { counts in
                            let left = counts[address, default: 1] - 1
                            counts[address] = left > 0 ? left : nil
                        }
                    }
                    defer {
                        slot.release()
                        open.signal()
                    }
                    serve(client, from: address, slot: slot)
                }
            }
        }
    }

    /// Stops accepting and closes the listening socket; connections in progress finish.
    package func stop() {
        stopping.store(true, ordering: .relaxed)
        acceptDone.wait()
        listener.close()
    }

    /// Reads one request, answers it and closes the connection.
    private func serve(_ client: TCPSocket, from address: String, slot: ClientSlot) {
        defer { client.close() }
        let response: HTTPResponse
        switch read(client) {
        case .success(var request):
            request.client = address
            response = handler(request)
            served.add(1, ordering: .relaxed)
        case .failure(let refusal):
            refused.add(1, ordering: .relaxed)
            guard let status = refusal.status else { return }
            response = .text(status, refusal.message)
        }
        write(response, to: client, slot: slot)
    }

    /// One connection's place in its address's count. It is given back once the response is
    /// sent and before the client sees the end of the stream, so a client that opens its next
    /// connection as soon as one ends is never turned away by the one still draining; the
    /// drain that follows is bounded and still holds one of the `maxConnections` slots.
    final class ClientSlot: Sendable {
        private let giveBack: @Sendable () -> Void
        private let held = Atomic<Bool>(true)

        init(giveBack: @escaping @Sendable () -> Void) { self.giveBack = giveBack }

        /// Gives the place back; later calls do nothing. Any thread.
        func release() {
            guard held.exchange(false, ordering: .relaxed) else { return }
            giveBack()
        }
    }

    /// Why a request was not handed to the handler (nil status: the client went away).
    struct Refusal: Error {
        var status: Int?
        var message: String
    }

    /// Reads and parses one request within the limits and the read timeout (the grammar and the
    /// size limits are `HTTPMessageDecoder`'s, the method and framing rules this server's).
    private func read(_ client: TCPSocket) -> Result<HTTPRequest, Refusal> {
        let deadline = MonotonicTime.now + .milliseconds(Int(limits.readTimeout * 1000))
        var decoder = HTTPMessageDecoder(
            .request,
            limits: HTTPMessageLimits(headBytes: limits.headerBytes, fieldCount: limits.headerCount, bodyBytes: limits.bodyBytes))
        var chunk = [UInt8](repeating: 0, count: 4096)
        var received = 0
        var checked = false
        while true {
            let n: Int
            do throws(Errno) {
                let idle = MonotonicTime.now + .milliseconds(Int(limits.idleTimeout * 1000))
                try client.wait(for: .readable, deadline: min(deadline, idle))
                let received = chunk.withUnsafeMutableBytes { raw in Result { () throws(Errno) in try client.receive(into: raw) }
                }
                guard let count = try received.get() else { continue }
                n = count
            } catch {
                guard error == .timedOut else { return .failure(Refusal(status: nil, message: "receive failed: \(error)")) }
                timedOut.add(1, ordering: .relaxed)
                // A client that sent nothing and stopped: not a request.
                return .failure(Refusal(status: received == 0 ? nil : 408, message: "the request took too long"))
            }
            guard n > 0 else { return .failure(Refusal(status: nil, message: "the client closed the connection")) }
            received += n
            do {
                let message = try decoder.append(chunk[0..<n])
                if !checked, let head = decoder.head {
                    checked = true
                    if let refusal = Self.refusal(head) { return .failure(refusal) }
                }
                guard let message, case .request(let method, let target, _) = message.head.startLine else { continue }
                var headers: [String: String] = [:]
                for field in message.head.fields { headers[field.name] = field.value }
                let path = String(target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0])
                return .success(HTTPRequest(method: method, path: path, headers: headers, body: message.body))
            } catch {
                return .failure(Self.refusal(error))
            }
        }
    }

    /// This server's rules on a parsed head: known methods, no transfer coding, a length for POST.
    private static func refusal(_ head: HTTPHead) -> Refusal? {
        guard case .request(let method, let target, _) = head.startLine else {
            return Refusal(status: 400, message: "not a request")
        }
        guard target.hasPrefix("/"), method.utf8.allSatisfy({ ($0 >= 65 && $0 <= 90) || $0 == 45 }) else {
            return Refusal(status: 400, message: "malformed request line")
        }
        guard knownMethods.contains(method) else { return Refusal(status: 405, message: "method \(method) is not allowed") }
        if head.field("transfer-encoding") != nil {
            return Refusal(status: 501, message: "Transfer-Encoding is not supported; send Content-Length")
        }
        if method == "POST" && head.field("content-length") == nil {
            return Refusal(status: 411, message: "Content-Length is required")
        }
        return nil
    }

    /// The status for a request the codec refused.
    private static func refusal(_ error: HTTPMessageError) -> Refusal {
        switch error {
        case .headTooLarge, .tooManyFields: Refusal(status: 431, message: "\(error)")
        case .bodyTooLarge: Refusal(status: 413, message: "\(error)")
        case .unsupportedTransferCoding: Refusal(status: 501, message: "\(error); send Content-Length")
        default: Refusal(status: 400, message: "\(error)")
        }
    }

    /// Sends the response, with `Content-Length` and `Connection: close`, then shuts the socket.
    private func write(_ response: HTTPResponse, to client: TCPSocket, slot: ClientSlot) {
        let fixed = [
            ("Content-Length", "\(response.body.count)"), ("Connection", "close"), ("Cache-Control", "no-store"),
        ]
        let head = HTTPHead.response(response.status, reason: HTTPResponse.reason(response.status), response.headers + fixed)
        // A handler's field that cannot be written (a line break in a value) gets a 500 instead.
        let bytes =
            (try? head.encoded()).map { $0 + response.body }
            ?? ((try? HTTPHead.response(500, reason: HTTPResponse.reason(500), [("Content-Length", "0")] + fixed.dropFirst())
                .encoded()) ?? [])
        let sendDeadline = MonotonicTime.now + .milliseconds(Int(limits.readTimeout * 1000))
        _ = bytes.withUnsafeBytes { raw in Result { () throws(Errno) in try client.sendAll(raw, deadline: sendDeadline) } }
        slot.release()
        client.shutdown(.write)
        // Read what the client still sends (an oversize body) for a moment before closing:
        // closing with unread bytes resets the connection, and the client may lose the response.
        let deadline = MonotonicTime.now + .milliseconds(500)
        var drained = 0
        var chunk = [UInt8](repeating: 0, count: 4096)
        while drained < 1 << 20, MonotonicTime.now < deadline {
            guard let ready = try? client.poll(.readable, timeoutMilliseconds: 100) else { break }
            guard ready else { continue }
            let result = chunk.withUnsafeMutableBytes { raw in Result { () throws(Errno) in try client.receive(into: raw) } }
            guard case .success(let received) = result else { break }
            guard let n = received else { continue }
            guard n > 0 else { break }
            drained += n
        }
    }
}
