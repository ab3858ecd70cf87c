internal import CMediaShims
import Glibc
import MediaBase

/// A UDP socket (IPv4 or IPv6) that owns its file descriptor and closes it in `deinit`.
/// Single datagrams go through `send(_:to:)`/`receive(into:)` (from and into spans); received
/// batches through `UDPReceiveBatch` (`recvmmsg`), and sent ones through a `UDPPacketSink`
/// (`sendmmsg`).
///
/// Thread rule: the kernel serialises calls, so one thread may send while another receives;
/// `close()` (and the last release) only when no other thread is inside a call.
/// Cost: one system call per method (batches: one per batch).
/// Sendable: `descriptor` and `connectedAddress` change only in `close()` and `connect(to:)`, which the thread rule
/// keeps apart from other calls; the kernel serialises the rest.
public final class UDPSocket: @unchecked Sendable {
    /// How a socket is opened.
    public struct Options: Sendable {
        /// `O_NONBLOCK`: calls that would wait fail with `SocketErrno.wouldBlock` instead.
        public var nonBlocking = false
        /// `SO_RCVBUF` request in bytes (the kernel doubles it and caps it at `net.core.rmem_max`); nil keeps the default.
        public var receiveBufferSize: Int? = nil
        /// `SO_SNDBUF` request in bytes (doubled and capped at `net.core.wmem_max`); nil keeps the default.
        public var sendBufferSize: Int? = nil
        /// `SO_REUSEADDR`.
        public var reuseAddress = false
        /// For an IPv6 socket: carry IPv4 too (`IPV6_V6ONLY` off). IPv4 peers then appear as IPv4
        /// addresses (never as v4-mapped IPv6 ones) and IPv4 destinations are accepted. Off: the
        /// socket speaks IPv6 only. Ignored for IPv4 sockets.
        public var dualStack = false
        /// Report the local address each datagram arrived at (`receiveWithDestination(into:)`), so
        /// an answer can leave from it (`send(_:to:from:)`) on a host with several addresses.
        public var receiveDestinations = false
        /// Default options: blocking, kernel buffer sizes.
        public init() {}
    }

    /// The descriptor; -1 once closed.
    public private(set) var descriptor: Int32
    /// The address family the socket was opened for.
    public let family: SocketAddress.Family
    /// The peer set by `connect(to:)`, if any.
    public private(set) var connectedAddress: SocketAddress?
    /// An IPv6 socket that carries IPv4 too (`Options.dualStack`).
    public let isDualStack: Bool

    /// Whether this socket can send to and receive from addresses of `family`: its own family,
    /// and IPv4 on a dual-stack IPv6 socket.
    public func carries(_ family: SocketAddress.Family) -> Bool {
        family == self.family || (isDualStack && family == .ipv4)
    }

