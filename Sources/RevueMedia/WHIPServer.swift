// A minimal WHIP endpoint (WebRTC-HTTP ingestion, RFC 9725) for programs built on
// `RTCPeerConnection`: `POST` an SDP offer, get `201 Created` with the SDP answer and the
// `Location` of the session; `DELETE` that location ends it. Plain HTTP/1.1 over TCP, one
// request per connection, bounded in size, time and connections, so that a bad client costs
// little. No TLS: put it behind a reverse proxy for anything but a local network.
import Dispatch
import MediaCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A WHIP endpoint: hands each offer `POST`ed to `path` to the program and answers with what it
/// returns; each session gets a resource at `path/<id>` that `DELETE` ends. The answer carries
/// every candidate (this endpoint takes no trickled candidates: `PATCH` gets 405), so answer
/// with an `RTCPeerConnection` whose `gatheringWait` is not zero. Malformed or oversize requests
/// get 400, 405, 413, 415 or 431 and never reach the program.
/// Thread rule: `stop` from any thread; `answer` and `end` run on the server's connection threads
/// (one per request, up to `maxConnections` at once), asynchronously from a task.
/// Cost: one accept thread, plus one thread per open connection; a request is at most 8 KiB of
/// head and 64 KiB of body and must arrive within 5 s.
public final class WHIPServer: Sendable {
    /// The TCP port bound (the one asked for, or the one the system chose for port 0).
    public let port: UInt16
    /// The path offers are posted to (`/whip` by default).
    public let path: String
    /// Connections served at once; more wait in the listen backlog.
    public static let maxConnections = 8

    private let fd: Int32
    private let answer: @Sendable (_ offer: RTCSessionDescription, _ id: String) async throws -> RTCSessionDescription
    private let end: @Sendable (_ id: String) async -> Void
    private let sessions = Mutex<Set<String>>([])
    private let stopping = Atomic<Bool>(false)
    private let slots = DispatchSemaphore(value: WHIPServer.maxConnections)
    private let acceptDone = DispatchSemaphore(value: 0)

