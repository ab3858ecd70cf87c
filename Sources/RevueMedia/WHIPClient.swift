// WHIP and WHEP clients: publish an `RTCPeerConnection`'s tracks to a WHIP endpoint (RFC 9725)
// or play a WHEP endpoint, over HTTP/1.1, plain or TLS (the engine's `ClientStream`). One
// exchange each: the offer (with every candidate) is POSTed with the bearer token, a `201
// Created` brings the answer and the session's `Location`, and `close` DELETEs that location.
// Everything the server sends is bounded (size, time, redirects) and every failure is a typed
// `WHIPClientError`.
import Dispatch
import MediaCore

/// Why a WHIP or WHEP client failed. Thread rule: a value. Cost: none.
public enum WHIPClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The URL is not `http://` or `https://` with a host (what was wrong).
    case invalidURL(String)
    /// The server could not be reached, TLS failed, or the connection broke (the reason).
    case connection(String)
    /// The server did not answer completely within `WHIPClientOptions.timeout` (what was awaited).
    case timeout(String)
    /// The server refused the token (`401` or `403`; its status and text).
    case unauthorized(status: Int, reason: String)
    /// The server refused the request otherwise (a `4xx` or `5xx` status and its text, at most
    /// 200 characters).
    case rejected(status: Int, reason: String)
    /// What came back is not a WHIP answer: not HTTP, an unexpected status, no `Location`, not
    /// SDP, larger than `WHIPClientOptions.maxResponseBytes` (what was wrong).
    case invalidResponse(String)
    /// The server redirected more than `WHIPClientOptions.maxRedirects` times.
    case tooManyRedirects(Int)
    /// The local connection refused the offer it made or the server's answer.
    case peerConnection(RTCError)
    /// The request could not be written: a header value (the token, say) holds a line break or
    /// another control byte, or the URL's path holds a space (what was wrong). Nothing was sent.
    case invalidRequest(String)

    /// A readable description, for logs and test failures.
    public var description: String {
        switch self {
        case .invalidURL(let s): "invalid WHIP URL: \(s)"
        case .connection(let s): "connection: \(s)"
        case .timeout(let s): "timed out: \(s)"
        case .unauthorized(let status, let reason): "not authorized (\(status)): \(reason)"
        case .rejected(let status, let reason): "refused (\(status)): \(reason)"
        case .invalidResponse(let s): "invalid response: \(s)"
        case .tooManyRedirects(let n): "more than \(n) redirects"
        case .peerConnection(let e): "\(e)"
        case .invalidRequest(let s): "cannot write the request: \(s)"
        }
    }
}

/// How a WHIP or WHEP client talks to its server. Thread rule: a value. Cost: none.
public struct WHIPClientOptions: Sendable, Hashable {
    /// The bearer token sent as `Authorization: Bearer TOKEN` on every request; nil: none.
    public var token: String? = nil
    /// A PEM file of the CA certificates to trust for `https://`; nil: the system's store.
    public var certificateAuthorityFile: String? = nil
    /// How long one HTTP exchange may take, from connecting to the last byte of the response.
    public var timeout: Duration = .seconds(15)
    /// Redirects (`307`, `308`) followed at most, each to an `http://` or `https://` URL.
    public var maxRedirects = 3
    /// The largest response accepted (head and body), bytes.
    public var maxResponseBytes = 256 * 1024

    /// No token, the system's CAs, 15 s, 3 redirects, 256 KiB.
    public init() {}
}

/// A session on a WHIP or WHEP server: its resource URL and the connection it carries.
/// Thread rule: any thread. Cost: none until `close`, which makes one HTTP request.
public final class WHIPClientSession: Sendable {
    /// The session's resource (the answer's `Location`, made absolute).
    public let resourceURL: String
    /// The connection the session carries (the one given to `publish` or `play`).
    public let connection: RTCPeerConnection
    /// The `Link` fields of the answer (ICE servers, extensions), as sent.
    public let links: [String]
    private let options: WHIPClientOptions

    init(resourceURL: String, connection: RTCPeerConnection, links: [String], options: WHIPClientOptions) {
        self.resourceURL = resourceURL
        self.connection = connection
        self.links = links
        self.options = options
    }

