import MediaBase

/// An I420 (4:2:0 planar) video frame that owns its pixel memory: the engine's internal frame.
///
/// One 64-byte-aligned allocation holds the three planes; strides are padded to 32 bytes so SIMD
/// rows never straddle planes. Frames are made once (usually by a `FramePool`) and reused, so the
/// per-frame path never allocates.
/// Thread rule: not synchronised; one thread writes it at a time, and handing it over through a
/// ring (release/acquire) publishes its contents. Cost: `init` allocates `width*height*1.5` bytes.
/// Sendable: no lock inside; safe because one thread at a time uses a frame, handed over through a ring or pool.
public final class VideoFrame: @unchecked Sendable {
    /// Width in pixels of the luma plane.
    public let width: Int
    /// Height in pixels of the luma plane.
    public let height: Int
    /// Bytes from one luma row to the next.
    public let strideY: Int
    /// Bytes from one chroma row to the next (same for U and V).
    public let strideUV: Int
    /// Width of each chroma plane: `(width + 1) / 2`.
    public var chromaWidth: Int { (width + 1) / 2 }
    /// Height of each chroma plane: `(height + 1) / 2`.
    public var chromaHeight: Int { (height + 1) / 2 }
    /// Capture time in nanoseconds on the caller's clock (monotonic recommended).
    public var timestampNs: Int64 = 0
    /// When the capturer received the frame (`.zero` when it did not come through a capturer):
    /// sender reports map RTP time to wall time from this instant, so the encode time does not
    /// bias them (as libwebrtc maps from capture time).
    public var capturedAt = MonotonicTime.zero
    /// Rotation still to be applied by a renderer (0 once capture has rotated the pixels).
    public var rotation: VideoRotation = .rotation0

    /// Start of the luma plane (the engine's own code; others use `withMutablePlanes`).
    package let y: UnsafeMutablePointer<UInt8>
    /// Start of the U (Cb) plane.
    package let u: UnsafeMutablePointer<UInt8>
    /// Start of the V (Cr) plane.
    package let v: UnsafeMutablePointer<UInt8>
    private let storage: UnsafeMutableRawPointer
    /// Total bytes owned by this frame.
    public let byteCount: Int

    /// Allocates a frame of `width` x `height` (both at least 1). Traps on a non-positive size:
    /// sizes from files or the network are validated by their parsers before they get here.
    public init(width: Int, height: Int) {
        precondition(
            width > 0 && height > 0 && width <= 16384 && height <= 16384,
            "VideoFrame size \(width)x\(height) out of range")
        self.width = width
        self.height = height
        strideY = (width + 31) & ~31
        strideUV = (((width + 1) / 2) + 31) & ~31
        let ySize = strideY * height
        let uvSize = strideUV * ((height + 1) / 2)
        byteCount = ySize + 2 * uvSize
        storage = UnsafeMutableRawPointer.allocate(byteCount: byteCount, alignment: 64)
        storage.initializeMemory(as: UInt8.self, repeating: 0, count: byteCount)
        y = storage.assumingMemoryBound(to: UInt8.self)
        u = y + ySize
        v = u + uvSize
    }

    deinit { storage.deallocate() }

    /// Lends a read-only view of the planes to `body`; the view is valid only during the call.
    /// Thread rule: the thread that owns the frame. Cost: none.
    public func withView<R, E: Error>(_ body: (I420View) throws(E) -> R) throws(E) -> R {
        try withExtendedLifetime(self) { () throws(E) -> R in try body(view) }
    }

    /// Lends the three planes for writing: Y (rows `strideY` bytes apart), then U and V (rows
    /// `strideUV` apart), each `stride * (rows - 1) + rowWidth` bytes long, so that a row's padding
    /// past the picture can be written too but nothing past the last row. The spans are valid only
    /// during the call. Thread rule: the thread that owns the frame. Cost: none.
    public func withMutablePlanes<R, E: Error>(
        _ body: (_ y: inout MutableSpan<UInt8>, _ u: inout MutableSpan<UInt8>, _ v: inout MutableSpan<UInt8>) throws(E) -> R
    ) throws(E) -> R {
        try withExtendedLifetime(self) { () throws(E) -> R in
            let chroma = planeByteCount(stride: strideUV, width: chromaWidth, rows: chromaHeight)
            let yb = UnsafeMutableBufferPointer(start: y, count: planeByteCount(stride: strideY, width: width, rows: height))
            let ub = UnsafeMutableBufferPointer(start: u, count: chroma)
            let vb = UnsafeMutableBufferPointer(start: v, count: chroma)
            var ys = yb.mutableSpan, us = ub.mutableSpan, vs = vb.mutableSpan
            return try body(&ys, &us, &vs)
        }
    }

