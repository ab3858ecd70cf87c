// revue-bench: every hot path measured side by side with its anchor (see docs/performance.md).
//   revue-bench --help lists the options.
import Foundation
import MediaCore
import RevueCommandLine

#if canImport(Glibc)
    import Glibc
#endif

func fail(_ message: String, status: Int32 = 2) -> Never {
    FileHandle.standardError.write(Data("revue-bench: \(message)\n".utf8))
    exit(status)
}

let spec = CommandSpec(
    invocation: "revue-bench", summary: "Measures every hot path side by side with its anchor (docs/performance.md).",
    positionals: "[SUITE ...|all]",
    options: [
        OptionSpec("--reps", value: "N", help: "repetitions of each case, interleaved with the anchor"),
        OptionSpec("--warmup", value: "N", help: "unmeasured repetitions first"),
        OptionSpec("--scale", value: "F", help: "multiplies each case's work (0.2: a fifth)"),
        OptionSpec("--json", value: "FILE", help: "write every record as JSON"),
        OptionSpec("--svg", value: "DIR", help: "draw the charts into DIR"),
        OptionSpec(
            "--svg-from", value: "FILE", help: "redraw the charts of an earlier --json run into --svg DIR, measuring nothing"),
        OptionSpec("--list", help: "print the suite names"),
    ],
    epilogue: "suites: \(Suites.all.map(\.name).joined(separator: ", "))")

var options = BenchOptions()
var jsonPath: String?
var svgDir: String?
var svgFrom: String?
var wanted: [String] = []
do {
    let a = try spec.parse(Array(CommandLine.arguments.dropFirst()))
    if a.flag("--list") { print(Suites.all.map(\.name).joined(separator: "\n")); exit(0) }
    if let v = try a.int("--reps", range: 1...1_000_000) { options.repetitions = v }
    if let v = try a.int("--warmup", range: 0...1_000_000) { options.warmup = v }
    if let v = try a.double("--scale") {
        guard v > 0 else { throw UsageError(description: "--scale needs a positive number") }
        options.scale = v
    }
    jsonPath = a.string("--json")
    svgDir = a.string("--svg")
    options.svgDirectory = svgDir
    svgFrom = a.string("--svg-from")
    if svgFrom != nil && svgDir == nil { throw UsageError(description: "--svg-from needs --svg DIR") }
    wanted = a.positional
    for name in wanted where name != "all" && !Suites.all.contains(where: { $0.name == name }) {
        throw UsageError(description: "unknown suite '\(name)'; try --list")
    }
} catch {
    runTool("revue-bench") { throw error }
}
#if DEBUG
    fail("refusing to report figures from a debug build; use `swift run -c release revue-bench`")
#else
    if let svgFrom {
        guard let svgDir else { fail("--svg-from needs --svg DIR") }  // checked above
        do {
            let records = try JSONDecoder().decode([BenchRecord].self, from: Data(contentsOf: URL(fileURLWithPath: svgFrom)))
            let files = try SVGChart.write(records: records, to: svgDir)
            print("wrote \(files.count) charts to \(svgDir) from \(svgFrom)")
        } catch { fail("--svg-from \(svgFrom): \(error)", status: 1) }
        exit(0)
    }
    // "all" runs `congestion` once, not again scenario by scenario.
    if wanted.isEmpty || wanted == ["all"] { wanted = Suites.all.map(\.name).filter { !$0.hasPrefix("congestion-") } }
    let reporter = Reporter()
    print(
        "revue-bench on \(Machine.current.cpuModel), \(Machine.current.cores) cores, kernel \(Machine.current.kernel); \(options.repetitions) repetitions, interleaved with the anchor"
    )
    reporter.printHeader()
    for name in wanted {
        guard let suite = Suites.all.first(where: { $0.name == name }) else { fail("unknown suite '\(name)'; try --list") }
        do { try suite.run(reporter, options) } catch { fail("suite \(name) failed: \(error)", status: 1) }
    }
    if let jsonPath { try reporter.writeJSON(to: jsonPath); print("wrote \(jsonPath)") }
    if let svgDir {
        let files = try SVGChart.write(records: reporter.records, to: svgDir); print("wrote \(files.count) charts to \(svgDir)")
    }
#endif