    /// Ends the session: closes the connection, then `DELETE`s the resource. Throws when the
    /// server did not confirm (the connection is closed either way).
    /// Thread rule: any thread or task. Cost: one HTTP request, bounded by the options' timeout.
    public func close() async throws(WHIPClientError) {
        connection.close()
        let response = try await WHIPHTTP.exchange(method: "DELETE", url: resourceURL, body: nil, options: options)
        guard (200..<300).contains(response.status) else { throw WHIPHTTP.failure(response) }
    }
}

/// Publishes to a WHIP endpoint (RFC 9725). Thread rule: any thread or task. Cost: see `publish`.
public enum WHIPClient {
    /// Sends `connection`'s tracks to the WHIP endpoint at `url`: makes the offer (waiting for
    /// its candidates up to `RTCConfiguration.gatheringWait`), POSTs it, and sets the answer.
    /// Add the transceivers (`sendonly` is what a WHIP server expects) before calling; the
    /// connection then connects on its own. Throws a `WHIPClientError` for every failure (the
    /// connection is left as it was, for the caller to close).
    /// Thread rule: any thread or task. Cost: gathering, one HTTP exchange (plus redirects).
    public static func publish(
        _ connection: RTCPeerConnection, to url: String, options: WHIPClientOptions = WHIPClientOptions()
    ) async throws(WHIPClientError) -> WHIPClientSession {
        try await WHIPHTTP.offer(connection, url: url, options: options)
    }
}

/// Plays a WHEP endpoint (WebRTC-HTTP egress). Thread rule: any thread or task. Cost: see `play`.
public enum WHEPClient {
    /// Receives the WHEP endpoint at `url` on `connection`: when it has no transceivers, adds a
    /// receive-only video and audio one; then makes the offer, POSTs it and sets the answer.
    /// Set `remoteVideoRenderer` and `remoteAudioSink` before calling. Throws a
    /// `WHIPClientError` for every failure (the connection is left for the caller to close).
    /// Thread rule: any thread or task. Cost: gathering, one HTTP exchange (plus redirects).
    public static func play(
        _ connection: RTCPeerConnection, from url: String, options: WHIPClientOptions = WHIPClientOptions()
    ) async throws(WHIPClientError) -> WHIPClientSession {
        if connection.transceivers.isEmpty {
            do throws(RTCError) {
                _ = try connection.addTransceiver(.video, direction: .recvonly)
                _ = try connection.addTransceiver(.audio, direction: .recvonly)
            } catch {
                throw .peerConnection(error)
            }
        }
        return try await WHIPHTTP.offer(connection, url: url, options: options)
    }
}

/// The HTTP side of the clients: URLs, one request per connection, redirects, the statuses.
/// Thread rule: any thread; the blocking I/O runs on a dispatch queue, never on the
/// concurrency pool. Cost: a TCP (and TLS) connection per request.
enum WHIPHTTP {
    /// An `http://` or `https://` URL taken apart.
    struct Target {
        var tls: Bool
        var host: String
        var port: UInt16
        var path: String

        /// The URL again (for `resourceURL`).
        var url: String {
            let scheme = tls ? "https" : "http"
            let shown = host.contains(":") ? "[\(host)]" : host
            let standard = tls ? port == 443 : port == 80
            return "\(scheme)://\(shown)\(standard ? "" : ":\(port)")\(path)"
        }

        /// The `Host` field.
        var hostField: String {
            let shown = host.contains(":") ? "[\(host)]" : host
            return (tls ? port == 443 : port == 80) ? shown : "\(shown):\(port)"
        }

