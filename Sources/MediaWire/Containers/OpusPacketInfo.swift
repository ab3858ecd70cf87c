/// Reads the duration of an Opus packet from its TOC byte, without decoding (RFC 6716 §3.1-3.2):
/// the Ogg Opus reader needs packet durations to place granule positions and trim the ends.
/// Thread rule: pure functions. Cost: reads at most two bytes.
public enum OpusPacketInfo {
    /// Samples at 48 kHz of one frame for a TOC byte's configuration (RFC 6716 §3.1, Table 2):
    /// SILK-only 10/20/40/60 ms, hybrid 10/20 ms, CELT-only 2.5/5/10/20 ms.
    public static func frameSamples(toc: UInt8) -> Int {
        let config = Int(toc >> 3)
        switch config {
        case 0..<12: return [480, 960, 1920, 2880][config & 3]
        case 12..<16: return [480, 960][config & 1]
        default: return [120, 240, 480, 960][config & 3]
        }
    }

    /// Number of frames in the packet (RFC 6716 §3.2: code 0 one, codes 1-2 two, code 3 the count
    /// in the second byte), nil when the packet is empty or malformed.
    public static func frameCount(_ packet: RawSpan) -> Int? {
        guard packet.byteCount >= 1 else { return nil }
        switch packet.u8(0) & 3 {
        case 0: return 1
        case 1, 2: return 2
        default:
            guard packet.byteCount >= 2 else { return nil }
            let m = Int(packet.u8(1) & 0x3F)
            return m == 0 ? nil : m
        }
    }

    /// Duration of the packet in samples at 48 kHz; nil for an empty or malformed packet or one
    /// longer than the 120 ms RFC 6716 §3.2.5 allows.
    public static func sampleCount(_ packet: RawSpan) -> Int? {
        guard let frames = frameCount(packet) else { return nil }
        let n = frames * frameSamples(toc: packet.u8(0))
        return n <= 5760 ? n : nil
    }

    /// Array convenience for `sampleCount(_:)`.
    public static func sampleCount(_ packet: [UInt8]) -> Int? {
        sampleCount(packet.span.bytes)
    }
}
