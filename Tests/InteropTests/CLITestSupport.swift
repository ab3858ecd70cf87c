// Running the built `revue-media` binary from tests: where it is, running it with a timeout,
// temporary directories, and small readers for comparing outputs with their sources.
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import MediaCore

/// Where `swift build --build-tests` put the products: next to the test bundle.
enum CLIBinary {
    static let directory: String = {
        // The test runner lives in .build/<triple>/debug/ (RevuePackageTests.xctest) like revue-media.
        var candidates: [String] = []
        if let exe = Bundle.main.executablePath { candidates.append((exe as NSString).deletingLastPathComponent) }
        candidates.append((CommandLine.arguments[0] as NSString).deletingLastPathComponent)
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        candidates.append("\(root)/.build/debug")
        for dir in candidates {
            for d in [dir, (dir as NSString).deletingLastPathComponent] where FileManager.default.isExecutableFile(atPath: "\(d)/revue-media") {
                return d
            }
        }
        return "\(root)/.build/debug"
    }()
    static var path: String { "\(directory)/revue-media" }
}

/// The outcome of a finished process.
struct CLIRun {
    var status: Int32
    var stdout: String
    var stderr: String
    var timedOut = false
}

/// A process running in the background, its output collected.
final class CLIProcess: @unchecked Sendable {
    let process = Process()
    private let outPipe = Pipe(), errPipe = Pipe()
    nonisolated(unsafe) private var outData = Data(), errData = Data()
    private let group = DispatchGroup()

    /// Starts `executable` (a path, or a tool name looked up in /usr/bin and /bin) in `cwd`.
    init(_ executable: String, _ arguments: [String], cwd: String? = nil, environment: [String: String]? = nil) throws {
        var exe = executable
        if !exe.contains("/") {
            guard let dir = ["/usr/bin", "/usr/local/bin", "/bin"].first(where: { FileManager.default.isExecutableFile(atPath: "\($0)/\(executable)") }) else {
                throw CLIToolMissing(tool: executable)
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
        DispatchQueue.global().async { [self] in outData = o.readDataToEndOfFile(); group.leave() }
        group.enter()
        DispatchQueue.global().async { [self] in errData = e.readDataToEndOfFile(); group.leave() }
    }

    /// Sends `signal` to the process.
    func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }

    /// Waits up to `timeout` seconds (then kills it) and returns its outcome.
    func wait(timeout: Double = 60) -> CLIRun {
        let deadline = Date().addingTimeInterval(timeout)
        var timedOut = false
        while process.isRunning {
            if Date() > deadline { timedOut = true; kill(process.processIdentifier, SIGKILL); break }
            usleep(10_000)
        }
        process.waitUntilExit()
        group.wait()
        return CLIRun(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                      stderr: String(decoding: errData, as: UTF8.self), timedOut: timedOut)
    }
}

struct CLIToolMissing: Error, CustomStringConvertible {
    var tool: String
    var description: String { "\(tool) is not installed: run scripts/install-deps" }
}

/// Runs revue-media with `arguments` in `cwd` and waits for it.
func revueMedia(_ arguments: [String], cwd: String? = nil, timeout: Double = 120) throws -> CLIRun {
    try CLIProcess(CLIBinary.path, arguments, cwd: cwd).wait(timeout: timeout)
}

/// Runs an external tool and waits for it.
func cliTool(_ tool: String, _ arguments: [String], cwd: String? = nil, timeout: Double = 60) throws -> CLIRun {
    try CLIProcess(tool, arguments, cwd: cwd).wait(timeout: timeout)
}

/// A temporary directory for one test, removed with `remove()`.
struct CLITempDir {
    let path: String
    init() {
        let base = NSTemporaryDirectory().hasSuffix("/") ? String(NSTemporaryDirectory().dropLast()) : NSTemporaryDirectory()
        var template = Array("\(base)/revue-cli-XXXXXX".utf8CString)
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

/// ffprobe's view of the first stream and the format, as flat key=value pairs
/// (`nb_read_frames`, `duration`, `format.duration`...).
func cliFFprobe(_ path: String, count: Bool = true) throws -> [String: String] {
    let r = try cliTool("ffprobe", ["-v", "error"] + (count ? ["-count_frames"] : []) + ["-select_streams", "0",
                        "-show_streams", "-show_format", "-of", "flat=s=_", path])
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

/// The "average" PSNR ffmpeg's psnr filter reports between two videos (inf for identical ones).
func cliFFmpegPSNR(_ a: String, _ b: String) throws -> Double? {
    let r = try cliTool("ffmpeg", ["-hide_banner", "-nostats", "-i", a, "-i", b, "-lavfi", "psnr", "-f", "null", "-"])
    guard let line = r.stderr.split(separator: "\n").last(where: { $0.contains("PSNR") }),
          let range = line.range(of: "average:") else { return nil }
    let value = line[range.upperBound...].split(separator: " ").first.map(String.init) ?? ""
    return value == "inf" ? .infinity : Double(value)
}

/// Our PSNR over two Y4M files frame by frame: the mean of per-frame PSNR and the frame count.
func cliY4MPSNR(_ a: String, _ b: String) throws -> (mean: Double, minimum: Double, frames: Int) {
    let ra = try Y4MReader(path: a), rb = try Y4MReader(path: b)
    let fa = ra.makeFrame(), fb = rb.makeFrame()
    var sum = 0.0, minimum = Double.infinity, n = 0
    while try ra.readFrame(into: fa), try rb.readFrame(into: fb) {
        let p = Quality.psnr(fa.view, fb.view)
        sum += p; minimum = min(minimum, p); n += 1
    }
    return (n == 0 ? 0 : sum / Double(n), minimum, n)
}

/// All samples of a WAV file as Float, interleaved.
func cliReadWAV(_ path: String) throws -> (samples: [Float], rate: Int, channels: Int) {
    let r = try WAVReader(path: path)
    var out: [Float] = []
    var buf = [Float](repeating: 0, count: 4096 * r.channelCount)
    while true {
        let n = try buf.withUnsafeMutableBufferPointer { try r.read(into: $0) }
        if n == 0 { break }
        out += buf[0..<(n * r.channelCount)]
    }
    return (out, r.sampleRate, r.channelCount)
}

/// The first channel of interleaved samples.
func cliFirstChannel(_ s: [Float], channels: Int) -> [Float] {
    channels == 1 ? s : stride(from: 0, to: s.count, by: channels).map { s[$0] }
}

/// Parses a JSON object printed on stdout.
func cliJSON(_ text: String) -> [String: Any]? {
    (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
}
