import Foundation

@testable import MediaCore

#if canImport(Glibc)
    import Glibc
#endif

/// A UDP port that was free a moment ago (bound to port 0, then released); `count` consecutive
/// ports are checked so RTP+RTCP pairs fit.
func containerFreeUDPPort(count: Int = 4) -> Int {
    for _ in 0..<50 {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        _ = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        close(fd)
        let port = Int(UInt16(bigEndian: addr.sin_port))
        if port % 2 == 0 && port + count < 65536 { return port }
    }
    return 47_000
}

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
