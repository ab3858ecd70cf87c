internal import CMediaShims
import MediaFrames

/// A real-time VP8/VP9 encoder: owns one libvpx encoder context and its configuration.
///
/// Input is an `I420View` (a `VideoFrame`'s planes or anyone's), wrapped without copying; output
/// goes to a non-escaping closure as a borrowed `EncodedVideoFrame`. Frames are encoded with the
/// real-time deadline (`VPX_DL_REALTIME`), no lookahead, one pass. Timebase: 90 kHz
/// (`VPXEncoder.timebase`), the RTP video clock, so `pts` can go straight into RTP timestamps.
///
/// Temporal layers (1...3) follow libvpx's `examples/vpx_temporal_svc_encoder.c`: the wrapper sets
/// the layer id (`VP8E_SET_TEMPORAL_LAYER_ID`, VP9 bypass mode with `VP9E_SET_SVC_LAYER_ID`) and
/// reference/update flags per frame, so every keyframe starts the pattern at layer 0.
///
/// Thread rule: not thread-safe; one thread at a time (it may move between threads).
/// Cost: `init` and a `reconfigure` that re-creates the encoder allocate libvpx's state;
/// `encode` allocates nothing in Swift; libvpx's encode dominates.
public final class VPXEncoder {
    /// Ticks per second of `pts` and `duration`: the 90 kHz RTP video clock.
    public static let timebase: Int64 = 90_000

    /// The configuration in force.
    public private(set) var configuration: VPXEncoderConfiguration
    /// Frames the rate control dropped so far.
    public private(set) var droppedFrameCount = 0
    /// Frames encoded and handed out so far.
    public private(set) var encodedFrameCount = 0
    /// Quantizer of the last encoded frame in the bitstream's scale (VP8 0...127, VP9 0...255);
    /// see `EncodedVideoFrame.quantizer`.
    public private(set) var lastQuantizer = 0
    /// Quantizer of the last encoded frame on libvpx's 0...63 configuration scale.
    public private(set) var lastQuantizer63 = 0

    private let ctx: UnsafeMutablePointer<vpx_codec_ctx_t>
    private let cfg: UnsafeMutablePointer<vpx_codec_enc_cfg_t>
    private let image: UnsafeMutablePointer<vpx_image_t>
    private var initialized = false

    private var pattern: TemporalPattern
    private var patternIndex = 0
    private var framesSinceKeyframe = 0
    private var keyframePending = true
    private var tl0PicIndex: UInt8 = 255
    /// Temporal layer of the frame that last wrote LAST, GOLDEN, ALTREF.
    private var bufferLayer: (Int, Int, Int) = (0, 0, 0)

    /// Creates an encoder. Traps on out-of-range settings (programmer errors); throws when libvpx
    /// refuses the configuration or cannot allocate.
    public init(_ configuration: VPXEncoderConfiguration) throws(VPXError) {
        configuration.validate()
        self.configuration = configuration
        pattern = TemporalPattern(layers: configuration.temporalLayers)
        ctx = .allocate(capacity: 1)
        ctx.initialize(to: vpx_codec_ctx_t())
        cfg = .allocate(capacity: 1)
        cfg.initialize(to: vpx_codec_enc_cfg_t())
        image = .allocate(capacity: 1)
        image.initialize(to: vpx_image_t())
        try open()
    }

    deinit {
        if initialized { vpx_codec_destroy(ctx) }
        ctx.deallocate()
        cfg.deallocate()
        image.deallocate()
    }

    /// Target bitrate in bits per second. Setting it applies at the next frame through
    /// `vpx_codec_enc_config_set` (no keyframe). Traps outside 8 kbit/s...100 Mbit/s.
    public var bitrate: Int {
        get { configuration.bitrate }
        set {
            var c = configuration
            c.bitrate = newValue
            do { try reconfigure(c) } catch {
                preconditionFailure("libvpx refused bitrate \(newValue): \(error)")
            }
        }
    }

