/// Transport-wide congestion control feedback (draft-holmer-rmcat-transport-wide-cc-extensions-01
/// §3.1, RTCP PT 205 FMT 15): for a range of transport-wide sequence numbers, whether each packet
/// arrived and its arrival time delta, so the sender can estimate bandwidth from queueing delay.
///
/// Packet status chunks (§3.1.3 run length, §3.1.4 status vector with 1- or 2-bit symbols) and
/// receive deltas (§3.1.5: 1 byte unsigned for "small", 2 bytes signed for "large", both in
/// 250 µs units) are chosen automatically when marshalling. The packet is aligned to 32 bits with
/// the §3.1 "zero padding" inside its length, never with the RFC 3550 P bit: RFC 3550 §6.4.1 allows
/// P only on the last packet of a compound, and a feedback packet may sit anywhere in one.
/// Thread rule: a value type. Cost: parse and marshal allocate arrays (control path, a few per
/// second).
public struct RTCPTransportFeedback: Sendable, Equatable {
    /// One packet's fate.
    public struct PacketResult: Sendable, Equatable {
        /// Receive time delta in 250 µs units from the previous received packet (the first one
        /// from `referenceTime`), or nil when the packet was not received.
        public var receiveDelta: Int16?
        /// Makes a result; `nil` means lost.
        public init(receiveDelta: Int16?) { self.receiveDelta = receiveDelta }
        /// §3.1.1 symbol: 0 not received, 1 small delta (0...255), 2 large or negative delta.
        var symbol: UInt8 {
            guard let d = receiveDelta else { return 0 }
            return d >= 0 && d <= 255 ? 1 : 2
        }
    }

    /// SSRC of the packet sender.
    public var senderSSRC: UInt32
    /// SSRC of the media source (libwebrtc sends the first media SSRC; informational).
    public var mediaSSRC: UInt32
    /// Transport-wide sequence number of `packets[0]`.
    public var baseSequenceNumber: UInt16
    /// §3.1 "reference time": 24-bit signed, in multiples of 64 ms.
    public var referenceTime: Int32
    /// §3.1 "feedback packet count": increments per feedback packet sent, to detect lost feedback.
    public var feedbackPacketCount: UInt8
    /// Results for sequence numbers `baseSequenceNumber`, `+1`, ... (at most 65535).
    public var packets: [PacketResult]

    /// Makes a feedback message.
    public init(
        senderSSRC: UInt32, mediaSSRC: UInt32, baseSequenceNumber: UInt16, referenceTime: Int32,
        feedbackPacketCount: UInt8, packets: [PacketResult]
    ) {
        precondition(referenceTime >= -0x80_0000 && referenceTime <= 0x7F_FFFF, "reference time exceeds 24 bits")
        precondition(!packets.isEmpty && packets.count <= 0xFFFF, "transport feedback needs 1...65535 packets")
        self.senderSSRC = senderSSRC; self.mediaSSRC = mediaSSRC
        self.baseSequenceNumber = baseSequenceNumber; self.referenceTime = referenceTime
        self.feedbackPacketCount = feedbackPacketCount; self.packets = packets
    }

    /// The packet status chunks (§3.1.2-§3.1.4) covering `packets`, greedily: a run-length chunk
    /// for runs of 14 or more equal symbols, else a 14-symbol 1-bit vector when no large delta is
    /// among the next 14, else a 7-symbol 2-bit vector.
    package var chunks: [UInt16] {
        let symbols = packets.map(\.symbol)
        var out: [UInt16] = []
        var i = 0
        while i < symbols.count {
            var run = 1
            while i + run < symbols.count && symbols[i + run] == symbols[i] && run < 0x1FFF { run += 1 }
            if run >= 14 {
                out.append(UInt16(symbols[i]) << 13 | UInt16(run))  // T=0: run length chunk
                i += run
            } else if !symbols[i..<min(i + 14, symbols.count)].contains(2) {
                var c: UInt16 = 0x8000  // T=1, S=0: fourteen 1-bit symbols
                for k in 0..<14 where i + k < symbols.count && symbols[i + k] == 1 { c |= 1 << (13 - k) }
                out.append(c)
                i += 14
            } else {
                var c: UInt16 = 0xC000  // T=1, S=1: seven 2-bit symbols
                for k in 0..<7 where i + k < symbols.count { c |= UInt16(symbols[i + k]) << (12 - 2 * k) }
                out.append(c)
                i += 7
            }
        }
        return out
    }

