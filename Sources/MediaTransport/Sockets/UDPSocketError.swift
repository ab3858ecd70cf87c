import Glibc
import MediaBase

/// An `errno` value from a socket call, shaped like swift-system's `Errno`.
/// Thread rule: a value, safe anywhere. Cost: none.
public struct SocketErrno: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The C `errno` value.
    public let rawValue: Int32
    /// Wraps a C `errno` value.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The current thread's `errno`.
    static var current: SocketErrno { SocketErrno(rawValue: errno) }

    /// `EAGAIN`/`EWOULDBLOCK`: a non-blocking call found nothing to do, or a timeout expired.
    public static let wouldBlock = SocketErrno(rawValue: EAGAIN)
    /// `EINTR`: a signal interrupted the call.
    public static let interrupted = SocketErrno(rawValue: EINTR)
    /// `ENOBUFS`: the kernel's send queue (or the interface's) is full.
    public static let noBufferSpace = SocketErrno(rawValue: ENOBUFS)
    /// `EADDRINUSE`: the local address is already bound.
    public static let addressInUse = SocketErrno(rawValue: EADDRINUSE)
    /// `EADDRNOTAVAIL`: the address is not configured on this host (for example `::1` without IPv6).
    public static let addressNotAvailable = SocketErrno(rawValue: EADDRNOTAVAIL)
    /// `EAFNOSUPPORT`: the address family is not supported (IPv6 disabled).
    public static let addressFamilyNotSupported = SocketErrno(rawValue: EAFNOSUPPORT)
    /// `ECONNREFUSED`: an ICMP port unreachable came back for an earlier datagram.
    public static let connectionRefused = SocketErrno(rawValue: ECONNREFUSED)
    /// `EMSGSIZE`: the datagram is larger than the socket or path allows.
    public static let messageTooLong = SocketErrno(rawValue: EMSGSIZE)
    /// `EINVAL`: an argument was invalid.
    public static let invalidArgument = SocketErrno(rawValue: EINVAL)
    /// `EBADF`: the descriptor is closed.
    public static let badFileDescriptor = SocketErrno(rawValue: EBADF)
    /// `ENETUNREACH`: no route to the destination network.
    public static let networkUnreachable = SocketErrno(rawValue: ENETUNREACH)

    /// The C library's message for this code (`strerror`).
    public var description: String { String(cString: strerror(rawValue)) }
}

/// A failed socket call: the `errno`, the operation (`"bind"`, `"sendmmsg"`, ...) and the address
/// involved when there is one. Thread rule: a value. Cost: none.
public struct SocketError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What the kernel said.
    public var code: SocketErrno
    /// The system call or step that failed.
    public var operation: String
    /// The address the call was about, if any.
    public var address: SocketAddress?

    /// Makes an error from its parts.
    public init(_ code: SocketErrno, operation: String, address: SocketAddress? = nil) {
        self.code = code
        self.operation = operation
        self.address = address
    }

    /// The system layer's `errno` for `operation`.
    init(_ error: Errno, operation: String, address: SocketAddress? = nil) {
        self.init(SocketErrno(rawValue: error.rawValue), operation: operation, address: address)
    }

    /// The current `errno` for `operation`.
    static func last(_ operation: String, _ address: SocketAddress? = nil) -> SocketError {
        SocketError(SocketErrno.current, operation: operation, address: address)
    }

    /// A readable description, for logs and error messages.
    public var description: String {
        if let address { return "\(operation) \(address): \(code) (errno \(code.rawValue))" }
        return "\(operation): \(code) (errno \(code.rawValue))"
    }
}
