// revue-media against the reference command-line tools on the same files, run as child
// processes side by side (A B A B): 720p VP8 encode vs vpxenc and vs ffmpeg (libvpx), each with
// the PSNR of its output against the source, VP8 decode vs vpxdec, Opus encode vs
// opusenc, Opus decode vs opusdec. Figures are wall-clock throughput of the whole process.
import MediaCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process's wall time and, when asked for, its memory: the high-water mark of its
/// resident set (`VmHWM`) and its resident set (`VmRSS`) sampled at a fixed interval, both read
/// from `/proc/PID/status` while it runs. (`wait4`'s `ru_maxrss` is useless here: a child started
/// with `posix_spawn` shares the parent's memory until `exec`, and Linux keeps that high-water
/// mark, so every child would report revue-bench's own size.)
struct ChildRun {
    var seconds: Double
    /// Peak resident memory in KiB (0 when memory was not measured).
    var maxRSSKilobytes: Int
    /// VmRSS in KiB at each sampling interval (empty unless sampling was asked for).
    var rssSamplesKilobytes: [Int]
    var status: Int32
}

enum CLIBench {
    /// revue-media next to revue-bench (same build directory).
    static var revueMedia: String {
        let dir = ((Bundle.main.executablePath ?? CommandLine.arguments[0]) as NSString).deletingLastPathComponent
        return "\(dir)/revue-media"
    }

