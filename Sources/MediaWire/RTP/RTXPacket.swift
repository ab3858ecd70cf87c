/// The RTP retransmission payload format (RFC 4588 §4): a resent packet travels on its own SSRC
/// and payload type with its own sequence numbers; its payload starts with the original sequence
/// number (OSN, 2 bytes, network order) followed by the original payload. Timestamp, marker bit,
/// CSRCs and header extensions are those of the original packet.
///
/// Both directions work on raw packet bytes (unprotected RTP), so wrapping and unwrapping cost one
/// header copy and one payload copy, and never allocate.
/// Thread rule: stateless functions; any thread. Cost: O(packet size) copies.
public enum RTXPacket {
    /// Bytes an RTX packet adds to the packet it carries (the OSN).
    public static let overhead = 2

    /// Length of the RTP header (fixed part, CSRCs, extension) at the start of `packet`, or nil
    /// when the packet is not RTP version 2 or its header runs past the end.
    static func headerLength(_ packet: UnsafeRawBufferPointer) -> Int? {
        guard packet.count >= RTPHeader.fixedSize, packet[0] >> 6 == 2 else { return nil }
        var at = RTPHeader.fixedSize + 4 * Int(packet[0] & 0x0F)
        if packet[0] & 0x10 != 0 {
            guard at + 4 <= packet.count else { return nil }
            at += 4 + 4 * Int(packet.u16(at + 2))
        }
        return at <= packet.count ? at : nil
    }

    /// Writes the RTX packet (RFC 4588 §4) carrying `original` (an unprotected RTP packet) into
    /// `buffer`: the original header with `payloadType`, `sequenceNumber` and `ssrc` replaced, the
    /// original sequence number, then the original payload (and padding, if any). Returns the bytes
    /// written, or nil when `original` is not a valid RTP header or `buffer` is too small.
    public static func wrap(
        _ original: RawSpan, payloadType: UInt8, sequenceNumber: UInt16, ssrc: UInt32, into buffer: inout MutableRawSpan
    ) -> Int? {
        buffer.withRawBuffers(reading: original) { o, b in
            wrap(o, payloadType: payloadType, sequenceNumber: sequenceNumber, ssrc: ssrc, into: b)
        }
    }

    /// `wrap(_:payloadType:sequenceNumber:ssrc:into:)` over raw buffers, for the engine's own callers.
    package static func wrap(
        _ original: UnsafeRawBufferPointer, payloadType: UInt8, sequenceNumber: UInt16,
        ssrc: UInt32, into buffer: UnsafeMutableRawBufferPointer
    ) -> Int? {
        precondition(payloadType < 128, "RTX payload type \(payloadType) is not 7 bits")
        guard let headerSize = headerLength(original), original.count + overhead <= buffer.count,
            let src = original.baseAddress, let dst = buffer.baseAddress
        else { return nil }
        dst.copyMemory(from: src, byteCount: headerSize)
        buffer[1] = (original[1] & 0x80) | payloadType
        buffer.put16(2, sequenceNumber)
        buffer.put32(8, ssrc)
        buffer[headerSize] = original[2]
        buffer[headerSize + 1] = original[3]
        (dst + headerSize + overhead).copyMemory(from: src + headerSize, byteCount: original.count - headerSize)
        return original.count + overhead
    }

    /// Writes the original packet carried by `rtx` (an unprotected RTX packet, RFC 4588 §4) into
    /// `buffer`: its header with `payloadType` and `ssrc` of the original stream and the OSN as
    /// sequence number, then the payload after the OSN. Returns the bytes written, or nil when the
    /// packet is not valid RTP, has no room for an OSN (a padding-only packet), or `buffer` is
    /// too small: the caller drops and counts it.
    public static func unwrap(_ rtx: RawSpan, payloadType: UInt8, ssrc: UInt32, into buffer: inout MutableRawSpan) -> Int? {
        buffer.withRawBuffers(reading: rtx) { r, b in unwrap(r, payloadType: payloadType, ssrc: ssrc, into: b) }
    }

    /// `unwrap(_:payloadType:ssrc:into:)` over raw buffers, for the engine's own callers.
    package static func unwrap(
        _ rtx: UnsafeRawBufferPointer, payloadType: UInt8, ssrc: UInt32,
        into buffer: UnsafeMutableRawBufferPointer
    ) -> Int? {
        precondition(payloadType < 128, "payload type \(payloadType) is not 7 bits")
        guard let headerSize = headerLength(rtx), let src = rtx.baseAddress, let dst = buffer.baseAddress else { return nil }
        var padding = 0
        if rtx[0] & 0x20 != 0 {
            guard rtx.count > headerSize else { return nil }
            padding = Int(rtx[rtx.count - 1])
        }
        guard rtx.count - headerSize - padding >= overhead, rtx.count - overhead <= buffer.count else { return nil }
        dst.copyMemory(from: src, byteCount: headerSize)
        buffer[1] = (rtx[1] & 0x80) | payloadType
        buffer[2] = rtx[headerSize]
        buffer[3] = rtx[headerSize + 1]
        buffer.put32(8, ssrc)
        let rest = rtx.count - headerSize - overhead
        (dst + headerSize).copyMemory(from: src + headerSize + overhead, byteCount: rest)
        return headerSize + rest
    }

    /// Whether an RTX packet carries only padding (RFC 3550 §5.1: its padding covers everything
    /// after the header), so no original packet. False for a malformed header.
    public static func isPaddingOnly(_ rtx: RawSpan) -> Bool {
        rtx.withUnsafeBytes { rtx in
            guard let h = headerLength(rtx), rtx[0] & 0x20 != 0, rtx.count > h else { return false }
            return Int(rtx[rtx.count - 1]) >= rtx.count - h
        }
    }

    /// The original sequence number an RTX packet carries, or nil when it carries none.
    public static func originalSequenceNumber(_ rtx: RawSpan) -> UInt16? {
        rtx.withUnsafeBytes { rtx in
            guard let h = headerLength(rtx), rtx.count >= h + overhead else { return nil }
            return UInt16(rtx[h]) << 8 | UInt16(rtx[h + 1])
        }
    }
}
