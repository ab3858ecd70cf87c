// One UDP socket per Revue instance (IPv4), read on a private dispatch queue; datagrams hop to
// the main actor in arrival order.
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 UDP endpoint (address and port in host byte order).
struct SocketAddress: Hashable, Sendable, CustomStringConvertible {
    var ip: UInt32
    var port: UInt16

    var description: String {
        "\(ip >> 24).\(ip >> 16 & 255).\(ip >> 8 & 255).\(ip & 255):\(port)"
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

    /// Resolves "host:port" or a host plus port (numeric IPv4 or a name, via getaddrinfo).
    static func resolve(host: String, port: UInt16) -> SocketAddress? {
        var hints = addrinfo()
        hints.ai_family = AF_INET
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &result) == 0, let first = result else { return nil }
        defer { freeaddrinfo(result) }
        guard let sa = first.pointee.ai_addr else { return nil }
        let sin = sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
        return SocketAddress(ip: UInt32(bigEndian: sin.sin_addr.s_addr), port: port)
    }

    /// Parses "host:port".
    static func parse(_ text: String) -> SocketAddress? {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else { return nil }
        let host = String(text[..<colon])
        return resolve(host: host.isEmpty ? "127.0.0.1" : host, port: port)
    }

    var sockaddr: sockaddr_in {
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = port.bigEndian
        sin.sin_addr.s_addr = ip.bigEndian
        return sin
    }
}

/// Owns one bound UDP socket. `send` is called from the main actor; received datagrams are read
/// on a private queue and handed to `onReceive` on the main queue. `close()` (or deinit) cancels
/// the read source, whose cancel handler closes the descriptor.
final class UDPSocket: @unchecked Sendable {
    let fd: Int32
    let localPort: UInt16
    private let queue = DispatchQueue(label: "revue.udp")
    private var source: DispatchSourceRead?
    private var closed = false

    /// Creates and binds the socket; throws with errno text on failure.
    init(host: String, port: UInt16, reusePort: Bool = false) throws(RevueError) {
        guard let bindAddress = SocketAddress.resolve(host: host, port: port) else {
            throw RevueError(.invalidConfiguration, "bind host '\(host)' is not an IPv4 address or resolvable name")
        }
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw RevueError(.socket, "socket(): \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &one, socklen_t(MemoryLayout<Int32>.size))
        if reusePort {
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size))
        }
        var size: Int32 = 1 << 20
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var sin = bindAddress.sockaddr
        let rc = withUnsafePointer(to: &sin) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            let text = String(cString: strerror(errno))
            Glibc.close(fd)
            throw RevueError(.socket, "bind \(bindAddress): \(text)")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var bound = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        self.fd = fd
        self.localPort = UInt16(bigEndian: bound.sin_port)
    }

    /// Joins an IPv4 multicast group on the default interface, with loopback of our own sends so
    /// peers on this host hear each other (IP_ADD_MEMBERSHIP, IP_MULTICAST_LOOP). False on failure.
    @discardableResult
    func joinMulticast(group: SocketAddress) -> Bool {
        var mreq = ip_mreq()
        mreq.imr_multiaddr.s_addr = group.ip.bigEndian
        mreq.imr_interface.s_addr = 0
        let joined = setsockopt(fd, Int32(IPPROTO_IP), IP_ADD_MEMBERSHIP, &mreq, socklen_t(MemoryLayout<ip_mreq>.size)) == 0
        var loop: UInt8 = 1
        setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_LOOP, &loop, socklen_t(1))
        var ttl: UInt8 = 1
        setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_TTL, &ttl, socklen_t(1))
        return joined
    }

    /// Starts reading; `onReceive` runs on the main queue for each datagram, in arrival order.
    func start(onReceive: @escaping @Sendable ([UInt8], SocketAddress) -> Void) {
        let fd = self.fd
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        source.setEventHandler {
            var buffer = [UInt8](repeating: 0, count: 2048)
            while true {
                var from = sockaddr_in()
                var len = socklen_t(MemoryLayout<sockaddr_in>.size)
                let n = buffer.withUnsafeMutableBytes { b in
                    withUnsafeMutablePointer(to: &from) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, b.baseAddress, b.count, 0, $0, &len) }
                    }
                }
                if n < 0 { break }
                let data = Array(buffer[0..<n])
                let address = SocketAddress(ip: UInt32(bigEndian: from.sin_addr.s_addr), port: UInt16(bigEndian: from.sin_port))
                DispatchQueue.main.async { onReceive(data, address) }
            }
        }
        source.setCancelHandler { Glibc.close(fd) }
        self.source = source
        source.resume()
    }

    /// Sends one datagram; failures (no route, buffer full) are ignored like a lost packet.
    @discardableResult
    func send(_ bytes: [UInt8], to address: SocketAddress) -> Bool {
        var sin = address.sockaddr
        let n = bytes.withUnsafeBytes { b in
            withUnsafePointer(to: &sin) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, b.baseAddress, b.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        return n == bytes.count
    }

    /// Stops reading and closes the descriptor (asynchronously, on the read queue).
    func close() {
        guard !closed else { return }
        closed = true
        if let source {
            source.cancel()
            self.source = nil
        } else {
            Glibc.close(fd)
        }
    }

    deinit { close() }
}
