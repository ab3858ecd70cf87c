import MediaCore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct SpeakingDetectorTests {
    /// 20 ms frames at 48 kHz of a deterministic signal: `burst` gives syllable-like bursts of a
    /// harmonic tone (~4 per second, each 150 ms with 100 ms dips), `noise` steady white noise.
    static func frame(_ index: Int, amplitude: Float, kind: Kind, seed: inout UInt64) -> [Float] {
        var out = [Float](repeating: 0, count: 960)
        for i in 0..<960 {
            let t = Float(index * 960 + i) / 48_000
            switch kind {
            case .silence: out[i] = 0
            case .noise:
                seed = seed &* 6364136223846793005 &+ 1442695040888963407
                out[i] = amplitude * (Float(seed >> 40) / Float(1 << 24) * 2 - 1)
            case .burst:
                let inSyllable = (Int(t * 1000) % 250) < 150
                let voiced = amplitude * (sinf(2 * .pi * 140 * t) + 0.5 * sinf(2 * .pi * 280 * t))
                out[i] = inSyllable ? voiced : voiced * 0.02
            }
        }
        return out
    }
    enum Kind { case silence, noise, burst }

    static func run(_ schedule: [(Kind, Float, Int)]) -> [(frame: Int, event: SpeakingDetector.Event)] {
        var detector = SpeakingDetector()
        var events: [(Int, SpeakingDetector.Event)] = []
        var seed: UInt64 = 42
        var index = 0
        for (kind, amplitude, frames) in schedule {
            for _ in 0..<frames {
                let samples = frame(index, amplitude: amplitude, kind: kind, seed: &seed)
                let level = Float(samples.withUnsafeBufferPointer { AudioLevel.dBov($0) })
                if let e = detector.process(levelDbov: level) { events.append((index, e)) }
                index += 1
            }
        }
        return events
    }

    @Test func speechAfterSilenceStartsAndStopsOnce() {
        // 1 s silence, 3 s speech-like bursts, 2 s silence.
        let events = Self.run([(.silence, 0, 50), (.burst, 0.3, 150), (.silence, 0, 100)])
        #expect(events.map(\.event) == [.startedSpeaking, .stoppedSpeaking])
        // Starts within 100 ms of the first syllable; the last syllable ends at frame 195 (3.9 s,
        // 150 ms into the 250 ms cycle), and speaking stops one 500 ms hangover (25 frames) later.
        #expect(events[0].frame >= 50 && events[0].frame <= 55)
        #expect(events[1].frame >= 195 + 20 && events[1].frame <= 195 + 30)
    }

    @Test func pausesBetweenSyllablesDoNotFlicker() {
        let events = Self.run([(.burst, 0.2, 500)])
        #expect(events.map(\.event) == [.startedSpeaking])
    }

    @Test func steadyNoiseIsNotSpeech() {
        // Loud steady noise from the start, then quiet, then loud noise again.
        let events = Self.run([(.noise, 0.1, 250), (.silence, 0, 50), (.noise, 0.05, 250)])
        // A step up in noise level may trigger at most one short start/stop pair, while the floor
        // catches up; it never stays speaking.
        #expect(events.count <= 2)
        if let last = events.last { #expect(last.event == .stoppedSpeaking) }
    }

    @Test func speechOverNoiseIsDetected() {
        let events = Self.run([(.noise, 0.01, 150), (.burst, 0.3, 150), (.noise, 0.01, 100)])
        #expect(events.map(\.event) == [.startedSpeaking, .stoppedSpeaking])
    }
}
