internal import CMediaShims

/// An Opus decoder (libopus `OpusDecoder`): one packet in (a `RawSpan`), interleaved Int16 or
/// Float32 PCM out, written to the front of a caller's `MutableSpan`; also in-band FEC recovery and
/// packet loss concealment (PLC).
///
/// Thread rule: one thread at a time (not `Sendable`). Cost: decoding 20 ms is a fraction of the
/// encode cost; nothing here allocates. Packets come from the network, so malformed ones throw
/// `OpusError.invalidPacket` and leave the decoder usable.
public final class OpusDecoder {
    /// Output sample rate (any Opus packet decodes at any of these rates).
    public let sampleRate: OpusSampleRate
    /// Interleaved output channels (1 or 2); a stereo packet is downmixed for mono output and a
    /// mono packet duplicated for stereo output.
    public let channels: Int

    private let state: OpaquePointer

    /// Creates a decoder. Throws `OpusError` when libopus refuses or cannot allocate.
    /// - Parameters:
    ///   - channels: 1 or 2; anything else traps.
    public init(sampleRate: OpusSampleRate, channels: Int) throws(OpusError) {
        precondition(channels == 1 || channels == 2, "Opus decoder channels must be 1 or 2, not \(channels)")
        var error: Int32 = OPUS_OK
        guard let state = opus_decoder_create(Int32(sampleRate.rawValue), Int32(channels), &error), error == OPUS_OK else {
            throw OpusError(
                OpusError(rawValue: error == OPUS_OK ? OPUS_ALLOC_FAIL : error),
                "opus_decoder_create(\(sampleRate), \(channels) ch)")
        }
        self.state = state
        self.sampleRate = sampleRate
        self.channels = channels
    }

    deinit { opus_decoder_destroy(state) }

    /// The largest frame an Opus packet can hold (120 ms), in samples per channel at `sampleRate`:
    /// an output buffer of `maxFrameSize * channels` never fails with `bufferTooSmall`.
    public var maxFrameSize: Int { sampleRate.rawValue * 120 / 1000 }

    // MARK: Normal decoding

    /// Decodes one packet into `pcm` (interleaved) and returns the samples per channel written.
    /// Throws `invalidPacket` for an empty or malformed packet and `bufferTooSmall` when `pcm`
    /// cannot hold the packet's duration.
    private func decodeRaw(_ packet: UnsafeRawBufferPointer, into pcm: UnsafeMutableBufferPointer<Int16>) throws(OpusError) -> Int
    {
        let data = try validated(packet)
        let frameSize = pcm.count / channels
        guard let output = pcm.baseAddress, frameSize > 0 else { throw tooSmall(packet, pcm.count) }
        let result = cms_opus_decode(state, data, Int32(packet.count), output, Int32(frameSize), 0)
        try OpusError.check(result, "Opus packet of \(packet.count) bytes decoded into \(frameSize) samples per channel")
        return Int(result)
    }

    /// Decodes one packet into `pcm` as Float32 (nominal range -1...1); same rules as the Int16 overload.
    private func decodeRaw(_ packet: UnsafeRawBufferPointer, into pcm: UnsafeMutableBufferPointer<Float>) throws(OpusError) -> Int
    {
        let data = try validated(packet)
        let frameSize = pcm.count / channels
        guard let output = pcm.baseAddress, frameSize > 0 else { throw tooSmall(packet, pcm.count) }
        let result = cms_opus_decode_float(state, data, Int32(packet.count), output, Int32(frameSize), 0)
        try OpusError.check(result, "Opus packet of \(packet.count) bytes decoded into \(frameSize) samples per channel")
        return Int(result)
    }

    // MARK: Loss recovery

    /// Recovers a LOST packet from the in-band FEC data carried by the packet that followed it
    /// (`opus_decode` with `decode_fec = 1`), writing `frameSize` samples per channel into `pcm`.
    ///
    /// `frameSize` must be the duration of the lost audio (a multiple of 2.5 ms, at most 120 ms;
    /// usually `lastPacketDuration`); traps otherwise or when `pcm` is smaller. When `nextPacket`
    /// holds no FEC data libopus falls back to concealment. Afterwards decode `nextPacket` itself
    /// normally. Returns the samples per channel written.
    private func decodeFECRaw(nextPacket: UnsafeRawBufferPointer, into pcm: UnsafeMutableBufferPointer<Int16>, frameSize: Int)
        throws(OpusError) -> Int
    {
        let data = try validated(nextPacket)
        let output = checkedOutput(pcm, frameSize)
        let result = cms_opus_decode(state, data, Int32(nextPacket.count), output, Int32(frameSize), 1)
        try OpusError.check(result, "Opus FEC decode from a packet of \(nextPacket.count) bytes")
        return Int(result)
    }

