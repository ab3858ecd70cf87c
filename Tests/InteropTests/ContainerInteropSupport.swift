import Foundation
import MediaCore

#if canImport(Glibc)
    import Glibc
#endif

/// The I420 planes of `frame` packed without padding, as rawvideo yuv420p.
func containerPackedI420(_ frame: VideoFrame) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(frame.width * frame.height * 3 / 2 + 4)
    for r in 0..<frame.height {
        out.append(contentsOf: UnsafeBufferPointer(start: frame.y + r * frame.strideY, count: frame.width))
    }
    for plane in [frame.u, frame.v] {
        for r in 0..<frame.chromaHeight {
            out.append(contentsOf: UnsafeBufferPointer(start: plane + r * frame.strideUV, count: frame.chromaWidth))
        }
    }
    return out
}

/// Draws a deterministic moving gradient into `frame`.
func drawContainerInteropPattern(_ frame: VideoFrame, index: Int) {
    for r in 0..<frame.height {
        for c in 0..<frame.width { frame.y[r * frame.strideY + c] = UInt8(truncatingIfNeeded: r * 3 + c * 2 + index * 7) }
    }
    for r in 0..<frame.chromaHeight {
        for c in 0..<frame.chromaWidth {
            frame.u[r * frame.strideUV + c] = UInt8(truncatingIfNeeded: 128 + r - c + index)
            frame.v[r * frame.strideUV + c] = UInt8(truncatingIfNeeded: 64 + r + c * 3 - index)
        }
    }
}