    /// Applies a changed configuration. Rate, quantizer, drop-threshold, speed and similar
    /// changes apply in place (`vpx_codec_enc_config_set` plus controls) without a keyframe.
    /// A new codec, size, thread count or layer count re-creates the encoder: the next frame is
    /// a keyframe at layer 0. When libvpx refuses an in-place change, the old configuration stays
    /// in force; when re-creating fails, the encoder is unusable (every encode throws).
    /// Cost: in place, small; re-creating allocates.
    public func reconfigure(_ new: VPXEncoderConfiguration) throws(VPXError) {
        new.validate()
        let old = configuration
        configuration = new
        if new.codec != old.codec || new.width != old.width || new.height != old.height
            || new.threads != old.threads || new.temporalLayers != old.temporalLayers
        {
            vpx_codec_destroy(ctx)
            initialized = false
            pattern = TemporalPattern(layers: new.temporalLayers)
            try open()
            return
        }
        do throws(VPXError) {
            try fillConfig()
            let err = vpx_codec_enc_config_set(ctx, cfg)
            guard err == VPX_CODEC_OK else {
                throw VPXError.from(err, ctx: ctx, context: "\(new.codec) encoder reconfiguration")
            }
            try applyControls()
        } catch {
            // libvpx kept the old configuration; so does the wrapper.
            configuration = old
            try? fillConfig()
            throw error
        }
    }

    /// Changes the frame size: re-creates the encoder (the next frame is a keyframe).
    public func resize(width: Int, height: Int) throws(VPXError) {
        var c = configuration
        c.width = width
        c.height = height
        try reconfigure(c)
    }

    /// Makes the next encoded frame a keyframe (for a receiver's PLI/FIR).
    public func requestKeyframe() { keyframePending = true }

    /// Encodes one frame and hands each output frame to `body` (normally exactly one; none when
    /// the rate control drops the frame).
    ///
    /// - Parameters:
    ///   - frame: I420 planes of exactly the configured size (a size mismatch traps: resize first).
    ///   - pts: presentation time in 90 kHz ticks, increasing.
    ///   - duration: frame duration in 90 kHz ticks; default 90 000 / frameRate.
    ///   - forceKeyframe: code this frame as a keyframe.
    ///   - body: receives the encoded frame; its `data` is valid only during the call.
    /// - Returns: `.encoded`, or `.dropped` when the rate control skipped the frame.
    /// Cost: libvpx's encode; no allocation in Swift.
    @discardableResult
    public func encode(
        _ frame: I420View, pts: Int64, duration: Int64? = nil, forceKeyframe: Bool = false,
        _ body: (EncodedVideoFrame) -> Void
    ) throws(VPXError) -> VPXEncodeResult {
        let conf = configuration
        precondition(
            frame.width == conf.width && frame.height == conf.height,
            "VPXEncoder configured for \(conf.width)x\(conf.height) got \(frame.width)x\(frame.height)")
        let dur = duration ?? (Self.timebase / Int64(conf.frameRate))
        precondition(dur > 0, "VPXEncoder frame duration must be positive")

        // Wrap the caller's planes: vpx_img_wrap only fills the struct (no allocation), then the
        // plane pointers and strides are replaced with the caller's.
        vpx_img_wrap(
            image, VPX_IMG_FMT_I420, UInt32(conf.width), UInt32(conf.height), 1,
            UnsafeMutablePointer(mutating: frame.y))
        image.pointee.planes.0 = UnsafeMutablePointer(mutating: frame.y)
        image.pointee.planes.1 = UnsafeMutablePointer(mutating: frame.u)
        image.pointee.planes.2 = UnsafeMutablePointer(mutating: frame.v)
        image.pointee.stride.0 = Int32(frame.strideY)
        image.pointee.stride.1 = Int32(frame.strideU)
        image.pointee.stride.2 = Int32(frame.strideV)

        let key = forceKeyframe || keyframePending || framesSinceKeyframe >= conf.keyframeInterval
        if key { patternIndex = 0 }
        let slot = patternIndex % pattern.period
        let layer = pattern.layerIds[slot]
        let flags = key ? Int(VPX_EFLAG_FORCE_KF) : pattern.flags[slot]
        if conf.temporalLayers > 1 {
            try setLayerId(layer)
        }

        let err = vpx_codec_encode(ctx, image, pts, UInt(dur), flags, UInt(VPX_DL_REALTIME))
        guard err == VPX_CODEC_OK else {
            throw VPXError.from(err, ctx: ctx, context: "\(conf.codec) encode of frame pts \(pts)")
        }
        patternIndex += 1
        framesSinceKeyframe += 1

        var produced = false
        var iter: vpx_codec_iter_t? = nil
        while let pkt = vpx_codec_get_cx_data(ctx, &iter) {
            guard pkt.pointee.kind == VPX_CODEC_CX_FRAME_PKT else { continue }
            produced = true
            emit(pkt, requestedLayer: layer, flags: flags, body)
        }
        if !produced {
            droppedFrameCount += 1
            return .dropped
        }
        return .encoded
    }

