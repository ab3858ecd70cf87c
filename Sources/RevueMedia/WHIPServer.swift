// A WHIP endpoint (WebRTC-HTTP ingestion, RFC 9725) for programs built on `RTCPeerConnection`,
// which serves WHEP players (WebRTC-HTTP egress) the same way: `POST` an SDP offer, get
// `201 Created` with the SDP answer and the `Location` of the session; `DELETE` that location
// ends it. Plain HTTP/1.1 over TCP through the engine's small HTTP server (one request per
// connection, bounded in size, time and connections, so that a bad client costs little). Before
// anything else each request must name an allowed `Host` (421 otherwise: a page that rebinds its
// DNS name to this machine is refused), carry a configured bearer token (401) and, from a
// browser, come from an allowed origin (403, and no CORS grant). Sessions are capped in all and
// per client address, and expire. No TLS: put it behind a reverse proxy for anything but a
// local network.
import Dispatch
import MediaCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// How a `WHIPServer` may be reached and how much a client may hold: the `Host` names it answers
/// to, its bearer tokens, the browser origins it grants CORS, its session caps and expiries.
/// The defaults suit a server on loopback; see the RevueMedia article "Exposing a WHIP
/// endpoint" before binding anything else. Thread rule: a value. Cost: none.
public struct WHIPServerOptions: Sendable, Hashable {
    /// Bearer tokens a client must send (`Authorization: Bearer TOKEN`) to `POST` an offer or
    /// `DELETE` a session; any one of them will do. Empty (the default): no token is asked for,
    /// which `WHIPServer` allows on a loopback address only (see `allowsNoTokenOffLoopback`).
    public var tokens: [String] = []
    /// The names a request's `Host` may carry (with no port or the server's port): host names,
    /// IPv4 addresses, IPv6 addresses in brackets; a `name:port` entry allows that name with
    /// that port only (the public name a reverse proxy passes on). nil (the default):
    /// `localhost`, `127.0.0.1`, `[::1]` and the bound address. Others get
    /// `421 Misdirected Request`.
    public var allowedHosts: [String]? = nil
    /// Browser origins (`https://app.example.com`, `http://localhost:3000`) that may use the
    /// endpoint from a page: their preflights get the CORS grant and their responses carry it.
    /// Other origins get no grant, and their `POST` and `DELETE` get `403`. Requests without
    /// `Origin` (programs) are not affected.
    public var allowedOrigins: [String] = []
    /// Sessions at once (answered or being answered); more offers get `503`.
    public var maxSessions = 16
    /// Sessions one client address may hold at once; more offers get `429`.
    public var maxSessionsPerClient = 4
    /// How long a session made by a `connection` closure may take to connect; one that has not
    /// by then, or that fails or closes, is ended and its place freed.
    public var connectTimeout: Duration = .seconds(30)
    /// Sessions older than this are ended, whatever their state; nil (the default): no limit.
    public var maxSessionLifetime: Duration? = nil
    /// Lets a server bound to an address other than loopback run without tokens (for a network
    /// that is itself closed). Off by default: such a server throws `.invalidConfiguration`.
    public var allowsNoTokenOffLoopback = false

    /// The defaults: loopback names, no token, no origins, 16 sessions, 4 per client, 30 s to connect.
    public init() {}
}

/// An offer as a `WHIPServer` hands it to the program. Thread rule: a value. Cost: none.
public struct WHIPOffer: Sendable, Hashable {
    /// The client's SDP offer.
    public var offer: RTCSessionDescription
    /// The id of the session it would make (the last part of its `Location`).
    public var id: String
    /// The client's numeric address (`127.0.0.1`, `::1`).
    public var client: String
}

