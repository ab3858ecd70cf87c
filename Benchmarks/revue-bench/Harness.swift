// The measuring method of revue-bench: warm-up, then N repetitions with ours and the anchor
// interleaved (A B A B ...) so machine drift hits both, and per-pair ratios.
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Monotonic nanoseconds.
func nowNs() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Summary statistics of a list of samples.
struct Summary: Codable {
    var min: Double
    var median: Double
    var p99: Double
    var max: Double
    var mean: Double

    init(_ values: [Double]) {
        let s = values.sorted()
        precondition(!s.isEmpty)
        min = s[0]
        median = Summary.percentile(s, 0.5)
        p99 = Summary.percentile(s, 0.99)
        max = s[s.count - 1]
        mean = s.reduce(0, +) / Double(s.count)
    }

    static func percentile(_ sorted: [Double], _ p: Double) -> Double {
        let rank = p * Double(sorted.count - 1)
        let lo = Int(rank.rounded(.down)), hi = Swift.min(sorted.count - 1, lo + 1)
        let frac = rank - Double(lo)
        return sorted[lo] * (1 - frac) + sorted[hi] * frac
    }
}

/// Machine facts recorded with every result.
struct Machine: Codable {
    var cores: Int
    var cpuModel: String
    var kernel: String

    static let current: Machine = {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model =
            cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { String($0.split(separator: ":", maxSplits: 1).last ?? "").trimmingCharacters(in: .whitespaces) } ?? "unknown"
        var u = utsname()
        uname(&u)
        let release = withUnsafeBytes(of: &u.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return Machine(cores: ProcessInfo.processInfo.activeProcessorCount, cpuModel: model, kernel: release)
    }()
}

/// One line of results: ours against an anchor for one metric.
struct BenchRecord: Codable {
    var suite: String
    var `case`: String
    var metric: String
    var unit: String
    /// Median of ours.
    var ours: Double
    /// Median of the anchor (nil when a case has no anchor).
    var anchor: Double?
    var anchorName: String?
    /// Median of per-pair ratios ours/anchor.
    var ratio: Double?
    /// min/median/p99 of the per-pair ratios (each repetition of ours over the anchor run right
    /// after it), nil without an anchor.
    var ratioSummary: Summary?
    /// Whether a bigger figure is better (throughput) or worse (time).
    var higherIsBetter: Bool
    var repetitions: Int
    var oursSummary: Summary
    var anchorSummary: Summary?
    var machine: Machine
}

/// Options shared by all suites.
struct BenchOptions {
    var repetitions = 5
    var warmup = 1
    /// Scale factor for per-repetition work (1 = default sizes; smaller for a quick look).
    var scale = 1.0
    /// `--svg DIR`: where suites that draw their own charts (congestion) put them.
    var svgDirectory: String?
}

/// Collects records and prints them as a table.
final class Reporter {
    private(set) var records: [BenchRecord] = []

    func add(_ r: BenchRecord) {
        records.append(r)
        printRow(r)
    }

    func printHeader() {
        print(
            pad("suite", 10) + pad("case", 40) + pad("metric", 18) + lpad("ours min", 10) + lpad("median", 10) + lpad("p99", 10)
                + lpad("anchor", 10) + lpad("ratio", 7) + lpad("pairs min-max", 15) + "  anchor name")
    }

    private func printRow(_ r: BenchRecord) {
        let anchor = r.anchor.map { fmt($0) } ?? "-"
        let ratio = r.ratio.map { String(format: "%.3f", $0) } ?? "-"
        let spread = r.ratioSummary.map { String(format: "%.3f-%.3f", $0.min, $0.max) } ?? "-"
        let metric = r.metric == r.unit ? r.metric : "\(r.metric) (\(r.unit))"
        print(
            pad(r.suite, 10) + pad(r.case, 40) + pad(metric, 18) + lpad(fmt(r.oursSummary.min), 10) + lpad(fmt(r.ours), 10)
                + lpad(fmt(r.oursSummary.p99), 10) + lpad(anchor, 10) + lpad(ratio, 7) + lpad(spread, 15) + "  "
                + (r.anchorName ?? ""))
        fflush(nil)
    }

    private func fmt(_ v: Double) -> String {
        if v == 0 { return "0" }
        if abs(v) >= 1000 { return String(format: "%.0f", v) }
        if abs(v) >= 10 { return String(format: "%.1f", v) }
        return String(format: "%.3f", v)
    }
    private func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s + " " : s + String(repeating: " ", count: n - s.count) }
    private func lpad(_ s: String, _ n: Int) -> String { s.count >= n ? " " + s : String(repeating: " ", count: n - s.count) + s }

    func writeJSON(to path: String) throws {
        let enc = JSONEncoder()
        enc.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = try enc.encode(records)
        let url = URL(fileURLWithPath: path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url, options: .atomic)
    }
}

/// Runs `ours` and `anchor` alternately, `warmup` times unmeasured then `repetitions` measured,
/// each returning the figure of one repetition (e.g. frames per second), and records the result.
func compare(
    _ reporter: Reporter, _ options: BenchOptions,
    suite: String, case name: String, metric: String, unit: String, higherIsBetter: Bool,
    anchorName: String?, ours: () throws -> Double, anchor: (() throws -> Double)?
) throws {
    for _ in 0..<options.warmup {
        _ = try ours()
        if let anchor { _ = try anchor() }
    }
    var a: [Double] = [], b: [Double] = [], ratios: [Double] = []
    for _ in 0..<options.repetitions {
        let x = try ours()
        a.append(x)
        if let anchor {
            let y = try anchor()
            b.append(y)
            if y != 0 { ratios.append(x / y) }
        }
    }
    let sa = Summary(a)
    let sb = b.isEmpty ? nil : Summary(b)
    reporter.add(
        BenchRecord(
            suite: suite, case: name, metric: metric, unit: unit,
            ours: sa.median, anchor: sb?.median, anchorName: anchor == nil ? nil : anchorName,
            ratio: ratios.isEmpty ? nil : Summary(ratios).median, ratioSummary: ratios.isEmpty ? nil : Summary(ratios),
            higherIsBetter: higherIsBetter,
            repetitions: options.repetitions, oursSummary: sa, anchorSummary: sb, machine: .current))
}

/// Records a figure that has no anchor (e.g. a latency percentile).
func record(
    _ reporter: Reporter, _ options: BenchOptions, suite: String, case name: String,
    metric: String, unit: String, higherIsBetter: Bool, values: [Double]
) {
    let s = Summary(values)
    reporter.add(
        BenchRecord(
            suite: suite, case: name, metric: metric, unit: unit, ours: s.median,
            anchor: nil, anchorName: nil, ratio: nil, ratioSummary: nil, higherIsBetter: higherIsBetter,
            repetitions: values.count, oursSummary: s, anchorSummary: nil, machine: .current))
}
