/// Splits VP9 frames into RTP payloads in flexible mode (RFC 9628 §4.2, F=1) with a 15-bit
/// PictureID, B/E bits, the P bit and a P_DIFF of 1 on predicted frames (each picture references
/// the previous one), optional layer indices, and on key frames an optional scalability structure
/// with the resolution (§4.2.1) in the first packet.
///
/// Data is spread evenly over packets counting every descriptor byte, so payload sizes differ by
/// at most one byte. The marker bit ends the picture (§4.1; one spatial layer here).
/// Thread rule: a value type for the one packetizing thread. Cost: no allocation.
public struct VP9Packetizer: Sendable {
    /// The PictureID the next frame gets (15 bits).
    public var pictureID: UInt16
    /// Send the scalability structure (with the resolution) on key frames.
    public var sendsScalabilityStructure = true

    /// Starts at `pictureID`, random in 0...32767 when nil.
    public init(pictureID: UInt16? = nil) {
        self.pictureID = (pictureID ?? UInt16.random(in: 0...0x7FFF)) & 0x7FFF
    }

    /// Plans the packets of one encoded frame (payloads fit `maxPayloadSize`) and advances the
    /// PictureID. `keyframe` clears P; `width`/`height` feed the key frame's scalability structure.
    /// `frame` must stay valid until the packets are written. Traps on an empty frame.
    public mutating func packetize(frame: UnsafeRawBufferPointer, maxPayloadSize: Int, keyframe: Bool,
                                   width: Int = 0, height: Int = 0,
                                   layer: VP9PayloadDescriptor.Layer? = nil) -> VP9FramePackets {
        precondition(frame.count > 0, "empty VP9 frame")
        var d = VP9PayloadDescriptor(interPicturePredicted: !keyframe, flexibleMode: true,
                                     pictureID: pictureID, longPictureID: true, layer: layer)
        if !keyframe { d.setReference(1) }
        pictureID = (pictureID &+ 1) & 0x7FFF
        var ssSize = 0
        if keyframe && sendsScalabilityStructure && width > 0 && height > 0 {
            let ss = VP9ScalabilityStructure(width: UInt16(clamping: width), height: UInt16(clamping: height))
            d.scalabilityStructure = ss
            ssSize = ss.marshalSize
        }
        let overhead = d.marshalSize - ssSize
        let split = RTPEvenSplit(dataSize: frame.count, maxPayloadSize: maxPayloadSize, overhead: overhead,
                                 firstExtra: ssSize)
        return VP9FramePackets(descriptor: d, frame: frame, split: split)
    }
}

/// The RTP payloads of one VP9 frame, made by `VP9Packetizer.packetize`.
/// Thread rule: a value type borrowing the frame. Cost: writing copies the fragment once.
public struct VP9FramePackets: RTPFramePayloads {
    /// The descriptor of the first packet (later packets clear B and drop the SS; the last sets E).
    public let descriptor: VP9PayloadDescriptor
    /// The frame being split (borrowed).
    public let frame: UnsafeRawBufferPointer
    /// How the frame is spread over packets.
    public let split: RTPEvenSplit

    public var count: Int { split.count }
    public func payloadSize(at index: Int) -> Int { split.payloadSize(at: index) }

    public func writePayload(at index: Int, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        var d = descriptor
        d.startOfFrame = index == 0
        d.endOfFrame = index == split.count - 1
        if index > 0 { d.scalabilityStructure = nil }
        let n = d.marshal(into: buffer)
        let r = split.dataRange(at: index)
        precondition(buffer.count >= n + r.count, "buffer too small for VP9 packet")
        buffer.copy(UnsafeRawBufferPointer(rebasing: frame[r]), to: n)
        return n + r.count
    }
}

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

    /// Feeds one packet. The returned frame's bytes are valid until the next call.
    /// Throws when the payload descriptor is malformed. The packet is then ignored as if lost:
    /// the next packet shows a sequence gap, so the frame it belonged to is reported incomplete.
    public func push(_ packet: RTPPacket) throws(RTPError) -> RTPDepacketizeResult {
        let (d, size) = try VP9PayloadDescriptor.parse(packet.payload)
        var result = RTPDepacketizeResult()
        let h = packet.header
        guard assembler.accept(sequenceNumber: h.sequenceNumber, timestamp: h.timestamp, into: &result) else {
            return result
        }
        if let ss = d.scalabilityStructure { scalabilityStructure = ss }
        let data = UnsafeRawBufferPointer(rebasing: packet.payload[size...])
        if d.startOfFrame {
            if assembler.isAssembling { assembler.dropContinuation(timestamp: h.timestamp, into: &result) }
            assembler.begin(sequenceNumber: h.sequenceNumber, timestamp: h.timestamp)
            let sid = d.layer?.spatialID ?? 0
            let dep = d.layer?.interLayerDependency ?? false
            assembler.keyframe = !d.interPicturePredicted && sid == 0 && !dep
            assembler.pictureID = d.pictureID
        } else if !assembler.isAssembling {
            if data.count > 0 { assembler.dropContinuation(timestamp: h.timestamp, into: &result) }
            return result
        }
        assembler.append(data, sequenceNumber: h.sequenceNumber, end: d.endOfFrame || h.marker, into: &result)
        return result
    }
}
