internal import CMediaShims

/// The two libvpx codecs Revue wraps: VP8 (RFC 6386) and VP9 (profile 0: 8-bit 4:2:0).
/// Thread rule: a value type. Cost: none.
public enum VPXCodec: String, Sendable, Hashable, CaseIterable {
    case vp8
    case vp9

    /// The IVF/WebM four-character code: "VP80" or "VP90".
    public var fourCC: String { self == .vp8 ? "VP80" : "VP90" }

    /// The libvpx encoder interface.
    var encoderInterface: OpaquePointer {
        self == .vp8 ? vpx_codec_vp8_cx() : vpx_codec_vp9_cx()
    }

    /// The libvpx decoder interface.
    var decoderInterface: OpaquePointer {
        self == .vp8 ? vpx_codec_vp8_dx() : vpx_codec_vp9_dx()
    }
}
