/// The Opus RTP payload format (RFC 7587): one Opus packet per RTP packet, no payload header,
/// a 48 kHz RTP clock whatever the coded bandwidth (§4.1), and the marker bit only on the first
/// packet after DTX silence (§4.2 via RFC 3551 §4.1).
/// Thread rule: stateless. Cost: O(1).
public enum OpusPayload {
    /// RFC 7587 §4.1: the RTP clock rate is always 48 000 Hz.
    public static let clockRate = 48_000

    /// Plans one encoded Opus packet of `frameSize` bytes as the single payload of its RTP packet
    /// (RFC 7587 §4.2). Traps when it does not fit `maxPayloadSize` (Opus packets are at most 1275
    /// bytes per frame, far below a 1200-byte MTU at normal bitrates) or is empty.
    public static func packetize(frameSize: Int, maxPayloadSize: Int) -> OpusFramePackets {
        precondition(
            frameSize > 0 && frameSize <= maxPayloadSize,
            "Opus packet of \(frameSize) bytes does not fit a \(maxPayloadSize)-byte payload")
        return OpusFramePackets(frameSize: frameSize)
    }

    /// Where the Opus packet inside an RTP packet lies in the bytes it was parsed from: the whole
    /// payload, unchanged (RFC 7587 §4.2). Throws `emptyPayload` for an empty payload.
    public static func depacketize(_ packet: RTPPacket) throws(RTPError) -> Range<Int> {
        guard packet.payloadSize > 0 else {
            throw RTPError(.emptyPayload, "Opus RTP packet seq \(packet.header.sequenceNumber) has an empty payload")
        }
        return packet.payloadRange
    }

    /// Samples at 48 kHz that an Opus packet decodes to, from its TOC byte and frame count
    /// (RFC 6716 §3.1-§3.2). Throws `truncated` for an empty packet or a code 3 packet without
    /// its count byte, and `badPayloadDescriptor` for more than 120 ms of audio (§3.2.5).
    /// The RTP timestamp advances by this much per packet (RFC 7587 §4.1).
    public static func sampleCount(packet p: RawSpan) throws(RTPError) -> Int {
        guard p.byteCount >= 1 else { throw RTPError(.truncated, "empty Opus packet") }
        let config = Int(p.u8(0) >> 3)
        let frameSamples: Int
        switch config {
        case 0...11:  // SILK: 10, 20, 40, 60 ms
            frameSamples = config & 3 == 3 ? 2880 : 480 << (config & 3)
        case 12...15:  // Hybrid: 10, 20 ms
            frameSamples = config & 1 == 0 ? 480 : 960
        default:  // CELT: 2.5, 5, 10, 20 ms
            frameSamples = 120 << (config & 3)
        }
        let frames: Int
        switch p.u8(0) & 3 {
        case 0: frames = 1
        case 1, 2: frames = 2
        default:
            guard p.byteCount >= 2 else {
                throw RTPError(.truncated, "Opus code 3 packet lacks its frame count byte (RFC 6716 §3.2.5)")
            }
            frames = Int(p.u8(1) & 0x3F)
        }
        let total = frames * frameSamples
        guard frames >= 1 && total <= 5760 else {
            throw RTPError(
                .badPayloadDescriptor, "Opus packet announces \(frames) frames, \(total) samples (max 5760, RFC 6716 §3.2.5)")
        }
        return total
    }
}

/// The single RTP payload of one Opus packet: its size, not its bytes.
/// Thread rule: a value type. Cost: writing copies the packet once.
public struct OpusFramePackets: RTPFramePayloads, Equatable {
    /// Bytes of the Opus packet.
    public let frameSize: Int
    /// One: the Opus packet travels whole in a single RTP payload.
    public var count: Int { 1 }
    /// False: for audio the caller sets the marker (first packet after DTX, RFC 3551 §4.1).
    public var setsMarkerOnLastPacket: Bool { false }
    /// Bytes of the one payload: the whole Opus packet (RFC 7587 §4.2).
    public func payloadSize(at index: Int) -> Int { frameSize }

    /// Appends the Opus packet to `output`. Traps when `frame` is not `frameSize` bytes or
    /// `output` lacks the room. No allocation.
    public func writePayload(at index: Int, of frame: RawSpan, into output: inout OutputRawSpan) {
        precondition(frame.byteCount == frameSize, "a \(frame.byteCount)-byte packet for a \(frameSize)-byte Opus plan")
        precondition(index == 0 && output.freeCapacity >= frameSize, "buffer too small for Opus packet")
        output.appendBytes(frame)
    }
}
