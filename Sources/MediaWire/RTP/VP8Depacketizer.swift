/// Reassembles VP8 frames from RTP packets in sequence order (RFC 7741 §4).
///
/// A frame starts at a packet with S=1 and PID=0 (RFC 7741 §4.2) and ends at the packet with
/// the marker bit (§4.1). Sequence gaps make the frame being assembled incomplete; it is reported
/// in `incompleteFrames` and packets are skipped until the next frame start. Key frames are
/// recognised from the payload header's P bit (§4.3; `VP8PayloadHeader` also reads the size). Reordering is the jitter buffer's job:
/// packets behind the last one seen are ignored.
/// Thread rule: one owner thread. Cost: one copy per payload byte into a buffer allocated once.
public final class VP8Depacketizer {
    private let assembler: RTPFrameAssembler

    /// Makes a depacketizer whose frames may be up to `maxFrameSize` bytes (larger frames are
    /// reported incomplete).
    public init(maxFrameSize: Int = 2 << 20) {
        assembler = RTPFrameAssembler(capacity: maxFrameSize)
    }

    /// Feeds one packet, parsed from `bytes`. The returned frame's bytes are valid until the next call.
    /// Throws when the payload descriptor is malformed. The packet is then ignored as if lost:
    /// the next packet shows a sequence gap, so the frame it belonged to is reported incomplete.
    public func push(_ packet: RTPPacket, in bytes: RawSpan) throws(RTPError) -> RTPDepacketizeResult {
        let payload = bytes.extracting(packet.payloadRange)
        let (d, size) = try VP8PayloadDescriptor.parse(payload)
        var result = RTPDepacketizeResult()
        let h = packet.header
        let previousPictureID = assembler.pictureID
        guard assembler.accept(sequenceNumber: h.sequenceNumber, timestamp: h.timestamp, into: &result) else {
            return result
        }
        let data = payload.extracting(size...)
        if d.startsFrame {
            if assembler.isAssembling { assembler.dropContinuation(timestamp: h.timestamp, into: &result) }
            if result.incompleteFrames == 1 && result.incompleteNonReferenceFrames == 1,
                let previous = previousPictureID, let current = d.pictureID
            {
                let modulus: UInt16 = d.longPictureID ? 0x8000 : 0x80
                result.lossWasOnlyNonReference = current == (previous &+ 1) % modulus
            }
            assembler.begin(sequenceNumber: h.sequenceNumber, timestamp: h.timestamp)
            // RFC 7741 §4.3: the P bit (inverse key frame flag) is bit 0 of the first payload byte.
            assembler.keyframe = data.u8(0) & 0x01 == 0
            assembler.pictureID = d.pictureID
            assembler.temporalLayerID = d.temporalLayerID
            assembler.tl0PicIdx = d.tl0PicIdx
            assembler.nonReference = d.nonReference
            assembler.layerSync = d.layerSync
        } else if !assembler.isAssembling {
            // A gap inside a non-reference frame, shown by a later packet of the same picture
            // (same RTP timestamp): everything lost belonged to that frame.
            if result.incompleteFrames == 1 && result.incompleteNonReferenceFrames == 1
                && assembler.lastGivenUpTimestamp == h.timestamp
            {
                result.lossWasOnlyNonReference = true
            }
            assembler.dropContinuation(timestamp: h.timestamp, into: &result)
            return result
        }
        assembler.append(data, sequenceNumber: h.sequenceNumber, end: h.marker, into: &result)
        return result
    }
}
