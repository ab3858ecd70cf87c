/// Splits VP9 frames into RTP payloads in flexible mode (RFC 9628 §4.2, F=1) with a 15-bit
/// PictureID, B/E bits, optional layer indices, and on key frames an optional scalability
/// structure with the resolution (§4.2.1) in the first packet.
///
/// P and P_DIFF (§4.2: "P: Inter-picture predicted frame"; in flexible mode each P_DIFF names a
/// picture the frame references, by PictureID difference) come from the encoder's frame info:
/// a key frame has P=0 and no P_DIFF; every other frame has P=1 and lists the pictures it
/// references, following `VPXEncoder`'s buffer use: the LAST buffer holds the latest key frame or
/// base-layer (TID 0) picture, GOLDEN the latest key frame or TID 1 picture; TID 0 frames
/// reference LAST, higher layers LAST and GOLDEN (libvpx's temporal-layer patterns, TID as
/// reported by `VP9E_GET_SVC_LAYER_ID`). So no P_DIFF points at a higher layer than the frame's
/// own, and a receiver or SFU dropping upper layers keeps every listed reference. Without layers
/// every frame references the previous picture (P_DIFF 1).
///
/// Data is spread evenly over packets counting every descriptor byte, so payload sizes differ by
/// at most one byte. The marker bit ends the picture (§4.1; one spatial layer here).
/// Thread rule: a value type for the one packetizing thread. Cost: no allocation.
public struct VP9Packetizer: Sendable {
    /// The PictureID the next frame gets (15 bits).
    public var pictureID: UInt16
    /// Send the scalability structure (with the resolution) on key frames.
    public var sendsScalabilityStructure = true

    /// PictureID of the picture in the encoder's LAST buffer (latest key frame or TID 0 picture).
    private var lastBasePictureID: UInt16?
    /// PictureID of the picture in the encoder's GOLDEN buffer (latest key frame or TID 1 picture).
    private var lastGoldenPictureID: UInt16?

    /// P_DIFF from the next PictureID back to `earlier` (RFC 9628 §4.2: 1...127, modulo 2^15);
    /// nil when unknown or out of range.
    private func diff(to earlier: UInt16?) -> UInt8? {
        guard let earlier else { return nil }
        let d = (pictureID &- earlier) & 0x7FFF
        return d >= 1 && d <= 127 ? UInt8(d) : nil
    }

    /// Starts at `pictureID`, random in 0...32767 when nil.
    public init(pictureID: UInt16? = nil) {
        self.pictureID = (pictureID ?? UInt16.random(in: 0...0x7FFF)) & 0x7FFF
    }

    /// Plans the packets of one encoded frame (payloads fit `maxPayloadSize`) and advances the
    /// PictureID. `keyframe` clears P (no P_DIFF); otherwise the P_DIFFs follow `layer`'s temporal
    /// ID (see the type's comment); `width`/`height` feed the key frame's scalability structure.
    /// `frameSize` is the encoded frame's size in bytes. Traps on an empty frame.
    public mutating func packetize(
        frameSize: Int, maxPayloadSize: Int, keyframe: Bool,
        width: Int = 0, height: Int = 0,
        layer: VP9PayloadDescriptor.Layer? = nil
    ) -> VP9FramePackets {
        precondition(frameSize > 0, "empty VP9 frame")
        var d = VP9PayloadDescriptor(
            interPicturePredicted: !keyframe, flexibleMode: true,
            pictureID: pictureID, longPictureID: true, layer: layer)
        let tid = layer?.temporalID ?? 0
        if keyframe {
            lastBasePictureID = pictureID
            lastGoldenPictureID = pictureID
        } else {
            // LAST first; GOLDEN too above the base layer when it is another picture.
            let last = diff(to: lastBasePictureID) ?? 1
            d.setReference(last)
            if tid > 0, let golden = diff(to: lastGoldenPictureID), golden != last { d.addReference(golden) }
            if tid == 0 { lastBasePictureID = pictureID }
            if tid == 1 { lastGoldenPictureID = pictureID }
        }
        pictureID = (pictureID &+ 1) & 0x7FFF
        var ssSize = 0
        if keyframe && sendsScalabilityStructure && width > 0 && height > 0 {
            let ss = VP9ScalabilityStructure(width: UInt16(clamping: width), height: UInt16(clamping: height))
            d.scalabilityStructure = ss
            ssSize = ss.marshalSize
        }
        let overhead = d.marshalSize - ssSize
        let split = RTPEvenSplit(
            dataSize: frameSize, maxPayloadSize: maxPayloadSize, overhead: overhead,
            firstExtra: ssSize)
        return VP9FramePackets(descriptor: d, split: split)
    }
}

/// The RTP payloads of one VP9 frame, made by `VP9Packetizer.packetize`: sizes and the
/// descriptor, not the frame. Thread rule: a value type. Cost: writing copies the fragment once.
public struct VP9FramePackets: RTPFramePayloads, Equatable {
    /// The descriptor of the first packet (later packets clear B and drop the SS; the last sets E).
    public let descriptor: VP9PayloadDescriptor
    /// How the frame is spread over packets.
    public let split: RTPEvenSplit

    /// How many RTP payloads the frame is split into.
    public var count: Int { split.count }
    /// Bytes of payload `index`, descriptor included.
    public func payloadSize(at index: Int) -> Int { split.payloadSize(at: index) }

    /// Bytes of the frame.
    public var frameSize: Int { split.dataSize }

    /// Appends payload `index` (descriptor and data) to `output`. Traps when `frame` is not the
    /// planned frame's size or `output` lacks `payloadSize(at:)` bytes of room. No allocation.
    public func writePayload(at index: Int, of frame: RawSpan, into output: inout OutputRawSpan) {
        precondition(frame.byteCount == split.dataSize, "a \(frame.byteCount)-byte frame for a \(split.dataSize)-byte VP9 plan")
        var d = descriptor
        d.startOfFrame = index == 0
        d.endOfFrame = index == split.count - 1
        if index > 0 { d.scalabilityStructure = nil }
        let r = split.dataRange(at: index)
        precondition(output.freeCapacity >= d.marshalSize + r.count, "buffer too small for VP9 packet")
        d.marshal(into: &output)
        output.appendBytes(frame.extracting(r))
    }
}
