#if canImport(Glibc)
    import Glibc
#endif

/// The sample encodings the WAV reader and writer handle: 16-bit PCM (format tag 1) and 32-bit IEEE
/// float (format tag 3), plain or wrapped in WAVE_FORMAT_EXTENSIBLE.
public enum WAVSampleFormat: Sendable, Hashable {
    /// Signed 16-bit little-endian integers.
    case int16
    /// 32-bit IEEE float, nominal range -1...1.
    case float32

    /// Bytes per sample of one channel.
    public var bytesPerSample: Int { self == .int16 ? 2 : 4 }
}

/// Sample conversions shared by the WAV reader and writer. Float to Int16 scales by 32768, rounds
/// and clamps, so Int16 -> Float -> Int16 is exact.
package enum WAVConvert {
    @inline(__always) package static func toFloat(_ v: Int16) -> Float { Float(v) * (1.0 / 32768.0) }
    @inline(__always) package static func toInt16(_ v: Float) -> Int16 {
        let s = (v * 32768).rounded()
        if !(s > -32768) { return s.isNaN ? 0 : -32768 }
        if s >= 32767 { return 32767 }
        return Int16(s)
    }
}

/// Reads a RIFF/WAVE file (also RF64) as interleaved samples into caller buffers, streaming.
/// Skips unknown chunks (LIST, bext, ...) with their odd-size padding; tolerates the "unknown size"
/// data chunk (0xFFFFFFFF) that streaming writers leave. Accepts 1-2 channels of 16-bit PCM or 32-bit
/// float, plain or WAVE_FORMAT_EXTENSIBLE, at any rate; rejects the rest with a clear error.
/// Format: Microsoft "Multimedia Programming Interface and Data Specifications 1.0", WAVEFORMATEXTENSIBLE.
/// Thread rule: one thread at a time; it may be handed to another thread between calls.
/// Cost: `read` copies from the page cache; converting between
/// Int16 and Float goes through a 16 KiB scratch buffer.
/// Not `Sendable`: it has one owner; move it to another thread or task with `sending`.
public final class WAVReader {
    /// The file being read, as given.
    public let path: String
    /// Sample frames per second.
    public let sampleRate: Int
    /// 1 or 2.
    public let channelCount: Int
    /// How samples are stored in the file (`read` converts to what the caller asks for).
    public let sampleFormat: WAVSampleFormat
    /// Sample frames in the data chunk, nil when the writer did not know (streaming WAV).
    public let frameCount: Int64?
    /// Sample frames read so far.
    public private(set) var framesRead: Int64 = 0

    private let file: ContainerFileReader
    private let blockAlign: Int
    /// Data bytes left to read, nil when reading to end of file.
    private var dataRemaining: Int64?
    private let dataSize: Int64?
    private var scratch: UnsafeMutableRawPointer
    private let scratchBytes = 1 << 14

    /// Largest sample rate accepted; beyond it the header is treated as corrupt.
    public static let maximumSampleRate = 4_000_000

    private static let extensibleGUIDTail: [UInt8] =
        [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71]