    /// A read-only view of the planes, valid while this frame is alive and unchanged (the engine's
    /// own code, which keeps the frame alive around it).
    package var view: I420View {
        I420View(
            width: width, height: height,
            y: UnsafePointer(y), strideY: strideY,
            u: UnsafePointer(u), strideU: strideUV,
            v: UnsafePointer(v), strideV: strideUV)
    }

    /// Copies `source` (same size) into this frame row by row. Cost: one pass over the pixels.
    public func copy(from source: I420View) {
        precondition(source.width == width && source.height == height, "copy between different sizes")
        Self.copyPlane(source.y, source.strideY, y, strideY, width, height)
        Self.copyPlane(source.u, source.strideU, u, strideUV, chromaWidth, chromaHeight)
        Self.copyPlane(source.v, source.strideV, v, strideUV, chromaWidth, chromaHeight)
    }

    private static func copyPlane(
        _ src: UnsafePointer<UInt8>, _ srcStride: Int,
        _ dst: UnsafeMutablePointer<UInt8>, _ dstStride: Int,
        _ w: Int, _ h: Int
    ) {
        for row in 0..<h {
            (dst + row * dstStride).update(from: src + row * srcStride, count: w)
        }
    }
}

/// A borrowed, read-only view of I420 planes: a decoder's output or a `VideoFrame`'s pixels.
/// It is lent to a closure (`VideoFrame.withView`, `DecodedVideoFrame.withView`,
/// `VPXDecoder.decode`) and valid only during that call; read the pixels with `withPlanes`.
/// Thread rule: a value type over memory someone else owns. Cost: none.
/// Sendable: read-only pointers, kept private; the owner keeps the planes alive and unchanged
/// while any thread uses the view. (Swift 6.3 cannot yet declare a non-escapable view type
/// without an experimental feature, so the scope is the closure's.)
public struct I420View: @unchecked Sendable {
    /// Width of the picture in pixels (the Y plane's width).
    public var width: Int
    /// Height of the picture in pixels (the Y plane's height).
    public var height: Int
    /// First byte of the Y (luma) plane.
    package var y: UnsafePointer<UInt8>
    /// Bytes from one Y row to the next.
    public var strideY: Int
    /// First byte of the U (Cb) plane, half the width and height of Y rounded up.
    package var u: UnsafePointer<UInt8>
    /// Bytes from one U row to the next.
    public var strideU: Int
    /// First byte of the V (Cr) plane, half the width and height of Y rounded up.
    package var v: UnsafePointer<UInt8>
    /// Bytes from one V row to the next.
    public var strideV: Int

    /// Creates a view over planes that someone else owns.
    package init(
        width: Int, height: Int,
        y: UnsafePointer<UInt8>, strideY: Int,
        u: UnsafePointer<UInt8>, strideU: Int,
        v: UnsafePointer<UInt8>, strideV: Int
    ) {
        self.width = width; self.height = height
        self.y = y; self.strideY = strideY
        self.u = u; self.strideU = strideU
        self.v = v; self.strideV = strideV
    }

    /// Lends the three planes to `body` as spans: each runs from its first pixel to the last
    /// pixel of its last row (row `r` starts at `r * stride`). Thread rule: as the view's.
    /// Cost: none.
    public func withPlanes<R, E: Error>(
        _ body: (_ y: Span<UInt8>, _ u: Span<UInt8>, _ v: Span<UInt8>) throws(E) -> R
    ) throws(E) -> R {
        func plane(_ p: UnsafePointer<UInt8>, _ stride: Int, _ w: Int, _ h: Int) -> UnsafeBufferPointer<UInt8> {
            UnsafeBufferPointer(start: p, count: planeByteCount(stride: stride, width: w, rows: h))
        }
        let yb = plane(y, strideY, width, height)
        let ub = plane(u, strideU, chromaWidth, chromaHeight)
        let vb = plane(v, strideV, chromaWidth, chromaHeight)
        return try body(yb.span, ub.span, vb.span)
    }

    /// Width of each chroma plane.
    public var chromaWidth: Int { (width + 1) / 2 }
    /// Height of each chroma plane.
    public var chromaHeight: Int { (height + 1) / 2 }
}

/// Bytes a plane of `rows` rows `stride` apart spans when its last row holds `width` bytes: what
/// the lent plane spans cover (nothing past the last row's last pixel).
private func planeByteCount(stride: Int, width: Int, rows: Int) -> Int { rows == 0 ? 0 : stride * (rows - 1) + width }
