/// An RTCP picture loss indication (RFC 4585 §6.3.1, PT 206 FMT 1): the receiver lost picture
/// data of `mediaSSRC` and asks for a key frame. No FCI.
/// Thread rule: a value type. Cost: 12 bytes, no allocation.
public struct RTCPPictureLossIndication: Sendable, Equatable {
    /// SSRC of the packet sender.
    public var senderSSRC: UInt32
    /// SSRC of the media source.
    public var mediaSSRC: UInt32

    /// Makes a PLI.
    public init(senderSSRC: UInt32, mediaSSRC: UInt32) { self.senderSSRC = senderSSRC; self.mediaSSRC = mediaSSRC }

    /// Bytes on the wire.
    public var marshalSize: Int { 12 }

    /// Writes the packet; returns 12.
    @discardableResult
    package func marshal(into out: inout OutputRawSpan) -> Int {
        precondition(out.freeCapacity >= 12)
        RTCPHeader(count: 1, packetType: .payloadFeedback, packetSize: 12).marshal(into: &out)
        out.appendU32(senderSSRC); out.appendU32(mediaSSRC)
        return 12
    }

    /// Parses one PLI. Throws `wrongPacketType` or `badRTCPLength`.
    package init(parsing bytes: RawSpan) throws(RTPError) {
        let (_, range) = try RTCPHeader.expect(bytes, .payloadFeedback, fmt: 1, minBody: 8, what: "PLI")
        let body = bytes.extracting(range)
        senderSSRC = body.u32(0); mediaSSRC = body.u32(4)
    }
}

/// An RTCP full intra request (RFC 5104 §4.3.1, PT 206 FMT 4): per target SSRC a command
/// sequence number that the sender increments for each new request (§4.3.1.2).
/// Thread rule: a value type. Cost: parse allocates the entry array (control path).
public struct RTCPFullIntraRequest: Sendable, Equatable {
    /// One FCI entry: the SSRC asked to send a decoder refresh point and the request's number.
    public struct Entry: Sendable, Equatable {
        /// The media source asked to send a decoder refresh point.
        public var ssrc: UInt32
        /// Command sequence number; a repeated number is a retransmission of the same request.
        public var sequenceNumber: UInt8
        /// A FIR entry for the media source `ssrc` with command sequence number `sequenceNumber`.
        public init(ssrc: UInt32, sequenceNumber: UInt8) { self.ssrc = ssrc; self.sequenceNumber = sequenceNumber }
    }

    /// SSRC of the packet sender.
    public var senderSSRC: UInt32
    /// Entries (RFC 5104 §4.3.1.1: the media source SSRC field is 0, targets are in the FCI).
    public var entries: [Entry]

    /// Makes a FIR.
    public init(senderSSRC: UInt32, entries: [Entry]) { self.senderSSRC = senderSSRC; self.entries = entries }

    /// Bytes on the wire: 12 + 8 per entry.
    public var marshalSize: Int { 12 + 8 * entries.count }

    /// Writes the packet; returns `marshalSize`.
    @discardableResult
    package func marshal(into out: inout OutputRawSpan) -> Int {
        precondition(out.freeCapacity >= marshalSize)
        RTCPHeader(count: 4, packetType: .payloadFeedback, packetSize: marshalSize).marshal(into: &out)
        out.appendU32(senderSSRC); out.appendU32(0)
        for e in entries {
            out.appendU32(e.ssrc); out.appendU8(e.sequenceNumber); out.appendZeros(3)
        }
        return marshalSize
    }

    /// Parses one FIR. Throws `wrongPacketType`, or `badRTCPLength` when the FCI is not whole
    /// 8-byte entries or is empty.
    package init(parsing bytes: RawSpan) throws(RTPError) {
        let (_, range) = try RTCPHeader.expect(bytes, .payloadFeedback, fmt: 4, minBody: 16, what: "FIR")
        let body = bytes.extracting(range)
        guard (body.byteCount - 8) % 8 == 0 else {
            throw RTPError(
                .badRTCPLength, "FIR FCI of \(body.byteCount - 8) bytes is not whole 8-byte entries (RFC 5104 §4.3.1.1)")
        }
        senderSSRC = body.u32(0)
        entries = stride(from: 8, to: body.byteCount, by: 8).map { Entry(ssrc: body.u32($0), sequenceNumber: body.u8($0 + 4)) }
    }
}
