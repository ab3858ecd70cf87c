import MediaCore
import MediaTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct SyntheticAudioTests {
    @Test(arguments: [SyntheticAudio.Pattern.speech, .tone(frequency: 440), .whiteNoise])
    func renderingInChunksEqualsRenderingAtOnce(pattern: SyntheticAudio.Pattern) {
        var whole = SyntheticAudio(pattern: pattern, sampleRate: 44_100, channels: 2, amplitude: 0.8, seed: 77)
        let all = whole.int16s(frames: 30_000)
        var chunked = SyntheticAudio(pattern: pattern, sampleRate: 44_100, channels: 2, amplitude: 0.8, seed: 77)
        var pieces: [Int16] = []
        var random = TestRandom(state: 3)
        while chunked.position < 30_000 {
            pieces += chunked.int16s(frames: min(Int.random(in: 1...2000, using: &random), 30_000 - chunked.position))
        }
        #expect(pieces == all)
        #expect(whole.position == 30_000)
        // Channels are identical.
        #expect(stride(from: 0, to: all.count, by: 2).allSatisfy { all[$0] == all[$0 + 1] })
    }

    @Test func seedSelectsTheSignal() {
        var a = SyntheticAudio(pattern: .speech, sampleRate: 16_000, seed: 1)
        var b = SyntheticAudio(pattern: .speech, sampleRate: 16_000, seed: 1)
        var c = SyntheticAudio(pattern: .speech, sampleRate: 16_000, seed: 2)
        let x = a.floats(frames: 16_000), y = b.floats(frames: 16_000), z = c.floats(frames: 16_000)
        #expect(x == y)
        #expect(x != z)
    }

    @Test func int16IsTheFloatSignalScaled() {
        var a = SyntheticAudio(pattern: .speech, sampleRate: 8000, amplitude: 0.9)
        var b = a
        let floats = a.floats(frames: 8000), ints = b.int16s(frames: 8000)
        #expect(zip(floats, ints).allSatisfy { abs(Double($0) * 32767 - Double($1)) <= 0.5 + 1e-3 })
    }

    @Test func toneHasItsFrequencyAndAmplitude() {
        var tone = SyntheticAudio(pattern: .tone(frequency: 1000), sampleRate: 48_000, amplitude: 0.25)
        let samples = tone.floats(frames: 48_000)
        #expect(abs(audioZeroCrossings(samples[...]) - 2000) <= 1)
        #expect(abs(Double(samples.map { abs($0) }.max()!) - 0.25) < 1e-4)
        // Phase stays exact far into a long stream: 1 kHz repeats every 48 frames at 48 kHz, so
        // frame 1_000_000_007 (= 23 mod 48) has the value of frame 23.
        #expect(abs(tone.sample(atFrame: 1_000_000_007) - tone.sample(atFrame: 23)) < 1e-6)
        #expect(abs(tone.sample(atFrame: 23) - 0.25 * sin(2 * Double.pi * 23 / 48)) < 1e-12)
    }

    /// Properties a speech-like test signal needs: syllables at ~4 Hz separated by quiet gaps, a
    /// voice pitch in 80-300 Hz, and a level typical of speech.
    @Test(arguments: [8000, 16_000, 48_000])
    func speechHasSyllablesPitchAndPauses(rate: Int) {
        var speech = SyntheticAudio(pattern: .speech, sampleRate: rate, amplitude: 0.7, seed: 21)
        let seconds = 8
        let samples = speech.floats(frames: rate * seconds)
        #expect(samples.allSatisfy { abs($0) <= 0.7 })
        let level = AudioLevel.dBov(rms: audioRMS(samples[...]))
        #expect(level > -30 && level < -10)

        // 10 ms frame levels: count onsets (quiet -> loud) and quiet frames.
        let frame = rate / 100
        let levels = stride(from: 0, to: samples.count, by: frame).map { audioRMS(samples[$0..<($0 + frame)]) }
        let loud = levels.map { $0 > 0.03 }
        let onsets = zip(loud, loud.dropFirst()).filter { !$0 && $1 }.count
        let quietFraction = Double(loud.filter { !$0 }.count) / Double(loud.count)
        #expect(Double(onsets) / Double(seconds) > 2.5 && Double(onsets) / Double(seconds) < 5)
        #expect(quietFraction > 0.2 && quietFraction < 0.7)

        // Pitch of loud 30 ms stretches by autocorrelation: the strongest lag lies in 80-300 Hz.
        var voicedFrames = 0, inRange = 0
        for (i, isLoud) in loud.enumerated() where isLoud && i % 7 == 0 && (i + 3) * frame <= samples.count {
            let window = Array(samples[(i * frame)..<((i + 3) * frame)])
            let energy = window.reduce(0) { $0 + Double($1) * Double($1) }
            var bestLag = 0, best = -1.0
            for lag in (rate / 400)...(rate / 60) {
                var sum = 0.0
                for j in 0..<(window.count - lag) { sum += Double(window[j]) * Double(window[j + lag]) }
                if sum > best { best = sum; bestLag = lag }
            }
            guard best > 0.4 * energy else { continue }  // a noise burst, not a voiced frame
            voicedFrames += 1
            let f0 = Double(rate) / Double(bestLag)
            if f0 >= 80 && f0 <= 300 { inRange += 1 }
        }
        #expect(voicedFrames >= 10)
        #expect(Double(inRange) >= 0.9 * Double(voicedFrames))
    }

    @Test func patternNamesForTheCLI() {
        #expect(SyntheticAudio.Pattern(name: "tone") == .tone(frequency: 1000))
        #expect(SyntheticAudio.Pattern(name: "Speech") == .speech)
        #expect(SyntheticAudio.Pattern(name: "noise") == .whiteNoise)
        #expect(SyntheticAudio.Pattern(name: "silence") == .silence)
        #expect(SyntheticAudio.Pattern(name: "music") == nil)
    }
}
