#if canImport(Glibc)
    import Glibc
#endif

/// The codecs an IVF file can carry here, by their fourcc.
public enum IVFCodec: String, Sendable, CaseIterable {
    case vp8 = "VP80"
    case vp9 = "VP90"
}

/// The 32-byte IVF file header (libvpx `ivfenc.c`): "DKIF", version 0, header size 32, fourcc,
/// width, height, time base denominator ("rate"), numerator ("scale"), frame count.
/// Thread rule: a value type. Cost: none.
public struct IVFHeader: Hashable, Sendable {
    /// The codec fourcc of the stream: VP80 or VP90.
    public var codec: IVFCodec
    /// Frame width in pixels.
    public var width: Int
    /// Frame height in pixels.
    public var height: Int
    /// Seconds per pts unit: `1/30` for a 30 fps stream counted in frames, `1/90000` for RTP time.
    public var timeBase: ContainerRational
    /// The frame count field as stored (libvpx writes the number of frames; ffmpeg stores a
    /// duration there). Readers must not trust it: count frames instead.
    public var declaredFrameCount: UInt32

    /// A header with these fields; `bytes` serializes it.
    public init(codec: IVFCodec, width: Int, height: Int, timeBase: ContainerRational, declaredFrameCount: UInt32 = 0) {
        self.codec = codec; self.width = width; self.height = height
        self.timeBase = timeBase; self.declaredFrameCount = declaredFrameCount
    }

    /// The header's 32 bytes.
    public var bytes: [UInt8] {
        var h: [UInt8] = []
        h.reserveCapacity(32)
        h.append(contentsOf: "DKIF".utf8); h.appendU16(0, .little); h.appendU16(32, .little);
        h.append(contentsOf: codec.rawValue.utf8)
        h.appendU16(UInt16(width), .little); h.appendU16(UInt16(height), .little)
        h.appendU32(UInt32(timeBase.denominator), .little); h.appendU32(UInt32(timeBase.numerator), .little)
        h.appendU32(declaredFrameCount, .little); h.appendU32(0, .little)
        return h
    }
}

/// One IVF frame's 12-byte header: payload size and presentation time in time-base units.
public struct IVFFrameHeader: Hashable, Sendable {
    /// Payload bytes that follow.
    public var size: Int
    /// Presentation timestamp in `IVFHeader.timeBase` units.
    public var pts: Int64
    /// A frame header for `size` payload bytes at `pts`.
    public init(size: Int, pts: Int64) { self.size = size; self.pts = pts }
}

/// Reads an IVF file (VP8/VP9 frames) frame by frame into caller buffers, streaming.
/// Thread rule: one thread at a time; it may be handed to another thread between calls.
/// Cost: one copy of each payload from the page cache.
/// Not `Sendable`: it has one owner; move it to another thread or task with `sending`.
public final class IVFReader {
    /// The file being read, as given.
    public let path: String
    /// The file header, read when the reader opened the file.
    public let header: IVFHeader
    /// Frames read so far; also the index of the next frame.
    public private(set) var framesRead = 0
    /// Largest payload accepted for one frame: 4 bytes per pixel (far above any compressed frame)
    /// and at least 1 MiB. Larger sizes are treated as corruption and rejected before allocating.
    public let maximumFrameSize: Int

    private let file: ContainerFileReader
    private var pending: IVFFrameHeader?

