import Foundation
import MediaCore
import Testing

@Suite struct VPXDecoderTests {
    /// A minimal IVF writer for these tests (the real one lives in Containers/): 32-byte file header,
    /// then per frame a 12-byte header (size, 64-bit pts) and the frame.
    static func ivf(_ packets: [VPXTestPacket], codec: VPXCodec, width: Int, height: Int) -> Data {
        var d = Data()
        func le16(_ v: Int) { d.append(contentsOf: [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)]) }
        func le32(_ v: Int) { for i in 0..<4 { d.append(UInt8(v >> (8 * i) & 0xFF)) } }
        d.append(contentsOf: Array("DKIF".utf8)); le16(0); le16(32)
        d.append(contentsOf: Array(codec.fourCC.utf8)); le16(width); le16(height)
        le32(30); le32(1); le32(packets.count); le32(0)
        for (i, p) in packets.enumerated() {
            le32(p.data.count); le32(i); le32(0)
            d.append(contentsOf: p.data)
        }
        return d
    }

    /// Runs a tool, returns its exit status (output discarded).
    static func run(_ tool: String, _ args: [String]) throws -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = args
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        p.waitUntilExit()
        return p.terminationStatus
    }

    static func makeTempDir() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("vpx-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    // Our decoder and two independent ones (libvpx's vpxdec CLI and ffmpeg's own VP8/VP9
    // decoders) must produce identical pictures: VP8/VP9 decoding is exactly specified. The
    // pictures must also be close to the source (> 30 dB).
    @Test(arguments: VPXCodec.allCases)
    func independentDecodersProduceIdenticalPictures(_ codec: VPXCodec) throws {
        let w = 640, h = 360, count = 15
        let encoder = try VPXEncoder(VPXTestSupport.config(codec, w, h, bitrate: 1_000_000))
        let (packets, _) = try VPXTestSupport.encode(encoder, frames: 0..<count)
        let dir = try Self.makeTempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let ivfURL = dir.appendingPathComponent("in.ivf")
        try Self.ivf(packets, codec: codec, width: w, height: h).write(to: ivfURL)

        let vpxdecOut = dir.appendingPathComponent("vpxdec.yuv").path
        let ffmpegOut = dir.appendingPathComponent("ffmpeg.yuv").path
        #expect(try Self.run("/usr/bin/vpxdec", ["--i420", "-o", vpxdecOut, ivfURL.path]) == 0)
        #expect(
            try Self.run(
                "/usr/bin/ffmpeg",
                [
                    "-nostdin", "-loglevel", "error", "-i", ivfURL.path,
                    "-fps_mode", "passthrough", "-f", "rawvideo",
                    "-pix_fmt", "yuv420p", "-y", ffmpegOut,
                ]) == 0)
        let frameSize = w * h * 3 / 2
        let outputs = [
            try Data(contentsOf: URL(fileURLWithPath: vpxdecOut)),
            try Data(contentsOf: URL(fileURLWithPath: ffmpegOut)),
        ]
        for out in outputs { #expect(out.count == frameSize * count) }

        let decoder = try VPXDecoder(codec: codec)
        let source = VideoFrame(width: w, height: h)
        for (i, p) in packets.enumerated() {
            try p.data.withUnsafeBytes { bytes in
                _ = try decoder.decode(bytes) { ours in
                    SyntheticVideo.render(frameIndex: p.index, into: source)
                    #expect(Quality.psnr(ours, source.view) > 30)
                    for out in outputs where out.count >= (i + 1) * frameSize {
                        out.withUnsafeBytes { raw in
                            let y = raw.baseAddress!.assumingMemoryBound(to: UInt8.self) + i * frameSize
                            let theirs = I420View(
                                width: w, height: h, y: y, strideY: w,
                                u: y + w * h, strideU: w / 2,
                                v: y + w * h + w * h / 4, strideV: w / 2)
                            #expect(Quality.psnr(ours, theirs) == 100, "frame \(i) differs")
                        }
                    }
                }
            }
        }
    }

    // The base temporal layer alone (every 4th frame of a 3-layer stream) is a valid stream for
    // ffmpeg's own decoder too, and its pictures equal ours bit for bit.
    @Test(arguments: VPXCodec.allCases)
    func baseLayerSubstreamDecodesIdenticallyInFFmpeg(_ codec: VPXCodec) throws {
        let w = 320, h = 180
        var config = VPXTestSupport.config(codec, w, h, bitrate: 500_000)
        config.temporalLayers = 3
        let encoder = try VPXEncoder(config)
        let base = try VPXTestSupport.encode(encoder, frames: 0..<24).packets.filter { $0.layer == 0 }
        #expect(base.map(\.index) == [0, 4, 8, 12, 16, 20])
        let dir = try Self.makeTempDir()
        defer { try? FileManager.default.removeItem(at: dir) }
        let ivfURL = dir.appendingPathComponent("tl0.ivf"), out = dir.appendingPathComponent("tl0.yuv")
        try Self.ivf(base, codec: codec, width: w, height: h).write(to: ivfURL)
        #expect(
            try Self.run(
                "/usr/bin/ffmpeg",
                [
                    "-nostdin", "-loglevel", "error", "-i", ivfURL.path,
                    "-fps_mode", "passthrough", "-f", "rawvideo",
                    "-pix_fmt", "yuv420p", "-y", out.path,
                ]) == 0)
        let theirs = try Data(contentsOf: out)
        let frameSize = w * h * 3 / 2
        #expect(theirs.count == frameSize * base.count)
        let decoder = try VPXDecoder(codec: codec)
        for (i, p) in base.enumerated() where theirs.count >= (i + 1) * frameSize {
            let psnr = try p.data.withUnsafeBytes { bytes in
                try decoder.decode(bytes) { ours in
                    theirs.withUnsafeBytes { raw -> Double in
                        let y = raw.baseAddress!.assumingMemoryBound(to: UInt8.self) + i * frameSize
                        return Quality.psnr(
                            ours,
                            I420View(
                                width: w, height: h, y: y, strideY: w,
                                u: y + w * h, strideU: w / 2,
                                v: y + w * h * 5 / 4, strideV: w / 2))
                    }
                }
            }
            #expect(psnr == 100, "base-layer frame \(p.index)")
        }
    }

    // A truncated frame, garbage, and an empty buffer are errors, never crashes; the decoder
    // then waits for a keyframe and recovers on it.
    @Test(arguments: VPXCodec.allCases)
    func truncatedOrGarbageFrameThrowsAndKeyframeRecovers(_ codec: VPXCodec) throws {
        let encoder = try VPXEncoder(VPXTestSupport.config(codec, 320, 180, bitrate: 500_000))
        let (packets, _) = try VPXTestSupport.encode(encoder, frames: 0..<6, forceKeyframeAt: [4])
        let decoder = try VPXDecoder(codec: codec)
        _ = try packets[0].data.withUnsafeBytes { try decoder.decode($0) { _ in () } }
        #expect(!decoder.awaitingKeyframe)

        let truncated = Array(packets[1].data.prefix(packets[1].data.count / 3))
        let e1 = #expect(throws: VPXError.self) {
            try truncated.withUnsafeBytes { try decoder.decode($0) { _ in () } }
        }
        print("\(codec) truncated inter frame: \(e1.map { String(describing: $0) } ?? "-")")
        #expect(decoder.awaitingKeyframe)

        var garbage = [UInt8](repeating: 0, count: 500)
        var state: UInt32 = 12345
        for i in garbage.indices { state = state &* 1_103_515_245 &+ 12345; garbage[i] = UInt8(state >> 24) }
        garbage[0] &= 0xFE  // VP8: claim to be a keyframe so the decoder really parses it
        if codec == .vp9 { garbage[0] = 0x82 }  // VP9: valid frame marker, profile 0, keyframe bit
        #expect(throws: VPXError.self) {
            try garbage.withUnsafeBytes { try decoder.decode($0) { _ in () } }
        }
        #expect(throws: VPXError.corruptFrame) {
            try [UInt8]().withUnsafeBytes { try decoder.decode($0) { _ in () } }
        }
        // Inter frame while awaiting a keyframe: refused.
        #expect(throws: VPXError.missingReference) {
            try packets[2].data.withUnsafeBytes { try decoder.decode($0) { _ in () } }
        }
        // The keyframe at 4 recovers, and the next inter frame decodes again.
        let source = VideoFrame(width: 320, height: 180)
        for p in packets[4...] {
            let psnr = try p.data.withUnsafeBytes { bytes in
                try decoder.decode(bytes) { view in
                    SyntheticVideo.render(frameIndex: p.index, into: source)
                    return Quality.psnr(view, source.view)
                }
            }
            #expect((psnr ?? 0) > 30)
        }

        // A fresh decoder given a truncated keyframe: also an error.
        let fresh = try VPXDecoder(codec: codec)
        let cut = Array(packets[0].data.prefix(packets[0].data.count / 2))
        let e2 = #expect(throws: VPXError.self) {
            try cut.withUnsafeBytes { try fresh.decode($0) { _ in () } }
        }
        print("\(codec) truncated keyframe: \(e2.map { String(describing: $0) } ?? "-")")
    }

    @Test(arguments: VPXCodec.allCases)
    func lostFrameMakesInterFramesWaitForKeyframe(_ codec: VPXCodec) throws {
        let encoder = try VPXEncoder(VPXTestSupport.config(codec, 320, 180, bitrate: 500_000))
        let (packets, _) = try VPXTestSupport.encode(encoder, frames: 0..<6, forceKeyframeAt: [5])
        let decoder = try VPXDecoder(codec: codec)
        // A new decoder needs a keyframe first.
        #expect(throws: VPXError.missingReference) {
            try packets[1].data.withUnsafeBytes { try decoder.decode($0) { _ in () } }
        }
        for p in packets[0..<2] { _ = try p.data.withUnsafeBytes { try decoder.decode($0) { _ in () } } }
        decoder.frameLost()  // frame 2 lost
        #expect(decoder.awaitingKeyframe)
        for p in packets[3..<5] {
            #expect(throws: VPXError.missingReference) {
                try p.data.withUnsafeBytes { try decoder.decode($0) { _ in () } }
            }
        }
        let shown = try packets[5].data.withUnsafeBytes { try decoder.decode($0) { SyntheticVideo.frameIndex(in: $0) } }
        #expect(shown == 5)
        #expect(!decoder.awaitingKeyframe)
        #expect(decoder.decodedFrameCount == 3)
        // The decoder reads the same bitstream quantizer the encoder reported.
        #expect(decoder.lastQuantizer == packets[5].quantizer)
    }

    @Test(arguments: VPXCodec.allCases)
    func peekReadsKeyframeSizeAndRejectsGarbage(_ codec: VPXCodec) throws {
        let encoder = try VPXEncoder(VPXTestSupport.config(codec, 352, 288, bitrate: 500_000))
        let (packets, _) = try VPXTestSupport.encode(encoder, frames: 0..<2)
        let key = try packets[0].data.withUnsafeBytes { try VPXDecoder.peekStreamInfo($0, codec: codec) }
        #expect(key == VPXStreamInfo(isKeyframe: true, width: 352, height: 288))
        let inter = try packets[1].data.withUnsafeBytes { try VPXDecoder.peekStreamInfo($0, codec: codec) }
        #expect(!inter.isKeyframe)
        // VP8: keyframe bit clear but no start code 9d 01 2a; VP9: frame marker bits wrong.
        let bad: [UInt8] =
            codec == .vp8
            ? [0x10, 0x02, 0x00, 0x11, 0x22, 0x33, 0x40, 0x01, 0xF0, 0x00]
            : [0x00, 0x00, 0x00, 0x00, 0x00, 0x00]
        #expect(throws: VPXError.self) { try bad.withUnsafeBytes { try VPXDecoder.peekStreamInfo($0, codec: codec) } }
        #expect(throws: VPXError.corruptFrame) {
            try [UInt8]().withUnsafeBytes { try VPXDecoder.peekStreamInfo($0, codec: codec) }
        }
    }

    // Odd sizes: chroma is rounded up; the decoder reports the exact display size.
    @Test(arguments: VPXCodec.allCases)
    func oddSizeRoundTripKeepsSize(_ codec: VPXCodec) throws {
        let encoder = try VPXEncoder(VPXTestSupport.config(codec, 321, 241, bitrate: 600_000))
        let (packets, _) = try VPXTestSupport.encode(encoder, frames: 0..<5)
        let psnrs = try VPXTestSupport.decodePSNR(packets, codec: codec)
        #expect(psnrs.count == 5 && psnrs.allSatisfy { $0 > 30 }, "\(psnrs)")
    }

    @Test func errorDescriptionNamesCodeAndDetail() {
        let e = VPXError(rawValue: VPXError.corruptFrame.rawValue, detail: "vp8 frame of 12 bytes")
        #expect(e == .corruptFrame)
        #expect(e != .unsupportedBitstream)
        #expect(e.description.contains("vp8 frame of 12 bytes"))
        #expect(VPXError.invalidParameter.description.lowercased().contains("invalid"))
        #expect(VPXError.missingReference.description.contains("Reference"))
    }
}
