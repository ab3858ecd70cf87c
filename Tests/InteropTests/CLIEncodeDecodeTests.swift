import Foundation
import MediaCore
// `revue-media encode` / `decode` / `probe` against independent tools: ffprobe and ffmpeg read
// what we write with exact frame counts and durations, opusinfo validates our Ogg Opus, we read
// files that ffmpeg and opusenc write, and encode-then-decode keeps PSNR/SNR above stated bounds.
import Testing

@Suite(.serialized) struct CLIEncodeDecodeTests {
    @Test(arguments: ["vp8", "vp9"])
    func patternVideoIsReadByFFprobeWithExactFramesAndDuration(_ codec: String) throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let r = try revueMedia(
            [
                "encode", "--pattern", "moving", "--size", "160x120", "--fps", "15", "--frames", "15",
                "--codec", codec, "--bitrate", "300k", "-o", "p.ivf", "--json",
            ], cwd: dir.path)
        #expect(r.status == 0, "\(r.stderr)")
        let result = try #require(cliJSON(r.stdout))
        #expect(result["frames"] as? Int == 15)
        let info = try ffprobeStream(dir.file("p.ivf"))
        #expect(info["codec_name"] == codec)
        #expect(info["width"] == "160" && info["height"] == "120")
        #expect(info["nb_read_frames"] == "15")
        #expect(info["duration"] == "1.000000")
        #expect(info["r_frame_rate"] == "15/1")
        // Our probe agrees.
        let probe = try revueMedia(["probe", "p.ivf", "--json"], cwd: dir.path)
        let p = try #require(cliJSON(probe.stdout))
        #expect(p["frames"] as? Int == 15 && p["codec"] as? String == codec)
        #expect((p["duration"] as? Double).map { abs($0 - 1) < 1e-9 } == true)
        #expect(dir.contents == ["p.ivf"])
    }

    /// ffmpeg writes the source (a Y4M we read); we encode and decode it; ffmpeg's psnr filter and
    /// ours agree and both exceed 32 dB at 600 kb/s for 176x144; ffmpeg decodes our IVF to exactly
    /// the pixels our decoder gives.
    @Test func y4mRoundTripKeepsPSNRAboveBoundByFFmpegAndByUs() throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let src = dir.file("src.y4m")
        let gen = try runTool(
            "ffmpeg",
            [
                "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=176x144:rate=12:duration=1",
                "-pix_fmt", "yuv420p", src,
            ])
        #expect(gen.status == 0, "\(gen.stderr)")
        var r = try revueMedia(["encode", "src.y4m", "-o", "c.ivf", "--bitrate", "600k", "-q"], cwd: dir.path)
        #expect(r.status == 0, "\(r.stderr)")
        r = try revueMedia(["decode", "c.ivf", "-o", "d.y4m", "-q"], cwd: dir.path)
        #expect(r.status == 0, "\(r.stderr)")
        let info = try ffprobeStream(dir.file("d.y4m"))
        #expect(info["nb_read_frames"] == "12")
        #expect(info["duration"] == "1.000000")
        let ffmpegPSNR = try #require(try cliFFmpegPSNR(src, dir.file("d.y4m")))
        let ours = try cliY4MPSNR(src, dir.file("d.y4m"))
        #expect(ours.frames == 12)
        #expect(ffmpegPSNR > 32, "ffmpeg psnr \(ffmpegPSNR)")
        #expect(ours.mean > 32, "our psnr \(ours.mean)")
        #expect(abs(ours.mean - ffmpegPSNR) < 1.0, "ours \(ours.mean) vs ffmpeg \(ffmpegPSNR)")
        // ffmpeg's own VP8 decoder gives the same pixels as ours.
        let ff = try runTool("ffmpeg", ["-v", "error", "-i", dir.file("c.ivf"), "-pix_fmt", "yuv420p", dir.file("ff.y4m")])
        #expect(ff.status == 0)
        #expect(try cliY4MPSNR(dir.file("ff.y4m"), dir.file("d.y4m")).minimum == 100)
    }

    @Test func scalesAndRetimesAY4MInput() throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        _ = try runTool(
            "ffmpeg",
            [
                "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=25:duration=1",
                "-pix_fmt", "yuv420p", dir.file("src.y4m"),
            ])
        let r = try revueMedia(
            ["encode", "src.y4m", "-o", "s.ivf", "--size", "160x120", "--fps", "10", "--frames", "7", "-q"], cwd: dir.path)
        #expect(r.status == 0, "\(r.stderr)")
        let info = try ffprobeStream(dir.file("s.ivf"))
        #expect(info["width"] == "160" && info["height"] == "120")
        #expect(info["nb_read_frames"] == "7")
        #expect(info["duration"] == "0.700000")
    }

    @Test(arguments: [("libvpx", "vp8"), ("libvpx-vp9", "vp9")])
    func readsIVFWrittenByFFmpeg(_ encoder: String, _ codec: String) throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let gen = try runTool(
            "ffmpeg",
            [
                "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=128x96:rate=10:duration=1",
                "-c:v", encoder, "-b:v", "400k", "-deadline", "realtime", dir.file("ff.ivf"),
            ])
        #expect(gen.status == 0, "\(gen.stderr)")
        let probe = try #require(cliJSON(try revueMedia(["probe", "ff.ivf", "--json"], cwd: dir.path).stdout))
        #expect(probe["codec"] as? String == codec)
        #expect(probe["frames"] as? Int == 10)
        #expect(probe["width"] as? Int == 128 && probe["height"] as? Int == 96)
        let r = try revueMedia(["decode", "ff.ivf", "-o", "d.y4m", "-q"], cwd: dir.path)
        #expect(r.status == 0, "\(r.stderr)")
        let ref = try runTool("ffmpeg", ["-v", "error", "-i", dir.file("ff.ivf"), "-pix_fmt", "yuv420p", dir.file("ref.y4m")])
        #expect(ref.status == 0)
        let cmp = try cliY4MPSNR(dir.file("ref.y4m"), dir.file("d.y4m"))
        #expect(cmp.frames == 10 && cmp.minimum == 100, "decoded differently from ffmpeg: \(cmp)")
    }

    /// WAV from ffmpeg (16 kHz mono s16; 44.1 kHz stereo float, resampled) -> our Ogg Opus:
    /// opusinfo accepts it, ffmpeg decodes exactly the original sample count, and our decode at
    /// the original rate has an SNR above 30 dB against the source.
    @Test(arguments: [(16_000, 1, "pcm_s16le"), (44_100, 2, "pcm_f32le")])
    func wavToOggOpusIsValidAndRoundTrips(_ rate: Int, _ channels: Int, _ format: String) throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let gen = try runTool(
            "ffmpeg",
            [
                "-v", "error", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=\(rate):duration=1",
                "-ac", "\(channels)", "-c:a", format, dir.file("src.wav"),
            ])
        #expect(gen.status == 0, "\(gen.stderr)")
        var r = try revueMedia(["encode", "src.wav", "-o", "a.opus", "--bitrate", "\(48 * channels)k", "-q"], cwd: dir.path)
        #expect(r.status == 0, "\(r.stderr)")
        let info = try runTool("opusinfo", [dir.file("a.opus")])
        #expect(info.status == 0)
        #expect(
            !info.stdout.lowercased().contains("warning") && !info.stderr.lowercased().contains("error"),
            "\(info.stdout)\(info.stderr)")
        #expect(info.stdout.contains("Original sample rate: \(rate) Hz"))
        #expect(info.stdout.contains("Playback length: 0m:01.000s"))
        // ffmpeg applies pre-skip and end trimming: exactly one second at 48 kHz.
        let pcm = try runTool(
            "ffmpeg", ["-v", "error", "-i", dir.file("a.opus"), "-f", "s16le", "-ac", "1", "-ar", "48000", dir.file("ff.raw")])
        #expect(pcm.status == 0)
        #expect(dir.read("ff.raw").count == 48_000 * 2)
        r = try revueMedia(["decode", "a.opus", "-o", "d.wav", "--rate", "\(rate)", "-q"], cwd: dir.path)
        #expect(r.status == 0, "\(r.stderr)")
        // ffprobe reads our WAV with the exact length.
        let wavInfo = try ffprobeStream(dir.file("d.wav"), count: .nothing)
        #expect(
            wavInfo["duration"] == "1.000000" && wavInfo["sample_rate"] == "\(rate)" && wavInfo["channels"] == "\(channels)",
            "\(wavInfo)")
        let source = try cliReadWAV(dir.file("src.wav")), decoded = try cliReadWAV(dir.file("d.wav"))
        #expect(decoded.rate == rate && decoded.channels == channels)
        #expect(decoded.samples.count == source.samples.count)
        let snr = Quality.snr(
            reference: cliFirstChannel(source.samples, channels: channels),
            decoded: cliFirstChannel(decoded.samples, channels: channels), maxLag: 100)
        #expect(snr.snr > 30, "SNR \(snr)")
    }

    /// Ogg Opus written by opusenc and by ffmpeg (libopus) decodes with the original length.
    @Test(arguments: ["opusenc", "ffmpeg"])
    func readsOggOpusWrittenByOtherEncoders(_ tool: String) throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        _ = try runTool(
            "ffmpeg",
            [
                "-v", "error", "-f", "lavfi", "-i", "sine=frequency=600:sample_rate=48000:duration=1.5",
                "-c:a", "pcm_s16le", dir.file("src.wav"),
            ])
        let enc =
            tool == "opusenc"
            ? try runTool("opusenc", ["--quiet", "--bitrate", "64", dir.file("src.wav"), dir.file("x.opus")])
            : try runTool(
                "ffmpeg", ["-v", "error", "-i", dir.file("src.wav"), "-c:a", "libopus", "-b:a", "64k", dir.file("x.opus")])
        #expect(enc.status == 0, "\(enc.stderr)")
        let probe = try #require(cliJSON(try revueMedia(["probe", "x.opus", "--json"], cwd: dir.path).stdout))
        #expect(probe["samples"] as? Int == 72_000)
        let r = try revueMedia(["decode", "x.opus", "-o", "d.wav", "-q"], cwd: dir.path)
        #expect(r.status == 0, "\(r.stderr)")
        let source = try cliReadWAV(dir.file("src.wav")), decoded = try cliReadWAV(dir.file("d.wav"))
        #expect(decoded.samples.count == 72_000)
        let snr = Quality.snr(reference: source.samples, decoded: decoded.samples, maxLag: 100)
        #expect(snr.snr > 20, "SNR \(snr)")
    }

    @Test func audioPatternsEncodeToValidOggOpus() throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        for (pattern, extra) in [
            ("speech", ["--rate", "24000", "--fec", "--dtx"]), ("tone", ["--channels", "2", "--frame-ms", "40"]),
        ] {
            let r = try revueMedia(
                ["encode", "--pattern", pattern, "--seconds", "1.5", "-o", "\(pattern).ogg", "-q"] + extra, cwd: dir.path)
            #expect(r.status == 0, "\(r.stderr)")
            let info = try runTool("opusinfo", [dir.file("\(pattern).ogg")])
            #expect(info.status == 0 && info.stdout.contains("Playback length: 0m:01.500s"), "\(info.stdout)")
            let probe = try #require(cliJSON(try revueMedia(["probe", "\(pattern).ogg", "--json"], cwd: dir.path).stdout))
            #expect(probe["samples"] as? Int == 72_000)
        }
    }
}
