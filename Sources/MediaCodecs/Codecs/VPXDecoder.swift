internal import CMediaShims
import MediaFrames

/// What the first bytes of a VP8/VP9 frame say, without decoding it
/// (`vpx_codec_peek_stream_info`): for depacketizers (is this a keyframe?) and file probes.
/// Thread rule: a value type. Cost: none.
public struct VPXStreamInfo: Sendable, Hashable {
    /// Whether the frame is a keyframe.
    public var isKeyframe: Bool
    /// Coded width from a keyframe header; 0 for inter frames (their header carries no size).
    public var width: Int
    /// Coded height from a keyframe header; 0 for inter frames.
    public var height: Int

    /// Creates stream info.
    public init(isKeyframe: Bool, width: Int, height: Int) {
        self.isKeyframe = isKeyframe
        self.width = width
        self.height = height
    }
}

/// A VP8/VP9 decoder: owns one libvpx decoder context. Output planes are handed to a closure
/// WITHOUT copying: the `I420View` points into libvpx's frame buffer and is valid only inside the
/// closure (libvpx reuses the buffer at the next `decode`).
///
/// Loss handling, as libwebrtc's VPX decoders do it: a new decoder, a decode error, or
/// `frameLost()` puts the decoder in the `awaitingKeyframe` state, where inter frames throw
/// `VPXError.missingReference` (ask the sender for a keyframe) instead of decoding into garbage
/// from a stale reference.
/// Thread rule: not thread-safe; one thread at a time. Cost: `init` allocates libvpx's state;
/// `decode` allocates nothing in Swift (libvpx allocates its frame pool on the first keyframe and
/// on size changes).
public final class VPXDecoder {
    /// VP8 or VP9.
    public let codec: VPXCodec
    /// True until a keyframe decodes, and again after `frameLost()` or a decode error.
    public private(set) var awaitingKeyframe = true
    /// Frames decoded and shown so far.
    public private(set) var decodedFrameCount = 0

    private let ctx: UnsafeMutablePointer<vpx_codec_ctx_t>

    /// Creates a decoder using up to `threads` threads (1...16; VP8 uses them only for streams with
    /// several token partitions, VP9 for tiles). Throws when libvpx cannot create it.
    public init(codec: VPXCodec, threads: Int = 1) throws(VPXError) {
        precondition((1...16).contains(threads), "VPXDecoder threads \(threads) out of 1...16")
        self.codec = codec
        ctx = .allocate(capacity: 1)
        ctx.initialize(to: vpx_codec_ctx_t())
        var cfg = vpx_codec_dec_cfg_t(threads: UInt32(threads), w: 0, h: 0)
        let err = cms_vpx_dec_init(ctx, codec.decoderInterface, &cfg, 0)
        guard err == VPX_CODEC_OK else {
            let e = VPXError.from(err, ctx: ctx, context: "\(codec) decoder init")
            ctx.deallocate()
            throw e
        }
    }

    deinit {
        vpx_codec_destroy(ctx)
        ctx.deallocate()
    }

    /// Tells the decoder that a frame later frames depend on was lost (a gap in a base layer, a
    /// frame the jitter buffer gave up on). Inter frames then throw `missingReference` until a
    /// keyframe arrives. With temporal layers, losing a frame of a layer the receiver does not
    /// need is not a loss. Cost: none.
    public func frameLost() { awaitingKeyframe = true }

    /// Decodes one complete frame (VP9: one superframe) and, when it produces a picture, calls
    /// `body` with the decoded I420 planes and returns its result; returns nil when the frame
    /// shows nothing (a VP9 hidden frame).
    ///
    /// Throws `corruptFrame`, `unsupportedBitstream` etc. for bad input (the message names the
    /// frame size and libvpx's detail), and `missingReference` for an inter frame while
    /// `awaitingKeyframe`. After any error the decoder awaits a keyframe.
    /// Cost: libvpx's decode; the view is not copied.
    public func decode<R>(_ data: RawSpan, _ body: (I420View) -> R) throws(VPXError) -> R? {
        try data.withUnsafeBytes { (raw) throws(VPXError) in try decode(raw, body) }
    }

