import MediaCore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct AudioLevelTests {
    static func sine(amplitude: Double, frames: Int = 48_000) -> [Int16] {
        var tone = SyntheticAudio(pattern: .tone(frequency: 1000), sampleRate: 48_000, amplitude: amplitude)
        return tone.int16s(frames: frames)
    }

    @Test func knownAmplitudesGiveKnownLevels() {
        // RFC 6465 Appendix A scale: a full-scale square wave is 0 dBov, a full-scale sine -3.01 dBov.
        let square = (0..<4800).map { $0 % 2 == 0 ? Int16.max : Int16.min }
        do {
            let samples = square.span
            #expect(abs(AudioLevel.dBov(samples)) < 0.01)
            #expect(AudioLevel.rfc6464Level(samples) == 0)
        }
        do {
            let loud = Self.sine(amplitude: 1)
            let samples = loud.span
            #expect(abs(AudioLevel.dBov(samples) + 3.0103) < 0.01)
            #expect(AudioLevel.rfc6464Level(samples) == 3)
        }
        do {
            let quiet = Self.sine(amplitude: 0.1)
            let samples = quiet.span
            #expect(abs(AudioLevel.dBov(samples) + 23.0103) < 0.01)
            #expect(AudioLevel.rfc6464Level(samples) == 23)
        }
        // A +-1 LSB square wave: 20 log10(1/32768) = -90.3 dBov.
        let lsb = (0..<480).map { Int16($0 % 2 == 0 ? 1 : -1) }
        do {
            let samples = lsb.span
            #expect(abs(AudioLevel.dBov(samples) + 90.309) < 0.01)
            #expect(AudioLevel.rfc6464Level(samples) == 90)
        }
    }

    @Test func silenceIsLevel127() {
        let zeros = [Int16](repeating: 0, count: 960)
        do {
            let samples = zeros.span
            #expect(AudioLevel.dBov(samples) == -.infinity)
            #expect(AudioLevel.rfc6464Level(samples) == AudioLevel.silence)
        }
        let empty: [Float] = []
        #expect(AudioLevel.rfc6464Level(empty.span) == 127)
        #expect(AudioLevel.rfc6464Level(dBov: -127.4) == 127)
        #expect(AudioLevel.rfc6464Level(dBov: -140) == 127)
        #expect(AudioLevel.rfc6464Level(dBov: -126.6) == 127)
        #expect(AudioLevel.rfc6464Level(dBov: -126.4) == 126)
        #expect(AudioLevel.rfc6464Level(dBov: 2) == 0)  // clipping input still reports 0
    }

    /// The vectorized Float RMS against a plain Double sum of squares, for lengths around the
    /// vector width and the block size, and a long buffer.
    @Test(arguments: [1, 7, 8, 9, 511, 512, 513, 960, 1921, 48_000])
    func floatRMSMatchesAPlainDoubleSum(_ count: Int) {
        var tone = SyntheticAudio(pattern: .tone(frequency: 997), sampleRate: 48_000, amplitude: 0.7)
        let samples = Array(tone.floats(frames: count + 100).suffix(count))
        var sum = 0.0
        for s in samples { sum += Double(s) * Double(s) }
        let want = (sum / Double(count)).squareRoot()
        let got = AudioLevel.rms(samples.span)
        #expect(want > 0)
        #expect(abs(got - want) <= 1e-6 * want, "\(count) samples: \(got) vs \(want)")
    }

    @Test func floatAndInt16Agree() {
        var speech = SyntheticAudio(pattern: .speech, sampleRate: 16_000, amplitude: 0.6)
        let floats = speech.floats(frames: 16_000)
        let ints = floats.map { Int16(($0 * 32767).rounded()) }
        let a = AudioLevel.dBov(floats.span)
        let b = AudioLevel.dBov(ints.span)
        #expect(abs(a - b) < 0.01)
    }
}
