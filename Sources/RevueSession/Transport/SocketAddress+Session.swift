// What the session layer needs of MediaCore's `SocketAddress`: IPv4 only (its wire format carries
// a 32-bit address), parsing with an empty host meaning this host, and the LAN test for paths.
#if canImport(Glibc)
import Glibc
#endif
internal import MediaCore

extension SocketAddress {
    /// The IPv4 endpoint `ip` (host byte order) with `port`.
    init(ip: UInt32, port: UInt16) { self.init(ipv4Address: ip, port: port) }

    /// The IPv4 address in host byte order (the session only makes IPv4 addresses; 0 for IPv6).
    var ip: UInt32 { ipv4Address ?? 0 }

    /// Resolves a host (numeric IPv4 or a name) with `port`; nil unless it is IPv4.
    static func sessionIPv4(host: String, port: UInt16) -> SocketAddress? {
        guard let a = try? SocketAddress(host: host, port: port), a.family == .ipv4 else { return nil }
        return a
    }

    /// Parses "host:port" (an empty host is 127.0.0.1); nil unless it is IPv4.
    static func parse(_ text: String) -> SocketAddress? {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else { return nil }
        let host = String(text[..<colon])
        return sessionIPv4(host: host.isEmpty ? "127.0.0.1" : host, port: port)
    }

    /// Loopback, or inside the subnet of one of this host's interfaces: where a LAN announcement
    /// may come from.
    var isOnLocalSubnet: Bool {
        ip >> 24 == 127 || Self.localSubnets.contains { ip & $0.mask == $0.network }
    }

    /// Loopback, private (RFC 1918), link-local or CGNAT space: addresses a public rendezvous node
    /// has no business reporting.
    var isPrivateOrLoopback: Bool {
        let a = ip >> 24, b = ip >> 16 & 255
        return a == 0 || a == 10 || a == 127 || (a == 172 && (16...31).contains(b)) || (a == 192 && b == 168)
            || (a == 169 && b == 254) || (a == 100 && (64...127).contains(b))
    }

    /// Private (RFC 1918), link-local, loopback or CGNAT space, or inside the subnet of one of
    /// this host's interfaces: what a LAN path looks like.
    var isLocal: Bool {
        let a = ip >> 24, b = ip >> 16 & 255
        if a == 10 || a == 127 || (a == 172 && (16...31).contains(b)) || (a == 192 && b == 168)
            || (a == 169 && b == 254) || (a == 100 && (64...127).contains(b)) {
            return true
        }
        return Self.localSubnets.contains { ip & $0.mask == $0.network }
    }

    /// The IPv4 subnets of this host's interfaces (read once with getifaddrs).
    static let localSubnets: [(network: UInt32, mask: UInt32)] = {
        var result: [(UInt32, UInt32)] = []
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0 else { return [] }
        defer { freeifaddrs(list) }
        var p = list
        while let i = p {
            if let addr = i.pointee.ifa_addr, let mask = i.pointee.ifa_netmask, addr.pointee.sa_family == sa_family_t(AF_INET) {
                let a = addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt32(bigEndian: $0.pointee.sin_addr.s_addr) }
                let m = mask.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt32(bigEndian: $0.pointee.sin_addr.s_addr) }
                result.append((a & m, m))
            }
            p = i.pointee.ifa_next
        }
        return result
    }()
}