    private var unpaddedSize: Int {
        let deltas = packets.reduce(0) { $0 + ($1.symbol == 0 ? 0 : Int($1.symbol)) }
        return 20 + 2 * chunks.count + deltas
    }

    /// Bytes on the wire (zero-padded to 32 bits).
    public var marshalSize: Int { (unpaddedSize + 3) & ~3 }

    /// Writes the packet; returns `marshalSize`. Up to 3 zero bytes after the last receive delta
    /// align it to 32 bits (draft §3.1 "zero padding"; the P bit stays clear, see the type's note).
    @discardableResult
    package func marshal(into out: inout OutputRawSpan) -> Int {
        let size = marshalSize, raw = unpaddedSize
        precondition(out.freeCapacity >= size)
        RTCPHeader(count: 15, packetType: .transportFeedback, packetSize: size).marshal(into: &out)
        out.appendU32(senderSSRC); out.appendU32(mediaSSRC)
        out.appendU16(baseSequenceNumber); out.appendU16(UInt16(packets.count))
        out.appendU24(UInt32(bitPattern: referenceTime) & 0xFF_FFFF); out.appendU8(feedbackPacketCount)
        for c in chunks { out.appendU16(c) }
        for p in packets {
            switch p.symbol {
            case 1: out.appendU8(UInt8(p.receiveDelta!))
            case 2: out.appendU16(UInt16(bitPattern: p.receiveDelta!))
            default: break
            }
        }
        out.appendZeros(size - raw)
        return size
    }

    /// Parses one transport feedback packet. Bytes after the last receive delta (the draft's zero
    /// padding, or libwebrtc's RFC 3550 P-bit padding, which `RTCPHeader.body` strips) are ignored.
    /// Throws `wrongPacketType`, `badRTCPLength` when chunks
    /// or deltas run past the packet, and `badRTCPPacket` for the reserved 2-bit symbol 11 or a
    /// zero status count.
    package init(parsing bytes: RawSpan) throws(RTPError) {
        let (_, range) = try RTCPHeader.expect(bytes, .transportFeedback, fmt: 15, minBody: 16, what: "transport-cc feedback")
        let body = bytes.extracting(range)
        senderSSRC = body.u32(0); mediaSSRC = body.u32(4)
        baseSequenceNumber = body.u16(8)
        let count = Int(body.u16(10))
        referenceTime = Int32(bitPattern: body.u24(12) << 8) >> 8
        feedbackPacketCount = body.u8(15)
        guard count > 0 else { throw RTPError(.badRTCPPacket, "transport-cc feedback has a zero packet status count") }
        var symbols: [UInt8] = []
        symbols.reserveCapacity(count)
        var at = 16
        while symbols.count < count {
            guard at + 2 <= body.byteCount else {
                throw RTPError(.badRTCPLength, "transport-cc status chunks end after \(symbols.count) of \(count) packets")
            }
            let c = body.u16(at); at += 2
            if c & 0x8000 == 0 {
                let s = UInt8((c >> 13) & 3), run = Int(c & 0x1FFF)
                guard s != 3 else { throw RTPError(.badRTCPPacket, "transport-cc run length chunk with reserved symbol 11") }
                for _ in 0..<min(run, count - symbols.count) { symbols.append(s) }
            } else if c & 0x4000 == 0 {
                for k in 0..<14 where symbols.count < count { symbols.append(UInt8((c >> (13 - k)) & 1)) }
            } else {
                for k in 0..<7 where symbols.count < count {
                    let s = UInt8((c >> (12 - 2 * k)) & 3)
                    guard s != 3 else { throw RTPError(.badRTCPPacket, "transport-cc status vector with reserved symbol 11") }
                    symbols.append(s)
                }
            }
        }
        var results: [PacketResult] = []
        results.reserveCapacity(count)
        for s in symbols {
            switch s {
            case 0: results.append(PacketResult(receiveDelta: nil))
            case 1:
                guard at + 1 <= body.byteCount else {
                    throw RTPError(.badRTCPLength, "transport-cc receive deltas run past the packet")
                }
                results.append(PacketResult(receiveDelta: Int16(body.u8(at)))); at += 1
            default:
                guard at + 2 <= body.byteCount else {
                    throw RTPError(.badRTCPLength, "transport-cc receive deltas run past the packet")
                }
                results.append(PacketResult(receiveDelta: Int16(bitPattern: body.u16(at)))); at += 2
            }
        }
        packets = results
    }
}
