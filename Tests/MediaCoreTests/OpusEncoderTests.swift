import MediaCore
import MediaTestSupport
import Testing

@Suite struct OpusEncoderTests {
    /// Round-trip configurations with the waveform SNR each must keep, for a 440 Hz tone and for the
    /// speech-like signal (measured with libopus 1.3.1: the bounds sit 4-8 dB under the measured
    /// values, so an encoder that is misconfigured or misaligned fails them).
    static let settings: [(OpusSetting, toneSNR: Double, speechSNR: Double)] = [
        (OpusSetting(sampleRate: .hz48000, channels: 1, application: .voip, bitrate: 32_000), 16, 10),
        (OpusSetting(sampleRate: .hz48000, channels: 2, application: .audio, bitrate: 64_000), 30, 6),
        (OpusSetting(sampleRate: .hz16000, channels: 1, application: .voip, bitrate: 16_000), 18, 9),
        (OpusSetting(sampleRate: .hz8000, channels: 1, application: .voip, bitrate: 12_000), 12, 7),
        (OpusSetting(sampleRate: .hz24000, channels: 1, application: .restrictedLowDelay, bitrate: 48_000, frame: .ms10), 34, 14),
    ]

    /// Source signal for a round trip: channel 0 is the tone or speech, channel 1 (stereo) a 660 Hz
    /// tone, so the two channels differ.
    static func source(_ setting: OpusSetting, speech: Bool, seconds: Double = 1.5) -> (interleaved: [Float], channels: [[Float]])
    {
        let frames = Int(Double(setting.sampleRate.hertz) * seconds)
        var first = SyntheticAudio(
            pattern: speech ? .speech : .tone(frequency: 440), sampleRate: setting.sampleRate.hertz,
            amplitude: speech ? 0.7 : 0.5, seed: 7)
        var signals = [first.floats(frames: frames)]
        if setting.channels == 2 {
            var second = SyntheticAudio(pattern: .tone(frequency: 660), sampleRate: setting.sampleRate.hertz, amplitude: 0.3)
            signals.append(second.floats(frames: frames))
        }
        return (audioInterleave(signals), signals)
    }

    static func speech(_ rate: OpusSampleRate, seconds: Double, seed: UInt64 = 3) -> [Float] {
        var generator = SyntheticAudio(pattern: .speech, sampleRate: rate.hertz, amplitude: 0.7, seed: seed)
        return generator.floats(frames: Int(Double(rate.hertz) * seconds))
    }

    @Test(arguments: 0..<settings.count, [false, true])
    func roundTripKeepsWaveformAboveBoundAfterLookahead(index: Int, speech: Bool) throws {
        let (setting, toneBound, speechBound) = Self.settings[index]
        let encoder = try OpusEncoder(
            sampleRate: setting.sampleRate, channels: setting.channels, application: setting.application)
        encoder.bitrate = setting.bitrate
        let decoder = try OpusDecoder(sampleRate: setting.sampleRate, channels: setting.channels)
        let (input, channels) = Self.source(setting, speech: speech)
        let packets = try opusEncodeAll(input, encoder: encoder, frame: setting.frame)
        let output = try opusDecodeAll(packets, decoder: decoder)
        #expect(output.count == input.count)
        for (c, reference) in channels.enumerated() {
            let decoded = audioChannel(output, channel: c, of: setting.channels)
            let result = audioSNR(
                reference: reference, decoded: decoded, delay: encoder.lookahead,
                skip: setting.sampleRate.hertz / 10, slack: 3)
            // In the speech runs the stereo tone channel shares its bits with the noisy speech channel.
            let bound = speech ? (c == 0 ? speechBound : toneBound - 8) : toneBound
            #expect(result.snr > bound, "\(setting.testDescription) speech=\(speech) channel \(c)")
            // The decoded signal lags the input by the encoder's lookahead (SILK may shift a few samples).
            #expect(abs(result.lag - encoder.lookahead) <= 3)
        }
    }

