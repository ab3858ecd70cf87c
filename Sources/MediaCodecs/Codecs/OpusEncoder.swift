internal import CMediaShims

/// An Opus encoder (libopus `OpusEncoder`): interleaved Int16 or Float32 PCM in, one Opus packet
/// (RFC 6716) out, written into caller memory.
///
/// Thread rule: one thread at a time (not `Sendable`; move it to the encode worker and keep it
/// there). Cost: one `encode` of 20 ms mono at complexity 10 is roughly 0.3 ms here and never
/// allocates; the settings are cheap `opus_encoder_ctl` calls and may change between frames.
public final class OpusEncoder {
    /// The largest packet libopus produces for up to 60 ms (3 x 1275 bytes + framing), rounded up:
    /// a packet buffer of this size never fails with `bufferTooSmall`.
    public static let maxPacketByteCount = 4000

    /// The smallest packet buffer `encode` accepts: below 3 bytes libopus cannot code a frame.
    public static let minPacketByteCount = 3

    /// Input sample rate.
    public let sampleRate: OpusSampleRate
    /// Interleaved channels in the input (1 or 2).
    public let channels: Int
    /// The mode chosen at creation.
    public let application: OpusApplication

    private let state: OpaquePointer

    /// Creates an encoder. Throws `OpusError` when libopus refuses or cannot allocate.
    /// - Parameters:
    ///   - channels: 1 (mono) or 2 (stereo); anything else traps.
    public init(sampleRate: OpusSampleRate, channels: Int, application: OpusApplication) throws(OpusError) {
        precondition(channels == 1 || channels == 2, "Opus encoder channels must be 1 or 2, not \(channels)")
        var error: Int32 = OPUS_OK
        guard let state = opus_encoder_create(Int32(sampleRate.rawValue), Int32(channels), application.cValue, &error),
            error == OPUS_OK
        else {
            throw OpusError(
                OpusError(rawValue: error == OPUS_OK ? OPUS_ALLOC_FAIL : error),
                "opus_encoder_create(\(sampleRate), \(channels) ch)")
        }
        self.state = state
        self.sampleRate = sampleRate
        self.channels = channels
        self.application = application
    }

    deinit { opus_encoder_destroy(state) }

    // MARK: Encoding

    /// Encodes one frame of interleaved Int16 PCM into `packet`, returning the packet length.
    ///
    /// `pcm.count / channels` must be the sample count of an `OpusFrameDuration` (traps
    /// otherwise). A result of 2 bytes or less means DTX silence (see `OpusPacket.isDTXSilence`):
    /// the packet need not be sent. A small `packet` buffer lowers the bitrate of this frame to
    /// fit; under `minPacketByteCount` bytes it throws `bufferTooSmall` (libopus would silently
    /// emit a TOC-only "lost frame" packet, indistinguishable from DTX). `maxPacketByteCount`
    /// always suffices. Never allocates.
    package func encode(_ pcm: UnsafeBufferPointer<Int16>, into packet: UnsafeMutableRawBufferPointer) throws(OpusError) -> Int {
        let frameSize = validatedFrameSize(pcm.count)
        guard let input = pcm.baseAddress, let output = packet.baseAddress, packet.count >= Self.minPacketByteCount else {
            throw OpusError(
                .bufferTooSmall, "Opus encode into a packet buffer of \(packet.count) bytes (minimum \(Self.minPacketByteCount))")
        }
        let result = cms_opus_encode(state, input, Int32(frameSize), output, Int32(clamping: packet.count))
        try OpusError.check(result, "Opus encode of \(frameSize) samples into \(packet.count) bytes")
        return Int(result)
    }

    /// Encodes one frame of interleaved Float32 PCM (nominal range -1...1) into `packet`, returning
    /// the packet length. Same rules as the Int16 overload; the two produce identical packets for
    /// identical input (`Float(x) / 32768`).
    package func encode(_ pcm: UnsafeBufferPointer<Float>, into packet: UnsafeMutableRawBufferPointer) throws(OpusError) -> Int {
        let frameSize = validatedFrameSize(pcm.count)
        guard let input = pcm.baseAddress, let output = packet.baseAddress, packet.count >= Self.minPacketByteCount else {
            throw OpusError(
                .bufferTooSmall, "Opus encode into a packet buffer of \(packet.count) bytes (minimum \(Self.minPacketByteCount))")
        }
        let result = cms_opus_encode_float(state, input, Int32(frameSize), output, Int32(clamping: packet.count))
        try OpusError.check(result, "Opus encode of \(frameSize) samples into \(packet.count) bytes")
        return Int(result)
    }