/// A WHIP endpoint: hands each offer `POST`ed to `path` to the program; each session gets a
/// resource at `path/<id>` that `DELETE` ends. It serves WHEP players the same way: a player's
/// offer only receives, and the program's connection sends. The answer carries every candidate
/// (this endpoint takes no trickled candidates: `PATCH` gets 405), so answer with an
/// `RTCPeerConnection` whose `gatheringWait` is not zero.
///
/// Each request must first pass `WHIPServerOptions`: an allowed `Host` (else 421), a token when
/// tokens are set (else 401 with `WWW-Authenticate: Bearer`), an allowed origin when it comes
/// from a browser page (else 403 and no CORS grant); an offer beyond the caps gets 503 (all
/// sessions) or 429 (this client's). Malformed or oversize requests get 400, 405, 413, 415 or
/// 431. None of these reach the program.
///
/// Two ways to answer: `answer` returns the SDP answer itself (the server then knows nothing of
/// the connection, and ends such sessions only on `DELETE` or `maxSessionLifetime`), or
/// `connection` returns a new `RTCPeerConnection` with its transceivers and the server runs the
/// exchange, watches the connection and ends the session when it fails, closes, does not
/// connect within `connectTimeout` or outlives `maxSessionLifetime` (it closes the connection,
/// then tells `end`).
/// Thread rule: `stop` from any thread; `answer`, `connection` and `end` run on the server's
/// connection threads or its watch thread, asynchronously from a task.
/// Cost: one accept thread, one watch thread, plus one thread per open connection; a request is
/// at most 8 KiB of head and 64 KiB of body, must arrive within 5 s and may pause at most 2 s.
public final class WHIPServer: Sendable {
    /// The TCP port bound (the one asked for, or the one the system chose for port 0).
    public let port: UInt16
    /// The path offers are posted to (`/whip` by default).
    public let path: String
    /// The access rules and caps it was made with.
    public let options: WHIPServerOptions
    /// Connections served at once; more wait in the listen backlog.
    public static let maxConnections = 8

    private let server: HTTPServer
    private let sessions: WHIPSessions
    private let stopped = Atomic<Bool>(false)
    private let watchDone = DispatchSemaphore(value: 0)

    /// Listens on `host:port` (an IPv4 address; port 0: any free port) and starts accepting.
    /// `answer` gets each offer and the new session's id and returns the answer (an `RTCError`
    /// it throws becomes `400` with its description, any other error `500`); `end` is told the
    /// id of each session that ends (deleted by its client, or expired). Throws
    /// `.invalidConfiguration` for a host that is not an IPv4 address, or one that is not
    /// loopback without tokens (see `WHIPServerOptions.allowsNoTokenOffLoopback`), `.setup`
    /// when the port cannot be bound. Thread rule: any thread. Cost: a socket and two threads.
    public convenience init(
        host: String = "127.0.0.1", port: UInt16 = 0, path: String = "/whip", options: WHIPServerOptions = WHIPServerOptions(),
        answer: @escaping @Sendable (_ offer: RTCSessionDescription, _ id: String) async throws -> RTCSessionDescription,
        end: @escaping @Sendable (_ id: String) async -> Void = { _ in }
    ) throws(RTCError) {
        try self.init(
            host: host, port: port, path: path, options: options,
            make: { request in (try await answer(request.offer, request.id), nil) }, end: end)
    }

    /// Listens like `init(host:port:path:options:answer:end:)`, but the program only makes the
    /// connection: `connection` returns a new `RTCPeerConnection` with its transceivers (and
    /// renderers) for the offer, and the server sets the offer, makes and sets the answer, and
    /// from then on watches the connection (see the type). An error `connection` or the
    /// exchange throws becomes `400` (an `RTCError`) or `500`, and the connection is closed.
    /// Thread rule: any thread. Cost: a socket and two threads.
    public convenience init(
        host: String = "127.0.0.1", port: UInt16 = 0, path: String = "/whip", options: WHIPServerOptions = WHIPServerOptions(),
        connection: @escaping @Sendable (_ request: WHIPOffer) async throws -> RTCPeerConnection,
        end: @escaping @Sendable (_ id: String) async -> Void = { _ in }
    ) throws(RTCError) {
        try self.init(
            host: host, port: port, path: path, options: options,
            make: { request in
                let pc = try await connection(request)
                do {
                    try await pc.setRemoteDescription(request.offer)
                    let answer = try await pc.createAnswer()
                    try await pc.setLocalDescription(answer)
                    return (answer, pc)
                } catch {
                    pc.close()
                    throw error
                }
            }, end: end)
    }

