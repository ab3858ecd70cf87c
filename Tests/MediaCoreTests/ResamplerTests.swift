import MediaCore
import MediaTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct ResamplerTests {
    static func tone(_ frequency: Double, rate: Int, seconds: Double, amplitude: Double = 0.5) -> [Float] {
        var generator = SyntheticAudio(pattern: .tone(frequency: frequency), sampleRate: rate, amplitude: amplitude)
        return generator.floats(frames: Int(Double(rate) * seconds))
    }

    /// Resamples all of `input` in one call, through the span API (plus a flush of zeros so the
    /// tail comes out).
    static func resampleWhole(_ resampler: Resampler, _ input: [Float]) -> [Float] {
        var output = [Float](
            repeating: 0, count: resampler.maxOutputFrames(forInputFrames: input.count / resampler.channels) * resampler.channels)
        var out = output.mutableSpan
        let (consumed, produced) = resampler.process(input.span, into: &out)
        #expect(consumed * resampler.channels == input.count)
        return Array(output[0..<(produced * resampler.channels)])
    }

    /// Resamples `input` fed in random chunk sizes into random output capacities.
    static func resampleChunked<T: Numeric>(
        _ resampler: Resampler, _ input: [T], seed: UInt64,
        process: (Resampler, UnsafeBufferPointer<T>, UnsafeMutableBufferPointer<T>) -> (consumed: Int, produced: Int)
    ) -> [T] {
        var random = TestRandom(state: seed)
        let channels = resampler.channels
        var out: [T] = []
        var offset = 0
        var scratch = [T](repeating: 0, count: 4000 * channels)
        while offset < input.count {
            let inFrames = min(Int.random(in: 1...1500, using: &random), (input.count - offset) / channels)
            let outFrames = Int.random(in: 1...4000, using: &random)
            let (consumed, produced) = input[offset..<(offset + inFrames * channels)].withUnsafeBufferPointer { i in
                scratch[0..<(outFrames * channels)].withUnsafeMutableBufferPointer { process(resampler, i, $0) }
            }
            out.append(contentsOf: scratch[0..<(produced * channels)])
            offset += consumed * channels
        }
        return out
    }

    @Test func toneKeepsFrequencyAndAmplitudeFrom44_1kTo48k() throws {
        let resampler = try Resampler(channels: 1, inputRate: 44_100, outputRate: 48_000)
        let output = Self.resampleWhole(resampler, Self.tone(1000, rate: 44_100, seconds: 1.2))
        #expect(abs(output.count - 57_600) <= 1)
        // One second of output after the filter delay: a 1 kHz tone crosses zero 2000 times.
        let window = output[(resampler.outputLatency + 1000)..<(resampler.outputLatency + 1000 + 48_000)]
        #expect(abs(audioZeroCrossings(window) - 2000) <= 1)
        // Amplitude 0.5 sine: RMS 0.3536, kept within 1 %.
        #expect(abs(audioRMS(window) - 0.5 / 2.0.squareRoot()) < 0.0036)
    }

    @Test func integerRatioUpsamplingMatchesTheToneRenderedAtTheOutputRateAfterLatency() throws {
        // Two tones, so a wrong lag cannot look right by one period.
        func twoTones(_ rate: Int) -> [Float] {
            zip(Self.tone(440, rate: rate, seconds: 1, amplitude: 0.4), Self.tone(1370, rate: rate, seconds: 1, amplitude: 0.3))
                .map { $0 + $1 }
        }
        let resampler = try Resampler(channels: 1, inputRate: 16_000, outputRate: 48_000)
        #expect(resampler.outputLatency == resampler.inputLatency * 3)
        let output = Self.resampleWhole(resampler, twoTones(16_000))
        let reference = twoTones(48_000)
        let result = audioSNR(reference: reference, decoded: output, delay: resampler.outputLatency, skip: 2000, slack: 6)
        #expect(result.lag == resampler.outputLatency)
        #expect(result.snr > 40)

        // skipLatency removes that delay: output lines up with the input from the first sample.
        let aligned = try Resampler(channels: 1, inputRate: 16_000, outputRate: 48_000)
        aligned.skipLatency()
        let alignedOutput = Self.resampleWhole(aligned, twoTones(16_000))
        let alignedResult = audioSNR(reference: reference, decoded: alignedOutput, delay: 0, skip: 2000, slack: 0)
        #expect(alignedResult.snr > 40)
    }

    @Test func downsamplingRejectsTonesAboveTheNewNyquist() throws {
        let resampler = try Resampler(channels: 1, inputRate: 48_000, outputRate: 16_000)
        // 10 kHz would alias to 6 kHz at 16 kHz; the filter must remove it.
        let output = Self.resampleWhole(resampler, Self.tone(10_000, rate: 48_000, seconds: 0.5))
        let level = AudioLevel.dBov(rms: audioRMS(output[200...]))
        #expect(level < -50)  // the input is at -9 dBov
    }

    @Test func chunkedFloatInputEqualsWholeInput() throws {
        var speech = SyntheticAudio(pattern: .speech, sampleRate: 44_100, amplitude: 0.7, seed: 5)
        let left = speech.floats(frames: 88_200)
        let input = audioInterleave([left, Self.tone(700, rate: 44_100, seconds: 2)])
        let whole = Self.resampleWhole(try Resampler(channels: 2, inputRate: 44_100, outputRate: 48_000), input)
        let chunked = Self.resampleChunked(try Resampler(channels: 2, inputRate: 44_100, outputRate: 48_000), input, seed: 9) {
            $0.process($1, into: $2)
        }
        #expect(abs(chunked.count - whole.count) <= 2)
        let n = min(chunked.count, whole.count)
        var worst: Float = 0
        for i in 0..<n { worst = max(worst, abs(chunked[i] - whole[i])) }
        #expect(worst < 1e-5)
    }

    @Test func chunkedInt16InputEqualsWholeInput() throws {
        var speech = SyntheticAudio(pattern: .speech, sampleRate: 48_000, amplitude: 0.7, seed: 6)
        let input = speech.int16s(frames: 96_000)
        let resampler = try Resampler(channels: 1, inputRate: 48_000, outputRate: 16_000, quality: .voip)
        var whole = [Int16](repeating: 0, count: resampler.maxOutputFrames(forInputFrames: input.count))
        let (consumed, produced) = input.withUnsafeBufferPointer { i in
            whole.withUnsafeMutableBufferPointer { resampler.process(i, into: $0) }
        }
        #expect(consumed == input.count)
        whole.removeLast(whole.count - produced)
        let chunked = Self.resampleChunked(
            try Resampler(channels: 1, inputRate: 48_000, outputRate: 16_000, quality: .voip), input, seed: 10
        ) {
            $0.process($1, into: $2)
        }
        #expect(abs(chunked.count - whole.count) <= 1)
        let n = min(chunked.count, whole.count)
        #expect((0..<n).allSatisfy { abs(Int(chunked[$0]) - Int(whole[$0])) <= 1 })
    }

    @Test func int16PathMatchesFloatPath() throws {
        let float = Self.tone(1000, rate: 44_100, seconds: 0.5)
        let int16 = float.map { Int16(($0 * 32767).rounded()) }
        let a = Self.resampleWhole(try Resampler(channels: 1, inputRate: 44_100, outputRate: 48_000), int16.map { Float($0) })
        let resampler = try Resampler(channels: 1, inputRate: 44_100, outputRate: 48_000)
        var b = [Int16](repeating: 0, count: resampler.maxOutputFrames(forInputFrames: int16.count))
        let produced = int16.withUnsafeBufferPointer { i in
            b.withUnsafeMutableBufferPointer { resampler.process(i, into: $0).produced }
        }
        #expect(produced == a.count)
        #expect((0..<produced).allSatisfy { abs(Float(b[$0]) - a[$0]) <= 1 })
    }

    @Test func stereoChannelsStaySeparate() throws {
        let resampler = try Resampler(channels: 2, inputRate: 48_000, outputRate: 44_100)
        let silent = [Float](repeating: 0, count: 48_000)
        let output = Self.resampleWhole(resampler, audioInterleave([Self.tone(1000, rate: 48_000, seconds: 1), silent]))
        let left = audioChannel(output, channel: 0, of: 2), right = audioChannel(output, channel: 1, of: 2)
        #expect(right.allSatisfy { $0 == 0 })
        #expect(audioRMS(left[1000...]) > 0.3)

        let two = try Resampler(channels: 2, inputRate: 48_000, outputRate: 44_100)
        let mixed = Self.resampleWhole(
            two, audioInterleave([Self.tone(1000, rate: 48_000, seconds: 1), Self.tone(3000, rate: 48_000, seconds: 1)]))
        let l = audioChannel(mixed, channel: 0, of: 2), r = audioChannel(mixed, channel: 1, of: 2)
        let latency = two.outputLatency
        #expect(abs(audioZeroCrossings(l[latency..<(latency + 22_050)]) - 1000) <= 1)
        #expect(abs(audioZeroCrossings(r[latency..<(latency + 22_050)]) - 3000) <= 1)
    }

    @Test func resetStartsAFreshStream() throws {
        var speech = SyntheticAudio(pattern: .speech, sampleRate: 16_000, amplitude: 0.7)
        let input = speech.floats(frames: 8000)
        let resampler = try Resampler(channels: 1, inputRate: 16_000, outputRate: 48_000)
        let first = Self.resampleWhole(resampler, input)
        resampler.reset()
        let second = Self.resampleWhole(resampler, input)
        #expect(first == second)
    }

    @Test func higherQualityHasLongerFilter() throws {
        let low = try Resampler(channels: 1, inputRate: 44_100, outputRate: 48_000, quality: .min)
        let high = try Resampler(channels: 1, inputRate: 44_100, outputRate: 48_000, quality: .max)
        #expect(low.inputLatency < high.inputLatency)
        #expect(low.quality < high.quality)
    }
}
