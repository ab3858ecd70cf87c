/// How a `VPXEncoder` rate-controls its output.
public enum VPXRateControl: String, Sendable, Hashable {
    /// Constant bitrate (`VPX_CBR`): what real-time senders use; the buffer model keeps every
    /// second close to the target.
    case cbr
    /// Variable bitrate (`VPX_VBR`): the target is an average; quality varies less.
    case vbr
}

/// Number of VP8 DCT token partitions (`VP8E_SET_TOKEN_PARTITIONS`, RFC 6386 section 9.5):
/// more partitions let a multi-threaded decoder work in parallel. Ignored by VP9.
public enum VP8TokenPartitions: Int, Sendable, Hashable, CaseIterable {
    case one = 0
    case two = 1
    case four = 2
    case eight = 3
}

/// Settings of a `VPXEncoder`. Every field has a real-time default; `VPXEncoder.reconfigure(_:)`
/// applies a changed copy while running.
///
/// Time: presentation times are in the 90 kHz RTP video clock (`VPXEncoder.timebase`);
/// `frameRate` gives the nominal frame duration (90 000 / frameRate ticks) used when a frame comes
/// without one, and the per-layer frame rates of temporal layering.
/// Thread rule: a value type. Cost: none.
public struct VPXEncoderConfiguration: Sendable, Hashable {
    /// VP8 or VP9.
    public var codec: VPXCodec
    /// Frame width in pixels (1...16384).
    public var width: Int
    /// Frame height in pixels (1...16384).
    public var height: Int
    /// Nominal frames per second (1...240).
    public var frameRate: Int = 30
    /// Target bitrate in bits per second over all temporal layers (`rc_target_bitrate`, which
    /// libvpx takes in kbit/s, so it is rounded to whole kbit/s).
    public var bitrate: Int = 1_000_000
    /// CBR (default, real-time) or VBR.
    public var rateControl: VPXRateControl = .cbr
    /// `VP8E_SET_CPUUSED`. VP8: -16...16; a negative value is a fixed speed |n| (deterministic);
    /// a positive value lets libvpx pick the speed each frame to fit the real-time deadline (the
    /// larger n, the smaller the time budget), so output depends on machine load. VP9: 0...9, the
    /// real-time modes are 5...9 (faster, lower quality). Default: VP8 -8, VP9 7.
    public var speed: Int
    /// Lowest quantizer index the rate control may use (0...63, `rc_min_quantizer`).
    public var minQuantizer: Int = 2
    /// Highest quantizer index the rate control may use (0...63, `rc_max_quantizer`).
    /// Default: VP8 56, VP9 52 (libvpx's real-time examples).
    public var maxQuantizer: Int
    /// Encoder threads (`g_threads`, 1...16). VP9 also gets log2(threads) tile columns and row-MT.
    public var threads: Int = 1
    /// VP8 token partitions (ignored by VP9).
    public var tokenPartitions: VP8TokenPartitions = .one
    /// `g_error_resilient`: every frame decodable without the entropy state of earlier frames
    /// (costs a little bitrate; useful on lossy links). Temporal layers above 0 never update
    /// entropy state whatever this says.
    public var errorResilient: Bool = false
    /// A keyframe at least every `keyframeInterval` frames (counted by the wrapper, so with
    /// temporal layers keyframes always start the layer pattern). Default 3000 (about 100 s).
    public var keyframeInterval: Int = 3000
    /// Temporal layers, 1...3. 2 layers: pattern 0,1 (60 % / 40 % of the bitrate); 3 layers:
    /// pattern 0,2,1,2 (40 % / 20 % / 40 %), libwebrtc's default allocation.
    public var temporalLayers: Int = 1
    /// Optional cumulative bitrate fractions per temporal layer (for 3 layers e.g.
    /// `[0.4, 0.6, 1.0]`: layer 0 alone gets 40 %, layers 0+1 get 60 %). Last must be 1.
    public var temporalLayerBitrateFractions: [Double]? = nil
    /// `rc_dropframe_thresh`: buffer fullness percentage (0...100) below which the rate control
    /// may drop a frame to keep the bitrate; 0 never drops (default). Senders on a congested link
    /// typically use 30.
    public var frameDropThreshold: Int = 0
    /// Temporal denoiser (`VP8E_SET_NOISE_SENSITIVITY` 0...6 for VP8, `VP9E_SET_NOISE_SENSITIVITY`
    /// 0...1 for VP9). 0 (default) is off: synthetic or screen sources have no noise; a camera may
    /// use 1 (luma only), which costs some CPU.
    public var noiseSensitivity: Int = 0
    /// `VP8E_SET_STATIC_THRESHOLD`: blocks whose change is below this are skipped (1, libwebrtc's
    /// real-time value, skips only truly static blocks; screen content may use 100+).
    public var staticThreshold: Int = 1

    /// Default real-time settings for `codec` at `width` x `height`.
    public init(codec: VPXCodec, width: Int, height: Int) {
        self.codec = codec
        self.width = width
        self.height = height
        self.speed = codec == .vp8 ? -8 : 7
        self.maxQuantizer = codec == .vp8 ? 56 : 52
    }

    /// Cumulative fraction of the bitrate available to layers 0...i, for each layer i.
    public var cumulativeLayerFractions: [Double] {
        if let f = temporalLayerBitrateFractions { return f }
        switch temporalLayers {
        case 2: return [0.6, 1.0]
        case 3: return [0.4, 0.6, 1.0]
        default: return [1.0]
        }
    }

    /// Traps on settings that are programmer errors (out-of-range values).
    func validate() {
        precondition(
            (1...16384).contains(width) && (1...16384).contains(height),
            "VPX encoder size \(width)x\(height) out of range")
        precondition((1...240).contains(frameRate), "VPX frameRate \(frameRate) out of 1...240")
        precondition((8_000...100_000_000).contains(bitrate), "VPX bitrate \(bitrate) out of 8 kbit/s...100 Mbit/s")
        precondition(
            codec == .vp8 ? (-16...16).contains(speed) : (0...9).contains(speed),
            "VPX speed \(speed) out of range for \(codec)")
        precondition(
            (0...63).contains(minQuantizer) && (0...63).contains(maxQuantizer)
                && minQuantizer <= maxQuantizer, "VPX quantizers \(minQuantizer)...\(maxQuantizer) invalid")
        precondition((1...16).contains(threads), "VPX threads \(threads) out of 1...16")
        precondition(keyframeInterval >= 1, "VPX keyframeInterval must be at least 1")
        precondition((1...3).contains(temporalLayers), "VPX temporalLayers \(temporalLayers) out of 1...3")
        let f = cumulativeLayerFractions
        precondition(
            f.count == temporalLayers && f.last == 1.0 && zip(f, f.dropFirst()).allSatisfy { $0 < $1 }
                && f.allSatisfy { $0 > 0 }, "VPX temporalLayerBitrateFractions \(f) invalid")
        precondition((0...100).contains(frameDropThreshold), "VPX frameDropThreshold out of 0...100")
        precondition(
            codec == .vp8 ? (0...6).contains(noiseSensitivity) : (0...1).contains(noiseSensitivity),
            "VPX noiseSensitivity \(noiseSensitivity) out of range for \(codec)")
        precondition(staticThreshold >= 0, "VPX staticThreshold must be >= 0")
    }
}