    private init(
        host: String, port: UInt16, path: String, options: WHIPServerOptions,
        make: @escaping @Sendable (WHIPOffer) async throws -> (RTCSessionDescription, RTCPeerConnection?),
        end: @escaping @Sendable (_ id: String) async -> Void
    ) throws(RTCError) {
        guard options.maxSessions > 0, options.maxSessionsPerClient > 0 else {
            throw .invalidConfiguration("WHIP session caps must be at least 1")
        }
        if options.tokens.isEmpty && !options.allowsNoTokenOffLoopback && !HTTPAccessPolicy.isLoopback(host) {
            throw .invalidConfiguration(
                "a WHIP server on \(host) (not loopback) needs tokens (or allowsNoTokenOffLoopback)")
        }
        guard !options.tokens.contains(where: { $0.isEmpty || $0.contains(where: { $0 == " " || $0.isNewline }) }) else {
            throw .invalidConfiguration("a WHIP token is empty or holds spaces or line breaks")
        }
        self.path = path
        self.options = options
        var limits = HTTPServer.Limits()
        limits.headerBytes = 8192
        limits.headerCount = 32
        limits.bodyBytes = 65536
        limits.readTimeout = 5
        limits.idleTimeout = 2
        limits.maxConnections = Self.maxConnections
        limits.connectionsPerClient = Self.maxConnections / 2
        let sessions = WHIPSessions(options: options, end: end)
        self.sessions = sessions
        let policy = Locked<HTTPAccessPolicy?>(nil)
        do throws(HTTPServerError) {
            server = try HTTPServer(host: host, port: port, limits: limits) { request in
                guard let policy = policy.withLock({ $0 }) else { return .text(503, "starting") }
                return Self.respond(to: request, path: path, policy: policy, sessions: sessions, make: make)
            }
        } catch .notIPv4 {
            throw .invalidConfiguration("WHIP host '\(host)' is not an IPv4 address")
        } catch {
            throw .setup(error.description)
        }
        self.port = server.port
        policy.withLock {
            $0 = HTTPAccessPolicy(
                boundHost: host, port: server.port, hosts: options.allowedHosts, tokens: options.tokens,
                origins: options.allowedOrigins)
        }
        server.start()
        _ = TransportThread(name: "revue.whip.watch") { [self] in
            defer { watchDone.signal() }
            while !stopped.load(ordering: .relaxed) {
                sessions.sweep(now: .now)
                usleep(100_000)
            }
        }
    }

    /// Sessions open now (answered, or being answered). Thread rule: any thread. Cost: a lock.
    public var sessionCount: Int { sessions.count }