    /// Opens an unbound UDP socket of `family`.
    public init(family: SocketAddress.Family, options: Options = Options()) throws(SocketError) {
        self.family = family
        isDualStack = family == .ipv6 && options.dualStack
        let type =
            Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
            | (options.nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
        descriptor = Glibc.socket(family == .ipv4 ? AF_INET : AF_INET6, type, 0)
        guard descriptor >= 0 else { throw SocketError.last("socket") }
        if family == .ipv6 {
            try setOption(Int32(IPPROTO_IPV6), IPV6_V6ONLY, isDualStack ? 0 : 1, "setsockopt(IPV6_V6ONLY)")
        }
        if options.receiveDestinations, cms_enable_destination_info(descriptor, family == .ipv6 ? 1 : 0) != 0 {
            throw SocketError.last("setsockopt(PKTINFO)")
        }
        if options.reuseAddress { try setOption(SOL_SOCKET, SO_REUSEADDR, 1, "setsockopt(SO_REUSEADDR)") }
        if let size = options.receiveBufferSize { try setReceiveBufferSize(size) }
        if let size = options.sendBufferSize { try setSendBufferSize(size) }
        // Kernel receive times from the first datagram on (`UDPReceiveBatch` reads them); without
        // them (an error here) a batch stamps its datagrams with its read time.
        _ = cms_enable_receive_timestamps(descriptor)
    }

    /// Opens a socket of `address`'s family and binds it there (port 0 picks an ephemeral port;
    /// read it back with `localAddress()`).
    public convenience init(bindingTo address: SocketAddress, options: Options = Options()) throws(SocketError) {
        try self.init(family: address.family, options: options)
        try bind(to: address)
    }

    deinit { if descriptor >= 0 { Glibc.close(descriptor) } }

    /// Closes the descriptor now; later calls fail with `badFileDescriptor`. Idempotent.
    public func close() {
        if descriptor >= 0 { Glibc.close(descriptor) }
        descriptor = -1
    }

    /// `bind(2)`.
    public func bind(to address: SocketAddress) throws(SocketError) {
        let rc = address.withSockaddr(socketFamily: family) { Glibc.bind(descriptor, $0, $1) }
        guard rc == 0 else { throw SocketError.last("bind", address) }
    }

    /// `connect(2)`: fixes the peer, so sends need no address and only its datagrams are received.
    public func connect(to address: SocketAddress) throws(SocketError) {
        let rc = address.withSockaddr(socketFamily: family) { Glibc.connect(descriptor, $0, $1) }
        guard rc == 0 else { throw SocketError.last("connect", address) }
        connectedAddress = address
    }

    /// The bound local address (`getsockname(2)`).
    public func localAddress() throws(SocketError) -> SocketAddress {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard rc == 0 else { throw SocketError.last("getsockname") }
        guard
            let address = withUnsafePointer(
                to: &storage,
                {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress(sockaddr: $0) }
                })
        else { throw SocketError(.addressFamilyNotSupported, operation: "getsockname") }
        return address
    }

    /// Sends one datagram to `destination` (nil on a connected socket). Returns the bytes sent.
    /// Cost: one `sendto(2)`.
    @discardableResult
    public func send(_ bytes: RawSpan, to destination: SocketAddress? = nil) throws(SocketError) -> Int {
        try bytes.withUnsafeBytes { (raw) throws(SocketError) -> Int in try send(raw, to: destination) }
    }

    /// `send(_:to:)` for bytes the engine holds by pointer.
    @discardableResult
    package func send(_ bytes: UnsafeRawBufferPointer, to destination: SocketAddress? = nil) throws(SocketError) -> Int {
        do throws(Errno) {
            return try retryingOnInterrupt {
                if let destination {
                    return destination.withSockaddr(socketFamily: family) {
                        sendto(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), $0, $1)
                    }
                }
                return Glibc.send(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            }
        } catch {
            throw SocketError(error, operation: "sendto", address: destination ?? connectedAddress)
        }
    }

    /// Receives one datagram into the start of `buffer`: its length (clipped to the buffer), its
    /// source and whether it was longer than the buffer (`MSG_TRUNC`). Blocks unless the socket is
    /// non-blocking or has a receive timeout. Cost: one `recvfrom(2)`.
    public func receive(into buffer: inout MutableRawSpan) throws(SocketError)
        -> (count: Int, source: SocketAddress?, truncated: Bool)
    {
        try buffer.withUnsafeMutableBytes { (raw) throws(SocketError) in try receive(into: raw) }
    }

