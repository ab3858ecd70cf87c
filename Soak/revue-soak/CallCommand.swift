import Foundation
// `revue-soak call`: a long A/V call through the impairment relay whose loss and jitter change
// on a schedule; RSS and threads sampled; growth, thread count and stats consistency asserted.
import MediaCore
import MediaTools
import RevueSession

enum CallCommand {
    /// The impairment schedule, cycled: each phase lasts `phaseSeconds`.
    static let schedule: [(String, ImpairmentModel.Settings)] = [
        ("clean (20 ms delay)", ImpairmentModel.Settings(delayMilliseconds: 20)),
        ("3 % random loss", ImpairmentModel.Settings(loss: 0.03, delayMilliseconds: 20)),
        ("8 % bursty loss (mean burst 3)", ImpairmentModel.Settings(loss: 0.08, burst: 3, delayMilliseconds: 20)),
        ("80 ms jitter (40 ms delay)", ImpairmentModel.Settings(delayMilliseconds: 40, jitterMilliseconds: 80)),
    ]

    static func run(minutes: Double, phaseSeconds: Double, rssBoundMiB: Double, sampleSeconds: Double = 5) throws -> Int32 {
        let call = try SoakCall()
        let total = minutes * 60
        let warmUp = min(60, max(20, total * 0.2))
        call.impair(schedule[0].1)
        call.startAll()
        log(
            "call: \(Int(total)) s, schedule cycling every \(Int(phaseSeconds)) s: \(schedule.map(\.0).joined(separator: " / ")); warm-up \(Int(warmUp)) s"
        )
        var samples: [(t: Double, rss: Int, threads: Int, frames: Int)] = []
        var phase = 0, nextSample = 0.0
        var burst: (seconds: Double, ringDropsBefore: UInt64, ringDropsAfter: UInt64, framesBefore: Int, at: Double)?
        let burstAt = total / 2
        call.capture(seconds: total) { t in
            let p = Int(t / phaseSeconds) % schedule.count
            if p != phase { phase = p; call.impair(schedule[p].1); log(String(format: "%6.1f s  phase: %@", t, schedule[p].0)) }
            if t >= nextSample {
                samples.append((t, Probe.rssKiB(), Probe.threads(), call.framesDecoded))
                let s = samples.last!
                log(
                    String(
                        format: "%6.1f s  RSS %7.1f MiB  threads %d  frames decoded %d", t, Double(s.rss) / 1024, s.threads,
                        s.frames))
                nextSample += sampleSeconds
            }
            if burst == nil && t >= burstAt {
                // Full capture ring on purpose: 120 frames back to back.
                let before = call.video.statistics.capture.droppedRingFull
                let frames = call.framesDecoded
                let seconds = call.captureBurst(120)
                burst = (seconds, before, call.video.statistics.capture.droppedRingFull, frames, t)
            }
        }
        // End on a clean network so the last packets are not lost unseen (a receiver cannot count
        // a loss after the last packet it got), then let everything in flight arrive.
        call.impair(ImpairmentModel.Settings())
        call.capture(seconds: 3)
        let framesAtEnd = call.framesDecoded
        call.video.stop(); call.audio.stop(flushPartialFrame: false)
        usleep(1_500_000)
        let checks = call.consistency()
        let relayStats = call.relay.statistics
        let capture = call.video.statistics.capture
        let afterBurst = samples.first { $0.t >= (burst?.at ?? 0) + 5 }
        call.stopAll()
        samples.append((total + 3, Probe.rssKiB(), Probe.threads(), framesAtEnd))

        let base = samples.first { $0.t >= warmUp } ?? samples[0]
        let last = samples.last!
        let peak = samples.filter { $0.t >= warmUp }.map(\.rss).max() ?? last.rss
        let growthMiB = Double(last.rss - base.rss) / 1024
        let threadGrowth = samples.filter { $0.t >= warmUp }.map(\.threads).max()! - base.threads
        out(
            "== soak call: \(String(format: "%.1f", total / 60)) min, 320x240 VP8 500 kbit/s + Opus 32 kbit/s FEC, SRTP AES-GCM, relay both ways"
        )
        out(
            String(
                format:
                    "RSS: start %.1f MiB, after warm-up (%.0f s) %.1f MiB, peak %.1f MiB, end %.1f MiB; growth after warm-up %.2f MiB (bound %.0f MiB)",
                Double(samples[0].rss) / 1024, base.t, Double(base.rss) / 1024, Double(peak) / 1024, Double(last.rss) / 1024,
                growthMiB, rssBoundMiB))
        out(
            "threads: start \(samples[0].threads), after warm-up \(base.threads), max after warm-up \(base.threads + threadGrowth), end (pipelines running) \(samples[samples.count - 2].threads); growth \(threadGrowth) (must be 0)"
        )
        out(
            "video: \(call.videoFrames) frames captured, \(framesAtEnd) decoded; relay forward: \(relayStats.forward.received) in, \(relayStats.forward.forwarded) out, \(relayStats.forward.droppedByLoss) lost; reverse (RTCP) \(relayStats.reverse.forwarded) out, \(relayStats.reverse.droppedByLoss) lost"
        )
        if let b = burst {
            let resumed = (afterBurst?.frames ?? 0) - b.framesBefore
            out(
                String(
                    format:
                        "full capture ring: 120 frames captured back to back in %.1f ms; ring-full drops %d (was %d); %d frames decoded in the next 5 s; capture totals: %d captured, %d ring-full, %d pool-exhausted",
                    b.seconds * 1000, Int(b.ringDropsAfter), Int(b.ringDropsBefore), resumed, Int(capture.captured),
                    Int(capture.droppedRingFull), Int(capture.droppedPoolExhausted)))
        }
        for c in checks { out("stats " + c.line) }
        var failures: [String] = []
        if growthMiB > rssBoundMiB { failures.append("RSS grew \(growthMiB) MiB after warm-up (bound \(rssBoundMiB))") }
        if threadGrowth != 0 { failures.append("thread count grew by \(threadGrowth)") }
        // Tolerance: none for video and audio in principle (unique sent == expected at the
        // receiver once the clean tail drained); 2 packets allowed for one still in the relay or
        // kernel at the snapshot.
        for c in checks where abs(c.difference) > 2 { failures.append("\(c.kind) stats inconsistent by \(c.difference) packets") }
        if let b = burst, b.ringDropsAfter <= b.ringDropsBefore {
            failures.append("the capture burst caused no counted ring-full drop")
        }
        if let b = burst, let a = afterBurst, a.frames - b.framesBefore < 60 {
            failures.append("video did not keep decoding after the capture burst")
        }
        for f in failures { out("FAIL: " + f) }
        out(failures.isEmpty ? "call: PASS" : "call: FAIL")
        return failures.isEmpty ? 0 : 1
    }
}
