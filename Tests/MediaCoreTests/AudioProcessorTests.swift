import MediaCore
import Testing

@Suite struct AudioProcessorTests {
    static let rate = 16_000, frame = 320  // 20 ms

    /// Runs `input` through `processor` frame by frame; returns the output and the per-frame results.
    static func run(_ processor: AudioProcessor, _ input: [Int16]) -> (output: [Int16], results: [AudioProcessor.Result]) {
        var output = input
        var results: [AudioProcessor.Result] = []
        output.withUnsafeMutableBufferPointer { all in
            for start in stride(from: 0, to: all.count - frame + 1, by: frame) {
                results.append(processor.process(UnsafeMutableBufferPointer(rebasing: all[start..<(start + frame)])))
            }
        }
        return (output, results)
    }

    static func level(_ samples: ArraySlice<Int16>) -> Double {
        Array(samples).withUnsafeBufferPointer { AudioLevel.dBov($0) }
    }

    static func noise(seconds: Double, amplitude: Double, seed: UInt64 = 1) -> [Int16] {
        var generator = SyntheticAudio(pattern: .whiteNoise, sampleRate: rate, amplitude: amplitude, seed: seed)
        return generator.int16s(frames: Int(Double(rate) * seconds))
    }

    @Test func denoiseLowersTheEnergyOfWhiteNoise() throws {
        let input = Self.noise(seconds: 3, amplitude: 0.1)  // -24.7 dBov
        let processor = try AudioProcessor(frameSize: Self.frame, sampleRate: Self.rate)
        #expect(processor.isDenoiseEnabled)  // speexdsp's default
        #expect(processor.noiseSuppressionDecibels == -15)
        let mild = Self.run(processor, input).output
        let strong = try AudioProcessor(frameSize: Self.frame, sampleRate: Self.rate)
        strong.noiseSuppressionDecibels = -30
        #expect(strong.noiseSuppressionDecibels == -30)
        let strongOutput = Self.run(strong, input).output
        let last = (input.count - Self.rate)..<input.count  // the last second, after the noise estimate settles
        let before = Self.level(input[last]), afterMild = Self.level(mild[last]), afterStrong = Self.level(strongOutput[last])
        // Measured: -24.7 -> -38.9 dBov at -15 dB, -49.4 dBov at -30 dB.
        #expect(afterMild < before - 10)
        #expect(afterStrong < afterMild - 5)
    }

    @Test func withEverythingOffOutputIsTheInputOneFrameLater() throws {
        var speech = SyntheticAudio(pattern: .speech, sampleRate: Self.rate, amplitude: 0.5)
        let input = speech.int16s(frames: Self.rate)
        let processor = try AudioProcessor(frameSize: Self.frame, sampleRate: Self.rate)
        processor.isDenoiseEnabled = false
        processor.isAGCEnabled = false
        #expect(!processor.isDenoiseEnabled && !processor.isAGCEnabled)
        let output = Self.run(processor, input).output
        let delay = processor.latency
        #expect(output[0..<delay].allSatisfy { $0 == 0 })
        #expect(Array(output[delay...]) == Array(input[0..<(input.count - delay)]))
    }

