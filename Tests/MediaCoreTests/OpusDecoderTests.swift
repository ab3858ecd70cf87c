import MediaCore
import MediaTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct OpusDecoderTests {
    static func speech(seconds: Double, seed: UInt64 = 11) -> [Float] {
        var generator = SyntheticAudio(pattern: .speech, sampleRate: 48_000, amplitude: 0.7, seed: seed)
        return generator.floats(frames: Int(48_000 * seconds))
    }

    /// Energy-weighted SNR (dB) over the reference regions `regions` (start, count) with `decoded`
    /// lagging by `lag`.
    static func regionSNR(_ reference: [Float], _ decoded: [Float], regions: [Range<Int>], lag: Int) -> Double {
        var signal = 0.0, noise = 0.0
        for region in regions {
            for i in region where i >= 0 && i + lag < decoded.count {
                let r = Double(reference[i]), d = Double(decoded[i + lag])
                signal += r * r
                noise += (r - d) * (r - d)
            }
        }
        return 10 * log10(signal / max(noise, 1e-20))
    }

    /// Encodes 3 s of speech at 48 kHz voip 32 kb/s (FEC on or off, 25 % expected loss), drops
    /// every 6th voiced packet and returns the SNR over the dropped regions when they are recovered
    /// with `decodeFEC` from the next packet, with concealment alone, and without loss.
    static func lossExperiment(fec: Bool) throws -> (fec: Double, plc: Double, clean: Double, lost: Int) {
        let encoder = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .voip)
        encoder.bitrate = 32_000
        encoder.signal = .voice
        encoder.isInbandFECEnabled = fec
        encoder.expectedPacketLossPercent = 25
        let reference = Self.speech(seconds: 3)
        let packets = try opusEncodeAll(reference, encoder: encoder)
        let frame = 960, delay = encoder.lookahead

        let lost = Set(
            stride(from: 10, to: packets.count - 1, by: 6).filter { i in
                let start = i * frame - delay
                return audioRMS(reference[start..<(start + frame)]) > 0.05
            })

        func decode(useFEC: Bool) throws -> [Float] {
            let decoder = try OpusDecoder(sampleRate: .hz48000, channels: 1)
            var out: [Float] = []
            var pcm = [Float](repeating: 0, count: decoder.maxFrameSize)
            for (i, packet) in packets.enumerated() {
                var output = pcm.mutableSpan
                let n: Int
                if !lost.contains(i) {
                    n = try decoder.decode(packet.span.bytes, into: &output)
                } else if useFEC {
                    let next = packets[i + 1]
                    n = try decoder.decodeFEC(nextPacket: next.span.bytes, into: &output, frameSize: frame)
                } else {
                    n = try decoder.concealLoss(into: &output, frameSize: frame)
                }
                #expect(n == frame)
                out.append(contentsOf: pcm[0..<n])
            }
            return out
        }
        let clean = try opusDecodeAll(packets, decoder: OpusDecoder(sampleRate: .hz48000, channels: 1))
        let lag = audioSNR(reference: reference, decoded: clean, delay: delay, skip: 4800, slack: 3).lag
        let regions = lost.map { ($0 * frame - lag)..<(($0 + 1) * frame - lag) }
        return (
            fec: Self.regionSNR(reference, try decode(useFEC: true), regions: regions, lag: lag),
            plc: Self.regionSNR(reference, try decode(useFEC: false), regions: regions, lag: lag),
            clean: Self.regionSNR(reference, clean, regions: regions, lag: lag),
            lost: lost.count
        )
    }

    @Test func fecRecoversDroppedFramesBetterThanConcealment() throws {
        let result = try Self.lossExperiment(fec: true)
        #expect(result.lost >= 12)
        // Measured with libopus 1.3.1: clean 13.7 dB, FEC 11.4 dB, concealment 1.0 dB.
        #expect(result.fec > result.plc + 6, "FEC \(result.fec) dB vs PLC \(result.plc) dB")
        #expect(result.fec > result.clean - 4, "FEC \(result.fec) dB vs clean \(result.clean) dB")
        #expect(result.plc < 5)
    }

    @Test func withoutFECDataDecodeFECFallsBackToConcealment() throws {
        let result = try Self.lossExperiment(fec: false)
        #expect(abs(result.fec - result.plc) < 1, "FEC \(result.fec) dB vs PLC \(result.plc) dB")
    }

    @Test func decoderFinalRangeMatchesEncoderForEveryPacket() throws {
        let encoder = try OpusEncoder(sampleRate: .hz48000, channels: 2, application: .audio)
        let decoder = try OpusDecoder(sampleRate: .hz48000, channels: 2)
        let signal = audioInterleave([Self.speech(seconds: 0.5), Self.speech(seconds: 0.5, seed: 12)])
        var packet = [UInt8](repeating: 0, count: OpusEncoder.maxPacketByteCount)
        var pcm = [Int16](repeating: 0, count: decoder.maxFrameSize * 2)
        for start in stride(from: 0, to: signal.count, by: 1920) {
            let n = try signal[start..<(start + 1920)].withUnsafeBufferPointer { input in
                try packet.withUnsafeMutableBytes { try encoder.encode(input, into: $0) }
            }
            let samples = try packet[0..<n].withUnsafeBytes { bytes in
                try pcm.withUnsafeMutableBufferPointer {
                    var out = $0.mutableSpan; return try decoder.decode(bytes.bytes, into: &out)
                }
            }
            #expect(samples == 960)
            #expect(decoder.finalRange == encoder.finalRange)
        }
        #expect(decoder.lastPacketDuration == 960)
        #expect(decoder.bandwidth == .fullband)
    }

    @Test func int16AndFloatOutputAgreeWithinOneStep() throws {
        let encoder = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .voip)
        let packets = try opusEncodeAll(Self.speech(seconds: 1), encoder: encoder)
        let floatDecoder = try OpusDecoder(sampleRate: .hz48000, channels: 1)
        let intDecoder = try OpusDecoder(sampleRate: .hz48000, channels: 1)
        var floats = [Float](repeating: 0, count: 960), ints = [Int16](repeating: 0, count: 960)
        var worst = 0
        for packet in packets {
            let a = try packet.withUnsafeBytes { bytes in
                try floats.withUnsafeMutableBufferPointer {
                    var out = $0.mutableSpan; return try floatDecoder.decode(bytes.bytes, into: &out)
                }
            }
            let b = try packet.withUnsafeBytes { bytes in
                try ints.withUnsafeMutableBufferPointer {
                    var out = $0.mutableSpan; return try intDecoder.decode(bytes.bytes, into: &out)
                }
            }
            #expect(a == 960 && b == 960)
            for i in 0..<960 {
                let expected = Int(max(-32768, min(32767, (floats[i] * 32768).rounded())))
                worst = max(worst, abs(expected - Int(ints[i])))
            }
        }
        #expect(worst <= 1)
    }

    @Test func concealmentProducesTheRequestedDuration() throws {
        let encoder = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .voip)
        let packets = try opusEncodeAll(Self.speech(seconds: 0.2), encoder: encoder, frame: .ms40)
        let decoder = try OpusDecoder(sampleRate: .hz48000, channels: 1)
        var pcm = [Int16](repeating: 0, count: decoder.maxFrameSize)
        _ = try packets[0].withUnsafeBytes { bytes in
            try pcm.withUnsafeMutableBufferPointer {
                var out = $0.mutableSpan; return try decoder.decode(bytes.bytes, into: &out)
            }
        }
        #expect(decoder.lastPacketDuration == 1920)
        for duration in [OpusFrameDuration.ms2_5, .ms10, .ms20, .ms60] {
            let samples = duration.samples(at: .hz48000)
            let n = try pcm.withUnsafeMutableBufferPointer {
                var out = $0.mutableSpan; return try decoder.concealLoss(into: &out, frameSize: samples)
            }
            #expect(n == samples)
            #expect(decoder.lastPacketDuration == samples)
        }
    }

    @Test func decodesAtAnotherRateThanEncoded() throws {
        var tone48 = SyntheticAudio(pattern: .tone(frequency: 440), sampleRate: 48_000, amplitude: 0.5)
        var tone16 = SyntheticAudio(pattern: .tone(frequency: 440), sampleRate: 16_000, amplitude: 0.5)
        let encoder = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .audio)
        encoder.bitrate = 48_000
        let packets = try opusEncodeAll(tone48.floats(frames: 48_000), encoder: encoder)
        let decoder = try OpusDecoder(sampleRate: .hz16000, channels: 1)
        let decoded = try opusDecodeAll(packets, decoder: decoder)
        #expect(decoded.count == 16_000)
        let reference = tone16.floats(frames: 16_000)
        let result = Quality.snr(reference: Array(reference[1600..<14_000]), decoded: Array(decoded[1600...]), maxLag: 200)
        #expect(result.snr > 20)
    }

    /// Packets whose framing breaks RFC 6716 section 3.2 (each commented with the rule broken).
    static let malformedPackets: [(String, [UInt8])] = [
        ("empty", []),
        ("code 1 with an odd payload: two equal frames cannot split 3 bytes", [0x01, 1, 2, 3]),
        ("code 2 whose first frame length (200) exceeds the packet", [0x02, 200, 1, 2, 3]),
        ("code 3 with a frame count of 0", [0x03, 0x00, 1, 2]),
        ("code 3 with 3 x 60 ms frames = 180 ms > 120 ms", [0x1B, 0x03, 1, 2, 3]),
        ("code 3 CBR whose payload does not split into the frame count", [0x03, 0x02, 1, 2, 3]),
        ("code 3 with padding flag but no padding length byte", [0x03, 0x41]),
        ("code 2 with no length byte", [0x02]),
    ]

    @Test(arguments: 0..<malformedPackets.count)
    func malformedPacketThrowsInvalidPacketAndDecoderStaysUsable(index: Int) throws {
        let (_, bytes) = Self.malformedPackets[index]
        let decoder = try OpusDecoder(sampleRate: .hz48000, channels: 1)
        var pcm = [Float](repeating: 0, count: decoder.maxFrameSize)
        #expect(throws: OpusError.invalidPacket) {
            try bytes.withUnsafeBytes { bytes in
                try pcm.withUnsafeMutableBufferPointer {
                    var out = $0.mutableSpan; return try decoder.decode(bytes.bytes, into: &out)
                }
            }
        }
        #expect(throws: OpusError.invalidPacket) {
            try bytes.withUnsafeBytes { bytes in
                try pcm.withUnsafeMutableBufferPointer {
                    var out = $0.mutableSpan; return try decoder.decodeFEC(nextPacket: bytes.bytes, into: &out, frameSize: 960)
                }
            }
        }
        #expect(throws: OpusError.invalidPacket) { try OpusPacket.validate(bytes.span.bytes) }
        // A good packet still decodes afterwards.
        let encoder = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .audio)
        let good = try opusEncodeAll(Self.speech(seconds: 0.02), encoder: encoder)[0]
        let n = try good.withUnsafeBytes { bytes in
            try pcm.withUnsafeMutableBufferPointer {
                var out = $0.mutableSpan; return try decoder.decode(bytes.bytes, into: &out)
            }
        }
        #expect(n == 960)
    }

    @Test func truncatedMultiFramePacketThrows() throws {
        let encoder = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .audio)
        encoder.bitrate = 64_000
        let packet = try opusEncodeAll(Self.speech(seconds: 0.06), encoder: encoder, frame: .ms60)[0]
        // 60 ms in CELT is three 20 ms frames packed with code 3 and explicit VBR lengths.
        #expect(packet[0] & 0x03 == 3)
        #expect(try OpusPacket.frameCount(packet.span.bytes) == 3)
        let decoder = try OpusDecoder(sampleRate: .hz48000, channels: 1)
        var pcm = [Int16](repeating: 0, count: decoder.maxFrameSize)
        for length in [1, 2, 3, 4] {
            let truncated = Array(packet[0..<length])
            #expect(throws: OpusError.invalidPacket, "truncated to \(length) bytes") {
                try truncated.withUnsafeBytes { bytes in
                    try pcm.withUnsafeMutableBufferPointer {
                        var out = $0.mutableSpan; return try decoder.decode(bytes.bytes, into: &out)
                    }
                }
            }
        }
    }

    @Test func randomBytesEitherDecodeToTheirTOCDurationOrThrow() throws {
        let decoder = try OpusDecoder(sampleRate: .hz48000, channels: 2)
        var pcm = [Float](repeating: 0, count: decoder.maxFrameSize * 2)
        var random = TestRandom(state: 42)
        var decoded = 0, rejected = 0
        for _ in 0..<1500 {
            let bytes = (0..<Int.random(in: 1...120, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            do {
                let n = try bytes.withUnsafeBytes { bytes in
                    try pcm.withUnsafeMutableBufferPointer {
                        var out = $0.mutableSpan; return try decoder.decode(bytes.bytes, into: &out)
                    }
                }
                #expect(n == (try OpusPacket.sampleCount(bytes.span.bytes, sampleRate: .hz48000)))
                #expect(pcm[0..<(n * 2)].allSatisfy { $0.isFinite })
                decoded += 1
            } catch {
                #expect((error as? OpusError) == .invalidPacket)
                rejected += 1
            }
        }
        // Both paths are exercised: random bytes are often valid Opus (code 0 accepts any length).
        #expect(decoded > 100 && rejected > 100, "decoded \(decoded), rejected \(rejected)")
    }

    @Test func outputBufferTooSmallThrows() throws {
        let encoder = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .audio)
        let packet = try opusEncodeAll(Self.speech(seconds: 0.02), encoder: encoder)[0]
        let decoder = try OpusDecoder(sampleRate: .hz48000, channels: 1)
        var half = [Int16](repeating: 0, count: 480)
        #expect(throws: OpusError.bufferTooSmall) {
            try packet.withUnsafeBytes { bytes in
                try half.withUnsafeMutableBufferPointer {
                    var out = $0.mutableSpan; return try decoder.decode(bytes.bytes, into: &out)
                }
            }
        }
        var none: [Float] = []
        #expect(throws: OpusError.bufferTooSmall) {
            try packet.withUnsafeBytes { bytes in
                try none.withUnsafeMutableBufferPointer {
                    var out = $0.mutableSpan; return try decoder.decode(bytes.bytes, into: &out)
                }
            }
        }
        var exact = [Int16](repeating: 0, count: 960)
        #expect(
            try packet.withUnsafeBytes { bytes in
                try exact.withUnsafeMutableBufferPointer {
                    var out = $0.mutableSpan; return try decoder.decode(bytes.bytes, into: &out)
                }
            } == 960)
    }

    @Test func gainScalesTheOutput() throws {
        let encoder = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .audio)
        let packets = try opusEncodeAll(Self.speech(seconds: 0.5), encoder: encoder)
        let plain = try opusDecodeAll(packets, decoder: OpusDecoder(sampleRate: .hz48000, channels: 1))
        let louder = try OpusDecoder(sampleRate: .hz48000, channels: 1)
        louder.gainDecibels = -6
        #expect(louder.gainDecibels == -6)
        let quiet = try opusDecodeAll(packets, decoder: louder)
        let ratio = audioRMS(quiet[...]) / audioRMS(plain[...])
        #expect(abs(20 * log10(ratio) + 6) < 0.1)
    }

    @Test func errorsMatchCatchPatternsAndDescribeTheInput() throws {
        let decoder = try OpusDecoder(sampleRate: .hz48000, channels: 1)
        var pcm = [Int16](repeating: 0, count: 960)
        let bad: [UInt8] = [0x03, 0x00, 9, 9, 9]
        var matched = false
        do {
            _ = try bad.withUnsafeBytes { bytes in
                try pcm.withUnsafeMutableBufferPointer {
                    var out = $0.mutableSpan; return try decoder.decode(bytes.bytes, into: &out)
                }
            }
        } catch OpusError.invalidPacket {
            matched = true
        } catch {
            Issue.record("unexpected error \(error)")
        }
        #expect(matched)
        let error = try #require(
            #expect(throws: OpusError.self) {
                try bad.withUnsafeBytes { bytes in
                    try pcm.withUnsafeMutableBufferPointer {
                        var out = $0.mutableSpan; return try decoder.decode(bytes.bytes, into: &out)
                    }
                }
            })
        // libopus's text for OPUS_INVALID_PACKET, plus which input was bad.
        #expect(error.description.contains("corrupted stream"))
        #expect(error.description.contains("5 bytes"))
        #expect(OpusError(rawValue: -4) == .invalidPacket)
    }
}
