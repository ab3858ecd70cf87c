import MediaFrames

#if canImport(Glibc)
    import Glibc
#endif

/// The stream header of a YUV4MPEG2 (`.y4m`) file: `YUV4MPEG2 W640 H480 F30:1 Ip A1:1 C420jpeg`.
/// Only 4:2:0 chroma is handled (what the engine encodes). Format: the y4m spec in mjpegtools'
/// `yuv4mpeg.h` and ffmpeg's `yuv4mpegdec.c`.
/// Thread rule: a value type. Cost: none.
public struct Y4MHeader: Hashable, Sendable {
    /// The 4:2:0 chroma siting tags; other subsamplings (`C444`, `C422`, `Cmono`) are rejected.
    public enum Chroma: String, Sendable, CaseIterable {
        /// `C420jpeg`: chroma centred between luma samples (the default when there is no C tag).
        case c420jpeg = "420jpeg"
        /// `C420`: same layout; the tag MPEG-2 tools write.
        case c420 = "420"
        /// `C420paldv`: PAL DV siting.
        case c420paldv = "420paldv"
        /// `C420mpeg2`: MPEG-2 siting (chroma co-sited horizontally).
        case c420mpeg2 = "420mpeg2"
    }

    /// The `I` tag.
    public enum Interlacing: String, Sendable {
        case progressive = "p"
        case topFieldFirst = "t"
        case bottomFieldFirst = "b"
        case mixed = "m"
        case unknown = "?"
    }

    /// Largest width or height accepted from a file: anything larger is treated as corrupt.
    public static let maximumDimension = 16384

    /// `W`: luma width in pixels.
    public var width: Int
    /// `H`: luma height in pixels.
    public var height: Int
    /// `F` tag; 25/1 when the file has none (ffmpeg's default).
    public var frameRate: ContainerRational
    /// `I` tag: progressive or interlaced field order.
    public var interlacing: Interlacing
    /// `A` tag; 0/0 means unknown.
    public var pixelAspect: ContainerRational
    /// `C` tag: chroma subsampling and siting.
    public var chroma: Chroma

    /// A header; defaults are progressive, square pixels, `C420jpeg`.
    public init(
        width: Int, height: Int, frameRate: ContainerRational,
        interlacing: Interlacing = .progressive, pixelAspect: ContainerRational = ContainerRational(1, 1),
        chroma: Chroma = .c420jpeg
    ) {
        self.width = width; self.height = height; self.frameRate = frameRate
        self.interlacing = interlacing; self.pixelAspect = pixelAspect; self.chroma = chroma
    }

    /// Bytes of one frame's pixels: `w*h + 2 * ceil(w/2)*ceil(h/2)`.
    public var frameByteCount: Int {
        width * height + 2 * ((width + 1) / 2) * ((height + 1) / 2)
    }

    /// The header line, newline included.
    public var line: String {
        var s = "YUV4MPEG2 W\(width) H\(height) F\(frameRate.numerator):\(frameRate.denominator)"
        s += " I\(interlacing.rawValue) A\(pixelAspect.numerator):\(pixelAspect.denominator) C\(chroma.rawValue)\n"
        return s
    }

    /// Parses a header line (without its newline). `path` names the file in errors.
    static func parse(_ line: [UInt8], path: String) throws(ContainerError) -> Y4MHeader {
        let text = String(decoding: line, as: UTF8.self)
        let tokens = text.split(separator: " ", omittingEmptySubsequences: true)
        guard tokens.first == "YUV4MPEG2" else {
            throw ContainerError(.badMagic, path: path, "not a YUV4MPEG2 file (header does not start with \"YUV4MPEG2 \")")
        }
        var width: Int?, height: Int?
        var rate = ContainerRational(25, 1)
        var interlacing = Interlacing.progressive
        var aspect = ContainerRational(0, 0)
        var chroma = Chroma.c420jpeg
        func number(_ s: Substring, _ what: String) throws(ContainerError) -> Int {
            guard let v = Int(s), v >= 0 else {
                throw ContainerError(.malformed, path: path, "header has an invalid \(what) \"\(s)\"")
            }
            return v
        }
        func ratio(_ s: Substring, _ what: String) throws(ContainerError) -> ContainerRational {
            let parts = s.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, let n = Int(parts[0]), let d = Int(parts[1]), n >= 0, d >= 0 else {
                throw ContainerError(.malformed, path: path, "header has an invalid \(what) \"\(s)\" (expected N:D)")
            }
            return ContainerRational(n, d)
        }
        for token in tokens.dropFirst() {
            let value = token.dropFirst()
            switch token.first {
            case "W": width = try number(value, "width")
            case "H": height = try number(value, "height")
            case "F":
                rate = try ratio(value, "frame rate")
                if rate.numerator == 0 || rate.denominator == 0 {
                    throw ContainerError(.malformed, path: path, "header has an invalid frame rate \(value)")
                }
            case "A": aspect = try ratio(value, "pixel aspect ratio")
            case "I":
                guard let i = Interlacing(rawValue: String(value)) else {
                    throw ContainerError(.malformed, path: path, "header has an invalid interlacing tag I\(value)")
                }
                interlacing = i
            case "C":
                guard let c = Chroma(rawValue: String(value)) else {
                    throw ContainerError(
                        .unsupported, path: path,
                        "unsupported chroma format C\(value) (only 4:2:0: C420, C420jpeg, C420paldv, C420mpeg2)")
                }
                chroma = c
            default: break  // X extensions and unknown tags are ignored, as the spec says.
            }
        }
        guard let w = width else { throw ContainerError(.malformed, path: path, "header has no width (W tag)") }
        guard let h = height else { throw ContainerError(.malformed, path: path, "header has no height (H tag)") }
        guard w > 0, h > 0 else {
            throw ContainerError(.malformed, path: path, "header has an empty frame size \(w)x\(h)")
        }
        guard w <= maximumDimension, h <= maximumDimension else {
            throw ContainerError(
                .tooLarge, path: path,
                "frame size \(w)x\(h) is too large (limit \(maximumDimension)x\(maximumDimension))")
        }
        return Y4MHeader(
            width: w, height: h, frameRate: rate, interlacing: interlacing,
            pixelAspect: aspect, chroma: chroma)
    }
}

