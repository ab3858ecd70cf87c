/// The packets one encoded frame becomes under a payload format: how many, how large, and how to
/// write each packet's payload (descriptor and fragment) from the frame's bytes.
///
/// A plan (`VP8FramePackets`, `VP9FramePackets`, `OpusFramePackets`) holds sizes and descriptors
/// only, never the frame: each write is handed the frame's bytes, which must be the `frameSize`
/// bytes the plan was made for.
/// Thread rule: value types, freely shared. Cost: writing copies the fragment once.
public protocol RTPFramePayloads: Sendable {
    /// Number of RTP packets the frame is split into (at least 1).
    var count: Int { get }
    /// Bytes of the frame the plan splits.
    var frameSize: Int { get }
    /// Bytes `writePayload(at:of:into:)` appends for packet `index`.
    func payloadSize(at index: Int) -> Int
    /// Appends packet `index`'s RTP payload, cut from `frame`, to `output`. Traps when `frame` is
    /// not `frameSize` bytes or `output` lacks `payloadSize(at:)` bytes of room.
    func writePayload(at index: Int, of frame: RawSpan, into output: inout OutputRawSpan)
    /// Whether `writePacket` sets the marker on the last packet and clears it on the others
    /// (video, RFC 7741 §4.1 / RFC 9628 §4.1) or leaves the caller's marker alone (audio).
    var setsMarkerOnLastPacket: Bool { get }
}

extension RTPFramePayloads {
    /// Video formats mark the frame's last packet.
    public var setsMarkerOnLastPacket: Bool { true }

    /// Appends packet `index` whole to `output`: `header` (for video with the marker bit set on
    /// the frame's last packet, RFC 7741 §4.1, RFC 9628 §4.1, and cleared otherwise), then its
    /// payload cut from `frame`. The caller sets `sequenceNumber` and `timestamp` first. Returns
    /// the packet's size. No allocation.
    @discardableResult
    public func writePacket(
        at index: Int, header: inout RTPHeader, of frame: RawSpan, into output: inout OutputRawSpan
    ) -> Int {
        if setsMarkerOnLastPacket { header.marker = index == count - 1 }
        let start = output.byteCount
        _ = header.marshal(into: &output)
        writePayload(at: index, of: frame, into: &output)
        return output.byteCount - start
    }
}

/// Splits `dataSize` bytes over as few packets as fit, with sizes differing by at most one byte.
///
/// Each packet also carries `overhead` bytes (a payload descriptor) and the first packet
/// `firstExtra` more (a VP9 scalability structure), all counted so that whole payload sizes
/// differ by at most one byte and none exceeds `maxPayloadSize` (libwebrtc's
/// `RtpPacketizer::SplitAboutEqually` does the same for its formats).
/// Thread rule: a value type. Cost: O(1) per query.
public struct RTPEvenSplit: Sendable, Equatable {
    /// Bytes of frame data split.
    public let dataSize: Int
    /// Per-packet payload overhead.
    public let overhead: Int
    /// Extra overhead in the first packet.
    public let firstExtra: Int
    /// Number of packets.
    public let count: Int
    private let base: Int
    private let longer: Int

    /// Plans the split. Traps when `maxPayloadSize` leaves no room for data (a configuration error).
    public init(dataSize: Int, maxPayloadSize: Int, overhead: Int, firstExtra: Int = 0) {
        precondition(dataSize >= 0)
        let room = maxPayloadSize - overhead
        // With n >= 2 packets each carries at least room/2 data bytes, so the first packet keeps
        // data after its extra overhead as long as the extra is below half the room.
        precondition(room > 0 && 2 * firstExtra < room, "MTU leaves no room for payload data")
        self.dataSize = dataSize
        self.overhead = overhead
        self.firstExtra = firstExtra
        let n = max(1, (dataSize + firstExtra + room - 1) / room)
        count = n
        let total = dataSize + firstExtra + n * overhead
        base = total / n
        longer = total % n
    }

    /// Whole payload bytes of packet `i` (descriptor + data), differing by at most 1 between packets.
    public func payloadSize(at i: Int) -> Int { base + (i < longer ? 1 : 0) }

    /// The frame bytes packet `i` carries.
    public func dataRange(at i: Int) -> Range<Int> {
        // Data before packet i: sum of payload sizes before i minus their overheads.
        let before = i * base + min(i, longer) - i * overhead - (i > 0 ? firstExtra : 0)
        let size = payloadSize(at: i) - overhead - (i == 0 ? firstExtra : 0)
        return before..<(before + size)
    }
}
