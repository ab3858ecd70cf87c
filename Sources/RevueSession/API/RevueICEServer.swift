// The STUN and TURN servers an app names in `RevueConfiguration.iceServers`: the public value
// type, its revue-node text forms (`HOST:PORT`, `USER:PASS@HOST:PORT[?transport=tcp]`,
// `turns:USER:PASS@HOST[:PORT][?ca=FILE&fingerprint=SHA256]`), and the
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

    /// How a TURN server is reached: UDP, TCP where a network lets no UDP out, or TLS over TCP.
    public enum Transport: String, Sendable, Hashable {
        /// TURN over UDP (the default).
        case udp
        /// TURN over TCP (RFC 8656 §3.1); media to the peer still leaves the relay as UDP.
        case tcp
        /// TURN over TLS over TCP (RFC 8656 §3.1, the `turns:` scheme of RFC 7065, usually port
        /// 5349 or 443): the server's certificate is checked (`certificateAuthorityFile`,
        /// `certificateSHA256`, else the system's CA store and the host name) before anything is
        /// sent; media to the peer still leaves the relay as UDP.
        case tls
    }

    /// The port a `turns:` server listens on when the text names none (RFC 8656 §3.1).
    public static let defaultTLSPort = 5349
    /// The port a `stun:` or `turn:` server listens on when the text names none.
    public static let defaultPort = 3478

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
    /// `.tls` only: a PEM file of the CA certificates the server's certificate must chain to (nil:
    /// the system's store). The certificate must also name the host of `address` (a DNS name, or
    /// the numeric address as an IP subjectAltName).
    public var certificateAuthorityFile: String?
    /// `.tls` only: the SHA-256 digest of the server's certificate as 64 hex digits (colons
    /// allowed). Without `certificateAuthorityFile` it replaces the CA and name checks (a
    /// self-signed server certificate); with one, both must hold.
    public var certificateSHA256: String?

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

    /// A TURN server reached over TLS (`turns:`) at `hostPort` with a static long-term user; its
    /// certificate is checked against `certificateAuthorityFile` (nil: the system's CA store) and
    /// the host name, or against `certificateSHA256` (see the properties).
    /// Cost: none; the text is checked when the server is resolved.
    public static func turns(
        _ hostPort: String, username: String, password: String, certificateAuthorityFile: String? = nil,
        certificateSHA256: String? = nil
    ) -> RevueICEServer {
        var s = RevueICEServer(kind: .turn, address: hostPort, username: username, password: password, transport: .tls)
        s.certificateAuthorityFile = certificateAuthorityFile
        s.certificateSHA256 = certificateSHA256
        return s
    }

    private init(kind: Kind, address: String, username: String, password: String, transport: Transport) {
        self.kind = kind
        self.address = address
        self.username = username
        self.password = password
        self.transport = transport
    }

    /// Parses revue-node's forms: `HOST:PORT` is a STUN server, `USER:PASS@HOST:PORT` a TURN
    /// server over UDP, `USER:PASS@HOST:PORT?transport=tcp` (or `=udp`) one over TCP. A scheme
    /// may lead (RFC 7065): `stun:HOST[:PORT]`, `turn:USER:PASS@HOST[:PORT]`, and
    /// `turns:USER:PASS@HOST[:PORT]` for TURN over TLS; with a scheme the port defaults to 3478
    /// (`turns:` 5349). A `turns:` server takes the options `ca=FILE` (a PEM CA file) and
    /// `fingerprint=HEX` (the certificate's SHA-256), joined by `&` after the `?`. The user name
    /// may not contain `:`; the password may contain anything but is split at the last `@` (a
    /// user named `stun`, `turn` or `turns` needs the scheme written out). An IPv6 host goes in
    /// brackets. Names are not resolved here.
    /// Thread rule: any thread. Cost: a few string scans.
    /// - Throws: `RevueError` with code `.invalidConfiguration`, naming the text and the problem.
    public init(parsing text: String) throws(RevueError) {
        func bad(_ reason: String) -> RevueError {
            RevueError(
                .invalidConfiguration,
                "ICE server '\(text)': \(reason) (expected HOST:PORT, USER:PASS@HOST:PORT[?transport=tcp] or "
                    + "turns:USER:PASS@HOST[:PORT][?ca=FILE&fingerprint=SHA256])")
        }
        var rest = Substring(text)
        // A scheme leads only when what follows it still reads as that kind of server (otherwise
        // `turn:secret@host:1` is the user `turn` with the password `secret`).
        var scheme: Substring?
        for s in ["stun:", "turn:", "turns:"] where rest.hasPrefix(s) {
            let after = rest.dropFirst(s.count)
            let credentials = after.lastIndex(of: "@").map { after[..<$0] }
            if s == "stun:" ? credentials == nil : credentials?.contains(":") == true {
                scheme = rest.prefix(s.count - 1)
                rest = after
            }
        }
        var transport: Transport = scheme == "turns" ? .tls : .udp
        var hasQuery = false
        var caFile: String?, fingerprint: String?
        if let q = rest.firstIndex(of: "?") {
            hasQuery = true
            let query = rest[rest.index(after: q)...]
            rest = rest[..<q]
            for option in query.split(separator: "&", omittingEmptySubsequences: false) {
                if option.hasPrefix("transport="), let t = Transport(rawValue: String(option.dropFirst(10)).lowercased()) {
                    if scheme == "turns" {
                        // RFC 7065: turns: runs over TCP; UDP would be DTLS, which is not offered.
                        guard t == .tcp || t == .tls else { throw bad("turns: runs over TCP (?transport=tcp)") }
                    } else {
                        guard t != .tls else { throw bad("TLS is the turns: scheme, not a transport") }
                        transport = t
                    }
                } else if scheme == "turns", option.hasPrefix("ca="), option.count > 3 {
                    caFile = String(option.dropFirst(3))
                } else if scheme == "turns", option.hasPrefix("fingerprint=") {
                    let hex = String(option.dropFirst(12))
                    guard Self.sha256Bytes(hex) != nil else { throw bad("the fingerprint is 32 bytes of SHA-256 in hex") }
                    fingerprint = hex
                } else if scheme == "turns" {
                    throw bad("the options of turns: are ca=FILE and fingerprint=SHA256")
                } else {
                    throw bad("the only option is ?transport=udp or ?transport=tcp")
                }
            }
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
        if let scheme, !Self.hasPort(rest) {
            rest += ":\(scheme == "turns" ? Self.defaultTLSPort : Self.defaultPort)"
        }
        if let reason = Self.hostPortProblem(rest) { throw bad(reason) }
        self.init(
            kind: isTURN ? .turn : .stun, address: String(rest), username: username, password: password, transport: transport)
        certificateAuthorityFile = caFile
        certificateSHA256 = fingerprint
    }

    /// Whether `text` (`host`, `host:port`, `[v6]` or `[v6]:port`) names a port.
    private static func hasPort(_ text: Substring) -> Bool {
        if text.hasPrefix("[") { return text.firstIndex(of: "]").map { text[$0...].contains(":") } ?? true }
        return text.contains(":")
    }

    /// 64 hex digits (colons between bytes allowed) as 32 bytes; nil otherwise.
    static func sha256Bytes(_ hex: String) -> [UInt8]? {
        let digits = Array(hex.filter { $0 != ":" }.utf8)
        guard digits.count == 64 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for i in stride(from: 0, to: 64, by: 2) {
            guard let b = UInt8(String(decoding: digits[i..<(i + 2)], as: UTF8.self), radix: 16) else { return nil }
            out.append(b)
        }
        return out
    }

    /// Why `text` is not `host:port` or `[ipv6]:port` with a port in 1...65535; nil when it is.
    private static func hostPortProblem(_ text: Substring) -> String? {
        guard let (host, port) = splitHostPort(text) else {
            if text.hasPrefix("[") && !text.contains("]") { return "missing ']' after the IPv6 address" }
            return "missing :PORT"
        }
        if !text.hasPrefix("[") && host.contains(":") { return "an IPv6 address goes in brackets: [ADDR]:PORT" }
        if host.isEmpty { return "missing host" }
        if host.contains(where: { $0 == " " || $0 == "/" || $0 == "@" }) { return "'\(host)' is not a host name or address" }
        guard let p = UInt16(port), p != 0 else { return "port '\(port)' is not a number in 1...65535" }
        return nil
    }

    /// `host:port` or `[ipv6]:port` as host (without brackets) and port text; nil without a port.
    private static func splitHostPort(_ text: Substring) -> (host: Substring, port: Substring)? {
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            let after = text[text.index(after: close)...]
            guard after.hasPrefix(":") else { return nil }
            return (text[text.index(after: text.startIndex)..<close], after.dropFirst())
        }
        guard let colon = text.lastIndex(of: ":") else { return nil }
        return (text[..<colon], text[text.index(after: colon)...])
    }

    /// The form `init(parsing:)` reads, with the password hidden: `stun:HOST:PORT`,
    /// `turn:USER@HOST:PORT[?transport=tcp]` or `turns:USER@HOST:PORT`.
    public var description: String {
        switch (kind, transport) {
        case (.stun, _): return "stun:\(address)"
        case (.turn, .udp): return "turn:\(username)@\(address)"
        case (.turn, .tcp): return "turn:\(username)@\(address)?transport=tcp"
        case (.turn, .tls): return "turns:\(username)@\(address)"
        }
    }

    /// The server as the ICE agent takes it, its host name resolved to an address (IPv4
    /// preferred); nil when the address is not `host:port`, the name does not resolve, or a TLS
    /// fingerprint is not 32 bytes of hex. A TLS server's certificate must name the host as
    /// written (the name, not the address it resolved to).
    /// Thread rule: any thread. Cost: may block on `getaddrinfo` for a name; none for a numeric
    /// address. Call it off the main actor when names are configured.
    package func resolved() -> ICEServer? {
        guard Self.hostPortProblem(Substring(address)) == nil, let a = try? SocketAddress(parsing: address) else { return nil }
        switch kind {
        case .stun:
            return ICEServer(kind: .stun, address: a)
        case .turn:
            var tls = ICEServer.TLSVerification()
            if transport == .tls {
                let host = Self.splitHostPort(Substring(address)).map { String($0.host) } ?? ""
                let numeric = host.contains(":") || host.allSatisfy { $0 == "." || ("0"..."9").contains($0) }
                if !numeric { tls.serverName = host }
                tls.certificateAuthorityFile = certificateAuthorityFile
                if let f = certificateSHA256 {
                    guard let bytes = Self.sha256Bytes(f) else { return nil }
                    tls.sha256Fingerprint = bytes
                }
            }
            let t: ICEServer.Transport = transport == .tcp ? .tcp : transport == .tls ? .tls : .udp
            return ICEServer(kind: .turn, address: a, username: username, password: password, transport: t, tls: tls)
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