    /// Opens `path` and parses chunks up to the start of the samples.
    public init(path: String) throws(ContainerError) {
        self.path = path
        file = try ContainerFileReader(path: path)
        let riff = try file.readBytes(12)
        if riff.isEmpty { throw ContainerError(.truncated, path: path, "file is empty (no RIFF header)") }
        let magic = String(decoding: riff.prefix(4), as: UTF8.self)
        guard magic == "RIFF" || magic == "RF64" else {
            throw ContainerError(.badMagic, path: path, "not a WAV file (does not start with RIFF)")
        }
        guard riff.count == 12 else { throw ContainerError(.truncated, path: path, "RIFF header is truncated") }
        guard riff[8...11].elementsEqual("WAVE".utf8) else {
            throw ContainerError(.badMagic, path: path, "not a WAV file (RIFF form type is not WAVE)")
        }
        let riffSize = riff.span.bytes.u32(4, .little)
        var format: (tag: UInt16, channels: Int, rate: Int, align: Int, bits: Int)?
        var ds64Data: Int64?
        while true {
            let chunkStart = file.offset
            let head = try file.readBytes(8)
            if head.count < 8 {
                if format == nil { throw ContainerError(.truncated, path: path, "file ends before the fmt chunk") }
                throw ContainerError(.truncated, path: path, "file ends before the data chunk")
            }
            let id = String(
                decoding: head.prefix(4).map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") },
                as: UTF8.self)
            let size = Int64(head.span.bytes.u32(4, .little))
            switch id {
            case "ds64" where magic == "RF64", "fmt ":
                guard size >= (id == "ds64" ? 24 : 16), size <= 4096 else {
                    throw ContainerError(.malformed, path: path, "\(id.trimmingSpaces) chunk has an invalid size \(size)")
                }
                let body = try file.readBytes(Int(size))
                guard body.count == Int(size) else {
                    throw ContainerError(.truncated, path: path, "\(id.trimmingSpaces) chunk is truncated")
                }
                if size & 1 == 1 { _ = try file.skip(1) }
                if id == "ds64" { ds64Data = Int64(bitPattern: body.span.bytes.u64(8, .little)); continue }
                var tag = body.span.bytes.u16(0, .little)
                let channels = Int(body.span.bytes.u16(2, .little)), rate = Int(body.span.bytes.u32(4, .little))
                let align = Int(body.span.bytes.u16(12, .little)), bits = Int(body.span.bytes.u16(14, .little))
                if tag == 0xFFFE {
                    guard body.count >= 40, body.span.bytes.u16(16, .little) >= 22 else {
                        throw ContainerError(.malformed, path: path, "WAVE_FORMAT_EXTENSIBLE fmt chunk is too short")
                    }
                    guard body[26..<40].elementsEqual(Self.extensibleGUIDTail) else {
                        throw ContainerError(.unsupported, path: path, "WAVE_FORMAT_EXTENSIBLE with an unknown sub-format GUID")
                    }
                    tag = body.span.bytes.u16(24, .little)
                }
                format = (tag, channels, rate, align, bits)
            case "data":
                guard let f = format else {
                    throw ContainerError(.malformed, path: path, "data chunk comes before the fmt chunk")
                }
                let kind: WAVSampleFormat
                switch (f.tag, f.bits) {
                case (1, 16): kind = .int16
                case (3, 32): kind = .float32
                case (1, _):
                    throw ContainerError(
                        .unsupported, path: path,
                        "unsupported sample format: \(f.bits)-bit PCM (only 16-bit PCM and 32-bit float)")
                case (3, _):
                    throw ContainerError(
                        .unsupported, path: path,
                        "unsupported sample format: \(f.bits)-bit float (only 16-bit PCM and 32-bit float)")
                default:
                    let hex = String(f.tag, radix: 16, uppercase: true)
                    throw ContainerError(
                        .unsupported, path: path,
                        "unsupported WAV format tag 0x\(String(repeating: "0", count: max(0, 4 - hex.count)))\(hex) (only PCM and IEEE float)"
                    )
                }
                guard f.channels >= 1 else { throw ContainerError(.malformed, path: path, "fmt chunk declares 0 channels") }
                guard f.channels <= 2 else {
                    throw ContainerError(
                        .unsupported, path: path, "\(f.channels) channels are not supported (only mono and stereo)")
                }
                guard f.rate >= 1 else { throw ContainerError(.malformed, path: path, "fmt chunk declares a sample rate of 0") }
                guard f.rate <= Self.maximumSampleRate else {
                    throw ContainerError(
                        .tooLarge, path: path, "sample rate \(f.rate) Hz is absurd (limit \(Self.maximumSampleRate))")
                }
                guard f.align == f.channels * kind.bytesPerSample else {
                    throw ContainerError(
                        .malformed, path: path,
                        "fmt chunk block align \(f.align) does not match \(f.channels) channels of \(f.bits) bits")
                }
                sampleRate = f.rate; channelCount = f.channels; sampleFormat = kind; blockAlign = f.align
                var declared: Int64? = size
                if magic == "RF64" && size == 0xFFFF_FFFF {
                    declared = ds64Data
                } else if size == 0xFFFF_FFFF {
                    declared = nil
                } else if size == 0 && (riffSize == 0 || riffSize == 0xFFFF_FFFF) {
                    declared = nil
                }
                if let d = declared, d < 0 { declared = nil }
                dataSize = declared
                dataRemaining = declared
                frameCount = declared.map { $0 / Int64(f.align) }
                scratch = UnsafeMutableRawPointer.allocate(byteCount: scratchBytes, alignment: 16)
                return
            default:
                let skip = size + (size & 1)
                let skipped = try file.skip(skip)
                if skipped < size {
                    throw ContainerError(
                        .truncated, path: path,
                        "chunk '\(id)' at byte \(chunkStart) is truncated (declares \(size) bytes, \(skipped) present)")
                }
            }
        }
    }

