/// Reassembles VP9 frames from RTP packets in sequence order (RFC 9628 §4), flexible or
/// non-flexible mode (GStreamer's rtpvp9pay uses the latter).
///
/// A layer frame starts at B=1 and ends at E=1 (or at the marker bit, which ends the picture).
/// Key frames: P=0 on a start packet of spatial layer 0 without inter-layer dependency.
/// Gaps and missing starts are reported in `incompleteFrames` like `VP8Depacketizer`.
/// Thread rule: one owner thread. Cost: one copy per payload byte into a buffer allocated once.
public final class VP9Depacketizer {
    private let assembler: RTPFrameAssembler
    /// The last scalability structure seen (carries the stream's resolution on key frames).
    public private(set) var scalabilityStructure: VP9ScalabilityStructure?

    /// Makes a depacketizer whose frames may be up to `maxFrameSize` bytes.
    public init(maxFrameSize: Int = 2 << 20) {
        assembler = RTPFrameAssembler(capacity: maxFrameSize)
    }

    /// Feeds one packet, parsed from `bytes`. The returned frame's bytes are valid until the next call.
    /// Throws when the payload descriptor is malformed. The packet is then ignored as if lost:
    /// the next packet shows a sequence gap, so the frame it belonged to is reported incomplete.
    public func push(_ packet: RTPPacket, in bytes: RawSpan) throws(RTPError) -> RTPDepacketizeResult {
        let payload = bytes.extracting(packet.payloadRange)
        let (d, size) = try VP9PayloadDescriptor.parse(payload)
        var result = RTPDepacketizeResult()
        let h = packet.header
        guard assembler.accept(sequenceNumber: h.sequenceNumber, timestamp: h.timestamp, into: &result) else {
            return result
        }
        if let ss = d.scalabilityStructure { scalabilityStructure = ss }
        let data = payload.extracting(size...)
        if d.startOfFrame {
            if assembler.isAssembling { assembler.dropContinuation(timestamp: h.timestamp, into: &result) }
            assembler.begin(sequenceNumber: h.sequenceNumber, timestamp: h.timestamp)
            let sid = d.layer?.spatialID ?? 0
            let dep = d.layer?.interLayerDependency ?? false
            assembler.keyframe = !d.interPicturePredicted && sid == 0 && !dep
            assembler.pictureID = d.pictureID
            assembler.temporalLayerID = d.layer?.temporalID
            assembler.tl0PicIdx = d.tl0PicIdx
            assembler.layerSync = d.layer?.switchingUpPoint ?? false
        } else if !assembler.isAssembling {
            if data.byteCount > 0 { assembler.dropContinuation(timestamp: h.timestamp, into: &result) }
            return result
        }
        assembler.append(data, sequenceNumber: h.sequenceNumber, end: d.endOfFrame || h.marker, into: &result)
        return result
    }
}
