#if canImport(Glibc)
    import Glibc
#endif

/// Deterministic test audio for tests, the CLI (`--pattern tone|speech`) and benchmarks: a sine
/// tone, a speech-like signal, white noise or silence, at any rate and channel count, rendered into
/// caller buffers.
///
/// Every sample is a pure function of (pattern, seed, sample rate, frame index), so rendering in
/// chunks of any size equals rendering at once, and two generators with the same settings agree.
/// All channels carry the same signal. Thread rule: a value type; `Sendable`. Cost: the tone is one
/// `sin` per frame; speech sums up to ~35 harmonics per frame (cheap enough for real time, not
/// for hot-path benchmarks of other stages: render ahead of time there).
public struct SyntheticAudio: Sendable {
    /// What to generate.
    public enum Pattern: Sendable, Hashable, CustomStringConvertible {
        /// A sine at `frequency` Hz with peak `amplitude`.
        case tone(frequency: Double)
        /// Speech-like: syllables about 4 per second, each a harmonic series (pitch about 70-240 Hz
        /// with a rising or falling contour) shaped by three formant resonances, a smooth
        /// envelope and a per-syllable loudness, alternating with pauses and short noise bursts
        /// (fricatives).
        case speech
        /// Uniform white noise with peak `amplitude`.
        case whiteNoise
        /// Digital zero.
        case silence

        /// The patterns the CLI accepts: "tone" (1 kHz), "speech", "noise", "silence".
        public init?(name: String) {
            switch name.lowercased() {
            case "tone", "sine": self = .tone(frequency: 1000)
            case "speech": self = .speech
            case "noise", "whitenoise", "white-noise": self = .whiteNoise
            case "silence": self = .silence
            default: return nil
            }
        }

        /// A readable description, for logs and error messages.
        public var description: String {
            switch self {
            case .tone(let frequency): "tone \(frequency) Hz"
            case .speech: "speech"
            case .whiteNoise: "noise"
            case .silence: "silence"
            }
        }
    }

    /// The signal generated.
    public let pattern: Pattern
    /// Frames per second.
    public let sampleRate: Int
    /// Interleaved channels written by `render` (all identical).
    public let channels: Int
    /// Peak amplitude as a fraction of full scale, 0...1.
    public let amplitude: Double
    /// Seed for the speech contour and noise: same seed, same signal.
    public let seed: UInt64
    /// Index of the next frame `render` writes; advances with every call. Set it to seek.
    public var position: Int = 0

    /// Syllable slot length of `.speech`: 250 ms, i.e. a syllable rate of 4 Hz.
    public static let syllableDuration = 0.25

    /// A generator starting at frame 0. Traps for non-positive rate or channels, or amplitude outside 0...1.
    public init(pattern: Pattern, sampleRate: Int, channels: Int = 1, amplitude: Double = 0.5, seed: UInt64 = 1) {
        precondition(sampleRate > 0 && channels > 0, "SyntheticAudio needs a positive rate and channel count")
        precondition((0...1).contains(amplitude), "SyntheticAudio amplitude \(amplitude) outside 0...1")
        self.pattern = pattern
        self.sampleRate = sampleRate
        self.channels = channels
        self.amplitude = amplitude
        self.seed = seed
    }

    /// Renders `output.count / channels` frames of interleaved Float samples (full scale 1.0)
    /// starting at `position`, and advances `position`. `output.count` must be a multiple of `channels`.
    package mutating func render(into output: UnsafeMutableBufferPointer<Float>) {
        precondition(
            output.count % channels == 0, "SyntheticAudio buffer of \(output.count) is not whole \(channels)-channel frames")
        let frames = output.count / channels
        for frame in 0..<frames {
            let value = Float(sample(atFrame: position + frame))
            for channel in 0..<channels { output[frame * channels + channel] = value }
        }
        position += frames
    }

    /// Renders interleaved Int16 samples (full scale 32767) like the Float overload.
    package mutating func render(into output: UnsafeMutableBufferPointer<Int16>) {
        precondition(
            output.count % channels == 0, "SyntheticAudio buffer of \(output.count) is not whole \(channels)-channel frames")
        let frames = output.count / channels
        for frame in 0..<frames {
            let value = Int16((sample(atFrame: position + frame) * 32767).rounded())
            for channel in 0..<channels { output[frame * channels + channel] = value }
        }
        position += frames
    }

    /// Convenience for tests and tools (allocates): the next `frames` frames as interleaved Floats.
    public mutating func floats(frames: Int) -> [Float] {
        [Float](unsafeUninitializedCapacity: frames * channels) { buffer, count in
            render(into: buffer)
            count = frames * channels
        }
    }

    /// Convenience for tests and tools (allocates): the next `frames` frames as interleaved Int16.
    public mutating func int16s(frames: Int) -> [Int16] {
        [Int16](unsafeUninitializedCapacity: frames * channels) { buffer, count in
            render(into: buffer)
            count = frames * channels
        }
    }

