/// Splits VP8 frames into RTP payloads (RFC 7741 §4) with a 15-bit PictureID and, when temporal
/// layers are on, TL0PICIDX/TID/Y (RFC 7741 §4.2).
///
/// Every packet of a frame carries the same descriptor (S=1 only on the first), so with the data
/// spread evenly (`RTPEvenSplit`) all packets differ in size by at most one byte. The PictureID
/// advances by one per frame and wraps at 2^15.
/// Thread rule: a value type for the one packetizing thread. Cost: no allocation.
public struct VP8Packetizer: Sendable {
    /// Temporal layer information of one frame (RFC 7741 §4.2 L/T bits).
    public struct TemporalLayer: Sendable, Equatable {
        /// TID, 0...3.
        public var id: UInt8
        /// Y: the frame depends only on the base layer.
        public var layerSync: Bool
        /// TL0PICIDX of the base-layer frame this frame depends on (incremented by the caller on
        /// every TID 0 frame).
        public var tl0PicIdx: UInt8
        /// Makes the layer info.
        public init(id: UInt8, layerSync: Bool, tl0PicIdx: UInt8) {
            self.id = id; self.layerSync = layerSync; self.tl0PicIdx = tl0PicIdx
        }
    }

    /// The PictureID the next frame gets (15 bits).
    public var pictureID: UInt16

    /// Starts at `pictureID`, random in 0...32767 when nil.
    public init(pictureID: UInt16? = nil) {
        self.pictureID = (pictureID ?? UInt16.random(in: 0...0x7FFF)) & 0x7FFF
    }

    /// Plans the packets of one encoded frame of `frameSize` bytes whose payloads must each fit
    /// `maxPayloadSize` (`header.maxPayloadSize(mtu:)`), and advances the PictureID. Traps on an
    /// empty frame.
    public mutating func packetize(
        frameSize: Int, maxPayloadSize: Int,
        temporalLayer: TemporalLayer? = nil,
        nonReference: Bool = false
    ) -> VP8FramePackets {
        precondition(frameSize > 0, "empty VP8 frame")
        var d = VP8PayloadDescriptor(
            nonReference: nonReference, startOfPartition: true, partitionIndex: 0,
            pictureID: pictureID, longPictureID: true)
        if let t = temporalLayer {
            d.tl0PicIdx = t.tl0PicIdx
            d.temporalLayerID = t.id
            d.layerSync = t.layerSync
        }
        pictureID = (pictureID &+ 1) & 0x7FFF
        let split = RTPEvenSplit(dataSize: frameSize, maxPayloadSize: maxPayloadSize, overhead: d.marshalSize)
        return VP8FramePackets(descriptor: d, split: split)
    }
}

/// The RTP payloads of one VP8 frame, made by `VP8Packetizer.packetize`: sizes and the
/// descriptor, not the frame. Thread rule: a value type. Cost: writing copies the fragment once.
public struct VP8FramePackets: RTPFramePayloads, Equatable {
    /// The descriptor of the first packet (later packets clear S).
    public let descriptor: VP8PayloadDescriptor
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
        precondition(frame.byteCount == split.dataSize, "a \(frame.byteCount)-byte frame for a \(split.dataSize)-byte VP8 plan")
        var d = descriptor
        d.startOfPartition = index == 0
        let r = split.dataRange(at: index)
        precondition(output.freeCapacity >= d.marshalSize + r.count, "buffer too small for VP8 packet")
        d.marshal(into: &output)
        output.appendBytes(frame.extracting(r))
    }
}