    deinit { scratch.deallocate() }

    /// Duration in seconds, when the frame count is known.
    public var duration: Double? { frameCount.map { Double($0) / Double(sampleRate) } }

    /// Reads raw sample bytes, at most `maxFrames` whole frames. Returns whole frames read.
    private func readFrames(into dst: UnsafeMutableRawPointer, maxFrames: Int) throws(ContainerError) -> Int {
        var want = maxFrames * blockAlign
        if let left = dataRemaining { want = Int(min(Int64(want), left - left % Int64(blockAlign))) }
        if want <= 0 {
            if let left = dataRemaining, left > 0, left < blockAlign {
                // A partial sample frame at the end of a declared-size chunk.
                let got = try file.read(into: scratch, count: Int(left))
                dataRemaining = 0
                if got < Int(left) { throw truncated() }
            }
            return 0
        }
        let got = try file.read(into: dst, count: want)
        if dataRemaining != nil {
            dataRemaining! -= Int64(got)
            if got < want { throw truncated() }
        }
        let frames = got / blockAlign
        framesRead += Int64(frames)
        return frames
    }

    private func truncated() -> ContainerError {
        let size = dataSize ?? 0
        let got = size - (dataRemaining ?? 0)
        return ContainerError(.truncated, path: path, "data chunk is truncated (got \(got) of \(size) bytes)")
    }

    /// Reads up to `buffer.count / channelCount` interleaved sample frames as Int16 (float files are
    /// scaled by 32768, rounded and clamped). Returns the frames read; 0 at the end of the data.
    fileprivate func readSamples(into buffer: UnsafeMutableBufferPointer<Int16>) throws(ContainerError) -> Int {
        let maxFrames = buffer.count / channelCount
        guard maxFrames > 0, let base = buffer.baseAddress else { return 0 }
        if sampleFormat == .int16 {
            let n = try readFrames(into: UnsafeMutableRawPointer(base), maxFrames: maxFrames)
            #if _endian(big)
                for i in 0..<(n * channelCount) { base[i] = Int16(littleEndian: base[i]) }
            #endif
            return n
        }
        return try readConverting(from: UInt32.self, into: base, maxFrames: maxFrames) {
            WAVConvert.toInt16(Float(bitPattern: UInt32(littleEndian: $0)))
        }
    }

    /// Reads up to `buffer.count / channelCount` interleaved sample frames as Float (16-bit files
    /// are divided by 32768). Returns the frames read; 0 at the end of the data.
    fileprivate func readSamples(into buffer: UnsafeMutableBufferPointer<Float>) throws(ContainerError) -> Int {
        let maxFrames = buffer.count / channelCount
        guard maxFrames > 0, let base = buffer.baseAddress else { return 0 }
        if sampleFormat == .float32 {
            let n = try readFrames(into: UnsafeMutableRawPointer(base), maxFrames: maxFrames)
            #if _endian(big)
                let raw = UnsafeMutableRawPointer(base).assumingMemoryBound(to: UInt32.self)
                for i in 0..<(n * channelCount) { base[i] = Float(bitPattern: UInt32(littleEndian: raw[i])) }
            #endif
            return n
        }
        return try readConverting(from: Int16.self, into: base, maxFrames: maxFrames) {
            WAVConvert.toFloat(Int16(littleEndian: $0))
        }
    }

    /// Reads up to `maxFrames` frames of the file's sample type `Raw` (the one the caller did not
    /// ask for) through the scratch buffer, a chunk at a time, writing `convert` of each
    /// little-endian sample as read to `base`. Returns the frames read; 0 at the end of the data.
    private func readConverting<Raw, Sample>(
        from _: Raw.Type, into base: UnsafeMutablePointer<Sample>, maxFrames: Int,
        _ convert: (Raw) -> Sample
    ) throws(ContainerError) -> Int {
        var done = 0
        let chunk = scratchBytes / blockAlign
        while done < maxFrames {
            let n = try readFrames(into: scratch, maxFrames: min(chunk, maxFrames - done))
            if n == 0 { break }
            let src = scratch.assumingMemoryBound(to: Raw.self)
            let dst = base + done * channelCount
            for i in 0..<(n * channelCount) { dst[i] = convert(src[i]) }
            done += n
        }
        return done
    }
}

