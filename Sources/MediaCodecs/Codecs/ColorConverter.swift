internal import CMediaShims
import MediaFrames

/// Converts, rotates and scales raw video with libyuv: any capture format to the engine's I420
/// `VideoFrame`, I420 to packed RGB for display or files, and I420 scaling.
///
/// Colour math is libyuv's BT.601 limited range ("studio swing", Y 16...235), the same as ffmpeg's
/// default `rgb -> yuv420p` conversion. Format names are memory byte order (see `PixelFormat`);
/// this type maps them to libyuv's word-order names (`.bgra` -> `ARGBToI420`, `.argb` ->
/// `BGRAToI420`, `.rgba` -> `ABGRToI420`, `.abgr` -> `RGBAToI420`, `.rgb24` -> `RAWToI420`).
///
/// One call converts, scales and rotates: with no scaling and no rotation the source is converted
/// straight into the destination; NV12/NV21 rotate by 90/270 while converting
/// (`NV12ToI420Rotate`); other combinations go through scratch frames (convert -> scale -> rotate,
/// scaling first so rotation touches the smaller image when downscaling). Scratch frames are kept
/// between calls and reallocated only when a size changes, so a warm converter allocates nothing
/// itself. Conversion, every rotation, point scaling and filtered downscaling by exactly 1/2, 1/4
/// or 3/4 (libyuv's fixed-ratio kernels) allocate nothing at all (180 degrees is done as a
/// mirrored flip, because libyuv's 180 rotations malloc a row per plane). libyuv's general
/// filtered scalers (`.linear`, `.bilinear`, `.box` at other ratios, and upscaling) malloc one row
/// buffer per plane inside libyuv on each call: 3 small allocations per scaled frame, counted by
/// `ColorConverterTests.allocationsPerConversion`.
///
/// Thread rule: an instance owns scratch memory, so one thread at a time uses it (it may move
/// between threads, hence `Sendable`); create one per capturer or stage (creation is cheap:
/// nothing is allocated until a call needs scratch).
/// Cost: one pass of libyuv SIMD per stage; a 720p BGRA -> I420 conversion takes ~0.2 ms here.
/// Not `Sendable`: it has one owner (a capturer keeps its own behind a lock); move it with `sending`.
public final class ColorConverter {
    /// How `scale` and scaling conversions filter, libyuv's `FilterMode`.
    public enum ScaleFilter: Sendable, Hashable, CaseIterable {
        /// Point sampling (libyuv kFilterNone): fastest, aliased.
        case none
        /// Horizontal filtering only (kFilterLinear).
        case linear
        /// Bilinear (kFilterBilinear): fast, weaker when shrinking by more than 2x.
        case bilinear
        /// Box averaging (kFilterBox): best quality when shrinking.
        case box

        var libyuv: FilterMode {
            switch self {
            case .none: return kFilterNone
            case .linear: return kFilterLinear
            case .bilinear: return kFilterBilinear
            case .box: return kFilterBox
            }
        }
    }

    /// Filter used when a conversion has to scale. Default `.box`.
    public var scaleFilter: ScaleFilter = .box

    private var scratchConverted: VideoFrame?
    private var scratchScaled: VideoFrame?

    /// Creates a converter. Allocates nothing until a conversion needs scratch memory.
    public init() {}

    // MARK: Any format -> I420

