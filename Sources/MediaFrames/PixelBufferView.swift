/// A borrowed, validated description of a caller's raw video buffer: its `PixelFormat`, size and
/// up to three planes, each a span of bytes and a stride. It is what `BufferCapturer` receives and
/// `ColorConverter` reads. Make one with `withPacked`, `withI420`, `withNV12`, `withNV21` or
/// `withContiguous`, which lend it to a closure over your bytes: the view is valid during that
/// call only.
///
/// Every initialiser checks what can be checked: a positive size (at most 16384 on a side), each
/// plane present, each stride at least the row's bytes, each plane's byte count at least
/// `stride * (rows - 1) + rowBytes`. Bad values throw `ColorConversionError` naming the plane and
/// the numbers. 4:2:0 and 4:2:2 chroma of odd sizes round up, as libyuv and ffmpeg do.
/// Thread rule: a value type over memory the caller owns and keeps unchanged and alive while the
/// view is used. Cost: none (a few comparisons to create).
/// Sendable: `let` fields and read-only pointers; the caller keeps the planes alive and unchanged meanwhile.
public struct PixelBufferView: @unchecked Sendable {
    /// Layout of the pixels.
    public let format: PixelFormat
    /// Width in pixels.
    public let width: Int
    /// Height in pixels.
    public let height: Int
    /// Number of planes used (`format.planeCount`).
    public var planeCount: Int { format.planeCount }
    private let bases: (UnsafeRawPointer, UnsafeRawPointer?, UnsafeRawPointer?)
    private let strides: (Int, Int, Int)

    /// The largest accepted width or height.
    public static let maximumDimension = 16384

    /// Base address of plane `index` (0..<planeCount): Y (or the packed pixels), then U/UV/VU,
    /// then V.
    package func base(ofPlane index: Int) -> UnsafeRawPointer {
        precondition(index >= 0 && index < planeCount, "plane \(index) of a \(planeCount)-plane \(format) buffer")
        switch index {
        case 0: return bases.0
        case 1: return bases.1!
        default: return bases.2!
        }
    }

    /// Bytes from one row of plane `index` to the next.
    public func stride(ofPlane index: Int) -> Int {
        precondition(index >= 0 && index < planeCount, "plane \(index) of a \(planeCount)-plane \(format) buffer")
        switch index {
        case 0: return strides.0
        case 1: return strides.1
        default: return strides.2
        }
    }

    private init(
        format: PixelFormat, width: Int, height: Int,
        bases: (UnsafeRawPointer, UnsafeRawPointer?, UnsafeRawPointer?), strides: (Int, Int, Int)
    ) {
        self.format = format; self.width = width; self.height = height
        self.bases = bases; self.strides = strides
    }

    // MARK: Validating initialisers

    /// A one-plane packed buffer: `.bgra`, `.argb`, `.rgba`, `.abgr`, `.rgb24`, `.yuy2` or `.uyvy`.
    package static func packed(
        format: PixelFormat, width: Int, height: Int,
        data: UnsafeRawBufferPointer, stride: Int
    ) throws(ColorConversionError) -> PixelBufferView {
        guard format.planeCount == 1 else {
            throw ColorConversionError(.unsupportedFormat, "\(format) is planar; use .i420, .nv12 or .nv21, not .packed")
        }
        try checkSize(format, width, height)
        let base = try checkPlane(
            "\(format) pixels", data, stride: stride,
            rowBytes: rowBytes(format, plane: 0, width: width), rows: height)
        return PixelBufferView(format: format, width: width, height: height, bases: (base, nil, nil), strides: (stride, 0, 0))
    }

    /// Three-plane I420: Y at full size, U and V at `(width+1)/2` x `(height+1)/2`.
    package static func i420(
        width: Int, height: Int,
        y: UnsafeRawBufferPointer, strideY: Int,
        u: UnsafeRawBufferPointer, strideU: Int,
        v: UnsafeRawBufferPointer, strideV: Int
    ) throws(ColorConversionError) -> PixelBufferView {
        try checkSize(.i420, width, height)
        let cw = (width + 1) / 2, ch = (height + 1) / 2
        let yb = try checkPlane("I420 Y plane", y, stride: strideY, rowBytes: width, rows: height)
        let ub = try checkPlane("I420 U plane", u, stride: strideU, rowBytes: cw, rows: ch)
        let vb = try checkPlane("I420 V plane", v, stride: strideV, rowBytes: cw, rows: ch)
        return PixelBufferView(
            format: .i420, width: width, height: height, bases: (yb, ub, vb), strides: (strideY, strideU, strideV))
    }

    /// Two-plane NV12: Y, then interleaved U,V pairs at half resolution.
    package static func nv12(
        width: Int, height: Int,
        y: UnsafeRawBufferPointer, strideY: Int,
        uv: UnsafeRawBufferPointer, strideUV: Int
    ) throws(ColorConversionError) -> PixelBufferView {
        try semiPlanar(.nv12, width, height, y, strideY, uv, strideUV)
    }