    /// Drains frames libvpx still holds (none in real-time mode without lookahead, but call it at
    /// the end of a stream anyway). Cost: one libvpx call.
    public func flush(_ body: (EncodedVideoFrame) -> Void) throws(VPXError) {
        while true {
            let err = vpx_codec_encode(ctx, nil, 0, 1, 0, UInt(VPX_DL_REALTIME))
            guard err == VPX_CODEC_OK else {
                throw VPXError.from(err, ctx: ctx, context: "\(configuration.codec) flush")
            }
            var got = false
            var iter: vpx_codec_iter_t? = nil
            while let pkt = vpx_codec_get_cx_data(ctx, &iter) {
                guard pkt.pointee.kind == VPX_CODEC_CX_FRAME_PKT else { continue }
                got = true
                emit(pkt, requestedLayer: 0, flags: 0, body)
            }
            if !got { return }
        }
    }

    /// Encodes a `VideoFrame`, taking its presentation time from `timestampNs` (converted to
    /// 90 kHz ticks). Otherwise as `encode(_:pts:duration:forceKeyframe:_:)`.
    @discardableResult
    public func encode(
        _ frame: VideoFrame, forceKeyframe: Bool = false,
        _ body: (EncodedVideoFrame) -> Void
    ) throws(VPXError) -> VPXEncodeResult {
        try encode(frame.view, pts: Self.ticks(nanoseconds: frame.timestampNs), forceKeyframe: forceKeyframe, body)
    }

    /// Nanoseconds to 90 kHz ticks, rounding down, without overflow for any Int64.
    public static func ticks(nanoseconds ns: Int64) -> Int64 {
        let (q, r) = ns.quotientAndRemainder(dividingBy: 100_000)
        return q * 9 + (r * 9) / 100_000
    }

    // MARK: - Private

    private func emit(
        _ pkt: UnsafePointer<vpx_codec_cx_pkt_t>, requestedLayer: Int, flags: Int,
        _ body: (EncodedVideoFrame) -> Void
    ) {
        let conf = configuration
        let f = pkt.pointee.data.frame
        let isKey = f.flags & UInt32(VPX_FRAME_IS_KEY) != 0
        var layer = requestedLayer
        if conf.codec == .vp9 && conf.temporalLayers > 1 {
            var id = vpx_svc_layer_id_t()
            if cms_vpx_control_ptr(ctx, Int32(VP9E_GET_SVC_LAYER_ID.rawValue), &id) == VPX_CODEC_OK {
                layer = Int(id.temporal_layer_id)
            }
        }
        var q: Int32 = 0
        if cms_vpx_control_ptr(ctx, Int32(VP8E_GET_LAST_QUANTIZER.rawValue), &q) == VPX_CODEC_OK {
            lastQuantizer = Int(q)
        }
        if cms_vpx_control_ptr(ctx, Int32(VP8E_GET_LAST_QUANTIZER_64.rawValue), &q) == VPX_CODEC_OK {
            lastQuantizer63 = Int(q)
        }

        // Layer sync (RFC 7741 Y bit): every referenced buffer was last written by layer 0.
        var sync = false
        if isKey {
            // Keyframes are always sync frames when there are layers (as in libwebrtc).
            sync = conf.temporalLayers > 1
            bufferLayer = (0, 0, 0)
            framesSinceKeyframe = 1
            keyframePending = false
        } else {
            if layer > 0 {
                let refLast = flags & Int(VP8_EFLAG_NO_REF_LAST) == 0
                let refGold = flags & Int(VP8_EFLAG_NO_REF_GF) == 0
                let refAlt = flags & Int(VP8_EFLAG_NO_REF_ARF) == 0
                sync =
                    (!refLast || bufferLayer.0 == 0) && (!refGold || bufferLayer.1 == 0)
                    && (!refAlt || bufferLayer.2 == 0)
            }
            if flags & Int(VP8_EFLAG_NO_UPD_LAST) == 0 { bufferLayer.0 = layer }
            if flags & Int(VP8_EFLAG_NO_UPD_GF) == 0 { bufferLayer.1 = layer }
            if flags & Int(VP8_EFLAG_NO_UPD_ARF) == 0 { bufferLayer.2 = layer }
        }
        if layer == 0 { tl0PicIndex &+= 1 }
        encodedFrameCount += 1

        let out = EncodedVideoFrame(
            data: UnsafeRawBufferPointer(start: f.buf, count: Int(f.sz)),
            codec: conf.codec, isKeyframe: isKey, pts: f.pts, duration: Int64(f.duration),
            temporalLayerId: layer, temporalLayerCount: conf.temporalLayers,
            tl0PicIndex: tl0PicIndex, isLayerSync: sync,
            isDroppable: f.flags & UInt32(VPX_FRAME_IS_DROPPABLE) != 0,
            width: conf.width, height: conf.height, quantizer: lastQuantizer,
            quantizer63: lastQuantizer63)
        body(out)
    }

