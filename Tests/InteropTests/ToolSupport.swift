import Foundation

// Running external tools from interop tests: one process runner (with a timeout and both pipes
// drained), one temporary-directory type and one ffprobe reader, shared by every interop suite.
#if canImport(Glibc)
    import Glibc
#endif

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
