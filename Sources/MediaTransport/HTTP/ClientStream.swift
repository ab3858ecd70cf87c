// A TCP connection to a host name or address, plain or through TLS (OpenSSL's libssl through
// cms_tls.h, the client the TURN transport uses too), with blocking calls bounded by deadlines.
// The Janus client's HTTP and WebSocket transports run over it: http:// and ws:// plain, https://
// and wss:// with the server's certificate checked against the system's CAs or a given CA file
// and its name (SNI sent, subjectAltName checked).
internal import CMediaShims
import Glibc
import MediaBase
import Synchronization

/// How the server of a TLS connection is checked. Thread rule: a value type. Cost: none.
package struct TLSClientSettings: Sendable, Hashable {
    /// A PEM file of the CA certificates to trust; nil: the system's CA store.
    package var certificateAuthorityFile: String?
    /// The name (or numeric address) the certificate must carry and the one sent as SNI; nil:
    /// the host connected to.
    package var serverName: String?

    /// Settings with the system's CAs (or `certificateAuthorityFile`) and the host's own name.
    package init(certificateAuthorityFile: String? = nil, serverName: String? = nil) {
        self.certificateAuthorityFile = certificateAuthorityFile
        self.serverName = serverName
    }
}

/// Why a `ClientStream` failed. Thread rule: a value type. Cost: none.
package enum ClientStreamError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The host name could not be resolved (the name and `getaddrinfo`'s reason).
    case resolutionFailed(host: String, reason: String)
    /// No address of the host took the connection, or the connection broke (the reason, with errno).
    case connection(String)
    /// The deadline passed (what was waited for).
    case timeout(String)
    /// The server's certificate was refused: an unknown CA, expired, not a server certificate.
    case certificateRejected(String)
    /// The server's certificate is valid but does not name the host.
    case nameMismatch(String)
    /// TLS failed otherwise (OpenSSL's reason).
    case tls(String)

    /// A readable description, for logs and test failures.
    package var description: String {
        switch self {
        case .resolutionFailed(let host, let reason): "cannot resolve \(host): \(reason)"
        case .connection(let s): "connection: \(s)"
        case .timeout(let s): "timed out: \(s)"
        case .certificateRejected(let s): "certificate rejected: \(s)"
        case .nameMismatch(let s): "certificate name mismatch: \(s)"
        case .tls(let s): "TLS: \(s)"
        }
    }
}

