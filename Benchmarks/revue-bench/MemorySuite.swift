// Peak resident memory of revue-media's file commands (they stream: memory must not grow with
// the file), against the reference tools on the same files, and against itself on a file four
// times longer.
import MediaCore
import Foundation

enum MemorySuite {
    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        let frames = max(30, Int(150 * options.scale))
        let dir = CLIBench.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try CLIBench.makeInputs(in: dir, frames: frames, seconds: 4)
        let rm = CLIBench.revueMedia
        guard FileManager.default.isExecutableFile(atPath: rm) else { throw BenchError(description: "\(rm) not built") }
        let mb = { (r: ChildRun) in Double(r.maxRSSKilobytes) / 1024 }

        if let vpxenc = CLIBench.tool("vpxenc") {
            try compare(reporter, options, suite: "memory", case: "encode 640x360 VP8 peak RSS", metric: "MiB", unit: "MiB",
                        higherIsBetter: false, anchorName: "vpxenc") {
                mb(try CLIBench.run(rm, ["encode", "\(dir)/in.y4m", "-o", "\(dir)/o.ivf", "-q"]))
            } anchor: {
                mb(try CLIBench.run(vpxenc, ["--codec=vp8", "--rt", "--cpu-used=-8", "-q", "-o", "\(dir)/r.ivf", "\(dir)/in.y4m"]))
            }
        }
        // Streaming: a 4x longer pattern must not need more memory.
        try compare(reporter, options, suite: "memory", case: "encode pattern 4x longer / 1x, peak RSS", metric: "MiB", unit: "MiB",
                    higherIsBetter: false, anchorName: "1x length") {
            mb(try CLIBench.run(rm, ["encode", "--pattern", "moving", "--frames", "\(frames * 4)", "-o", "\(dir)/p4.ivf", "-q"]))
        } anchor: {
            mb(try CLIBench.run(rm, ["encode", "--pattern", "moving", "--frames", "\(frames)", "-o", "\(dir)/p1.ivf", "-q"]))
        }
        if let vpxdec = CLIBench.tool("vpxdec") {
            _ = try CLIBench.run(rm, ["encode", "\(dir)/in.y4m", "-o", "\(dir)/o.ivf", "-q"])
            try compare(reporter, options, suite: "memory", case: "decode 640x360 VP8 peak RSS", metric: "MiB", unit: "MiB",
                        higherIsBetter: false, anchorName: "vpxdec") {
                mb(try CLIBench.run(rm, ["decode", "\(dir)/o.ivf", "-o", "\(dir)/o.y4m", "-q"]))
            } anchor: {
                mb(try CLIBench.run(vpxdec, ["-o", "\(dir)/r.y4m", "\(dir)/o.ivf"]))
            }
        }
    }
}
