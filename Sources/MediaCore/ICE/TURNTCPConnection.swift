import Glibc
import Synchronization

// The TCP connection of a TURN client whose server is reached over TCP (RFC 8656 §3.1): connects,
// reads on its own thread, cuts the stream into STUN messages and ChannelData frames (§12.5), and
// writes whole frames under a lock.
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One nonblocking TCP connection to a TURN server. Thread rule: `write` and `close` from any
/// thread; the callbacks run on the connection's reader thread, one at a time. Cost: one thread
/// and a 128 KiB read buffer per connection; a write is one `sendmsg` (more when the socket is full).
/// Sendable: `fd` and `connected` are used under `writeLock`, `stopping` is atomic, the callbacks are `@Sendable`
/// `let`s; the read buffer is local to the reader thread.
final class TURNTCPConnection: @unchecked Sendable {
    /// How long a write may wait for room in the socket before the connection is dropped (ms).
    static let writeTimeoutMilliseconds: Int32 = 1000
    /// How long connecting may take (ms).
    static let connectTimeoutMilliseconds = 5000
    /// Largest frame: a STUN header plus the largest 4-aligned length, or ChannelData with padding.
    static let maxFrame = 20 + 65_532

    private let server: SocketAddress
    private let writeLock = Lock()
    /// The descriptor (-1 before connecting and once closed). Written under `writeLock`.
    private var fd: Int32 = -1
    private var connected = false
    private let stopping = Atomic<Bool>(false)

    /// Called once the connection is up.
    private let onConnected: @Sendable () -> Void
    /// Called with each STUN message or ChannelData frame (without its padding).
    private let onFrame: @Sendable (UnsafeRawBufferPointer) -> Void
    /// Called once when the connection fails or the server closes it (not after `close()`).
    private let onClosed: @Sendable (String) -> Void

    init(
        server: SocketAddress, onConnected: @escaping @Sendable () -> Void,
        onFrame: @escaping @Sendable (UnsafeRawBufferPointer) -> Void, onClosed: @escaping @Sendable (String) -> Void
    ) {
        self.server = server
        self.onConnected = onConnected
        self.onFrame = onFrame
        self.onClosed = onClosed
    }

    /// Starts the reader thread, which connects and then reads until `close()` or an error.
    func start() {
        _ = TransportThread(name: "revue.turn.tcp") { [self] in run() }
    }

    /// Writes one frame made of up to three parts (header, payload, padding); false when not
    /// connected or the write failed (the connection is then shut down).
    func write(
        _ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0),
        _ c: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0)
    ) -> Bool {
        writeLock.lock()
        defer { writeLock.unlock() }
        guard fd >= 0, connected else { return false }
        if TURNGatheredSend.stream(fd, timeoutMilliseconds: Self.writeTimeoutMilliseconds, a, b, c) { return true }
        shutdown(fd, Int32(SHUT_RDWR))
        return false
    }

    /// Stops the reader thread and closes the connection (it closes the descriptor as it exits).
    /// Idempotent.
    func close() {
        stopping.store(true, ordering: .sequentiallyConsistent)
        writeLock.lock()
        if fd >= 0 { shutdown(fd, Int32(SHUT_RDWR)) }
        writeLock.unlock()
    }

    private func finish(_ reason: String?) {
        writeLock.lock()
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
        connected = false
        writeLock.unlock()
        if let reason, !stopping.load(ordering: .sequentiallyConsistent) { onClosed(reason) }
    }

    private func run() {
        let s = Glibc.socket(
            server.cFamily, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard s >= 0 else { return finish("socket: errno \(errno)") }
        var one: Int32 = 1
        _ = setsockopt(s, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        writeLock.lock()
        fd = s
        writeLock.unlock()
        let rc = server.withSockaddr { Glibc.connect(s, $0, $1) }
        if rc != 0 && errno != EINPROGRESS { return finish("connect to \(server): errno \(errno)") }
        var waited = 0
        while true {
            if stopping.load(ordering: .sequentiallyConsistent) { return finish(nil) }
            var entry = pollfd(fd: s, events: Int16(POLLOUT), revents: 0)
            if poll(&entry, 1, 100) > 0 { break }
            waited += 100
            if waited >= Self.connectTimeoutMilliseconds { return finish("connect to \(server): timed out") }
        }
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(s, SOL_SOCKET, SO_ERROR, &error, &length)
        if error != 0 { return finish("connect to \(server): errno \(error)") }
        writeLock.lock()
        connected = true
        writeLock.unlock()
        onConnected()

        let capacity = 2 * Self.maxFrame
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 8)
        defer { buffer.deallocate() }
        var filled = 0
        while !stopping.load(ordering: .sequentiallyConsistent) {
            var entry = pollfd(fd: s, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 200) > 0 else { continue }
            let n = recv(s, buffer.baseAddress! + filled, capacity - filled, 0)
            if n == 0 { return finish("the TURN server closed the TCP connection") }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK { continue }
                return finish("TCP read: errno \(errno)")
            }
            filled += n
            var start = 0
            while filled - start >= 4 {
                let first = buffer[start]
                let declared = Int(buffer[start + 2]) << 8 | Int(buffer[start + 3])
                let frame: Int, size: Int
                if STUNMessage.mayBeSTUN(firstByte: first) {
                    guard declared % 4 == 0 else { return finish("TCP stream out of step: a STUN length of \(declared)") }
                    frame = 20 + declared
                    size = frame
                } else if TURNChannelData.mayBeChannelData(firstByte: first) {
                    frame = TURNChannelData.headerSize + declared
                    size = TURNChannelData.paddedSize(dataLength: declared)
                } else {
                    return finish("TCP stream out of step: first byte \(first)")
                }
                guard filled - start >= size else { break }
                onFrame(UnsafeRawBufferPointer(rebasing: buffer[start..<(start + frame)]))
                start += size
            }
            if start > 0 {
                if filled > start {
                    (buffer.baseAddress!).copyMemory(from: buffer.baseAddress! + start, byteCount: filled - start)
                }
                filled -= start
            }
        }
        finish(nil)
    }
}