/// Writes a RIFF/WAVE file of 16-bit PCM or 32-bit float (with a `fact` chunk), 1-2 channels, any
/// rate, atomically: sizes are fixed up and the file renamed into place by `finish()`; `abort()` or
/// deinit without `finish()` leaves nothing behind.
/// Thread rule: one thread at a time; it may be handed to another thread between calls.
/// Cost: buffered writes; converting sample types goes through a
/// 16 KiB scratch buffer.
/// Not `Sendable`: it has one owner; move it to another thread or task with `sending`.
public final class WAVWriter {
    /// The destination path.
    public let path: String
    /// Sample frames per second of the file.
    public let sampleRate: Int
    /// Channels per sample frame (1 or 2).
    public let channelCount: Int
    /// The format stored in the file.
    public let sampleFormat: WAVSampleFormat
    /// Sample frames written so far.
    public private(set) var framesWritten: Int64 = 0

    private let file: ContainerFileWriter
    private let dataSizeOffset: Int64
    private let factOffset: Int64?
    private var scratch: UnsafeMutableRawPointer
    private let scratchBytes = 1 << 14

    /// Creates the (temporary) output and writes a header with placeholder sizes. Traps on a channel
    /// count outside 1...2 or a non-positive rate (programmer errors).
    public init(path: String, sampleRate: Int, channelCount: Int, format: WAVSampleFormat) throws(ContainerError) {
        precondition((1...2).contains(channelCount), "WAVWriter: 1 or 2 channels")
        precondition(sampleRate > 0 && sampleRate <= WAVReader.maximumSampleRate, "WAVWriter: bad sample rate")
        self.path = path; self.sampleRate = sampleRate; self.channelCount = channelCount; sampleFormat = format
        file = try ContainerFileWriter(path: path)
        let align = channelCount * format.bytesPerSample
        var h: [UInt8] = []
        h.append(contentsOf: "RIFF".utf8); h.appendU32(0, .little); h.append(contentsOf: "WAVE".utf8)
        h.append(contentsOf: "fmt ".utf8); h.appendU32(format == .int16 ? 16 : 18, .little)
        h.appendU16(format == .int16 ? 1 : 3, .little)
        h.appendU16(UInt16(channelCount), .little); h.appendU32(UInt32(sampleRate), .little)
        h.appendU32(UInt32(sampleRate * align), .little); h.appendU16(UInt16(align), .little)
        h.appendU16(UInt16(format.bytesPerSample * 8), .little)
        if format == .float32 {
            h.appendU16(0, .little)  // cbSize
            h.append(contentsOf: "fact".utf8); h.appendU32(4, .little)
            factOffset = Int64(h.count)
            h.appendU32(0, .little)
        } else {
            factOffset = nil
        }
        h.append(contentsOf: "data".utf8)
        dataSizeOffset = Int64(h.count)
        h.appendU32(0, .little)
        try file.write(h)
        scratch = UnsafeMutableRawPointer.allocate(byteCount: scratchBytes, alignment: 16)
    }

    deinit { scratch.deallocate() }

    private func checkLimit(adding frames: Int) throws(ContainerError) {
        let bytes = file.offset + Int64(frames * channelCount * sampleFormat.bytesPerSample)
        if bytes > 0xFFFF_FFFF - 8 {
            throw ContainerError(.limitExceeded, path: path, "output exceeds the 4 GiB size limit of WAV files")
        }
    }

    /// Appends interleaved Int16 samples (`count` a multiple of the channel count).
    fileprivate func writeSamples(_ samples: UnsafeBufferPointer<Int16>) throws(ContainerError) {
        precondition(samples.count % channelCount == 0, "WAVWriter.write: partial sample frame")
        guard let base = samples.baseAddress, samples.count > 0 else { return }
        try checkLimit(adding: samples.count / channelCount)
        if sampleFormat == .int16 {
            #if _endian(big)
                for s in samples { var le = s.littleEndian; try file.write(&le, count: 2) }
            #else
                try file.write(base, count: samples.count * 2)
            #endif
        } else {
            let per = scratchBytes / 4
            var i = 0
            let dst = scratch.assumingMemoryBound(to: UInt32.self)
            while i < samples.count {
                let n = min(per, samples.count - i)
                for k in 0..<n { dst[k] = WAVConvert.toFloat(base[i + k]).bitPattern.littleEndian }
                try file.write(scratch, count: n * 4)
                i += n
            }
        }
        framesWritten += Int64(samples.count / channelCount)
    }

