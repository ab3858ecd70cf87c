// revue-bench: every hot path measured side by side with its anchor (see docs/performance.md).
//   revue-bench [SUITE ...|all] [--reps N] [--warmup N] [--json FILE] [--svg DIR] [--svg-from FILE --svg DIR] [--list]
import Foundation
import MediaCore
#if canImport(Glibc)
import Glibc
#endif

func fail(_ message: String, status: Int32 = 2) -> Never {
    FileHandle.standardError.write(Data("revue-bench: \(message)\n".utf8))
    exit(status)
}

#if DEBUG
fail("refusing to report figures from a debug build; use `swift run -c release revue-bench`")
#else
var options = BenchOptions()
var jsonPath: String?
var svgDir: String?
var svgFrom: String?
var wanted: [String] = []
var args = Array(CommandLine.arguments.dropFirst())[...]
while let arg = args.popFirst() {
    switch arg {
    case "--reps": guard let v = args.popFirst().flatMap(Int.init), v > 0 else { fail("--reps needs a positive number") }; options.repetitions = v
    case "--warmup": guard let v = args.popFirst().flatMap(Int.init), v >= 0 else { fail("--warmup needs a number") }; options.warmup = v
    case "--scale": guard let v = args.popFirst().flatMap(Double.init), v > 0 else { fail("--scale needs a positive number") }; options.scale = v
    case "--json": guard let v = args.popFirst() else { fail("--json needs a file") }; jsonPath = v
    case "--svg": guard let v = args.popFirst() else { fail("--svg needs a directory") }; svgDir = v
    case "--svg-from":  // redraw the charts of an earlier --json run into the --svg directory, measuring nothing
        guard let v = args.popFirst() else { fail("--svg-from needs a JSON file") }; svgFrom = v
    case "--list": print(Suites.all.map(\.name).joined(separator: "\n")); exit(0)
    case "-h", "--help":
        print("usage: revue-bench [SUITE ...|all] [--reps N] [--warmup N] [--scale F] [--json FILE] [--svg DIR] [--svg-from FILE --svg DIR] [--list]\nsuites: \(Suites.all.map(\.name).joined(separator: ", "))")
        exit(0)
    default:
        if arg.hasPrefix("-") { fail("unknown option \(arg)") }
        wanted.append(arg)
    }
}
if let svgFrom {
    guard let svgDir else { fail("--svg-from needs --svg DIR") }
    do {
        let records = try JSONDecoder().decode([BenchRecord].self, from: Data(contentsOf: URL(fileURLWithPath: svgFrom)))
        let files = try SVGChart.write(records: records, to: svgDir)
        print("wrote \(files.count) charts to \(svgDir) from \(svgFrom)")
    } catch { fail("--svg-from \(svgFrom): \(error)") }
    exit(0)
}
if wanted.isEmpty || wanted == ["all"] { wanted = Suites.all.map(\.name) }
let reporter = Reporter()
print("revue-bench on \(Machine.current.cpuModel), \(Machine.current.cores) cores, kernel \(Machine.current.kernel); \(options.repetitions) repetitions, interleaved with the anchor")
reporter.printHeader()
for name in wanted {
    guard let suite = Suites.all.first(where: { $0.name == name }) else { fail("unknown suite '\(name)'; try --list") }
    do { try suite.run(reporter, options) } catch { fail("suite \(name) failed: \(error)", status: 1) }
}
if let jsonPath { try reporter.writeJSON(to: jsonPath); print("wrote \(jsonPath)") }
if let svgDir { let files = try SVGChart.write(records: reporter.records, to: svgDir); print("wrote \(files.count) charts to \(svgDir)") }
#endif
