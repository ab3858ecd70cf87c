import Glibc
import MediaBase

/// Broadcast, port sharing and IPv4 multicast membership: what a LAN discovery socket needs
/// (several processes on one host bound to the same port, all hearing one group).
/// Thread rule: like every `UDPSocket` call (set options before other threads use the socket).
/// Cost: one or three `setsockopt(2)` calls.
extension UDPSocket {
    /// `SO_BROADCAST`: allows sends to a broadcast address.
    public func setBroadcast(_ enabled: Bool) throws(SocketError) {
        try setIntOption(SOL_SOCKET, SO_BROADCAST, enabled ? 1 : 0, "setsockopt(SO_BROADCAST)")
    }

    /// `SO_REUSEPORT`: lets several sockets (of this user) bind the same address and port; each
    /// gets a copy of multicast and broadcast datagrams. Set it before `bind(to:)`, on every
    /// socket sharing the port (open with `init(family:options:)` and `reuseAddress`, then bind).
    public func setReusePort(_ enabled: Bool) throws(SocketError) {
        try setIntOption(SOL_SOCKET, SO_REUSEPORT, enabled ? 1 : 0, "setsockopt(SO_REUSEPORT)")
    }

    /// Joins the IPv4 multicast `group` (its port is ignored) on the default interface
    /// (`IP_ADD_MEMBERSHIP`), and sets how this socket's own multicast sends go out: `loopback`
    /// delivers them to group members on this host as well (`IP_MULTICAST_LOOP`), `timeToLive`
    /// is their hop limit (`IP_MULTICAST_TTL`; 1 keeps them on the local network).
    /// Throws when the host cannot join (for example `ENODEV`: no multicast route); a group that is
    /// not IPv4 multicast, or an IPv6 socket, is a programmer error.
    public func joinMulticastGroup(_ group: SocketAddress, loopback: Bool = true, timeToLive: UInt8 = 1) throws(SocketError) {
        precondition(family == .ipv4, "joinMulticastGroup is for IPv4 sockets")
        guard let address = group.ipv4Address, address >> 28 == 0xE else {
            preconditionFailure("\(group) is not an IPv4 multicast group (224.0.0.0/4)")
        }
        var request = ip_mreq()
        request.imr_multiaddr.s_addr = address.bigEndian
        request.imr_interface.s_addr = 0  // INADDR_ANY: the kernel picks the interface
        guard setsockopt(descriptor, Int32(IPPROTO_IP), IP_ADD_MEMBERSHIP, &request, socklen_t(MemoryLayout<ip_mreq>.size)) == 0
        else {
            throw SocketError(SocketErrno(rawValue: errno), operation: "setsockopt(IP_ADD_MEMBERSHIP)", address: group)
        }
        var loop: UInt8 = loopback ? 1 : 0
        guard setsockopt(descriptor, Int32(IPPROTO_IP), IP_MULTICAST_LOOP, &loop, 1) == 0 else {
            throw SocketError(SocketErrno(rawValue: errno), operation: "setsockopt(IP_MULTICAST_LOOP)")
        }
        var ttl = timeToLive
        guard setsockopt(descriptor, Int32(IPPROTO_IP), IP_MULTICAST_TTL, &ttl, 1) == 0 else {
            throw SocketError(SocketErrno(rawValue: errno), operation: "setsockopt(IP_MULTICAST_TTL)")
        }
    }

    private func setIntOption(_ level: Int32, _ name: Int32, _ value: Int32, _ operation: String) throws(SocketError) {
        var v = value
        guard setsockopt(descriptor, level, name, &v, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            throw SocketError(SocketErrno(rawValue: errno), operation: operation)
        }
    }
}