    @Test func lookaheadDependsOnApplicationAndRate() throws {
        #expect(try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .voip).lookahead == 312)
        #expect(try OpusEncoder(sampleRate: .hz48000, channels: 2, application: .audio).lookahead == 312)
        #expect(try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .restrictedLowDelay).lookahead == 120)
        #expect(try OpusEncoder(sampleRate: .hz16000, channels: 1, application: .voip).lookahead == 104)
    }

    @Test func settingsReadBackWhatWasSet() throws {
        let encoder = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .voip)
        encoder.bitrate = 24_000
        #expect(encoder.bitrate == 24_000)
        encoder.complexity = 3
        #expect(encoder.complexity == 3)
        encoder.isVBR = false
        #expect(!encoder.isVBR)
        encoder.isVBRConstrained = false
        #expect(!encoder.isVBRConstrained)
        encoder.isInbandFECEnabled = true
        #expect(encoder.isInbandFECEnabled)
        encoder.expectedPacketLossPercent = 25
        #expect(encoder.expectedPacketLossPercent == 25)
        encoder.isDTXEnabled = true
        #expect(encoder.isDTXEnabled)
        encoder.signal = .music
        #expect(encoder.signal == .music)
        encoder.maxBandwidth = .wideband
        #expect(encoder.maxBandwidth == .wideband)
        encoder.bitrate = .max
        #expect(encoder.bitrate.bitsPerSecond != nil && encoder.bitrate.bitsPerSecond! > 24_000)
    }

    @Test func constantBitrateGivesPacketsOfExactSize() throws {
        let encoder = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .audio)
        encoder.bitrate = 32_000
        encoder.isVBR = false
        let packets = try opusEncodeAll(Self.speech(.hz48000, seconds: 1), encoder: encoder)
        // 32 kb/s x 20 ms = 640 bits = 80 bytes, every packet.
        #expect(packets.count == 50)
        #expect(packets.allSatisfy { $0.count == 80 })
    }

    @Test func higherBitrateGivesLargerOutput() throws {
        let signal = Self.speech(.hz48000, seconds: 2)
        var totals: [Int] = []
        for bitrate: OpusBitrate in [12_000, 32_000, 96_000] {
            let encoder = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .audio)
            encoder.bitrate = bitrate
            totals.append(try opusEncodeAll(signal, encoder: encoder).reduce(0) { $0 + $1.count })
        }
        // Two seconds at b bits/s is about b/4 bytes; VBR may deviate, but not by 2x.
        #expect(Double(totals[0]) > 12_000 / 4 * 0.5 && Double(totals[0]) < 12_000 / 4 * 1.5)
        #expect(Double(totals[1]) > Double(totals[0]) * 2)
        #expect(Double(totals[2]) > Double(totals[1]) * 2)
    }

    @Test func dtxSendsOnlyTinyPacketsDuringSilence() throws {
        let silence = [Float](repeating: 0, count: 48_000 * 2)
        let dtx = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .voip)
        dtx.isDTXEnabled = true
        let withDTX = try opusEncodeAll(silence, encoder: dtx)
        #expect(dtx.isInDTX)
        let tiny = withDTX.filter { OpusPacket.isDTXSilence(byteCount: $0.count) }.count
        // After ~200 ms of silence the encoder enters DTX; it still sends a comfort-noise update
        // every 400 ms. So most of the 100 packets are 1-2 bytes.
        #expect(tiny >= 75, "\(tiny) of \(withDTX.count) packets were DTX")
        let plain = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .voip)
        let withoutDTX = try opusEncodeAll(silence, encoder: plain)
        #expect(!plain.isInDTX)
        #expect(withoutDTX.filter { OpusPacket.isDTXSilence(byteCount: $0.count) }.count == 0)
        // Speech after silence leaves DTX again.
        let speech = try opusEncodeAll(Self.speech(.hz48000, seconds: 0.5), encoder: dtx)
        #expect(speech.contains { $0.count > 20 })
    }

    @Test func int16AndFloatInputGiveIdenticalPackets() throws {
        let float = Self.speech(.hz48000, seconds: 1)
        let int16 = float.map { Int16(($0 * 32767).rounded()) }
        let exact = int16.map { Float($0) / 32768 }
        let a = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .voip)
        let b = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .voip)
        b.inputBitDepth = 16  // what libopus assumes for Int16 input
        var packetA = [UInt8](repeating: 0, count: OpusEncoder.maxPacketByteCount)
        var packetB = packetA
        for start in stride(from: 0, to: int16.count, by: 960) {
            let n = try int16[start..<(start + 960)].withUnsafeBufferPointer { pcm in
                try packetA.withUnsafeMutableBytes { try a.encode(pcm, into: $0) }
            }
            let m = try exact[start..<(start + 960)].withUnsafeBufferPointer { pcm in
                try packetB.withUnsafeMutableBytes { try b.encode(pcm, into: $0) }
            }
            #expect(packetA[0..<n] == packetB[0..<m])
            #expect(a.finalRange == b.finalRange)
        }
    }

    @Test func maxBandwidthLimitsPacketBandwidth() throws {
        for limit in [OpusBandwidth.narrowband, .wideband, .superwideband] {
            let encoder = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .voip)
            encoder.bitrate = 64_000
            encoder.maxBandwidth = limit
            let packets = try opusEncodeAll(Self.speech(.hz48000, seconds: 0.4), encoder: encoder)
            for packet in packets {
                let bandwidth = try OpusPacket.bandwidth(packet.span.bytes)
                #expect(bandwidth <= limit)
            }
            let lastPacket = packets.last!
            let last = try OpusPacket.bandwidth(lastPacket.span.bytes)
            #expect(last == limit)
        }
        let forced = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .audio)
        forced.bandwidth = .narrowband
        let packets = try opusEncodeAll(Self.speech(.hz48000, seconds: 0.2), encoder: forced)
        #expect(try packets.allSatisfy { try OpusPacket.bandwidth($0.span.bytes) == .narrowband })
        #expect(forced.bandwidth == .narrowband)
    }

    @Test(arguments: OpusFrameDuration.allCases)
    func everyFrameDurationEncodesThatDuration(duration: OpusFrameDuration) throws {
        let encoder = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .audio)
        let packets = try opusEncodeAll(Self.speech(.hz48000, seconds: 0.24), encoder: encoder, frame: duration)
        #expect(packets.count == 240_000 / duration.microseconds)
        for packet in packets {
            #expect(
                try OpusPacket.sampleCount(packet.span.bytes, sampleRate: .hz48000)
                    == duration.samples(at: .hz48000))
        }
    }

    @Test func smallPacketBufferCapsThePacketAndTinyOneThrows() throws {
        let encoder = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .audio)
        encoder.bitrate = 64_000
        let pcm = Self.speech(.hz48000, seconds: 0.02)
        // 20 bytes is far under 64 kb/s x 20 ms = 160 bytes: libopus lowers this frame's rate to fit.
        var small = [UInt8](repeating: 0, count: 20)
        let n = try pcm.withUnsafeBufferPointer { pcm in try small.withUnsafeMutableBytes { try encoder.encode(pcm, into: $0) } }
        #expect(n > 2 && n <= 20)
        let sampleCount = try OpusPacket.sampleCount(small[0..<n].span.bytes, sampleRate: .hz48000)
        #expect(sampleCount == 960)
        var tiny = [UInt8](repeating: 0, count: OpusEncoder.minPacketByteCount - 1)
        #expect(throws: OpusError.bufferTooSmall) {
            try pcm.withUnsafeBufferPointer { pcm in try tiny.withUnsafeMutableBytes { try encoder.encode(pcm, into: $0) } }
        }
        var empty: [UInt8] = []
        #expect(throws: OpusError.bufferTooSmall) {
            try pcm.withUnsafeBufferPointer { pcm in try empty.withUnsafeMutableBytes { try encoder.encode(pcm, into: $0) } }
        }
    }
}
