import MediaCore
import Testing

@Suite struct OpusPacketTests {
    /// Hand-built packets, read through spans, with the TOC fields of RFC 6716 section 3.1 (config << 3 | stereo << 2 | code).
    @Test func readsTOCFieldsOfHandBuiltPackets() throws {
        // Config 0: SILK narrowband 10 ms, mono, code 0 (one frame), 3 payload bytes.
        let silk: [UInt8] = [0x00, 1, 2, 3]
        do {
            let p = silk.span.bytes
            #expect(try OpusPacket.mode(p) == .silk)
            #expect(try OpusPacket.bandwidth(p) == .narrowband)
            #expect(try OpusPacket.samplesPerFrame(p, sampleRate: .hz48000) == 480)
            #expect(try OpusPacket.samplesPerFrame(p, sampleRate: .hz8000) == 80)
            #expect(try OpusPacket.frameCount(p) == 1)
            #expect(try OpusPacket.channelCount(p) == 1)
        }
        // Config 13: hybrid superwideband 20 ms, stereo, code 1 (two equal frames of 2 bytes).
        let hybrid: [UInt8] = [13 << 3 | 0x04 | 0x01, 1, 2, 3, 4]
        do {
            let p = hybrid.span.bytes
            #expect(try OpusPacket.mode(p) == .hybrid)
            #expect(try OpusPacket.bandwidth(p) == .superwideband)
            #expect(try OpusPacket.frameCount(p) == 2)
            #expect(try OpusPacket.sampleCount(p, sampleRate: .hz48000) == 1920)
            #expect(try OpusPacket.channelCount(p) == 2)
        }
        // Config 31: CELT fullband 20 ms, mono, code 3 CBR with 3 frames of 1 byte.
        let celt: [UInt8] = [31 << 3 | 0x03, 0x03, 7, 8, 9]
        do {
            let p = celt.span.bytes
            #expect(try OpusPacket.mode(p) == .celt)
            #expect(try OpusPacket.bandwidth(p) == .fullband)
            #expect(try OpusPacket.frameCount(p) == 3)
            #expect(try OpusPacket.sampleCount(p, sampleRate: .hz24000) == 1440)
        }
        // Config 16: CELT narrowband 2.5 ms.
        let short: [UInt8] = [16 << 3, 0xAA]
        do {
            let p = short.span.bytes
            #expect(try OpusPacket.samplesPerFrame(p, sampleRate: .hz48000) == 120)
            #expect(try OpusPacket.bandwidth(p) == .narrowband)
        }
    }

    @Test func inspectsEncoderOutput() throws {
        let stereo = try OpusEncoder(sampleRate: .hz48000, channels: 2, application: .audio)
        stereo.bitrate = 96_000
        var speech = SyntheticAudio(pattern: .speech, sampleRate: 48_000, channels: 2, amplitude: 0.7)
        let packets = try opusEncodeAll(speech.floats(frames: 2880), encoder: stereo, frame: .ms60)
        try packets[0].withUnsafeBytes { p throws in
            #expect(try OpusPacket.channelCount(p.bytes) == 2)
            #expect(try OpusPacket.sampleCount(p.bytes, sampleRate: .hz48000) == 2880)
            #expect(try OpusPacket.frameCount(p.bytes) * OpusPacket.samplesPerFrame(p.bytes, sampleRate: .hz48000) == 2880)
        }
        let voice = try OpusEncoder(sampleRate: .hz16000, channels: 1, application: .voip)
        voice.bitrate = 12_000
        var mono = SyntheticAudio(pattern: .speech, sampleRate: 16_000, amplitude: 0.7)
        let voicePackets = try opusEncodeAll(mono.floats(frames: 3200), encoder: voice)
        for packet in voicePackets {
            try packet.withUnsafeBytes { p throws in
                #expect(try OpusPacket.mode(p.bytes) == .silk)
                #expect(try OpusPacket.bandwidth(p.bytes) <= .wideband)
                #expect(try OpusPacket.channelCount(p.bytes) == 1)
            }
        }
    }

    @Test func throwsOnEmptyAndMalformedPackets() throws {
        let empty: [UInt8] = []
        try empty.withUnsafeBytes { p throws in
            #expect(throws: OpusError.invalidPacket) { try OpusPacket.bandwidth(p.bytes) }
            #expect(throws: OpusError.invalidPacket) { try OpusPacket.samplesPerFrame(p.bytes, sampleRate: .hz48000) }
            #expect(throws: OpusError.invalidPacket) { try OpusPacket.frameCount(p.bytes) }
        }
        // Code 3 claiming 49 frames (more than the 48 allowed).
        let tooMany: [UInt8] = [0x03, 49] + [UInt8](repeating: 0, count: 49)
        try tooMany.withUnsafeBytes { p throws in
            #expect(throws: OpusError.invalidPacket) { try OpusPacket.frameCount(p.bytes) }
            #expect(throws: OpusError.invalidPacket) { try OpusPacket.channelCount(p.bytes) }
            #expect(throws: OpusError.invalidPacket) { try OpusPacket.mode(p.bytes) }
            #expect(throws: OpusError.invalidPacket) { try OpusPacket.sampleCount(p.bytes, sampleRate: .hz48000) }
        }
        // The error's message names the input for logs.
        let bad: [UInt8] = [0x03, 0]
        let error = bad.withUnsafeBytes { p -> OpusError? in
            do throws(OpusError) { _ = try OpusPacket.frameCount(p.bytes); return nil } catch { return error }
        }
        #expect(error == .invalidPacket)
        #expect(error?.message?.contains("2 bytes") == true)
    }

    @Test func dtxSilenceIsTwoBytesOrLess() {
        #expect(OpusPacket.isDTXSilence(byteCount: 1))
        #expect(OpusPacket.isDTXSilence(byteCount: 2))
        #expect(!OpusPacket.isDTXSilence(byteCount: 3))
    }

    @Test func frameDurationSampleCounts() {
        #expect(OpusFrameDuration.ms2_5.samples(at: .hz48000) == 120)
        #expect(OpusFrameDuration.ms20.samples(at: .hz8000) == 160)
        #expect(OpusFrameDuration.ms60.samples(at: .hz12000) == 720)
        #expect(OpusFrameDuration(samples: 480, sampleRate: .hz24000) == .ms20)
        #expect(OpusFrameDuration(samples: 500, sampleRate: .hz48000) == nil)
        #expect(OpusSampleRate(hertz: 44_100) == nil)
    }
}
