import MediaBase

#if canImport(Glibc)
    import Glibc
#endif

/// A buffered, streaming reader over one file for the container readers: it never loads the whole
/// file, reads large blocks straight into the caller's memory, and turns every system error into a
/// `ContainerError` naming the file.
/// Thread rule: one thread at a time. Cost: one 64 KiB buffer; `read` of more than the buffer holds
/// goes straight from the kernel into the destination.
package final class ContainerFileReader {
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

/// The containers' output file: an `AtomicFileWriter` (temporary file, fsync, rename; nothing
/// half-written is ever left behind) whose failures are reported as `ContainerError`s naming the
/// file, like every other container error.
/// Thread rule: one thread at a time. Cost: the atomic writer's 64 KiB buffer.
package final class ContainerFileWriter {
    private let file: AtomicFileWriter
    /// The destination.
    package var path: String { file.path }
    /// The temporary file until `finish()`.
    package var temporaryPath: String { file.temporaryPath }
    /// Bytes written so far: the offset of the next byte.
    package var offset: Int64 { file.offset }
    /// True after `finish()` or `abort()`.
    package var isFinished: Bool { file.isFinished }

    package init(path: String) throws(ContainerError) {
        do { file = try AtomicFileWriter(path: path) } catch { throw Self.containerError(error) }
    }

    private static func containerError(_ error: AtomicFileError) -> ContainerError {
        error.code == EISDIR && error.step == "is not a file name"
            ? ContainerError(.io, path: error.path, error.step, errno: EISDIR)
            : .system(error.step, path: error.path, errno: error.code)
    }

    /// Appends `n` bytes.
    package func write(_ src: UnsafeRawPointer, count n: Int) throws(ContainerError) {
        do { try file.write(src, count: n) } catch { throw Self.containerError(error) }
    }

    /// Appends bytes.
    package func write(_ bytes: [UInt8]) throws(ContainerError) {
        do { try file.write(bytes) } catch { throw Self.containerError(error) }
    }

    /// Hands buffered bytes to the kernel.
    package func flush() throws(ContainerError) {
        do { try file.flush() } catch { throw Self.containerError(error) }
    }

    /// Overwrites bytes already written at `position` (size fields fixed up at the end).
    package func patch(_ bytes: [UInt8], at position: Int64) throws(ContainerError) {
        do { try file.patch(bytes, at: position) } catch { throw Self.containerError(error) }
    }

    /// Flushes, fsyncs and atomically renames the temporary file to `path`.
    package func finish() throws(ContainerError) {
        do { try file.finish() } catch { throw Self.containerError(error) }
    }

    /// Drops the output. Safe to call more than once.
    package func abort() { file.abort() }
}
