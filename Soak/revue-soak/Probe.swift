// Process and socket measurements of a soak run: RSS and thread count from /proc/self, and the
// kernel's per-socket drop counter from /proc/net/udp.
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

enum Probe {
    /// Resident set size in KiB (VmRSS of /proc/self/status).
    static func rssKiB() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return -1 }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? -1
        }
        return -1
    }

    /// Threads of this process (entries of /proc/self/task).
    static func threads() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? -1
    }

    /// Datagrams the kernel dropped for the IPv4 UDP socket bound to `port` (receive buffer full):
    /// the last column of /proc/net/udp.
    static func kernelDrops(port: UInt16) -> Int {
        guard let text = try? String(contentsOfFile: "/proc/net/udp", encoding: .utf8) else { return -1 }
        let hex = String(format: "%04X", port)
        for line in text.split(separator: "\n").dropFirst() {
            let f = line.split(separator: " ", omittingEmptySubsequences: true)
            guard f.count >= 13, f[1].hasSuffix(":" + hex) else { continue }
            return Int(f[f.count - 1]) ?? -1
        }
        return -1
    }

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// A failed soak assertion: printed, and the process exits 1.
struct SoakFailure: Error, CustomStringConvertible { var description: String }

func log(_ s: String) { FileHandle.standardError.write(Data((s + "\n").utf8)) }
func out(_ s: String) { FileHandle.standardOutput.write(Data((s + "\n").utf8)) }