    /// `decode(_:_:)` on a raw buffer (the engine's own frame buffers).
    package func decode<R>(_ data: UnsafeRawBufferPointer, _ body: (I420View) -> R) throws(VPXError) -> R? {
        guard let base = data.baseAddress, !data.isEmpty else {
            throw VPXError(rawValue: VPXError.corruptFrame.rawValue, detail: "\(codec) frame is empty")
        }
        if awaitingKeyframe {
            let info = try? Self.peekStreamInfo(data, codec: codec)
            if let info, !info.isKeyframe {
                throw VPXError(
                    rawValue: VPXError.missingReference.rawValue,
                    detail: "\(codec) inter frame of \(data.count) bytes while awaiting a keyframe")
            }
        }
        let err = vpx_codec_decode(ctx, base.assumingMemoryBound(to: UInt8.self), UInt32(data.count), nil, 0)
        guard err == VPX_CODEC_OK else {
            awaitingKeyframe = true
            throw VPXError.from(err, ctx: ctx, context: "\(codec) frame of \(data.count) bytes")
        }
        if codec == .vp8 {
            var corrupted: Int32 = 0
            if cms_vpx_control_ptr(ctx, Int32(VP8D_GET_FRAME_CORRUPTED.rawValue), &corrupted) == VPX_CODEC_OK,
                corrupted != 0
            {
                awaitingKeyframe = true
                drain()
                throw VPXError(
                    rawValue: VPXError.corruptFrame.rawValue,
                    detail: "vp8 frame of \(data.count) bytes decoded from a corrupted reference")
            }
        }
        awaitingKeyframe = false
        var iter: vpx_codec_iter_t? = nil
        guard let img = vpx_codec_get_frame(ctx, &iter) else { return nil }
        let im = img.pointee
        guard im.fmt == VPX_IMG_FMT_I420, let y = im.planes.0, let u = im.planes.1, let v = im.planes.2 else {
            drain()
            throw VPXError(
                rawValue: VPXError.unsupportedFeature.rawValue,
                detail: "\(codec) frame decodes to image format \(im.fmt.rawValue), not 8-bit I420")
        }
        let view = I420View(
            width: Int(im.d_w), height: Int(im.d_h),
            y: UnsafePointer(y), strideY: Int(im.stride.0),
            u: UnsafePointer(u), strideU: Int(im.stride.1),
            v: UnsafePointer(v), strideV: Int(im.stride.2))
        decodedFrameCount += 1
        let result = body(view)
        drain()
        return result
    }

    /// Quantizer of the last decoded frame in the bitstream's scale (`VPXD_GET_LAST_QUANTIZER`:
    /// VP8 0...127, VP9 0...255), what W3C webrtc-stats `qpSum` sums on the receiving side.
    public var lastQuantizer: Int {
        var q: Int32 = 0
        _ = cms_vpx_control_ptr(ctx, Int32(VPXD_GET_LAST_QUANTIZER.rawValue), &q)
        return Int(q)
    }

    /// Reads keyframe flag and size from a frame's header (`vpx_codec_peek_stream_info`).
    /// VP8 inter frames report `isKeyframe == false` and size 0. Throws for data that is not a
    /// frame of `codec` (a truncated keyframe header, a wrong sync code or frame marker).
    /// Thread rule: any thread. Cost: reads a few header bytes.
    package static func peekStreamInfo(_ data: UnsafeRawBufferPointer, codec: VPXCodec) throws(VPXError) -> VPXStreamInfo {
        guard let base = data.baseAddress, !data.isEmpty else {
            throw VPXError(rawValue: VPXError.corruptFrame.rawValue, detail: "\(codec) frame is empty")
        }
        var si = vpx_codec_stream_info_t()
        si.sz = UInt32(MemoryLayout<vpx_codec_stream_info_t>.size)
        let err = vpx_codec_peek_stream_info(
            codec.decoderInterface, base.assumingMemoryBound(to: UInt8.self),
            UInt32(data.count), &si)
        if err == VPX_CODEC_OK {
            return VPXStreamInfo(isKeyframe: si.is_kf != 0, width: Int(si.w), height: Int(si.h))
        }
        // libvpx's VP8 peek answers "unsupported" for every inter frame (RFC 6386 section 9.1:
        // bit 0 of the first byte set); that is not an error here.
        if codec == .vp8 && err == VPX_CODEC_UNSUP_BITSTREAM && data[0] & 1 == 1 && data.count >= 3 {
            return VPXStreamInfo(isKeyframe: false, width: 0, height: 0)
        }
        throw VPXError.from(err, ctx: nil, context: "\(codec) frame header of \(data.count) bytes")
    }

    /// Releases any further frames of the last decode call (there are none in normal streams).
    private func drain() {
        var iter: vpx_codec_iter_t? = nil
        while vpx_codec_get_frame(ctx, &iter) != nil {}
    }
}

extension VPXDecoder {
    /// Reads keyframe flag and size from a frame's header (`vpx_codec_peek_stream_info`). VP8
    /// inter frames report `isKeyframe == false` and size 0. Throws for data that is not a frame
    /// of `codec`. Thread rule: any thread. Cost: reads a few header bytes.
    public static func peekStreamInfo(_ data: RawSpan, codec: VPXCodec) throws(VPXError) -> VPXStreamInfo {
        try data.withUnsafeBytes { (d) throws(VPXError) in try peekStreamInfo(d, codec: codec) }
    }
}