        init(_ url: String) throws(WHIPClientError) {
            let lower = url.lowercased()
            let rest: Substring
            if lower.hasPrefix("http://") {
                tls = false
                rest = url.dropFirst(7)
            } else if lower.hasPrefix("https://") {
                tls = true
                rest = url.dropFirst(8)
            } else {
                throw .invalidURL("\(url.prefix(100)): not http:// or https://")
            }
            let slash = rest.firstIndex(of: "/") ?? rest.endIndex
            let authority = rest[..<slash]
            path = slash == rest.endIndex ? "/" : String(rest[slash...])
            guard !authority.isEmpty, !authority.contains("@"),
                !path.utf8.contains(where: { $0 <= 32 || $0 == 127 })
            else {
                throw .invalidURL("\(url.prefix(100)): no host, credentials in it, or spaces or controls in the path")
            }
            var portText: Substring? = nil
            if authority.hasPrefix("[") {
                guard let close = authority.firstIndex(of: "]") else { throw .invalidURL("\(url.prefix(100)): unclosed [") }
                host = String(authority[authority.index(after: authority.startIndex)..<close])
                let after = authority[authority.index(after: close)...]
                if !after.isEmpty {
                    guard after.hasPrefix(":") else { throw .invalidURL("\(url.prefix(100)): junk after ]") }
                    portText = after.dropFirst()
                }
            } else if let colon = authority.lastIndex(of: ":") {
                host = String(authority[..<colon])
                portText = authority[authority.index(after: colon)...]
            } else {
                host = String(authority)
            }
            if let portText {
                guard let p = UInt16(portText), p > 0 else { throw .invalidURL("\(url.prefix(100)): bad port") }
                port = p
            } else {
                port = tls ? 443 : 80
            }
            guard !host.isEmpty else { throw .invalidURL("\(url.prefix(100)): no host") }
        }

        /// `location` (absolute, or a path on this server) as a target.
        func resolving(_ location: String) throws(WHIPClientError) -> Target {
            if location.contains("://") { return try Target(location) }
            var t = self
            if location.hasPrefix("/") {
                t.path = location
            } else {
                let directory = path.split(separator: "?", maxSplits: 1)[0]
                t.path = String(directory[...(directory.lastIndex(of: "/") ?? directory.startIndex)]) + location
            }
            guard !t.path.utf8.contains(where: { $0 <= 32 || $0 == 127 }) else {
                throw .invalidResponse("a Location with spaces or controls")
            }
            return t
        }
    }

    /// A response: status, fields (lower-case names), body, and the URL that answered.
    struct Response {
        var status: Int
        var fields: [HTTPField]
        var body: [UInt8]
        var target: Target

        func field(_ name: String) -> String? { fields.last { $0.name == name }?.value }
    }

    /// The offer/answer exchange of both clients.
    static func offer(
        _ connection: RTCPeerConnection, url: String, options: WHIPClientOptions
    ) async throws(WHIPClientError) -> WHIPClientSession {
        _ = try Target(url)
        let offer: RTCSessionDescription
        do throws(RTCError) {
            offer = try await connection.createOffer()
            try await connection.setLocalDescription(offer)
        } catch {
            throw .peerConnection(error)
        }
        let response = try await exchange(method: "POST", url: url, body: Array(offer.sdp.utf8), options: options)
        guard response.status == 201 else {
            if (400..<600).contains(response.status) { throw failure(response) }
            throw .invalidResponse("status \(response.status) where 201 Created was expected")
        }
        guard let location = response.field("location"), !location.isEmpty else {
            throw .invalidResponse("201 Created without a Location")
        }
        let resource = try response.target.resolving(location)
        guard response.field("content-type")?.lowercased().hasPrefix("application/sdp") == true,
            let sdp = String(validating: response.body, as: UTF8.self), sdp.hasPrefix("v=0")
        else {
            throw .invalidResponse("the answer is not application/sdp")
        }
        do throws(RTCError) {
            try await connection.setRemoteDescription(RTCSessionDescription(type: .answer, sdp: sdp))
        } catch {
            throw .peerConnection(error)
        }
        let links = response.fields.filter { $0.name == "link" }.map(\.value)
        return WHIPClientSession(resourceURL: resource.url, connection: connection, links: links, options: options)
    }

    /// The typed error for a 4xx or 5xx response.
    static func failure(_ response: Response) -> WHIPClientError {
        let text = String(decoding: response.body.prefix(200), as: UTF8.self)
        let reason = String(text.unicodeScalars.filter { $0.value >= 32 || $0 == "\n" }).trimmingSpaces
        if response.status == 401 || response.status == 403 { return .unauthorized(status: response.status, reason: reason) }
        if (400..<600).contains(response.status) { return .rejected(status: response.status, reason: reason) }
        return .invalidResponse("status \(response.status)")
    }

