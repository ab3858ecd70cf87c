/// An RTCP goodbye (RFC 3550 §6.6, PT 203): sources leaving, with an optional reason.
/// Thread rule: a value type. Cost: parse allocates (control path).
public struct RTCPGoodbye: Sendable, Equatable {
    /// SSRCs/CSRCs that leave, at most 31.
    public var sources: [UInt32]
    /// Optional reason text (at most 255 bytes of UTF-8).
    public var reason: String?

    /// Makes a BYE.
    public init(sources: [UInt32], reason: String? = nil) { self.sources = sources; self.reason = reason }

    /// Bytes on the wire.
    public var marshalSize: Int {
        let r = reason.map { 1 + $0.utf8.count } ?? 0
        return 4 + 4 * sources.count + (r + 3) & ~3
    }

    /// Writes the packet; returns `marshalSize`.
    @discardableResult
    package func marshal(into out: inout OutputRawSpan) -> Int {
        let size = marshalSize
        precondition(sources.count < 32 && out.freeCapacity >= size && (reason?.utf8.count ?? 0) <= 255)
        RTCPHeader(count: UInt8(sources.count), packetType: .goodbye, packetSize: size).marshal(into: &out)
        var at = 4
        for s in sources { out.appendU32(s); at += 4 }
        if let reason {
            out.appendU8(UInt8(reason.utf8.count)); at += 1
            for ch in reason.utf8 { out.appendU8(ch); at += 1 }
        }
        out.appendZeros(size - at)
        return size
    }

    /// Parses one BYE packet. Throws `badRTCPLength` when the sources or reason do not fit; a
    /// reason that is not valid UTF-8 is left out (`reason` nil), the BYE itself still counts.
    package init(parsing bytes: RawSpan) throws(RTPError) {
        let (h, range) = try RTCPHeader.expect(bytes, .goodbye, minBody: 0, what: "goodbye")
        let body = bytes.extracting(range)
        let n = Int(h.count)
        guard 4 * n <= body.byteCount else {
            throw RTPError(.badRTCPLength, "BYE announces \(n) sources but its body has \(body.byteCount) bytes")
        }
        sources = (0..<n).map { body.u32(4 * $0) }
        reason = nil
        if body.byteCount > 4 * n {
            let len = Int(body.u8(4 * n))
            guard 4 * n + 1 + len <= body.byteCount else {
                throw RTPError(.badRTCPLength, "BYE reason of \(len) bytes runs past the packet")
            }
            // RFC 3550 §6.6: the reason is UTF-8. Invalid bytes are dropped with the reason rather
            // than repaired: U+FFFD repairs can grow it past the 255 bytes `marshal` accepts.
            if len > 0 { reason = String(validating: body.array(4 * n + 1, len), as: UTF8.self) }
        }
    }
}
