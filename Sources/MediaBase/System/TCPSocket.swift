// The one TCP stream socket of the engine: the Janus client's streams (`ClientStream`), the
// connections `HTTPServer` accepts and its listening socket, and the TURN client's TCP connection
// all use it instead of their own socket code.
#if canImport(Glibc)
    import Glibc
#endif

/// A TCP stream socket (connected, accepted or listening) over a `FileDescriptor`: nonblocking
/// connect bounded by a deadline, readiness waits with `poll`, sends with `MSG_NOSIGNAL` (a closed
/// peer is an `EPIPE` error, never a signal) and receives; every call retried on `EINTR`, every
/// failure an `Errno` (`Errno.timedOut` for a deadline that passed).
/// Sockets this type creates are nonblocking and close-on-exec, with `TCP_NODELAY` on connected
/// ones (the protocols over them write whole messages).
/// Thread rule: a value; one reader and one writer may use a socket on two threads at once, and
/// `shutdown` from any thread wakes both; `close` once neither uses it. Cost: one system call per
/// method, plus one `poll` per wait.
package struct TCPSocket: Hashable, Sendable {
    /// The socket's descriptor (for TLS, which reads and writes it itself).
    package let descriptor: FileDescriptor

    /// Wraps an open TCP socket.
    package init(descriptor: FileDescriptor) { self.descriptor = descriptor }

    /// What a wait waits for. Thread rule: a value. Cost: none.
    package struct Events: OptionSet, Sendable {
        package let rawValue: Int16
        package init(rawValue: Int16) { self.rawValue = rawValue }
        /// `POLLIN`: bytes (or the end of the stream, or a connection to accept) can be read.
        package static let readable = Events(rawValue: Int16(POLLIN))
        /// `POLLOUT`: there is room to send; for a connecting socket, the connect has ended.
        package static let writable = Events(rawValue: Int16(POLLOUT))
    }

    /// A new nonblocking, close-on-exec TCP socket of `family` (`AF_INET`, `AF_INET6`).
    private static func open(family: Int32) throws(Errno) -> TCPSocket {
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let fd = try retryingOnInterrupt { Glibc.socket(family, type, 0) }
        return TCPSocket(descriptor: FileDescriptor(rawValue: fd))
    }

    /// Connects to `address` by `deadline`: a nonblocking connect, then waits of at most 100 ms
    /// each so that `isCancelled` (checked between them) can end it early with `ECANCELED`. The
    /// socket is closed when it fails. Thread rule: any thread; blocks it. Cost: a socket, a
    /// connect, a `poll` per 100 ms.
    package static func connect(
        to address: SocketAddress, deadline: MonotonicTime, isCancelled: () -> Bool = { false }
    ) throws(Errno) -> TCPSocket {
        let socket = try open(family: address.cFamily)
        do throws(Errno) {
            socket.setNoDelay()
            let rc = address.withSockaddr { Glibc.connect(socket.descriptor.rawValue, $0, $1) }
            // A connect interrupted by a signal goes on in the background, like EINPROGRESS.
            if rc != 0 && Errno.current != .inProgress && Errno.current != .interrupted { throw Errno.current }
            while true {
                if isCancelled() { throw Errno(rawValue: ECANCELED) }
                let now = MonotonicTime.now
                guard now < deadline else { throw Errno.timedOut }
                let slice = Int32(min((deadline - now).inNanoseconds / 1_000_000 + 1, 100))
                if try socket.poll(.writable, timeoutMilliseconds: slice) { break }
            }
            let pending = socket.pendingError()
            if pending != 0 { throw Errno(rawValue: pending) }
            return socket
        } catch {
            socket.close()
            throw error
        }
    }

    /// A socket listening on `address` (`SO_REUSEADDR` set) with `backlog`. Thread rule: any
    /// thread. Cost: socket, bind and listen.
    package static func listen(on address: SocketAddress, backlog: Int32 = 64) throws(Errno) -> TCPSocket {
        let socket = try open(family: address.cFamily)
        do throws(Errno) {
            var one: Int32 = 1
            _ = setsockopt(socket.descriptor.rawValue, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            _ = try retryingOnInterrupt { address.withSockaddr { Glibc.bind(socket.descriptor.rawValue, $0, $1) } }
            _ = try retryingOnInterrupt { Glibc.listen(socket.descriptor.rawValue, backlog) }
            return socket
        } catch {
            socket.close()
            throw error
        }
    }

    /// A connection waiting on this listening socket, nonblocking and close-on-exec; nil when
    /// there is none now. Cost: `accept` and two `fcntl`s.
    package func accept() throws(Errno) -> TCPSocket? {
        let fd: Int32
        do throws(Errno) {
            fd = try retryingOnInterrupt { Glibc.accept(descriptor.rawValue, nil, nil) }
        } catch  where error.isWouldBlock || error.rawValue == ECONNABORTED {
            return nil
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        return TCPSocket(descriptor: FileDescriptor(rawValue: fd))
    }

    /// The local address (for a port the system chose). Cost: `getsockname`.
    package func localAddress() throws(Errno) -> SocketAddress {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor.rawValue, $0, &length) }
        }
        if rc != 0 { throw Errno.current }
        let address = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress(sockaddr: $0) }
        }
        guard let address else { throw Errno(rawValue: EAFNOSUPPORT) }
        return address
    }

    /// The address of the peer of a connected or accepted socket. Cost: `getpeername`.
    package func peerAddress() throws(Errno) -> SocketAddress {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor.rawValue, $0, &length) }
        }
        if rc != 0 { throw Errno.current }
        let address = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress(sockaddr: $0) }
        }
        guard let address else { throw Errno(rawValue: EAFNOSUPPORT) }
        return address
    }

    /// Turns off Nagle's algorithm (`TCP_NODELAY`), best effort.
    package func setNoDelay() {
        var one: Int32 = 1
        _ = setsockopt(descriptor.rawValue, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// The socket's pending error (`SO_ERROR`; after a connect, why it failed), 0 when none.
    package func pendingError() -> Int32 {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(descriptor.rawValue, SOL_SOCKET, SO_ERROR, &error, &length)
        return error
    }

    /// Waits up to `timeoutMilliseconds` for `events`: true when ready (or when the socket has an
    /// error or hang-up, which the next call then reports), false when the time passed. A signal
    /// ends the wait early with false. Cost: one `poll`.
    package func poll(_ events: Events, timeoutMilliseconds: Int32) throws(Errno) -> Bool {
        var entry = pollfd(fd: descriptor.rawValue, events: events.rawValue, revents: 0)
        let n = Glibc.poll(&entry, 1, timeoutMilliseconds)
        if n < 0 {
            let error = Errno.current
            if error == .interrupted { return false }
            throw error
        }
        return n > 0
    }

    /// Waits for `events` until `deadline`: throws `Errno.timedOut` when it passes. Cost: a `poll`
    /// (one per minute of waiting, or per signal).
    package func wait(for events: Events, deadline: MonotonicTime) throws(Errno) {
        while true {
            let now = MonotonicTime.now
            guard now < deadline else { throw Errno.timedOut }
            let ms = Int32(min((deadline - now).inNanoseconds / 1_000_000 + 1, 60_000))
            if try poll(events, timeoutMilliseconds: ms) { return }
        }
    }

    /// Sends what the socket takes of `bytes` now (`MSG_NOSIGNAL`): the count sent, 0 when it is
    /// full. Cost: one `send`.
    package func send(_ bytes: UnsafeRawBufferPointer) throws(Errno) -> Int {
        do throws(Errno) {
            return try retryingOnInterrupt {
                Glibc.send(descriptor.rawValue, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            }
        } catch  where error.isWouldBlock {
            return 0
        }
    }

    /// Sends all of `bytes` by `deadline`, waiting for room as needed. Throws the send's error or
    /// `Errno.timedOut` (some bytes may have been sent). Cost: one `send` per partial send, a
    /// `poll` per wait.
    package func sendAll(_ bytes: UnsafeRawBufferPointer, deadline: MonotonicTime) throws(Errno) {
        var sent = 0
        while sent < bytes.count {
            let n = try send(UnsafeRawBufferPointer(rebasing: bytes[sent...]))
            if n > 0 {
                sent += n
            } else {
                try wait(for: .writable, deadline: deadline)
            }
        }
    }

    /// Receives what has arrived, at most `buffer.count` bytes: the count, 0 when the peer closed
    /// the stream, nil when nothing is there now. Cost: one `recv`.
    package func receive(into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int? {
        do throws(Errno) {
            return try retryingOnInterrupt { Glibc.recv(descriptor.rawValue, buffer.baseAddress, buffer.count, 0) }
        } catch  where error.isWouldBlock {
            return nil
        }
    }

    /// Which directions `shutdown` ends. Thread rule: a value. Cost: none.
    package enum Direction: Sendable {
        /// `SHUT_RD`.
        case read
        /// `SHUT_WR`: the peer reads the end of the stream.
        case write
        /// `SHUT_RDWR`: also wakes a thread blocked on the socket.
        case both
    }

    /// Ends one or both directions (`shutdown(2)`), best effort; the descriptor stays open.
    /// Thread rule: any thread. Cost: one system call.
    package func shutdown(_ direction: Direction) {
        let how: Int32
        switch direction {
        case .read: how = Int32(SHUT_RD)
        case .write: how = Int32(SHUT_WR)
        case .both: how = Int32(SHUT_RDWR)
        }
        _ = Glibc.shutdown(descriptor.rawValue, how)
    }

    /// Closes the socket (best effort; see `FileDescriptor.close`). Call once.
    package func close() { try? descriptor.close() }
}
