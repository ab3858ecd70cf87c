import Foundation
import MediaCore
import Testing

// Running the built `revue-media` binary from tests (ToolSupport.swift runs processes): where it
// is, and small readers for comparing outputs with their sources.
#if canImport(Glibc)
    import Glibc
#endif

/// Where `swift build --build-tests` put the products: next to the test bundle.
enum CLIBinary {
    static let directory: String = {
        // The test runner lives in .build/<triple>/debug/ (RevuePackageTests.xctest) like revue-media.
        var candidates: [String] = []
        if let exe = Bundle.main.executablePath { candidates.append((exe as NSString).deletingLastPathComponent) }
        candidates.append((CommandLine.arguments[0] as NSString).deletingLastPathComponent)
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
        candidates.append("\(root)/.build/debug")
        for dir in candidates {
            for d in [dir, (dir as NSString).deletingLastPathComponent]
            where FileManager.default.isExecutableFile(atPath: "\(d)/revue-media") {
                return d
            }
        }
        return "\(root)/.build/debug"
    }()
    static var path: String { "\(directory)/revue-media" }
}

/// Runs revue-media with `arguments` in `cwd` and waits for it.
func revueMedia(_ arguments: [String], cwd: String? = nil, timeout: Double = 120) throws -> ToolRun {
    try ToolProcess(CLIBinary.path, arguments, cwd: cwd).wait(timeout: timeout)
}

/// The "average" PSNR ffmpeg's psnr filter reports between two videos (inf for identical ones).
func cliFFmpegPSNR(_ a: String, _ b: String) throws -> Double? {
    let r = try runTool("ffmpeg", ["-hide_banner", "-nostats", "-i", a, "-i", b, "-lavfi", "psnr", "-f", "null", "-"])
    guard let line = r.stderr.split(separator: "\n").last(where: { $0.contains("PSNR") }),
        let range = line.range(of: "average:")
    else { return nil }
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
        var span = buf.mutableSpan
        let n = try r.read(into: &span)
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
