// An open file descriptor as a value, with the calls files need: open (with O_EXCL, O_NOFOLLOW and
// O_CLOEXEC), read, write-all, pread/pwrite, fsync, fchmod, an advisory lock and close, each retried on EINTR and
// failing with a typed `Errno`.
#if canImport(Glibc)
    import Glibc
#endif

/// An open file descriptor: a value wrapper of the kernel's number, in the manner of swift-system.
/// It does not close itself: the owner calls `close()` once (files: `AtomicFileWriter`; sockets:
/// `TCPSocket`). Every call is retried when a signal interrupts it and throws the `Errno` it
/// failed with.
/// Thread rule: a value; calls on one descriptor from several threads are as safe as the system
/// calls themselves (the owner decides who may close it). Cost: one system call per method (more
/// when a write is partial or interrupted).
package struct FileDescriptor: RawRepresentable, Hashable, Sendable {
    /// The kernel's descriptor number.
    package let rawValue: Int32

    /// Wraps the descriptor `rawValue` (already open).
    package init(rawValue: Int32) { self.rawValue = rawValue }

    /// How a file is opened for access. Thread rule: a value. Cost: none.
    package enum AccessMode: Sendable {
        /// `O_RDONLY`.
        case readOnly
        /// `O_WRONLY`.
        case writeOnly
        /// `O_RDWR`.
        case readWrite

        var flags: Int32 {
            switch self {
            case .readOnly: O_RDONLY
            case .writeOnly: O_WRONLY
            case .readWrite: O_RDWR
            }
        }
    }

    /// The `open(2)` flags besides the access mode. Thread rule: a value. Cost: none.
    package struct OpenOptions: OptionSet, Sendable {
        package let rawValue: Int32
        package init(rawValue: Int32) { self.rawValue = rawValue }

        /// `O_CREAT`: create the file when it does not exist.
        package static let create = OpenOptions(rawValue: O_CREAT)
        /// `O_EXCL`: with `create`, fail with `EEXIST` when anything (a file, a symbolic link) is
        /// already at the path.
        package static let exclusiveCreate = OpenOptions(rawValue: O_EXCL)
        /// `O_NOFOLLOW`: fail with `ELOOP` when the last component is a symbolic link.
        package static let noFollow = OpenOptions(rawValue: O_NOFOLLOW)
        /// `O_CLOEXEC`: not inherited by a program `exec`ed later.
        package static let closeOnExec = OpenOptions(rawValue: O_CLOEXEC)
        /// `O_TRUNC`: empty an existing file.
        package static let truncate = OpenOptions(rawValue: O_TRUNC)
        /// `O_APPEND`: every write goes to the end.
        package static let append = OpenOptions(rawValue: O_APPEND)
        /// `O_DIRECTORY`: fail unless the path is a directory.
        package static let directory = OpenOptions(rawValue: O_DIRECTORY)
        /// `O_NONBLOCK`.
        package static let nonBlocking = OpenOptions(rawValue: O_NONBLOCK)
    }

    /// Opens `path` (`open(2)`); `permissions` is the mode of a created file (before the umask).
    /// Thread rule: any thread. Cost: one system call.
    package static func open(
        _ path: String, _ mode: AccessMode, options: OpenOptions = [.closeOnExec], permissions: mode_t = 0o644
    ) throws(Errno) -> FileDescriptor {
        let fd = try retryingOnInterrupt { Glibc.open(path, mode.flags | options.rawValue, permissions) }
        return FileDescriptor(rawValue: fd)
    }

    /// Reads what is available, at most `buffer.count` bytes: the count read, 0 at the end of the
    /// file (or of a stream the peer closed). Cost: one `read(2)`.
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        try retryingOnInterrupt { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// Reads at most `buffer.count` bytes at `offset` without moving the file position (`pread`).
    package func read(fromAbsoluteOffset offset: Int64, into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        try retryingOnInterrupt { pread(rawValue, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// Writes once: the count the kernel took (possibly fewer than `bytes.count`). Cost: one `write(2)`.
    package func write(_ bytes: UnsafeRawBufferPointer) throws(Errno) -> Int {
        try retryingOnInterrupt { Glibc.write(rawValue, bytes.baseAddress, bytes.count) }
    }

    /// Writes all of `bytes`, repeating partial writes. Cost: one `write(2)` per partial write.
    package func writeAll(_ bytes: UnsafeRawBufferPointer) throws(Errno) {
        var done = 0
        while done < bytes.count {
            done += try retryingOnInterrupt { Glibc.write(rawValue, bytes.baseAddress! + done, bytes.count - done) }
        }
    }

    /// Writes all of `bytes` at `offset` without moving the file position (`pwrite`), repeating
    /// partial writes.
    package func writeAll(_ bytes: UnsafeRawBufferPointer, toAbsoluteOffset offset: Int64) throws(Errno) {
        var done = 0
        while done < bytes.count {
            done += try retryingOnInterrupt {
                pwrite(rawValue, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            }
        }
    }

    /// Waits until the file's data and metadata are on the device (`fsync(2)`). Cost: a disk flush.
    package func sync() throws(Errno) {
        _ = try retryingOnInterrupt { fsync(rawValue) }
    }

    /// Sets the file's permission bits exactly (`fchmod(2)`, no umask).
    package func setPermissions(_ mode: mode_t) throws(Errno) {
        _ = try retryingOnInterrupt { fchmod(rawValue, mode) }
    }

    /// Takes an exclusive advisory lock on the whole file without waiting (`flock(2)` with
    /// `LOCK_EX | LOCK_NB`): false when another open file description holds it. The lock goes
    /// with `close()` (or `unlock()`). Cost: one system call.
    package func tryLockExclusive() throws(Errno) -> Bool {
        do {
            _ = try retryingOnInterrupt { flock(rawValue, LOCK_EX | LOCK_NB) }
            return true
        } catch {
            if error == .wouldBlock { return false }
            throw error
        }
    }

    /// Releases a lock taken with `tryLockExclusive()` (`flock(2)` with `LOCK_UN`).
    package func unlock() throws(Errno) {
        _ = try retryingOnInterrupt { flock(rawValue, LOCK_UN) }
    }

    /// Closes the descriptor (`close(2)`, not retried: Linux has released the number even when it
    /// reports `EINTR`). Call once; the number may be reused by the next open at once.
    package func close() throws(Errno) {
        if Glibc.close(rawValue) != 0 {
            let error = Errno.current
            if error != .interrupted { throw error }
        }
    }
}
