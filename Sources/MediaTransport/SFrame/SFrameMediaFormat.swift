/// Which bytes of an encoded frame stay in the clear in front of the SFrame header, per codec, so a
/// forwarding server (an SFU such as Janus) can still route the stream. Those bytes are the SFrame
/// metadata: authenticated with the frame, so they can be read but not changed.
///
/// - VP8: the uncompressed data chunk of RFC 6386 section 9.1: 10 bytes of a keyframe (the 3-byte
///   frame tag, the start code and the dimensions) and 3 bytes of an interframe (the frame tag).
///   Bit 0 of the first byte is the keyframe flag SFUs read (Janus's `janus_vp8_is_keyframe` reads
///   it and, for a keyframe, the dimensions after the start code).
/// - VP9: 1 byte, the start of the uncompressed header (frame marker, profile,
///   show_existing_frame, frame_type). SFUs take VP9 keyframes from the RTP payload descriptor
///   (Janus's `janus_vp9_is_keyframe` reads the P and V bits and the scalability structure, which
///   the packetizer writes outside the frame), so nothing more of the frame is needed; the one byte
///   lets a server that parses the bitstream still see frame_type.
/// - Opus: 1 byte, the TOC (RFC 6716 section 3.1: mode, bandwidth, frame size, channels).
///
/// Thread rule: a value type, freely shared. Cost: reads at most one byte of the frame.
public enum SFrameMediaFormat: Sendable, Hashable {
    /// VP8 video frames.
    case vp8
    /// VP9 video frames.
    case vp9
    /// Opus audio packets.
    case opus

    /// How many leading bytes of `frame` stay in the clear (never more than the frame holds).
    public func clearPrefixLength(of frame: RawSpan) -> Int {
        frame.withUnsafeBytes { clearPrefixLength(of: $0) }
    }

    /// `clearPrefixLength(of:)` on a raw buffer (the send and receive streams' per-frame path).
    package func clearPrefixLength(of frame: UnsafeRawBufferPointer) -> Int {
        // Not `frame.first`: in an unoptimised build that allocated on every call.
        guard frame.count > 0 else { return 0 }
        let first = frame[0]
        let wanted: Int
        switch self {
        case .vp8: wanted = first & 0x01 == 0 ? 10 : 3
        case .vp9, .opus: wanted = 1
        }
        return min(wanted, frame.count)
    }
}
