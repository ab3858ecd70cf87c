import Glibc

/// IPv4 addresses as one 32-bit number, for protocols that carry them that way (the session
/// layer's rendezvous replies, subnet checks).
/// Thread rule: values, safe anywhere. Cost: a few shifts.
extension SocketAddress {
    /// The IPv4 address `address` (host byte order: `0x7F00_0001` is 127.0.0.1) with `port`.
    public init(ipv4Address address: UInt32, port: UInt16) {
        self.init(
            ipv4: UInt8(address >> 24), UInt8(address >> 16 & 0xFF), UInt8(address >> 8 & 0xFF), UInt8(address & 0xFF),
            port: port)
    }

    /// The IPv4 address in host byte order (127.0.0.1 is `0x7F00_0001`); nil for an IPv6 address.
    /// Does not allocate.
    public var ipv4Address: UInt32? {
        guard family == .ipv4 else { return nil }
        var storage = sockaddr_storage()
        _ = write(into: &storage)
        let sin = withUnsafeBytes(of: storage) { $0.loadUnaligned(as: sockaddr_in.self) }
        return UInt32(bigEndian: sin.sin_addr.s_addr)
    }
}