    private func setLayerId(_ layer: Int) throws(VPXError) {
        let err: vpx_codec_err_t
        if configuration.codec == .vp8 {
            err = cms_vpx_control_int(ctx, Int32(VP8E_SET_TEMPORAL_LAYER_ID.rawValue), Int32(layer))
        } else {
            var id = vpx_svc_layer_id_t()
            id.spatial_layer_id = 0
            id.temporal_layer_id = Int32(layer)
            id.temporal_layer_id_per_spatial.0 = Int32(layer)
            err = cms_vpx_control_ptr(ctx, Int32(VP9E_SET_SVC_LAYER_ID.rawValue), &id)
        }
        guard err == VPX_CODEC_OK else {
            throw VPXError.from(err, ctx: ctx, context: "setting temporal layer \(layer)")
        }
    }

    /// Creates the libvpx context from `configuration` and applies the controls.
    private func open() throws(VPXError) {
        try fillConfig()
        let conf = configuration
        let err = cms_vpx_enc_init(ctx, conf.codec.encoderInterface, cfg, 0)
        guard err == VPX_CODEC_OK else {
            throw VPXError.from(err, ctx: ctx, context: "\(conf.codec) encoder init \(conf.width)x\(conf.height)")
        }
        initialized = true
        patternIndex = 0
        keyframePending = true
        framesSinceKeyframe = 0
        bufferLayer = (0, 0, 0)
        try applyControls()
    }

