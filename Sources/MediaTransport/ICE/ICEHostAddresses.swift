// The addresses an ICE agent offers as host candidates: the socket's own address when it is bound
// to one, else every up interface address of its family, or of both for a dual-stack socket (getifaddrs).
import Glibc
import MediaBase

/// Host-candidate address discovery. Thread rule: stateless. Cost: one `getifaddrs` walk.
package enum ICEHostAddresses {
    /// The host addresses (with `port`) for a socket bound to `bound`: `bound` itself when it is a
    /// specific address; for a wildcard bind, every up interface address of its family (IPv4 too
    /// with `dualStack`), without loopback unless `includeLoopback`, and without IPv6 link-local
    /// addresses (they need a scope the peer cannot use).
    package static func addresses(bound: SocketAddress, includeLoopback: Bool, dualStack: Bool = false) -> [SocketAddress] {
        if !isWildcard(bound) { return [bound] }
        var out: [SocketAddress] = []
        var list: UnsafeMutablePointer<ifaddrs>? = nil
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            cursor = entry.pointee.ifa_next
            let flags = entry.pointee.ifa_flags
            guard flags & UInt32(IFF_UP) != 0, let sa = entry.pointee.ifa_addr,
                var address = SocketAddress(sockaddr: sa),
                address.family == bound.family || (dualStack && address.family == .ipv4)
            else { continue }
            if flags & UInt32(IFF_LOOPBACK) != 0 && !includeLoopback { continue }
            if address.family == .ipv6 {
                let b = address.addressBytes
                if b[0] == 0xFE && b[1] & 0xC0 == 0x80 { continue }
            }
            address.port = bound.port
            address.scopeID = 0
            if !out.contains(address) { out.append(address) }
        }
        return out
    }

    /// True for 0.0.0.0 and ::.
    package static func isWildcard(_ a: SocketAddress) -> Bool { a.isUnspecified }

    /// True for 127.0.0.0/8 and ::1.
    package static func isLoopback(_ a: SocketAddress) -> Bool {
        let b = a.addressBytes
        return a.family == .ipv4 ? b[0] == 127 : b == [UInt8](repeating: 0, count: 15) + [1]
    }

    /// True for addresses no server on the internet can send to: IPv4 private (RFC 1918), shared
    /// (100.64.0.0/10), link-local, loopback and 0.0.0.0/8; IPv6 unspecified, loopback,
    /// link-local (fe80::/10) and unique local (fc00::/7); an IPv4-mapped IPv6 address as its
    /// IPv4 address. Such an address is only reachable from inside the network that uses it.
    package static func isNonGlobal(_ a: SocketAddress) -> Bool {
        var b = a.addressBytes
        if b.count == 16, b[0..<10].allSatisfy({ $0 == 0 }), b[10] == 0xFF, b[11] == 0xFF { b = Array(b[12...]) }
        if b.count == 4 {
            return b[0] == 0 || b[0] == 10 || b[0] == 127 || (b[0] == 172 && (16...31).contains(b[1]))
                || (b[0] == 192 && b[1] == 168) || (b[0] == 169 && b[1] == 254) || (b[0] == 100 && (64...127).contains(b[1]))
        }
        guard b.count == 16 else { return false }
        return b.allSatisfy { $0 == 0 } || b == [UInt8](repeating: 0, count: 15) + [1]
            || (b[0] == 0xFE && b[1] & 0xC0 == 0x80) || b[0] & 0xFE == 0xFC
    }
}