    /// Two-plane NV21: Y, then interleaved V,U pairs at half resolution.
    package static func nv21(
        width: Int, height: Int,
        y: UnsafeRawBufferPointer, strideY: Int,
        vu: UnsafeRawBufferPointer, strideVU: Int
    ) throws(ColorConversionError) -> PixelBufferView {
        try semiPlanar(.nv21, width, height, y, strideY, vu, strideVU)
    }

    /// A buffer of any format whose planes follow each other with no padding: the layout of a raw
    /// file (`ffmpeg -f rawvideo`), with the default strides of `defaultStrides(for:width:)`.
    /// `buffer` must hold at least `byteCount(for:width:height:)` bytes.
    package static func contiguous(
        _ buffer: UnsafeRawBufferPointer, format: PixelFormat,
        width: Int, height: Int
    ) throws(ColorConversionError) -> PixelBufferView {
        try checkSize(format, width, height)
        let needed = byteCount(for: format, width: width, height: height)
        guard let base = buffer.baseAddress else {
            throw ColorConversionError(.missingPlane, "contiguous \(format) buffer is empty (nil base address)")
        }
        guard buffer.count >= needed else {
            throw ColorConversionError(
                .bufferTooSmall,
                "contiguous \(format) \(width)x\(height) buffer has \(buffer.count) bytes, needs \(needed)")
        }
        let s = defaultStrides(for: format, width: width)
        let ch = (height + 1) / 2
        switch format {
        case .i420:
            let u = base + s.0 * height
            let v = u + s.1 * ch
            return PixelBufferView(format: format, width: width, height: height, bases: (base, u, v), strides: s)
        case .nv12, .nv21:
            return PixelBufferView(
                format: format, width: width, height: height,
                bases: (base, base + s.0 * height, nil), strides: s)
        default:
            return PixelBufferView(format: format, width: width, height: height, bases: (base, nil, nil), strides: s)
        }
    }

    // MARK: Layout arithmetic

    /// Strides (bytes per row) of each plane when rows are packed without padding; 0 for planes
    /// the format lacks.
    public static func defaultStrides(for format: PixelFormat, width: Int) -> (Int, Int, Int) {
        switch format {
        case .i420: return (width, (width + 1) / 2, (width + 1) / 2)
        case .nv12, .nv21: return (width, ((width + 1) / 2) * 2, 0)
        default: return (rowBytes(format, plane: 0, width: width), 0, 0)
        }
    }

    /// Bytes of a contiguous `width` x `height` buffer of `format` with default strides.
    public static func byteCount(for format: PixelFormat, width: Int, height: Int) -> Int {
        let s = defaultStrides(for: format, width: width)
        let ch = (height + 1) / 2
        switch format {
        case .i420: return s.0 * height + (s.1 + s.2) * ch
        case .nv12, .nv21: return s.0 * height + s.1 * ch
        default: return s.0 * height
        }
    }

    /// Bytes one row of `plane` occupies (without padding).
    static func rowBytes(_ format: PixelFormat, plane: Int, width: Int) -> Int {
        switch (format, plane) {
        case (.yuy2, _), (.uyvy, _): return ((width + 1) / 2) * 4  // whole Y0 U Y1 V macropixels
        case (.i420, 1), (.i420, 2): return (width + 1) / 2
        case (.nv12, 1), (.nv21, 1): return ((width + 1) / 2) * 2
        default: return width * format.bytesPerPixel
        }
    }

    package static func checkSize(_ format: PixelFormat, _ width: Int, _ height: Int) throws(ColorConversionError) {
        guard width > 0, height > 0, width <= maximumDimension, height <= maximumDimension else {
            throw ColorConversionError(
                .invalidSize,
                "\(format) size \(width)x\(height) is not in 1...\(maximumDimension) on each side")
        }
    }

    private static func checkPlane(
        _ name: String, _ buffer: UnsafeRawBufferPointer, stride: Int,
        rowBytes: Int, rows: Int
    ) throws(ColorConversionError) -> UnsafeRawPointer {
        guard let base = buffer.baseAddress else {
            throw ColorConversionError(.missingPlane, "\(name) is missing (nil base address)")
        }
        guard stride >= rowBytes, stride <= Int(Int32.max) else {
            throw ColorConversionError(
                .invalidStride,
                "\(name) stride \(stride) is less than its row of \(rowBytes) bytes (or above Int32.max)")
        }
        let needed = stride * (rows - 1) + rowBytes
        guard buffer.count >= needed else {
            throw ColorConversionError(
                .bufferTooSmall,
                "\(name) has \(buffer.count) bytes, needs \(needed) (\(rows) rows, stride \(stride))")
        }
        return base
    }

    private static func semiPlanar(
        _ format: PixelFormat, _ width: Int, _ height: Int,
        _ y: UnsafeRawBufferPointer, _ strideY: Int,
        _ c: UnsafeRawBufferPointer, _ strideC: Int
    ) throws(ColorConversionError) -> PixelBufferView {
        try checkSize(format, width, height)
        let name = format == .nv12 ? "NV12" : "NV21"
        let yb = try checkPlane("\(name) Y plane", y, stride: strideY, rowBytes: width, rows: height)
        let cb = try checkPlane(
            "\(name) chroma plane", c, stride: strideC,
            rowBytes: rowBytes(format, plane: 1, width: width), rows: (height + 1) / 2)
        return PixelBufferView(format: format, width: width, height: height, bases: (yb, cb, nil), strides: (strideY, strideC, 0))
    }
}

