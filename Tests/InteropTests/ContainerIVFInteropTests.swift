import Foundation
import MediaCore
import Testing

/// IVF against ffmpeg/ffprobe and vpxdec: real VP8/VP9 streams from libvpx through our reader and
/// writer, checked packet for packet and decode for decode.
@Suite struct ContainerIVFInteropTests {
    @Test(arguments: [("libvpx", IVFCodec.vp8, "vp8"), ("libvpx-vp9", .vp9, "vp9")])
    func rewritesRealStreamsThatFFmpegAndVpxdecRead(_ encoder: String, _ codec: IVFCodec, _ name: String) throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let source = dir.file("src.ivf")
        let enc = try runTool(
            "ffmpeg",
            [
                "-v", "error", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=30",
                "-frames:v", "10", "-pix_fmt", "yuv420p", "-c:v", encoder, "-deadline", "realtime", "-cpu-used", "8",
                "-y", source,
            ])
        #expect(enc.status == 0, "\(enc.stderr)")

        let r = try IVFReader(path: source)
        #expect(r.header.codec == codec && r.header.width == 320 && r.header.height == 240)
        let out = dir.file("ours.ivf")
        let w = try IVFWriter(
            path: out, codec: r.header.codec, width: r.header.width, height: r.header.height,
            timeBase: r.header.timeBase)
        var buffer: [UInt8] = []
        var frames: [([UInt8], Int64)] = []
        while let h = try r.readFrame(into: &buffer) {
            frames.append((buffer, h.pts))
            try w.write(buffer, pts: h.pts)
        }
        try w.finish()
        #expect(frames.count == 10)

        // ffprobe: codec, size, frame count and duration (10 frames at 30 fps).
        let probe = try ffprobeStream(out)
        #expect(probe["codec_name"] == name && probe["width"] == "320" && probe["height"] == "240", "\(probe)")
        #expect(probe["nb_read_frames"] == "10", "\(probe)")
        #expect(probe["format.duration"] == "0.333333", "\(probe)")
        #expect(probe["stderr"] == "")

        // Packet payloads byte for byte, as ffmpeg's demuxer sees them in both files.
        func packetHashes(_ path: String) throws -> [String] {
            let run = try runTool("ffmpeg", ["-v", "error", "-i", path, "-c", "copy", "-f", "framemd5", "-"])
            return run.stdout.split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init)
        }
        let original = try packetHashes(source)
        #expect(original.count == 10)
        #expect(try packetHashes(out) == original)

        // Our reader gives back exactly what we wrote.
        let again = try IVFReader(path: out)
        for (payload, pts) in frames {
            let h = try again.readFrame(into: &buffer)
            #expect(h?.pts == pts && buffer == payload)
        }
        #expect(try again.readFrame(into: &buffer) == nil)

        // libvpx's own tool decodes both files to the same pictures.
        let a = try runTool("vpxdec", ["--md5", "--i420", source])
        let b = try runTool("vpxdec", ["--md5", "--i420", out])
        #expect(a.status == 0 && b.status == 0 && !a.stdout.isEmpty)
        #expect(a.stdout == b.stdout)
    }

    @Test func readsVpxencOutput() throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let y4m = dir.file("in.y4m")
        #expect(
            try runTool(
                "ffmpeg",
                [
                    "-v", "error", "-f", "lavfi", "-i", "testsrc=size=96x64:rate=15", "-frames:v", "6",
                    "-pix_fmt", "yuv420p", "-y", y4m,
                ]
            ).status == 0)
        let run = try runTool(
            "vpxenc", ["--rt", "--cpu-used=8", "--threads=1", "--codec=vp8", "--ivf", "-q", "-o", dir.file("v.ivf"), y4m])
        #expect(run.status == 0, "\(run.stderr)")
        let r = try IVFReader(path: dir.file("v.ivf"))
        #expect(r.header.declaredFrameCount == 6)  // libvpx stores the frame count
        #expect(r.header.timeBase == ContainerRational(1, 15))
        var b: [UInt8] = []
        var pts: [Int64] = []
        while let h = try r.readFrame(into: &b) { pts.append(h.pts) }
        #expect(pts == [0, 1, 2, 3, 4, 5])
    }
}
