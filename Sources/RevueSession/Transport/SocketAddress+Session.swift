internal import MediaCore

// What the session layer needs of MediaCore's `SocketAddress`: IPv4 and IPv6 endpoints, parsing
// with an empty host meaning this host, the keys the rendezvous node counts sources by, and the
// LAN test for paths.
#if canImport(Glibc)
    import Glibc
#endif

extension SocketAddress {
    /// The IPv4 endpoint `ip` (host byte order) with `port`.
    init(ip: UInt32, port: UInt16) { self.init(ipv4Address: ip, port: port) }

    /// The IPv4 address in host byte order; 0 for IPv6 (see `addressBytes` for those).
    var ip: UInt32 { ipv4Address ?? 0 }

    /// Resolves a host (numeric IPv4 or IPv6, or a name) with `port`.
    static func sessionAddress(host: String, port: UInt16) -> SocketAddress? {
        try? SocketAddress(host: host, port: port)
    }

    /// Parses "host:port" or "[ipv6]:port" (an empty host is 127.0.0.1).
    static func parse(_ text: String) -> SocketAddress? {
        if text.hasPrefix(":"), let port = UInt16(text.dropFirst()) { return .loopbackIPv4(port: port) }
        return try? SocketAddress(parsing: text)
    }

    /// The key a per-source rate limit counts this address under: the IPv4 address, or the /64 an
    /// IPv6 address belongs to (one site's hosts hold a whole /64, so counting single IPv6
    /// addresses would let one attacker pose as 2^64 sources). IPv4 keys have 0xFFFF in the top
    /// 16 bits, which no IPv6 unicast /64 has.
    var sourceKey: UInt64 {
        if let v4 = ipv4Address { return 0xFFFF << 48 | UInt64(v4) }
        return addressBytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The key per-network caps count this address under: the IPv4 /24, or the IPv6 /56 (a
    /// typical end site). IPv4 keys have 0xFF in the top byte; IPv6 keys have 0 there.
    var prefixKey: UInt64 {
        if let v4 = ipv4Address { return 0xFF << 56 | UInt64(v4 >> 8) }
        return addressBytes.prefix(7).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// The key the wider per-network caps count this address under: the IPv4 /16, or the IPv6
    /// /48 (what one organisation or provider customer is typically given). IPv4 keys have 0xFE in
    /// the top byte; IPv6 keys have 0 in the top two bytes.
    var widePrefixKey: UInt64 {
        if let v4 = ipv4Address { return 0xFE << 56 | UInt64(v4 >> 16) }
        return addressBytes.prefix(6).reduce(0) { $0 << 8 | UInt64($1) }
    }

    /// A multicast or limited-broadcast address (224.0.0.0/4, 255.255.255.255, ff00::/8): never a
    /// source to answer from.
    var isMulticastOrBroadcast: Bool {
        guard family == .ipv4 else { return addressBytes[0] == 0xFF }
        return ip >> 28 == 0xE || ip == 0xFFFF_FFFF
    }

    /// Loopback, or inside the subnet of one of this host's interfaces: where a LAN announcement
    /// may come from.
    var isOnLocalSubnet: Bool {
        guard family == .ipv4 else { return isIPv6Loopback || Self.onLocalIPv6Subnet(addressBytes) }
        return ip >> 24 == 127 || Self.localSubnets.contains { ip & $0.mask == $0.network }
    }

    /// ::1.
    private var isIPv6Loopback: Bool { family == .ipv6 && addressBytes == [UInt8](repeating: 0, count: 15) + [1] }

    /// IPv6 space that is not globally routed: unspecified, loopback, link-local (fe80::/10) and
    /// unique local (fc00::/7).
    private var isIPv6NonGlobal: Bool {
        let b = addressBytes
        return b == [UInt8](repeating: 0, count: 16) || isIPv6Loopback || (b[0] == 0xFE && b[1] & 0xC0 == 0x80)
            || b[0] & 0xFE == 0xFC
    }

    /// Loopback, private (RFC 1918), link-local or CGNAT space: addresses a public rendezvous node
    /// has no business reporting.
    var isPrivateOrLoopback: Bool {
        guard family == .ipv4 else { return isIPv6NonGlobal }
        let a = ip >> 24, b = ip >> 16 & 255
        return a == 0 || a == 10 || a == 127 || (a == 172 && (16...31).contains(b)) || (a == 192 && b == 168)
            || (a == 169 && b == 254) || (a == 100 && (64...127).contains(b))
    }

    /// Private (RFC 1918), link-local, loopback or CGNAT space, or inside the subnet of one of
    /// this host's interfaces: what a LAN path looks like.
    var isLocal: Bool {
        guard family == .ipv4 else { return isIPv6NonGlobal || Self.onLocalIPv6Subnet(addressBytes) }
        let a = ip >> 24, b = ip >> 16 & 255
        if a == 10 || a == 127 || (a == 172 && (16...31).contains(b)) || (a == 192 && b == 168)
            || (a == 169 && b == 254) || (a == 100 && (64...127).contains(b))
        {
            return true
        }
        return Self.localSubnets.contains { ip & $0.mask == $0.network }
    }

    /// Whether `bytes` (16) fall inside the subnet of one of this host's IPv6 interface addresses.
    private static func onLocalIPv6Subnet(_ bytes: [UInt8]) -> Bool {
        localIPv6Subnets.contains { subnet in (0..<16).allSatisfy { bytes[$0] & subnet.mask[$0] == subnet.network[$0] } }
    }

    /// The IPv6 subnets of this host's interfaces (read once with getifaddrs).
    static let localIPv6Subnets: [(network: [UInt8], mask: [UInt8])] = interfaceSubnets(family: AF_INET6)

    /// The IPv4 subnets of this host's interfaces (read once with getifaddrs).
    static let localSubnets: [(network: UInt32, mask: UInt32)] = interfaceSubnets(family: AF_INET).map { s in
        (s.network.reduce(0) { $0 << 8 | UInt32($1) }, s.mask.reduce(0) { $0 << 8 | UInt32($1) })
    }

    /// Network and mask bytes (network byte order) of every interface address of `family`
    /// (AF_INET or AF_INET6). Cost: one getifaddrs.
    private static func interfaceSubnets(family: Int32) -> [(network: [UInt8], mask: [UInt8])] {
        var result: [([UInt8], [UInt8])] = []
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return [] }
        defer { freeifaddrs(list) }
        func bytes(_ sa: UnsafeMutablePointer<sockaddr>) -> [UInt8] {
            family == AF_INET
                ? sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { s in
                    withUnsafeBytes(of: s.pointee.sin_addr) { Array($0) }
                }
                : sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { s in
                    withUnsafeBytes(of: s.pointee.sin6_addr) { Array($0) }
                }
        }
        var p = list
        while let i = p {
            if let addr = i.pointee.ifa_addr, let mask = i.pointee.ifa_netmask, addr.pointee.sa_family == sa_family_t(family) {
                let a = bytes(addr), m = bytes(mask)
                result.append((zip(a, m).map { $0 & $1 }, m))
            }
            p = i.pointee.ifa_next
        }
        return result
    }
}
