// Running external tools and servers from tests: one process runner (with a timeout and both
// pipes drained) and one temporary-directory type, shared by the interop and session suites.
import Foundation
import MediaCore

#if canImport(Glibc)
    import Glibc
#endif

/// The outcome of a finished process.
/// A Python program that clears the signal mask and execs its arguments (same pid). The test
/// process blocks most signals in the thread that spawns children, and a child inherits the mask
/// through exec: a server started directly would ignore SIGTERM. Run as `python3 -c` with it.
package let unblockSignalsAndExec =
    "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, set()); os.execv(sys.argv[1], sys.argv[1:])"

package struct ToolRun {
    package var status: Int32
    package var stdout: String
    package var stderr: String
    package var timedOut = false
}

/// A tool the test needs is not installed.
package struct ToolMissing: Error, CustomStringConvertible {
    package var tool: String
    package var description: String { "\(tool) is not installed: run scripts/install-deps" }
}

/// A process running in the background, both pipes drained concurrently so a chatty tool cannot
/// block on a full pipe.
package final class ToolProcess: @unchecked Sendable {
    package let process = Process()
    private let outPipe = Pipe(), errPipe = Pipe()
    private let inPipe: Pipe?
    nonisolated(unsafe) private var outData = Data(), errData = Data()
    private let group = DispatchGroup()

    /// Starts `executable` (a path, or a tool name looked up in /usr/bin, /usr/local/bin and /bin)
    /// in `cwd`. Its standard input is empty, or, with `keepsInputOpen`, a pipe that stays open
    /// until `closeInput()` (for tools that quit at the end of their input, such as OpenSSL's
    /// `s_client` and `s_server`).
    package init(
        _ executable: String, _ arguments: [String], cwd: String? = nil, environment: [String: String]? = nil,
        keepsInputOpen: Bool = false
    ) throws {
        var exe = executable
        if !exe.contains("/") {
            guard
                let dir = ["/usr/bin", "/usr/local/bin", "/bin"].first(where: {
                    FileManager.default.isExecutableFile(atPath: "\($0)/\(executable)")
                })
            else {
                throw ToolMissing(tool: executable)
            }
            exe = "\(dir)/\(executable)"
        }
        process.executableURL = URL(fileURLWithPath: exe)
        process.arguments = arguments
        if let cwd { process.currentDirectoryURL = URL(fileURLWithPath: cwd) }
        if let environment { process.environment = environment }
        process.standardOutput = outPipe
        process.standardError = errPipe
        inPipe = keepsInputOpen ? Pipe() : nil
        process.standardInput = inPipe ?? FileHandle.nullDevice
        try process.run()
        let o = outPipe.fileHandleForReading, e = errPipe.fileHandleForReading
        group.enter()
        DispatchQueue.global().async { [self] in
            outData = o.readDataToEndOfFile(); group.leave()
        }
        group.enter()
        DispatchQueue.global().async { [self] in
            errData = e.readDataToEndOfFile(); group.leave()
        }
    }

    /// Closes the process's standard input (with `keepsInputOpen`): it reads end of file.
    package func closeInput() { try? inPipe?.fileHandleForWriting.close() }

    /// Sends `signal` to the process.
    package func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }

    /// Waits up to `timeout` seconds (then kills it) and returns its outcome.
    package func wait(timeout: Double = 60) -> ToolRun {
        let deadline = Date().addingTimeInterval(timeout)
        var timedOut = false
        while process.isRunning {
            if Date() > deadline { timedOut = true; kill(process.processIdentifier, SIGKILL); break }
            usleep(10_000)
        }
        process.waitUntilExit()
        group.wait()
        return ToolRun(
            status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData, as: UTF8.self), timedOut: timedOut)
    }
}

/// Runs an external tool and waits for it (killed after `timeout` seconds).
package func runTool(_ tool: String, _ arguments: [String], cwd: String? = nil, timeout: Double = 60) throws -> ToolRun {
    try ToolProcess(tool, arguments, cwd: cwd).wait(timeout: timeout)
}