    /// Listens on `host:port` (an IPv4 address; port 0: any free port) and starts accepting.
    /// `answer` gets each offer and the new session's id and returns the answer (an `RTCError`
    /// it throws becomes `400` with its description, any other error `500`); `end` is told the
    /// id of each session a client deletes. Throws `.invalidConfiguration` for a host that is
    /// not an IPv4 address, `.setup` when the port cannot be bound.
    /// Thread rule: any thread. Cost: a socket and a thread.
    public init(
        host: String = "127.0.0.1", port: UInt16 = 0, path: String = "/whip",
        answer: @escaping @Sendable (_ offer: RTCSessionDescription, _ id: String) async throws -> RTCSessionDescription,
        end: @escaping @Sendable (_ id: String) async -> Void = { _ in }
    ) throws(RTCError) {
        self.path = path
        self.answer = answer
        self.end = end
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            throw .invalidConfiguration("WHIP host '\(host)' is not an IPv4 address")
        }
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard s >= 0 else { throw .setup("cannot open a TCP socket: \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(s, 32) == 0 else {
            let reason = String(cString: strerror(errno))
            close(s)
            throw .setup("cannot listen on \(host):\(port): \(reason)")
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(s, $0, &length) }
        }
        self.port = UInt16(bigEndian: actual.sin_port)
        fd = s
        _ = TransportThread(name: "revue.whip.accept") { [self] in acceptLoop() }
    }

    /// Stops accepting and closes the listening socket; requests in progress finish. The server
    /// runs (its accept thread keeps it) until this is called. Idempotent.
    /// Thread rule: any thread but `answer`/`end`. Cost: up to 100 ms.
    public func stop() {
        guard !stopping.exchange(true, ordering: .relaxed) else { return }
        acceptDone.wait()
        close(fd)
    }

    private func acceptLoop() {
        defer { acceptDone.signal() }
        while !stopping.load(ordering: .relaxed) {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 100) > 0 else { continue }
            let client = accept(fd, nil, nil)
            guard client >= 0 else { continue }
            slots.wait()
            _ = TransportThread(name: "revue.whip.connection") { [self] in
                defer { slots.signal() }
                let (status, headers, body) = respond(to: read(client))
                write(status: status, headers: headers, body: body, to: client)
                close(client)
            }
        }
    }

    /// The request, or the status that refuses it (nil: the client went away).
    private enum Request {
        case message(method: String, target: String, contentType: String?, body: [UInt8])
        case refused(Int?, String)
    }

    private func read(_ client: Int32) -> Request {
        let deadline = MonotonicTime.now + .seconds(5)
        var decoder = HTTPMessageDecoder(.request, limits: HTTPMessageLimits(headBytes: 8192, fieldCount: 32, bodyBytes: 65536))
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let left =
                (deadline - MonotonicTime.now).components.seconds * 1000
                + (deadline - MonotonicTime.now).components.attoseconds / 1_000_000_000_000_000
            var pfd = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
            guard left > 0, poll(&pfd, 1, Int32(clamping: left)) > 0 else { return .refused(408, "the request took too long") }
            let n = recv(client, &chunk, chunk.count, 0)
            guard n > 0 else { return .refused(nil, "closed") }
            do {
                guard let m = try decoder.append(chunk[0..<n]) else { continue }
                guard case .request(let method, let target, _) = m.head.startLine else { return .refused(400, "not a request") }
                return .message(method: method, target: target, contentType: m.head.field("content-type"), body: m.body)
            } catch {
                switch error {
                case .headTooLarge, .tooManyFields: return .refused(431, "\(error)")
                case .bodyTooLarge: return .refused(413, "\(error)")
                default: return .refused(400, "\(error)")
                }
            }
        }
    }

    /// The status, header fields and body for `request`.
    private func respond(to request: Request) -> (Int, [(String, String)], String) {
        guard case .message(let method, let target, let contentType, let body) = request else {
            if case .refused(let status?, let why) = request { return (status, [], why + "\n") }
            return (0, [], "")
        }
        let resource = target.hasPrefix(path + "/") ? String(target.dropFirst(path.count + 1)) : nil
        switch (method, target == path, resource) {
        case ("POST", true, _):
            guard contentType?.lowercased().hasPrefix("application/sdp") == true else {
                return (415, [], "the offer must be application/sdp\n")
            }
            let id = Self.newID()
            let offer = RTCSessionDescription(type: .offer, sdp: String(decoding: body, as: UTF8.self))
            let result = runBlocking { [answer] in try await answer(offer, id) }
            switch result {
            case .success(let a):
                sessions.withLock { _ = $0.insert(id) }
                return (201, [("Content-Type", "application/sdp"), ("Location", "\(path)/\(id)")], a.sdp)
            case .failure(let e as RTCError): return (400, [], "\(e)\n")
            case .failure(let e): return (500, [], "\(e)\n")
            }
        case ("DELETE", _, let id?):
            guard sessions.withLock({ $0.remove(id) != nil }) else { return (404, [], "no such session\n") }
            _ = runBlocking { [end] in await end(id) }
            return (200, [], "")
        case ("OPTIONS", true, _):
            return (204, [("Accept-Post", "application/sdp")], "")
        case (_, true, _), (_, _, .some):
            return (405, [], "method \(method) is not allowed here\n")
        default:
            return (404, [], "not found\n")
        }
    }

    /// Runs `body` in a task and waits for it on this (connection) thread. The task prefers the
    /// server's own executor (`WHIPTaskExecutor`): on Linux the concurrency pool has one thread
    /// per core, so a program whose pool threads are all blocked (synchronous work, waits) would
    /// otherwise leave a client's offer unanswered until one frees up.
    private func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) -> Result<T, any Error> {
        let done = DispatchSemaphore(value: 0)
        let result = Mutex<Result<T, any Error>?>(nil)
        Task(executorPreference: WHIPTaskExecutor.shared) {
            let r: Result<T, any Error>
            do { r = .success(try await body()) } catch { r = .failure(error) }
            result.withLock { $0 = r }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }

    private func write(status: Int, headers: [(String, String)], body: String, to client: Int32) {
        guard status != 0 else { return }
        let reason =
            [
                200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
                408: "Request Timeout", 413: "Content Too Large", 415: "Unsupported Media Type",
                431: "Request Header Fields Too Large", 500: "Internal Server Error",
            ][status] ?? "Status"
        var head = "HTTP/1.1 \(status) \(reason)\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        let bytes = Array(body.utf8)
        head += "Content-Length: \(bytes.count)\r\nConnection: close\r\n\r\n"
        let all = Array(head.utf8) + bytes
        var sent = 0
        while sent < all.count {
            let n = all[sent...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { break }
            sent += n
        }
        shutdown(client, Int32(SHUT_WR))
    }

    /// 16 random hex digits.
    private static func newID() -> String {
        (0..<8).map { _ in
            let b = UInt8.random(in: 0...255)
            return String(b >> 4, radix: 16) + String(b & 15, radix: 16)
        }.joined()
    }
}

/// Where the WHIP server's tasks run: a serial dispatch queue of its own (dispatch gives such a
/// queue a thread when it has work, whatever the concurrency pool is doing). Thread rule: any
/// thread enqueues; jobs run one at a time on the queue. Cost: one dispatch per job.
final class WHIPTaskExecutor: TaskExecutor, @unchecked Sendable {
    static let shared = WHIPTaskExecutor()
    private let queue = DispatchQueue(label: "revue.whip.tasks")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
