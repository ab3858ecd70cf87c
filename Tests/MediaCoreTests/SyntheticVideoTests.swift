import Foundation
import MediaCore
import Testing

@Suite struct SyntheticVideoTests {
    static func bytes(_ f: VideoFrame) -> [UInt8] {
        Array(UnsafeBufferPointer(start: f.y, count: f.byteCount))
    }

    @Test func sameIndexGivesSamePixels() {
        let a = VideoFrame(width: 320, height: 180), b = VideoFrame(width: 320, height: 180)
        SyntheticVideo.render(frameIndex: 17, into: a)
        SyntheticVideo.render(frameIndex: 3, into: b)
        SyntheticVideo.render(frameIndex: 17, into: b)
        #expect(Self.bytes(a) == Self.bytes(b))
    }

    // Consecutive frames differ everywhere the pattern moves: the luma PSNR between frame n and
    // n+1 stays low (< 20 dB), so encoders see real motion, and the picture has detail (luma
    // values spread over most of the range).
    @Test func consecutiveFramesMoveAndHaveDetail() {
        let a = VideoFrame(width: 640, height: 360), b = VideoFrame(width: 640, height: 360)
        for n in [0, 1, 50, 299] {
            SyntheticVideo.render(frameIndex: n, into: a)
            SyntheticVideo.render(frameIndex: n + 1, into: b)
            #expect(Quality.psnrY(a.view, b.view) < 20, "frame \(n)")
            var histogram = [Int](repeating: 0, count: 16)
            for r in 0..<360 { for c in 0..<640 { histogram[Int(a.y[r * a.strideY + c]) / 16] += 1 } }
            #expect(histogram.filter { $0 > 0 }.count >= 12, "luma spread \(histogram)")
        }
    }

    @Test(arguments: [(1280, 720), (640, 360), (176, 144), (321, 241), (80, 16)])
    func frameIndexReadsBack(_ size: (Int, Int)) {
        let f = VideoFrame(width: size.0, height: size.1)
        for n in [0, 1, 2, 255, 1000, 40_000, 65_535, 65_536 + 7] {
            SyntheticVideo.render(frameIndex: n, into: f)
            #expect(SyntheticVideo.frameIndex(in: f.view) == n & 0xFFFF, "n \(n) at \(size)")
        }
    }

    @Test func frameIndexIsNilOnOtherPictures() {
        let f = VideoFrame(width: 320, height: 180)
        #expect(SyntheticVideo.frameIndex(in: f.view) == nil)  // all black
        f.y.update(repeating: 235, count: f.strideY * 180)
        #expect(SyntheticVideo.frameIndex(in: f.view) == nil)  // all white
    }

    // The bar code survives lossy coding: VP8 at a low rate still reads back every index.
    @Test func frameIndexSurvivesVP8Coding() throws {
        let encoder = try VPXEncoder(VPXTestSupport.config(.vp8, 320, 180, bitrate: 150_000))
        let (packets, _) = try VPXTestSupport.encode(encoder, frames: 100..<110)
        let decoder = try VPXDecoder(codec: .vp8)
        let read = try packets.map { p in
            try p.data.withUnsafeBytes { try decoder.decode($0) { SyntheticVideo.frameIndex(in: $0) } }
        }
        #expect(read == (100..<110).map { Optional($0) })
    }

    @Test(arguments: [(1, 1), (2, 2), (3, 5), (17, 9), (16384, 2)])
    func tinyAndExtremeSizesRender(_ size: (Int, Int)) {
        let f = VideoFrame(width: size.0, height: size.1)
        SyntheticVideo.render(frameIndex: 12345, into: f)
        let stride = size.0 * 4
        let buf = UnsafeMutableRawPointer.allocate(byteCount: stride * size.1, alignment: 16)
        defer { buf.deallocate() }
        SyntheticVideo.renderBGRA(frameIndex: 12345, width: size.0, height: size.1, into: buf, stride: stride)
    }

    // BGRA: opaque everywhere, deterministic, bar code cells black/white where I420 has them.
    @Test func bgraHasOpaquePixelsAndTheSameBarcode() {
        let w = 640, h = 360, stride = w * 4 + 64
        let buf = UnsafeMutableRawPointer.allocate(byteCount: stride * h, alignment: 16)
        defer { buf.deallocate() }
        let n = 0b1010_0000_1111_0001
        SyntheticVideo.renderBGRA(frameIndex: n, width: w, height: h, into: buf, stride: stride)
        let px = buf.assumingMemoryBound(to: UInt8.self)
        var opaque = true
        for r in 0..<h { for c in 0..<w where px[r * stride + c * 4 + 3] != 255 { opaque = false } }
        #expect(opaque)
        let cell = min(w / 40, h / 8)
        // Cells: 1, 0, then the 16 bits MSB first.
        let expected = [true, false] + (0..<16).map { (n >> (15 - $0)) & 1 == 1 }
        for (i, bit) in expected.enumerated() {
            let o = (cell / 2) * stride + (i * cell + cell / 2) * 4
            #expect(px[o] == (bit ? 255 : 0) && px[o + 1] == px[o] && px[o + 2] == px[o], "cell \(i)")
        }
        let again = UnsafeMutableRawPointer.allocate(byteCount: stride * h, alignment: 16)
        defer { again.deallocate() }
        SyntheticVideo.renderBGRA(frameIndex: n, width: w, height: h, into: again, stride: stride)
        var same = true
        for r in 0..<h where memcmp(buf + r * stride, again + r * stride, w * 4) != 0 { same = false }
        #expect(same)
    }

    // ffmpeg converts the BGRA picture to I420 (independently of Revue) and the frame index still
    // reads back from its output.
    @Test func bgraFrameIndexReadsBackAfterFFmpegConversion() throws {
        let w = 320, h = 180, n = 4242
        let buf = UnsafeMutableRawPointer.allocate(byteCount: w * h * 4, alignment: 16)
        defer { buf.deallocate() }
        SyntheticVideo.renderBGRA(frameIndex: n, width: w, height: h, into: buf, stride: w * 4)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("synth-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("in.bgra"), output = dir.appendingPathComponent("out.yuv")
        try Data(bytes: buf, count: w * h * 4).write(to: input)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        p.arguments = [
            "-nostdin", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "bgra", "-s", "\(w)x\(h)",
            "-i", input.path, "-f", "rawvideo", "-pix_fmt", "yuv420p", "-y", output.path,
        ]
        try p.run()
        p.waitUntilExit()
        #expect(p.terminationStatus == 0)
        let yuv = try Data(contentsOf: output)
        #expect(yuv.count == w * h * 3 / 2)
        let index = yuv.withUnsafeBytes { raw -> Int? in
            let y = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
            let view = I420View(
                width: w, height: h, y: y, strideY: w, u: y + w * h, strideU: w / 2,
                v: y + w * h + w * h / 4, strideV: w / 2)
            return SyntheticVideo.frameIndex(in: view)
        }
        #expect(index == n)
    }
}
