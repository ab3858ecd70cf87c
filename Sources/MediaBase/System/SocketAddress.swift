import Glibc

/// An IPv4 or IPv6 address with a UDP port: what sockets bind to, send to and report as a source.
/// Parses `"1.2.3.4:5000"`, `"[::1]:5000"` and `"name:5000"`, prints the same forms.
/// Thread rule: a value, safe anywhere. Cost: parsing a name resolves it (blocking `getaddrinfo`,
/// except `localhost`); everything else is a few copies.
public struct SocketAddress: Hashable, Sendable, CustomStringConvertible {
    /// The address family.
    public enum Family: Hashable, Sendable {
        /// IPv4 (`AF_INET`).
        case ipv4
        /// IPv6 (`AF_INET6`).
        case ipv6
    }

    /// IPv4 or IPv6.
    public let family: Family
    /// The UDP port in host byte order.
    public var port: UInt16
    /// The address bytes in network order: IPv4 uses the first 4 bytes of `high`'s memory.
    private var high: UInt64 = 0
    private var low: UInt64 = 0
    /// The IPv6 scope (interface index) for link-local addresses; 0 otherwise.
    public var scopeID: UInt32 = 0

    /// The IPv4 address `a.b.c.d` with `port`.
    public init(ipv4 a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8, port: UInt16) {
        family = .ipv4
        self.port = port
        withUnsafeMutableBytes(of: &high) {
            $0[0] = a; $0[1] = b; $0[2] = c; $0[3] = d
        }
    }

    /// An IPv6 address from its 16 bytes in network order.
    public init(ipv6 bytes: [UInt8], port: UInt16, scopeID: UInt32 = 0) {
        precondition(bytes.count == 16, "an IPv6 address has 16 bytes")
        family = .ipv6
        self.port = port
        self.scopeID = scopeID
        withUnsafeMutableBytes(of: &high) { $0.copyBytes(from: bytes[0..<8]) }
        withUnsafeMutableBytes(of: &low) { $0.copyBytes(from: bytes[8..<16]) }
    }

