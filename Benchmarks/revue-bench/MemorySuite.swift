import Foundation
// Memory of revue-media, each child measured from /proc/PID/status while it runs (see ChildRun):
// a 720p30 send+receive call of 30 s (peak resident set, and growth from its first 5 s to its
// last 5 s, sampled every second); the file commands against the reference tools on the same
// files with the same settings; and the encoder on a pattern four times longer (they stream:
// memory must not grow with the file).
import MediaCore

enum MemorySuite {
    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        let frames = max(30, Int(150 * options.scale))
        let dir = CLIBench.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try CLIBench.makeInputs(in: dir, frames: frames, seconds: 4)
        let rm = CLIBench.revueMedia
        guard FileManager.default.isExecutableFile(atPath: rm) else { throw BenchError(description: "\(rm) not built") }
        let mb = { (r: ChildRun) in Double(r.maxRSSKilobytes) / 1024 }

        // The call: `revue-media demo` runs sender (synthetic 720p30 camera, VP8 1.5 Mbit/s, Opus,
        // SRTP), impairment relay and receiver (jitter buffers, decoders) in one process over
        // loopback UDP, in real time. Run once whatever --reps (it lasts 30 s); every second's
        // VmRSS is kept.
        let callSeconds = max(12, Int(30 * options.scale))
        let call = try CLIBench.run(
            rm,
            [
                "demo", "--seconds", "\(callSeconds)", "--size", "1280x720", "--bitrate", "1500000",
                "--out", "\(dir)/call", "-q",
            ], memory: true, sampleEvery: 1)
        let samples = call.rssSamplesKilobytes.map { Double($0) / 1024 }
        let name = "call 720p30 VP8+Opus \(callSeconds) s"
        record(
            reporter, options, suite: "memory", case: "\(name) peak RSS", metric: "MiB", unit: "MiB",
            higherIsBetter: false, values: [mb(call)])
        // Growth: mean VmRSS of the last 5 one-second samples minus that of the first 5. (The demo
        // keeps its own measurements as it goes, e.g. every received audio sample for the SNR:
        // 30 s of 48 kHz Float is 5.5 MiB of the growth.)
        if samples.count >= 10 {
            let first = samples.prefix(5).reduce(0, +) / 5, last = samples.suffix(5).reduce(0, +) / 5
            record(
                reporter, options, suite: "memory", case: "\(name) RSS growth", metric: "MiB", unit: "MiB",
                higherIsBetter: false, values: [last - first])
        }

        // Encode with the same settings as vpxenc (CLISuite.VideoSettings), 640x360 and 1280x720.
        // (A process's start alone, e.g. `--help`, ends before the 2 ms poll sees its peak: the
        // make-up of the difference is measured from /proc/PID/smaps, docs/performance.md.)
        if let vpxenc = CLIBench.tool("vpxenc") {
            try CLIBench.makeY4M(path: "\(dir)/in720.y4m", width: 1280, height: 720, frames: max(30, frames / 2))
            for (input, w, h) in [("\(dir)/in.y4m", 640, 360), ("\(dir)/in720.y4m", 1280, 720)] {
                let s = CLISuite.VideoSettings(codec: .vp8, width: w, height: h, bitrate: 1_500_000)
                try compare(
                    reporter, options, suite: "memory", case: "encode \(w)x\(h) VP8 peak RSS", metric: "MiB", unit: "MiB",
                    higherIsBetter: false, anchorName: "vpxenc (same settings)"
                ) {
                    mb(try CLIBench.run(rm, s.revueMedia(input, "\(dir)/o.ivf"), memory: true))
                } anchor: {
                    mb(try CLIBench.run(vpxenc, s.vpxenc(input, "\(dir)/r.ivf"), memory: true))
                }
            }
            try? FileManager.default.removeItem(atPath: "\(dir)/in720.y4m")
        }
        // Streaming: a 4x longer pattern must not need more memory.
        try compare(
            reporter, options, suite: "memory", case: "encode pattern 4x longer / 1x, peak RSS", metric: "MiB", unit: "MiB",
            higherIsBetter: false, anchorName: "1x length"
        ) {
            mb(
                try CLIBench.run(
                    rm, ["encode", "--pattern", "moving", "--frames", "\(frames * 4)", "-o", "\(dir)/p4.ivf", "-q"],
                    memory: true))
        } anchor: {
            mb(
                try CLIBench.run(
                    rm, ["encode", "--pattern", "moving", "--frames", "\(frames)", "-o", "\(dir)/p1.ivf", "-q"],
                    memory: true))
        }
        if let vpxdec = CLIBench.tool("vpxdec") {
            _ = try CLIBench.run(rm, ["encode", "\(dir)/in.y4m", "-o", "\(dir)/o.ivf", "-q"])
            try compare(
                reporter, options, suite: "memory", case: "decode 640x360 VP8 peak RSS", metric: "MiB", unit: "MiB",
                higherIsBetter: false, anchorName: "vpxdec"
            ) {
                mb(try CLIBench.run(rm, ["decode", "\(dir)/o.ivf", "-o", "\(dir)/o.y4m", "-q"], memory: true))
            } anchor: {
                mb(try CLIBench.run(vpxdec, ["-o", "\(dir)/r.y4m", "\(dir)/o.ivf"], memory: true))
            }
        }
    }
}
