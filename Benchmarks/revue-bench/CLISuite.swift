import Foundation
// revue-media against the reference command-line tools, whole process against whole process on
// the same input file, run side by side (A B A B): VP8 and VP9 encode of a 720p Y4M against
// vpxenc, GStreamer (y4mdec ! vp8enc ! webmmux) and ffmpeg (libvpx), Opus encode of a speech WAV
// against opusenc, each with the same encoder settings and thread count; VP8 decode against
// vpxdec, Opus decode against opusdec. Every encode case checks (ffprobe) that both outputs hold
// the input's frame count and the same number of keyframes, and reports next to the wall-clock
// speed: CPU time, peak resident memory, output size and quality against the source.
import MediaCore

#if canImport(Glibc)
    import Glibc
#endif

/// A child process's wall time, CPU time and, when asked for, its memory: the high-water mark of
/// its resident set (`VmHWM`) and its resident set (`VmRSS`) sampled at a fixed interval, both read
/// from `/proc/PID/status` while it runs. (`wait4`'s `ru_maxrss` is useless here: a child started
/// with `posix_spawn` shares the parent's memory until `exec`, and Linux keeps that high-water
/// mark, so every child would report revue-bench's own size. Its CPU times are the child's own.)
struct ChildRun {
    var seconds: Double
    /// User + system CPU time of the child (all its threads), from `wait4`.
    var cpuSeconds: Double
    /// Peak resident memory in KiB (0 when memory was not measured).
    var maxRSSKilobytes: Int
    /// The most threads seen in the child at one poll (0 when memory was not measured).
    var maxThreads: Int
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
    /// (or /dev/null). With `memory`, polls `/proc/PID/status` every 2 ms for the peak resident set
    /// and the thread count (the timing then has 2 ms granularity, the same for every process
    /// compared); with `sampleEvery` seconds, also records VmRSS.
    static func run(
        _ path: String, _ args: [String], memory: Bool = false, sampleEvery: Double? = nil,
        stderrPath: String? = nil
    ) throws -> ChildRun {
        var pid: pid_t = 0
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv = ([path] + args).map { strdup($0) } + [nil]
        defer { for arg in argv { free(arg) } }
        let t0 = nowNs()
        let rc = posix_spawn(&pid, path, &actions, nil, argv, environ)
        guard rc == 0 else { throw BenchError(description: "cannot run \(path): \(String(cString: strerror(rc)))") }
        var status: Int32 = 0
        var usage = rusage()
        var peak = 0, threads = 0
        var samples: [Int] = []
        if memory || sampleEvery != nil {
            let statusPath = "/proc/\(pid)/status"
            var nextSample = t0 + UInt64((sampleEvery ?? 0) * 1e9)
            while true {
                let r = wait4(pid, &status, WNOHANG, &usage)
                if r == pid { break }
                if r < 0 && errno != EINTR { throw BenchError(description: "wait4 \(path): \(String(cString: strerror(errno)))") }
                // VmHWM is a high-water mark: a poll that misses a moment still sees its peak later,
                // except in the last 2 ms before exit.
                if let s = readStatus(statusPath) {
                    peak = max(peak, s.hwm)
                    threads = max(threads, s.threads)
                    if let every = sampleEvery, nowNs() >= nextSample {
                        samples.append(s.rss)
                        nextSample += UInt64(every * 1e9)
                    }
                }
                usleep(2_000)
            }
        } else {
            while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
        }
        let seconds = Double(nowNs() - t0) / 1e9
        let cpu =
            Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        let exit = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        guard exit == 0 else { throw BenchError(description: "\(path) \(args.joined(separator: " ")) exited with \(exit)") }
        return ChildRun(
            seconds: seconds, cpuSeconds: cpu, maxRSSKilobytes: peak, maxThreads: threads,
            rssSamplesKilobytes: samples, status: exit)
    }