    /// Runs `path` with `args` and measures it. stdout goes to /dev/null, stderr to `stderrPath`
    /// (or /dev/null). With `memory`, polls `/proc/PID/status` every 5 ms for the peak resident set
    /// (the timing then has 5 ms granularity); with `sampleEvery` seconds, also records VmRSS.
    static func run(_ path: String, _ args: [String], memory: Bool = false, sampleEvery: Double? = nil,
                    stderrPath: String? = nil) throws -> ChildRun {
        var pid: pid_t = 0
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv = ([path] + args).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let t0 = nowNs()
        let rc = posix_spawn(&pid, path, &actions, nil, argv, environ)
        guard rc == 0 else { throw BenchError(description: "cannot run \(path): \(String(cString: strerror(rc)))") }
        var status: Int32 = 0
        var peak = 0
        var samples: [Int] = []
        if memory || sampleEvery != nil {
            let statusPath = "/proc/\(pid)/status"
            var nextSample = t0 + UInt64((sampleEvery ?? 0) * 1e9)
            while true {
                let r = waitpid(pid, &status, WNOHANG)
                if r == pid { break }
                if r < 0 && errno != EINTR { throw BenchError(description: "waitpid \(path): \(String(cString: strerror(errno)))") }
                // VmHWM is a high-water mark: a poll that misses a moment still sees its peak later,
                // except in the last 5 ms before exit.
                if let s = readStatus(statusPath) {
                    peak = max(peak, s.hwm)
                    if let every = sampleEvery, nowNs() >= nextSample {
                        samples.append(s.rss)
                        nextSample += UInt64(every * 1e9)
                    }
                }
                usleep(5_000)
            }
        } else {
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
        let seconds = Double(nowNs() - t0) / 1e9
        let exit = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        guard exit == 0 else { throw BenchError(description: "\(path) \(args.joined(separator: " ")) exited with \(exit)") }
        return ChildRun(seconds: seconds, maxRSSKilobytes: peak, rssSamplesKilobytes: samples, status: exit)
    }

    /// VmHWM and VmRSS (KiB) from a `/proc/PID/status` file; nil once the process has exited.
    static func readStatus(_ path: String) -> (hwm: Int, rss: Int)? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        var hwm: Int?, rss: Int?
        for line in text.split(separator: "\n") where line.hasPrefix("VmHWM:") || line.hasPrefix("VmRSS:") {
            let value = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.map { String($0) } ?? "")
            if line.hasPrefix("VmHWM:") { hwm = value } else { rss = value }
        }
        guard let hwm, let rss else { return nil }  // a zombie has no memory lines
        return (hwm, rss)
    }

    /// A 640x360 Y4M of `frames` synthetic frames and a 48 kHz mono speech WAV of `seconds`.
    static func makeInputs(in dir: String, frames: Int, seconds: Int) throws {
        try makeY4M(path: "\(dir)/in.y4m", width: 640, height: 360, frames: frames)
        var speech = SyntheticAudio(pattern: .speech, sampleRate: 48_000, channels: 1)
        let wav = try WAVWriter(path: "\(dir)/in.wav", sampleRate: 48_000, channelCount: 1, format: .int16)
        try wav.write(speech.int16s(frames: 48_000 * seconds))
        try wav.finish()
    }

    /// A Y4M (30 fps) of `frames` synthetic moving frames.
    static func makeY4M(path: String, width: Int, height: Int, frames: Int) throws {
        let frame = VideoFrame(width: width, height: height)
        let y4m = try Y4MWriter(path: path, width: width, height: height, frameRate: ContainerRational(30, 1))
        for n in 0..<frames {
            SyntheticVideo.render(frameIndex: n, into: frame)
            try y4m.write(frame.view)
        }
        try y4m.finish()
    }

    /// PSNR (dB, all planes weighted by samples: ffmpeg's "average") of `encoded` (IVF) against
    /// `rawSource` (raw I420 frames of `width`x`height`) over every frame: decoded to raw I420 by
    /// the reference decoder vpxdec, measured by ffmpeg's `psnr` filter. Raw on both sides pairs
    /// frames by index: ffmpeg pairing by timestamps (IVF or Y4M from vpxdec) matched frame n with
    /// frame n-1 on vpxenc's output (its IVF has a 1/1000 time base).
    static func psnr(ffmpeg: String, vpxdec: String, encoded: String, rawSource: String, width: Int, height: Int,
                     dir: String) throws -> Double {
        let decoded = "\(dir)/psnr-decoded.yuv", log = "\(dir)/psnr.log"
        defer { try? FileManager.default.removeItem(atPath: decoded) }
        _ = try run(vpxdec, ["--i420", "-o", decoded, encoded])
        let raw = ["-f", "rawvideo", "-video_size", "\(width)x\(height)", "-pix_fmt", "yuv420p", "-i"]
        _ = try run(ffmpeg, ["-hide_banner", "-nostats"] + raw + [decoded] + raw + [rawSource]
                    + ["-lavfi", "[0:v][1:v]psnr", "-f", "null", "-"], stderrPath: log)
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        guard let line = text.split(separator: "\n").last(where: { $0.contains("PSNR y:") }),
              let range = line.range(of: "average:"),
              let value = Double(line[range.upperBound...].prefix { !$0.isWhitespace }) else {
            throw BenchError(description: "no PSNR from ffmpeg for \(encoded)")
        }
        return value
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

        // VP8 encode of a 720p30 Y4M, the same settings for all three: real time, speed -8 (libvpx
        // adapts the speed to the frame deadline), CBR 1500 kbit/s, keyframe every 300 frames, one
        // thread, no lookahead, and our encoder's rate-control buffer, quantizer range, under- and
        // overshoot and static threshold. The PSNR of each output against the source is recorded
        // next to the speed, so that speed is never bought with quality.
        let hdFrames = max(30, Int(150 * options.scale))
        let source = "\(dir)/in720.y4m"
        try CLIBench.makeY4M(path: source, width: 1280, height: 720, frames: hdFrames)
        let ours = ["encode", source, "-o", "\(dir)/ours720.ivf", "--codec", "vp8", "--speed", "-8", "--bitrate", "1500k",
                    "--keyint", "300", "--threads", "1", "-q"]
        let ffmpeg = CLIBench.tool("ffmpeg"), vpxdec = CLIBench.tool("vpxdec")
        let rawSource = "\(dir)/in720.yuv"
        var measure: ((String) throws -> Double)? = nil
        if let ffmpeg, let vpxdec {
            _ = try CLIBench.run(ffmpeg, ["-hide_banner", "-y", "-i", source, "-f", "rawvideo", "-pix_fmt", "yuv420p", rawSource])
            measure = { try CLIBench.psnr(ffmpeg: ffmpeg, vpxdec: vpxdec, encoded: $0, rawSource: rawSource, width: 1280, height: 720, dir: dir) }
        }
        var oursPSNR: [Double] = []
        /// Encodes with ours, returns frames/s and keeps the output's PSNR (when ffmpeg and vpxdec are there).
        let encodeOurs = { () throws -> Double in
            let fps = Double(hdFrames) / (try CLIBench.run(rm, ours).seconds)
            if let measure { oursPSNR.append(try measure("\(dir)/ours720.ivf")) }
            return fps
        }
        /// Records the PSNR kept during a speed comparison: ours against the anchor, pair by pair.
        func recordPSNR(anchorName: String, _ anchorPSNR: [Double]) throws {
            guard !anchorPSNR.isEmpty, oursPSNR.count == anchorPSNR.count else { return }
            var o = options
            o.warmup = 0
            o.repetitions = oursPSNR.count
            var i = 0, j = 0
            try compare(reporter, o, suite: "cli", case: "encode 1280x720 VP8 PSNR vs source", metric: "PSNR (dB)", unit: "dB",
                        higherIsBetter: true, anchorName: anchorName) {
                defer { i += 1 }
                return oursPSNR[i]
            } anchor: {
                defer { j += 1 }
                return anchorPSNR[j]
            }
        }
        if let vpxenc = CLIBench.tool("vpxenc") {
            let name = "vpxenc --rt --cpu-used=-8"
            var refPSNR: [Double] = []
            oursPSNR = []
            try compare(reporter, options, suite: "cli", case: "encode 1280x720 VP8 y4m->ivf", metric: "frames/s", unit: "1/s",
                        higherIsBetter: true, anchorName: name) {
                try encodeOurs()
            } anchor: {
                let fps = Double(hdFrames) / (try CLIBench.run(vpxenc, [
                    "--codec=vp8", "--rt", "--cpu-used=-8", "--end-usage=cbr", "--target-bitrate=1500", "--threads=1",
                    "--lag-in-frames=0", "--kf-max-dist=300", "--min-q=2", "--max-q=56", "--buf-initial-sz=500",
                    "--buf-optimal-sz=600", "--buf-sz=1000", "--undershoot-pct=100", "--overshoot-pct=15", "--static-thresh=1",
                    "-q", "-o", "\(dir)/vpxenc720.ivf", source]).seconds)
                if let measure { refPSNR.append(try measure("\(dir)/vpxenc720.ivf")) }
                return fps
            }
            try recordPSNR(anchorName: name, refPSNR)
        }
        if let ffmpeg {
            let name = "ffmpeg -c:v libvpx -deadline realtime"
            var refPSNR: [Double] = []
            oursPSNR = []
            try compare(reporter, options, suite: "cli", case: "encode 1280x720 VP8 y4m->ivf", metric: "frames/s", unit: "1/s",
                        higherIsBetter: true, anchorName: name) {
                try encodeOurs()
            } anchor: {
                // -b:v = -minrate = -maxrate selects CBR; -bufsize and -rc_init_occupancy are in bits
                // (1000 ms and 500 ms at 1500 kbit/s).
                let fps = Double(hdFrames) / (try CLIBench.run(ffmpeg, [
                    "-hide_banner", "-nostats", "-y", "-i", source, "-c:v", "libvpx", "-deadline", "realtime", "-cpu-used", "-8",
                    "-b:v", "1500k", "-minrate", "1500k", "-maxrate", "1500k", "-bufsize", "1500k", "-rc_init_occupancy", "750k",
                    "-qmin", "2", "-qmax", "56", "-undershoot-pct", "100", "-overshoot-pct", "15", "-static-thresh", "1",
                    "-g", "300", "-threads", "1", "-lag-in-frames", "0", "-auto-alt-ref", "0", "-f", "ivf",
                    "\(dir)/ffmpeg720.ivf"]).seconds)
                if let measure { refPSNR.append(try measure("\(dir)/ffmpeg720.ivf")) }
                return fps
            }
            try recordPSNR(anchorName: name, refPSNR)
        }
        try? FileManager.default.removeItem(atPath: source)
        try? FileManager.default.removeItem(atPath: rawSource)
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
