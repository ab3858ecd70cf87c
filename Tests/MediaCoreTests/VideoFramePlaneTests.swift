import MediaCore
import Testing

@Suite struct VideoFramePlaneTests {
    /// Pixels written through `withMutablePlanes` are what `withView` then shows, for an odd size
    /// (chroma rounds up); each span ends at the last row's last pixel.
    @Test func writtenPlanesReadBackThroughTheView() {
        let frame = VideoFrame(width: 37, height: 21)
        let (cw, ch) = (frame.chromaWidth, frame.chromaHeight)
        #expect(cw == 19 && ch == 11)
        let counts = frame.withMutablePlanes { y, u, v in
            for row in 0..<21 { for col in 0..<37 { y[row * frame.strideY + col] = UInt8(truncatingIfNeeded: row * 7 + col) } }
            for row in 0..<ch {
                for col in 0..<cw {
                    u[row * frame.strideUV + col] = UInt8(truncatingIfNeeded: 100 + row + col)
                    v[row * frame.strideUV + col] = UInt8(truncatingIfNeeded: 200 - row - col)
                }
            }
            return (y.count, u.count, v.count)
        }
        #expect(counts.0 == frame.strideY * 20 + 37)
        #expect(counts.1 == frame.strideUV * 10 + 19 && counts.2 == counts.1)
        var mismatches = 0
        frame.withView { view in
            view.withPlanes { y, u, v in
                for row in 0..<21 {
                    for col in 0..<37 where y[row * view.strideY + col] != UInt8(truncatingIfNeeded: row * 7 + col) {
                        mismatches += 1
                    }
                }
                for row in 0..<ch {
                    for col in 0..<cw {
                        if u[row * view.strideU + col] != UInt8(truncatingIfNeeded: 100 + row + col) { mismatches += 1 }
                        if v[row * view.strideV + col] != UInt8(truncatingIfNeeded: 200 - row - col) { mismatches += 1 }
                    }
                }
            }
        }
        #expect(mismatches == 0)
    }
}
