/// Objective quality measures used by tests, the demo and benchmarks to compare decoded media
/// with its source. Thread rule: pure functions. Cost: one pass over the samples.
public enum Quality {
    /// Mean squared error between two planes of `width` x `height` bytes.
    /// Cost: one pass; traps when a span is shorter than its plane.
    public static func meanSquaredError(
        _ a: Span<UInt8>, _ strideA: Int, _ b: Span<UInt8>, _ strideB: Int, width: Int, height: Int
    )
        -> Double
    {
        guard width > 0 && height > 0 else { return 0 }
        precondition(
            a.count >= strideA * (height - 1) + width && b.count >= strideB * (height - 1) + width, "plane shorter than its size")
        return a.withUnsafeBufferPointer { pa in
            b.withUnsafeBufferPointer { pb in
                meanSquaredError(pa.baseAddress!, strideA, pb.baseAddress!, strideB, width: width, height: height)
            }
        }
    }

    /// `meanSquaredError(_:_:_:_:width:height:)` over raw planes, for the engine's own callers.
    package static func meanSquaredError(
        _ a: UnsafePointer<UInt8>, _ strideA: Int,
        _ b: UnsafePointer<UInt8>, _ strideB: Int,
        width: Int, height: Int
    ) -> Double {
        var sum: UInt64 = 0
        for row in 0..<height {
            let ra = a + row * strideA, rb = b + row * strideB
            var rowSum: UInt64 = 0
            for col in 0..<width {
                let d = Int(ra[col]) - Int(rb[col])
                rowSum &+= UInt64(d * d)
            }
            sum &+= rowSum
        }
        return Double(sum) / Double(max(1, width * height))
    }

    /// PSNR in dB of 8-bit samples for a mean squared error; 100 for identical inputs.
    public static func psnr(mse: Double) -> Double {
        mse <= 1e-10 ? 100 : 10 * log10(255.0 * 255.0 / mse)
    }

    /// PSNR in dB over all three planes of two I420 images of the same size (the weighting ffmpeg's
    /// `psnr` filter reports as "average": total squared error over total samples).
    public static func psnr(_ a: I420View, _ b: I420View) -> Double {
        precondition(a.width == b.width && a.height == b.height, "PSNR of different sizes")
        let ySamples = Double(a.width * a.height)
        let cSamples = Double(a.chromaWidth * a.chromaHeight)
        let y = meanSquaredError(a.y, a.strideY, b.y, b.strideY, width: a.width, height: a.height)
        let u = meanSquaredError(a.u, a.strideU, b.u, b.strideU, width: a.chromaWidth, height: a.chromaHeight)
        let v = meanSquaredError(a.v, a.strideV, b.v, b.strideV, width: a.chromaWidth, height: a.chromaHeight)
        return psnr(mse: (y * ySamples + (u + v) * cSamples) / (ySamples + 2 * cSamples))
    }

    /// PSNR in dB of the luma planes only.
    public static func psnrY(_ a: I420View, _ b: I420View) -> Double {
        psnr(mse: meanSquaredError(a.y, a.strideY, b.y, b.strideY, width: a.width, height: a.height))
    }

    /// Signal-to-noise ratio in dB of `decoded` against `reference` (same length), after finding
    /// the best alignment within `maxLag` samples (codecs add delay). Returns the SNR and the lag.
    public static func snr(reference: [Float], decoded: [Float], maxLag: Int = 0) -> (snr: Double, lag: Int) {
        var best = (snr: -Double.infinity, lag: 0)
        for lag in 0...max(0, maxLag) {
            let n = min(reference.count, decoded.count - lag)
            guard n > 0 else { break }
            var signal = 0.0, noise = 0.0
            for i in 0..<n {
                let r = Double(reference[i]), d = Double(decoded[i + lag])
                signal += r * r
                noise += (r - d) * (r - d)
            }
            let value = noise <= 1e-20 ? 100 : 10 * log10(signal / noise)
            if value > best.snr { best = (value, lag) }
        }
        return best
    }
}

#if canImport(Glibc)
    import Glibc
#endif
