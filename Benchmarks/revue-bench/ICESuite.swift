// The ICE layer on the media path: a call leg sends every packet through its `ICESendPath` (the
// selected pair, read under a lock per packet), against `sendto` on a bare socket to the same
// address. Both loops send the same 1200-byte datagram to a loopback socket nobody reads (the
// kernel drops them there), on one thread, measured in thread CPU time.
import MediaCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

enum ICEBenchSuite {
    static func threadCPUNs() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        let packets = max(2000, Int(200_000 * options.scale))
        let sink = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        defer { sink.close() }
        let destination = try sink.localAddress()
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        defer { socket.close() }
        let path = ICESendPath(.direct(destination))
        let payload = [UInt8](repeating: 0x80, count: 1200)
        try payload.withUnsafeBytes { bytes in
            try compare(reporter, options, suite: "ice", case: "send 1200B via selected pair (direct)", metric: "packets/CPU-s",
                        unit: "1/s", higherIsBetter: true, anchorName: "sendto on a bare socket") {
                let t0 = threadCPUNs()
                for _ in 0..<packets { path.send(bytes, on: socket) }
                return Double(packets) / (Double(threadCPUNs() - t0) / 1e9)
            } anchor: {
                let t0 = threadCPUNs()
                for _ in 0..<packets { _ = try? socket.send(bytes, to: destination) }
                return Double(packets) / (Double(threadCPUNs() - t0) / 1e9)
            }
        }
    }
}