/// One connected TCP stream, plain or TLS.
///
/// `connect` resolves the host (`getaddrinfo`, every address in its order until one answers),
/// connects and, with TLS settings, runs the handshake; `write` and `read` block the calling
/// thread until done or the deadline. Thread rule: one reader and one writer may work at the same
/// time on different threads (TLS calls are serialised by a lock; the waits happen outside it);
/// `shutdown` from any thread wakes both; `close` once neither works any more. Cost: a socket;
/// with TLS an OpenSSL context (a CA file read) and about 40 kB.
package final class ClientStream: @unchecked Sendable {
    // Sendable: `socket` is set once; the TLS client lives in a `Locked` box (every call on it holds
    // the lock; nil once freed); the flags are atomic.
    private let socket: TCPSocket
    private let tls: Locked<OpaquePointer?>
    /// Whether the stream runs TLS (fixed at connect).
    private let isTLS: Bool
    private let closed = Atomic<Bool>(false)
    private let open = Atomic<Bool>(true)
    /// The address connected to, for messages.
    package let peer: String

    private init(socket: TCPSocket, tls: OpaquePointer?, peer: String) {
        self.socket = socket
        self.tls = Locked(tls)
        isTLS = tls != nil
        self.peer = peer
    }

    deinit { close() }

    /// Connects to `host` (a DNS name, `localhost`, or a numeric IPv4 or IPv6 address without
    /// brackets) at `port`, through TLS when `tls` is given, by `deadline`. Thread rule: any
    /// thread; blocks it. Cost: a resolution (not bounded by the deadline: `getaddrinfo` blocks),
    /// one connection attempt per address until one answers, a TLS handshake.
    package static func connect(
        host: String, port: UInt16, tls: TLSClientSettings?, deadline: MonotonicTime
    ) throws(ClientStreamError) -> ClientStream {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        // No AI_ADDRCONFIG: in a network namespace with only loopback it leaves out every address.
        var list: UnsafeMutablePointer<addrinfo>? = nil
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let list else {
            throw .resolutionFailed(host: host, reason: rc == EAI_SYSTEM ? "\(Errno.current)" : String(cString: gai_strerror(rc)))
        }
        defer { freeaddrinfo(list) }
        var lastError = ClientStreamError.resolutionFailed(host: host, reason: "no IPv4 or IPv6 address")
        var cursor: UnsafeMutablePointer<addrinfo>? = list
        while let entry = cursor {
            cursor = entry.pointee.ai_next
            guard let address = entry.pointee.ai_addr, let shown = SocketAddress(sockaddr: address) else { continue }
            switch attempt(shown, shown: "\(shown)", deadline: deadline) {
            case .success(let socket):
                guard let tls else { return ClientStream(socket: socket, tls: nil, peer: "\(shown)") }
                return try handshake(socket: socket, host: host, settings: tls, shown: "\(shown)", deadline: deadline)
            case .failure(let error):
                lastError = error
                if case .timeout = error { throw error }
            }
        }
        throw lastError
    }

    /// One nonblocking connect to one address (`TCPSocket.connect`); the connected socket or why not.
    private static func attempt(_ address: SocketAddress, shown: String, deadline: MonotonicTime) -> Result<
        TCPSocket, ClientStreamError
    > {
        do throws(Errno) {
            return .success(try TCPSocket.connect(to: address, deadline: deadline))
        } catch {
            if error == .timedOut { return .failure(.timeout("connecting to \(shown)")) }
            return .failure(.connection("connect to \(shown): \(error)"))
        }
    }

    /// The TLS handshake on the connected `socket`; closes it when it fails.
    private static func handshake(
        socket: TCPSocket, host: String, settings: TLSClientSettings, shown: String, deadline: MonotonicTime
    ) throws(ClientStreamError) -> ClientStream {
        let name = settings.serverName ?? host
        var error = [CChar](repeating: 0, count: 320)
        let client: OpaquePointer? = name.withCString { n in
            if let ca = settings.certificateAuthorityFile {
                return ca.withCString { cms_tls_new(socket.descriptor.rawValue, n, $0, nil, &error, error.count) }
            }
            return cms_tls_new(socket.descriptor.rawValue, n, nil, nil, &error, error.count)
        }
        guard let client else {
            socket.close()
            throw .tls("setting up TLS for \(name): \(text(error))")
        }
        let stream = ClientStream(socket: socket, tls: client, peer: shown)
        while true {
            let rc = Int(cms_tls_handshake(client))
            switch rc {
            case CMS_TLS_DONE:
                return stream
            case CMS_TLS_WANT_READ, CMS_TLS_WANT_WRITE:
                do throws(Errno) {
                    try socket.wait(for: rc == CMS_TLS_WANT_READ ? .readable : .writable, deadline: deadline)
                } catch {
                    if error == .timedOut { throw .timeout("the TLS handshake with \(name) at \(shown)") }
                    throw .connection("the TLS handshake with \(name) at \(shown): \(error)")
                }
            default:
                _ = cms_tls_error(client, &error, error.count)
                let reason = "\(name) at \(shown): \(text(error))"
                switch Int(cms_tls_refusal(client)) {
                case CMS_TLS_REFUSED_NAME: throw .nameMismatch(reason)
                case CMS_TLS_REFUSED_CERTIFICATE: throw .certificateRejected(reason)
                default: throw .tls(reason)
                }
            }
        }
    }

    /// Writes all of `bytes` by `deadline`. Thread rule: one writer at a time. Cost: one or more
    /// sends (TLS records).
    package func write(_ bytes: [UInt8], deadline: MonotonicTime) throws(ClientStreamError) {
        var sent = 0
        while sent < bytes.count {
            if closed.load(ordering: .relaxed) { throw .connection("closed") }
            var want = TCPSocket.Events.writable
            let n: Result<Int, Errno> = bytes.withUnsafeBytes { raw in
                let rest = UnsafeRawBufferPointer(rebasing: raw[sent...])
                if isTLS {
                    let rc = tls.withLock { $0.map { cms_tls_write($0, rest.baseAddress, rest.count) } ?? CMS_TLS_FAILED }
                    if rc == CMS_TLS_WANT_READ { want = .readable }
                    return .success(rc > 0 ? rc : (rc == CMS_TLS_WANT_READ || rc == CMS_TLS_WANT_WRITE ? 0 : -1))
                }
                return Result { () throws(Errno) in try socket.send(rest) }
            }
            switch n {
            case .success(let n) where n > 0:
                sent += n
                continue
            case .success(let n) where n < 0:
                throw .connection("send to \(peer): \(tlsError())")
            case .failure(let error):
                throw .connection("send to \(peer): \(error)")
            default:
                break
            }
            try wait(want, "sending to \(peer)", deadline: deadline)
        }
    }

    /// Reads what has arrived into `buffer` (at most its size): the byte count, 0 when the peer
    /// has closed the stream. Waits by `deadline` for the first byte, else throws `.timeout`.
    /// Thread rule: one reader at a time. Cost: one receive (a TLS record's decryption).
    package func read(into buffer: inout [UInt8], deadline: MonotonicTime) throws(ClientStreamError) -> Int {
        while true {
            if closed.load(ordering: .relaxed) { throw .connection("closed") }
            var want = TCPSocket.Events.readable
            let n: Result<Int?, Errno> = buffer.withUnsafeMutableBytes { raw in
                if isTLS {
                    let rc = tls.withLock { $0.map { cms_tls_read($0, raw.baseAddress, raw.count) } ?? CMS_TLS_FAILED }
                    if rc == CMS_TLS_WANT_WRITE { want = .writable }
                    if rc == CMS_TLS_WANT_READ || rc == CMS_TLS_WANT_WRITE { return .success(nil) }
                    return .success(rc == CMS_TLS_CLOSED ? 0 : (rc > 0 ? rc : -1))
                }
                return Result { () throws(Errno) in try socket.receive(into: raw) }
            }
            switch n {
            case .success(.some(let n)) where n >= 0:
                return n
            case .success(.some):
                throw .connection("receive from \(peer): \(tlsError())")
            case .failure(let error):
                throw .connection("receive from \(peer): \(error)")
            case .success(.none):
                break
            }
            try wait(want, "reading from \(peer)", deadline: deadline)
        }
    }

    /// Waits for `events` by `deadline`; `.timeout(what)` when it passed. A failed wait returns,
    /// for the call itself to report the socket's error.
    private func wait(_ events: TCPSocket.Events, _ what: String, deadline: MonotonicTime) throws(ClientStreamError) {
        do throws(Errno) {
            try socket.wait(for: events, deadline: deadline)
        } catch {
            if error == .timedOut { throw .timeout(what) }
        }
    }

    /// Wakes a reader or writer blocked on this stream (they then fail) without freeing anything.
    /// Thread rule: any thread. Cost: one `shutdown`.
    package func shutdown() {
        closed.store(true, ordering: .relaxed)
        socket.shutdown(.both)
    }

    /// Frees the TLS client and closes the socket; idempotent. Thread rule: once no reader or
    /// writer works (after `shutdown` and their return). Cost: a `close`.
    package func close() {
        guard open.exchange(false, ordering: .acquiringAndReleasing) else { return }
        closed.store(true, ordering: .relaxed)
        tls.withLock { client in
            if let client { cms_tls_free(client) }
            client = nil
        }
        socket.close()
    }

    private func tlsError() -> String {
        guard isTLS else { return "" }
        var error = [CChar](repeating: 0, count: 320)
        tls.withLock { client in if let client { _ = cms_tls_error(client, &error, error.count) } }
        return Self.text(error)
    }

    /// A NUL-terminated C string in `bytes` as a Swift string.
    private static func text(_ bytes: [CChar]) -> String {
        let end = bytes.firstIndex(of: 0) ?? bytes.count
        return String(decoding: bytes[..<end].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
