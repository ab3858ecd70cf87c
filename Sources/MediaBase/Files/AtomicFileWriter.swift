#if canImport(Glibc)
    import Glibc
#endif

/// Why an `AtomicFileWriter` failed: the step that failed (worded for a message: "write failed",
/// "fsync failed"...), the destination path and the `errno` of the system call.
/// Thread rule: a value. Cost: none beyond its strings.
package struct AtomicFileError: Error, Sendable, CustomStringConvertible {
    /// The step that failed, as a short phrase.
    package var step: String
    /// The destination (not the temporary file).
    package var path: String
    /// The `errno` of the failing call.
    package var code: Int32

    package init(_ step: String, path: String, errno code: Int32) {
        self.step = step; self.path = path; self.code = code
    }

    /// "<path>: <step>: <strerror>".
    package var description: String { "\(path): \(step): \(String(cString: strerror(code)))" }
}

/// The one way Revue writes a file that must never be seen half-written (containers, pcap
/// captures, stats and SDP files; RevueSession's profile store can use it too): bytes go to a
/// temporary file next to the destination (`dir/.name.tmp-XXXXXX`, created with `mkstemp`), and
/// only `finish()` makes them appear under the real name: flush, `fsync`, close, `rename`, then a
/// best-effort `fsync` of the directory so the rename survives a crash. A failure, `abort()` or
/// deinit without `finish()` removes the temporary file.
///
/// Thread rule: one thread at a time. Cost: one buffer of `bufferCapacity` bytes (64 KiB by
/// default; 0 writes straight through), one `write(2)` per buffer; `finish()` costs two `fsync`s.
package final class AtomicFileWriter {
    /// The destination.
    package let path: String
    /// The temporary file the bytes go to until `finish()`.
    package let temporaryPath: String
    private var fd: Int32
    private let buffer: UnsafeMutableRawPointer?
    private let capacity: Int
    private var count = 0
    /// Bytes written so far (buffered or not): the offset of the next byte.
    package private(set) var offset: Int64 = 0
    /// True after `finish()` or `abort()`.
    package private(set) var isFinished = false

    /// Creates the temporary file with permissions `mode` (0644 by default; 0600 for secrets).
    /// Throws when `path` names no file or the directory does not accept a new file.
    package init(path: String, mode: mode_t = 0o644, bufferCapacity: Int = 1 << 16) throws(AtomicFileError) {
        self.path = path
        let slash = path.lastIndex(of: "/")
        let dir = slash.map { String(path[...$0]) } ?? ""
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        if name.isEmpty || name == "." || name == ".." {
            throw AtomicFileError("is not a file name", path: path, errno: EISDIR)
        }
        var template = Array("\(dir).\(name).tmp-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        if fd < 0 { throw AtomicFileError("cannot create output file", path: path, errno: Glibc.errno) }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        fchmod(fd, mode)
        self.fd = fd
        temporaryPath = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        capacity = max(0, bufferCapacity)
        buffer = capacity > 0 ? UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 64) : nil
    }

    deinit {
        if !isFinished { abort() }
        buffer?.deallocate()
    }

    /// Writes `bytes` to `path` in one go: the atomic replacement of a small file.
    package static func write(_ bytes: some Collection<UInt8>, to path: String, mode: mode_t = 0o644) throws(AtomicFileError) {
        let file = try AtomicFileWriter(path: path, mode: mode, bufferCapacity: 0)
        let array = Array(bytes)
        try array.withUnsafeBytes { raw in
            Result { () throws(AtomicFileError) in
                if raw.count > 0 { try file.write(raw.baseAddress!, count: raw.count) }
            }
        }.get()
        try file.finish()
    }

    private func sysWrite(_ src: UnsafeRawPointer, _ n: Int, at position: Int64? = nil) throws(AtomicFileError) {
        var done = 0
        while done < n {
            let r =
                position.map { pwrite(fd, src + done, n - done, off_t($0) + off_t(done)) }
                ?? Glibc.write(fd, src + done, n - done)
            if r < 0 {
                let e = Glibc.errno
                if e == EINTR { continue }
                throw AtomicFileError("write failed", path: path, errno: e)
            }
            done += r
        }
    }

    /// Appends `n` bytes.
    package func write(_ src: UnsafeRawPointer, count n: Int) throws(AtomicFileError) {
        precondition(!isFinished && fd >= 0, "write after finish or abort")
        if count + n > capacity {
            try flush()
            if n >= capacity {
                try sysWrite(src, n)
                offset += Int64(n)
                return
            }
        }
        (buffer! + count).copyMemory(from: src, byteCount: n)
        count += n
        offset += Int64(n)
    }

    /// Appends bytes.
    package func write(_ bytes: [UInt8]) throws(AtomicFileError) {
        try bytes.withUnsafeBytes { raw in
            Result { () throws(AtomicFileError) in
                if raw.count > 0 { try write(raw.baseAddress!, count: raw.count) }
            }
        }.get()
    }

    /// Hands buffered bytes to the kernel.
    package func flush() throws(AtomicFileError) {
        if count > 0, let buffer {
            let n = count
            count = 0
            try sysWrite(buffer, n)
        }
    }

    /// Overwrites bytes already written at `position` (size fields fixed up at the end).
    package func patch(_ bytes: [UInt8], at position: Int64) throws(AtomicFileError) {
        precondition(position + Int64(bytes.count) <= offset, "patch beyond what was written")
        try flush()
        try bytes.withUnsafeBytes { raw in
            Result { () throws(AtomicFileError) in try sysWrite(raw.baseAddress!, raw.count, at: position) }
        }.get()
    }

    /// Flushes, fsyncs and atomically renames the temporary file to `path`. On failure the
    /// temporary file is removed and the error names `path`.
    package func finish() throws(AtomicFileError) {
        precondition(!isFinished, "finish called twice")
        do throws(AtomicFileError) {
            try flush()
            if fsync(fd) != 0 { throw AtomicFileError("fsync failed", path: path, errno: Glibc.errno) }
            if close(fd) != 0 {
                fd = -1
                throw AtomicFileError("close failed", path: path, errno: Glibc.errno)
            }
            fd = -1
            if rename(temporaryPath, path) != 0 {
                throw AtomicFileError("cannot rename \(temporaryPath) into place", path: path, errno: Glibc.errno)
            }
        } catch {
            abort()
            throw error
        }
        isFinished = true
        // Make the rename durable too (best effort: some file systems refuse fsync on directories).
        let slash = path.lastIndex(of: "/")
        let dir = slash.map { String(path[...$0]) } ?? "."
        let dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 { _ = fsync(dfd); close(dfd) }
    }

    /// Drops the output: closes and removes the temporary file. Safe to call more than once.
    package func abort() {
        if fd >= 0 { close(fd); fd = -1 }
        if !isFinished {
            unlink(temporaryPath)
            isFinished = true
        }
        count = 0
    }
}