/// A temporary directory for one test, removed with `remove()`.
package struct InteropTempDir {
    package let path: String
    package init() {
        let base = NSTemporaryDirectory().hasSuffix("/") ? String(NSTemporaryDirectory().dropLast()) : NSTemporaryDirectory()
        var template = Array("\(base)/revue-interop-XXXXXX".utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(p != nil, "mkdtemp failed")
        path = String(cString: p!)
    }
    package func file(_ name: String) -> String { "\(path)/\(name)" }
    /// Every entry, hidden ones (temporary outputs) included.
    package var contents: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted() }
    package func write(_ name: String, _ bytes: [UInt8]) {
        _ = FileManager.default.createFile(atPath: file(name), contents: Data(bytes))
    }
    package func read(_ name: String) -> [UInt8] { [UInt8](FileManager.default.contents(atPath: file(name)) ?? Data()) }
    package func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// An even port on 127.0.0.1 free for UDP and TCP, with port+1...port+3 free for UDP as well.
/// Drawn below the kernel's ephemeral range (32768-60999 by default), so that no outgoing
/// connection or unbound socket takes it between this check and the server's bind.
/// None within 3 of a port in `taken` (ports already chosen for the same server).
package func cliFreePort(avoiding taken: [Int] = []) -> Int {
    for _ in 0..<100 {
        let port = Int.random(in: 20_000...32_000) & ~1
        let ok =
            !taken.contains(where: { abs($0 - port) < 4 }) && tcpPortIsFree(port)
            && (0..<4).allSatisfy { i in
                (try? UDPSocket(bindingTo: .loopbackIPv4(port: UInt16(port + i)))) != nil
            }
        if ok { return port }
    }
    return 27_000
}

/// Whether a TCP listener could bind 127.0.0.1:`port` now.
private func tcpPortIsFree(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var one: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    return SocketAddress.loopbackIPv4(port: UInt16(port)).withSockaddr { bind(fd, $0, $1) == 0 }
}

/// Runs `work` (a feed paced by `usleep`, anything that blocks) on a thread of its own and waits
/// for it without holding one of the concurrency pool's threads, which other tests need.
package func onOwnThread(_ work: @escaping @Sendable () -> Void) async {
    await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
        Thread {
            work(); c.resume()
        }.start()
    }
}

/// Polls `condition` every 10 ms for up to `seconds` (blocking the calling thread); true as soon
/// as it holds, else its last value.
package func pollUntil(_ seconds: Double, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(10_000)
    }
    return condition()
}

/// Reads `handle` on a thread of its own until end of file and hands `onLine` each complete line
/// (without its newline), in order. For the stdout of a peer process a test talks to by lines.
package func readLines(of handle: FileHandle, _ onLine: @escaping @Sendable (String) -> Void) {
    Thread {
        var pending = Data()
        while true {
            let chunk = handle.availableData
            if chunk.isEmpty { return }
            pending.append(chunk)
            while let nl = pending.firstIndex(of: 10) {
                onLine(String(decoding: pending[pending.startIndex..<nl], as: UTF8.self))
                pending = Data(pending[(nl + 1)...])
            }
        }
    }.start()
}

/// Waits until some process has a UDP socket bound to `port` (IPv4 or IPv6, read from
/// /proc/net/udp and /proc/net/udp6), for at most `seconds`; whether one appeared. For a test
/// that starts a receiving tool (GStreamer, ffmpeg, our CLI) before sending to it: a fixed sleep
/// is too short the first time GStreamer builds its plugin registry, and too long otherwise.
@discardableResult
package func waitForUDPListener(port: Int, seconds: Double = 10) -> Bool {
    let suffix = ":" + String(format: "%04X", port)
    let deadline = Date().addingTimeInterval(seconds)
    repeat {
        for table in ["/proc/net/udp", "/proc/net/udp6"] {
            guard let text = try? String(contentsOfFile: table, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                if fields.count > 1, fields[1].hasSuffix(suffix) { return true }
            }
        }
        usleep(10_000)
    } while Date() < deadline
    return false
}

/// Datagrams the kernel dropped because a UDP socket's receive buffer was full, machine-wide
/// (`RcvbufErrors` in /proc/net/snmp); 0 when unreadable. Read it before and after a test on
/// loopback to tell a datagram the product lost from one the kernel dropped while the receiving
/// thread was starved.
package func udpReceiveBufferErrors() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/net/snmp", encoding: .utf8) else { return 0 }
    let lines = text.split(separator: "\n").filter { $0.hasPrefix("Udp:") }
    guard lines.count >= 2 else { return 0 }
    let names = lines[0].split(separator: " "), values = lines[1].split(separator: " ")
    guard let i = names.firstIndex(of: "RcvbufErrors"), i < values.count else { return 0 }
    return Int(values[i]) ?? 0
}
