#if canImport(Glibc)
import Glibc
#endif

/// A buffered, streaming reader over one file for the container readers: it never loads the whole
/// file, reads large blocks straight into the caller's memory, and turns every system error into a
/// `ContainerError` naming the file.
/// Thread rule: one thread at a time. Cost: one 64 KiB buffer; `read` of more than the buffer holds
/// goes straight from the kernel into the destination.
final class ContainerFileReader {
    let path: String
    private let fd: Int32
    private let buffer: UnsafeMutableRawPointer
    private let capacity = 1 << 16
    private var start = 0
    private var end = 0
    /// Offset in the file of the next byte `read` returns.
    private(set) var offset: Int64 = 0
    /// Size of the file when it is a regular file (so truncation can be detected before
    /// allocating); nil for pipes and devices.
    let fileSize: Int64?

    init(path: String) throws(ContainerError) {
        self.path = path
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 { throw .system("cannot open", path: path, errno: Glibc.errno) }
        var st = stat()
        if fstat(fd, &st) != 0 {
            let e = Glibc.errno
            close(fd)
            throw .system("cannot stat", path: path, errno: e)
        }
        if (st.st_mode & S_IFMT) == S_IFDIR {
            close(fd)
            throw ContainerError(.io, path: path, "is a directory, not a file", errno: EISDIR)
        }
        fileSize = (st.st_mode & S_IFMT) == S_IFREG ? Int64(st.st_size) : nil
        self.fd = fd
        buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 64)
    }

    deinit {
        close(fd)
        buffer.deallocate()
    }

    /// Bytes left in a regular file, nil when unknown.
    var remaining: Int64? { fileSize.map { max(0, $0 - offset) } }

    /// One `read(2)`, retried on EINTR. Returns 0 at end of file.
    private func sysRead(_ dst: UnsafeMutableRawPointer, _ count: Int) throws(ContainerError) -> Int {
        while true {
            let n = Glibc.read(fd, dst, count)
            if n >= 0 { return n }
            let e = Glibc.errno
            if e == EINTR { continue }
            throw .system("read failed at byte \(offset)", path: path, errno: e)
        }
    }

    private func refill() throws(ContainerError) -> Bool {
        start = 0
        end = try sysRead(buffer, capacity)
        return end > 0
    }

    /// Reads up to `count` bytes into `dst`, stopping only at end of file. Returns the bytes read.
    func read(into dst: UnsafeMutableRawPointer, count: Int) throws(ContainerError) -> Int {
        var done = 0
        while done < count {
            if start < end {
                let n = min(end - start, count - done)
                (dst + done).copyMemory(from: buffer + start, byteCount: n)
                start += n; done += n
                continue
            }
            let want = count - done
            if want >= capacity {
                let n = try sysRead(dst + done, want)
                if n == 0 { break }
                done += n
            } else if try !refill() {
                break
            }
        }
        offset += Int64(done)
        return done
    }

    /// Reads exactly `count` bytes into a fresh array when the file has them; fewer at end of file.
    func readBytes(_ count: Int) throws(ContainerError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        let n = try out.withUnsafeMutableBytes { raw in
            Result { () throws(ContainerError) -> Int in try read(into: raw.baseAddress!, count: count) }
        }.get()
        if n < count { out.removeLast(count - n) }
        return out
    }

    /// The next byte, or nil at end of file.
    func readByte() throws(ContainerError) -> UInt8? {
        if start == end, try !refill() { return nil }
        let b = buffer.load(fromByteOffset: start, as: UInt8.self)
        start += 1; offset += 1
        return b
    }

    /// Skips `count` bytes (seeking when possible). Returns the bytes actually skipped.
    func skip(_ count: Int64) throws(ContainerError) -> Int64 {
        var left = count
        let inBuffer = Int64(end - start)
        if left <= inBuffer {
            start += Int(left); offset += left
            return count
        }
        left -= inBuffer
        offset += inBuffer
        start = 0; end = 0
        if let size = fileSize {
            let target = min(size, offset + left)
            if lseek(fd, off_t(target), SEEK_SET) < 0 {
                throw .system("seek failed", path: path, errno: Glibc.errno)
            }
            let skipped = inBuffer + (target - offset)
            offset = target
            return skipped
        }
        var skipped = inBuffer
        while left > 0 {
            if try !refill() { break }
            let n = min(Int64(end), left)
            start = Int(n); left -= n; skipped += n; offset += n
        }
        return skipped
    }

    enum Line { case line, endOfFile, tooLong, unterminated }

    /// Reads bytes up to (not including) `\n` into `line` (cleared first), at most `limit` bytes.
    func readLine(into line: inout [UInt8], limit: Int) throws(ContainerError) -> Line {
        line.removeAll(keepingCapacity: true)
        while true {
            guard let b = try readByte() else { return line.isEmpty ? .endOfFile : .unterminated }
            if b == UInt8(ascii: "\n") { return .line }
            if line.count >= limit { return .tooLong }
            line.append(b)
        }
    }
}

/// A buffered writer that writes to a temporary file next to its destination
/// (`dir/.name.tmp-XXXXXX`) and only `finish()` makes it appear under its real name (fsync, then an
/// atomic rename): a failure, `abort()` or deinit without `finish()` removes the temporary file, so
/// no half-written output is ever left behind.
/// Thread rule: one thread at a time. Cost: one 64 KiB buffer; one `write(2)` per 64 KiB.
final class ContainerFileWriter {
    let path: String
    let temporaryPath: String
    private var fd: Int32
    private let buffer: UnsafeMutableRawPointer
    private let capacity = 1 << 16
    private var count = 0
    /// Bytes written so far (buffered or not): the offset of the next byte.
    private(set) var offset: Int64 = 0
    private(set) var isFinished = false