    /// One request, following `307`/`308` redirects up to the limit; the final response.
    /// Runs the blocking I/O on a dispatch queue.
    static func exchange(
        method: String, url: String, body: [UInt8]?, options: WHIPClientOptions
    ) async throws(WHIPClientError) -> Response {
        var target = try Target(url)
        var redirects = 0
        while true {
            let current = target
            let result: Result<Response, WHIPClientError> = await withCheckedContinuation { done in
                DispatchQueue.global().async {
                    done.resume(
                        returning: Result { () throws(WHIPClientError) in
                            try request(method: method, target: current, body: body, options: options)
                        })
                }
            }
            let response = try result.get()
            guard response.status == 307 || response.status == 308 else { return response }
            guard redirects < options.maxRedirects else { throw .tooManyRedirects(options.maxRedirects) }
            guard let location = response.field("location") else { throw .invalidResponse("a redirect without a Location") }
            target = try target.resolving(location)
            redirects += 1
        }
    }

    /// One request on a new connection; blocks the calling thread up to the options' timeout.
    static func request(
        method: String, target: Target, body: [UInt8]?, options: WHIPClientOptions
    ) throws(WHIPClientError) -> Response {
        var fields = [("Host", target.hostField), ("Connection", "close")]
        if let token = options.token { fields.append(("Authorization", "Bearer \(token)")) }
        if let body {
            fields += [("Content-Type", "application/sdp"), ("Accept", "application/sdp"), ("Content-Length", "\(body.count)")]
        }
        // Written before connecting: a request that cannot be written sends nothing.
        let head: [UInt8]
        do throws(HTTPMessageError) {
            head = try HTTPHead.request(method, target.path, fields).encoded()
        } catch {
            throw .invalidRequest("\(error)")
        }
        let deadline = MonotonicTime.now + options.timeout
        let stream: ClientStream
        do throws(ClientStreamError) {
            stream = try ClientStream.connect(
                host: target.host, port: target.port,
                tls: target.tls ? TLSClientSettings(certificateAuthorityFile: options.certificateAuthorityFile) : nil,
                deadline: deadline)
        } catch {
            throw map(error)
        }
        defer { stream.close() }
        let cap = max(options.maxResponseBytes, 1024)
        var decoder = HTTPMessageDecoder(
            .response(toMethod: method),
            limits: HTTPMessageLimits(headBytes: min(cap, 64 * 1024), fieldCount: 100, bodyBytes: cap))
        var chunk = [UInt8](repeating: 0, count: 16_384)
        var received = 0
        do throws(any Error) {
            try stream.write(head + (body ?? []), deadline: deadline)
            while true {
                let n = try stream.read(into: &chunk, deadline: deadline)
                if n == 0 { break }
                received += n
                guard received <= cap + 64 * 1024 else { throw WHIPClientError.invalidResponse("more than \(cap) bytes") }
                if let message = try decoder.append(chunk[0..<n]) { return try response(message, target) }
            }
            return try response(try decoder.finish(), target)
        } catch {
            throw map(error)
        }
    }

    private static func response(_ message: HTTPMessage, _ target: Target) throws(WHIPClientError) -> Response {
        guard case .status(_, let code, _) = message.head.startLine else { throw .invalidResponse("not a status line") }
        return Response(status: code, fields: message.head.fields, body: message.body, target: target)
    }

    private static func map(_ error: any Error) -> WHIPClientError {
        switch error {
        case let e as WHIPClientError: return e
        case let e as ClientStreamError:
            if case .timeout(let what) = e { return .timeout(what) }
            return .connection(e.description)
        case let e as HTTPMessageError:
            switch e {
            case .bodyTooLarge, .headTooLarge: return .invalidResponse("larger than allowed: \(e)")
            default: return .invalidResponse("not HTTP: \(e)")
            }
        default: return .connection("\(error)")
        }
    }
}

extension String {
    /// The text without leading and trailing spaces and line breaks.
    fileprivate var trimmingSpaces: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f.isNewline { s = s.dropFirst() }
        while let l = s.last, l == " " || l.isNewline { s = s.dropLast() }
        return String(s)
    }
}
