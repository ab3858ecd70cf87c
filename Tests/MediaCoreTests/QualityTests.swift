import MediaCore
import Testing

@Suite struct QualityTests {
    @Test func identicalFramesHaveMaximalPSNR() {
        let a = VideoFrame(width: 33, height: 17)
        let b = VideoFrame(width: 33, height: 17)
        for i in 0..<(a.strideY * 17) { a.y[i] = UInt8(i % 251); b.y[i] = UInt8(i % 251) }
        #expect(Quality.psnr(a.view, b.view) == 100)
    }

    @Test func uniformErrorGivesKnownPSNR() {
        let a = VideoFrame(width: 64, height: 64)
        let b = VideoFrame(width: 64, height: 64)
        // Every sample of b differs by 4: MSE 16, PSNR = 10*log10(65025/16) = 36.09 dB.
        for i in 0..<(64 * 64) { b.y[i] = 4 }
        for i in 0..<(32 * b.strideUV) { b.u[i] = 4; b.v[i] = 4 }
        let p = Quality.psnr(a.view, b.view)
        #expect(abs(p - 36.0896) < 0.001)
    }

    @Test func copyPreservesContentAcrossStrides() {
        let a = VideoFrame(width: 17, height: 9)
        for r in 0..<9 { for c in 0..<17 { a.y[r * a.strideY + c] = UInt8(r * 17 + c) } }
        let b = VideoFrame(width: 17, height: 9)
        b.copy(from: a.view)
        #expect(Quality.psnrY(a.view, b.view) == 100)
        #expect(b.y[b.strideY * 8 + 16] == UInt8(8 * 17 + 16))
    }

    @Test func snrFindsCodecDelay() {
        let ref = (0..<1000).map { Float(sin(Double($0) * 0.05)) }
        let delayed = [Float](repeating: 0, count: 7) + ref
        let r = Quality.snr(reference: ref, decoded: delayed, maxLag: 20)
        #expect(r.lag == 7)
        #expect(r.snr == 100)
    }
}

#if canImport(Glibc)
    import Glibc
#endif
