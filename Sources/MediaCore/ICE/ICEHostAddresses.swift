// The addresses an ICE agent offers as host candidates: the socket's own address when it is bound
// to one, else every up interface address of its family, or of both for a dual-stack socket (getifaddrs).
import Glibc

/// Host-candidate address discovery. Thread rule: stateless. Cost: one `getifaddrs` walk.
enum ICEHostAddresses {
    /// The host addresses (with `port`) for a socket bound to `bound`: `bound` itself when it is a
    /// specific address; for a wildcard bind, every up interface address of its family (IPv4 too
    /// with `dualStack`), without loopback unless `includeLoopback`, and without IPv6 link-local
    /// addresses (they need a scope the peer cannot use).
    static func addresses(bound: SocketAddress, includeLoopback: Bool, dualStack: Bool = false) -> [SocketAddress] {
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
    static func isWildcard(_ a: SocketAddress) -> Bool { a.isUnspecified }

    /// True for 127.0.0.0/8 and ::1.
    static func isLoopback(_ a: SocketAddress) -> Bool {
        let b = a.addressBytes
        return a.family == .ipv4 ? b[0] == 127 : b == [UInt8](repeating: 0, count: 15) + [1]
    }
}
