import Foundation
import MediaCore
import Testing

/// Y4M against ffmpeg/ffprobe, an independent reader and writer.
@Suite struct ContainerY4MInteropTests {
    @Test func ffmpegReadsOurFramesExactly() throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let path = dir.file("ours.y4m")
        let w = try Y4MWriter(path: path, width: 65, height: 37, frameRate: ContainerRational(30000, 1001))
        let f = VideoFrame(width: 65, height: 37)
        var expected: [UInt8] = []
        for i in 0..<12 { drawContainerInteropPattern(f, index: i); try w.write(f.view); expected += containerPackedI420(f) }
        try w.finish()

        let probe = try ffprobeStream(path)
        #expect(probe["codec_name"] == "rawvideo" && probe["pix_fmt"] == "yuv420p", "\(probe)")
        #expect(probe["width"] == "65" && probe["height"] == "37")
        #expect(probe["nb_read_frames"] == "12")
        #expect(probe["r_frame_rate"] == "30000/1001")
        // 12 frames at 30000/1001 fps last 0.4004 s.
        #expect(probe["duration"] == "0.400400", "\(probe)")

        let raw = dir.file("raw.yuv")
        let r = try runTool("ffmpeg", ["-v", "error", "-i", path, "-f", "rawvideo", "-pix_fmt", "yuv420p", "-y", raw])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(dir.read("raw.yuv") == expected)
    }

    @Test func readsFFmpegY4MIdenticalToItsRawFrames() throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let src = ["-v", "error", "-f", "lavfi", "-i", "testsrc=size=67x39:rate=25", "-frames:v", "5", "-pix_fmt", "yuv420p"]
        #expect(try runTool("ffmpeg", src + ["-y", dir.file("a.y4m")]).status == 0)
        #expect(try runTool("ffmpeg", src + ["-f", "rawvideo", "-y", dir.file("a.yuv")]).status == 0)
        let r = try Y4MReader(path: dir.file("a.y4m"))
        #expect(r.width == 67 && r.height == 39 && r.frameRate == ContainerRational(25, 1))
        let f = r.makeFrame()
        var got: [UInt8] = []
        while try r.readFrame(into: f) { got += containerPackedI420(f) }
        #expect(r.framesRead == 5)
        #expect(got == dir.read("a.yuv"))
    }

    @Test(arguments: [("yuv444p", "C444"), ("yuv422p", "C422"), ("gray", "Cmono")])
    func rejectsFFmpegNon420WithClearError(_ pixFmt: String, _ tag: String) throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let path = dir.file("b.y4m")
        #expect(
            try runTool(
                "ffmpeg",
                [
                    "-v", "error", "-f", "lavfi", "-i", "testsrc=size=32x32:rate=25", "-frames:v", "1",
                    "-pix_fmt", pixFmt, "-strict", "-1", "-y", path,
                ]
            ).status == 0)
        do {
            _ = try Y4MReader(path: path)
            Issue.record("accepted \(pixFmt)")
        } catch {
            #expect(error.kind == .unsupported)
            #expect(error.description.hasPrefix("\(path): unsupported chroma format \(tag)"), "\(error)")
        }
    }
}
