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
    // Sendable: `fd` and `tls` are set once; every call on `tls` holds `lock`; the flags are atomic.
    private let fd: Int32
    private let tls: OpaquePointer?
    private let lock = Mutex<Void>(())
    private let closed = Atomic<Bool>(false)
    private let open = Atomic<Bool>(true)
    /// The address connected to, for messages.
    package let peer: String

    private init(fd: Int32, tls: OpaquePointer?, peer: String) {
        self.fd = fd
        self.tls = tls
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
            throw .resolutionFailed(host: host, reason: rc == EAI_SYSTEM ? "errno \(errno)" : String(cString: gai_strerror(rc)))
        }
        defer { freeaddrinfo(list) }
        var lastError = ClientStreamError.resolutionFailed(host: host, reason: "no IPv4 or IPv6 address")
        var cursor: UnsafeMutablePointer<addrinfo>? = list
        while let entry = cursor {
            cursor = entry.pointee.ai_next
            guard let address = entry.pointee.ai_addr, let shown = SocketAddress(sockaddr: address) else { continue }
            switch attempt(entry.pointee, shown: "\(shown)", deadline: deadline) {
            case .success(let fd):
                guard let tls else { return ClientStream(fd: fd, tls: nil, peer: "\(shown)") }
                return try handshake(fd: fd, host: host, settings: tls, shown: "\(shown)", deadline: deadline)
            case .failure(let error):
                lastError = error
                if case .timeout = error { throw error }
            }
        }
        throw lastError
    }

    /// One nonblocking connect to one address; the connected socket or why not.
    private static func attempt(_ entry: addrinfo, shown: String, deadline: MonotonicTime) -> Result<Int32, ClientStreamError> {
        let fd = socket(
            entry.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(.connection("socket: errno \(errno)")) }
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        if Glibc.connect(fd, entry.ai_addr, entry.ai_addrlen) != 0 && errno != EINPROGRESS {
            let e = errno
            Glibc.close(fd)
            return .failure(.connection("connect to \(shown): errno \(e)"))
        }
        switch wait(fd, Int16(POLLOUT), deadline: deadline) {
        case .failure:
            Glibc.close(fd)
            return .failure(.timeout("connecting to \(shown)"))
        case .success:
            break
        }
        var soError: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &length)
        if soError != 0 {
            Glibc.close(fd)
            return .failure(.connection("connect to \(shown): errno \(soError)"))
        }
        return .success(fd)
    }

    /// The TLS handshake on the connected `fd`; closes `fd` when it fails.
    private static func handshake(
        fd: Int32, host: String, settings: TLSClientSettings, shown: String, deadline: MonotonicTime
    ) throws(ClientStreamError) -> ClientStream {
        let name = settings.serverName ?? host
        var error = [CChar](repeating: 0, count: 320)
        let client: OpaquePointer? = name.withCString { n in
            if let ca = settings.certificateAuthorityFile {
                return ca.withCString { cms_tls_new(fd, n, $0, nil, &error, error.count) }
            }
            return cms_tls_new(fd, n, nil, nil, &error, error.count)
        }
        guard let client else {
            Glibc.close(fd)
            throw .tls("setting up TLS for \(name): \(text(error))")
        }
        let stream = ClientStream(fd: fd, tls: client, peer: shown)
        while true {
            let rc = Int(cms_tls_handshake(client))
            switch rc {
            case CMS_TLS_DONE:
                return stream
            case CMS_TLS_WANT_READ, CMS_TLS_WANT_WRITE:
                if case .failure = wait(fd, Int16(rc == CMS_TLS_WANT_READ ? POLLIN : POLLOUT), deadline: deadline) {
                    throw .timeout("the TLS handshake with \(name) at \(shown)")
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
            var want = Int16(POLLOUT)
            let n: Int = bytes.withUnsafeBytes { raw in
                let start = raw.baseAddress! + sent
                if let tls {
                    let rc = lock.withLock { _ in cms_tls_write(tls, start, raw.count - sent) }
                    if rc == CMS_TLS_WANT_READ { want = Int16(POLLIN) }
                    return rc > 0 ? rc : (rc == CMS_TLS_WANT_READ || rc == CMS_TLS_WANT_WRITE ? 0 : -1)
                }
                let rc = Glibc.send(fd, start, raw.count - sent, Int32(MSG_NOSIGNAL))
                if rc < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return 0 }
                return rc
            }
            if n > 0 {
                sent += n
                continue
            }
            if n < 0 { throw .connection("send to \(peer): \(tls == nil ? "errno \(errno)" : tlsError())") }
            if case .failure = Self.wait(fd, want, deadline: deadline) { throw .timeout("sending to \(peer)") }
        }
    }

    /// Reads what has arrived into `buffer` (at most its size): the byte count, 0 when the peer
    /// has closed the stream. Waits by `deadline` for the first byte, else throws `.timeout`.
    /// Thread rule: one reader at a time. Cost: one receive (a TLS record's decryption).
    package func read(into buffer: inout [UInt8], deadline: MonotonicTime) throws(ClientStreamError) -> Int {
        while true {
            if closed.load(ordering: .relaxed) { throw .connection("closed") }
            var want = Int16(POLLIN)
            let n: Int = buffer.withUnsafeMutableBytes { raw in
                if let tls {
                    let rc = lock.withLock { _ in cms_tls_read(tls, raw.baseAddress, raw.count) }
                    if rc == CMS_TLS_WANT_WRITE { want = Int16(POLLOUT) }
                    if rc == CMS_TLS_WANT_READ || rc == CMS_TLS_WANT_WRITE { return -2 }
                    return rc == CMS_TLS_CLOSED ? 0 : (rc > 0 ? rc : -1)
                }
                let rc = recv(fd, raw.baseAddress, raw.count, 0)
                if rc < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return -2 }
                return rc
            }
            if n >= 0 { return n }
            if n == -1 { throw .connection("receive from \(peer): \(tls == nil ? "errno \(errno)" : tlsError())") }
            if case .failure = Self.wait(fd, want, deadline: deadline) { throw .timeout("reading from \(peer)") }
        }
    }

    /// Wakes a reader or writer blocked on this stream (they then fail) without freeing anything.
    /// Thread rule: any thread. Cost: one `shutdown`.
    package func shutdown() {
        closed.store(true, ordering: .relaxed)
        _ = Glibc.shutdown(fd, Int32(SHUT_RDWR))
    }

    /// Frees the TLS client and closes the socket; idempotent. Thread rule: once no reader or
    /// writer works (after `shutdown` and their return). Cost: a `close`.
    package func close() {
        guard open.exchange(false, ordering: .acquiringAndReleasing) else { return }
        closed.store(true, ordering: .relaxed)
        lock.withLock { _ in if let tls { cms_tls_free(tls) } }
        Glibc.close(fd)
    }

    private func tlsError() -> String {
        guard let tls else { return "" }
        var error = [CChar](repeating: 0, count: 320)
        lock.withLock { _ in _ = cms_tls_error(tls, &error, error.count) }
        return Self.text(error)
    }

    /// Polls `fd` for `events` until `deadline`; failure when it passed.
    private static func wait(_ fd: Int32, _ events: Int16, deadline: MonotonicTime) -> Result<Void, ClientStreamError> {
        while true {
            let now = MonotonicTime.now
            guard now < deadline else { return .failure(.timeout("")) }
            let ms = Int32(min((deadline - now).inNanoseconds / 1_000_000 + 1, 60_000))
            var entry = pollfd(fd: fd, events: events, revents: 0)
            let n = poll(&entry, 1, ms)
            if n > 0 { return .success(()) }
            if n < 0 && errno != EINTR { return .success(()) }  // Let the call itself report it.
        }
    }

    /// A NUL-terminated C string in `bytes` as a Swift string.
    private static func text(_ bytes: [CChar]) -> String {
        let end = bytes.firstIndex(of: 0) ?? bytes.count
        return String(decoding: bytes[..<end].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
