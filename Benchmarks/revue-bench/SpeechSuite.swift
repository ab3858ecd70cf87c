// Our audio playout judged on speech (`revue-bench speech`): espeak-ng's speech through our send
// pipeline, a simulated path with 0/30/60 ms jitter and 0/3/10 % random loss, and our receive
// pipeline's playout on simulated time, scored with wideband PESQ against what was spoken (the
// same harness as SimulatedSpeechPlayoutTests; needs espeak-ng, ffmpeg and .venv-interop's pesq
// from scripts/install-deps). Each repetition is another loss and jitter seed.
import Foundation
import MediaTestSupport

enum SpeechSuite {
    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        let speech = try SpeechQuality.speech()
        var means: [SpeechQuality.Impairment: Double] = [:]
        for cell in SpeechQuality.grid {
            var scores: [Double] = []
            for seed in 1...UInt64(max(1, options.repetitions)) {
                let played = try SpeechQuality.playSimulated(speech, through: cell, seed: seed)
                scores.append(try SpeechQuality.pesq(reference: speech, degraded: played.samples).mos)
            }
            means[cell] = scores.reduce(0, +) / Double(scores.count)
            record(
                reporter, options, suite: "speech", case: "simulated playout, \(cell)", metric: "WB-PESQ",
                unit: "MOS-LQO", higherIsBetter: true, values: scores)
        }
        print(SpeechQuality.table(means, title: "ours, simulated, mean of \(max(1, options.repetitions)) seeds (WB-PESQ)"))
    }
}