    /// Writes `configuration` into the libvpx config struct.
    private func fillConfig() throws(VPXError) {
        let conf = configuration
        let err = vpx_codec_enc_config_default(conf.codec.encoderInterface, cfg, 0)
        guard err == VPX_CODEC_OK else {
            throw VPXError.from(err, ctx: nil, context: "\(conf.codec) default configuration")
        }
        let c = cfg
        c.pointee.g_w = UInt32(conf.width)
        c.pointee.g_h = UInt32(conf.height)
        c.pointee.g_timebase = vpx_rational(num: 1, den: Int32(Self.timebase))
        c.pointee.g_threads = UInt32(conf.threads)
        c.pointee.g_lag_in_frames = 0
        c.pointee.g_pass = VPX_RC_ONE_PASS
        // Temporal layers force error resilience, as libwebrtc does: a receiver that drops upper
        // layers must not depend on their entropy or motion-vector state.
        let resilient = conf.errorResilient || conf.temporalLayers > 1
        c.pointee.g_error_resilient = resilient ? vpx_codec_er_flags_t(VPX_ERROR_RESILIENT_DEFAULT) : 0
        c.pointee.rc_end_usage = conf.rateControl == .cbr ? VPX_CBR : VPX_VBR
        c.pointee.rc_target_bitrate = UInt32(max(1, (conf.bitrate + 500) / 1000))
        c.pointee.rc_min_quantizer = UInt32(conf.minQuantizer)
        c.pointee.rc_max_quantizer = UInt32(conf.maxQuantizer)
        c.pointee.rc_dropframe_thresh = UInt32(conf.frameDropThreshold)
        c.pointee.rc_resize_allowed = 0
        // Real-time buffer model (milliseconds) and rate tolerance of libwebrtc's VPX encoders.
        c.pointee.rc_buf_initial_sz = RealTime.bufferInitialMs
        c.pointee.rc_buf_optimal_sz = RealTime.bufferOptimalMs
        c.pointee.rc_buf_sz = RealTime.bufferSizeMs
        c.pointee.rc_undershoot_pct = conf.codec == .vp8 ? 100 : 50
        c.pointee.rc_overshoot_pct = conf.codec == .vp8 ? 15 : 50
        // Keyframes are placed by the wrapper (keyframeInterval, requests) so that they always
        // start the temporal pattern; libvpx places none itself.
        c.pointee.kf_mode = VPX_KF_DISABLED
        c.pointee.kf_min_dist = 0
        c.pointee.kf_max_dist = UInt32(conf.keyframeInterval)

        c.pointee.ss_number_layers = 1
        c.pointee.ts_number_layers = UInt32(conf.temporalLayers)
        c.pointee.ts_periodicity = UInt32(pattern.period)
        let kbps = Double(c.pointee.rc_target_bitrate)
        let fractions = conf.cumulativeLayerFractions
        withUnsafeMutableBytes(of: &c.pointee.ts_layer_id) { raw in
            let ids = raw.bindMemory(to: UInt32.self)
            for i in 0..<ids.count { ids[i] = i < pattern.period ? UInt32(pattern.layerIds[i]) : 0 }
        }
        withUnsafeMutableBytes(of: &c.pointee.ts_rate_decimator) { raw in
            let d = raw.bindMemory(to: UInt32.self)
            for i in 0..<d.count { d[i] = i < conf.temporalLayers ? UInt32(1 << (conf.temporalLayers - 1 - i)) : 0 }
        }
        withUnsafeMutableBytes(of: &c.pointee.ts_target_bitrate) { raw in
            let t = raw.bindMemory(to: UInt32.self)
            for i in 0..<t.count { t[i] = i < conf.temporalLayers ? UInt32((kbps * fractions[i]).rounded()) : 0 }
        }
        withUnsafeMutableBytes(of: &c.pointee.layer_target_bitrate) { raw in
            let t = raw.bindMemory(to: UInt32.self)
            for i in 0..<t.count { t[i] = i < conf.temporalLayers ? UInt32((kbps * fractions[i]).rounded()) : 0 }
        }
        if conf.codec == .vp9 && conf.temporalLayers > 1 {
            c.pointee.temporal_layering_mode = Int32(VP9E_TEMPORAL_LAYERING_MODE_BYPASS.rawValue)
        }
    }

