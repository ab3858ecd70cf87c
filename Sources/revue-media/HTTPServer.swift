// A small HTTP/1.1 server over a TCP socket for `revue-media webrtc`: one request per
// connection (the response closes it), bounded in every direction so that a bad client costs a
// thread for at most the read timeout and a few dozen KiB, and never more than `maxConnections`
// threads at once. Requests that break the limits or the grammar get 400, 405, 411, 413 or 431.
import Dispatch
import MediaCore
import RevueCommandLine
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// One parsed request. Thread rule: a value. Cost: none.
struct HTTPRequest {
    /// The method token as sent (`GET`, `POST`).
    var method: String
    /// The request target's path (the query, if any, is dropped).
    var path: String
    /// Header fields with lower-case names; a repeated field keeps its last value.
    var headers: [String: String]
    /// The body (`Content-Length` bytes).
    var body: [UInt8]
}

/// A response: status, extra header fields, body. Thread rule: a value. Cost: none.
struct HTTPResponse {
    /// The status code.
    var status: Int
    /// Header fields besides Content-Length, Connection and Cache-Control, which `write` adds.
    var headers: [(String, String)] = []
    /// The body.
    var body: [UInt8] = []

    /// A plain-text response (for errors).
    static func text(_ status: Int, _ message: String, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: [("Content-Type", "text/plain; charset=utf-8")] + headers,
            body: Array((message + "\n").utf8))
    }

    /// The reason phrase for the statuses this server sends.
    static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 201: return "Created"
        case 204: return "No Content"
        case 400: return "Bad Request"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 411: return "Length Required"
        case 413: return "Content Too Large"
        case 415: return "Unsupported Media Type"
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
final class HTTPServer: Sendable {
    /// Limits on what a client may send. Thread rule: a value. Cost: none.
    struct Limits {
        /// Request line and header fields together, bytes.
        var headerBytes = 8 * 1024
        /// Header fields.
        var headerCount = 64
        /// Body bytes (`Content-Length`).
        var bodyBytes = 64 * 1024
        /// Seconds a client may take to send the whole request.
        var readTimeout = 5.0
        /// Connections served at once; more wait in the listen backlog.
        var maxConnections = 16
    }

    /// Methods this server knows; any other token gets 405 (a malformed one gets 400).
    static let knownMethods: Set<String> = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT"]

    let limits: Limits
    /// The port bound (the one asked for, or the one the system chose for port 0).
    let port: UInt16
    private let fd: Int32
    private let handler: @Sendable (HTTPRequest) -> HTTPResponse
    private let open = DispatchSemaphore(value: 0)
    private let stopping = Atomic<Bool>(false)
    private let acceptDone = DispatchSemaphore(value: 0)
    /// Requests answered, and requests refused before the handler (bad grammar or limits).
    let served = Atomic<Int>(0), refused = Atomic<Int>(0)