    init(path: String) throws(ContainerError) {
        self.path = path
        let slash = path.lastIndex(of: "/")
        let dir = slash.map { String(path[...$0]) } ?? ""
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        if name.isEmpty || name == "." || name == ".." {
            throw ContainerError(.io, path: path, "is not a file name", errno: EISDIR)
        }
        var template = Array("\(dir).\(name).tmp-XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        if fd < 0 {
            throw .system("cannot create output file", path: path, errno: Glibc.errno)
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        fchmod(fd, 0o644)
        self.fd = fd
        temporaryPath = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 64)
    }

    deinit {
        if !isFinished { abort() }
        buffer.deallocate()
    }

    private func sysWrite(_ src: UnsafeRawPointer, _ n: Int, at position: Int64? = nil) throws(ContainerError) {
        var done = 0
        while done < n {
            let r = position.map { pwrite(fd, src + done, n - done, off_t($0) + off_t(done)) }
                ?? Glibc.write(fd, src + done, n - done)
            if r < 0 {
                let e = Glibc.errno
                if e == EINTR { continue }
                throw .system("write failed", path: path, errno: e)
            }
            done += r
        }
    }

    /// Appends `n` bytes.
    func write(_ src: UnsafeRawPointer, count n: Int) throws(ContainerError) {
        precondition(!isFinished && fd >= 0, "write after finish or abort")
        if count + n > capacity {
            try flush()
            if n >= capacity {
                try sysWrite(src, n)
                offset += Int64(n)
                return
            }
        }
        (buffer + count).copyMemory(from: src, byteCount: n)
        count += n
        offset += Int64(n)
    }

    /// Appends bytes.
    func write(_ bytes: [UInt8]) throws(ContainerError) {
        try bytes.withUnsafeBytes { raw in
            Result { () throws(ContainerError) in
                if raw.count > 0 { try write(raw.baseAddress!, count: raw.count) }
            }
        }.get()
    }

    /// Hands buffered bytes to the kernel.
    func flush() throws(ContainerError) {
        if count > 0 {
            let n = count
            count = 0
            try sysWrite(buffer, n)
        }
    }

    /// Overwrites bytes already written at `position` (size fields fixed up at the end).
    func patch(_ bytes: [UInt8], at position: Int64) throws(ContainerError) {
        precondition(position + Int64(bytes.count) <= offset, "patch beyond what was written")
        try flush()
        try bytes.withUnsafeBytes { raw in
            Result { () throws(ContainerError) in try sysWrite(raw.baseAddress!, raw.count, at: position) }
        }.get()
    }

    /// Flushes, fsyncs and atomically renames the temporary file to `path`. On failure the
    /// temporary file is removed and the error names `path`.
    func finish() throws(ContainerError) {
        precondition(!isFinished, "finish called twice")
        do throws(ContainerError) {
            try flush()
            if fsync(fd) != 0 { throw ContainerError.system("fsync failed", path: path, errno: Glibc.errno) }
            if close(fd) != 0 {
                fd = -1
                throw ContainerError.system("close failed", path: path, errno: Glibc.errno)
            }
            fd = -1
            if rename(temporaryPath, path) != 0 {
                throw ContainerError.system("cannot rename \(temporaryPath) into place", path: path, errno: Glibc.errno)
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
    func abort() {
        if fd >= 0 { close(fd); fd = -1 }
        if !isFinished {
            unlink(temporaryPath)
            isFinished = true
        }
        count = 0
    }
}

/// Little-endian field access for container headers (Y4M/WAV/IVF/Ogg fields are little-endian).
enum ContainerLE {
    @inline(__always) static func u16(_ p: UnsafeRawPointer, _ at: Int) -> UInt16 {
        UInt16(p.load(fromByteOffset: at, as: UInt8.self)) | UInt16(p.load(fromByteOffset: at + 1, as: UInt8.self)) << 8
    }
    @inline(__always) static func u32(_ p: UnsafeRawPointer, _ at: Int) -> UInt32 {
        UInt32(u16(p, at)) | UInt32(u16(p, at + 2)) << 16
    }
    @inline(__always) static func u64(_ p: UnsafeRawPointer, _ at: Int) -> UInt64 {
        UInt64(u32(p, at)) | UInt64(u32(p, at + 4)) << 32
    }
    @inline(__always) static func u16(_ a: [UInt8], _ at: Int) -> UInt16 { UInt16(a[at]) | UInt16(a[at + 1]) << 8 }
    @inline(__always) static func u32(_ a: [UInt8], _ at: Int) -> UInt32 { UInt32(u16(a, at)) | UInt32(u16(a, at + 2)) << 16 }
    @inline(__always) static func u64(_ a: [UInt8], _ at: Int) -> UInt64 { UInt64(u32(a, at)) | UInt64(u32(a, at + 4)) << 32 }
}

extension Array where Element == UInt8 {
    mutating func appendContainerLE16(_ v: UInt16) { append(UInt8(v & 0xFF)); append(UInt8(v >> 8)) }
    mutating func appendContainerLE32(_ v: UInt32) { appendContainerLE16(UInt16(v & 0xFFFF)); appendContainerLE16(UInt16(v >> 16)) }
    mutating func appendContainerLE64(_ v: UInt64) { appendContainerLE32(UInt32(v & 0xFFFF_FFFF)); appendContainerLE32(UInt32(v >> 32)) }
    mutating func appendContainerASCII(_ s: String) { append(contentsOf: s.utf8) }
}
