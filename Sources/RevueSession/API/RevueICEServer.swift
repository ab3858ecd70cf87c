// The STUN and TURN servers an app names in `RevueConfiguration.iceServers`: the public value
// type, its revue-node text forms (`HOST:PORT`, `USER:PASS@HOST:PORT[?transport=tcp]`), and the
// resolved `MediaCore.ICEServer` the call layer's ICE agents gather candidates from.
package import MediaCore

/// A STUN or TURN server that call media may use to find a way through NATs: STUN tells a peer
/// its address as seen from outside, TURN relays media when no direct path works.
/// Thread rule: a value type, safe anywhere. Cost: none until `resolved()`.
public struct RevueICEServer: Sendable, Hashable, CustomStringConvertible {
    /// Which protocol the server speaks.
    public enum Kind: Sendable, Hashable {
        /// A STUN server (RFC 8489): Binding requests only.
        case stun
        /// A TURN server (RFC 8656) with long-term credentials; it answers Binding requests too.
        case turn
    }

    /// How a TURN server is reached: UDP, or TCP where a network lets no UDP out.
    public enum Transport: String, Sendable, Hashable {
        /// TURN over UDP (the default).
        case udp
        /// TURN over TCP (RFC 8656 §3.1); media to the peer still leaves the relay as UDP.
        case tcp
    }

    /// STUN or TURN.
    public var kind: Kind
    /// `host:port` or `[ipv6]:port` as given; `host` may be a name, resolved by `resolved()`.
    public var address: String
    /// The TURN user name (empty for STUN).
    public var username: String
    /// The TURN password (empty for STUN).
    public var password: String
    /// How the TURN server is reached (always `.udp` for STUN).
    public var transport: Transport

    /// A STUN server at `hostPort` (`"stun.example.net:3478"`, `"[2001:db8::1]:3478"`).
    /// Cost: none; the text is checked when the server is resolved.
    public static func stun(_ hostPort: String) -> RevueICEServer {
        RevueICEServer(kind: .stun, address: hostPort, username: "", password: "", transport: .udp)
    }

    /// A TURN server at `hostPort` with a static long-term user, reached over `transport`.
    /// Cost: none; the text is checked when the server is resolved.
    public static func turn(_ hostPort: String, username: String, password: String, transport: Transport = .udp) -> RevueICEServer
    {
        RevueICEServer(kind: .turn, address: hostPort, username: username, password: password, transport: transport)
    }

    private init(kind: Kind, address: String, username: String, password: String, transport: Transport) {
        self.kind = kind
        self.address = address
        self.username = username
        self.password = password
        self.transport = transport
    }

    /// Parses revue-node's forms: `HOST:PORT` is a STUN server, `USER:PASS@HOST:PORT` a TURN
    /// server over UDP, `USER:PASS@HOST:PORT?transport=tcp` (or `=udp`) one over TCP. The user
    /// name may not contain `:`; the password may contain anything but is split at the last `@`.
    /// An IPv6 host goes in brackets. Names are not resolved here.
    /// Thread rule: any thread. Cost: a few string scans.
    /// - Throws: `RevueError` with code `.invalidConfiguration`, naming the text and the problem.
    public init(parsing text: String) throws(RevueError) {
        func bad(_ reason: String) -> RevueError {
            RevueError(
                .invalidConfiguration,
                "ICE server '\(text)': \(reason) (expected HOST:PORT or USER:PASS@HOST:PORT[?transport=tcp])")
        }
        var rest = Substring(text)
        var transport = Transport.udp
        var hasQuery = false
        if let q = rest.firstIndex(of: "?") {
            hasQuery = true
            let query = rest[rest.index(after: q)...]
            rest = rest[..<q]
            guard query.hasPrefix("transport="),
                let t = Transport(rawValue: String(query.dropFirst("transport=".count)).lowercased())
            else {
                throw bad("the only option is ?transport=udp or ?transport=tcp")
            }
            transport = t
        }
        var username = "", password = ""
        let isTURN = rest.contains("@")
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            rest = rest[rest.index(after: at)...]
            guard let colon = credentials.firstIndex(of: ":") else { throw bad("TURN credentials are USER:PASS") }
            username = String(credentials[..<colon])
            password = String(credentials[credentials.index(after: colon)...])
            guard !username.isEmpty else { throw bad("empty TURN user name") }
            guard !password.isEmpty else { throw bad("empty TURN password") }
        } else if hasQuery {
            throw bad("?transport= is for TURN servers (USER:PASS@HOST:PORT)")
        }
        if let reason = Self.hostPortProblem(rest) { throw bad(reason) }
        self.init(
            kind: isTURN ? .turn : .stun, address: String(rest), username: username, password: password, transport: transport)
    }

    /// Why `text` is not `host:port` or `[ipv6]:port` with a port in 1...65535; nil when it is.
    private static func hostPortProblem(_ text: Substring) -> String? {
        let host: Substring, port: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return "missing ']' after the IPv6 address" }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            guard after.hasPrefix(":") else { return "missing :PORT" }
            port = after.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { return "missing :PORT" }
            host = text[..<colon]
            port = text[text.index(after: colon)...]
            if host.contains(":") { return "an IPv6 address goes in brackets: [ADDR]:PORT" }
        }
        if host.isEmpty { return "missing host" }
        if host.contains(where: { $0 == " " || $0 == "/" || $0 == "@" }) { return "'\(host)' is not a host name or address" }
        guard let p = UInt16(port), p != 0 else { return "port '\(port)' is not a number in 1...65535" }
        return nil
    }

    /// The form `init(parsing:)` reads, with the password hidden: `stun:HOST:PORT` or
    /// `turn:USER@HOST:PORT[?transport=tcp]`.
    public var description: String {
        switch kind {
        case .stun: return "stun:\(address)"
        case .turn: return "turn:\(username)@\(address)" + (transport == .tcp ? "?transport=tcp" : "")
        }
    }

    /// The server as the ICE agent takes it, its host name resolved to an address (IPv4
    /// preferred); nil when the address is not `host:port` or the name does not resolve.
    /// Thread rule: any thread. Cost: may block on `getaddrinfo` for a name; none for a numeric
    /// address. Call it off the main actor when names are configured.
    package func resolved() -> ICEServer? {
        guard Self.hostPortProblem(Substring(address)) == nil, let a = try? SocketAddress(parsing: address) else { return nil }
        switch kind {
        case .stun:
            return ICEServer(kind: .stun, address: a)
        case .turn:
            return ICEServer(
                kind: .turn, address: a, username: username, password: password, transport: transport == .tcp ? .tcp : .udp)
        }
    }
}

extension RevueConfiguration {
    /// Every server an ICE agent of a call leg gathers from: `iceServers` resolved (in order,
    /// unresolvable ones left out), then each rendezvous node as a STUN server (a rendezvous node
    /// answers STUN Binding requests on its port), without duplicates.
    /// Thread rule: any thread. Cost: may block on `getaddrinfo` for configured names.
    package var resolvedICEServers: [ICEServer] {
        var out: [ICEServer] = []
        for server in iceServers {
            if let r = server.resolved(), !out.contains(r) { out.append(r) }
        }
        for node in rendezvousNodes {
            if let a = SocketAddress.parse(node) {
                let stun = ICEServer(kind: .stun, address: a)
                if !out.contains(stun) { out.append(stun) }
            }
        }
        return out
    }
}