extension PixelBufferView {
    /// The planes of an I420 frame we hold (a `VideoFrame`'s `view`), to feed it to a capturer.
    /// Borrowed: valid while that frame is alive and unchanged. Any thread; O(1), no copy.
    public init(_ frame: I420View) {
        let ch = frame.chromaHeight, cw = frame.chromaWidth
        // Cannot throw: every size comes from a well-formed I420 frame.
        self = try! PixelBufferView.i420(
            width: frame.width, height: frame.height,
            y: UnsafeRawBufferPointer(start: frame.y, count: frame.strideY * (frame.height - 1) + frame.width),
            strideY: frame.strideY,
            u: UnsafeRawBufferPointer(start: frame.u, count: frame.strideU * (ch - 1) + cw), strideU: frame.strideU,
            v: UnsafeRawBufferPointer(start: frame.v, count: frame.strideV * (ch - 1) + cw), strideV: frame.strideV)
    }
}

// MARK: Views over spans

extension PixelBufferView {
    /// Lends `body` a view of a one-plane packed buffer (`.bgra`, `.argb`, `.rgba`, `.abgr`,
    /// `.rgb24`, `.yuy2` or `.uyvy`) whose rows are `stride` bytes apart. Throws
    /// `ColorConversionError` naming the plane and the numbers when the buffer cannot hold the
    /// picture, without calling `body`.
    public static func withPacked<R>(
        format: PixelFormat, width: Int, height: Int, data: RawSpan, stride: Int, _ body: (PixelBufferView) -> R
    ) throws(ColorConversionError) -> R {
        try data.withUnsafeBytes { (d) throws(ColorConversionError) in
            body(try packed(format: format, width: width, height: height, data: d, stride: stride))
        }
    }

    /// Lends `body` a view of three-plane I420: Y at full size, U and V at `(width+1)/2` x
    /// `(height+1)/2`. Throws like `withPacked`.
    public static func withI420<R>(
        width: Int, height: Int, y: RawSpan, strideY: Int, u: RawSpan, strideU: Int, v: RawSpan, strideV: Int,
        _ body: (PixelBufferView) -> R
    ) throws(ColorConversionError) -> R {
        try y.withUnsafeBytes { (yb) throws(ColorConversionError) in
            try u.withUnsafeBytes { (ub) throws(ColorConversionError) in
                try v.withUnsafeBytes { (vb) throws(ColorConversionError) in
                    body(
                        try i420(
                            width: width, height: height, y: yb, strideY: strideY, u: ub, strideU: strideU, v: vb,
                            strideV: strideV))
                }
            }
        }
    }

    /// Lends `body` a view of two-plane NV12: Y, then interleaved U,V pairs at half resolution.
    /// Throws like `withPacked`.
    public static func withNV12<R>(
        width: Int, height: Int, y: RawSpan, strideY: Int, uv: RawSpan, strideUV: Int, _ body: (PixelBufferView) -> R
    ) throws(ColorConversionError) -> R {
        try withSemiPlanar(.nv12, width, height, y, strideY, uv, strideUV, body)
    }

    /// Lends `body` a view of two-plane NV21: Y, then interleaved V,U pairs at half resolution.
    /// Throws like `withPacked`.
    public static func withNV21<R>(
        width: Int, height: Int, y: RawSpan, strideY: Int, vu: RawSpan, strideVU: Int, _ body: (PixelBufferView) -> R
    ) throws(ColorConversionError) -> R {
        try withSemiPlanar(.nv21, width, height, y, strideY, vu, strideVU, body)
    }

    private static func withSemiPlanar<R>(
        _ format: PixelFormat, _ width: Int, _ height: Int, _ y: RawSpan, _ strideY: Int, _ chroma: RawSpan,
        _ strideChroma: Int, _ body: (PixelBufferView) -> R
    ) throws(ColorConversionError) -> R {
        try y.withUnsafeBytes { (yb) throws(ColorConversionError) in
            try chroma.withUnsafeBytes { (cb) throws(ColorConversionError) in
                body(try semiPlanar(format, width, height, yb, strideY, cb, strideChroma))
            }
        }
    }

    /// Lends `body` a view of a buffer of any format whose planes follow each other with no
    /// padding (a raw file's layout, `ffmpeg -f rawvideo`), with the strides of
    /// `defaultStrides(for:width:)`. `buffer` must hold `byteCount(for:width:height:)` bytes.
    /// Throws like `withPacked`.
    public static func withContiguous<R>(
        _ buffer: RawSpan, format: PixelFormat, width: Int, height: Int, _ body: (PixelBufferView) -> R
    ) throws(ColorConversionError) -> R {
        try buffer.withUnsafeBytes { (b) throws(ColorConversionError) in
            body(try contiguous(b, format: format, width: width, height: height))
        }
    }
}