    /// Appends interleaved Float samples (`count` a multiple of the channel count).
    fileprivate func writeSamples(_ samples: UnsafeBufferPointer<Float>) throws(ContainerError) {
        precondition(samples.count % channelCount == 0, "WAVWriter.write: partial sample frame")
        guard let base = samples.baseAddress, samples.count > 0 else { return }
        try checkLimit(adding: samples.count / channelCount)
        if sampleFormat == .float32 {
            #if _endian(big)
                for s in samples { var le = s.bitPattern.littleEndian; try file.write(&le, count: 4) }
            #else
                try file.write(base, count: samples.count * 4)
            #endif
        } else {
            let per = scratchBytes / 2
            var i = 0
            let dst = scratch.assumingMemoryBound(to: Int16.self)
            while i < samples.count {
                let n = min(per, samples.count - i)
                for k in 0..<n { dst[k] = WAVConvert.toInt16(base[i + k]).littleEndian }
                try file.write(scratch, count: n * 2)
                i += n
            }
        }
        framesWritten += Int64(samples.count / channelCount)
    }

    /// Array conveniences (not for hot paths: they are as cheap, but tie callers to arrays).
    public func write(_ samples: [Int16]) throws(ContainerError) {
        try write(samples.span)
    }
    /// Array convenience for `write(_:)` of Float samples.
    public func write(_ samples: [Float]) throws(ContainerError) {
        try write(samples.span)
    }

    /// Fixes up the RIFF, data (and fact) sizes, then fsyncs and renames the file into place.
    public func finish() throws(ContainerError) {
        let dataBytes = framesWritten * Int64(channelCount * sampleFormat.bytesPerSample)
        if dataBytes & 1 == 1 { try file.write([0]) }
        let total = file.offset
        var v: [UInt8] = []
        v.appendU32(UInt32(total - 8), .little)
        try file.patch(v, at: 4)
        v.removeAll(); v.appendU32(UInt32(dataBytes), .little)
        try file.patch(v, at: dataSizeOffset)
        if let fact = factOffset {
            v.removeAll(); v.appendU32(UInt32(truncatingIfNeeded: framesWritten), .little)
            try file.patch(v, at: fact)
        }
        try file.finish()
    }

    /// Discards the output; nothing is left on disk.
    public func abort() { file.abort() }
}

extension String {
    fileprivate var trimmingSpaces: String {
        var s = self
        while s.last == " " { s.removeLast() }
        return s
    }
}

// MARK: Spans

extension WAVReader {
    /// Reads up to `buffer.count / channelCount` interleaved sample frames as Int16 into the front
    /// of `buffer` (float files are scaled by 32768, rounded and clamped). Returns the frames read;
    /// 0 at the end of the data.
    public func read(into buffer: inout MutableSpan<Int16>) throws(ContainerError) -> Int {
        try buffer.withUnsafeMutableBufferPointer { (b) throws(ContainerError) in try readSamples(into: b) }
    }

    /// Reads up to `buffer.count / channelCount` interleaved sample frames as Float into the front
    /// of `buffer` (16-bit files are divided by 32768). Returns the frames read; 0 at the end.
    public func read(into buffer: inout MutableSpan<Float>) throws(ContainerError) -> Int {
        try buffer.withUnsafeMutableBufferPointer { (b) throws(ContainerError) in try readSamples(into: b) }
    }
}

extension WAVWriter {
    /// Appends interleaved Int16 samples (`count` a multiple of the channel count; traps otherwise).
    public func write(_ samples: Span<Int16>) throws(ContainerError) {
        try samples.withUnsafeBufferPointer { (s) throws(ContainerError) in try writeSamples(s) }
    }

    /// Appends interleaved Float samples (`count` a multiple of the channel count; traps otherwise).
    public func write(_ samples: Span<Float>) throws(ContainerError) {
        try samples.withUnsafeBufferPointer { (s) throws(ContainerError) in try writeSamples(s) }
    }
}
