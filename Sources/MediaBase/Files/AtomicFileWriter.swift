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

    /// The error of the system layer's call `step` on `path`.
    package init(_ step: String, path: String, _ error: Errno) {
        self.init(step, path: path, errno: error.rawValue)
    }

    /// "<path>: <step>: <strerror>".
    package var description: String { "\(path): \(step): \(String(cString: strerror(code)))" }
}

/// The one way Revue writes a file that must never be seen half-written (containers, pcap
/// captures, stats and SDP files, RevueSession's profile): bytes go to a temporary file next to the
/// destination, and only `finish()` makes them appear under the real name: flush, `fsync`, close,
/// `rename`, then a best-effort `fsync` of the directory so the rename survives a crash. A failure,
/// `abort()` or deinit without `finish()` removes the temporary file.
///
/// The temporary file is created with `O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC` and then given
/// exactly `mode` (no umask): nothing already at its name, file or symbolic link, is ever written
/// through. Its name is `dir/.name.tmp-XXXXXX` with a random suffix, or a fixed
/// `temporaryPath` (the profile's `profile.json.tmp`), whose leftover from a crash, or anything
/// planted there, is unlinked first (unlink removes a symbolic link, never its target). `rename`
/// replaces a symbolic link at the destination itself, never its target.
///
/// Thread rule: one thread at a time. Cost: one buffer of `bufferCapacity` bytes (64 KiB by
/// default; 0 writes straight through), one `write(2)` per buffer; `finish()` costs two `fsync`s.
package final class AtomicFileWriter {
    /// The destination.
    package let path: String
    /// The temporary file the bytes go to until `finish()`.
    package let temporaryPath: String
    private var fd: FileDescriptor?
    private let buffer: UnsafeMutableRawPointer?
    private let capacity: Int
    private var count = 0
    /// Bytes written so far (buffered or not): the offset of the next byte.
    package private(set) var offset: Int64 = 0
    /// True after `finish()` or `abort()`.
    package private(set) var isFinished = false

    /// The flags of the temporary file: a new file, never through a symbolic link.
    private static let temporaryOptions: FileDescriptor.OpenOptions = [.create, .exclusiveCreate, .noFollow, .closeOnExec]

    /// Creates the temporary file with permissions `mode` (0644 by default; 0600 for secrets):
    /// `temporaryPath` when given (what is there is unlinked first), else a new random name next
    /// to `path`. Throws when `path` names no file or the directory does not accept a new file.
    package init(path: String, mode: mode_t = 0o644, temporaryPath: String? = nil, bufferCapacity: Int = 1 << 16)
        throws(AtomicFileError)
    {
        self.path = path
        let slash = path.lastIndex(of: "/")
        let dir = slash.map { String(path[...$0]) } ?? ""
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        if name.isEmpty || name == "." || name == ".." {
            throw AtomicFileError("is not a file name", path: path, errno: EISDIR)
        }
        var created: (FileDescriptor, String)?
        if let temporaryPath {
            unlink(temporaryPath)
            do throws(Errno) {
                created = (
                    try FileDescriptor.open(temporaryPath, .writeOnly, options: Self.temporaryOptions, permissions: mode),
                    temporaryPath
                )
            } catch {
                throw AtomicFileError("cannot create output file", path: path, error)
            }
        } else {
            var attempts = 0
            while created == nil {
                let candidate = "\(dir).\(name).tmp-\(Self.randomSuffix())"
                do throws(Errno) {
                    created = (
                        try FileDescriptor.open(candidate, .writeOnly, options: Self.temporaryOptions, permissions: mode),
                        candidate
                    )
                } catch {
                    attempts += 1
                    if error != .fileExists || attempts >= 100 {
                        throw AtomicFileError("cannot create output file", path: path, error)
                    }
                }
            }
        }
        let (fd, temporary) = created!
        do throws(Errno) {
            try fd.setPermissions(mode)
        } catch {
            try? fd.close()
            unlink(temporary)
            throw AtomicFileError("cannot set the mode of the output file", path: path, error)
        }
        self.fd = fd
        self.temporaryPath = temporary
        capacity = max(0, bufferCapacity)
        buffer = capacity > 0 ? UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 64) : nil
    }

    /// Six random letters and digits, as `mkstemp` uses.
    private static func randomSuffix() -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)
        var bytes = [UInt8](repeating: 0, count: 6)
        RandomBytes.fill(&bytes)
        return String(decoding: bytes.map { alphabet[Int($0) % alphabet.count] }, as: UTF8.self)
    }

    deinit {
        if !isFinished { abort() }
        buffer?.deallocate()
    }

    /// Writes `bytes` to `path` in one go: the atomic replacement of a small file (with
    /// `temporaryPath`, through that fixed name; see `init`).
    package static func write(
        _ bytes: some Collection<UInt8>, to path: String, mode: mode_t = 0o644, temporaryPath: String? = nil
    ) throws(AtomicFileError) {
        let file = try AtomicFileWriter(path: path, mode: mode, temporaryPath: temporaryPath, bufferCapacity: 0)
        let array = Array(bytes)
        try array.withUnsafeBytes { raw in
            Result { () throws(AtomicFileError) in
                if raw.count > 0 { try file.write(raw.baseAddress!, count: raw.count) }
            }
        }.get()
        try file.finish()
    }

    private func sysWrite(_ src: UnsafeRawPointer, _ n: Int, at position: Int64? = nil) throws(AtomicFileError) {
        guard let fd else { throw AtomicFileError("write failed", path: path, .badDescriptor) }
        let bytes = UnsafeRawBufferPointer(start: src, count: n)
        do throws(Errno) {
            if let position {
                try fd.writeAll(bytes, toAbsoluteOffset: position)
            } else {
                try fd.writeAll(bytes)
            }
        } catch {
            throw AtomicFileError("write failed", path: path, error)
        }
    }

    /// Appends `n` bytes.
    package func write(_ src: UnsafeRawPointer, count n: Int) throws(AtomicFileError) {
        precondition(!isFinished && fd != nil, "write after finish or abort")
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
            guard let fd else { throw AtomicFileError("fsync failed", path: path, .badDescriptor) }
            do throws(Errno) { try fd.sync() } catch { throw AtomicFileError("fsync failed", path: path, error) }
            self.fd = nil
            do throws(Errno) { try fd.close() } catch { throw AtomicFileError("close failed", path: path, error) }
            if rename(temporaryPath, path) != 0 {
                throw AtomicFileError("cannot rename \(temporaryPath) into place", path: path, .current)
            }
        } catch {
            abort()
            throw error
        }
        isFinished = true
        // Make the rename durable too (best effort: some file systems refuse fsync on directories).
        let slash = path.lastIndex(of: "/")
        let dir = slash.map { String(path[...$0]) } ?? "."
        if let directory = try? FileDescriptor.open(dir, .readOnly, options: [.directory, .closeOnExec]) {
            try? directory.sync()
            try? directory.close()
        }
    }

    /// Drops the output: closes and removes the temporary file. Safe to call more than once.
    package func abort() {
        if let fd {
            try? fd.close()
            self.fd = nil
        }
        if !isFinished {
            unlink(temporaryPath)
            isFinished = true
        }
        count = 0
    }
}
