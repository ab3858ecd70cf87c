internal import CMediaShims

/// Inspection of Opus packets without decoding them (RFC 6716 section 3: the TOC byte and frame
/// packing), via libopus `opus_packet_*`. Used by receivers, jitter buffers and the Ogg reader.
///
/// Each function reads a `RawSpan`.
/// Thread rule: pure functions on caller memory, any thread. Cost: a few byte reads; every
/// function first checks the packet's framing (`opus_packet_parse`) and throws
/// `OpusError.invalidPacket` (with a message) for an empty or malformed packet.
public enum OpusPacket {
    /// The coding mode of a packet, from its TOC configuration number (RFC 6716 section 3.1).
    public enum Mode: Sendable, CaseIterable {
        /// Configurations 0-11: SILK only (speech, NB to WB).
        case silk
        /// Configurations 12-15: SILK low band + CELT high band (SWB/FB speech).
        case hybrid
        /// Configurations 16-31: CELT only (music, low delay).
        case celt
    }

    /// Checks the packet's framing and returns its number of frames (1...48).
    @discardableResult
    public static func validate(_ packet: RawSpan) throws(OpusError) -> Int {
        try packet.withUnsafeBytes { (packet) throws(OpusError) in try framing(packet) }
    }

    /// `validate` on the bytes behind a span: the framing check every function starts with.
    @discardableResult
    private static func framing(_ packet: UnsafeRawBufferPointer) throws(OpusError) -> Int {
        guard let data = packet.baseAddress, packet.count > 0 else {
            throw OpusError(.invalidPacket, "empty Opus packet")
        }
        guard packet.count <= Int(Int32.max) else { throw OpusError(.invalidPacket, "Opus packet of \(packet.count) bytes") }
        let frames = cms_opus_packet_validate(data, Int32(packet.count))
        if frames < 0 {
            throw OpusError(
                OpusError(rawValue: frames),
                "Opus packet of \(packet.count) bytes (TOC 0x\(String(packet[0], radix: 16))) has malformed framing")
        }
        return Int(frames)
    }

    /// Frames in the packet (1 for code 0, 2 for codes 1-2, the count byte for code 3).
    public static func frameCount(_ packet: RawSpan) throws(OpusError) -> Int {
        try packet.withUnsafeBytes { (packet) throws(OpusError) in
            try framing(packet)
            let value = cms_opus_packet_get_nb_frames(packet.baseAddress!, Int32(packet.count))
            try OpusError.check(value, "Opus packet of \(packet.count) bytes: frame count")
            return Int(value)
        }
    }

    /// Samples per channel in each frame of the packet when decoded at `sampleRate` (from the TOC).
    public static func samplesPerFrame(_ packet: RawSpan, sampleRate: OpusSampleRate) throws(OpusError) -> Int {
        try packet.withUnsafeBytes { (packet) throws(OpusError) in
            try framing(packet)
            return Int(cms_opus_packet_get_samples_per_frame(packet.baseAddress!, Int32(sampleRate.rawValue)))
        }
    }

    /// Samples per channel in the whole packet at `sampleRate` (frames x samples per frame); throws
    /// when the packet claims more than 120 ms.
    public static func sampleCount(_ packet: RawSpan, sampleRate: OpusSampleRate) throws(OpusError) -> Int {
        try packet.withUnsafeBytes { (packet) throws(OpusError) in
            try framing(packet)
            let value = cms_opus_packet_get_nb_samples(packet.baseAddress!, Int32(packet.count), Int32(sampleRate.rawValue))
            try OpusError.check(value, "Opus packet of \(packet.count) bytes: sample count")
            return Int(value)
        }
    }

    /// The packet's audio bandpass (from the TOC).
    public static func bandwidth(_ packet: RawSpan) throws(OpusError) -> OpusBandwidth {
        try packet.withUnsafeBytes { (packet) throws(OpusError) in
            try framing(packet)
            let value = cms_opus_packet_get_bandwidth(packet.baseAddress!)
            guard let bandwidth = OpusBandwidth(rawValue: Int(value)) else {
                throw OpusError(.invalidPacket, "Opus packet of \(packet.count) bytes: bandwidth \(value)")
            }
            return bandwidth
        }
    }

    /// Channels coded in the packet: 1 or 2 (the TOC's stereo flag).
    public static func channelCount(_ packet: RawSpan) throws(OpusError) -> Int {
        try packet.withUnsafeBytes { (packet) throws(OpusError) in
            try framing(packet)
            return Int(cms_opus_packet_get_nb_channels(packet.baseAddress!))
        }
    }

    /// The packet's coding mode (from the TOC configuration number).
    public static func mode(_ packet: RawSpan) throws(OpusError) -> Mode {
        try packet.withUnsafeBytes { (packet) throws(OpusError) in
            try framing(packet)
            let config = packet[0] >> 3
            return config < 12 ? .silk : (config < 16 ? .hybrid : .celt)
        }
    }

    /// True when an encoder's output of `byteCount` bytes is DTX silence: libopus documents that a
    /// packet of 2 bytes or less need not be transmitted (the receiver conceals or plays comfort noise).
    public static func isDTXSilence(byteCount: Int) -> Bool { byteCount <= 2 }
}