    /// Converts `source` into `destination`, rotating it clockwise by `rotation` and scaling it to
    /// the destination's size (after rotation: a 1280x720 source rotated 90 degrees fills a 720x1280
    /// destination without scaling). Sets `destination.rotation` to `.rotation0`; leaves its
    /// timestamp alone. `source` was validated when it was made and `VideoFrame` sizes are valid by
    /// construction, so this throws only `.conversionFailed` if libyuv itself refuses.
    /// Cost: one to three libyuv passes (see the type's notes).
    public func convert(
        _ source: PixelBufferView, into destination: VideoFrame,
        rotation: VideoRotation = .rotation0
    ) throws(ColorConversionError) {
        let swaps = rotation.swapsDimensions
        let rotatedWidth = swaps ? source.height : source.width
        let rotatedHeight = swaps ? source.width : source.height
        let needsScale = destination.width != rotatedWidth || destination.height != rotatedHeight
        let out = Planes(destination)
        destination.rotation = .rotation0

        // NV12 / NV21 rotate by 90/270 during conversion when no scaling is needed (libyuv's
        // NV12ToI420Rotate mallocs rows for 180, which therefore takes the scratch path below).
        if !needsScale && swaps && (source.format == .nv12 || source.format == .nv21) {
            let swapUV = source.format == .nv21
            try check(
                NV12ToI420Rotate(
                    source.base(ofPlane: 0).assumingMemoryBound(to: UInt8.self), Int32(source.stride(ofPlane: 0)),
                    source.base(ofPlane: 1).assumingMemoryBound(to: UInt8.self), Int32(source.stride(ofPlane: 1)),
                    out.y, out.strideY, swapUV ? out.v : out.u, out.strideUV, swapUV ? out.u : out.v, out.strideUV,
                    Int32(source.width), Int32(source.height), rotation.libyuv), "NV12ToI420Rotate")
            return
        }

        // Stage 1: source -> I420 at the source size (skipped for I420 sources unless nothing else runs).
        let converted: I420View
        if source.format == .i420 && (needsScale || rotation != .rotation0) {
            converted = I420View(
                width: source.width, height: source.height,
                y: source.base(ofPlane: 0).assumingMemoryBound(to: UInt8.self), strideY: source.stride(ofPlane: 0),
                u: source.base(ofPlane: 1).assumingMemoryBound(to: UInt8.self), strideU: source.stride(ofPlane: 1),
                v: source.base(ofPlane: 2).assumingMemoryBound(to: UInt8.self), strideV: source.stride(ofPlane: 2))
        } else if !needsScale && rotation == .rotation0 {
            try Self.toI420(source, out)
            return
        } else {
            let frame = scratch(&scratchConverted, source.width, source.height)
            try Self.toI420(source, Planes(frame))
            converted = frame.view
        }

        // Stage 2: scale to the destination's pre-rotation size.
        var scaled = converted
        if needsScale {
            let targetWidth = swaps ? destination.height : destination.width
            let targetHeight = swaps ? destination.width : destination.height
            if rotation == .rotation0 {
                try Self.scale(converted, out, scaleFilter)
                return
            }
            let frame = scratch(&scratchScaled, targetWidth, targetHeight)
            try Self.scale(converted, Planes(frame), scaleFilter)
            scaled = frame.view
        }

        // Stage 3: rotate into the destination.
        try Self.rotate(scaled, out, rotation)
    }

    // MARK: I420 -> packed RGB

    /// Converts I420 `source` to packed RGB `format` (`.bgra`, `.argb`, `.rgba`, `.abgr` or
    /// `.rgb24`; alpha is 255) in `destination`, rows `stride` bytes apart. Throws
    /// `.unsupportedFormat`, `.invalidSize`, `.invalidStride`, `.missingPlane` or `.bufferTooSmall`.
    /// Never allocates. Cost: one libyuv pass.
    public func convert(_ source: I420View, to format: PixelFormat, into destination: inout MutableRawSpan, stride: Int)
        throws(ColorConversionError)
    {
        try destination.withUnsafeMutableBytes { (d) throws(ColorConversionError) in
            try convert(source, to: format, into: d, stride: stride)
        }
    }

