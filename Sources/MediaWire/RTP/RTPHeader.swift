/// The RFC 3550 §5.1 fixed RTP header plus its CSRC list and RFC 8285 header extension elements.
///
/// Build one per stream, change `sequenceNumber`, `timestamp` and `marker` per packet and
/// `marshal(into:)` it in front of the payload; parsing goes through `RTPPacket(parsing:)`.
/// The version is always 2 (RFC 3550 §5.1 "V"). Thread rule: a value type.
/// Cost: marshalling writes `marshalSize` bytes and never allocates; `csrcs` allocates only
/// when non-empty (mixers), which this engine never does on its send path.
public struct RTPHeader: Sendable, Equatable {
    /// RFC 3550 §5.1 "P": the packet ends with padding. `RTPPacket.marshal` sets it from its
    /// `paddingSize`; `marshal(into:)` writes this value as given.
    public var padding: Bool
    /// RFC 3550 §5.1 "M": for video the last packet of a frame (RFC 7741 §4.1), for audio the
    /// first packet after silence (RFC 3551 §4.1).
    public var marker: Bool
    /// RFC 3550 §5.1 "PT", 7 bits (0...127).
    public var payloadType: UInt8
    /// RFC 3550 §5.1 "sequence number", increments by one per packet and wraps.
    public var sequenceNumber: UInt16
    /// RFC 3550 §5.1 "timestamp" in the payload format's clock (90 kHz video, 48 kHz Opus).
    public var timestamp: UInt32
    /// RFC 3550 §5.1 "SSRC".
    public var ssrc: UInt32
    /// RFC 3550 §5.1 CSRC list, at most 15 entries.
    public var csrcs: [UInt32]
    /// RFC 8285 header extension elements (RFC 3550 §5.3.1 "X" is set when non-empty).
    public var extensions: RTPHeaderExtensions

    /// Makes a header; every field defaults to zero/empty.
    public init(
        padding: Bool = false, marker: Bool = false, payloadType: UInt8 = 0,
        sequenceNumber: UInt16 = 0, timestamp: UInt32 = 0, ssrc: UInt32 = 0,
        csrcs: [UInt32] = [], extensions: RTPHeaderExtensions = RTPHeaderExtensions()
    ) {
        self.padding = padding
        self.marker = marker
        self.payloadType = payloadType
        self.sequenceNumber = sequenceNumber
        self.timestamp = timestamp
        self.ssrc = ssrc
        self.csrcs = csrcs
        self.extensions = extensions
    }

    /// RFC 3550 §5.1: the fixed header is 12 bytes.
    public static let fixedSize = 12

    /// Bytes `marshal(into:)` writes: 12 + 4 per CSRC + the extension block.
    public var marshalSize: Int { Self.fixedSize + 4 * csrcs.count + extensions.marshalSize }

    /// The largest payload (including any payload descriptor) that keeps a packet with this
    /// header within `mtu` bytes.
    public func maxPayloadSize(mtu: Int) -> Int { mtu - marshalSize }

    /// Parses the header of an RTP packet (convenience over `RTPPacket(parsing:)`, which also
    /// validates padding). Throws the same errors.
    public init(parsing bytes: RawSpan) throws(RTPError) {
        self = try RTPPacket(parsing: bytes).header
    }

    /// Appends the header to `out` in network byte order and returns its size (`marshalSize`).
    /// Traps when `out` has less free capacity than that, `payloadType` exceeds 127 or there are
    /// more than 15 CSRCs: those are programming errors. Cost: no allocation.
    @discardableResult
    public func marshal(into out: inout OutputRawSpan) -> Int {
        let size = marshalSize
        precondition(out.freeCapacity >= size, "\(out.freeCapacity) bytes of room too few for a \(size)-byte RTP header")
        precondition(payloadType < 128, "RTP payload type \(payloadType) is not 7 bits")
        precondition(csrcs.count <= 15, "more than 15 CSRCs")
        let x: UInt8 = extensions.isEmpty ? 0 : 0x10
        out.appendU8(0x80 | (padding ? 0x20 : 0) | x | UInt8(csrcs.count))
        out.appendU8((marker ? 0x80 : 0) | payloadType)
        out.appendU16(sequenceNumber)
        out.appendU32(timestamp)
        out.appendU32(ssrc)
        for c in csrcs { out.appendU32(c) }
        extensions.marshal(into: &out)
        return size
    }
}