    /// Stops accepting and closes the listening socket; requests in progress finish. The server
    /// runs (its threads keep it) until this is called. Sessions left open stay open (the
    /// program closes its connections). Idempotent.
    /// Thread rule: any thread but `answer`/`connection`/`end`. Cost: up to 200 ms.
    public func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        server.stop()
        watchDone.wait()
    }

    /// The response to `request`: the offer handed to the program, a session ended, or the
    /// refusal. Runs on the server's connection threads.
    private static func respond(
        to request: HTTPRequest, path: String, policy: HTTPAccessPolicy, sessions: WHIPSessions,
        make: @escaping @Sendable (WHIPOffer) async throws -> (RTCSessionDescription, RTCPeerConnection?)
    ) -> HTTPResponse {
        let target = request.path
        let resource = target.hasPrefix(path + "/") ? String(target.dropFirst(path.count + 1)) : nil
        let ours = target == path || resource != nil
        if let refusal = policy.refusal(request, needsToken: ours && request.method != "OPTIONS") { return refusal }
        var cors: [(String, String)] = []
        if case .allowed(let origin) = policy.origin(request.headers["origin"]) { cors = policy.corsFields(origin: origin) }
        func text(_ status: Int, _ message: String, _ extra: [(String, String)] = []) -> HTTPResponse {
            message.isEmpty
                ? HTTPResponse(status: status, headers: cors + extra) : HTTPResponse.text(status, message, headers: cors + extra)
        }
        switch (request.method, target == path, resource) {
        case ("POST", true, _):
            guard request.headers["content-type"]?.lowercased().hasPrefix("application/sdp") == true else {
                return text(415, "the offer must be application/sdp")
            }
            let id = newID()
            switch sessions.reserve(id, client: request.client) {
            case .full: return text(503, "every session place is taken", [("Retry-After", "5")])
            case .clientFull: return text(429, "this client holds as many sessions as it may", [("Retry-After", "5")])
            case .reserved: break
            }
            let offer = RTCSessionDescription(type: .offer, sdp: String(decoding: request.body, as: UTF8.self))
            switch runBlocking({ try await make(WHIPOffer(offer: offer, id: id, client: request.client)) }) {
            case .success(let (answer, connection)):
                guard sessions.confirm(id, connection: connection) else {
                    connection?.close()
                    return text(503, "the session ended before it was answered")
                }
                return HTTPResponse(
                    status: 201,
                    headers: [("Content-Type", "application/sdp"), ("Location", "\(path)/\(id)")] + cors,
                    body: Array(answer.sdp.utf8))
            case .failure(let e as RTCError):
                sessions.release(id)
                return text(400, "\(e)")
            case .failure(let e):
                sessions.release(id)
                return text(500, "\(e)")
            }
        case ("DELETE", _, let id?):
            guard sessions.end(id) else { return text(404, "no such session") }
            return text(200, "")
        case ("OPTIONS", true, _):
            return policy.preflight(request, methods: "POST, OPTIONS", extra: [("Accept-Post", "application/sdp")])
        case ("OPTIONS", _, .some):
            return policy.preflight(request, methods: "DELETE, OPTIONS")
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
    static func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) -> Result<T, any Error> {
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

/// The sessions of a WHIP server: which client holds each, since when, and its connection when
/// the server ran the exchange; the caps are checked and the expiries applied here.
/// Thread rule: any thread (under the mutex); `sweep` from the watch thread. Cost: one entry
/// per session; a sweep reads each watched connection's state (a lock each).
final class WHIPSessions: Sendable {
    /// One session, from its reservation on.
    struct Entry {
        var client: String
        var created: MonotonicTime
        var connection: RTCPeerConnection?
        /// Answered (201 sent): a client may delete it, and expiry applies.
        var answered = false
        /// Its connection has been connected once (the connect timeout no longer applies).
        var connected = false
    }

    /// What `reserve` found.
    enum Reservation {
        case reserved, full, clientFull
    }

    private let entries = Mutex<[String: Entry]>([:])
    private let options: WHIPServerOptions
    private let onEnd: @Sendable (String) async -> Void

    init(options: WHIPServerOptions, end: @escaping @Sendable (String) async -> Void) {
        self.options = options
        onEnd = end
    }

    /// Sessions held (answered or being answered).
    var count: Int { entries.withLock { $0.count } }

    /// Takes a place for a new session of `client`, unless the caps are reached.
    func reserve(_ id: String, client: String) -> Reservation {
        entries.withLock { e in
            guard e.count < options.maxSessions else { return .full }
            guard e.values.count(where: { $0.client == client }) < options.maxSessionsPerClient else { return .clientFull }
            e[id] = Entry(client: client, created: .now)
            return .reserved
        }
    }

    /// Marks the reserved session answered; false when it is gone.
    func confirm(_ id: String, connection: RTCPeerConnection?) -> Bool {
        entries.withLock { e in
            guard var entry = e[id] else { return false }
            entry.connection = connection
            entry.answered = true
            e[id] = entry
            return true
        }
    }

    /// Gives back the place of a session that was not answered.
    func release(_ id: String) { entries.withLock { _ = $0.removeValue(forKey: id) } }

    /// Ends an answered session: removes it, closes its connection and tells the program (and
    /// waits for it when `wait`). False when there is no such answered session.
    @discardableResult
    func end(_ id: String, wait: Bool = true) -> Bool {
        let entry = entries.withLock { e -> Entry? in
            guard e[id]?.answered == true else { return nil }
            return e.removeValue(forKey: id)
        }
        guard let entry else { return false }
        entry.connection?.close()
        let onEnd = self.onEnd
        if wait {
            _ = WHIPServer.runBlocking { await onEnd(id) }
        } else {
            Task(executorPreference: WHIPTaskExecutor.shared) { await onEnd(id) }
        }
        return true
    }

    /// Ends the sessions that outlived `maxSessionLifetime`, and those whose connection failed,
    /// closed or did not connect within `connectTimeout`.
    func sweep(now: MonotonicTime) {
        let expired = entries.withLock { e -> [String] in
            var expired: [String] = []
            for (id, entry) in e where entry.answered {
                let age = now - entry.created
                if let limit = options.maxSessionLifetime, age >= limit {
                    expired.append(id)
                    continue
                }
                guard let connection = entry.connection else { continue }
                switch connection.connectionState {
                case .connected:
                    if !entry.connected { e[id]?.connected = true }
                case .failed, .closed:
                    expired.append(id)
                default:
                    if !entry.connected && age >= options.connectTimeout { expired.append(id) }
                }
            }
            return expired
        }
        for id in expired { end(id, wait: false) }
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