    /// `convert(_:to:into:stride:)` into a raw buffer, for the engine's own callers.
    package func convert(
        _ source: I420View, to format: PixelFormat,
        into destination: UnsafeMutableRawBufferPointer, stride: Int
    ) throws(ColorConversionError) {
        guard format.isRGB else {
            throw ColorConversionError(.unsupportedFormat, "I420 converts to packed RGB formats, not \(format)")
        }
        try Self.checkView(source, "I420 source")
        let rowBytes = source.width * format.bytesPerPixel
        guard let base = destination.baseAddress else {
            throw ColorConversionError(.missingPlane, "\(format) destination is missing (nil base address)")
        }
        guard stride >= rowBytes, stride <= Int(Int32.max) else {
            throw ColorConversionError(
                .invalidStride, "\(format) destination stride \(stride) is less than its row of \(rowBytes) bytes")
        }
        let needed = stride * (source.height - 1) + rowBytes
        guard destination.count >= needed else {
            throw ColorConversionError(
                .bufferTooSmall,
                "\(format) destination has \(destination.count) bytes, needs \(needed) for \(source.width)x\(source.height)")
        }
        let fn: I420ToPacked
        switch format {
        case .bgra: fn = I420ToARGB
        case .argb: fn = I420ToBGRA
        case .rgba: fn = I420ToABGR
        case .abgr: fn = I420ToRGBA
        default: fn = I420ToRAW  // .rgb24
        }
        try check(
            fn(
                source.y, Int32(source.strideY), source.u, Int32(source.strideU), source.v, Int32(source.strideV),
                base.assumingMemoryBound(to: UInt8.self), Int32(stride),
                Int32(source.width), Int32(source.height)), "I420To\(format)")
    }

    // MARK: I420 scaling

    /// Scales I420 `source` to the size of `destination` with `filter` (default: `scaleFilter`).
    /// Throws `.invalidSize` or `.invalidStride` for a bad source view. Cost: one libyuv pass;
    /// filtered modes at ratios other than 2x allocate a row buffer per plane inside libyuv.
    public func scale(_ source: I420View, into destination: VideoFrame, filter: ScaleFilter? = nil) throws(ColorConversionError) {
        try Self.checkView(source, "I420 source")
        try Self.scale(source, Planes(destination), filter ?? scaleFilter)
    }

    // MARK: Implementation

    private typealias I420ToPacked =
        @convention(c) (
            UnsafePointer<UInt8>?, Int32, UnsafePointer<UInt8>?, Int32, UnsafePointer<UInt8>?, Int32,
            UnsafeMutablePointer<UInt8>?, Int32, Int32, Int32
        ) -> Int32

    private typealias PackedToI420 =
        @convention(c) (
            UnsafePointer<UInt8>?, Int32, UnsafeMutablePointer<UInt8>?, Int32, UnsafeMutablePointer<UInt8>?, Int32,
            UnsafeMutablePointer<UInt8>?, Int32, Int32, Int32
        ) -> Int32

    /// Mutable I420 planes with libyuv's Int32 strides.
    private struct Planes {
        var y, u, v: UnsafeMutablePointer<UInt8>
        var strideY, strideUV: Int32
        var width, height: Int32
        init(_ frame: VideoFrame) {
            y = frame.y; u = frame.u; v = frame.v
            strideY = Int32(frame.strideY); strideUV = Int32(frame.strideUV)
            width = Int32(frame.width); height = Int32(frame.height)
        }
    }

    /// Returns the scratch frame in `slot`, reallocating it only when the size changed.
    private func scratch(_ slot: inout VideoFrame?, _ width: Int, _ height: Int) -> VideoFrame {
        if let frame = slot, frame.width == width, frame.height == height { return frame }
        let frame = VideoFrame(width: width, height: height)
        slot = frame
        return frame
    }

