/// An RTCP generic NACK (RFC 4585 §6.2.1, PT 205 FMT 1): lost packets of one media source as
/// (PID, BLP) pairs, each naming PID and up to 16 following sequence numbers in a bitmask.
/// Thread rule: a value type. Cost: parse and the list helpers allocate (control path).
public struct RTCPGenericNack: Sendable, Equatable {
    /// One FCI entry (RFC 4585 §6.2.1): PID lost, and bit i of BLP set when PID+i+1 is lost too.
    public struct Pair: Sendable, Equatable {
        /// Packet ID: a lost sequence number.
        public var packetID: UInt16
        /// Bitmask of following lost packets.
        public var lostBitmask: UInt16
        /// One FCI entry: the first lost sequence number and the bitmask of the 16 after it.
        public init(packetID: UInt16, lostBitmask: UInt16) { self.packetID = packetID; self.lostBitmask = lostBitmask }
    }

    /// SSRC of the packet sender (the receiver asking).
    public var senderSSRC: UInt32
    /// SSRC of the media source whose packets are lost.
    public var mediaSSRC: UInt32
    /// FCI entries.
    public var pairs: [Pair]

    /// Makes a NACK from FCI pairs.
    public init(senderSSRC: UInt32, mediaSSRC: UInt32, pairs: [Pair]) {
        self.senderSSRC = senderSSRC; self.mediaSSRC = mediaSSRC; self.pairs = pairs
    }

    /// Makes a NACK for a list of lost sequence numbers (order free, duplicates ignored, wrap
    /// handled as in `pairs(from:)`).
    public init(senderSSRC: UInt32, mediaSSRC: UInt32, lost: [UInt16]) {
        self.init(senderSSRC: senderSSRC, mediaSSRC: mediaSSRC, pairs: Self.pairs(from: lost))
    }

    /// Compresses lost sequence numbers into the fewest (PID, BLP) pairs, greedily from the
    /// oldest (RFC 4585 §6.2.1). The list may be in any order; it is ordered in wrap-around order
    /// starting after the largest gap between its numbers, so a list spanning 65535 -> 0 (and
    /// covering less than half the sequence space) comes out oldest first.
    public static func pairs(from lost: [UInt16]) -> [Pair] {
        let unique = Set(lost).sorted()
        guard !unique.isEmpty else { return [] }
        // The oldest number follows the largest cyclic gap.
        var start = 0
        var widest = Int(unique[0]) + 65536 - Int(unique[unique.count - 1])
        for i in 1..<unique.count where Int(unique[i]) - Int(unique[i - 1]) > widest {
            widest = Int(unique[i]) - Int(unique[i - 1])
            start = i
        }
        var out: [Pair] = []
        for k in 0..<unique.count {
            let s = unique[(start + k) % unique.count]
            if var last = out.last {
                let d = s &- last.packetID
                if d >= 1 && d <= 16 {
                    last.lostBitmask |= 1 << (d - 1)
                    out[out.count - 1] = last
                    continue
                }
            }
            out.append(Pair(packetID: s, lostBitmask: 0))
        }
        return out
    }

    /// Expands the pairs back into lost sequence numbers, in pair order.
    public var lostSequenceNumbers: [UInt16] {
        var out: [UInt16] = []
        for p in pairs {
            out.append(p.packetID)
            for i in 0..<16 where p.lostBitmask & (1 << i) != 0 { out.append(p.packetID &+ UInt16(i + 1)) }
        }
        return out
    }

    /// Bytes on the wire: 12 + 4 per pair.
    public var marshalSize: Int { 12 + 4 * pairs.count }

    /// Writes the packet; returns `marshalSize`.
    @discardableResult
    package func marshal(into out: inout OutputRawSpan) -> Int {
        precondition(out.freeCapacity >= marshalSize)
        RTCPHeader(count: 1, packetType: .transportFeedback, packetSize: marshalSize).marshal(into: &out)
        out.appendU32(senderSSRC); out.appendU32(mediaSSRC)
        for p in pairs { out.appendU16(p.packetID); out.appendU16(p.lostBitmask) }
        return marshalSize
    }

    /// Parses one generic NACK. Throws `wrongPacketType` for another type/FMT and
    /// `badRTCPLength` when the FCI is not a whole number of pairs or is empty (RFC 4585 §6.2.1
    /// requires at least one).
    package init(parsing bytes: RawSpan) throws(RTPError) {
        let (_, range) = try RTCPHeader.expect(bytes, .transportFeedback, fmt: 1, minBody: 12, what: "generic NACK")
        let body = bytes.extracting(range)
        guard body.byteCount % 4 == 0 else {
            throw RTPError(.badRTCPLength, "generic NACK FCI of \(body.byteCount - 8) bytes is not whole 4-byte entries")
        }
        senderSSRC = body.u32(0); mediaSSRC = body.u32(4)
        pairs = stride(from: 8, to: body.byteCount, by: 4).map { Pair(packetID: body.u16($0), lostBitmask: body.u16($0 + 2)) }
    }
}
