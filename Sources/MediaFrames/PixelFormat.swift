/// A raw video pixel layout accepted by capture and conversion.
///
/// Names give the **byte order in memory**, as ffmpeg's `pix_fmt` names do (`.bgra` is bytes B, G, R,
/// A; Apple's `kCVPixelFormatType_32BGRA`). libyuv names the same layouts by their little-endian
/// 32-bit word instead, so `.bgra` is libyuv's "ARGB"; `libyuvFourCC` gives the mapping.
/// Thread rule: a value type, free to share. Cost: none.
public enum PixelFormat: String, Sendable, CaseIterable, Hashable {
    /// Planar Y, then U and V at half width and half height (4:2:0). The engine's internal format.
    case i420
    /// Y plane, then one plane of interleaved U, V at half resolution.
    case nv12
    /// Y plane, then one plane of interleaved V, U at half resolution.
    case nv21
    /// 4 bytes per pixel: B, G, R, A (libyuv ARGB).
    case bgra
    /// 4 bytes per pixel: A, R, G, B (libyuv BGRA).
    case argb
    /// 4 bytes per pixel: R, G, B, A (libyuv ABGR).
    case rgba
    /// 4 bytes per pixel: A, B, G, R (libyuv RGBA).
    case abgr
    /// 3 bytes per pixel: R, G, B (libyuv RAW).
    case rgb24
    /// Packed 4:2:2: Y0 U Y1 V.
    case yuy2
    /// Packed 4:2:2: U Y0 V Y1.
    case uyvy

    /// Bytes per pixel of the first (or only) plane.
    public var bytesPerPixel: Int {
        switch self {
        case .i420, .nv12, .nv21: return 1
        case .bgra, .argb, .rgba, .abgr: return 4
        case .rgb24: return 3
        case .yuy2, .uyvy: return 2
        }
    }

    /// Number of planes a buffer of this format has.
    public var planeCount: Int {
        switch self {
        case .i420: return 3
        case .nv12, .nv21: return 2
        default: return 1
        }
    }

    /// Whether this is a packed RGB layout (one plane, 3 or 4 bytes per pixel).
    public var isRGB: Bool {
        switch self {
        case .bgra, .argb, .rgba, .abgr, .rgb24: return true
        default: return false
        }
    }
}

/// Clockwise rotation to apply to a captured frame, as `BufferCapturer.capture(_:timeStampNs:rotation:)`
/// takes it. Thread rule: a value type. Cost: none.
public enum VideoRotation: Int, Sendable, CaseIterable, Hashable {
    case rotation0 = 0
    case rotation90 = 90
    case rotation180 = 180
    case rotation270 = 270

    /// Whether the rotation swaps width and height.
    public var swapsDimensions: Bool { self == .rotation90 || self == .rotation270 }
}