    /// The mono sample at `frame`, in -1...1 (already scaled by `amplitude`).
    public func sample(atFrame frame: Int) -> Double {
        switch pattern {
        case .silence:
            return 0
        case .tone(let frequency):
            // frac(f * n / rate) keeps the phase exact for long streams.
            let cycles = frequency * Double(frame) / Double(sampleRate)
            return amplitude * sin(2 * Double.pi * (cycles - cycles.rounded(.down)))
        case .whiteNoise:
            return amplitude * (2 * unit(hash(seed &+ 0x5EED, UInt64(bitPattern: Int64(frame)))) - 1)
        case .speech:
            return amplitude * speech(atFrame: frame)
        }
    }

    // MARK: Speech model

    private func speech(atFrame frame: Int) -> Double {
        let t = Double(frame) / Double(sampleRate)
        let slot = Int((t / Self.syllableDuration).rounded(.down))
        let tau = t - Double(slot) * Self.syllableDuration
        let slotKey = UInt64(bitPattern: Int64(slot))
        let kind = unit(hash(seed, slotKey &* 8))
        if kind < 0.15 { return 0 }  // pause

        var value = 0.0
        var voicedStart = 0.01 + 0.03 * unit(hash(seed, slotKey &* 8 &+ 1))
        if kind < 0.32 {
            // Fricative: a noise burst of 40-90 ms, then a shorter voiced part.
            let burst = 0.04 + 0.05 * unit(hash(seed, slotKey &* 8 &+ 2))
            if tau < burst {
                let envelope = sin(Double.pi * tau / burst)
                value += 0.3 * envelope * (2 * unit(hash(seed &+ 0xF41C, UInt64(bitPattern: Int64(frame)))) - 1)
            }
            voicedStart += burst
        }
        let duration = min(0.12 + 0.08 * unit(hash(seed, slotKey &* 8 &+ 3)), Self.syllableDuration - 0.02 - voicedStart)
        let local = tau - voicedStart
        guard duration > 0.03, local >= 0, local < duration else { return value }

        // Pitch: a per-seed speaker base of 100-160 Hz, per syllable scaled 0.9-1.3 and gliding
        // by -25...+15 % over the syllable; phase integrates the linear contour exactly.
        let speakerF0 = 100 + 60 * unit(hash(seed, 0xF0F0))
        let f0Start = speakerF0 * (0.9 + 0.4 * unit(hash(seed, slotKey &* 8 &+ 4)))
        let f0End = f0Start * (0.75 + 0.4 * unit(hash(seed, slotKey &* 8 &+ 5)))
        let slope = (f0End - f0Start) / duration
        let f0 = f0Start + slope * local
        let phase = f0Start * local + 0.5 * slope * local * local  // in cycles of the fundamental

        // Formants (Hz) and bandwidths: an open vowel-ish spectral envelope per syllable.
        let f1 = 300 + 500 * unit(hash(seed, slotKey &* 8 &+ 6))
        let f2 = 900 + 1400 * unit(hash(seed, slotKey &* 8 &+ 7))
        let f3 = 2500.0
        let limit = min(4000.0, 0.45 * Double(sampleRate))
        var sum = 0.0, energy = 0.0
        var harmonic = 1
        while Double(harmonic) * f0 < limit {
            let f = Double(harmonic) * f0
            let a = resonance(f, f1, 90) + 0.7 * resonance(f, f2, 120) + 0.3 * resonance(f, f3, 200) + 0.02
            let cycles = Double(harmonic) * phase
            sum += a * sin(2 * Double.pi * (cycles - cycles.rounded(.down)))
            energy += a * a
            harmonic += 1
        }
        guard energy > 0 else { return value }
        // Smooth envelope: 25 ms attack, 50 ms release, plateau in between.
        let attack = min(1, local / 0.025), release = min(1, (duration - local) / 0.05)
        let envelope = sin(0.5 * Double.pi * attack) * sin(0.5 * Double.pi * release)
        // Syllables differ in loudness (stress): a per-syllable gain of 0.55-1.
        let stress = 0.55 + 0.45 * unit(hash(seed &+ 0x57E5, slotKey))
        value += stress * envelope * 0.45 * sum / (2 * energy).squareRoot()
        return max(-1, min(1, value))
    }

    private func resonance(_ f: Double, _ center: Double, _ bandwidth: Double) -> Double {
        let x = (f - center) / bandwidth
        return 1 / (1 + x * x)
    }

    /// SplitMix64 of a seed and a key: a counter-based generator, so any sample is random-access.
    private func hash(_ seed: UInt64, _ key: UInt64) -> UInt64 {
        var z = seed &+ key &* 0x9E37_79B9_7F4A_7C15 &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform value in [0, 1) from 53 bits of `bits`.
    private func unit(_ bits: UInt64) -> Double { Double(bits >> 11) * 0x1p-53 }
}

// MARK: Spans

extension SyntheticAudio {
    /// Renders `output.count / channels` frames of interleaved Float samples (full scale 1.0)
    /// starting at `position`, and advances `position`. `output.count` must be a multiple of
    /// `channels` (traps otherwise).
    public mutating func render(into output: inout MutableSpan<Float>) {
        output.withUnsafeMutableBufferPointer { render(into: $0) }
    }

    /// Renders interleaved Int16 samples (full scale 32767) like the Float form.
    public mutating func render(into output: inout MutableSpan<Int16>) {
        output.withUnsafeMutableBufferPointer { render(into: $0) }
    }
}
