/// An RTCP source description (RFC 3550 §6.5, PT 202): per SSRC a list of items such as CNAME.
/// Thread rule: a value type. Cost: parse allocates strings (control path).
public struct RTCPSourceDescription: Sendable, Equatable {
    /// RFC 3550 §6.5 item types.
    public struct ItemType: RawRepresentable, Sendable, Hashable {
        /// The item type byte as on the wire.
        public var rawValue: UInt8
        /// The value with this raw code.
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// 1, canonical name (RFC 3550 §6.5.1).
        public static let cname = ItemType(rawValue: 1)
        /// 2, user name (RFC 3550 §6.5.2).
        public static let name = ItemType(rawValue: 2)
        /// 8, private extension (RFC 3550 §6.5.8).
        public static let priv = ItemType(rawValue: 8)
    }

    /// One SDES item: type and up to 255 bytes of UTF-8 text.
    public struct Item: Sendable, Equatable {
        /// What the item says (CNAME, NAME, PRIV...).
        public var type: ItemType
        /// The item's UTF-8 text, at most 255 bytes.
        public var text: [UInt8]
        /// Makes an item from a string (traps over 255 bytes).
        public init(type: ItemType, _ text: String) {
            self.type = type; self.text = Array(text.utf8)
            precondition(self.text.count <= 255, "SDES item longer than 255 bytes")
        }
        /// Makes an item from raw bytes.
        public init(type: ItemType, bytes: [UInt8]) { self.type = type; self.text = bytes }
    }

    /// One chunk: an SSRC and its items.
    public struct Chunk: Sendable, Equatable {
        /// The source the items describe.
        public var ssrc: UInt32
        /// The chunk's items, in order.
        public var items: [Item]
        /// A chunk for `ssrc` with `items` (RFC 3550 §6.5).
        public init(ssrc: UInt32, items: [Item]) { self.ssrc = ssrc; self.items = items }
        /// RFC 3550 §6.5: SSRC, items, then at least one null byte padding to a 32-bit boundary.
        var size: Int {
            let raw = 4 + items.reduce(0) { $0 + 2 + $1.text.count } + 1
            return (raw + 3) & ~3
        }
        /// The CNAME text, if any.
        public var cname: String? {
            items.first { $0.type == .cname }.map { String(decoding: $0.text, as: UTF8.self) }
        }
    }

    /// The chunks, at most 31.
    public var chunks: [Chunk]

    /// Makes an SDES packet.
    public init(chunks: [Chunk]) { self.chunks = chunks }

    /// The common case: one SSRC with its CNAME (RFC 3550 §6.5.1, required in every compound).
    public init(ssrc: UInt32, cname: String) { chunks = [Chunk(ssrc: ssrc, items: [Item(type: .cname, cname)])] }

    /// Bytes on the wire.
    public var marshalSize: Int { 4 + chunks.reduce(0) { $0 + $1.size } }

    /// Writes the packet; returns `marshalSize`.
    @discardableResult
    package func marshal(into out: inout OutputRawSpan) -> Int {
        let size = marshalSize
        precondition(chunks.count < 32 && out.freeCapacity >= size)
        RTCPHeader(count: UInt8(chunks.count), packetType: .sourceDescription, packetSize: size).marshal(into: &out)
        var at = 4
        for c in chunks {
            let start = at
            out.appendU32(c.ssrc); at += 4
            for item in c.items {
                out.appendU8(item.type.rawValue); out.appendU8(UInt8(item.text.count)); at += 2
                out.appendBytes(item.text.span.bytes)
                at += item.text.count
            }
            out.appendZeros(start + c.size - at)
            at = start + c.size
        }
        return at
    }

    /// Parses one SDES packet. Throws `badRTCPPacket` when an item runs past its chunk or a
    /// chunk lacks its terminating null item, `badRTCPLength` when chunks do not fit.
    package init(parsing bytes: RawSpan) throws(RTPError) {
        let (h, range) = try RTCPHeader.expect(bytes, .sourceDescription, minBody: 0, what: "source description")
        let body = bytes.extracting(range)
        chunks = []
        var at = 0
        for _ in 0..<Int(h.count) {
            guard at + 4 <= body.byteCount else {
                throw RTPError(
                    .badRTCPLength,
                    "SDES announces \(h.count) chunks but its \(body.byteCount)-byte body ends at chunk \(chunks.count)")
            }
            var chunk = Chunk(ssrc: body.u32(at), items: [])
            at += 4
            while true {
                guard at < body.byteCount else {
                    throw RTPError(
                        .badRTCPPacket, "SDES chunk for SSRC \(chunk.ssrc) has no terminating null item (RFC 3550 §6.5)")
                }
                let t = body.u8(at)
                if t == 0 { at = (at + 4) & ~3; break }  // null item, then pad to 32 bits
                guard at + 2 <= body.byteCount, at + 2 + Int(body.u8(at + 1)) <= body.byteCount else {
                    throw RTPError(.badRTCPPacket, "SDES item type \(t) at offset \(at) runs past the packet")
                }
                let n = Int(body.u8(at + 1))
                chunk.items.append(Item(type: ItemType(rawValue: t), bytes: body.array(at + 2, n)))
                at += 2 + n
            }
            chunks.append(chunk)
        }
    }
}
