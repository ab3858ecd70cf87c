// Audio playout policy: time stretching (accelerate / preemptive expand) against dropping whole
// packets, on the same seeded jitter and sender clock drift, with the CPU cost of a pull.
import Foundation
import MediaCore
import MediaTools

#if canImport(Glibc)
    import Glibc
#endif

enum PlayoutSuite {
    /// CPU time of the calling thread, in nanoseconds.
    static func threadCPUNs() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        let seconds = max(5, Int(60 * options.scale))
        let count = seconds * 50 + 50
        let rtp = PlayoutSimulation.rtpPackets(try PlayoutSimulation.tonePackets(count))
        let pulls = seconds * 100
        // (name, sender clock ppm, max random delay ms, stall ms every 8 s): the same seed for all.
        let scenarios: [(String, Double, Double, Double)] = [
            ("0-80ms jitter", 0, 80, 0), ("0-80ms jitter, clock +0.1%", 1_000, 80, 0),
            ("0-80ms jitter, clock -0.1%", -1_000, 80, 0), ("0-80ms jitter + 150ms stalls, clock +0.1%", 1_000, 80, 150),
            ("2ms jitter, clock +0.1%", 1_000, 2, 0), ("2ms jitter, clock -0.1%", -1_000, 2, 0),
        ]
        for (scenario, ppm, jitter, stall) in scenarios {
            let arrivals = PlayoutSimulation.arrivals(
                count: count, driftPPM: ppm, maxJitterMs: jitter, seed: 42,
                spikeMs: stall, spikeEverySeconds: stall > 0 ? 8 : 0)
            for (name, policy) in [
                ("time stretch", AudioReceiveSettings.PlayoutAdjustment.timeStretch), ("drop packets", .dropPackets),
            ] {
                let o = try PlayoutSimulation.run(rtp, arrivals: arrivals, pulls: pulls, adjustment: policy)
                let rows: [(String, String, Double, Bool)] = [
                    ("concealed", "samples", Double(o.stats.concealedSamples), false),
                    ("packets discarded", "packets", Double(o.stats.packetsDiscarded), false),
                    ("removed (accelerate)", "samples", Double(o.stats.removedSamplesForAcceleration), false),
                    ("inserted (expand)", "samples", Double(o.stats.insertedSamplesForDeceleration), false),
                    ("phase-aligned SNR", "dB", PlayoutSimulation.alignedSNR(o.output), true),
                    ("mean level - target", "ms", (o.meanMarginMs.low + o.meanMarginMs.high) / 2, false),
                ]
                for (metric, unit, value, higher) in rows {
                    record(
                        reporter, options, suite: "playout", case: "\(name): \(seconds)s tone, \(scenario)", metric: metric,
                        unit: unit, higherIsBetter: higher, values: [value])
                }
            }
        }
        // The CPU figures: 0-80 ms jitter and a sender clock 0.1 % fast.
        let arrivals = PlayoutSimulation.arrivals(count: count, driftPPM: 1_000, maxJitterMs: 80, seed: 42)
        // CPU per 10 ms pull (decode + playout policy), the same input, thread CPU time.
        func perPull(_ policy: AudioReceiveSettings.PlayoutAdjustment) throws -> Double {
            let t0 = threadCPUNs()
            _ = try PlayoutSimulation.run(rtp, arrivals: arrivals, pulls: pulls, adjustment: policy)
            return Double(threadCPUNs() - t0) / 1000 / Double(pulls)
        }
        try compare(
            reporter, options, suite: "playout", case: "pullAudio 10ms (Opus decode + policy), time stretch",
            metric: "CPU per pull", unit: "us", higherIsBetter: false, anchorName: "drop packets policy",
            ours: { try perPull(.timeStretch) }, anchor: { try perPull(.dropPackets) })
        // The stretch alone on a 20 ms block of tone (the copy that restores the block included).
        let stretch = AudioTimeStretch()
        let source = (0..<960).map { Int16(8000 * sin(2 * Double.pi * 440 * Double($0) / 48_000)) }
        let block = UnsafeMutableBufferPointer<Int16>.allocate(capacity: 960 + stretch.maxLag)
        defer { block.deallocate() }
        let calls = Int(20_000 * options.scale)
        var sink = 0
        // No anchor: nothing else in the process does this work.
        var costs: [Double] = []
        for rep in 0..<(options.warmup + options.repetitions) {
            let t0 = threadCPUNs()
            for _ in 0..<calls {
                _ = block.update(fromContentsOf: source)
                sink &+= stretch.accelerate(block, frames: 960)
            }
            if rep >= options.warmup { costs.append(Double(threadCPUNs() - t0) / 1000 / Double(calls)) }
        }
        record(
            reporter, options, suite: "playout", case: "AudioTimeStretch.accelerate 20ms tone block (+ its copy)",
            metric: "CPU per call", unit: "us", higherIsBetter: false, values: costs)
        if sink == 42 { print("") }
    }
}