    @Test func denoiseKeepsSpeechAndQuietsThePausesBetweenSyllables() throws {
        var speech = SyntheticAudio(pattern: .speech, sampleRate: Self.rate, amplitude: 0.5, seed: 4)
        let clean = speech.int16s(frames: Self.rate * 4)
        let noise = Self.noise(seconds: 4, amplitude: 0.01, seed: 9)
        let noisy = zip(clean, noise).map { Int16(clamping: Int($0) + Int($1)) }
        let processor = try AudioProcessor(frameSize: Self.frame, sampleRate: Self.rate)
        let raw = Self.run(processor, noisy).output
        let output = Array(raw[processor.latency...])  // aligned with the input
        let tail = (Self.rate * 2)..<(Self.rate * 4 - processor.latency)
        // Speech level is kept within 1.5 dB.
        #expect(abs(Self.level(output[tail]) - Self.level(clean[tail])) < 1.5)
        // Pauses (frames where the clean signal is silent) lose most of their noise.
        var pauseBefore: [Int16] = [], pauseAfter: [Int16] = []
        for start in stride(from: tail.lowerBound, to: tail.upperBound - Self.frame, by: Self.frame)
        where clean[start..<(start + Self.frame)].allSatisfy({ $0 == 0 }) {
            pauseBefore += noisy[start..<(start + Self.frame)]
            pauseAfter += output[start..<(start + Self.frame)]
        }
        #expect(pauseBefore.count >= 10 * Self.frame)
        let before = Self.level(pauseBefore[...]), after = Self.level(pauseAfter[...])
        #expect(after < before - 5)  // measured 8.1 dB
    }

    @Test func agcRaisesQuietSpeech() throws {
        var speech = SyntheticAudio(pattern: .speech, sampleRate: Self.rate, amplitude: 0.02, seed: 2)
        let input = speech.int16s(frames: Self.rate * 4)
        let processor = try AudioProcessor(frameSize: Self.frame, sampleRate: Self.rate)
        processor.isAGCEnabled = true
        processor.agcLevel = 8000
        processor.agcMaxGainDecibels = 30
        #expect(processor.isAGCEnabled && processor.agcLevel == 8000 && processor.agcMaxGainDecibels == 30)
        let output = Self.run(processor, input).output
        let tail = (Self.rate * 3)..<(Self.rate * 4)
        // Measured: -50.9 dBov in, -29.1 dBov out, gain 23 dB.
        #expect(Self.level(output[tail]) > Self.level(input[tail]) + 15)
        #expect(processor.agcGainDecibels > 10)
    }

    @Test func speechProbabilitySeparatesSpeechFromNoiseOnlyWithStrictThresholds() throws {
        var speech = SyntheticAudio(pattern: .speech, sampleRate: Self.rate, amplitude: 0.5, seed: 3)
        let noise = Self.noise(seconds: 3, amplitude: 0.01)
        let voiced = zip(speech.int16s(frames: Self.rate * 3), noise).map { Int16(clamping: Int($0) + Int($1)) }
        func rates(start: Int, keep: Int) throws -> (
            speech: Double, noise: Double, speechProbability: Double, noiseProbability: Double
        ) {
            let a = try AudioProcessor(frameSize: Self.frame, sampleRate: Self.rate)
            let b = try AudioProcessor(frameSize: Self.frame, sampleRate: Self.rate)
            for p in [a, b] { p.isVADEnabled = true; p.vadStartPercent = start; p.vadContinuePercent = keep }
            #expect(a.isVADEnabled && a.vadStartPercent == start && a.vadContinuePercent == keep)
            let s = Self.run(a, voiced).results.dropFirst(50), n = Self.run(b, noise).results.dropFirst(50)
            return (
                Double(s.filter(\.isSpeech).count) / Double(s.count), Double(n.filter(\.isSpeech).count) / Double(n.count),
                s.map(\.speechProbability).reduce(0, +) / Double(s.count),
                n.map(\.speechProbability).reduce(0, +) / Double(n.count)
            )
        }
        // speexdsp's defaults (35 % / 20 %): plain noise counts as speech too; that is why Revue
        // detects speaking from levels.
        let loose = try rates(start: 35, keep: 20)
        #expect(loose.noise > 0.8)
        // The probability itself does separate them (measured 0.96 vs 0.49) ...
        #expect(loose.speechProbability > loose.noiseProbability + 0.3)
        // ... so strict thresholds make the flag usable (measured 96 % vs 15 %).
        let strict = try rates(start: 80, keep: 70)
        #expect(strict.speech > 0.8)
        #expect(strict.noise < 0.4)
    }
}