    /// Binds `host:port` (an IPv4 address) and listens. Throws `InputError` when it cannot.
    init(host: String, port: UInt16, limits: Limits = Limits(), handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse)
        throws
    {
        self.limits = limits
        self.handler = handler
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            throw UsageError(description: "--host \(host): not an IPv4 address")
        }
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard s >= 0 else { throw InputError(description: "cannot open a TCP socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(s, 64) == 0 else {
            let reason = String(cString: strerror(errno))
            close(s)
            throw InputError(description: "cannot listen on \(host):\(port): \(reason)")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(s, $0, &length) }
        }
        self.port = UInt16(bigEndian: actual.sin_port)
        fd = s
        for _ in 0..<limits.maxConnections { open.signal() }
    }

    /// Starts accepting on a thread of its own.
    func start() {
        _ = TransportThread(name: "revue.http.accept") { [self] in
            defer { acceptDone.signal() }
            while !stopping.load(ordering: .relaxed) {
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&pfd, 1, 100) > 0 else { continue }
                let client = accept(fd, nil, nil)
                guard client >= 0 else { continue }
                open.wait()
                _ = TransportThread(name: "revue.http.connection") { [self] in
                    defer { open.signal() }
                    serve(client)
                }
            }
        }
    }

    /// Stops accepting and closes the listening socket; connections in progress finish.
    func stop() {
        stopping.store(true, ordering: .relaxed)
        acceptDone.wait()
        close(fd)
    }

    /// Reads one request, answers it and closes the connection.
    private func serve(_ client: Int32) {
        defer { close(client) }
        let response: HTTPResponse
        switch read(client) {
        case .success(let request):
            response = handler(request)
            served.add(1, ordering: .relaxed)
        case .failure(let refusal):
            refused.add(1, ordering: .relaxed)
            guard let status = refusal.status else { return }
            response = .text(status, refusal.message)
        }
        write(response, to: client)
    }

    /// Why a request was not handed to the handler (nil status: the client went away).
    struct Refusal: Error {
        var status: Int?
        var message: String
    }

    /// Reads and parses one request within the limits and the read timeout.
    private func read(_ client: Int32) -> Result<HTTPRequest, Refusal> {
        let deadline = Date().addingTimeInterval(limits.readTimeout)
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        /// Reads more into `buffer`; nil on success, else the refusal.
        func more() -> Refusal? {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return Refusal(status: 408, message: "the request took too long") }
            var pfd = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, Int32(max(1, left * 1000)))
            if ready == 0 { return Refusal(status: 408, message: "the request took too long") }
            guard ready > 0 else { return Refusal(status: nil, message: "poll failed") }
            let n = recv(client, &chunk, chunk.count, 0)
            guard n > 0 else { return Refusal(status: nil, message: "the client closed the connection") }
            buffer += chunk[0..<n]
            return nil
        }
        // The head: up to the blank line, within headerBytes.
        var headEnd: Int?
        while headEnd == nil {
            if let refusal = more() {
                // A partial head from a client that stopped sending: not a request.
                return .failure(buffer.isEmpty ? Refusal(status: nil, message: refusal.message) : refusal)
            }
            headEnd = Self.find([13, 10, 13, 10], in: buffer)
            if headEnd == nil, buffer.count > limits.headerBytes {
                return .failure(Refusal(status: 431, message: "the request head exceeds \(limits.headerBytes) bytes"))
            }
        }
        let end = headEnd!
        if end > limits.headerBytes {
            return .failure(Refusal(status: 431, message: "the request head exceeds \(limits.headerBytes) bytes"))
        }
        guard let head = String(validatingUTF8CString: buffer[0..<end]) else {
            return .failure(Refusal(status: 400, message: "the request head is not text"))
        }
        var lines = head.components(separatedBy: "\r\n")
        let requestLine = lines.removeFirst().split(separator: " ", omittingEmptySubsequences: false)
        guard requestLine.count == 3, requestLine[2] == "HTTP/1.1" || requestLine[2] == "HTTP/1.0",
            !requestLine[0].isEmpty, requestLine[0].allSatisfy({ $0.isASCII && ($0.isUppercase || $0 == "-") }),
            requestLine[1].hasPrefix("/")
        else { return .failure(Refusal(status: 400, message: "malformed request line")) }
        let method = String(requestLine[0])
        guard Self.knownMethods.contains(method) else {
            return .failure(Refusal(status: 405, message: "method \(method) is not allowed"))
        }
        guard lines.count <= limits.headerCount else {
            return .failure(Refusal(status: 431, message: "more than \(limits.headerCount) header fields"))
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex,
                !line[..<colon].contains(where: { $0 == " " || $0 == "\t" })
            else { return .failure(Refusal(status: 400, message: "malformed header field")) }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingWhitespace
        }
        if headers["transfer-encoding"] != nil {
            return .failure(Refusal(status: 501, message: "Transfer-Encoding is not supported; send Content-Length"))
        }
        var length = 0
        if let text = headers["content-length"] {
            guard let n = Int(text), n >= 0 else { return .failure(Refusal(status: 400, message: "bad Content-Length")) }
            length = n
        } else if method == "POST" {
            return .failure(Refusal(status: 411, message: "Content-Length is required"))
        }
        guard length <= limits.bodyBytes else {
            return .failure(Refusal(status: 413, message: "the body exceeds \(limits.bodyBytes) bytes"))
        }
        let bodyStart = end + 4
        while buffer.count - bodyStart < length {
            if let refusal = more() { return .failure(refusal) }
        }
        let path = String(requestLine[1].split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0])
        return .success(
            HTTPRequest(
                method: method, path: path, headers: headers, body: Array(buffer[bodyStart..<(bodyStart + length)])))
    }

    /// Sends the response, with `Content-Length` and `Connection: close`, then shuts the socket.
    private func write(_ response: HTTPResponse, to client: Int32) {
        var head = "HTTP/1.1 \(response.status) \(HTTPResponse.reason(response.status))\r\n"
        for (name, value) in response.headers { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(response.body.count)\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n"
        let bytes = Array(head.utf8) + response.body
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { break }
            sent += n
        }
        shutdown(client, Int32(SHUT_WR))
        // Read what the client still sends (an oversize body) for a moment before closing:
        // closing with unread bytes resets the connection, and the client may lose the response.
        let deadline = Date().addingTimeInterval(0.5)
        var drained = 0
        var chunk = [UInt8](repeating: 0, count: 4096)
        while drained < 1 << 20, deadline.timeIntervalSinceNow > 0 {
            var pfd = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 100) >= 0 else { break }
            guard pfd.revents != 0 else { continue }
            let n = recv(client, &chunk, chunk.count, 0)
            guard n > 0 else { break }
            drained += n
        }
    }

    /// Where `needle` starts in `haystack`, or nil.
    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] {
            if Array(haystack[i..<(i + needle.count)]) == needle { return i }
        }
        return nil
    }
}

extension String {
    /// UTF-8 text from bytes, nil when they are not valid UTF-8 or contain NUL.
    fileprivate init?(validatingUTF8CString bytes: ArraySlice<UInt8>) {
        guard !bytes.contains(0), let s = String(bytes: bytes, encoding: .utf8) else { return nil }
        self = s
    }
}
