// coturn's shared-secret, time-limited credentials (the "TURN REST API" scheme: coturn's
// `use-auth-secret` with `static-auth-secret`), which a rendezvous node hands its registered
// peers so that they need no TURN configuration of their own; the node's offer (its TURN servers,
// the secret, the lifetime) and the plaintext of the sealed answer that carries them
// (`PacketType.turnCredentials`). docs/turn.md, "Deployment", says how the two processes pair.
internal import CMediaShims
package import MediaCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// One TURN user of coturn's shared-secret scheme: the user name is "<expiry>:<id>" (the expiry
/// in seconds since 1970, after which coturn refuses it), the password the base64 of
/// HMAC-SHA1(secret, user name). coturn checks both from the secret alone, with no user database.
/// Thread rule: a value type. Cost: `make` is one HMAC-SHA1 (OpenSSL's, as the TURN client's
/// MESSAGE-INTEGRITY).
package struct TURNCredentials: Sendable, Equatable {
    /// "<expiry>:<id>".
    package var username: String
    /// base64(HMAC-SHA1(secret, username)), 28 characters.
    package var password: String

    /// Credentials as given (parsed from an answer, or made by a test).
    package init(username: String, password: String) {
        self.username = username
        self.password = password
    }

    /// The credentials coturn accepts for `id` (no ':') until `expiry` under `secret`.
    /// Thread rule: any thread. Cost: one HMAC-SHA1 and a base64 encoding.
    package static func make(secret: SecretKeyBytes, id: String, expiry: UInt64) -> TURNCredentials {
        let username = "\(expiry):\(id)"
        return TURNCredentials(username: username, password: Base64.encode(hmacSHA1(key: secret, Array(username.utf8))))
    }

    /// The expiry in the user name (seconds since 1970); nil when it does not start with digits
    /// and a ':'. Thread rule: any thread. Cost: a scan of the name.
    package var expiry: UInt64? {
        guard let colon = username.firstIndex(of: ":") else { return nil }
        return UInt64(username[..<colon])
    }

    /// HMAC-SHA1 of `data` under the secret's bytes, read in place (no copy of the secret).
    /// Thread rule: any thread. Cost: one HMAC-SHA1 in libcrypto.
    package static func hmacSHA1(key: SecretKeyBytes, _ data: [UInt8]) -> [UInt8] {
        key.withUnsafeBytes { STUNMessage.hmacSHA1(key: $0, data) }
    }

}