    private static func toI420(_ s: PixelBufferView, _ d: Planes) throws(ColorConversionError) {
        let p0 = s.base(ofPlane: 0).assumingMemoryBound(to: UInt8.self), s0 = Int32(s.stride(ofPlane: 0))
        let w = Int32(s.width), h = Int32(s.height)
        switch s.format {
        case .i420:
            try check(
                I420Copy(
                    p0, s0,
                    s.base(ofPlane: 1).assumingMemoryBound(to: UInt8.self), Int32(s.stride(ofPlane: 1)),
                    s.base(ofPlane: 2).assumingMemoryBound(to: UInt8.self), Int32(s.stride(ofPlane: 2)),
                    d.y, d.strideY, d.u, d.strideUV, d.v, d.strideUV, w, h), "I420Copy")
        case .nv12:
            try check(
                NV12ToI420(
                    p0, s0, s.base(ofPlane: 1).assumingMemoryBound(to: UInt8.self), Int32(s.stride(ofPlane: 1)),
                    d.y, d.strideY, d.u, d.strideUV, d.v, d.strideUV, w, h), "NV12ToI420")
        case .nv21:
            try check(
                NV21ToI420(
                    p0, s0, s.base(ofPlane: 1).assumingMemoryBound(to: UInt8.self), Int32(s.stride(ofPlane: 1)),
                    d.y, d.strideY, d.u, d.strideUV, d.v, d.strideUV, w, h), "NV21ToI420")
        default:
            let fn: PackedToI420
            switch s.format {
            case .bgra: fn = ARGBToI420
            case .argb: fn = BGRAToI420
            case .rgba: fn = ABGRToI420
            case .abgr: fn = RGBAToI420
            case .rgb24: fn = RAWToI420
            case .yuy2: fn = YUY2ToI420
            default: fn = UYVYToI420  // .uyvy
            }
            try check(fn(p0, s0, d.y, d.strideY, d.u, d.strideUV, d.v, d.strideUV, w, h), "\(s.format)ToI420")
        }
    }

    private static func scale(_ s: I420View, _ d: Planes, _ filter: ScaleFilter) throws(ColorConversionError) {
        try check(
            I420Scale(
                s.y, Int32(s.strideY), s.u, Int32(s.strideU), s.v, Int32(s.strideV),
                Int32(s.width), Int32(s.height),
                d.y, d.strideY, d.u, d.strideUV, d.v, d.strideUV, d.width, d.height,
                filter.libyuv), "I420Scale")
    }

    private static func rotate(_ s: I420View, _ d: Planes, _ rotation: VideoRotation) throws(ColorConversionError) {
        if rotation == .rotation180 {
            // 180 degrees = mirror each row + flip vertically. libyuv's RotatePlane180 mallocs a
            // row buffer per plane per call; I420Mirror with a negative height (libyuv's flip
            // convention) does the same job in place of it without allocating.
            try check(
                I420Mirror(
                    s.y, Int32(s.strideY), s.u, Int32(s.strideU), s.v, Int32(s.strideV),
                    d.y, d.strideY, d.u, d.strideUV, d.v, d.strideUV,
                    Int32(s.width), -Int32(s.height)), "I420Mirror")
            return
        }
        try check(
            I420Rotate(
                s.y, Int32(s.strideY), s.u, Int32(s.strideU), s.v, Int32(s.strideV),
                d.y, d.strideY, d.u, d.strideUV, d.v, d.strideUV,
                Int32(s.width), Int32(s.height), rotation.libyuv), "I420Rotate")
    }

    private static func checkView(_ v: I420View, _ name: String) throws(ColorConversionError) {
        try PixelBufferView.checkSize(.i420, v.width, v.height)
        guard v.strideY >= v.width, v.strideU >= v.chromaWidth, v.strideV >= v.chromaWidth,
            v.strideY <= Int(Int32.max), v.strideU <= Int(Int32.max), v.strideV <= Int(Int32.max)
        else {
            throw ColorConversionError(
                .invalidStride,
                "\(name) strides \(v.strideY)/\(v.strideU)/\(v.strideV) are less than its rows of \(v.width)/\(v.chromaWidth) bytes"
            )
        }
    }
}

/// Turns libyuv's status (0 or -1) into a thrown error naming the call.
@inline(__always)
private func check(_ status: Int32, _ call: @autoclosure () -> String) throws(ColorConversionError) {
    if status != 0 {
        throw ColorConversionError(.conversionFailed, "libyuv \(call()) returned \(status)")
    }
}

extension VideoRotation {
    /// libyuv's `RotationMode` for this rotation (both clockwise).
    var libyuv: RotationMode {
        switch self {
        case .rotation0: return kRotate0
        case .rotation90: return kRotate90
        case .rotation180: return kRotate180
        case .rotation270: return kRotate270
        }
    }
}
