// Typed errno and the retry of system calls a signal interrupted, in the manner of swift-system:
// every call of the system layer (`FileDescriptor`, `TCPSocket`, the UDP socket's own loops)
// reports failure as an `Errno` and never returns because of `EINTR`.
#if canImport(Glibc)
    import Glibc
#endif

/// A POSIX error number, as a typed error. `description` is the C library's text for it
/// (`strerror`), so a message built from it reads like the system's.
/// Thread rule: a value, safe anywhere. Cost: an `Int32`; `description` formats a string.
package struct Errno: Error, RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The `errno` value.
    package let rawValue: Int32

    /// The error with number `rawValue`.
    package init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's `errno` now: read it right after the failing call.
    package static var current: Errno { Errno(rawValue: Glibc.errno) }

    /// `EINTR`: a signal interrupted the call.
    package static let interrupted = Errno(rawValue: EINTR)
    /// `EAGAIN` (`EWOULDBLOCK` on Linux): a nonblocking call would have waited.
    package static let wouldBlock = Errno(rawValue: EAGAIN)
    /// `EINPROGRESS`: a nonblocking connect has started.
    package static let inProgress = Errno(rawValue: EINPROGRESS)
    /// `EEXIST`: the file exists (an exclusive create).
    package static let fileExists = Errno(rawValue: EEXIST)
    /// `ENOENT`: no such file or directory.
    package static let noSuchFile = Errno(rawValue: ENOENT)
    /// `ETIMEDOUT`: the deadline passed (also what the system layer throws for its own deadlines).
    package static let timedOut = Errno(rawValue: ETIMEDOUT)
    /// `EBADF`: not an open descriptor (also thrown for a closed `FileDescriptor`).
    package static let badDescriptor = Errno(rawValue: EBADF)
    /// `ELOOP`: a symbolic link where `O_NOFOLLOW` allows none.
    package static let tooManySymbolicLinks = Errno(rawValue: ELOOP)

    /// True for `EAGAIN`/`EWOULDBLOCK`.
    package var isWouldBlock: Bool { rawValue == EAGAIN || rawValue == EWOULDBLOCK }

    /// The C library's text for this error (`strerror`), e.g. "Connection refused".
    package var description: String { String(cString: strerror(rawValue)) }
}

/// Runs the system call `call` until it returns without `EINTR`: its result when not negative,
/// else the `errno` it failed with. Not for `close(2)`, which Linux never restarts (the descriptor
/// is gone even when it reports `EINTR`). Thread rule: any thread. Cost: the call; one more per
/// interruption.
@inline(__always)
package func retryingOnInterrupt<T: FixedWidthInteger>(_ call: () -> T) throws(Errno) -> T {
    while true {
        let result = call()
        if result >= 0 { return result }
        let error = Errno.current
        if error != .interrupted { throw error }
    }
}
