import CMediaShims
import Foundation
// Capture conversion: ColorConverter (what BufferCapturer.capture runs) against the bare libyuv call.
import MediaCore

enum ConvertSuite {
    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        for (w, h) in [(1280, 720), (1920, 1080)] {
            let frames = max(10, Int(Double(w == 1280 ? 400 : 200) * options.scale))
            let out = VideoFrame(width: w, height: h)
            let converter = ColorConverter()
            for format in [PixelFormat.bgra, .nv12] {
                let size = PixelBufferView.byteCount(for: format, width: w, height: h)
                let source = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 64)
                defer { source.deallocate() }
                if format == .bgra {
                    SyntheticVideo.renderBGRA(frameIndex: 1, width: w, height: h, into: source.baseAddress!, stride: w * 4)
                } else {
                    for i in 0..<size { source[i] = UInt8(truncatingIfNeeded: i &* 7 &+ i >> 11) }
                }
                let view = try PixelBufferView.contiguous(UnsafeRawBufferPointer(source), format: format, width: w, height: h)
                let s = source.baseAddress!.assumingMemoryBound(to: UInt8.self)
                try compare(
                    reporter, options, suite: "convert", case: "\(format)->I420 \(w)x\(h)", metric: "frames/s", unit: "1/s",
                    higherIsBetter: true, anchorName: format == .bgra ? "ARGBToI420" : "NV12ToI420"
                ) {
                    let t0 = nowNs()
                    for _ in 0..<frames { try converter.convert(view, into: out) }
                    return Double(frames) / (Double(nowNs() - t0) / 1e9)
                } anchor: {
                    let t0 = nowNs()
                    for _ in 0..<frames {
                        if format == .bgra {
                            _ = ARGBToI420(
                                s, Int32(w * 4), out.y, Int32(out.strideY), out.u, Int32(out.strideUV), out.v,
                                Int32(out.strideUV),
                                Int32(w), Int32(h))
                        } else {
                            _ = NV12ToI420(
                                s, Int32(w), s + w * h, Int32(w), out.y, Int32(out.strideY), out.u, Int32(out.strideUV),
                                out.v, Int32(out.strideUV), Int32(w), Int32(h))
                        }
                    }
                    return Double(frames) / (Double(nowNs() - t0) / 1e9)
                }
            }
        }
    }
}
