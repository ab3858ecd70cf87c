import MediaCore

#if canImport(Glibc)
    import Glibc
#endif

/// The container readers read files (they stream through `ContainerFileReader`); each input is
/// written to one per-process file in /dev/shm (tmpfs, no disk I/O) that the reader then opens, so
/// the readers run unchanged.
enum FuzzFile {
    static let path: String = {
        let dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"
        let p = "\(dir)/revue-fuzz-\(getpid())"
        atexit { unlink(FuzzFile.path) }
        return p
    }()

    /// Replaces the file's contents with `data` and returns its path.
    static func write(_ data: UnsafeRawBufferPointer) -> String {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        precondition(fd >= 0, "cannot create \(path): errno \(errno)")
        var at = 0
        while at < data.count {
            let n = Glibc.write(fd, data.baseAddress! + at, data.count - at)
            precondition(n > 0, "cannot write \(path): errno \(errno)")
            at += n
        }
        close(fd)
        return path
    }
}

extension FuzzEntries {
    /// Y4M frames are allocated only up to this many pixels: a tiny file may declare 16384x16384,
    /// and allocating that for every input would only measure the allocator.
    static let y4mPixelLimit = 1 << 20

    /// YUV4MPEG2 reader: header, then frames until the end or an error.
    @Sendable public static func y4m(_ data: UnsafeRawBufferPointer) {
        fuzzScratch.withLock { _ in y4mUnlocked(data) }
    }

    private static func y4mUnlocked(_ data: UnsafeRawBufferPointer) {
        guard let reader = try? Y4MReader(path: FuzzFile.write(data)) else { return }
        _ = reader.estimatedFrameCount
        guard reader.width * reader.height <= y4mPixelLimit else { return }
        let frame = reader.makeFrame()
        var frames = 0
        while frames < 1000, (try? reader.readFrame(into: frame)) == true { frames += 1 }
        fuzzRequire(frames == reader.framesRead, "Y4M framesRead \(reader.framesRead) != \(frames)")
    }

    /// WAV reader: header and chunks, then samples as Int16 and as Float until the end.
    @Sendable public static func wav(_ data: UnsafeRawBufferPointer) {
        fuzzScratch.withLock { _ in wavUnlocked(data) }
    }

    private static func wavUnlocked(_ data: UnsafeRawBufferPointer) {
        guard let reader = try? WAVReader(path: FuzzFile.write(data)) else { return }
        _ = reader.duration
        let ints = UnsafeMutableBufferPointer<Int16>.allocate(capacity: 1024 * reader.channelCount)
        let floats = UnsafeMutableBufferPointer<Float>.allocate(capacity: 1024 * reader.channelCount)
        defer { ints.deallocate(); floats.deallocate() }
        var total: Int64 = 0
        var failed = false
        for round in 0..<4096 {
            let n: Int?
            if round & 1 == 0 {
                var span = ints.mutableSpan
                n = try? reader.read(into: &span)
            } else {
                var span = floats.mutableSpan
                n = try? reader.read(into: &span)
            }
            guard let n else { failed = true; break }
            if n == 0 { break }
            fuzzRequire(n <= 1024, "WAV read returned \(n) frames for a 1024-frame buffer")
            total += Int64(n)
        }
        // A converting read that throws part way (truncated data) has counted the frames it
        // converted before the error; a clean read counts exactly what it returned.
        fuzzRequire(
            failed ? total <= reader.framesRead : total == reader.framesRead,
            "WAV framesRead \(reader.framesRead) != \(total) returned")
        if let count = reader.frameCount { fuzzRequire(total <= count, "WAV read \(total) frames of \(count)") }
    }

    /// IVF reader: header, then frames, alternating whole-frame reads and header-then-skip.
    @Sendable public static func ivf(_ data: UnsafeRawBufferPointer) {
        fuzzScratch.withLock { _ in ivfUnlocked(data) }
    }

    private static func ivfUnlocked(_ data: UnsafeRawBufferPointer) {
        guard let reader = try? IVFReader(path: FuzzFile.write(data)) else { return }
        var buffer: [UInt8] = []
        var round = 0
        while round < 4096 {
            round += 1
            if round & 1 == 0 {
                guard let h = try? reader.readFrame(into: &buffer) else { break }
                fuzzRequire(buffer.count == h.size, "IVF frame buffer \(buffer.count) != size \(h.size)")
            } else {
                guard let h = try? reader.nextFrameHeader() else { break }
                fuzzRequire(h.size <= data.count, "IVF frame of \(h.size) bytes in a \(data.count)-byte file")
                guard (try? reader.skipPayload()) != nil else { break }
            }
        }
    }

    /// Ogg Opus reader (RFC 7845, pages per RFC 3533), strict and lenient by the input's parity.
    @Sendable public static func oggOpus(_ data: UnsafeRawBufferPointer) {
        fuzzScratch.withLock { _ in oggOpusUnlocked(data) }
    }

    private static func oggOpusUnlocked(_ data: UnsafeRawBufferPointer) {
        guard let reader = try? OggOpusReader(path: FuzzFile.write(data), strict: data.count & 1 == 0) else { return }
        _ = reader.tags.value(for: "TITLE")
        var buffer: [UInt8] = []
        var packets = 0
        while packets < 100_000, let p = try? reader.readPacket(into: &buffer) {
            packets += 1
            fuzzRequire(buffer.count == p.byteCount, "Ogg Opus packet buffer \(buffer.count) != \(p.byteCount)")
            fuzzRequire(p.outputSampleCount >= 0 && p.outputSampleCount <= p.sampleCount, "Ogg Opus sample counts \(p)")
            if p.isLast { break }
        }
    }
}
