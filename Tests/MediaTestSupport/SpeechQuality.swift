// Speech for the playout quality tests: a fixed English text spoken by espeak-ng and resampled by
// ffmpeg to 48 kHz mono, the jitter and loss grid they play it through, our send and receive
// pipelines on simulated time as one such path, and wideband PESQ (ITU-T P.862.2, the PyPI `pesq`
// package in .venv-interop, run by scripts/pesq_score.py) of what a playout made of it.
import Foundation
import MediaCore
import MediaTools

/// The speech source, the impairment grid and the PESQ scorer of the speech playout tests and
/// `revue-bench speech`. Thread rule: any thread (no shared state). Cost: `speech()` runs two
/// processes (about 0.2 s); `pesq` runs one Python process (about 0.5 s for 12 s of speech);
/// `playSimulated` encodes and decodes the whole recording (a few hundred milliseconds).
package enum SpeechQuality {
    /// What espeak-ng says: three sentences, about 11 s.
    package static let text =
        "Seven quiet foxes jumped over the warm brown fence. Please check the signal when the morning train arrives, "
        + "then call me back at nine. Voices carry across a lossy network."

    /// The top of the repository (where scripts/ and .venv-interop are).
    package static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    /// .venv-interop's interpreter, which has numpy and pesq after scripts/install-deps.
    package static var python: String { repositoryRoot + "/.venv-interop/bin/python3" }

    /// A step that could not run (a tool missing or failing), with the reason.
    package struct Failure: Error, CustomStringConvertible {
        /// What failed and why.
        package var description: String
        /// A failure saying `description`.
        package init(_ description: String) { self.description = description }
    }

    /// One cell of the grid: each packet's one-way delay is uniform within
    /// `jitterMilliseconds` ± `jitterMilliseconds` (the impairment model never lets a packet
    /// overtake the one in front), and `loss` of the packets are lost at random (seeded).
    package struct Impairment: Sendable, Hashable, CustomStringConvertible {
        /// Half the spread of the delay (and its mean), milliseconds.
        package var jitterMilliseconds: Double
        /// Share of packets lost (0...1).
        package var loss: Double

        /// A cell of `jitterMilliseconds` jitter and `loss` random loss.
        package init(jitterMilliseconds: Double, loss: Double) {
            self.jitterMilliseconds = jitterMilliseconds
            self.loss = loss
        }

        /// The impairment model's settings (the relay's and the simulated path's).
        package var settings: ImpairmentModel.Settings {
            ImpairmentModel.Settings(
                loss: loss, delayMilliseconds: jitterMilliseconds, jitterMilliseconds: jitterMilliseconds)
        }

        package var description: String { "±\(Int(jitterMilliseconds)) ms jitter, \(Int((loss * 100).rounded())) % loss" }
    }

    /// Jitter of 0, 30 and 60 ms by random loss of 0, 3 and 10 %, jitter major.
    package static let grid: [Impairment] = [0.0, 30, 60].flatMap { j in
        [0.0, 0.03, 0.10].map { Impairment(jitterMilliseconds: j, loss: $0) }
    }

    /// The text spoken by espeak-ng (US English, 160 words a minute), resampled by ffmpeg to
    /// 48 kHz mono 16-bit. Throws with the reason when either tool is missing or fails.
    package static func speech() throws -> [Int16] {
        let dir = InteropTempDir()
        defer { dir.remove() }
        let wav = dir.file("speech.wav"), raw = dir.file("speech.raw")
        let spoken = try runTool("espeak-ng", ["-v", "en-us", "-s", "160", "-w", wav, text], timeout: 60)
        guard spoken.status == 0 else { throw Failure("espeak-ng failed (\(spoken.status)): \(spoken.stderr)") }
        let converted = try runTool(
            "ffmpeg", ["-v", "error", "-y", "-i", wav, "-ar", "48000", "-ac", "1", "-f", "s16le", raw], timeout: 60)
        guard converted.status == 0 else { throw Failure("ffmpeg failed (\(converted.status)): \(converted.stderr)") }
        let bytes = dir.read("speech.raw")
        guard bytes.count > 48_000 else { throw Failure("espeak-ng spoke \(bytes.count / 2) samples") }
        return bytes.withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
    }

    /// What PESQ made of a recording.
    package struct Score: Sendable, CustomStringConvertible {
        /// Wideband PESQ MOS-LQO (about 1.0 to 4.64).
        package var mos: Double
        /// The delay cut from the recording's start to align it with the reference, milliseconds.
        package var delayMilliseconds: Double
        package var description: String { String(format: "%.2f (delay %.0f ms)", mos, delayMilliseconds) }
    }

    /// Wideband PESQ at 16 kHz of `degraded` against `reference` (both 48 kHz mono), after
    /// cutting the best-matching lag within `maxDelayMilliseconds` from `degraded`'s start
    /// (scripts/pesq_score.py). Throws with the reason when .venv-interop or pesq is missing or
    /// PESQ fails (it finds no speech in a silent recording).
    package static func pesq(reference: [Int16], degraded: [Int16], maxDelayMilliseconds: Double = 1_000) throws -> Score {
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw Failure("\(python) is missing: run scripts/install-deps (it makes .venv-interop with numpy and pesq)")
        }
        let dir = InteropTempDir()
        defer { dir.remove() }
        dir.write("reference.raw", reference.withUnsafeBytes { Array($0) })
        dir.write("degraded.raw", degraded.withUnsafeBytes { Array($0) })
        let run = try runTool(
            python,
            [
                repositoryRoot + "/scripts/pesq_score.py", dir.file("reference.raw"), dir.file("degraded.raw"),
                "\(maxDelayMilliseconds)",
            ], timeout: 120)
        guard run.status == 0,
            let line = run.stdout.split(separator: "\n").last,
            let json = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
            let mos = (json["pesq"] as? NSNumber)?.doubleValue,
            let delay = (json["delay_ms"] as? NSNumber)?.doubleValue
        else {
            throw Failure("PESQ did not score (exit \(run.status)): \(run.stderr) \(run.stdout)")
        }
        return Score(mos: mos, delayMilliseconds: delay)
    }

    /// What our pipelines played of a recording on simulated time.
    package struct Playout: Sendable {
        /// The audio played, 48 kHz mono, one 10 ms pull after another from the sender's start.
        package var samples: [Int16]
        /// Audio packets the sender sent.
        package var packetsSent: Int
        /// Packets the path lost.
        package var packetsLost: Int
        /// Samples the playout concealed, and those rebuilt from in-band FEC.
        package var concealedSamples: Int, fecSamples: Int
        /// Samples the playout removed (accelerate) and inserted (expand) to follow the delay.
        package var removedSamples: Int, insertedSamples: Int
        /// The Opus encoder's target bitrate at the end (the receiver's estimate caps it).
        package var targetBitrate: Int
    }

    /// Plays `speech` (48 kHz mono) through our own send pipeline (`SimulatedSendPipeline`: the
    /// real AudioSendStream's Opus encoder with in-band FEC, packetiser and SRTP), a simulated
    /// path with `impairment` on the media direction (seeded with `seed`; RTCP goes back
    /// unimpaired), and our receive pipeline's audio playout pulled every 10 ms, all on simulated
    /// time, and returns what the playout produced until 600 ms after the speech ended. Audio
    /// only: no video is sent, and no lip sync delays the audio.
    package static func playSimulated(_ speech: [Int16], through impairment: Impairment, seed: UInt64) throws -> Playout {
        var options = SimulatedCallOptions()
        options.forward = impairment.settings
        options.reverse = ImpairmentModel.Settings()
        options.seed = seed
        options.lipSync = false
        let call = try SimulatedCall(sendPipeline: options)
        call.sender.recording = speech
        let seconds = Double(speech.count) / 48_000
        call.start(seconds: seconds, video: false, audio: true)
        call.advance(by: .nanoseconds(Int64(seconds * 1e9)) + .milliseconds(600))
        let stats = call.pipeline.inboundStats.first { $0.kind == "audio" }
        let playout = Playout(
            samples: call.audio.samples, packetsSent: call.sender.audioFramesCaptured,
            packetsLost: call.forward.counters.lost, concealedSamples: Int(stats?.concealedSamples ?? 0),
            fecSamples: call.pipeline.audio?.fecRecoveredSamples ?? 0,
            removedSamples: Int(stats?.removedSamplesForAcceleration ?? 0),
            insertedSamples: Int(stats?.insertedSamplesForDeceleration ?? 0),
            targetBitrate: Int(call.sender.audio.statistics.outbound.targetBitrate))
        call.sender.stop()
        return playout
    }

    /// A 3 x 3 table of `scores` by jitter (rows) and loss (columns), as Markdown.
    package static func table(_ scores: [Impairment: Double], title: String) -> String {
        var lines = ["| \(title) | 0 % loss | 3 % loss | 10 % loss |", "| --- | ---: | ---: | ---: |"]
        for j in [0.0, 30, 60] {
            let cells = [0.0, 0.03, 0.10].map { l in
                scores[Impairment(jitterMilliseconds: j, loss: l)].map { String(format: "%.2f", $0) } ?? "-"
            }
            lines.append("| ±\(Int(j)) ms jitter | " + cells.joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n")
    }
}
