internal import CMediaShims
import Glibc
import MediaBase
import MediaWire
import Synchronization

// The TCP connection of a TURN client whose server is reached over TCP or TLS over TCP (RFC 8656
// §3.1): connects (and runs the TLS handshake, checking the server's certificate), reads on its own
// thread, cuts the stream into STUN messages and ChannelData frames (§12.5), and writes whole
// frames under a lock.
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// One nonblocking TCP connection (`TCPSocket`) to a TURN server, in the clear or with TLS.
/// Thread rule: `write` and `close` from any thread; the callbacks run on the connection's reader
/// thread, one at a time. Cost: one thread and a 128 KiB read buffer per connection; a write is one
/// `sendmsg` (more when the socket is full). With TLS, one OpenSSL client and a 64 KiB write buffer
/// more: a frame's parts are copied into it and written as one record (`SSL_write`), and reads
/// decrypt under the same lock (OpenSSL's state is shared by both directions).
/// Sendable: the socket and TLS state live in a `Locked` box (a `Mutex`), `stopping` is atomic, the callbacks are
/// `@Sendable` `let`s; the read buffer is local to the reader thread.
final class TURNTCPConnection: @unchecked Sendable {
    /// How long a write may wait for room in the socket before the connection is dropped (ms).
    static let writeTimeoutMilliseconds: Int32 = 1000
    /// How long connecting may take (ms).
    static let connectTimeoutMilliseconds = 5000
    /// Largest frame: a STUN header plus the largest 4-aligned length, or ChannelData with padding.
    static let maxFrame = 20 + 65_532

    /// What the writers and the reader share: the socket and, with TLS, the client.
    private struct Shared {
        /// The socket (nil before connecting and once closed).
        var socket: TCPSocket?
        var connected = false
        /// The TLS client once the TCP connection is up (TLS only), and room for one whole frame.
        var tls: OpaquePointer?
        var tlsBuffer: UnsafeMutableRawBufferPointer?
    }

    private let server: SocketAddress
    /// The certificate checks when the connection runs TLS; nil: plain TCP.
    private let verification: ICEServer.TLSVerification?
    private let shared = Locked(Shared())
    private let stopping = Atomic<Bool>(false)

    /// Called once the connection is up.
    private let onConnected: @Sendable () -> Void
    /// Called with each STUN message or ChannelData frame (without its padding).
    private let onFrame: @Sendable (UnsafeRawBufferPointer) -> Void
    /// Called once when the connection fails or the server closes it (not after `close()`).
    private let onClosed: @Sendable (String) -> Void

    /// `tls`: run TLS over the connection, checking the server's certificate so (nil: plain TCP).
    init(
        server: SocketAddress, tls: ICEServer.TLSVerification? = nil, onConnected: @escaping @Sendable () -> Void,
        onFrame: @escaping @Sendable (UnsafeRawBufferPointer) -> Void, onClosed: @escaping @Sendable (String) -> Void
    ) {
        self.server = server
        verification = tls
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
        shared.withLock { shared in
            guard let socket = shared.socket, shared.connected else { return false }
            if let tls = shared.tls, let tlsBuffer = shared.tlsBuffer {
                let total = a.count + b.count + c.count
                guard total <= tlsBuffer.count else { return false }
                let base = tlsBuffer.baseAddress!
                if a.count > 0 { base.copyMemory(from: a.baseAddress!, byteCount: a.count) }
                if b.count > 0 { (base + a.count).copyMemory(from: b.baseAddress!, byteCount: b.count) }
                if c.count > 0 { (base + a.count + b.count).copyMemory(from: c.baseAddress!, byteCount: c.count) }
                if Self.tlsWrite(tls, socket, UnsafeRawBufferPointer(rebasing: tlsBuffer[0..<total])) { return true }
            } else if TURNGatheredSend.stream(
                socket.descriptor.rawValue, timeoutMilliseconds: Self.writeTimeoutMilliseconds, a, b, c)
            {
                return true
            }
            socket.shutdown(.both)
            return false
        }
    }

    /// Under the lock: all of `bytes` through TLS, waiting for the socket up to
    /// `writeTimeoutMilliseconds`. False when TLS failed or the socket stayed full.
    private static func tlsWrite(_ tls: OpaquePointer, _ socket: TCPSocket, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var waited: Int32 = 0
        while true {
            let rc = cms_tls_write(tls, bytes.baseAddress, bytes.count)
            if rc == bytes.count { return true }
            let events: TCPSocket.Events
            switch rc {
            case CMS_TLS_WANT_WRITE: events = .writable
            case CMS_TLS_WANT_READ: events = .readable
            default: return false
            }
            if waited >= writeTimeoutMilliseconds { return false }
            _ = try? socket.poll(events, timeoutMilliseconds: 50)
            waited += 50
        }
    }

    /// Stops the reader thread and closes the connection (it closes the descriptor as it exits).
    /// Idempotent.
    func close() {
        stopping.store(true, ordering: .sequentiallyConsistent)
        shared.withLock { $0.socket?.shutdown(.both) }
    }

