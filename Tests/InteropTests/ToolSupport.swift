import Foundation

// Running external tools from interop tests: one process runner (with a timeout and both pipes
// drained), one temporary-directory type and one ffprobe reader, shared by every interop suite.
#if canImport(Glibc)
    import Glibc
#endif

/// The outcome of a finished process.
struct ToolRun {
    var status: Int32
    var stdout: String
    var stderr: String
    var timedOut = false
}

/// A tool the test needs is not installed.
struct ToolMissing: Error, CustomStringConvertible {
    var tool: String
    var description: String { "\(tool) is not installed: run scripts/install-deps" }
}

/// A process running in the background, both pipes drained concurrently so a chatty tool cannot
/// block on a full pipe.
final class ToolProcess: @unchecked Sendable {
    let process = Process()
    private let outPipe = Pipe(), errPipe = Pipe()
    nonisolated(unsafe) private var outData = Data(), errData = Data()
    private let group = DispatchGroup()

    /// Starts `executable` (a path, or a tool name looked up in /usr/bin, /usr/local/bin and /bin)
    /// in `cwd`.
    init(_ executable: String, _ arguments: [String], cwd: String? = nil, environment: [String: String]? = nil) throws {
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
        process.standardInput = FileHandle.nullDevice
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

    /// Sends `signal` to the process.
    func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }

    /// Waits up to `timeout` seconds (then kills it) and returns its outcome.
    func wait(timeout: Double = 60) -> ToolRun {
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
func runTool(_ tool: String, _ arguments: [String], cwd: String? = nil, timeout: Double = 60) throws -> ToolRun {
    try ToolProcess(tool, arguments, cwd: cwd).wait(timeout: timeout)
}

/// A temporary directory for one test, removed with `remove()`.
struct InteropTempDir {
    let path: String
    init() {
        let base = NSTemporaryDirectory().hasSuffix("/") ? String(NSTemporaryDirectory().dropLast()) : NSTemporaryDirectory()
        var template = Array("\(base)/revue-interop-XXXXXX".utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(p != nil, "mkdtemp failed")
        path = String(cString: p!)
    }
    func file(_ name: String) -> String { "\(path)/\(name)" }
    /// Every entry, hidden ones (temporary outputs) included.
    var contents: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted() }
    func write(_ name: String, _ bytes: [UInt8]) { FileManager.default.createFile(atPath: file(name), contents: Data(bytes)) }
    func read(_ name: String) -> [UInt8] { [UInt8](FileManager.default.contents(atPath: file(name)) ?? Data()) }
    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// What ffprobe counts while reading a file.
enum FFprobeCount { case frames, packets, nothing }

/// ffprobe's view of the first stream and the format, as flat key=value pairs (`nb_read_frames`,
/// `duration`, `format.duration`...), plus its `stderr`.
func ffprobeStream(_ path: String, count: FFprobeCount = .frames) throws -> [String: String] {
    let countFlag: [String] =
        switch count {
        case .frames: ["-count_frames"]
        case .packets: ["-count_packets"]
        case .nothing: []
        }
    let r = try runTool(
        "ffprobe",
        ["-v", "error"] + countFlag + [
            "-select_streams", "0",
            "-show_streams", "-show_format", "-of", "flat=s=_", path,
        ])
    var out: [String: String] = ["stderr": r.stderr]
    for line in r.stdout.split(separator: "\n") {
        let kv = line.split(separator: "=", maxSplits: 1)
        guard kv.count == 2 else { continue }
        var key = String(kv[0])
        if key.hasPrefix("streams_stream_0_") { key = String(key.dropFirst("streams_stream_0_".count)) }
        if key.hasPrefix("format_") { key = "format." + key.dropFirst("format_".count) }
        out[key] = kv[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
    }
    return out
}

/// Runs `script` with `/bin/sh -c`, stdout and stderr together (namespace and nftables setup).
@discardableResult
func runShell(_ script: String) -> (status: Int32, output: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/bin/sh")
    p.arguments = ["-c", script]
    let out = Pipe()
    p.standardOutput = out
    p.standardError = out
    do { try p.run() } catch { return (-1, "\(error)") }
    let data = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// Polls `condition` every 10 ms for up to `seconds`; its last value.
func pollUntil(_ seconds: Double, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(10_000)
    }
    return condition()
}

/// Reads `handle` on a thread of its own until end of file and hands `onLine` each complete line
/// (without its newline), in order. For the stdout of a peer process a test talks to by lines.
func readLines(of handle: FileHandle, _ onLine: @escaping @Sendable (String) -> Void) {
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