/// Reads a YUV4MPEG2 file frame by frame into caller-owned `VideoFrame`s, streaming (a frame at a
/// time, never the whole file).
/// Thread rule: one thread at a time; it may be handed to another thread between calls.
/// Cost: `readFrame` is a copy of the pixels from the page cache.
/// Not `Sendable`: it has one owner; move it to another thread or task with `sending`.
public final class Y4MReader {
    /// The file being read, as given.
    public let path: String
    /// The parsed stream header.
    public let header: Y4MHeader
    /// Frames read so far; also the index of the next frame.
    public private(set) var framesRead = 0
    private let file: ContainerFileReader
    private var line: [UInt8] = []
    private let headerByteCount: Int64

    /// Opens `path` and parses its header. Throws (naming the file) when it is missing, empty, not
    /// YUV4MPEG2, not 4:2:0, or declares an absurd size.
    public init(path: String) throws(ContainerError) {
        self.path = path
        file = try ContainerFileReader(path: path)
        line.reserveCapacity(256)
        switch try file.readLine(into: &line, limit: 4096) {
        case .endOfFile:
            throw ContainerError(.truncated, path: path, "file is empty (no YUV4MPEG2 header)")
        case .tooLong, .unterminated:
            if !line.starts(with: Array("YUV4MPEG2".utf8)) {
                throw ContainerError(.badMagic, path: path, "not a YUV4MPEG2 file (header does not start with \"YUV4MPEG2 \")")
            }
            throw ContainerError(.truncated, path: path, "header line is truncated or longer than 4096 bytes")
        case .line:
            break
        }
        header = try Y4MHeader.parse(line, path: path)
        headerByteCount = file.offset
    }

    private static let frameTag: [UInt8] = Array("FRAME".utf8)

    /// Width from the header.
    public var width: Int { header.width }
    /// Height from the header.
    public var height: Int { header.height }
    /// Frame rate from the header.
    public var frameRate: ContainerRational { header.frameRate }

    /// Number of frames the file holds when it is a regular file without per-frame parameters
    /// (the usual case); nil for pipes. For progress reports, not for validation.
    public var estimatedFrameCount: Int? {
        guard let size = file.fileSize else { return nil }
        return Int((size - headerByteCount) / Int64(header.frameByteCount + 6))
    }

    /// Allocates a frame of the stream's size, to pass to `readFrame(into:)`.
    public func makeFrame() -> VideoFrame { VideoFrame(width: width, height: height) }

