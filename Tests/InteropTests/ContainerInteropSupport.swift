#if canImport(Glibc)
import Glibc
#endif
import Foundation
@testable import MediaCore

/// A temporary directory for one interop test, removed with `remove()`.
struct ContainerInteropTempDir {
    let path: String
    init() {
        let base = NSTemporaryDirectory().hasSuffix("/") ? String(NSTemporaryDirectory().dropLast()) : NSTemporaryDirectory()
        var template = Array("\(base)/revue-interop-XXXXXX".utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(p != nil, "mkdtemp failed")
        path = String(cString: p!)
    }
    func file(_ name: String) -> String { "\(path)/\(name)" }
    func read(_ name: String) -> [UInt8] { [UInt8](FileManager.default.contents(atPath: file(name)) ?? Data()) }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Result of running an external tool.
struct ContainerToolRun {
    var status: Int32
    var stdout: String
    var stderr: String
    var timedOut: Bool
}

/// Runs `tool` (looked up in /usr/bin, /usr/local/bin, /bin) with `arguments`; kills it after
/// `timeout` seconds.
func runContainerTool(_ tool: String, _ arguments: [String], timeout: Double = 60) throws -> ContainerToolRun {
    let dirs = ["/usr/bin", "/usr/local/bin", "/bin"]
    guard let dir = dirs.first(where: { FileManager.default.isExecutableFile(atPath: "\($0)/\(tool)") }) else {
        throw ContainerToolMissing(tool: tool)
    }
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "\(dir)/\(tool)")
    p.arguments = arguments
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    p.standardInput = FileHandle.nullDevice
    try p.run()
    // Drain both pipes concurrently so a chatty tool cannot block on a full pipe.
    nonisolated(unsafe) var outData = Data(), errData = Data()
    let group = DispatchGroup()
    group.enter()
    DispatchQueue.global().async { outData = out.fileHandleForReading.readDataToEndOfFile(); group.leave() }
    group.enter()
    DispatchQueue.global().async { errData = err.fileHandleForReading.readDataToEndOfFile(); group.leave() }
    let deadline = Date().addingTimeInterval(timeout)
    var timedOut = false
    while p.isRunning {
        if Date() > deadline { timedOut = true; kill(p.processIdentifier, SIGKILL); break }
        usleep(10_000)
    }
    p.waitUntilExit()
    group.wait()
    return ContainerToolRun(status: p.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                   stderr: String(decoding: errData, as: UTF8.self), timedOut: timedOut)
}

struct ContainerToolMissing: Error, CustomStringConvertible {
    var tool: String
    var description: String { "\(tool) is not installed: run scripts/install-deps" }
}

/// `ffprobe -show_streams -count_frames/packets` as key=value pairs of the first stream.
func containerFFprobeStream(_ path: String, countPackets: Bool = false) throws -> [String: String] {
    let r = try runContainerTool("ffprobe", ["-v", "error", countPackets ? "-count_packets" : "-count_frames",
                                    "-select_streams", "0", "-show_streams", "-show_format", "-of", "flat=s=_", path])
    var out: [String: String] = [:]
    for line in r.stdout.split(separator: "\n") {
        let kv = line.split(separator: "=", maxSplits: 1)
        guard kv.count == 2 else { continue }
        var key = String(kv[0])
        for prefix in ["streams_stream_0_", "format_"] where key.hasPrefix(prefix) {
            key = (prefix == "format_" ? "format." : "") + key.dropFirst(prefix.count)
        }
        out[key] = kv[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
    }
    out["stderr"] = r.stderr
    return out
}

/// An external tool running in the background (a receiver waiting for packets).
final class ContainerBackgroundTool: @unchecked Sendable {
    let process = Process()
    private let errPipe = Pipe()
    nonisolated(unsafe) private var errData = Data()
    private let group = DispatchGroup()

    init(_ tool: String, _ arguments: [String]) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/\(tool)") else { throw ContainerToolMissing(tool: tool) }
        process.executableURL = URL(fileURLWithPath: "/usr/bin/\(tool)")
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errPipe
        process.standardInput = FileHandle.nullDevice
        try process.run()
        group.enter()
        let handle = errPipe.fileHandleForReading
        DispatchQueue.global().async { [self] in errData = handle.readDataToEndOfFile(); group.leave() }
    }

    /// Waits up to `timeout` seconds, then kills the process. Returns exit status, stderr and
    /// whether it had to be killed.
    func wait(timeout: Double) -> ContainerToolRun {
        let deadline = Date().addingTimeInterval(timeout)
        var timedOut = false
        while process.isRunning {
            if Date() > deadline { timedOut = true; kill(process.processIdentifier, SIGKILL); break }
            usleep(10_000)
        }
        process.waitUntilExit()
        group.wait()
        return ContainerToolRun(status: process.terminationStatus, stdout: "", stderr: String(decoding: errData, as: UTF8.self),
                       timedOut: timedOut)
    }
}

/// A UDP port that was free a moment ago (bound to port 0, then released); `count` consecutive
/// ports are checked so RTP+RTCP pairs fit.
func containerFreeUDPPort(count: Int = 4) -> Int {
    for _ in 0..<50 {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
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
    for r in 0..<frame.height { out.append(contentsOf: UnsafeBufferPointer(start: frame.y + r * frame.strideY, count: frame.width)) }
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
