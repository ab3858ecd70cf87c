import Foundation
import MediaCore
import MediaTestSupport
import Testing

/// Conversions checked against the pure-Swift BT.601 reference in ReferenceColor.swift and
/// against ffmpeg; rotation and scaling against exact reference rotations and area averages.
@Suite struct ColorConverterTests {
    static let rgbFormats: [PixelFormat] = [.bgra, .argb, .rgba, .abgr, .rgb24]
    static let yuvFormats: [PixelFormat] = [.i420, .nv12, .nv21, .yuy2, .uyvy]

    // MARK: Helpers

    /// Converts a packed/contiguous byte array of `format` into a new frame of `dw` x `dh`.
    func convert(
        _ bytes: [UInt8], _ format: PixelFormat, _ w: Int, _ h: Int, stride: Int? = nil,
        rotation: VideoRotation = .rotation0, to size: (Int, Int)? = nil,
        converter: ColorConverter = ColorConverter()
    ) throws -> VideoFrame {
        let rotated = rotation.swapsDimensions ? (h, w) : (w, h)
        let (dw, dh) = size ?? rotated
        let frame = VideoFrame(width: dw, height: dh)
        try bytes.withUnsafeBytes { raw in
            let view =
                try stride.map { try PixelBufferView.packed(format: format, width: w, height: h, data: raw, stride: $0) }
                ?? PixelBufferView.contiguous(raw, format: format, width: w, height: h)
            try converter.convert(view, into: frame, rotation: rotation)
        }
        return frame
    }