    /// Float32 overload of `decodeFEC(nextPacket:into:frameSize:)`.
    private func decodeFECRaw(nextPacket: UnsafeRawBufferPointer, into pcm: UnsafeMutableBufferPointer<Float>, frameSize: Int)
        throws(OpusError) -> Int
    {
        let data = try validated(nextPacket)
        let output = checkedOutput(pcm, frameSize)
        let result = cms_opus_decode_float(state, data, Int32(nextPacket.count), output, Int32(frameSize), 1)
        try OpusError.check(result, "Opus FEC decode from a packet of \(nextPacket.count) bytes")
        return Int(result)
    }

    /// Packet loss concealment: synthesises `frameSize` samples per channel of plausible audio for
    /// a lost packet with no FEC available (`opus_decode` with a NULL packet). `frameSize` must be
    /// the lost duration (multiple of 2.5 ms, at most 120 ms) and fit in `pcm`; traps otherwise.
    private func concealLossRaw(into pcm: UnsafeMutableBufferPointer<Int16>, frameSize: Int) throws(OpusError) -> Int {
        let output = checkedOutput(pcm, frameSize)
        let result = cms_opus_decode(state, nil, 0, output, Int32(frameSize), 0)
        try OpusError.check(result, "Opus loss concealment of \(frameSize) samples")
        return Int(result)
    }

    /// Float32 overload of `concealLoss(into:frameSize:)`.
    private func concealLossRaw(into pcm: UnsafeMutableBufferPointer<Float>, frameSize: Int) throws(OpusError) -> Int {
        let output = checkedOutput(pcm, frameSize)
        let result = cms_opus_decode_float(state, nil, 0, output, Int32(frameSize), 0)
        try OpusError.check(result, "Opus loss concealment of \(frameSize) samples")
        return Int(result)
    }

    /// Resets the decoder to its freshly created state (`OPUS_RESET_STATE`), e.g. on a new stream.
    public func reset() { _ = cms_opus_decoder_reset_state(state) }

    // MARK: State

    /// Samples per channel produced by the last decode, FEC or concealment call
    /// (`OPUS_GET_LAST_PACKET_DURATION`); the usual `frameSize` for concealing the next loss.
    public var lastPacketDuration: Int {
        var value: Int32 = 0
        _ = cms_opus_decoder_get_last_packet_duration(state, &value)
        return Int(value)
    }

    /// Bandpass of the last decoded packet (`OPUS_GET_BANDWIDTH`), nil before the first packet.
    public var bandwidth: OpusBandwidth? {
        var value: Int32 = 0
        _ = cms_opus_decoder_get_bandwidth(state, &value)
        return OpusBandwidth(rawValue: Int(value))
    }

    /// Output gain in dB, -128..<128 (`OPUS_SET_GAIN`, Q8 dB, applied after decoding). Default 0.
    public var gainDecibels: Double {
        get {
            var value: Int32 = 0
            _ = cms_opus_decoder_get_gain(state, &value)
            return Double(value) / 256
        }
        set {
            precondition((-128..<128).contains(newValue), "Opus decoder gain \(newValue) dB outside -128..<128")
            _ = cms_opus_decoder_set_gain(state, Int32(max(-32768, min(32767, (newValue * 256).rounded()))))
        }
    }

    /// The range decoder's final state after the last packet (`OPUS_GET_FINAL_RANGE`); equals the
    /// encoder's `finalRange` for the same packet when the bitstream was decoded exactly.
    public var finalRange: UInt32 {
        var value: UInt32 = 0
        _ = cms_opus_decoder_get_final_range(state, &value)
        return value
    }

    // MARK: Helpers

    /// The packet's base address after checking its framing (RFC 6716 section 3), so malformed
    /// input is reported with a message and never reaches the decoder.
    private func validated(_ packet: UnsafeRawBufferPointer) throws(OpusError) -> UnsafeRawPointer {
        guard let data = packet.baseAddress, packet.count > 0 else {
            throw OpusError(.invalidPacket, "empty Opus packet (use concealLoss for a lost one)")
        }
        try OpusPacket.validate(packet.bytes)
        return data
    }