    /// Reads the next frame into `frame` (which must have the stream's size) and sets its
    /// `timestampNs` from the frame index and rate. Returns false at the clean end of the file;
    /// throws for a missing `FRAME` marker or a truncated frame.
    public func readFrame(into frame: VideoFrame) throws(ContainerError) -> Bool {
        precondition(
            frame.width == width && frame.height == height,
            "Y4MReader.readFrame: frame is \(frame.width)x\(frame.height), stream is \(width)x\(height)")
        let index = framesRead
        switch try file.readLine(into: &line, limit: 1024) {
        case .endOfFile:
            return false
        case .tooLong:
            throw ContainerError(.malformed, path: path, "frame \(index) header is longer than 1024 bytes")
        case .unterminated:
            if line.starts(with: Self.frameTag) || Self.frameTag.starts(with: line) {
                throw ContainerError(.truncated, path: path, "frame \(index) is truncated (header without pixels)")
            }
            throw ContainerError(.malformed, path: path, "frame \(index) does not start with FRAME")
        case .line:
            guard line.count >= 5, line.starts(with: Self.frameTag),
                line.count == 5 || line[5] == UInt8(ascii: " ")
            else {
                throw ContainerError(
                    .malformed, path: path,
                    "frame \(index) does not start with FRAME (at byte \(file.offset - Int64(line.count) - 1))")
            }
        }
        var got = 0
        let total = header.frameByteCount
        func plane(_ dst: UnsafeMutablePointer<UInt8>, _ stride: Int, _ w: Int, _ h: Int) throws(ContainerError) -> Bool {
            if stride == w {
                let n = try file.read(into: dst, count: w * h)
                got += n
                return n == w * h
            }
            for row in 0..<h {
                let n = try file.read(into: dst + row * stride, count: w)
                got += n
                if n < w { return false }
            }
            return true
        }
        var complete = try plane(frame.y, frame.strideY, width, height)
        if complete { complete = try plane(frame.u, frame.strideUV, frame.chromaWidth, frame.chromaHeight) }
        if complete { complete = try plane(frame.v, frame.strideUV, frame.chromaWidth, frame.chromaHeight) }
        if !complete {
            throw ContainerError(.truncated, path: path, "frame \(index) is truncated (got \(got) of \(total) bytes)")
        }
        let rate = header.frameRate
        // 128-bit, saturating: a header may declare any Int rate such as F1:99999999999, whose
        // second frame's time overflows Int64 nanoseconds (found by fuzz-y4m).
        let ns = Int128(index) * 1_000_000_000 * Int128(rate.denominator) / Int128(rate.numerator)
        frame.timestampNs = ns > Int128(Int64.max) ? Int64.max : Int64(ns)
        frame.rotation = .rotation0
        framesRead += 1
        return true
    }
}

/// Writes a YUV4MPEG2 (4:2:0) file from I420 views, atomically: the file appears under its name
/// only after `finish()`; `abort()` or deinit without `finish()` leaves nothing behind.
/// Thread rule: one thread at a time; it may be handed to another thread between calls.
/// Cost: one buffered copy of each frame's pixels.
/// Not `Sendable`: it has one owner; move it to another thread or task with `sending`.
public final class Y4MWriter {
    /// The destination path.
    public let path: String
    /// The header written at the top of the file.
    public let header: Y4MHeader
    /// Frames written so far.
    public private(set) var framesWritten = 0
    private let file: ContainerFileWriter

    /// Creates the (temporary) output and writes the header. Traps on a size outside 1...16384 or a
    /// zero frame rate (programmer errors); throws when the file cannot be created.
    public init(path: String, header: Y4MHeader) throws(ContainerError) {
        precondition(
            header.width > 0 && header.height > 0 && header.width <= Y4MHeader.maximumDimension
                && header.height <= Y4MHeader.maximumDimension, "Y4MWriter: bad size")
        precondition(header.frameRate.numerator > 0 && header.frameRate.denominator > 0, "Y4MWriter: bad frame rate")
        self.path = path
        self.header = header
        file = try ContainerFileWriter(path: path)
        try file.write(Array(header.line.utf8))
    }

    /// Convenience: progressive 4:2:0 at `frameRate`, square pixels.
    public convenience init(
        path: String, width: Int, height: Int,
        frameRate: ContainerRational
    ) throws(ContainerError) {
        try self.init(path: path, header: Y4MHeader(width: width, height: height, frameRate: frameRate))
    }

    private static let frameMarker: [UInt8] = Array("FRAME\n".utf8)

    /// Appends one frame. A frame of another size throws (a decoded stream can change size
    /// mid-way, which Y4M cannot represent) and writes nothing.
    public func write(_ view: I420View) throws(ContainerError) {
        guard view.width == header.width && view.height == header.height else {
            throw ContainerError(
                .unsupported, path: path,
                "frame \(framesWritten) is \(view.width)x\(view.height) but the file is \(header.width)x\(header.height) (Y4M cannot change size)"
            )
        }
        try file.write(Self.frameMarker)
        func plane(_ src: UnsafePointer<UInt8>, _ stride: Int, _ w: Int, _ h: Int) throws(ContainerError) {
            if stride == w { try file.write(src, count: w * h); return }
            for row in 0..<h { try file.write(src + row * stride, count: w) }
        }
        try plane(view.y, view.strideY, view.width, view.height)
        try plane(view.u, view.strideU, view.chromaWidth, view.chromaHeight)
        try plane(view.v, view.strideV, view.chromaWidth, view.chromaHeight)
        framesWritten += 1
    }

    /// Flushes, fsyncs and renames the file into place.
    public func finish() throws(ContainerError) { try file.finish() }

    /// Discards the output; nothing is left on disk.
    public func abort() { file.abort() }
}