    /// Applies the per-codec controls of `configuration` to the open context.
    private func applyControls() throws(VPXError) {
        let conf = configuration
        func set(_ id: UInt32, _ value: Int, _ name: String) throws(VPXError) {
            let err = cms_vpx_control_int(ctx, Int32(id), Int32(value))
            guard err == VPX_CODEC_OK else {
                throw VPXError.from(err, ctx: ctx, context: "\(conf.codec) control \(name)=\(value)")
            }
        }
        // Keyframes may be up to this % of the average frame: 0.5 x optimal buffer in frames
        // (libwebrtc's MaxIntraTarget), at least 300 %.
        let maxIntra = max(300, Int(RealTime.bufferOptimalMs) * conf.frameRate / 20)
        try set(VP8E_SET_CPUUSED.rawValue, conf.speed, "cpu-used")
        try set(VP8E_SET_STATIC_THRESHOLD.rawValue, conf.staticThreshold, "static-threshold")
        try set(VP8E_SET_MAX_INTRA_BITRATE_PCT.rawValue, maxIntra, "max-intra-bitrate-pct")
        switch conf.codec {
        case .vp8:
            try set(VP8E_SET_NOISE_SENSITIVITY.rawValue, conf.noiseSensitivity, "noise-sensitivity")
            try set(VP8E_SET_TOKEN_PARTITIONS.rawValue, conf.tokenPartitions.rawValue, "token-partitions")
            try set(VP8E_SET_SCREEN_CONTENT_MODE.rawValue, 0, "screen-content-mode")
        case .vp9:
            try set(VP9E_SET_NOISE_SENSITIVITY.rawValue, conf.noiseSensitivity, "noise-sensitivity")
            // Cyclic-refresh adaptive quantization: libvpx's real-time CBR mode.
            try set(VP9E_SET_AQ_MODE.rawValue, conf.rateControl == .cbr ? 3 : 0, "aq-mode")
            try set(VP9E_SET_FRAME_PARALLEL_DECODING.rawValue, 0, "frame-parallel")
            var log2Threads = 0
            while (2 << log2Threads) <= conf.threads { log2Threads += 1 }
            try set(VP9E_SET_TILE_COLUMNS.rawValue, log2Threads, "tile-columns")
            try set(VP9E_SET_ROW_MT.rawValue, conf.threads > 1 ? 1 : 0, "row-mt")
            if conf.temporalLayers > 1 {
                try set(VP9E_SET_SVC.rawValue, 1, "svc")
                var svc = vpx_svc_extra_cfg_t()
                withUnsafeMutableBytes(of: &svc.max_quantizers) {
                    $0.bindMemory(to: Int32.self).update(repeating: Int32(conf.maxQuantizer))
                }
                withUnsafeMutableBytes(of: &svc.min_quantizers) {
                    $0.bindMemory(to: Int32.self).update(repeating: Int32(conf.minQuantizer))
                }
                withUnsafeMutableBytes(of: &svc.scaling_factor_num) { $0.bindMemory(to: Int32.self).update(repeating: 1) }
                withUnsafeMutableBytes(of: &svc.scaling_factor_den) { $0.bindMemory(to: Int32.self).update(repeating: 1) }
                svc.temporal_layering_mode = Int32(VP9E_TEMPORAL_LAYERING_MODE_BYPASS.rawValue)
                let err = cms_vpx_control_ptr(ctx, Int32(VP9E_SET_SVC_PARAMETERS.rawValue), &svc)
                guard err == VPX_CODEC_OK else {
                    throw VPXError.from(err, ctx: ctx, context: "vp9 control svc-parameters")
                }
            }
        }
    }

    /// libwebrtc's real-time rate-control buffer sizes (milliseconds).
    private enum RealTime {
        static let bufferInitialMs: UInt32 = 500
        static let bufferOptimalMs: UInt32 = 600
        static let bufferSizeMs: UInt32 = 1000
    }
}

/// The temporal layer pattern and per-frame reference flags, after libvpx's
/// `examples/vpx_temporal_svc_encoder.c` (LAST for layer 0, GOLDEN for layer 1; upper layers never
/// update entropy state so a receiver may drop them).
struct TemporalPattern {
    let layerIds: [Int]
    let flags: [Int]
    var period: Int { layerIds.count }

    init(layers: Int) {
        let noRefGF = Int(VP8_EFLAG_NO_REF_GF), noRefARF = Int(VP8_EFLAG_NO_REF_ARF)
        let noUpdLast = Int(VP8_EFLAG_NO_UPD_LAST), noUpdGF = Int(VP8_EFLAG_NO_UPD_GF)
        let noUpdARF = Int(VP8_EFLAG_NO_UPD_ARF), noUpdEntropy = Int(VP8_EFLAG_NO_UPD_ENTROPY)
        // Layer 0: reference LAST only, update LAST.
        let base = noRefGF | noRefARF | noUpdGF | noUpdARF
        switch layers {
        case 2:
            // 0,1: layer 1 references LAST and GOLDEN, updates GOLDEN.
            layerIds = [0, 1]
            flags = [base, noRefARF | noUpdLast | noUpdARF | noUpdEntropy]
        case 3:
            // 0,2,1,2: layer 1 references LAST+GOLDEN and updates GOLDEN; layer 2 references
            // LAST+GOLDEN and updates nothing.
            let top = noRefARF | noUpdLast | noUpdGF | noUpdARF | noUpdEntropy
            layerIds = [0, 2, 1, 2]
            flags = [base, top, noRefARF | noUpdLast | noUpdARF | noUpdEntropy, top]
        default:
            layerIds = [0]
            flags = [0]
        }
    }
}
