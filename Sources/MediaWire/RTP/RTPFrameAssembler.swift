/// One video frame reassembled from RTP packets by a depacketizer.
///
/// The bytes stay in the depacketizer's own buffer, valid until its next `push`: read them there
/// with `withBytes`, or copy them out.
/// Thread rule: borrowed memory, use on the depacketizer's thread. Cost: none (a view).
public struct RTPAssembledFrame {
    /// The frame's bytes in decoder format (payload descriptors removed), in the depacketizer's
    /// buffer (the engine's own code; others use `withBytes`).
    package let data: UnsafeRawBufferPointer
    /// Size of the frame in bytes.
    public var byteCount: Int { data.count }
    /// Lends the frame's bytes (decoder format) to `body`; before the depacketizer's next `push`
    /// only. Cost: none.
    public func withBytes<R, E: Error>(_ body: (RawSpan) throws(E) -> R) throws(E) -> R { try body(data.bytes) }
    /// RTP timestamp shared by the frame's packets.
    public let timestamp: UInt32
    /// Sequence number of the frame's first packet.
    public let firstSequenceNumber: UInt16
    /// Sequence number of the frame's last packet.
    public let lastSequenceNumber: UInt16
    /// Number of packets the frame came in.
    public let packetCount: Int
    /// True for an intra frame that a decoder can start from (payload-format specific rule).
    public let isKeyframe: Bool
    /// The 7- or 15-bit PictureID of the first packet, when the descriptor carries one.
    public let pictureID: UInt16?
    /// The temporal layer (TID) when the descriptor carries one.
    public var temporalLayerID: UInt8? = nil
    /// Layer sync (VP8 Y bit): the frame references only base-layer (TID 0) frames.
    public var isLayerSync = false
    /// TL0PICIDX (RFC 7741 §4.2, RFC 9628 §4.2): the running index of the base-layer frame this
    /// frame belongs to, when the descriptor carries one.
    public var tl0PicIdx: UInt8? = nil
    /// True when the sender marked the frame as not used for reference (VP8 N bit): losing it
    /// harms no other frame.
    public var isNonReference = false
}

/// What one `push` to a depacketizer produced.
/// Thread rule: a value type. Cost: none.
public struct RTPDepacketizeResult {
    /// A frame completed by this packet, if any.
    public var frame: RTPAssembledFrame?
    /// Frames given up by this packet because packets are missing (a sequence gap inside them,
    /// a missing start or end) or because they exceeded the depacketizer's capacity.
    public var incompleteFrames: Int = 0
    /// Packets missing between the previous packet and this one (RFC 3550 sequence gap).
    public var lostPackets: Int = 0
    /// Of `incompleteFrames`, those whose first packet arrived and said nothing references them
    /// (VP8 N bit): their loss needs no keyframe.
    public var incompleteNonReferenceFrames: Int = 0
    /// True when everything this packet revealed as lost lay inside one frame marked non-reference
    /// (VP8 N bit) and this packet starts the picture right after it (PictureID + 1): no other
    /// frame was lost, so the decoder can go on as if that frame had never been sent.
    public var lossWasOnlyNonReference = false
    /// True when the packet was ignored as older than or equal to one already seen.
    public var wasStaleOrDuplicate = false
}

/// The payload-independent core of frame reassembly from packets in sequence order: copies each
/// packet's frame bytes into one preallocated buffer, detects sequence gaps, and reports frames
/// that cannot be completed. Payload formats decide what starts and ends a frame.
/// Thread rule: one owner thread. Cost: one copy of each payload byte; allocation only in `init`.
final class RTPFrameAssembler {
    let capacity: Int
    private let storage: UnsafeMutableRawPointer
    private var expected: UInt16?
    private var assembling = false
    private var length = 0
    private var timestamp: UInt32 = 0
    private var firstSeq: UInt16 = 0
    private var packets = 0
    private var lastGivenUp: UInt32?
    private var lastCompleted: UInt32?
    var keyframe = false
    var pictureID: UInt16?
    var temporalLayerID: UInt8?
    var tl0PicIdx: UInt8?
    var nonReference = false
    var layerSync = false

    init(capacity: Int) {
        precondition(capacity > 0)
        self.capacity = capacity
        storage = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 64)
    }

    deinit { storage.deallocate() }

    var isAssembling: Bool { assembling }
    /// RTP timestamp of the last frame given up as incomplete.
    var lastGivenUpTimestamp: UInt32? { lastGivenUp }

    private func giveUp(_ ts: UInt32, _ result: inout RTPDepacketizeResult) {
        if lastGivenUp != ts && lastCompleted != ts {
            result.incompleteFrames += 1
            // Only the frame being assembled has known metadata; one that lost its start does not.
            if assembling && ts == timestamp && nonReference { result.incompleteNonReferenceFrames += 1 }
        }
        lastGivenUp = ts
        assembling = false
    }

    /// Checks ordering: returns false (and marks the result) for a stale or duplicate packet.
    func accept(sequenceNumber seq: UInt16, timestamp ts: UInt32, into result: inout RTPDepacketizeResult) -> Bool {
        if let e = expected, seq != e {
            let ahead = seq &- e
            if ahead >= 0x8000 {  // behind what we have: reordered too late or duplicated
                result.wasStaleOrDuplicate = true
                return false
            }
            result.lostPackets = Int(ahead)
            if assembling { giveUp(timestamp, &result) }
        }
        expected = seq &+ 1
        if assembling && ts != timestamp { giveUp(timestamp, &result) }  // previous frame never ended
        return true
    }

    /// Starts a new frame at this packet.
    func begin(sequenceNumber seq: UInt16, timestamp ts: UInt32) {
        assembling = true
        length = 0
        packets = 0
        timestamp = ts
        firstSeq = seq
        keyframe = false
        pictureID = nil
        temporalLayerID = nil
        tl0PicIdx = nil
        nonReference = false
        layerSync = false
    }

    /// A packet that is not a frame start arrived while no frame is being assembled: its frame
    /// lost its start.
    func dropContinuation(timestamp ts: UInt32, into result: inout RTPDepacketizeResult) {
        giveUp(ts, &result)
    }

    /// Appends frame bytes; completes the frame when `end`. Gives up when over capacity.
    func append(
        _ data: RawSpan, sequenceNumber seq: UInt16, end: Bool,
        into result: inout RTPDepacketizeResult
    ) {
        guard assembling else { return }
        let count = data.byteCount
        guard length + count <= capacity else { giveUp(timestamp, &result); return }
        if count > 0 {
            data.withUnsafeBytes { (storage + length).copyMemory(from: $0.baseAddress!, byteCount: count) }
        }
        length += count
        packets += 1
        if end {
            assembling = false
            lastCompleted = timestamp
            result.frame = RTPAssembledFrame(
                data: UnsafeRawBufferPointer(start: storage, count: length), timestamp: timestamp,
                firstSequenceNumber: firstSeq, lastSequenceNumber: seq, packetCount: packets,
                isKeyframe: keyframe, pictureID: pictureID, temporalLayerID: temporalLayerID,
                isLayerSync: layerSync, tl0PicIdx: tl0PicIdx, isNonReference: nonReference)
        }
    }
}
