// A minimal WHIP endpoint (WebRTC-HTTP ingestion, RFC 9725) for programs built on
// `RTCPeerConnection`: `POST` an SDP offer, get `201 Created` with the SDP answer and the
// `Location` of the session; `DELETE` that location ends it. Plain HTTP/1.1 over TCP through the
// engine's small HTTP server (one request per connection, bounded in size, time and
// connections, so that a bad client costs little). No TLS: put it behind a reverse proxy for
// anything but a local network.
import Dispatch
import MediaCore
import Synchronization

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

    private let server: HTTPServer
    private let stopped = Atomic<Bool>(false)

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
        var limits = HTTPServer.Limits()
        limits.headerBytes = 8192
        limits.headerCount = 32
        limits.bodyBytes = 65536
        limits.readTimeout = 5
        limits.maxConnections = Self.maxConnections
        let sessions = WHIPSessions()
        do throws(HTTPServerError) {
            server = try HTTPServer(host: host, port: port, limits: limits) { request in
                Self.respond(to: request, path: path, sessions: sessions, answer: answer, end: end)
            }
        } catch .notIPv4 {
            throw .invalidConfiguration("WHIP host '\(host)' is not an IPv4 address")
        } catch {
            throw .setup(error.description)
        }
        self.port = server.port
        server.start()
    }

    /// Stops accepting and closes the listening socket; requests in progress finish. The server
    /// runs (its accept thread keeps it) until this is called. Idempotent.
    /// Thread rule: any thread but `answer`/`end`. Cost: up to 100 ms.
    public func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        server.stop()
    }

    /// The response to `request`: the offer handed to `answer`, a session ended through `end`,
    /// or the refusal. Runs on the server's connection threads.
    private static func respond(
        to request: HTTPRequest, path: String, sessions: WHIPSessions,
        answer: @escaping @Sendable (_ offer: RTCSessionDescription, _ id: String) async throws -> RTCSessionDescription,
        end: @escaping @Sendable (_ id: String) async -> Void
    ) -> HTTPResponse {
        func text(_ status: Int, _ message: String) -> HTTPResponse {
            message.isEmpty ? HTTPResponse(status: status) : HTTPResponse.text(status, message)
        }
        let target = request.path
        let resource = target.hasPrefix(path + "/") ? String(target.dropFirst(path.count + 1)) : nil
        switch (request.method, target == path, resource) {
        case ("POST", true, _):
            guard request.headers["content-type"]?.lowercased().hasPrefix("application/sdp") == true else {
                return text(415, "the offer must be application/sdp")
            }
            let id = newID()
            let offer = RTCSessionDescription(type: .offer, sdp: String(decoding: request.body, as: UTF8.self))
            switch runBlocking({ try await answer(offer, id) }) {
            case .success(let a):
                sessions.ids.withLock { _ = $0.insert(id) }
                return HTTPResponse(
                    status: 201, headers: [("Content-Type", "application/sdp"), ("Location", "\(path)/\(id)")],
                    body: Array(a.sdp.utf8))
            case .failure(let e as RTCError): return text(400, "\(e)")
            case .failure(let e): return text(500, "\(e)")
            }
        case ("DELETE", _, let id?):
            guard sessions.ids.withLock({ $0.remove(id) != nil }) else { return text(404, "no such session") }
            _ = runBlocking { await end(id) }
            return text(200, "")
        case ("OPTIONS", true, _):
            return HTTPResponse(status: 204, headers: [("Accept-Post", "application/sdp")])
        case (_, true, _), (_, _, .some):
            return text(405, "method \(request.method) is not allowed here")
        default:
            return text(404, "not found")
        }
    }

    /// Runs `body` in a task and waits for it on this (connection) thread. The task prefers the
    /// server's own executor (`WHIPTaskExecutor`): on Linux the concurrency pool has one thread
    /// per core, so a program whose pool threads are all blocked (synchronous work, waits) would
    /// otherwise leave a client's offer unanswered until one frees up.
    private static func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) -> Result<T, any Error> {
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

    /// 16 random hex digits.
    private static func newID() -> String {
        (0..<8).map { _ in
            let b = UInt8.random(in: 0...255)
            return String(b >> 4, radix: 16) + String(b & 15, radix: 16)
        }.joined()
    }
}

/// The ids of a WHIP server's open sessions. Thread rule: any thread (under the mutex). Cost: a
/// set of 16-character strings.
final class WHIPSessions: Sendable {
    let ids = Mutex<Set<String>>([])
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