    private func checkedOutput<T>(_ pcm: UnsafeMutableBufferPointer<T>, _ frameSize: Int) -> UnsafeMutablePointer<T> {
        let quantum = sampleRate.rawValue / 400
        precondition(
            frameSize > 0 && frameSize % quantum == 0 && frameSize <= maxFrameSize,
            "Opus frameSize \(frameSize) is not a multiple of 2.5 ms (\(quantum) samples) up to 120 ms")
        precondition(
            pcm.count >= frameSize * channels,
            "Opus output buffer of \(pcm.count) samples is smaller than \(frameSize) x \(channels)")
        return pcm.baseAddress!
    }

    private func tooSmall(_ packet: UnsafeRawBufferPointer, _ count: Int) -> OpusError {
        OpusError(.bufferTooSmall, "Opus packet of \(packet.count) bytes decoded into a buffer of \(count) samples")
    }
}

// MARK: Spans

extension OpusDecoder {
    /// Decodes one packet into the front of `pcm` (interleaved) and returns the samples per channel
    /// written. Throws `invalidPacket` for an empty or malformed packet and `bufferTooSmall` when
    /// `pcm` cannot hold the packet's duration (`maxFrameSize * channels` always can).
    public func decode(_ packet: RawSpan, into pcm: inout MutableSpan<Int16>) throws(OpusError) -> Int {
        try packet.withUnsafeBytes { (p) throws(OpusError) in
            try pcm.withUnsafeMutableBufferPointer { (o) throws(OpusError) in try decodeRaw(p, into: o) }
        }
    }

    /// Decodes one packet into the front of `pcm` as Float32 (nominal range -1...1); same rules as
    /// the Int16 form.
    public func decode(_ packet: RawSpan, into pcm: inout MutableSpan<Float>) throws(OpusError) -> Int {
        try packet.withUnsafeBytes { (p) throws(OpusError) in
            try pcm.withUnsafeMutableBufferPointer { (o) throws(OpusError) in try decodeRaw(p, into: o) }
        }
    }

    /// Recovers a lost packet from the in-band FEC data of the packet that followed it, writing
    /// `frameSize` samples per channel to the front of `pcm` (see the decoder's loss recovery:
    /// `frameSize` is the lost duration, usually `lastPacketDuration`; traps when it is not a whole
    /// Opus frame duration or does not fit). Then decode `nextPacket` itself normally.
    public func decodeFEC(nextPacket: RawSpan, into pcm: inout MutableSpan<Int16>, frameSize: Int) throws(OpusError) -> Int {
        try nextPacket.withUnsafeBytes { (p) throws(OpusError) in
            try pcm.withUnsafeMutableBufferPointer { (o) throws(OpusError) in
                try decodeFECRaw(nextPacket: p, into: o, frameSize: frameSize)
            }
        }
    }

    /// The Float32 form of `decodeFEC(nextPacket:into:frameSize:)`.
    public func decodeFEC(nextPacket: RawSpan, into pcm: inout MutableSpan<Float>, frameSize: Int) throws(OpusError) -> Int {
        try nextPacket.withUnsafeBytes { (p) throws(OpusError) in
            try pcm.withUnsafeMutableBufferPointer { (o) throws(OpusError) in
                try decodeFECRaw(nextPacket: p, into: o, frameSize: frameSize)
            }
        }
    }

    /// Conceals a lost packet with no FEC: `frameSize` samples per channel of plausible audio to
    /// the front of `pcm` (same bounds as `decodeFEC`).
    public func concealLoss(into pcm: inout MutableSpan<Int16>, frameSize: Int) throws(OpusError) -> Int {
        try pcm.withUnsafeMutableBufferPointer { (o) throws(OpusError) in try concealLossRaw(into: o, frameSize: frameSize) }
    }

    /// The Float32 form of `concealLoss(into:frameSize:)`.
    public func concealLoss(into pcm: inout MutableSpan<Float>, frameSize: Int) throws(OpusError) -> Int {
        try pcm.withUnsafeMutableBufferPointer { (o) throws(OpusError) in try concealLossRaw(into: o, frameSize: frameSize) }
    }
}