/// What a rendezvous node offers its registered peers: the TURN servers it is paired with, the
/// secret it shares with them (coturn's `static-auth-secret`) and how long each set of
/// credentials lasts. The secret never leaves the node; peers get credentials made from it.
/// Thread rule: a value type (the secret is immutable zeroing storage). Cost: none until used.
package struct TURNOffer: Sendable {
    /// The servers, `kind` `.turn` with empty user and password (at most
    /// `RendezvousAuth.maxTURNServers`).
    package let servers: [ICEServer]
    /// coturn's `static-auth-secret`, as its bytes.
    package let secret: SecretKeyBytes
    /// Seconds each set of credentials is valid for (from when it is made).
    package let lifetime: UInt32
    /// The default lifetime: one hour. Peers ask again halfway through.
    package static let defaultLifetime: UInt32 = 3600
    /// A secret shorter than this is refused (coturn's own examples use 32 or more characters).
    package static let minimumSecretLength = 16

    /// An offer of `servers` (at most four, no duplicates) under `secret`, each set of credentials
    /// valid for `lifetime` seconds (at least 2).
    /// - Throws: `RevueError` `.invalidConfiguration` naming the problem.
    package init(servers: [ICEServer], secret: SecretKeyBytes, lifetime: UInt32 = defaultLifetime) throws(RevueError) {
        guard !servers.isEmpty, servers.count <= RendezvousAuth.maxTURNServers else {
            throw RevueError(.invalidConfiguration, "a rendezvous node offers 1 to \(RendezvousAuth.maxTURNServers) TURN servers")
        }
        guard Set(servers).count == servers.count else { throw RevueError(.invalidConfiguration, "a TURN server is named twice") }
        guard lifetime >= 2 else { throw RevueError(.invalidConfiguration, "TURN credentials must last at least 2 s") }
        let names = servers.filter { $0.transport == .tls }.reduce(0) { $0 + ($1.tls.serverName?.utf8.count ?? 0) }
        guard names <= RendezvousAuth.maxTURNServerNamesLength else {
            throw RevueError(
                .invalidConfiguration,
                "the TLS servers' names take \(names) bytes, more than \(RendezvousAuth.maxTURNServerNamesLength)")
        }
        guard secret.count >= Self.minimumSecretLength else {
            throw RevueError(.invalidConfiguration, "the TURN secret has fewer than \(Self.minimumSecretLength) characters")
        }
        self.servers = servers.map {
            ICEServer(
                kind: .turn, address: $0.address, transport: $0.transport,
                tls: $0.transport == .tls ? ICEServer.TLSVerification(serverName: $0.tls.serverName) : .init())
        }
        self.secret = secret
        self.lifetime = lifetime
    }

    /// Parses a TURN server as WebRTC names it: `turn:HOST:PORT`, `turn:HOST:PORT?transport=udp`
    /// or `?transport=tcp`, or `turns:HOST:PORT` for TURN over TLS (RFC 7065; IPv6 in brackets).
    /// A host name is resolved now (IPv4 preferred): peers get the address and, for `turns:`,
    /// the name, which the server's certificate must carry (a numeric host: its IP address).
    /// Thread rule: any thread. Cost: may block on `getaddrinfo` for a name.
    /// - Throws: `RevueError` `.invalidConfiguration` naming the text and the problem.
    package static func server(parsing text: String) throws(RevueError) -> ICEServer {
        func bad(_ reason: String) -> RevueError {
            RevueError(
                .invalidConfiguration,
                "TURN URL '\(text)': \(reason) (expected turn:HOST:PORT[?transport=tcp] or turns:HOST:PORT)")
        }
        let tls = text.hasPrefix("turns:")
        guard tls || text.hasPrefix("turn:") else { throw bad("it must start with turn: or turns:") }
        var rest = Substring(text.dropFirst(tls ? "turns:".count : "turn:".count))
        var transport = tls ? ICEServer.Transport.tls : .udp
        if let q = rest.firstIndex(of: "?") {
            let query = rest[rest.index(after: q)...]
            rest = rest[..<q]
            let value = query.hasPrefix("transport=") ? String(query.dropFirst("transport=".count)).lowercased() : ""
            guard !tls, value == "udp" || value == "tcp", let t = ICEServer.Transport(rawValue: value) else {
                throw bad(tls ? "turns: takes no option" : "the only option is ?transport=udp or ?transport=tcp")
            }
            transport = t
        }
        let address: SocketAddress
        do { address = try SocketAddress(parsing: String(rest)) } catch { throw bad(error.reason) }
        guard address.port != 0, !address.isUnspecified else { throw bad("no port, or an unspecified address") }
        // A host name (not an IPv4 literal; IPv6 ones are bracketed) is what the certificate names.
        var name: String?
        if tls, !rest.hasPrefix("["), let colon = rest.lastIndex(of: ":"),
            rest[..<colon].contains(where: { !($0.isNumber || $0 == ".") })
        {
            name = String(rest[..<colon]).lowercased()
        }
        return ICEServer(
            kind: .turn, address: address, transport: transport, tls: ICEServer.TLSVerification(serverName: name))
    }

    /// Reads coturn's `static-auth-secret` from a file: its first line, surrounding white space
    /// removed. Refused when the file can be read by others than its owner and group (mode bits
    /// 0o004), when the line is shorter than `minimumSecretLength`, or has white space, '#' or a
    /// control character inside (coturn's configuration could not hold it as written).
    /// Thread rule: any thread. Cost: one small file read; the plain copy is wiped.
    /// - Throws: `RevueError` `.invalidConfiguration` naming the file and the problem.
    package static func readSecret(path: String) throws(RevueError) -> SecretKeyBytes {
        var st = stat()
        guard stat(path, &st) == 0 else { throw RevueError(.invalidConfiguration, "TURN secret file \(path): cannot read it") }
        guard st.st_mode & 0o004 == 0 else {
            throw RevueError(.invalidConfiguration, "TURN secret file \(path): readable by everyone (chmod o-r)")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw RevueError(.invalidConfiguration, "TURN secret file \(path): cannot read it")
        }
        var bytes = [UInt8](data)
        defer { Sodium.wipe(&bytes) }
        let line = bytes.prefix { $0 != 0x0A && $0 != 0x0D }
        let trimmed = line.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 }.reversed()
        var secret = Array(trimmed)
        guard secret.count >= minimumSecretLength else {
            Sodium.wipe(&secret)
            throw RevueError(
                .invalidConfiguration, "TURN secret file \(path): the secret has fewer than \(minimumSecretLength) characters")
        }
        guard secret.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "#") }) else {
            Sodium.wipe(&secret)
            throw RevueError(
                .invalidConfiguration, "TURN secret file \(path): use printable ASCII without spaces or '#'")
        }
        return SecretKeyBytes(wiping: &secret)
    }
}

