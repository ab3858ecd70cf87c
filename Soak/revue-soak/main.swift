// revue-soak: long-running and fault runs of the engine (docs/soak.md). Not part of `make test`.
import MediaCore
import RevueSession
import Foundation
#if canImport(Glibc)
import Glibc
#endif

let usage = """
    usage: revue-soak call [--minutes M] [--phase-seconds S] [--rss-bound-mib N]
           revue-soak flood --target HOST:PORT --seconds S [--rate PPS] [--ssrc N]...
           revue-soak flood-test [--seconds S] [--rate PPS] [--min-share F]
           revue-soak kill-test [--node PATH] [--write-kills N]
    """

let mode = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : ""
let args = Array(CommandLine.arguments.dropFirst(2))
func values(_ name: String) -> [String] {
    let args = Array(CommandLine.arguments.dropFirst(2))
    var r: [String] = []
    var i = 0
    while i < args.count - 1 { if args[i] == name { r.append(args[i + 1]); i += 2 } else { i += 1 } }
    return r
}
func double(_ name: String, _ d: Double) -> Double { values(name).last.flatMap(Double.init) ?? d }

do {
    let status: Int32
    switch mode {
    case "call":
        status = try CallCommand.run(minutes: double("--minutes", 10), phaseSeconds: double("--phase-seconds", min(45, max(15, double("--minutes", 10) * 60 / 8))),
                                     rssBoundMiB: double("--rss-bound-mib", 8))
    case "flood":
        guard let t = values("--target").last else { log(usage); exit(2) }
        status = try FloodCommand.run(target: try SocketAddress(parsing: t), seconds: double("--seconds", 10),
                                      rate: Int(double("--rate", 0)), ssrcs: values("--ssrc").compactMap { UInt32($0) })
    case "flood-test":
        status = try FloodCommand.test(calm: 8, flood: double("--seconds", 10), rate: Int(double("--rate", 0)),
                                       minShare: double("--min-share", 0.5))
    case "kill-test":
        let node = values("--node").last
            ?? URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("revue-node").path
        status = try KillCommand.run(node: node, writeKills: Int(double("--write-kills", 20)))
    default:
        log(usage); exit(2)
    }
    exit(status)
} catch {
    out("FAIL: \(error)")
    exit(1)
}