    /// VmHWM and VmRSS (KiB) and Threads from a `/proc/PID/status` file; nil once the process has exited.
    static func readStatus(_ path: String) -> (hwm: Int, rss: Int, threads: Int)? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        var hwm: Int?, rss: Int?, threads = 0
        for line in text.split(separator: "\n")
        where line.hasPrefix("VmHWM:") || line.hasPrefix("VmRSS:") || line.hasPrefix("Threads:") {
            let value = Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.map { String($0) } ?? "")
            if line.hasPrefix("VmHWM:") {
                hwm = value
            } else if line.hasPrefix("VmRSS:") {
                rss = value
            } else {
                threads = value ?? 0
            }
        }
        guard let hwm, let rss else { return nil }  // a zombie has no memory lines
        return (hwm, rss, threads)
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
    static func psnr(
        ffmpeg: String, vpxdec: String, encoded: String, rawSource: String, width: Int, height: Int,
        dir: String
    ) throws -> Double {
        let decoded = "\(dir)/psnr-decoded.yuv", log = "\(dir)/psnr.log"
        defer { try? FileManager.default.removeItem(atPath: decoded) }
        _ = try run(vpxdec, ["--i420", "-o", decoded, encoded])
        let raw = ["-f", "rawvideo", "-video_size", "\(width)x\(height)", "-pix_fmt", "yuv420p", "-i"]
        _ = try run(
            ffmpeg,
            ["-hide_banner", "-nostats"] + raw + [decoded] + raw + [rawSource]
                + ["-lavfi", "[0:v][1:v]psnr", "-f", "null", "-"], stderrPath: log)
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        guard let line = text.split(separator: "\n").last(where: { $0.contains("PSNR y:") }),
            let range = line.range(of: "average:"),
            let value = Double(line[range.upperBound...].prefix { !$0.isWhitespace })
        else {
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

/// One encoder run as a command line: the program, its arguments and the file it writes.
struct EncoderCommand {
    var path: String
    var args: [String]
    var output: String
}

/// What an encoder's output holds, read back by ffprobe.
struct EncodedCount: Equatable {
    /// Decoded video frames, or Opus packets.
    var frames: Int
    /// Video keyframes (0 for audio).
    var keyframes: Int
}

enum CLISuite {
    /// The libvpx settings every encoder of a video case is given: revue-media's defaults for the
    /// codec (`VPXEncoderConfiguration`, what `revue-media encode` uses), spelled for each tool.
    struct VideoSettings {
        var codec: VPXCodec
        var bitrate: Int
        var keyint = 3000
        var conf: VPXEncoderConfiguration

        init(codec: VPXCodec, width: Int, height: Int, bitrate: Int) {
            self.codec = codec
            self.bitrate = bitrate
            conf = VPXEncoderConfiguration(codec: codec, width: width, height: height)
        }

        /// VPXEncoder's keyframe size cap: 0.5 x the 600 ms optimal buffer in frames, at least 300 %.
        var maxIntraPct: Int { max(300, 600 * 30 / 20) }

        func revueMedia(_ input: String, _ output: String) -> [String] {
            [
                "encode", input, "-o", output, "--codec", "\(codec)", "--speed", "\(conf.speed)", "--bitrate", "\(bitrate)",
                "--keyint", "\(keyint)", "--threads", "1", "-q",
            ]
        }

        /// vpxenc: real-time deadline, the same speed, CBR buffer model, quantizer range, under- and
        /// overshoot, keyframe cap and placement (libvpx places none itself: `--disable-kf`, as
        /// VPXEncoder sets `kf_mode` to disabled), no lookahead, one thread, and the 90 kHz time
        /// base VPXEncoder encodes in.
        func vpxenc(_ input: String, _ output: String) -> [String] {
            var a = [
                "--codec=\(codec)", "--rt", "--cpu-used=\(conf.speed)", "--threads=1", "--end-usage=cbr",
                "--target-bitrate=\(bitrate / 1000)", "--min-q=\(conf.minQuantizer)", "--max-q=\(conf.maxQuantizer)",
                "--lag-in-frames=0", "--disable-kf", "--kf-min-dist=0", "--kf-max-dist=\(keyint)",
                "--static-thresh=\(conf.staticThreshold)", "--buf-sz=1000", "--buf-initial-sz=500", "--buf-optimal-sz=600",
                "--drop-frame=0", "--resize-allowed=0", "--noise-sensitivity=0", "--max-intra-rate=\(maxIntraPct)",
                "--timebase=1/90000", "--ivf", "-q",
            ]
            a +=
                codec == .vp8
                ? ["--token-parts=0", "--undershoot-pct=100", "--overshoot-pct=15"]
                : [
                    "--undershoot-pct=50", "--overshoot-pct=50", "--aq-mode=3", "--tile-columns=0",
                    "--row-mt=0", "--frame-parallel=0",
                ]
            return a + ["-o", output, input]
        }

        /// GStreamer: the Y4M parsed by y4mdec, vp8enc with the same settings, WebM out (GStreamer
        /// has no IVF muxer). One streaming thread does parse, encode and write.
        func gstreamer(_ input: String, _ output: String) -> [String] {
            [
                "-q", "filesrc", "location=\(input)", "!", "y4mdec", "!",
                "vp8enc", "deadline=1", "cpu-used=\(conf.speed)", "threads=1", "end-usage=cbr", "target-bitrate=\(bitrate)",
                "min-quantizer=\(conf.minQuantizer)", "max-quantizer=\(conf.maxQuantizer)", "lag-in-frames=0",
                "keyframe-mode=disabled", "keyframe-max-dist=\(keyint)", "static-threshold=\(conf.staticThreshold)",
                "token-partitions=0", "buffer-size=1000", "buffer-initial-size=500", "buffer-optimal-size=600",
                "undershoot=100", "overshoot=15", "noise-sensitivity=0", "dropframe-threshold=0", "resize-allowed=false",
                "max-intra-bitrate=\(maxIntraPct)", "timebase=1/90000", "!",
                "webmmux", "!", "filesink", "location=\(output)",
            ]
        }

        /// ffmpeg's libvpx wrapper: -b:v = -minrate = -maxrate selects CBR; -bufsize and
        /// -rc_init_occupancy are in bits (1000 ms and 500 ms at the bitrate). ffmpeg cannot
        /// disable libvpx's keyframe placement: -g sets the maximum distance only.
        func ffmpeg(_ input: String, _ output: String) -> [String] {
            let k = "\(bitrate / 1000)k"
            return [
                "-hide_banner", "-nostats", "-y", "-threads", "1", "-i", input, "-c:v", "libvpx", "-deadline", "realtime",
                "-cpu-used", "\(conf.speed)", "-b:v", k, "-minrate", k, "-maxrate", k, "-bufsize", k,
                "-rc_init_occupancy", "\(bitrate / 2000)k", "-qmin", "\(conf.minQuantizer)", "-qmax", "\(conf.maxQuantizer)",
                "-undershoot-pct", "100", "-overshoot-pct", "15", "-static-thresh", "\(conf.staticThreshold)",
                "-max-intra-rate", "\(maxIntraPct)", "-noise-sensitivity", "0", "-g", "\(keyint)", "-threads", "1",
                "-lag-in-frames", "0", "-auto-alt-ref", "0", "-f", "ivf", output,
            ]
        }
    }

    /// Video frames and keyframes in `file` (IVF or WebM), decoded and counted by ffprobe.
    static func countVideo(_ ffprobe: String, _ file: String, dir: String) throws -> EncodedCount {
        let log = "\(dir)/ffprobe.txt"
        _ = try runToFile(
            ffprobe,
            [
                "-v", "error", "-select_streams", "v:0", "-count_frames", "-show_entries",
                "stream=nb_read_frames:packet=flags", "-of", "default=noprint_wrappers=1", file,
            ], stdout: log)
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        var frames: Int?, keys = 0
        for line in text.split(separator: "\n") {
            if line.hasPrefix("nb_read_frames=") { frames = Int(line.dropFirst("nb_read_frames=".count)) }
            if line.hasPrefix("flags=K") { keys += 1 }
        }
        guard let frames else { throw BenchError(description: "ffprobe counted no frames in \(file)") }
        return EncodedCount(frames: frames, keyframes: keys)
    }

    /// Opus packets in an Ogg file, counted by ffprobe.
    static func countAudio(_ ffprobe: String, _ file: String, dir: String) throws -> EncodedCount {
        let log = "\(dir)/ffprobe.txt"
        _ = try runToFile(
            ffprobe,
            [
                "-v", "error", "-select_streams", "a:0", "-count_packets", "-show_entries",
                "stream=nb_read_packets", "-of", "default=noprint_wrappers=1", file,
            ], stdout: log)
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("nb_read_packets=") }),
            let n = Int(line.dropFirst("nb_read_packets=".count))
        else {
            throw BenchError(description: "ffprobe counted no packets in \(file)")
        }
        return EncodedCount(frames: n, keyframes: 0)
    }

    /// Runs a tool with its stdout in `stdout` (a file).
    static func runToFile(_ path: String, _ args: [String], stdout: String) throws -> ChildRun {
        // posix_spawn opens stdout on /dev/null: let the tool write the file itself where it can,
        // else go through a shell redirection.
        let quoted = ([path] + args).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        return try CLIBench.run("/bin/sh", ["-c", "\(quoted) > '\(stdout)'"])
    }

    /// SNR (dB) of `encoded` (Ogg Opus) decoded by opusdec at 48 kHz against the source WAV (16-bit,
    /// 48 kHz): 10 log10(signal energy / error energy) over the shorter of the two.
    static func snr(opusdec: String, encoded: String, source: String, dir: String) throws -> Double {
        let decoded = "\(dir)/snr-decoded.wav"
        defer { try? FileManager.default.removeItem(atPath: decoded) }
        _ = try CLIBench.run(opusdec, ["--quiet", "--rate", "48000", encoded, decoded])
        func samples(_ path: String) throws -> [Float] {
            let r = try WAVReader(path: path)
            var all: [Float] = [], chunk = [Float](repeating: 0, count: 4800 * r.channelCount)
            while true {
                var span = chunk.mutableSpan
                let n = try r.read(into: &span)
                if n == 0 { break }
                all.append(contentsOf: chunk[0..<(n * r.channelCount)])
            }
            return all
        }
        let a = try samples(source), b = try samples(decoded)
        var signal = 0.0, noise = 0.0
        for i in 0..<min(a.count, b.count) {
            let s = Double(a[i]), d = s - Double(b[i])
            signal += s * s
            noise += d * d
        }
        return noise > 0 ? 10 * log10(signal / noise) : .infinity
    }

    /// Ours and one anchor, each a whole process encoding the same input file, interleaved. Records
    /// work units per second (wall clock), per CPU-second, peak resident memory, output bytes,
    /// quality (when `quality` is given) and the most threads seen. Fails the case unless both
    /// outputs hold `expected.frames` frames and the same number of keyframes.
    static func compareEncoders(
        _ reporter: Reporter, _ options: BenchOptions, case name: String, work: Double,
        metric: (wall: String, cpu: String, unit: String), anchorName: String, ours: EncoderCommand, anchor: EncoderCommand,
        expected: Int,
        count: @escaping (String) throws -> EncodedCount,
        quality: (metric: String, measure: (String) throws -> Double)?
    ) throws {
        let cpu = (BenchReplay(), BenchReplay()), rss = (BenchReplay(), BenchReplay()), bytes = (BenchReplay(), BenchReplay())
        let q = (BenchReplay(), BenchReplay()), threads = (BenchReplay(), BenchReplay())
        var qualityOf: [Data: Double] = [:]  // by output content: a repeated output is not measured again
        var oursCount: EncodedCount?
        func one(_ c: EncoderCommand, _ side: Int) throws -> Double {
            try? FileManager.default.removeItem(atPath: c.output)
            let r = try CLIBench.run(c.path, c.args, memory: true)
            let got = try count(c.output)
            guard got.frames == expected else {
                throw BenchError(
                    description:
                        "\(name): \(side == 0 ? "ours" : anchorName) wrote \(got.frames) frames, the input has \(expected)")
            }
            if side == 0 {
                oursCount = got
            } else if let oursCount, oursCount.keyframes != got.keyframes {
                throw BenchError(
                    description: "\(name): ours wrote \(oursCount.keyframes) keyframes, \(anchorName) \(got.keyframes)")
            }
            let data = try Data(contentsOf: URL(fileURLWithPath: c.output))
            let pick = { (pair: (BenchReplay, BenchReplay)) in side == 0 ? pair.0 : pair.1 }
            pick(cpu).add(work / r.cpuSeconds)
            pick(rss).add(Double(r.maxRSSKilobytes) / 1024)
            pick(bytes).add(Double(data.count) / 1000)
            pick(threads).add(Double(r.maxThreads))
            if let quality {
                if qualityOf[data] == nil { qualityOf[data] = try quality.measure(c.output) }
                pick(q).add(qualityOf[data]!)
            }
            return work / r.seconds
        }
        try compare(
            reporter, options, suite: "cli", case: name, metric: metric.wall, unit: metric.unit, higherIsBetter: true,
            anchorName: anchorName, ours: { try one(ours, 0) }, anchor: { try one(anchor, 1) })
        func replay(_ pair: (BenchReplay, BenchReplay), _ metric: String, _ unit: String, _ higher: Bool) throws {
            try compare(
                reporter, options, suite: "cli", case: name, metric: metric, unit: unit, higherIsBetter: higher,
                anchorName: anchorName, ours: { pair.0.pop() }, anchor: { pair.1.pop() })
        }
        try replay(cpu, metric.cpu, metric.unit, true)
        try replay(rss, "peak RSS", "MiB", false)
        try replay(bytes, "output size", "kB", false)
        if let quality { try replay(q, quality.metric, "dB", true) }
        try replay(threads, "threads (most seen)", "threads", false)
    }

    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        let dir = CLIBench.tempDir()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let rm = CLIBench.revueMedia
        guard FileManager.default.isExecutableFile(atPath: rm) else { throw BenchError(description: "\(rm) not built") }
        let ffprobe = CLIBench.tool("ffprobe"), ffmpeg = CLIBench.tool("ffmpeg"), vpxdec = CLIBench.tool("vpxdec")

        // Video encode: a 720p30 Y4M of synthetic moving frames.
        let hdFrames = max(30, Int(150 * options.scale))
        let source = "\(dir)/in720.y4m", rawSource = "\(dir)/in720.yuv"
        try CLIBench.makeY4M(path: source, width: 1280, height: 720, frames: hdFrames)
        if let ffprobe {
            var psnr: (metric: String, measure: (String) throws -> Double)? = nil
            if let ffmpeg, let vpxdec {
                _ = try CLIBench.run(
                    ffmpeg, ["-hide_banner", "-y", "-i", source, "-f", "rawvideo", "-pix_fmt", "yuv420p", rawSource])
                psnr = (
                    "PSNR vs source",
                    {
                        try CLIBench.psnr(
                            ffmpeg: ffmpeg, vpxdec: vpxdec, encoded: $0, rawSource: rawSource,
                            width: 1280, height: 720, dir: dir)
                    }
                )
            }
            let countVideo = { (file: String) in try Self.countVideo(ffprobe, file, dir: dir) }
            let videoMetric = (wall: "frames/s", cpu: "frames/CPU-s", unit: "1/s")
            for codec in [VPXCodec.vp8, .vp9] {
                let s = VideoSettings(codec: codec, width: 1280, height: 720, bitrate: 1_500_000)
                let name = "encode 1280x720 \(codec) y4m, \(hdFrames) frames"
                let ours = EncoderCommand(path: rm, args: s.revueMedia(source, "\(dir)/ours.ivf"), output: "\(dir)/ours.ivf")
                if let vpxenc = CLIBench.tool("vpxenc") {
                    try compareEncoders(
                        reporter, options, case: name, work: Double(hdFrames), metric: videoMetric,
                        anchorName: "vpxenc --rt (same settings)", ours: ours,
                        anchor: EncoderCommand(
                            path: vpxenc, args: s.vpxenc(source, "\(dir)/vpxenc.ivf"),
                            output: "\(dir)/vpxenc.ivf"),
                        expected: hdFrames, count: countVideo, quality: psnr)
                }
                if codec == .vp8, let gst = CLIBench.tool("gst-launch-1.0") {
                    try compareEncoders(
                        reporter, options, case: name, work: Double(hdFrames), metric: videoMetric,
                        anchorName: "gst y4mdec!vp8enc!webmmux (same settings)", ours: ours,
                        anchor: EncoderCommand(
                            path: gst, args: s.gstreamer(source, "\(dir)/gst.webm"),
                            output: "\(dir)/gst.webm"),
                        expected: hdFrames, count: countVideo, quality: psnr)
                }
                if codec == .vp8, let ffmpeg {
                    try compareEncoders(
                        reporter, options, case: name, work: Double(hdFrames), metric: videoMetric,
                        anchorName: "ffmpeg -c:v libvpx (same settings)", ours: ours,
                        anchor: EncoderCommand(
                            path: ffmpeg, args: s.ffmpeg(source, "\(dir)/ffmpeg.ivf"),
                            output: "\(dir)/ffmpeg.ivf"),
                        expected: hdFrames, count: countVideo, quality: psnr)
                }
            }
        }
        try? FileManager.default.removeItem(atPath: rawSource)

        // Opus encode of 48 kHz speech (a 16-bit WAV): the same application (audio: revue-media
        // encode's, and opusenc's own), complexity, bitrate, constrained VBR (libopus's default,
        // which revue-media keeps; opusenc's default is unconstrained), 20 ms frames, and 24-bit
        // LSB depth (libopus's default; opusenc would set 16 for a 16-bit input).
        let seconds = max(5, Int(60 * options.scale))
        if let ffprobe, let opusenc = CLIBench.tool("opusenc") {
            for (channels, complexity) in [(1, 10), (1, 5), (2, 10)] {
                let wav = "\(dir)/speech\(channels).wav"
                if !FileManager.default.fileExists(atPath: wav) {
                    var speech = SyntheticAudio(pattern: .speech, sampleRate: 48_000, channels: channels)
                    let w = try WAVWriter(path: wav, sampleRate: 48_000, channelCount: channels, format: .int16)
                    try w.write(speech.int16s(frames: 48_000 * seconds))
                    try w.finish()
                }
                let bitrate = 32 * channels
                let quality: (metric: String, measure: (String) throws -> Double)? = CLIBench.tool("opusdec").map { opusdec in
                    ("SNR vs source", { try Self.snr(opusdec: opusdec, encoded: $0, source: wav, dir: dir) })
                }
                let name = "encode speech 48k \(channels == 1 ? "mono" : "stereo") \(bitrate)k c\(complexity), \(seconds) s"
                let ours = EncoderCommand(
                    path: rm,
                    args: [
                        "encode", wav, "-o", "\(dir)/ours.ogg", "--bitrate", "\(bitrate)k",
                        "--complexity", "\(complexity)", "--frame-ms", "20", "-q",
                    ],
                    output: "\(dir)/ours.ogg")
                let anchor = EncoderCommand(
                    path: opusenc,
                    args: [
                        "--quiet", "--bitrate", "\(bitrate)", "--comp", "\(complexity)",
                        "--framesize", "20", "--cvbr",
                        "--set-ctl-int", "4000=2049",  // OPUS_SET_APPLICATION(AUDIO)
                        "--set-ctl-int", "4036=24",  // OPUS_SET_LSB_DEPTH(24)
                        wav, "\(dir)/opusenc.ogg",
                    ],
                    output: "\(dir)/opusenc.ogg")
                // 20 ms packets covering the input and the encoder's lookahead (312 samples at 48 kHz):
                // 50 per second and one more, for both encoders.
                try compareEncoders(
                    reporter, options, case: name, work: Double(seconds), metric: ("x realtime", "x realtime per CPU", "x"),
                    anchorName: "opusenc (same settings)", ours: ours, anchor: anchor,
                    expected: seconds * 50 + 1, count: { try countAudio(ffprobe, $0, dir: dir) }, quality: quality)
            }
        }

        // Decode: 640x360 VP8 (IVF -> Y4M) against vpxdec, speech Ogg Opus -> 48 kHz 16-bit WAV
        // against opusdec without dither (ours does not dither). Each case fails unless the two
        // outputs hold the same pixels (the Y4M header lines differ: vpxdec writes its own frame rate)
        // or the same number of samples, none more than 1 apart (float to 16-bit rounding).
        let frames = max(30, Int(300 * options.scale))
        try CLIBench.makeInputs(in: dir, frames: frames, seconds: max(2, Int(20 * options.scale)))
        if let vpxdec {
            _ = try CLIBench.run(rm, ["encode", "\(dir)/in.y4m", "-o", "\(dir)/ours360.ivf", "--speed", "-8", "-q"])
            try compareProcesses(
                reporter, options, case: "decode 640x360 VP8 ivf->y4m", work: Double(frames),
                metric: (wall: "frames/s", cpu: "frames/CPU-s", unit: "1/s"), anchorName: "vpxdec (y4m out)",
                ours: (rm, ["decode", "\(dir)/ours360.ivf", "-o", "\(dir)/ours.y4m", "-q"]),
                anchor: (vpxdec, ["-o", "\(dir)/ref.y4m", "\(dir)/ours360.ivf"]))
            try requireSame("\(dir)/ours.y4m", "\(dir)/ref.y4m", skippingFirstLine: true)
        }
        if let opusdec = CLIBench.tool("opusdec") {
            let s = Double(max(2, Int(20 * options.scale)))
            _ = try CLIBench.run(rm, ["encode", "\(dir)/in.wav", "-o", "\(dir)/speech.ogg", "-q"])
            try compareProcesses(
                reporter, options, case: "decode speech ogg->wav 48k", work: s,
                metric: (wall: "x realtime", cpu: "x realtime per CPU", unit: "x"),
                anchorName: "opusdec --rate 48000 --no-dither",
                ours: (rm, ["decode", "\(dir)/speech.ogg", "-o", "\(dir)/ours.wav", "--rate", "48000", "-q"]),
                anchor: (opusdec, ["--quiet", "--rate", "48000", "--no-dither", "\(dir)/speech.ogg", "\(dir)/ref.wav"]))
            try requireSameSamples("\(dir)/ours.wav", "\(dir)/ref.wav")
        }
    }

    /// Throws unless the two files hold the same bytes (after their first line, for Y4M headers).
    static func requireSame(_ a: String, _ b: String, skippingFirstLine: Bool) throws {
        func body(_ path: String) throws -> Data {
            let d = try Data(contentsOf: URL(fileURLWithPath: path))
            guard skippingFirstLine, let end = d.firstIndex(of: UInt8(ascii: "\n")) else { return d }
            return d[(end + 1)...]
        }
        guard try body(a) == body(b) else { throw BenchError(description: "decoded outputs differ: \(a) and \(b)") }
    }

    /// Throws unless two 16-bit WAV files hold as many samples, none more than 1 apart.
    static func requireSameSamples(_ a: String, _ b: String) throws {
        func samples(_ path: String) throws -> [Int16] {
            let r = try WAVReader(path: path)
            var all: [Int16] = [], chunk = [Int16](repeating: 0, count: 4800 * r.channelCount)
            while true {
                var span = chunk.mutableSpan
                let n = try r.read(into: &span)
                if n == 0 { break }
                all.append(contentsOf: chunk[0..<(n * r.channelCount)])
            }
            return all
        }
        let x = try samples(a), y = try samples(b)
        guard x.count == y.count, zip(x, y).allSatisfy({ abs(Int($0) - Int($1)) <= 1 }) else {
            throw BenchError(description: "decoded outputs differ: \(a) (\(x.count) samples) and \(b) (\(y.count))")
        }
    }

    /// Ours and one anchor as whole processes, interleaved: work units per second of wall clock and
    /// per CPU-second of the child (user + system).
    static func compareProcesses(
        _ reporter: Reporter, _ options: BenchOptions, case name: String, work: Double,
        metric: (wall: String, cpu: String, unit: String), anchorName: String,
        ours: (String, [String]), anchor: (String, [String])
    ) throws {
        let cpu = (BenchReplay(), BenchReplay())
        try compare(
            reporter, options, suite: "cli", case: name, metric: metric.wall, unit: metric.unit, higherIsBetter: true,
            anchorName: anchorName
        ) {
            let r = try CLIBench.run(ours.0, ours.1)
            cpu.0.add(work / r.cpuSeconds)
            return work / r.seconds
        } anchor: {
            let r = try CLIBench.run(anchor.0, anchor.1)
            cpu.1.add(work / r.cpuSeconds)
            return work / r.seconds
        }
        try compare(
            reporter, options, suite: "cli", case: name, metric: metric.cpu, unit: metric.unit, higherIsBetter: true,
            anchorName: anchorName, ours: { cpu.0.pop() }, anchor: { cpu.1.pop() })
    }
}
