// revue-media against the reference command-line tools on the same files, run as child
// processes side by side (A B A B): VP8 encode vs vpxenc, VP8 decode vs vpxdec, Opus encode vs
// opusenc, Opus decode vs opusdec. Figures are wall-clock throughput of the whole process.
import MediaCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process's wall time and peak resident memory (`wait4` rusage).
struct ChildRun {
    var seconds: Double
    var maxRSSKilobytes: Int
    var status: Int32
}

enum CLIBench {
    /// revue-media next to revue-bench (same build directory).
    static var revueMedia: String {
        let dir = ((Bundle.main.executablePath ?? CommandLine.arguments[0]) as NSString).deletingLastPathComponent
        return "\(dir)/revue-media"
    }

    /// Runs `path` with `args` (stdout and stderr to /dev/null) and measures it.
    static func run(_ path: String, _ args: [String]) throws -> ChildRun {
        var pid: pid_t = 0
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = ([path] + args).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let t0 = nowNs()
        let rc = posix_spawn(&pid, path, &actions, nil, argv, environ)
        guard rc == 0 else { throw BenchError(description: "cannot run \(path): \(String(cString: strerror(rc)))") }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
        let seconds = Double(nowNs() - t0) / 1e9
        let exit = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        guard exit == 0 else { throw BenchError(description: "\(path) \(args.joined(separator: " ")) exited with \(exit)") }
        return ChildRun(seconds: seconds, maxRSSKilobytes: Int(usage.ru_maxrss), status: exit)
    }

    /// A 640x360 Y4M of `frames` synthetic frames and a 48 kHz mono speech WAV of `seconds`.
    static func makeInputs(in dir: String, frames: Int, seconds: Int) throws {
        let frame = VideoFrame(width: 640, height: 360)
        let y4m = try Y4MWriter(path: "\(dir)/in.y4m", width: 640, height: 360, frameRate: ContainerRational(30, 1))
        for n in 0..<frames {
            SyntheticVideo.render(frameIndex: n, into: frame)
            try y4m.write(frame.view)
        }
        try y4m.finish()
        var speech = SyntheticAudio(pattern: .speech, sampleRate: 48_000, channels: 1)
        let wav = try WAVWriter(path: "\(dir)/in.wav", sampleRate: 48_000, channelCount: 1, format: .int16)
        try wav.write(speech.int16s(frames: 48_000 * seconds))
        try wav.finish()
    }

    static func tempDir() -> String {
        var template = Array("/tmp/revue-bench-XXXXXX".utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        return String(cString: p!)
    }

    static func tool(_ name: String) -> String? {
        ["/usr/bin", "/usr/local/bin", "/bin"].map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
}

struct BenchError: Error, CustomStringConvertible { var description: String }

enum CLISuite {
    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        let frames = max(30, Int(300 * options.scale)), seconds = max(2, Int(20 * options.scale))
        let dir = CLIBench.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try CLIBench.makeInputs(in: dir, frames: frames, seconds: seconds)
        let rm = CLIBench.revueMedia
        guard FileManager.default.isExecutableFile(atPath: rm) else { throw BenchError(description: "\(rm) not built") }

        // VP8 encode, same settings: real time, fixed speed 8, CBR 1500k, one thread.
        if let vpxenc = CLIBench.tool("vpxenc") {
            try compare(reporter, options, suite: "cli", case: "encode 640x360 VP8 y4m->ivf", metric: "frames/s", unit: "1/s",
                        higherIsBetter: true, anchorName: "vpxenc --rt --cpu-used=-8") {
                Double(frames) / (try CLIBench.run(rm, ["encode", "\(dir)/in.y4m", "-o", "\(dir)/ours.ivf", "--speed", "-8",
                                                       "--bitrate", "1500k", "-q"]).seconds)
            } anchor: {
                Double(frames) / (try CLIBench.run(vpxenc, ["--codec=vp8", "--rt", "--cpu-used=-8", "--end-usage=cbr",
                                                           "--target-bitrate=1500", "--threads=1", "--lag-in-frames=0",
                                                           "-q", "-o", "\(dir)/ref.ivf", "\(dir)/in.y4m"]).seconds)
            }
        }
        if let vpxdec = CLIBench.tool("vpxdec") {
            _ = try CLIBench.run(rm, ["encode", "\(dir)/in.y4m", "-o", "\(dir)/ours.ivf", "--speed", "-8", "-q"])
            try compare(reporter, options, suite: "cli", case: "decode 640x360 VP8 ivf->y4m", metric: "frames/s", unit: "1/s",
                        higherIsBetter: true, anchorName: "vpxdec (y4m out)") {
                Double(frames) / (try CLIBench.run(rm, ["decode", "\(dir)/ours.ivf", "-o", "\(dir)/ours.y4m", "-q"]).seconds)
            } anchor: {
                Double(frames) / (try CLIBench.run(vpxdec, ["-o", "\(dir)/ref.y4m", "\(dir)/ours.ivf"]).seconds)
            }
        }
        if let opusenc = CLIBench.tool("opusenc") {
            try compare(reporter, options, suite: "cli", case: "encode speech 48k mono wav->ogg", metric: "x realtime", unit: "x",
                        higherIsBetter: true, anchorName: "opusenc --bitrate 32") {
                Double(seconds) / (try CLIBench.run(rm, ["encode", "\(dir)/in.wav", "-o", "\(dir)/ours.ogg", "--bitrate", "32k", "-q"]).seconds)
            } anchor: {
                Double(seconds) / (try CLIBench.run(opusenc, ["--quiet", "--bitrate", "32", "\(dir)/in.wav", "\(dir)/ref.ogg"]).seconds)
            }
        }
        if let opusdec = CLIBench.tool("opusdec") {
            _ = try CLIBench.run(rm, ["encode", "\(dir)/in.wav", "-o", "\(dir)/ours.ogg", "-q"])
            try compare(reporter, options, suite: "cli", case: "decode speech ogg->wav 48k", metric: "x realtime", unit: "x",
                        higherIsBetter: true, anchorName: "opusdec --rate 48000") {
                Double(seconds) / (try CLIBench.run(rm, ["decode", "\(dir)/ours.ogg", "-o", "\(dir)/ours.wav", "--rate", "48000", "-q"]).seconds)
            } anchor: {
                Double(seconds) / (try CLIBench.run(opusdec, ["--quiet", "--rate", "48000", "\(dir)/ours.ogg", "\(dir)/ref.wav"]).seconds)
            }
        }
    }
}
