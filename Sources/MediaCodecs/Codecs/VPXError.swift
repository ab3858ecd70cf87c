internal import CMediaShims

/// An error from libvpx (a `vpx_codec_err_t`), shaped like swift-system's `Errno`: compare it with
/// the named statics (`catch VPXError.corruptFrame`); `detail` carries libvpx's own message
/// (`vpx_codec_error_detail`) or Revue's description of the input when there is one.
/// Equality and hashing look at `rawValue` only.
/// Thread rule: a value type. Cost: none (the detail string is built only on failure).
public struct VPXError: Error, RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The `vpx_codec_err_t` value (or a Revue-defined value above 1000, see `missingReference`).
    public let rawValue: Int32
    /// What went wrong in words, when known: libvpx's error detail or the input at fault.
    public let detail: String?

    /// Wraps a raw `vpx_codec_err_t` value.
    public init(rawValue: Int32) { self.init(rawValue: rawValue, detail: nil) }

    /// Wraps a raw value with a detail message.
    public init(rawValue: Int32, detail: String?) {
        self.rawValue = rawValue
        self.detail = detail
    }

    init(_ code: vpx_codec_err_t, detail: String? = nil) {
        self.init(rawValue: Int32(bitPattern: code.rawValue), detail: detail)
    }

    /// `VPX_CODEC_ERROR`: unspecified error.
    public static let error = VPXError(VPX_CODEC_ERROR)
    // swift-format-ignore: DontRepeatTypeInStaticProperties
    // The name mirrors libvpx's `VPX_CODEC_MEM_ERROR`.
    /// `VPX_CODEC_MEM_ERROR`: libvpx could not allocate memory.
    public static let memoryError = VPXError(VPX_CODEC_MEM_ERROR)
    /// `VPX_CODEC_ABI_MISMATCH`: the headers and the linked libvpx disagree.
    public static let abiMismatch = VPXError(VPX_CODEC_ABI_MISMATCH)
    /// `VPX_CODEC_INCAPABLE`: the codec lacks a required capability.
    public static let incapable = VPXError(VPX_CODEC_INCAPABLE)
    /// `VPX_CODEC_UNSUP_BITSTREAM`: the data is not a stream this decoder understands
    /// (also: a VP8 inter frame given before any keyframe).
    public static let unsupportedBitstream = VPXError(VPX_CODEC_UNSUP_BITSTREAM)
    /// `VPX_CODEC_UNSUP_FEATURE`: the stream uses a feature this build does not support
    /// (for example a VP9 profile other than 0, which is not 4:2:0 8-bit).
    public static let unsupportedFeature = VPXError(VPX_CODEC_UNSUP_FEATURE)
    /// `VPX_CODEC_CORRUPT_FRAME`: the frame is truncated or corrupt, or (VP8) references a
    /// corrupted buffer (`VP8D_GET_FRAME_CORRUPTED`).
    public static let corruptFrame = VPXError(VPX_CODEC_CORRUPT_FRAME)
    /// `VPX_CODEC_INVALID_PARAM`: a parameter was rejected (a configuration libvpx refuses).
    public static let invalidParameter = VPXError(VPX_CODEC_INVALID_PARAM)
    /// `VPX_CODEC_LIST_END`: iterator end; not normally thrown.
    public static let listEnd = VPXError(VPX_CODEC_LIST_END)
    /// Revue-defined (1001, not a libvpx code): `VPXDecoder` was told a frame was lost
    /// (or a decode failed) and refuses inter frames until the next keyframe.
    public static let missingReference = VPXError(rawValue: 1001)

    /// Equal when the codes (raw values) are equal.
    public static func == (lhs: VPXError, rhs: VPXError) -> Bool { lhs.rawValue == rhs.rawValue }
    /// Hashes what `==` compares.
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

    /// The libvpx name of the code (`vpx_codec_err_to_string`) and the detail.
    public var description: String {
        let name: String
        if rawValue == Self.missingReference.rawValue {
            name = "Reference frame missing"
        } else {
            name = String(cString: vpx_codec_err_to_string(vpx_codec_err_t(rawValue: UInt32(bitPattern: rawValue))))
        }
        if let detail { return "\(name): \(detail)" }
        return name
    }

    /// Builds the error for a failed call on `ctx`, with libvpx's error detail and `context`.
    static func from(_ code: vpx_codec_err_t, ctx: UnsafeMutablePointer<vpx_codec_ctx_t>?, context: String) -> VPXError {
        var parts = [context]
        if let ctx, let d = vpx_codec_error_detail(ctx) { parts.append(String(cString: d)) }
        return VPXError(code, detail: parts.joined(separator: ": "))
    }
}