/// The plaintext of a credentials answer (`PacketType.turnCredentials`): written by the node,
/// read by the peer. Pure functions, any thread; cost linear in the servers.
package enum TURNCredentialsWire {
    /// [valid for s u32][username s8][password s8][count u8]([transport u8][endpoint]
    /// [with transport 2: server name s8]) x count; transport 0 UDP, 1 TCP, 2 TLS.
    /// Precondition: at most `RendezvousAuth.maxTURNServers` servers, the user name and password
    /// within their wire bounds.
    package static func plaintext(validFor: UInt32, credentials: TURNCredentials?, servers: [ICEServer]) -> [UInt8] {
        var w = ByteWriter(capacity: 160)
        w.u32(validFor)
        let user = Array((credentials?.username ?? "").utf8), pass = Array((credentials?.password ?? "").utf8)
        precondition(user.count <= RendezvousAuth.maxTURNUsernameLength && pass.count <= RendezvousAuth.maxTURNPasswordLength)
        precondition(servers.count <= RendezvousAuth.maxTURNServers)
        w.u8(UInt8(user.count))
        w.append(user)
        w.u8(UInt8(pass.count))
        w.append(pass)
        w.u8(UInt8(servers.count))
        for s in servers {
            switch s.transport {
            case .udp: w.u8(0)
            case .tcp: w.u8(1)
            case .tls: w.u8(2)
            }
            w.endpoint(s.address)
            if s.transport == .tls {
                let name = Array((s.tls.serverName ?? "").utf8)
                w.u8(UInt8(name.count))
                w.append(name)
            }
        }
        return w.bytes
    }

    /// The servers of an answer with its credentials filled in, and how long they are valid for;
    /// nil for anything malformed (lengths past their bounds, an unknown transport, a server
    /// name that is not a DNS name, trailing bytes, servers without credentials). A TLS server's
    /// certificate is checked against the system's CA store and its name (or address).
    package static func parse(_ plain: [UInt8]) -> (validFor: UInt32, servers: [ICEServer])? {
        var r = ByteReader(plain)
        guard let validFor = r.u32(), let ul = r.u8(), Int(ul) <= RendezvousAuth.maxTURNUsernameLength,
            let user = r.take(Int(ul)), let pl = r.u8(), Int(pl) <= RendezvousAuth.maxTURNPasswordLength,
            let pass = r.take(Int(pl)), let count = r.u8(), Int(count) <= RendezvousAuth.maxTURNServers
        else { return nil }
        let username = String(decoding: user, as: UTF8.self), password = String(decoding: pass, as: UTF8.self)
        var servers: [ICEServer] = []
        var names = 0
        for _ in 0..<Int(count) {
            guard let t = r.u8(), t <= 2, let address = r.endpoint(), address.port != 0 else { return nil }
            var server = ICEServer(
                kind: .turn, address: address, username: username, password: password, transport: t == 0 ? .udp : .tcp)
            if t == 2 {
                guard let length = r.u8(), names + Int(length) <= RendezvousAuth.maxTURNServerNamesLength,
                    let name = r.take(Int(length)),
                    name.allSatisfy({
                        $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") || ($0 < 0x80 && isalnum(Int32($0)) != 0)
                    })
                else { return nil }
                names += Int(length)
                server.transport = .tls
                server.tls = ICEServer.TLSVerification(serverName: name.isEmpty ? nil : String(decoding: name, as: UTF8.self))
            }
            servers.append(server)
        }
        guard r.remaining == 0, servers.isEmpty || (!username.isEmpty && !password.isEmpty) else { return nil }
        return (validFor, servers)
    }
}
