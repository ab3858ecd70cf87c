// Who may use an HTTP endpoint that makes sessions (the WHIP/WHEP endpoints of RevueMedia and
// `revue-media webrtc`): the `Host` a request names (a page that rebinds its own DNS name to
// this machine still sends its own name), a bearer token (RFC 6750, compared in constant time),
// and the browser origins that get CORS grants (everything else gets none). One value, checked
// on every request before anything else runs.
import MediaBase

/// The access rules of an endpoint: allowed `Host` names, bearer tokens, CORS origins.
/// Thread rule: a value; read from any number of connection threads. Cost: a few string
/// comparisons per request; a token comparison costs the same whatever the bytes.
package struct HTTPAccessPolicy: Sendable {
    /// Host names (lower case, IPv6 in brackets) a request's `Host` may name, with no port or
    /// with `port`; an entry with a port (`media.example.org:8443`, the name a reverse proxy
    /// passes on) allows that name with that port.
    package var allowedHosts: Set<String>
    /// The port the server is reached on (the one bound).
    package var port: UInt16
    /// Bearer tokens that are accepted (as bytes); empty: no token is asked for.
    package var tokens: [[UInt8]]
    /// Origins (`scheme://host[:port]`, lower case) granted CORS; empty: none.
    package var allowedOrigins: Set<String>

    /// A policy for a server bound to `boundHost:port`: `hosts` nil gives the defaults
    /// (`defaultHosts(bound:)`), tokens and origins as given.
    package init(boundHost: String, port: UInt16, hosts: [String]? = nil, tokens: [String] = [], origins: [String] = []) {
        allowedHosts = Set((hosts ?? Self.defaultHosts(bound: boundHost)).map { $0.lowercased() })
        self.port = port
        self.tokens = tokens.map { Array($0.utf8) }
        allowedOrigins = Set(origins.map { Self.normalizedOrigin($0) })
    }

    /// The names a local server answers to: `localhost`, `127.0.0.1`, `[::1]` and the bound
    /// address unless it is a wildcard. Cost: none.
    package static func defaultHosts(bound: String) -> [String] {
        var hosts = ["localhost", "127.0.0.1", "[::1]"]
        if bound != "0.0.0.0" && bound != "::" && !hosts.contains(bound) {
            hosts.append(bound.contains(":") ? "[\(bound)]" : bound)
        }
        return hosts
    }

    /// Whether `host` is a loopback address (`127.0.0.0/8`, `::1`) or `localhost`. Cost: none.
    package static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
    }

    /// Whether a `Host` field value names this server: an allowed name, with no port or with
    /// this server's port, or an allowed `name:port` entry exactly. A missing field is refused
    /// (HTTP/1.1 requires it).
    package func hostAllowed(_ value: String?) -> Bool {
        guard let value = value?.lowercased(), !value.isEmpty else { return false }
        if value.contains(":") && allowedHosts.contains(value) { return true }
        let name: Substring, rest: Substring
        if value.hasPrefix("[") {
            guard let close = value.firstIndex(of: "]") else { return false }
            name = value[...close]
            rest = value[value.index(after: close)...]
        } else if let colon = value.firstIndex(of: ":") {
            name = value[..<colon]
            rest = value[colon...]
        } else {
            name = value[...]
            rest = ""
        }
        guard allowedHosts.contains(String(name)) else { return false }
        return rest.isEmpty || rest == ":\(port)"
    }

    /// Whether an `Authorization` field value carries one of the tokens (`Bearer TOKEN`, the
    /// scheme in any case). Always true when no token is configured. Every configured token is
    /// compared in full, in time that depends on the lengths only.
    package func authorized(_ value: String?) -> Bool {
        guard !tokens.isEmpty else { return true }
        guard let value else { return false }
        let parts = value.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return false }
        // RFC 6750: one or more spaces after the scheme.
        let given = Array(parts[1].drop { $0 == " " }.utf8)
        var matched = false
        for token in tokens where Self.constantTimeEqual(given, token) { matched = true }
        return matched
    }

    /// Whether `a` and `b` are equal, in time that depends on their lengths only. Cost: linear.
    package static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: a.count ^ b.count)
        difference |= a.count == b.count ? 0 : 1
        let n = max(a.count, b.count)
        for i in 0..<n {
            let x = i < a.count ? a[i] : 0
            let y = i < b.count ? b[i] : 0
            difference |= x ^ y
        }
        return difference == 0
    }

    /// What a request's `Origin` means here. Thread rule: a value. Cost: none.
    package enum OriginCheck: Equatable, Sendable {
        /// No `Origin` field: not a cross-origin browser request (a program, curl, a same-origin GET).
        case none
        /// An origin that gets CORS grants (as the request spelled it).
        case allowed(String)
        /// A foreign origin: no grant, and requests that change state are refused.
        case foreign
    }

    /// Classifies a request's `Origin` field. A page served by this server itself (an origin
    /// whose host is an allowed name at this port) counts as allowed.
    package func origin(_ value: String?) -> OriginCheck {
        guard let value, !value.isEmpty else { return .none }
        let normalized = Self.normalizedOrigin(value)
        if allowedOrigins.contains(normalized) { return .allowed(value) }
        if normalized.hasPrefix("http://") && hostAllowed(String(normalized.dropFirst("http://".count))) {
            return .allowed(value)
        }
        return .foreign
    }

    /// The CORS fields of a response to a request from an allowed `origin`.
    package func corsFields(origin: String) -> [(String, String)] {
        [
            ("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
            ("Access-Control-Expose-Headers", "Location, Link, ETag"),
        ]
    }

    /// The answer to a CORS preflight (`OPTIONS` with `Access-Control-Request-Method`) or to a
    /// plain `OPTIONS`: 204 with the grant for an allowed origin, 204 without one otherwise
    /// (the browser then refuses the request itself). `methods` are the methods of the resource.
    package func preflight(_ request: HTTPRequest, methods: String, extra: [(String, String)] = []) -> HTTPResponse {
        var fields: [(String, String)] = [("Allow", methods)] + extra
        if case .allowed(let origin) = self.origin(request.headers["origin"]) {
            fields += corsFields(origin: origin)
            fields += [
                ("Access-Control-Allow-Methods", methods),
                ("Access-Control-Allow-Headers", "Authorization, Content-Type, If-Match"),
                ("Access-Control-Max-Age", "600"),
            ]
        }
        return HTTPResponse(status: 204, headers: fields)
    }

    /// The refusal for `request` before it reaches the endpoint, or nil when it may go on:
    /// 421 for a `Host` that is not allowed, 403 for a state-changing request from a foreign
    /// origin, 401 (with `WWW-Authenticate: Bearer`) for a missing or wrong token where
    /// `needsToken` (preflights never carry one). Cost: see the type.
    package func refusal(_ request: HTTPRequest, needsToken: Bool) -> HTTPResponse? {
        guard hostAllowed(request.headers["host"]) else {
            return .text(421, "this server does not answer to that Host")
        }
        let origin = origin(request.headers["origin"])
        if origin == .foreign && request.method != "GET" && request.method != "HEAD" && request.method != "OPTIONS" {
            return .text(403, "requests from that origin are not allowed")
        }
        if needsToken && !authorized(request.headers["authorization"]) {
            var fields: [(String, String)] = [("WWW-Authenticate", "Bearer")]
            if case .allowed(let o) = origin { fields += corsFields(origin: o) }
            return .text(401, "a valid bearer token is required", headers: fields)
        }
        return nil
    }

    /// `scheme://host[:port]` in lower case, without a trailing slash.
    private static func normalizedOrigin(_ origin: String) -> String {
        var o = origin.lowercased()
        while o.hasSuffix("/") { o.removeLast() }
        return o
    }
}