    private func finish(_ reason: String?) {
        shared.withLock { shared in
            if let tls = shared.tls { cms_tls_free(tls) }
            shared.tls = nil
            shared.tlsBuffer?.deallocate()
            shared.tlsBuffer = nil
            shared.socket?.close()
            shared.socket = nil
            shared.connected = false
        }
        if let reason, !stopping.load(ordering: .sequentiallyConsistent) { onClosed(reason) }
    }

    private func run() {
        let started = MonotonicTime.now
        let socket: TCPSocket
        do throws(Errno) {
            socket = try TCPSocket.connect(
                to: server, deadline: started + .milliseconds(Self.connectTimeoutMilliseconds),
                isCancelled: { stopping.load(ordering: .sequentiallyConsistent) })
        } catch {
            if error.rawValue == ECANCELED { return finish(nil) }
            if error == .timedOut { return finish("connect to \(server): timed out") }
            return finish("connect to \(server): \(error)")
        }
        shared.withLock { $0.socket = socket }
        if stopping.load(ordering: .sequentiallyConsistent) { return finish(nil) }
        if let verification {
            let waited = Int((MonotonicTime.now - started).inNanoseconds / 1_000_000)
            if let failure = handshake(socket, verification, waited: waited) { return finish(failure) }
        }
        shared.withLock { $0.connected = true }
        onConnected()

        let capacity = 2 * Self.maxFrame
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 8)
        defer { buffer.deallocate() }
        var filled = 0
        while !stopping.load(ordering: .sequentiallyConsistent) {
            let n: Int
            let free = UnsafeMutableRawBufferPointer(rebasing: buffer[filled...])
            if verification != nil {
                let pending = shared.withLock { $0.tls.map { cms_tls_pending($0) } ?? 0 }
                if pending == 0 { guard (try? socket.poll(.readable, timeoutMilliseconds: 200)) == true else { continue } }
                var error = [CChar](repeating: 0, count: 0)
                let rc = shared.withLock { shared in
                    let rc = shared.tls.map { cms_tls_read($0, free.baseAddress, free.count) } ?? CMS_TLS_FAILED
                    if rc == (CMS_TLS_FAILED), let tls = shared.tls {
                        error = [CChar](repeating: 0, count: 320)
                        _ = cms_tls_error(tls, &error, error.count)
                    }
                    return rc
                }
                if rc == (CMS_TLS_CLOSED) { return finish("the TURN server closed the TLS connection") }
                if rc == (CMS_TLS_WANT_READ) || rc == (CMS_TLS_WANT_WRITE) { continue }
                if rc < 0 { return finish("TLS read: \(Self.text(error))") }
                n = rc
            } else {
                guard (try? socket.poll(.readable, timeoutMilliseconds: 200)) == true else { continue }
                do throws(Errno) {
                    guard let count = try socket.receive(into: free) else { continue }
                    n = count
                } catch {
                    return finish("TCP read: \(error)")
                }
                if n == 0 { return finish("the TURN server closed the TCP connection") }
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

    /// Runs the TLS handshake on the connected `socket` within what is left of the connect
    /// timeout; nil once it is done (the client kept in the shared state), else why it failed.
    private func handshake(_ socket: TCPSocket, _ v: ICEServer.TLSVerification, waited alreadyWaited: Int) -> String? {
        let name = v.serverName ?? server.host
        let s = socket.descriptor.rawValue
        var error = [CChar](repeating: 0, count: 320)
        let client: OpaquePointer? = name.withCString { n in
            v.certificateAuthorityFile.withOptionalCString { ca in
                if let pin = v.sha256Fingerprint, pin.count == 32 {
                    return pin.withUnsafeBufferPointer { cms_tls_new(s, n, ca, $0.baseAddress, &error, error.count) }
                }
                return cms_tls_new(s, n, ca, nil, &error, error.count)
            }
        }
        guard let client else { return "TLS with \(server): \(Self.text(error))" }
        shared.withLock { shared in
            shared.tls = client
            shared.tlsBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.maxFrame + 4, alignment: 8)
        }
        var waited = alreadyWaited
        while true {
            if stopping.load(ordering: .sequentiallyConsistent) { return "closed" }
            let rc = shared.withLock { _ in
                let rc = Int(cms_tls_handshake(client))
                if rc == CMS_TLS_FAILED { _ = cms_tls_error(client, &error, error.count) }
                return rc
            }
            switch rc {
            case CMS_TLS_DONE: return nil
            case CMS_TLS_WANT_READ, CMS_TLS_WANT_WRITE:
                if waited >= Self.connectTimeoutMilliseconds { return "TLS with \(server): the handshake timed out" }
                _ = try? socket.poll(rc == CMS_TLS_WANT_READ ? .readable : .writable, timeoutMilliseconds: 100)
                waited += 100
            default:
                return "TLS with \(server) (\(name)): \(Self.text(error))"
            }
        }
    }

    /// A NUL-terminated C string in `bytes` as a Swift string.
    private static func text(_ bytes: [CChar]) -> String {
        let end = bytes.firstIndex(of: 0) ?? bytes.count
        return String(decoding: bytes[..<end].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

extension Optional where Wrapped == String {
    /// `body` with the string as a C string, or with nil.
    fileprivate func withOptionalCString<R>(_ body: (UnsafePointer<CChar>?) -> R) -> R {
        switch self {
        case .some(let s): return s.withCString { body($0) }
        case .none: return body(nil)
        }
    }
}