    private func validatedFrameSize(_ interleavedCount: Int) -> Int {
        precondition(
            interleavedCount % channels == 0,
            "Opus encode: \(interleavedCount) samples is not a whole number of \(channels)-channel frames")
        let frameSize = interleavedCount / channels
        precondition(
            OpusFrameDuration(samples: frameSize, sampleRate: sampleRate) != nil,
            "Opus encode: \(frameSize) samples per channel is not 2.5/5/10/20/40/60 ms at \(sampleRate)")
        return frameSize
    }

    /// Resets the encoder to its freshly created state, keeping the settings (`OPUS_RESET_STATE`).
    public func reset() { _ = cms_opus_encoder_reset_state(state) }

    // MARK: Settings

    /// Target bitrate (`OPUS_SET_BITRATE`); reading returns the bitrate libopus actually uses
    /// (a number, also after setting `.auto` or `.max`). Default `.auto`.
    public var bitrate: OpusBitrate {
        get { OpusBitrate(raw: getInt(cms_opus_encoder_get_bitrate)) }
        set { setInt(cms_opus_encoder_set_bitrate, newValue.rawValue, "bitrate \(newValue)") }
    }

    /// Computational complexity 0...10 (`OPUS_SET_COMPLEXITY`); higher is better and slower. Traps outside 0...10.
    public var complexity: Int {
        get { Int(getInt(cms_opus_encoder_get_complexity)) }
        set {
            precondition((0...10).contains(newValue), "Opus complexity \(newValue) outside 0...10")
            setInt(cms_opus_encoder_set_complexity, Int32(newValue), "complexity")
        }
    }

    /// Variable bitrate (`OPUS_SET_VBR`); false gives constant-size packets (CBR). Default true.
    public var isVBR: Bool {
        get { getInt(cms_opus_encoder_get_vbr) != 0 }
        set { setInt(cms_opus_encoder_set_vbr, newValue ? 1 : 0, "VBR") }
    }

    /// Constrained VBR (`OPUS_SET_VBR_CONSTRAINT`): VBR whose short-term rate stays near the target,
    /// for channels that cannot absorb bursts. Only matters while `isVBR`. Default true.
    public var isVBRConstrained: Bool {
        get { getInt(cms_opus_encoder_get_vbr_constraint) != 0 }
        set { setInt(cms_opus_encoder_set_vbr_constraint, newValue ? 1 : 0, "VBR constraint") }
    }

    /// In-band forward error correction (`OPUS_SET_INBAND_FEC`): each SILK/hybrid packet also
    /// carries a low-rate copy of the previous frame, which `OpusDecoder.decodeFEC` recovers.
    /// Only used when `expectedPacketLossPercent` > 0 and the bitrate allows. Default false.
    public var isInbandFECEnabled: Bool {
        get { getInt(cms_opus_encoder_get_inband_fec) != 0 }
        set { setInt(cms_opus_encoder_set_inband_fec, newValue ? 1 : 0, "in-band FEC") }
    }

    /// Expected packet loss 0...100 % (`OPUS_SET_PACKET_LOSS_PERC`): more FEC and robustness as it
    /// grows. Traps outside 0...100. Default 0.
    public var expectedPacketLossPercent: Int {
        get { Int(getInt(cms_opus_encoder_get_packet_loss_perc)) }
        set {
            precondition((0...100).contains(newValue), "Opus packet loss \(newValue) % outside 0...100")
            setInt(cms_opus_encoder_set_packet_loss_perc, Int32(newValue), "packet loss %")
        }
    }

    /// Discontinuous transmission (`OPUS_SET_DTX`): during silence the encoder emits 1-2 byte
    /// packets (see `OpusPacket.isDTXSilence`) with a comfort-noise update every 400 ms. Default false.
    public var isDTXEnabled: Bool {
        get { getInt(cms_opus_encoder_get_dtx) != 0 }
        set { setInt(cms_opus_encoder_set_dtx, newValue ? 1 : 0, "DTX") }
    }

    /// True while DTX is active, i.e. the last frame was encoded as silence (`OPUS_GET_IN_DTX`).
    public var isInDTX: Bool { getInt(cms_opus_encoder_get_in_dtx) != 0 }

    /// Signal type hint (`OPUS_SET_SIGNAL`). Default `.auto`.
    public var signal: OpusSignal {
        get { OpusSignal(cValue: getInt(cms_opus_encoder_get_signal)) }
        set { setInt(cms_opus_encoder_set_signal, newValue.cValue, "signal") }
    }

