/// One compressed VP8/VP9 frame as `VPXEncoder` hands it out: a borrowed view of libvpx's output
/// buffer plus what a packetizer needs (RFC 7741 for VP8: keyframe, temporal layer id, TL0PICIDX,
/// layer sync; draft-ietf-payload-vp9 / RFC 9628 for VP9).
///
/// Its bytes (`withBytes`) are valid ONLY inside the closure it is passed to (libvpx reuses the
/// buffer on the next encode); copy them out or packetize them there.
/// Thread rule: use only in the closure, on the encoding thread. Cost: none (no copy).
public struct EncodedVideoFrame {
    /// The compressed bytes, owned by the encoder; valid only inside the closure.
    package let data: UnsafeRawBufferPointer
    /// Bytes of compressed data.
    public var byteCount: Int { data.count }

    /// Lends the compressed bytes to `body`. Thread rule: inside the encoder's closure only.
    /// Cost: none.
    public func withBytes<R, E: Error>(_ body: (RawSpan) throws(E) -> R) throws(E) -> R { try body(data.bytes) }

    /// VP8 or VP9.
    public let codec: VPXCodec
    /// Whether the frame is a keyframe (decodable on its own).
    public let isKeyframe: Bool
    /// Presentation time in 90 kHz ticks, as given to `encode`.
    public let pts: Int64
    /// Duration in 90 kHz ticks.
    public let duration: Int64
    /// Temporal layer of this frame (0 = base layer; 0 when temporal layering is off).
    public let temporalLayerId: Int
    /// Number of temporal layers configured (1...3).
    public let temporalLayerCount: Int
    /// RFC 7741 TL0PICIDX: running 8-bit index of base-layer frames; for a frame above layer 0,
    /// the index of the base-layer frame it depends on. Counts 0, 1, 2... from the first frame.
    public let tl0PicIndex: UInt8
    /// RFC 7741 Y bit: with temporal layers, a keyframe, or a frame above layer 0 that references
    /// only buffers last written by base-layer frames, so a receiver may start decoding that layer
    /// here. False for other layer-0 frames and for streams without temporal layers. Computed
    /// from the reference flags the wrapper sets, for VP8 and VP9 alike.
    public let isLayerSync: Bool
    /// Whether no later frame references this one (libvpx's `VPX_FRAME_IS_DROPPABLE`).
    public let isDroppable: Bool
    /// Frame width in pixels.
    public let width: Int
    /// Frame height in pixels.
    public let height: Int
    /// The frame's quantizer in the bitstream's own scale (`VP8E_GET_LAST_QUANTIZER`): VP8
    /// y_ac_qi 0...127 (RFC 6386 section 19.2), VP9 base_q_idx 0...255. This is what W3C
    /// webrtc-stats `qpSum` sums, and what `VPXDecoder.lastQuantizer` reports for the same frame.
    public let quantizer: Int
    /// The same quantizer on libvpx's 0...63 configuration scale (`VP8E_GET_LAST_QUANTIZER_64`),
    /// comparable with `minQuantizer`/`maxQuantizer`.
    public let quantizer63: Int

    /// Compressed size in bytes.
    public var size: Int { data.count }
}

/// What `VPXEncoder.encode` did with one input frame.
public enum VPXEncodeResult: Sendable, Hashable {
    /// The frame was coded and handed to the closure.
    case encoded
    /// The rate control dropped the frame (`frameDropThreshold`); nothing was handed out.
    case dropped
}