    /// `receive(into:)` into memory the engine holds by pointer.
    package func receive(into buffer: UnsafeMutableRawBufferPointer) throws(SocketError)
        -> (count: Int, source: SocketAddress?, truncated: Bool)
    {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc: Int
        do throws(Errno) {
            rc = try retryingOnInterrupt {
                withUnsafeMutablePointer(to: &storage) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        recvfrom(descriptor, buffer.baseAddress, buffer.count, Int32(MSG_TRUNC), $0, &length)
                    }
                }
            }
        } catch {
            throw SocketError(error, operation: "recvfrom")
        }
        let source = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress(sockaddr: $0) }
        }
        return (min(rc, buffer.count), source, rc > buffer.count)
    }

    /// Sends one datagram to `destination` from the local address `source` (`IP_PKTINFO` /
    /// `IPV6_PKTINFO`): on a host with several addresses, the answer to a datagram leaves from the
    /// address that datagram arrived at, which is where the asker (and any NAT or firewall on the
    /// way) expects it from. `source` nil, or a wildcard, sends as `send(_:to:)` does. When
    /// `source` is no longer an address of this host (renumbered, an interface gone), the datagram
    /// leaves from the kernel's choice instead, as it would without a source: the peer then sees a
    /// new address, which ICE and the session follow. Throws as `send` does.
    /// Cost: one `sendmsg(2)`; two system calls while `source` cannot be used.
    @discardableResult
    public func send(_ bytes: RawSpan, to destination: SocketAddress, from source: SocketAddress?) throws(SocketError)
        -> Int
    {
        try bytes.withUnsafeBytes { (raw) throws(SocketError) -> Int in try send(raw, to: destination, from: source) }
    }

    /// `send(_:to:from:)` for bytes the engine holds by pointer.
    @discardableResult
    package func send(_ bytes: UnsafeRawBufferPointer, to destination: SocketAddress, from source: SocketAddress?)
        throws(SocketError) -> Int
    {
        guard let source, !source.isUnspecified else { return try send(bytes, to: destination) }
        var from = sockaddr_storage()
        _ = source.write(into: &from, socketFamily: family)
        do throws(Errno) {
            return try retryingOnInterrupt {
                destination.withSockaddr(socketFamily: family) {
                    cms_send_from(descriptor, bytes.baseAddress, bytes.count, $0, $1, &from)
                }
            }
        } catch {
            // A source that cannot be used (EINVAL, EADDRNOTAVAIL, or no route from it): the
            // kernel's choice. Errors a plain send would share (a full buffer) are not retried.
            if !error.isWouldBlock && error.rawValue != ENOBUFS && error.rawValue != EMSGSIZE {
                return try send(bytes, to: destination)
            }
            throw SocketError(error, operation: "sendmsg", address: destination)
        }
    }

    /// The local address the kernel's route picks as the source toward `destination` (the name of
    /// a throwaway UDP socket of this socket's kind connected there; no datagram is sent); nil
    /// when there is no route. Cost: four system calls; for choosing once per path, not per packet.
    public func routeSource(toward destination: SocketAddress) -> SocketAddress? {
        var options = Options()
        options.dualStack = isDualStack
        guard let probe = try? UDPSocket(family: family, options: options) else { return nil }
        defer { probe.close() }
        guard (try? probe.connect(to: destination)) != nil, var source = try? probe.localAddress() else { return nil }
        source.port = 0
        return source
    }

    /// Receives one datagram into `buffer`, as `receive(into:)` does, and the local address it
    /// arrived at (`destination`, port 0; nil unless the socket was opened with
    /// `Options.receiveDestinations`). An IPv6 destination carries the arrival interface as its
    /// scope id. With `wait` false the call never blocks (`wouldBlock` when nothing is queued).
    /// Cost: one `recvmsg(2)`.
    public func receiveWithDestination(into buffer: inout MutableRawSpan, wait: Bool = true) throws(SocketError)
        -> (count: Int, source: SocketAddress?, destination: SocketAddress?, truncated: Bool)
    {
        try buffer.withUnsafeMutableBytes { (raw) throws(SocketError) in try receiveWithDestination(into: raw, wait: wait) }
    }

    /// `receiveWithDestination(into:wait:)` into memory the engine holds by pointer.
    package func receiveWithDestination(into buffer: UnsafeMutableRawBufferPointer, wait: Bool = true) throws(SocketError)
        -> (count: Int, source: SocketAddress?, destination: SocketAddress?, truncated: Bool)
    {
        var source = sockaddr_storage()
        var destination = sockaddr_storage()
        do throws(Errno) {
            var length = socklen_t(0)
            let rc = try retryingOnInterrupt {
                length = socklen_t(MemoryLayout<sockaddr_storage>.size)
                return cms_receive_with_destination(
                    descriptor, buffer.baseAddress, buffer.count, wait ? 0 : Int32(MSG_DONTWAIT), &source, &length, &destination)
            }
            func read(_ s: inout sockaddr_storage) -> SocketAddress? {
                withUnsafePointer(to: &s) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress(sockaddr: $0) } }
            }
            return (min(rc, buffer.count), length > 0 ? read(&source) : nil, read(&destination), rc > buffer.count)
        } catch {
            throw SocketError(error, operation: "recvmsg")
        }
    }

    /// Waits up to `timeoutMilliseconds` (`poll(2)`) for a datagram; true when one is ready.
    public func waitUntilReadable(timeoutMilliseconds: Int) throws(SocketError) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let rc = poll(&entry, 1, Int32(clamping: timeoutMilliseconds))
        if rc < 0 {
            if errno == EINTR { return false }
            throw SocketError.last("poll")
        }
        return rc > 0
    }

    /// `SO_RCVTIMEO`: a blocking receive fails with `wouldBlock` after this long; 0 waits forever.
    public func setReceiveTimeout(nanoseconds: UInt64) throws(SocketError) {
        var tv = timeval(tv_sec: Int(nanoseconds / 1_000_000_000), tv_usec: Int(nanoseconds % 1_000_000_000 / 1_000))
        let rc = setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        guard rc == 0 else { throw SocketError.last("setsockopt(SO_RCVTIMEO)") }
    }

    /// Requests a kernel receive buffer of `bytes` (`SO_RCVBUF`).
    public func setReceiveBufferSize(_ bytes: Int) throws(SocketError) {
        try setOption(SOL_SOCKET, SO_RCVBUF, Int32(clamping: bytes), "setsockopt(SO_RCVBUF)")
    }

    /// Requests a kernel send buffer of `bytes` (`SO_SNDBUF`).
    public func setSendBufferSize(_ bytes: Int) throws(SocketError) {
        try setOption(SOL_SOCKET, SO_SNDBUF, Int32(clamping: bytes), "setsockopt(SO_SNDBUF)")
    }

    /// The kernel's receive buffer in bytes (`SO_RCVBUF`, as the kernel reports it: twice the request).
    public func receiveBufferSize() throws(SocketError) -> Int {
        Int(try getOption(SOL_SOCKET, SO_RCVBUF, "getsockopt(SO_RCVBUF)"))
    }

    /// The kernel's send buffer in bytes (`SO_SNDBUF`, as the kernel reports it).
    public func sendBufferSize() throws(SocketError) -> Int { Int(try getOption(SOL_SOCKET, SO_SNDBUF, "getsockopt(SO_SNDBUF)")) }

    private func setOption(_ level: Int32, _ name: Int32, _ value: Int32, _ operation: String) throws(SocketError) {
        var v = value
        guard setsockopt(descriptor, level, name, &v, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            throw SocketError.last(operation)
        }
    }

    private func getOption(_ level: Int32, _ name: Int32, _ operation: String) throws(SocketError) -> Int32 {
        var v: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(descriptor, level, name, &v, &length) == 0 else { throw SocketError.last(operation) }
        return v
    }
}

extension UDPSocket {
    /// `SOCK_DGRAM`, for code in files that do not import CMediaShims: the socket constants of
    /// `<sys/socket.h>` belong to whichever module's headers the compiler read first, and
    /// CMediaShims (which includes it) is imported here. Thread rule: a constant. Cost: none.
    static let datagramSocketType = Int32(SOCK_DGRAM.rawValue)
}