    /// `127.0.0.1:port`.
    public static func loopbackIPv4(port: UInt16) -> SocketAddress { SocketAddress(ipv4: 127, 0, 0, 1, port: port) }
    /// `[::1]:port`.
    public static func loopbackIPv6(port: UInt16) -> SocketAddress {
        SocketAddress(ipv6: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], port: port)
    }
    /// `0.0.0.0:port`: every IPv4 interface.
    public static func anyIPv4(port: UInt16) -> SocketAddress { SocketAddress(ipv4: 0, 0, 0, 0, port: port) }
    /// `[::]:port`: every IPv6 interface.
    public static func anyIPv6(port: UInt16) -> SocketAddress {
        SocketAddress(ipv6: [UInt8](repeating: 0, count: 16), port: port)
    }

    /// True for the wildcard addresses 0.0.0.0 and :: (bind to every interface).
    public var isUnspecified: Bool { high == 0 && (family == .ipv4 || low == 0) }

    /// The address bytes in network order (4 for IPv4, 16 for IPv6).
    public var addressBytes: [UInt8] {
        var out = [UInt8]()
        withUnsafeBytes(of: high) { out += $0 }
        withUnsafeBytes(of: low) { out += $0 }
        return family == .ipv4 ? Array(out[0..<4]) : out
    }

    /// Parses `host:port`, `[ipv6]:port` or a bare `[ipv6]`/`host` with `defaultPort`. `host` may be a
    /// numeric IPv4 or IPv6 address, `localhost` (always 127.0.0.1) or a name resolved with
    /// `getaddrinfo`, which prefers an IPv4 result.
    public init(parsing text: String, defaultPort: UInt16? = nil) throws(SocketAddressParseError) {
        var host = Substring(text)
        var portText: Substring? = nil
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else {
                throw SocketAddressParseError(input: text, reason: "missing ']' after the IPv6 address")
            }
            let rest = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if rest.hasPrefix(":") {
                portText = rest.dropFirst()
            } else if !rest.isEmpty {
                throw SocketAddressParseError(input: text, reason: "expected ':port' after ']'")
            }
        } else if let colon = host.lastIndex(of: ":") {
            if host[..<colon].contains(":") {
                // A bare IPv6 address without brackets: no port.
            } else {
                portText = host[host.index(after: colon)...]
                host = host[..<colon]
            }
        }
        let port: UInt16
        if let portText {
            guard let p = UInt16(portText) else {
                throw SocketAddressParseError(input: text, reason: "port '\(portText)' is not a number in 0...65535")
            }
            port = p
        } else if let defaultPort {
            port = defaultPort
        } else {
            throw SocketAddressParseError(input: text, reason: "missing ':port'")
        }
        guard !host.isEmpty else { throw SocketAddressParseError(input: text, reason: "missing host") }
        try self.init(host: String(host), port: port, input: text)
    }

    /// Resolves `host` (numeric IPv4/IPv6, `localhost`, or a name) with `port`.
    public init(host: String, port: UInt16) throws(SocketAddressParseError) {
        try self.init(host: host, port: port, input: host)
    }

    private init(host: String, port: UInt16, input: String) throws(SocketAddressParseError) {
        if host == "localhost" { self = .loopbackIPv4(port: port); return }
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_addr = v4
            sin.sin_port = port.bigEndian
            self.init(sockaddrIn: sin)
            return
        }
        var v6 = in6_addr()
        var name = host
        var scope: UInt32 = 0
        if let percent = host.firstIndex(of: "%") {
            name = String(host[..<percent])
            let zone = String(host[host.index(after: percent)...])
            scope = UInt32(zone) ?? if_nametoindex(zone)
            if scope == 0 { throw SocketAddressParseError(input: input, reason: "unknown IPv6 zone '\(zone)'") }
        }
        if inet_pton(AF_INET6, name, &v6) == 1 {
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_addr = v6
            sin6.sin6_port = port.bigEndian
            sin6.sin6_scope_id = scope
            self.init(sockaddrIn6: sin6)
            return
        }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>? = nil
        let rc = getaddrinfo(host, nil, &hints, &list)
        guard rc == 0, let list else {
            throw SocketAddressParseError(input: input, reason: "cannot resolve '\(host)': \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(list) }
        var found: SocketAddress? = nil
        var cursor: UnsafeMutablePointer<addrinfo>? = list
        while let entry = cursor {
            if let sa = entry.pointee.ai_addr, let address = SocketAddress(sockaddr: sa) {
                if found == nil || (found?.family == .ipv6 && address.family == .ipv4) { found = address }
            }
            cursor = entry.pointee.ai_next
        }
        guard var address = found else {
            throw SocketAddressParseError(input: input, reason: "'\(host)' has no IPv4 or IPv6 address")
        }
        address.port = port
        self = address
    }

    package init(sockaddrIn sin: sockaddr_in) {
        family = .ipv4
        port = UInt16(bigEndian: sin.sin_port)
        var addr = sin.sin_addr
        withUnsafeMutableBytes(of: &high) { dst in withUnsafeBytes(of: &addr) { dst.copyMemory(from: $0) } }
    }

    package init(sockaddrIn6 sin6: sockaddr_in6) {
        family = .ipv6
        port = UInt16(bigEndian: sin6.sin6_port)
        scopeID = sin6.sin6_scope_id
        var addr = sin6.sin6_addr
        withUnsafeBytes(of: &addr) { src in
            withUnsafeMutableBytes(of: &high) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: src[0..<8])) }
            withUnsafeMutableBytes(of: &low) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: src[8..<16])) }
        }
    }

    /// Reads a kernel `sockaddr`; nil for families other than IPv4/IPv6. A v4-mapped IPv6
    /// address (`::ffff:a.b.c.d`, how a dual-stack socket reports an IPv4 peer) reads as the IPv4
    /// address it stands for, so one peer has one `SocketAddress` whichever socket it reached.
    package init?(sockaddr pointer: UnsafePointer<sockaddr>) {
        switch Int32(pointer.pointee.sa_family) {
        case AF_INET:
            let sin = UnsafeRawPointer(pointer).loadUnaligned(as: sockaddr_in.self)
            self.init(sockaddrIn: sin)
        case AF_INET6:
            let sin6 = UnsafeRawPointer(pointer).loadUnaligned(as: sockaddr_in6.self)
            self.init(sockaddrIn6: sin6)
            if isV4Mapped {
                let v4 = withUnsafeBytes(of: low) { (a: $0[4], b: $0[5], c: $0[6], d: $0[7]) }  // bytes 12...15
                self = SocketAddress(ipv4: v4.a, v4.b, v4.c, v4.d, port: port)
            }
        default:
            return nil
        }
    }

    /// True for an IPv6 address in `::ffff:0:0/96` (an IPv4 address as a dual-stack socket writes it).
    package var isV4Mapped: Bool {
        guard family == .ipv6, high == 0 else { return false }
        return withUnsafeBytes(of: low) { $0[0] == 0 && $0[1] == 0 && $0[2] == 0xFF && $0[3] == 0xFF }  // bytes 8...11
    }

    /// The `AF_*` constant.
    package var cFamily: Int32 { family == .ipv4 ? AF_INET : AF_INET6 }

    /// Writes this address as a kernel `sockaddr` into `storage`; returns its length. For a socket
    /// of `socketFamily` .ipv6 an IPv4 address is written v4-mapped (`::ffff:a.b.c.d`), the form a
    /// dual-stack socket sends to.
    package func write(into storage: UnsafeMutablePointer<sockaddr_storage>, socketFamily: Family? = nil) -> socklen_t {
        let raw = UnsafeMutableRawPointer(storage)
        if family == .ipv4 && socketFamily == .ipv6 {
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { dst in
                dst[10] = 0xFF
                dst[11] = 0xFF
                withUnsafeBytes(of: high) { (dst.baseAddress! + 12).copyMemory(from: $0.baseAddress!, byteCount: 4) }
            }
            raw.storeBytes(of: sin6, as: sockaddr_in6.self)
            return socklen_t(MemoryLayout<sockaddr_in6>.size)
        }
        switch family {
        case .ipv4:
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = port.bigEndian
            withUnsafeMutableBytes(of: &sin.sin_addr) { dst in
                withUnsafeBytes(of: high) { dst.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[0..<4])) }
            }
            raw.storeBytes(of: sin, as: sockaddr_in.self)
            return socklen_t(MemoryLayout<sockaddr_in>.size)
        case .ipv6:
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            sin6.sin6_scope_id = scopeID
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { dst in
                withUnsafeBytes(of: high) { dst.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: 8) }
                withUnsafeBytes(of: low) { (dst.baseAddress! + 8).copyMemory(from: $0.baseAddress!, byteCount: 8) }
            }
            raw.storeBytes(of: sin6, as: sockaddr_in6.self)
            return socklen_t(MemoryLayout<sockaddr_in6>.size)
        }
    }

    /// Calls `body` with this address as a kernel `sockaddr` and its length. Cost: a copy into a
    /// `sockaddr_storage` on the stack.
    /// With `socketFamily` .ipv6 an IPv4 address is passed v4-mapped (for a dual-stack socket).
    package func withSockaddr<R, E: Error>(
        socketFamily: Family? = nil, _ body: (UnsafePointer<sockaddr>, socklen_t) throws(E) -> R
    ) throws(E) -> R {
        var storage = sockaddr_storage()
        let length = write(into: &storage, socketFamily: socketFamily)
        return try withUnsafePointer(to: &storage) { (p) throws(E) -> R in
            try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { (sa) throws(E) -> R in try body(sa, length) }
        }
    }

    /// The numeric host part: `1.2.3.4` or `::1` (with `%scope` when set).
    public var host: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        var copy = (high, low)
        let count = buffer.count
        _ = withUnsafeBytes(of: &copy) { src in
            buffer.withUnsafeMutableBufferPointer { inet_ntop(cFamily, src.baseAddress, $0.baseAddress, socklen_t(count)) }
        }
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return scopeID != 0 && family == .ipv6 ? "\(text)%\(scopeID)" : text
    }

    /// `1.2.3.4:5000` or `[::1]:5000`.
    public var description: String { family == .ipv4 ? "\(host):\(port)" : "[\(host)]:\(port)" }
}

/// Text that is not a socket address: names the input and what is wrong with it.
/// Thread rule: a value. Cost: none.
public struct SocketAddressParseError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The text that was parsed.
    public var input: String
    /// What is wrong with it.
    public var reason: String
    /// A readable description, for logs and error messages.
    public var description: String { "invalid socket address '\(input)': \(reason)" }
}