    /// Opens `path` and parses its 32-byte header.
    public init(path: String) throws(ContainerError) {
        self.path = path
        file = try ContainerFileReader(path: path)
        let h = try file.readBytes(32)
        if h.isEmpty { throw ContainerError(.truncated, path: path, "file is empty (no IVF header)") }
        guard h.count >= 4, h[0..<4].elementsEqual("DKIF".utf8) else {
            throw ContainerError(.badMagic, path: path, "not an IVF file (does not start with DKIF)")
        }
        guard h.count == 32 else {
            throw ContainerError(.truncated, path: path, "IVF header is truncated (got \(h.count) of 32 bytes)")
        }
        let version = h.span.bytes.u16(4, .little), headerSize = Int(h.span.bytes.u16(6, .little))
        guard version == 0 else { throw ContainerError(.unsupported, path: path, "unsupported IVF version \(version)") }
        guard headerSize >= 32 else {
            throw ContainerError(.malformed, path: path, "IVF header size \(headerSize) is smaller than 32")
        }
        let fourcc = String(decoding: h[8..<12].map { $0 >= 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
        guard let codec = IVFCodec(rawValue: fourcc) else {
            throw ContainerError(.unsupported, path: path, "unsupported codec fourcc '\(fourcc)' (only VP80 and VP90)")
        }
        let w = Int(h.span.bytes.u16(12, .little)), hgt = Int(h.span.bytes.u16(14, .little))
        guard w > 0, hgt > 0 else {
            throw ContainerError(.malformed, path: path, "IVF header has an empty frame size \(w)x\(hgt)")
        }
        guard w <= Y4MHeader.maximumDimension, hgt <= Y4MHeader.maximumDimension else {
            throw ContainerError(
                .tooLarge, path: path,
                "frame size \(w)x\(hgt) is too large (limit \(Y4MHeader.maximumDimension)x\(Y4MHeader.maximumDimension))")
        }
        let rate = Int(h.span.bytes.u32(16, .little)), scale = Int(h.span.bytes.u32(20, .little))
        guard rate > 0, scale > 0 else {
            throw ContainerError(.malformed, path: path, "IVF header has an invalid time base \(scale)/\(rate)")
        }
        header = IVFHeader(
            codec: codec, width: w, height: hgt, timeBase: ContainerRational(scale, rate),
            declaredFrameCount: h.span.bytes.u32(24, .little))
        maximumFrameSize = max(1 << 20, w * hgt * 4)
        if headerSize > 32, try file.skip(Int64(headerSize - 32)) < Int64(headerSize - 32) {
            throw ContainerError(.truncated, path: path, "IVF header is truncated (declares \(headerSize) bytes)")
        }
    }

    /// Reads the next frame's 12-byte header; nil at the clean end of the file. Call
    /// `readPayload(into:)` next (or `skipPayload()`).
    public func nextFrameHeader() throws(ContainerError) -> IVFFrameHeader? {
        precondition(pending == nil, "IVFReader: previous payload not read")
        let index = framesRead
        var raw = (UInt64(0), UInt32(0))
        let got = try withUnsafeMutableBytes(of: &raw) { b in
            Result { () throws(ContainerError) -> Int in try file.read(into: b.baseAddress!, count: 12) }
        }.get()
        if got == 0 { return nil }
        if got < 12 {
            throw ContainerError(.truncated, path: path, "frame \(index) header is truncated (got \(got) of 12 bytes)")
        }
        let (size, pts) = withUnsafeBytes(of: &raw) {
            let b = unsafe RawSpan(_unsafeBytes: $0)
            return (Int(b.u32(0, .little)), Int64(bitPattern: b.u64(4, .little)))
        }
        if size > maximumFrameSize {
            throw ContainerError(
                .tooLarge, path: path,
                "frame \(index) declares \(size) bytes (limit \(maximumFrameSize) for \(header.width)x\(header.height))")
        }
        if let left = file.remaining, Int64(size) > left {
            throw ContainerError(.truncated, path: path, "frame \(index) is truncated (got \(left) of \(size) bytes)")
        }
        let h = IVFFrameHeader(size: size, pts: pts)
        pending = h
        return h
    }

    /// Reads the payload announced by `nextFrameHeader()` into `buffer` (at least that size): the
    /// file read under `readPayload(into:)` and `readFrame(into:)`.
    fileprivate func readPayload(raw buffer: UnsafeMutableRawBufferPointer) throws(ContainerError) {
        guard let h = pending else { preconditionFailure("IVFReader.readPayload without nextFrameHeader") }
        precondition(buffer.count >= h.size, "IVFReader.readPayload: buffer too small")
        pending = nil
        if h.size == 0 { framesRead += 1; return }
        let got = try file.read(into: buffer.baseAddress!, count: h.size)
        if got < h.size {
            throw ContainerError(.truncated, path: path, "frame \(framesRead) is truncated (got \(got) of \(h.size) bytes)")
        }
        framesRead += 1
    }

    /// Skips the payload announced by `nextFrameHeader()`.
    public func skipPayload() throws(ContainerError) {
        guard let h = pending else { preconditionFailure("IVFReader.skipPayload without nextFrameHeader") }
        pending = nil
        let got = try file.skip(Int64(h.size))
        if got < Int64(h.size) {
            throw ContainerError(.truncated, path: path, "frame \(framesRead) is truncated (got \(got) of \(h.size) bytes)")
        }
        framesRead += 1
    }

    /// Reads the next frame into `buffer`, replacing its contents (its capacity is reused, so a
    /// steady stream does not allocate). Returns the frame header, nil at the end of the file.
    public func readFrame(into buffer: inout [UInt8]) throws(ContainerError) -> IVFFrameHeader? {
        guard let h = try nextFrameHeader() else { return nil }
        if buffer.count != h.size {
            if buffer.count > h.size {
                buffer.removeLast(buffer.count - h.size)
            } else {
                buffer.append(contentsOf: repeatElement(0, count: h.size - buffer.count))
            }
        }
        try buffer.withUnsafeMutableBytes { b in
            Result { () throws(ContainerError) in try readPayload(raw: b) }
        }.get()
        return h
    }
}

/// Writes an IVF file atomically; `finish()` stores the frame count in the header, fsyncs and
/// renames into place; `abort()` or deinit without `finish()` leaves nothing behind.
/// Thread rule: one thread at a time; it may be handed to another thread between calls.
/// Cost: one buffered copy of each payload.
/// Not `Sendable`: it has one owner; move it to another thread or task with `sending`.
public final class IVFWriter {
    /// The destination path, as given.
    public let path: String
    /// The header written at the top of the file.
    public let header: IVFHeader
    /// Frames written so far.
    public private(set) var framesWritten = 0
    private let file: ContainerFileWriter

    /// Creates the (temporary) output and writes the header. Traps on a size outside 1...16384 or a
    /// non-positive time base (programmer errors).
    public init(
        path: String, codec: IVFCodec, width: Int, height: Int,
        timeBase: ContainerRational
    ) throws(ContainerError) {
        precondition(
            width > 0 && height > 0 && width <= Y4MHeader.maximumDimension
                && height <= Y4MHeader.maximumDimension, "IVFWriter: bad size")
        precondition(
            timeBase.numerator > 0 && timeBase.denominator > 0
                && timeBase.numerator <= Int(UInt32.max) && timeBase.denominator <= Int(UInt32.max),
            "IVFWriter: bad time base")
        self.path = path
        header = IVFHeader(codec: codec, width: width, height: height, timeBase: timeBase)
        file = try ContainerFileWriter(path: path)
        try file.write(header.bytes)
    }

    /// Appends one frame with its presentation time in time-base units (the file writes under
    /// `write(_:pts:)`).
    fileprivate func write(raw payload: UnsafeRawBufferPointer, pts: Int64) throws(ContainerError) {
        precondition(payload.count <= Int(UInt32.max), "IVFWriter: frame larger than 4 GiB")
        var h: (UInt32, UInt64) = (UInt32(payload.count).littleEndian, UInt64(bitPattern: pts).littleEndian)
        try withUnsafeBytes(of: &h) { b in
            Result { () throws(ContainerError) in
                try file.write(b.baseAddress!, count: 4)
                try file.write(b.baseAddress! + 8, count: 8)
            }
        }.get()
        if payload.count > 0 { try file.write(payload.baseAddress!, count: payload.count) }
        framesWritten += 1
    }

    /// Array convenience for `write(_:pts:)`.
    public func write(_ payload: [UInt8], pts: Int64) throws(ContainerError) {
        try write(payload.span.bytes, pts: pts)
    }

    /// Stores the frame count in the header, fsyncs and renames the file into place.
    public func finish() throws(ContainerError) {
        var v: [UInt8] = []
        v.appendU32(UInt32(truncatingIfNeeded: framesWritten), .little)
        try file.patch(v, at: 24)
        try file.finish()
    }

    /// Discards the output; nothing is left on disk.
    public func abort() { file.abort() }
}

// MARK: Spans

extension IVFReader {
    /// Appends the payload announced by `nextFrameHeader()` to `output`, which must have that much
    /// free capacity (traps otherwise). Throws `truncated` when the file ends inside the frame.
    public func readPayload(into output: inout OutputRawSpan) throws(ContainerError) {
        let size = pending.map { Int($0.size) } ?? 0
        try output.appendWriting { (free) throws(ContainerError) in
            try readPayload(raw: free)
            return size
        }
    }
}

extension IVFWriter {
    /// Appends one frame with its presentation time in time-base units.
    public func write(_ payload: RawSpan, pts: Int64) throws(ContainerError) {
        try payload.withUnsafeBytes { (p) throws(ContainerError) in try write(raw: p, pts: pts) }
    }
}