    /// The widest bandpass the encoder may choose (`OPUS_SET_MAX_BANDWIDTH`). Default `.fullband`.
    public var maxBandwidth: OpusBandwidth {
        get { OpusBandwidth(rawValue: Int(getInt(cms_opus_encoder_get_max_bandwidth))) ?? .fullband }
        set { setInt(cms_opus_encoder_set_max_bandwidth, Int32(newValue.rawValue), "max bandwidth") }
    }

    /// Forces a bandpass (`OPUS_SET_BANDWIDTH`); nil lets libopus choose (`OPUS_AUTO`, the default).
    /// Reading returns the bandpass in use (nil before the first frame if libopus has not decided).
    public var bandwidth: OpusBandwidth? {
        get { OpusBandwidth(rawValue: Int(getInt(cms_opus_encoder_get_bandwidth))) }
        set { setInt(cms_opus_encoder_set_bandwidth, newValue.map { Int32($0.rawValue) } ?? OPUS_AUTO, "bandwidth") }
    }

    /// Significant bits per input sample, 8...24 (`OPUS_SET_LSB_DEPTH`): below this the encoder
    /// treats the signal as noise floor (affects DTX and bit allocation). libopus assumes 16 for
    /// Int16 input whatever this says, and uses this value (default 24) for Float input; set 16 for
    /// Float input converted from 16-bit audio. Traps outside 8...24.
    public var inputBitDepth: Int {
        get { Int(getInt(cms_opus_encoder_get_lsb_depth)) }
        set {
            precondition((8...24).contains(newValue), "Opus input bit depth \(newValue) outside 8...24")
            setInt(cms_opus_encoder_set_lsb_depth, Int32(newValue), "LSB depth")
        }
    }

    /// Codec delay in samples per channel at `sampleRate` (`OPUS_GET_LOOKAHEAD`): decoded audio lags
    /// the input by this much. Depends on `application` (e.g. 312 at 48 kHz voip/audio, 120 lowdelay).
    public var lookahead: Int { Int(getInt(cms_opus_encoder_get_lookahead)) }

    /// The range coder's final state after the last packet (`OPUS_GET_FINAL_RANGE`); a decoder that
    /// decoded the same packet reports the same value (conformance check for tests).
    public var finalRange: UInt32 {
        var value: UInt32 = 0
        _ = cms_opus_encoder_get_final_range(state, &value)
        return value
    }

    // MARK: ctl plumbing

    private func getInt(_ get: (OpaquePointer, UnsafeMutablePointer<Int32>) -> Int32) -> Int32 {
        var value: Int32 = 0
        let status = get(state, &value)
        precondition(status == OPUS_OK, "opus_encoder_ctl get failed: \(OpusError(rawValue: status))")
        return value
    }

    private func setInt(_ set: (OpaquePointer, Int32) -> Int32, _ value: Int32, _ what: String) {
        let status = set(state, value)
        // The typed setters only pass values libopus accepts, so a failure is a bug here.
        precondition(status == OPUS_OK, "opus_encoder_ctl set \(what) = \(value) failed: \(OpusError(rawValue: status))")
    }
}

// MARK: Spans

extension OpusEncoder {
    /// Encodes one frame of interleaved Int16 PCM and appends the packet to `packet`, returning
    /// its length. `pcm.count / channels` must be the sample count of an `OpusFrameDuration`
    /// (traps otherwise). A result of 2 bytes or less is DTX silence (`OpusPacket.isDTXSilence`),
    /// which need not be sent. Less free capacity in `packet` lowers this frame's bitrate to fit;
    /// under `minPacketByteCount` it throws `bufferTooSmall`; `maxPacketByteCount` always
    /// suffices. Never allocates.
    @discardableResult
    public func encode(_ pcm: Span<Int16>, into packet: inout OutputRawSpan) throws(OpusError) -> Int {
        try pcm.withUnsafeBufferPointer { (input) throws(OpusError) in
            try packet.appendWriting { (free) throws(OpusError) in try encode(input, into: free) }
        }
    }

    /// Encodes one frame of interleaved Float32 PCM (nominal range -1...1); same rules as the Int16
    /// form, and the same packet for the same input (`Float(x) / 32768`).
    @discardableResult
    public func encode(_ pcm: Span<Float>, into packet: inout OutputRawSpan) throws(OpusError) -> Int {
        try pcm.withUnsafeBufferPointer { (input) throws(OpusError) in
            try packet.appendWriting { (free) throws(OpusError) in try encode(input, into: free) }
        }
    }
}
