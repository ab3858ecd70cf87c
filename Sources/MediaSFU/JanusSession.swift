// A session on a Janus server through one of its API transports (JanusTransport.swift): over HTTP
// `POST /janus` makes the session, `POST /janus/<session>` attaches plugin handles,
// `POST /janus/<session>/<handle>` sends plugin messages, and a long poll `GET /janus/<session>`
// brings the asynchronous events (plugin events answering a message, webrtcup, media, hangup,
// detached); over a WebSocket the same messages carry `session_id`/`handle_id` and the server
// pushes the events. docs/sfu.md.
import MediaBase
import MediaTransport
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One Janus session with its long poll and keepalive.
///
/// Requests carry a random transaction. Janus answers a plugin message either at once
/// (`success`, for synchronous requests such as a room's `create` or `listparticipants`) or with
/// `ack` and later an event with the same transaction through the long poll; `message` returns
/// that event either way. Events without a transaction (or one nobody waits for) go to the
/// handle's event stream (`attach`).
///
/// Call `destroy()` when done: the long poll keeps the actor alive (and the session alive on the
/// server, through the keepalives) until then.
///
/// A broken connection does not end the session at once: over a WebSocket a new connection
/// claims it (`"janus": "claim"`), over HTTP the long poll is tried again, with a doubling delay
/// for as long as the server keeps such a session (`JanusReconnectPlan`, from the server's
/// `session-timeout` and `reclaim-session-timeout`). Requests made meanwhile wait for the outcome
/// (within their timeout); events that were under way stay expected. A WebSocket keepalive that
/// gets no answer within 5 s counts as a broken connection. `link` tells what
/// happened; when the server no longer knows the session, it is closed (requests then fail with
/// `.closed`).
///
/// Thread rule: an actor; every method from any task. Cost over HTTP: one long-poll connection
/// held open at all times (Janus answers it with up to 10 events, or a keepalive after 30 s), a
/// keepalive request every 25 s (more often when the server's session timeout is short), and one
/// connection per request; over a WebSocket: its one connection and reader thread, a keepalive
/// every 5 s. One `info` request when the session is made.
package actor JanusSession {
    /// The session's id on the server.
    package nonisolated let id: UInt64
    /// How requests reach the server (HTTP or WebSocket): after a reclaim over a WebSocket, the
    /// new connection.
    package nonisolated var transport: any JanusTransport { current.withLock { $0 } }
    /// What the link to the server went through (`JanusLinkEvent`), in order; ends when the
    /// session is closed. One consumer; the 16 latest events are kept for it.
    package nonisolated let link: AsyncStream<JanusLinkEvent>
    /// How many times the session was reclaimed after a broken connection. Any thread.
    package nonisolated var reclaims: Int { reclaimCount.load(ordering: .relaxed) }
    /// How long a request, or the event answering it, may take (seconds).
    package nonisolated let requestTimeoutSeconds: Double

    private enum Waiter {
        case expected
        case waiting(CheckedContinuation<Result<JSONValue, JanusError>, Never>)
        case arrived(JSONValue)
    }
    private var waiters: [String: Waiter] = [:]
    private var handles: [UInt64: AsyncStream<JSONValue>.Continuation] = [:]
    private var pollTask: Task<Void, Never>?
    private var keepaliveTask: Task<Void, Never>?
    private var closedReason: String?
    /// When the long poll started failing (nil while it works).
    private let current: Mutex<any JanusTransport>
    private let linkContinuation: AsyncStream<JanusLinkEvent>.Continuation
    private let reclaimCount = Atomic<Int>(0)
    private var plan: JanusReconnectPlan
    private let keepaliveSeconds: Double
    /// Failed long polls (or WebSocket event waits) in a row, and the most allowed.
    private var pollFailures = 0
    /// The server's refusal that ended a reclaim (458), for the requests that waited for it.
    private var lostAnswer: JanusError?
    private static let maxPollFailures = 240

    private init(
        id: UInt64, transport: any JanusTransport, requestTimeoutSeconds: Double, window: Duration, keepaliveSeconds: Double
    ) {
        self.id = id
        current = Mutex(transport)
        self.requestTimeoutSeconds = requestTimeoutSeconds
        plan = JanusReconnectPlan(window: window)
        self.keepaliveSeconds = keepaliveSeconds
        (link, linkContinuation) = AsyncStream<JanusLinkEvent>.makeStream(bufferingPolicy: .bufferingNewest(16))
    }

    /// Creates a session on the server at `server` (`POST basePath`, `"janus": "create"`) and
    /// starts its long poll and keepalive. Throws `JanusError` when the server cannot be reached
    /// or refuses. Thread rule: any task. Cost: one request, then the session's standing cost.
    package static func create(
        server: SocketAddress, basePath: String = "/janus", requestTimeoutSeconds: Double = 10
    ) async throws(JanusError) -> JanusSession {
        try await create(
            endpoint: JanusEndpoint(server: server, basePath: basePath), requestTimeoutSeconds: requestTimeoutSeconds)
    }

    /// Creates a session at `endpoint` (HTTP or WebSocket, with its credentials) and starts its
    /// event loop and keepalive. Wrong credentials throw `.unauthorized` with Janus's first
    /// answer; a refused certificate `.certificateRejected` or `.nameMismatch`. Thread rule: any
    /// task. Cost: a connection (WebSocket) or a request (HTTP), then the session's standing cost.
    package static func create(endpoint: JanusEndpoint, requestTimeoutSeconds: Double = 10) async throws(JanusError)
        -> JanusSession
    {
        let transport = try await endpoint.open(timeoutSeconds: requestTimeoutSeconds)
        let reply: JSONValue
        do {
            reply = try await transport.send(
                ["janus": "create", "transaction": .string(newTransaction())], session: nil, handle: nil,
                timeoutSeconds: requestTimeoutSeconds)
        } catch {
            transport.close()
            throw error
        }
        guard let id = reply["data"]?["id"]?.id else {
            transport.close()
            throw .malformed("no session id in \(reply)")
        }
        // The server's timeouts bound how long a broken session is worth reclaiming, and how
        // often it must hear from us. A server that does not say gets Janus's defaults.
        let info = try? await transport.info(timeoutSeconds: min(requestTimeoutSeconds, 5))
        let sessionTimeout = info?["session-timeout"]?.int.map { Int(clamping: $0) }
        let window = JanusReconnectPlan.window(
            webSocket: endpoint.transport == .webSocket, sessionTimeout: sessionTimeout,
            reclaimTimeout: info?["reclaim-session-timeout"]?.int.map { Int(clamping: $0) })
        var keepalive = sessionTimeout.map { $0 > 0 ? min(25, max(Double($0) / 3, 1)) : 25 } ?? 25
        // Over a WebSocket the keepalive is also how a connection whose path died without a reset
        // is noticed (TCP would take minutes), so it goes more often there: one small frame.
        if endpoint.transport == .webSocket { keepalive = min(keepalive, webSocketKeepaliveSeconds) }
        let session = JanusSession(
            id: id, transport: transport, requestTimeoutSeconds: requestTimeoutSeconds, window: window,
            keepaliveSeconds: keepalive)
        await session.startBackground()
        return session
    }

    /// Asks the server for its `GET basePath/info` (name, version, plugins, transports).
    /// Thread rule: any task. Cost: one request.
    package static func info(server: SocketAddress, basePath: String = "/janus", timeoutSeconds: Double = 5)
        async throws(JanusError)
        -> JSONValue
    {
        try await info(endpoint: JanusEndpoint(server: server, basePath: basePath), timeoutSeconds: timeoutSeconds)
    }

    /// Asks the server at `endpoint` for its `info`. Thread rule: any task. Cost: one request
    /// (and, over a WebSocket, a connection opened and closed).
    package static func info(endpoint: JanusEndpoint, timeoutSeconds: Double = 5) async throws(JanusError) -> JSONValue {
        let transport = try await endpoint.open(timeoutSeconds: timeoutSeconds)
        defer { transport.close() }
        return try await transport.info(timeoutSeconds: timeoutSeconds)
    }

    private func startBackground() {
        pollTask = Task { [weak self] in
            while let session = self, await session.pollOnce() {}
        }
        let interval = UInt64(keepaliveSeconds * 1e9)
        keepaliveTask = Task { [weak self] in
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: interval)
                guard let session = self, !Task.isCancelled else { return }
                await session.keepalive()
            }
        }
    }

    /// How often a session over a WebSocket sends its keepalive, at most, in seconds.
    package static let webSocketKeepaliveSeconds = 5.0
    /// How long a keepalive waits for Janus's `ack`, at most, in seconds. With the interval above,
    /// a WebSocket whose path died without a reset is closed and reclaimed within 10 s.
    package static let keepaliveAnswerSeconds = 5.0

    /// One keepalive. Over a WebSocket, one left unanswered means the connection is dead even if
    /// TCP has not noticed yet (a path that went away drops packets without a reset): it is
    /// closed, and the event loop reclaims the session on a new one.
    private func keepalive() async {
        guard !plan.isReconnecting, closedReason == nil else { return }
        let used = transport
        do {
            let payload: JSONValue = ["janus": "keepalive", "transaction": .string(Self.newTransaction())]
            _ = try await used.send(
                payload, session: id, handle: nil, timeoutSeconds: min(requestTimeoutSeconds, Self.keepaliveAnswerSeconds))
        } catch {
            guard case .timeout = error, used.eventFailuresAreFinal, used === transport, closedReason == nil else { return }
            used.close()
        }
    }

    /// Attaches a plugin handle (`"janus": "attach"`) and returns its id and the stream of the
    /// events addressed to it that no request waits for. Thread rule: any task. Cost: one request.
    package func attach(plugin: String) async throws(JanusError) -> (handle: UInt64, events: AsyncStream<JSONValue>) {
        let reply = try await request(["janus": "attach", "plugin": .string(plugin)])
        guard let handle = reply["data"]?["id"]?.id else { throw .malformed("no handle id in \(reply)") }
        let (stream, continuation) = AsyncStream<JSONValue>.makeStream(bufferingPolicy: .bufferingNewest(256))
        if let reason = closedReason {
            continuation.finish()
            throw .closed(reason)
        }
        handles[handle] = continuation
        return (handle, stream)
    }

    /// Detaches a handle (`"janus": "detach"`); its event stream ends. Thread rule: any task.
    /// Cost: one request.
    package func detach(handle: UInt64) async throws(JanusError) {
        defer { handles.removeValue(forKey: handle)?.finish() }
        _ = try await request(["janus": "detach"], handle: handle)
    }

    /// Sends a plugin message (`"janus": "message"` with `body` and, when given, a `jsep`) to
    /// `handle`, and returns Janus's answer: the `success` reply of a synchronous request, or the
    /// event with the same transaction that follows an `ack`. A plugin error (`error_code` in the
    /// plugin data) throws `.janus`. Thread rule: any task. Cost: one request; waits for the
    /// event at most `requestTimeoutSeconds`.
    package func message(handle: UInt64, body: JSONValue, jsep: JSONValue? = nil) async throws(JanusError) -> JSONValue {
        var payload: JSONValue = ["janus": "message", "body": body]
        if let jsep { payload = payload.setting("jsep", jsep) }
        let transaction = Self.newTransaction()
        waiters[transaction] = .expected
        let reply: JSONValue
        do {
            reply = try await request(payload, handle: handle, transaction: transaction)
        } catch {
            waiters.removeValue(forKey: transaction)
            throw error
        }
        let answer: JSONValue
        if reply["janus"]?.string == "ack" {
            answer = try await waitForEvent(transaction)
        } else {
            waiters.removeValue(forKey: transaction)
            answer = reply
        }
        if let data = answer["plugindata"]?["data"], let code = data["error_code"]?.int {
            throw JanusError.fromJanus(code: Int(code), reason: data["error"]?.string ?? "")
        }
        return answer
    }

    /// Sends one request (`body` plus a transaction) to the session, or to `handle`, and returns
    /// Janus's immediate reply; `"janus": "error"` throws `.janus` (`.unauthorized` for
    /// credentials). Thread rule: any task. Cost: one request.
    package func request(_ body: JSONValue, handle: UInt64? = nil, transaction: String? = nil) async throws(JanusError)
        -> JSONValue
    {
        if plan.isReconnecting { try await waitForLink() }
        if let reason = closedReason { throw .closed(reason) }
        let payload = body.setting("transaction", .string(transaction ?? Self.newTransaction()))
        return try await transport.send(payload, session: id, handle: handle, timeoutSeconds: requestTimeoutSeconds)
    }

    /// Waits, at most the request timeout, for a reclaim under way to end (either way); throws
    /// the server's answer when it ended the session (458).
    private func waitForLink() async throws(JanusError) {
        let deadline = MonotonicTime.now + .nanoseconds(Int64(requestTimeoutSeconds * 1e9))
        while plan.isReconnecting && closedReason == nil {
            guard MonotonicTime.now < deadline else { throw .timeout("the session's reconnection to Janus") }
            try? await Task.sleep(nanoseconds: 50_000_000)
        }
        if closedReason != nil, let lostAnswer { throw lostAnswer }
    }

    /// Destroys the session on the server (`"janus": "destroy"`; its handles are detached there)
    /// and stops the long poll and keepalive; every handle's event stream ends and waiting
    /// requests fail with `.closed`. Idempotent. Thread rule: any task. Cost: one request.
    package func destroy() async {
        guard closedReason == nil else { return }
        _ = try? await request(["janus": "destroy"])
        close(reason: "the session was destroyed")
    }

    // MARK: Long poll

    /// One long poll (or the events a WebSocket brought); false once the session is closed (or
    /// gone on the server).
    private func pollOnce() async -> Bool {
        guard closedReason == nil else { return false }
        let used = transport
        let events: [JSONValue]
        do {
            events = try await used.events(session: id)
        } catch {
            if closedReason != nil { return false }
            // A server that answers requests but never a long poll would have it fail and the
            // session reclaimed forever: a few hundred failed polls in a row end it.
            pollFailures += 1
            if pollFailures > Self.maxPollFailures { return lose("\(pollFailures) long polls in a row failed: \(error)") }
            return await linkBroke(used, error)
        }
        pollFailures = 0
        guard closedReason == nil else { return false }
        for event in events {
            if event["janus"]?.string == "error", let code = event["error"]?["code"]?.int, code == 458 {
                lose("Janus no longer knows the session (458)")
                return false
            }
            dispatch(event)
        }
        return true
    }

    /// The connection failed (`error`): reclaims the session, waiting as the plan says between
    /// attempts. Over a WebSocket each attempt is a new connection and a `claim`; over HTTP a
    /// `keepalive` (the session's requests may go on any connection; a long poll would only
    /// answer after up to 30 s). False when the session is lost.
    private func linkBroke(_ used: any JanusTransport, _ error: JanusError) async -> Bool {
        if case .unauthorized = error { return lose("Janus refused us: \(error)") }
        let first = !plan.isReconnecting
        guard case .retry(let delay) = plan.failed(at: .now) else {
            return lose("the session could not be reclaimed within \(plan.window): \(error)")
        }
        if first { linkContinuation.yield(.interrupted("\(error)")) }
        try? await Task.sleep(nanoseconds: UInt64(delay / .nanoseconds(1)))
        guard closedReason == nil else { return false }
        let timeout = min(requestTimeoutSeconds, 5)
        let fresh: any JanusTransport
        if used.eventFailuresAreFinal {
            used.close()
            do {
                fresh = try await used.endpoint.open(timeoutSeconds: timeout)
            } catch {
                return closedReason == nil ? await linkBroke(used, error) : false
            }
        } else {
            fresh = used
        }
        do {
            let ask: JSONValue = used.eventFailuresAreFinal ? "claim" : "keepalive"
            _ = try await fresh.send(
                ["janus": ask, "transaction": .string(Self.newTransaction())], session: id, handle: nil,
                timeoutSeconds: timeout)
        } catch {
            if fresh !== used { fresh.close() }
            guard closedReason == nil else { return false }
            if case .janus(458, _) = error {
                lostAnswer = error
                return lose("Janus no longer knows the session (458)")
            }
            return await linkBroke(used, error)
        }
        guard closedReason == nil else {
            fresh.close()
            return false
        }
        current.withLock { $0 = fresh }
        linkRestored()
        return true
    }

    /// The session answers again on the current transport.
    private func linkRestored() {
        plan.reclaimed()
        reclaimCount.add(1, ordering: .relaxed)
        linkContinuation.yield(.reclaimed)
    }

    /// The session is gone on the server (or cannot be reached in time): closes it and says so.
    /// Returns false, for the event loop.
    @discardableResult
    private func lose(_ reason: String) -> Bool {
        plan.gone()
        linkContinuation.yield(.lost(reason))
        close(reason: reason)
        return false
    }

    private func dispatch(_ event: JSONValue) {
        let kind = event["janus"]?.string ?? ""
        if kind == "keepalive" || kind == "ack" { return }
        if let transaction = event["transaction"]?.string, let waiter = waiters[transaction] {
            switch waiter {
            case .expected:
                waiters[transaction] = .arrived(event)
                return
            case .waiting(let continuation):
                waiters.removeValue(forKey: transaction)
                continuation.resume(returning: .success(event))
                return
            case .arrived:
                break
            }
        }
        if let sender = event["sender"]?.id, let stream = handles[sender] {
            stream.yield(event)
            if kind == "detached" { handles.removeValue(forKey: sender)?.finish() }
        }
    }

    private func waitForEvent(_ transaction: String) async throws(JanusError) -> JSONValue {
        if case .arrived(let event)? = waiters[transaction] {
            waiters.removeValue(forKey: transaction)
            return event
        }
        let timeout = requestTimeoutSeconds
        let timer = Task { [weak self] in
            try? await Task.sleep(nanoseconds: UInt64(timeout * 1e9))
            await self?.expire(transaction)
        }
        defer { timer.cancel() }
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<JSONValue, JanusError>, Never>) in
            if let reason = closedReason {
                continuation.resume(returning: .failure(.closed(reason)))
            } else {
                waiters[transaction] = .waiting(continuation)
            }
        }
        return try result.get()
    }

    private func expire(_ transaction: String) {
        guard case .waiting(let continuation)? = waiters.removeValue(forKey: transaction) else { return }
        continuation.resume(returning: .failure(.timeout("Janus's event for transaction \(transaction)")))
    }

    private func close(reason: String) {
        guard closedReason == nil else { return }
        closedReason = reason
        pollTask?.cancel()
        keepaliveTask?.cancel()
        for (_, waiter) in waiters {
            if case .waiting(let continuation) = waiter { continuation.resume(returning: .failure(.closed(reason))) }
        }
        waiters.removeAll()
        for (_, stream) in handles { stream.finish() }
        handles.removeAll()
        transport.close()
        linkContinuation.finish()
    }

    // MARK: Helpers

    private static func newTransaction() -> String { ICEAgent.randomICEString(12) }
}

extension JSONValue {
    /// Parses UTF-8 JSON text; throws `JanusError.malformed` for anything else. Cost: one decode.
    package static func parse(_ bytes: [UInt8]) throws(JanusError) -> JSONValue {
        do {
            return try JSONDecoder().decode(JSONValue.self, from: Data(bytes))
        } catch {
            throw .malformed("not JSON: \(String(decoding: bytes.prefix(200), as: UTF8.self))")
        }
    }
}