    /// I420 -> packed RGB24 bytes through the converter (BT.601, libyuv).
    func toRGB(_ frame: VideoFrame) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: frame.width * frame.height * 3)
        try out.withUnsafeMutableBytes { raw in
            try ColorConverter().convert(frame.view, to: .rgb24, into: raw, stride: frame.width * 3)
        }
        return out
    }

    func errors(_ a: [UInt8], _ b: [UInt8]) -> (max: Int, mean: Double) {
        var maxError = 0, sum = 0
        for i in 0..<a.count { let d = abs(Int(a[i]) - Int(b[i])); maxError = max(maxError, d); sum += d }
        return (maxError, Double(sum) / Double(a.count))
    }

    // MARK: Round trips

    /// Round-trip bounds per channel for the synthetic image: (width, height, max, mean). The error
    /// is 4:2:0 subsampling of the gradients plus 8-bit rounding twice; the 33x17 image squeezes
    /// the same gradients into fewer pixels (~6 levels per pixel), so its chroma loses more.
    /// Measured: 64x48 max 7 mean 1.6; 33x17 max 13 mean 3.3.
    static let roundTripBounds: [(Int, Int, Int, Double)] = [(64, 48, 10, 2.0), (33, 17, 16, 4.0)]

    /// RGB -> I420 -> RGB for every RGB layout, at an even and an odd size, with padded strides,
    /// within `roundTripBounds`.
    @Test(arguments: rgbFormats)
    func rgbFormatsRoundTripThroughI420(format: PixelFormat) throws {
        for (w, h, maxBound, meanBound) in Self.roundTripBounds {
            let image = RGBImage.synthetic(width: w, height: h)
            let stride = w * format.bytesPerPixel + 12
            let frame = try convert(image.packed(format, stride: stride), format, w, h, stride: stride)
            let back = try toRGB(frame)
            let e = errors(back, image.pixels)
            #expect(e.max <= maxBound, "\(format) \(w)x\(h) max error \(e.max)")
            #expect(e.mean <= meanBound, "\(format) \(w)x\(h) mean error \(e.mean)")
        }
    }

    /// The byte-order mapping to libyuv's names: the same picture in every RGB layout must give
    /// the very same I420 bytes (a swapped channel would change them by tens of levels).
    @Test func everyRGBLayoutGivesIdenticalI420() throws {
        let image = RGBImage.synthetic(width: 40, height: 30)
        let reference = ReferenceI420(try convert(image.packed(.bgra, stride: 160), .bgra, 40, 30, stride: 160))
        for format in Self.rgbFormats.dropFirst() {
            let stride = 40 * format.bytesPerPixel
            let got = ReferenceI420(try convert(image.packed(format, stride: stride), format, 40, 30, stride: stride))
            // RGB24 goes through libyuv's RAW path, whose fixed-point rounding may differ by 1.
            #expect(errors(got.y + got.u + got.v, reference.y + reference.u + reference.v).max <= 1, "\(format)")
        }
    }

    /// libyuv's RGB -> I420 against the BT.601 equations: luma within 2, chroma within 3 levels.
    @Test func bgraToI420MatchesBT601Equations() throws {
        let image = RGBImage.synthetic(width: 64, height: 48)
        let got = ReferenceI420(try convert(image.packed(.bgra, stride: 256), .bgra, 64, 48, stride: 256))
        let want = image.referenceI420()
        #expect(errors(got.y, want.y).max <= 2)
        #expect(errors(got.u, want.u).max <= 3)
        #expect(errors(got.v, want.v).max <= 3)
    }

    /// YUV layouts carry the reference I420 losslessly (4:2:2 rows repeat chroma, which libyuv
    /// averages back to the same value): the converted frame must equal the reference exactly,
    /// and its RGB must match the source image within `roundTripBounds`.
    @Test(arguments: yuvFormats)
    func yuvFormatsConvertToI420Exactly(format: PixelFormat) throws {
        for (w, h, maxBound, meanBound) in Self.roundTripBounds {
            let image = RGBImage.synthetic(width: w, height: h)
            let reference = image.referenceI420()
            let frame = try convert(reference.packed(format), format, w, h)
            let got = ReferenceI420(frame)
            #expect(got.y == reference.y, "\(format) \(w)x\(h) luma")
            #expect(got.u == reference.u && got.v == reference.v, "\(format) \(w)x\(h) chroma")
            let e = errors(try toRGB(frame), image.pixels)
            #expect(e.max <= maxBound && e.mean <= meanBound, "\(format) \(w)x\(h) RGB error max \(e.max) mean \(e.mean)")
        }
    }

    /// I420 -> each RGB layout, checked byte by byte against I420 -> RGB24 repacked.
    @Test(arguments: [PixelFormat.bgra, .argb, .rgba, .abgr])
    func i420ToEachRGBLayoutWritesTheRightByteOrder(format: PixelFormat) throws {
        let image = RGBImage.synthetic(width: 24, height: 10)
        let frame = try convert(image.packed(.rgb24, stride: 72), .rgb24, 24, 10, stride: 72)
        let rgb = RGBImage(width: 24, height: 10, pixels: try toRGB(frame))
        let stride = 24 * 4 + 8
        var out = [UInt8](repeating: 0, count: stride * 10)
        try out.withUnsafeMutableBytes { try ColorConverter().convert(frame.view, to: format, into: $0, stride: stride) }
        let want = rgb.packed(format, stride: stride)
        var mismatches = 0
        for row in 0..<10 { for i in 0..<(24 * 4) where out[row * stride + i] != want[row * stride + i] { mismatches += 1 } }
        #expect(mismatches == 0)
    }

    // MARK: ffmpeg cross-check

    /// BGRA -> I420 against `ffmpeg -pix_fmt bgra ... -pix_fmt yuv420p` (swscale, BT.601 limited
    /// range by default, like libyuv). Bound: PSNR > 45 dB over all planes, luma alone > 50 dB
    /// (measured 54.7 and 59.7 dB); the small difference is fixed-point rounding and swscale's
    /// chroma filter versus libyuv's 2x2 average.
    @Test func bgraToI420AgreesWithFFmpeg() throws {
        let (w, h) = (320, 240)
        let image = RGBImage.synthetic(width: w, height: h)
        let bgra = image.packed(.bgra, stride: w * 4)
        let ours = ReferenceI420(try convert(bgra, .bgra, w, h))

        let yuv = try runFFmpeg(input: bgra, inputFormat: "bgra", outputFormat: "yuv420p", width: w, height: h)
        #expect(yuv.count == w * h * 3 / 2)
        guard yuv.count == w * h * 3 / 2 else { return }
        let theirs = ReferenceI420(
            width: w, height: h, y: Array(yuv[0..<(w * h)]),
            u: Array(yuv[(w * h)..<(w * h * 5 / 4)]), v: Array(yuv[(w * h * 5 / 4)...]))
        let psnr = ours.psnr(theirs)
        let psnrY = ours.withView { a in theirs.withView { b in Quality.psnrY(a, b) } }
        #expect(psnr > 45, "PSNR vs ffmpeg \(psnr) dB")
        #expect(psnrY > 50, "luma PSNR vs ffmpeg \(psnrY) dB")
    }

    /// I420 -> BGRA against `ffmpeg -pix_fmt yuv420p ... -pix_fmt bgra` (BT.601 limited range on
    /// both sides). Bound: PSNR of the RGB bytes > 40 dB, measured 46.4 dB (the two differ in
    /// chroma upsampling: libyuv replicates each chroma sample, swscale interpolates).
    @Test func i420ToBGRAAgreesWithFFmpeg() throws {
        let (w, h) = (320, 240)
        let i420 = RGBImage.synthetic(width: w, height: h).referenceI420()
        var ours = [UInt8](repeating: 0, count: w * h * 4)
        try i420.withView { view in
            try ours.withUnsafeMutableBytes { try ColorConverter().convert(view, to: .bgra, into: $0, stride: w * 4) }
        }
        let theirs = try runFFmpeg(input: i420.packed(.i420), inputFormat: "yuv420p", outputFormat: "bgra", width: w, height: h)
        #expect(theirs.count == w * h * 4)
        guard theirs.count == w * h * 4 else { return }
        var squared = 0.0, alphaOK = true
        for i in 0..<ours.count {
            if i % 4 == 3 { alphaOK = alphaOK && ours[i] == 255 && theirs[i] == 255; continue }
            let d = Double(Int(ours[i]) - Int(theirs[i])); squared += d * d
        }
        let psnr = Quality.psnr(mse: squared / Double(w * h * 3))
        #expect(psnr > 40, "I420->BGRA PSNR vs ffmpeg \(psnr) dB")
        #expect(alphaOK)
    }

    /// Runs ffmpeg on a raw frame in a temporary directory (removed afterwards).
    func runFFmpeg(input: [UInt8], inputFormat: String, outputFormat: String, width: Int, height: Int) throws -> [UInt8] {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-convert-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let inURL = dir.appendingPathComponent("in.raw"), outURL = dir.appendingPathComponent("out.raw")
        try Data(input).write(to: inURL)
        let ffmpeg = Process()
        ffmpeg.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        ffmpeg.arguments = [
            "-hide_banner", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", inputFormat,
            "-s", "\(width)x\(height)", "-i", inURL.path, "-pix_fmt", outputFormat, "-f", "rawvideo", outURL.path,
        ]
        try ffmpeg.run()
        ffmpeg.waitUntilExit()
        guard ffmpeg.terminationStatus == 0 else { return [] }
        return [UInt8](try Data(contentsOf: outURL))
    }

    // MARK: Rotation

    /// Rotating while converting equals converting then rotating the reference exactly (rotation
    /// is lossless), for the scratch path (BGRA), the one-pass NV12/NV21 path and I420 sources,
    /// and the destination has swapped sizes for 90 and 270.
    @Test(arguments: VideoRotation.allCases)
    func rotationMatchesReferenceRotationExactly(rotation: VideoRotation) throws {
        let (w, h) = (48, 32)
        let image = RGBImage.synthetic(width: w, height: h)
        let upright = ReferenceI420(try convert(image.packed(.bgra, stride: w * 4), .bgra, w, h))
        let expected = upright.rotated(rotation)
        let converter = ColorConverter()
        for format in [PixelFormat.bgra, .nv12, .nv21, .i420] {
            let bytes = format == .bgra ? image.packed(.bgra, stride: w * 4) : upright.packed(format)
            let frame = try convert(bytes, format, w, h, rotation: rotation, converter: converter)
            #expect(frame.width == (rotation.swapsDimensions ? h : w) && frame.height == (rotation.swapsDimensions ? w : h))
            let got = ReferenceI420(frame)
            #expect(got.y == expected.y && got.u == expected.u && got.v == expected.v, "\(format) \(rotation)")
        }
    }

    /// Known corners: a 64x32 picture with red, green, blue and white quadrants (TL, TR, BL, BR)
    /// lands where a clockwise rotation puts them.
    @Test func rotationPutsKnownCornersInPlace() throws {
        let (w, h) = (64, 32)
        var pixels = [UInt8](repeating: 0, count: w * h * 3)
        let colours: [[UInt8]] = [[255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 255]]  // TL TR BL BR
        for y in 0..<h {
            for x in 0..<w {
                let q = (y < h / 2 ? 0 : 2) + (x < w / 2 ? 0 : 1)
                for k in 0..<3 { pixels[(y * w + x) * 3 + k] = colours[q][k] }
            }
        }
        let image = RGBImage(width: w, height: h, pixels: pixels)
        // Which source quadrant appears at the destination's TL, TR, BL, BR corners.
        let expected: [VideoRotation: [Int]] = [
            .rotation0: [0, 1, 2, 3], .rotation90: [2, 0, 3, 1],
            .rotation180: [3, 2, 1, 0], .rotation270: [1, 3, 0, 2],
        ]
        for rotation in VideoRotation.allCases {
            let frame = try convert(image.packed(.rgba, stride: w * 4), .rgba, w, h, rotation: rotation)
            let rgb = try toRGB(frame)
            let fw = frame.width, fh = frame.height
            let corners = [(2, 2), (fw - 3, 2), (2, fh - 3), (fw - 3, fh - 3)]
            for (i, (x, y)) in corners.enumerated() {
                let want = colours[expected[rotation]![i]]
                let got = Array(rgb[((y * fw + x) * 3)..<((y * fw + x) * 3 + 3)])
                let close = zip(got, want).allSatisfy { abs(Int($0) - Int($1)) <= 4 }
                #expect(close, "\(rotation) corner \(i): got \(got), want \(want)")
            }
        }
    }

    // MARK: Scaling

    /// I420 box downscale against an exact area average: 2x (PSNR > 50 dB) and 1.6x (> 38 dB).
    @Test func boxDownscaleMatchesAreaAverage() throws {
        let image = RGBImage.synthetic(width: 128, height: 96)
        let source = image.referenceI420()
        for (dw, dh, bound) in [(64, 48, 50.0), (80, 60, 38.0)] {
            let frame = VideoFrame(width: dw, height: dh)
            try source.withView { try ColorConverter().scale($0, into: frame, filter: .box) }
            let psnr = ReferenceI420(frame).psnr(source.boxScaled(width: dw, height: dh))
            #expect(psnr > bound, "\(dw)x\(dh): \(psnr) dB")
        }
    }

    /// Every filter gives the requested size and a faithful picture; point sampling of a fine
    /// pattern differs from box averaging (the filter choice reaches libyuv).
    @Test func everyFilterScalesToTheRequestedSize() throws {
        let image = RGBImage.synthetic(width: 96, height: 64)
        let source = image.referenceI420()
        let reference = source.boxScaled(width: 48, height: 32)
        var outputs: [ColorConverter.ScaleFilter: ReferenceI420] = [:]
        for filter in ColorConverter.ScaleFilter.allCases {
            let frame = VideoFrame(width: 48, height: 32)
            try source.withView { try ColorConverter().scale($0, into: frame, filter: filter) }
            outputs[filter] = ReferenceI420(frame)
            #expect(outputs[filter]!.psnr(reference) > 30, "\(filter)")
        }
        // Upscale too.
        let big = VideoFrame(width: 150, height: 100)
        try source.withView { try ColorConverter().scale($0, into: big, filter: .bilinear) }
        #expect(big.width == 150 && big.height == 100)
        // A one-pixel checkerboard: box averages it to flat grey, point sampling keeps extremes.
        var checker = source
        for i in 0..<checker.y.count { checker.y[i] = ((i % 96) + (i / 96)) % 2 == 0 ? 16 : 235 }
        let point = VideoFrame(width: 48, height: 32), box = VideoFrame(width: 48, height: 32)
        try checker.withView { try ColorConverter().scale($0, into: point, filter: ColorConverter.ScaleFilter.none) }
        try checker.withView { try ColorConverter().scale($0, into: box, filter: .box) }
        #expect(point.y[0] == 16 || point.y[0] == 235)
        #expect(abs(Int(box.y[5 * box.strideY + 5]) - 126) <= 2)
    }

    /// Convert + scale + rotate in one call equals the reference pipeline: BGRA 128x96 rotated 90
    /// into 48x64 (scale 2x down after rotation) against reference box-scale then rotate.
    @Test func convertScalesAndRotatesInOneCall() throws {
        let image = RGBImage.synthetic(width: 128, height: 96)
        let upright = ReferenceI420(try convert(image.packed(.bgra, stride: 512), .bgra, 128, 96))
        let expected = upright.boxScaled(width: 64, height: 48).rotated(.rotation90)
        let converter = ColorConverter()
        for _ in 0..<2 {  // the second call reuses the scratch frames
            let frame = try convert(
                image.packed(.bgra, stride: 512), .bgra, 128, 96, rotation: .rotation90,
                to: (48, 64), converter: converter)
            #expect(frame.width == 48 && frame.height == 64)
            #expect(ReferenceI420(frame).psnr(expected) > 45)
        }
        // Scale without rotation from NV12 straight into the destination.
        let nv12 = try convert(upright.packed(.nv12), .nv12, 128, 96, to: (64, 48), converter: converter)
        #expect(ReferenceI420(nv12).psnr(upright.boxScaled(width: 64, height: 48)) > 45)
    }

    // MARK: Validation

    @Test func rejectsBadOutputBuffersAndViews() throws {
        let frame = VideoFrame(width: 32, height: 16)
        var out = [UInt8](repeating: 0, count: 32 * 16 * 4)
        let converter = ColorConverter()
        try out.withUnsafeMutableBytes { raw in
            #expect(throws: ColorConversionError.unsupportedFormat) {
                try converter.convert(frame.view, to: .nv12, into: raw, stride: 128)
            }
            #expect(throws: ColorConversionError.invalidStride) {
                try converter.convert(frame.view, to: .bgra, into: raw, stride: 127)
            }
            #expect(throws: ColorConversionError.bufferTooSmall) {
                try converter.convert(frame.view, to: .bgra, into: raw, stride: 132)
            }
            #expect(throws: ColorConversionError.missingPlane) {
                try converter.convert(
                    frame.view, to: .rgb24, into: UnsafeMutableRawBufferPointer(start: nil, count: 0), stride: 96)
            }
            try converter.convert(frame.view, to: .rgb24, into: raw, stride: 96)  // fits
        }
        var bad = frame.view
        bad.strideU = 8  // chroma rows are 16 bytes
        #expect(throws: ColorConversionError.invalidStride) {
            try converter.scale(bad, into: VideoFrame(width: 16, height: 8))
        }
        var empty = frame.view
        empty.width = 0
        #expect(throws: ColorConversionError.invalidSize) {
            try converter.scale(empty, into: VideoFrame(width: 16, height: 8))
        }
        out.withUnsafeBytes { raw in
            do throws(ColorConversionError) {
                _ = try PixelBufferView.packed(
                    format: .bgra, width: 32, height: 16,
                    data: UnsafeRawBufferPointer(rebasing: raw[0..<10]), stride: 128)
                Issue.record("accepted a 10-byte buffer")
            } catch {
                #expect(error.message.contains("10 bytes"), "message names the size: \(error)")
            }
        }
    }

    // MARK: Allocations

    /// A warm converter allocates nothing itself. Counted exactly (AllocationCounter) per path;
    /// libyuv's own per-call row buffers (filtered scaling at general ratios) are measured and
    /// bounded rather than hidden.
    @Test func allocationsPerConversion() throws {
        let (w, h) = (64, 48)
        let image = RGBImage.synthetic(width: w, height: h)
        let bgra = image.packed(.bgra, stride: w * 4)
        let nv12 = image.referenceI420().packed(.nv12)
        let converter = ColorConverter()
        let same = VideoFrame(width: w, height: h), rotated = VideoFrame(width: h, height: w)
        let small = VideoFrame(width: 40, height: 30), smallRotated = VideoFrame(width: 30, height: 40)
        let half = VideoFrame(width: 32, height: 24)
        var rgbOut = [UInt8](repeating: 0, count: w * h * 4)

        func count(_ body: () throws -> Void) throws -> Int {
            try body()  // warm: scratch frames allocated here
            return try AllocationCounter.count { for _ in 0..<10 { try body() } }  // over 10 calls
        }
        try bgra.withUnsafeBytes { b in
            try nv12.withUnsafeBytes { n in
                let bv = try PixelBufferView.contiguous(b, format: .bgra, width: w, height: h)
                let nv = try PixelBufferView.contiguous(n, format: .nv12, width: w, height: h)
                #expect(try count { try converter.convert(bv, into: same) } == 0)
                #expect(try count { try converter.convert(bv, into: rotated, rotation: .rotation90) } == 0)
                #expect(try count { try converter.convert(bv, into: rotated, rotation: .rotation270) } == 0)
                #expect(try count { try converter.convert(nv, into: rotated, rotation: .rotation90) } == 0)
                #expect(try count { try converter.convert(nv, into: same, rotation: .rotation180) } == 0)
                #expect(try count { try converter.convert(nv, into: same) } == 0)
                let toRGB = try rgbOut.withUnsafeMutableBytes { o throws -> Int in
                    try count { try converter.convert(same.view, to: .argb, into: o, stride: w * 4) }
                }
                #expect(toRGB == 0)
                converter.scaleFilter = .none
                #expect(try count { try converter.convert(bv, into: small) } == 0)
                #expect(try count { try converter.convert(bv, into: smallRotated, rotation: .rotation90) } == 0)
                #expect(try count { try converter.convert(bv, into: same, rotation: .rotation180) } == 0)
                converter.scaleFilter = .box
                // Exact 1/2, 1/4 and 3/4 ratios use libyuv's fixed-ratio kernels: no allocation.
                #expect(try count { try converter.convert(bv, into: half) } == 0)
                let quarter = VideoFrame(width: 16, height: 12)
                #expect(try count { try converter.convert(bv, into: quarter) } == 0)
                let threeQuarters = VideoFrame(width: 48, height: 36)
                #expect(try count { try converter.convert(bv, into: threeQuarters) } == 0)
                // libyuv-internal allocations, measured: its general filtered scalers malloc one row
                // buffer per plane per call (3 per I420Scale, 30 in the 10 calls counted). Documented in ColorConverter.
                let box = try count { try converter.convert(bv, into: small) }
                converter.scaleFilter = .bilinear
                let bilinear = try count { try converter.convert(bv, into: small) }
                #expect(box <= 30 && bilinear <= 30, "box \(box), bilinear \(bilinear) allocations in 10 calls")
            }
        }
    }
}
