import Foundation
// revue-soak: long-running and fault runs of the engine (docs/soak.md). Not part of `make test`.
import MediaCore
import RevueCommandLine
import RevueSession

#if canImport(Glibc)
    import Glibc
#endif

let commands: [CommandSpec] = [
    CommandSpec(
        invocation: "revue-soak call", summary: "A long A/V call through the impairment relay with changing loss and jitter.",
        options: [
            OptionSpec("--minutes", value: "M", help: "length of the call (default 10)"),
            OptionSpec("--phase-seconds", value: "S", help: "length of each impairment phase (default: minutes/8, 15-45 s)"),
            OptionSpec("--rss-bound-mib", value: "N", help: "allowed RSS growth in MiB (default 8)"),
        ]),
    CommandSpec(
        invocation: "revue-soak flood", summary: "Floods HOST:PORT with forged datagrams.",
        options: [
            OptionSpec("--target", value: "HOST:PORT", help: "where to send (required)"),
            OptionSpec("--seconds", value: "S", help: "how long (default 10)"),
            OptionSpec("--rate", value: "PPS", help: "datagrams per second (default 0: as fast as possible)"),
            OptionSpec("--ssrc", value: "N", help: "an SSRC to forge packets for (repeatable)"),
        ]),
    CommandSpec(
        invocation: "revue-soak flood-test", summary: "A call while a second process floods it; checks the call survives.",
        options: [
            OptionSpec("--seconds", value: "S", help: "length of the flood (default 10)"),
            OptionSpec("--rate", value: "PPS", help: "flood datagrams per second (default 0: as fast as possible)"),
            OptionSpec("--min-share", value: "F", help: "smallest share of media that must still arrive (default 0.5)"),
        ]),
    CommandSpec(
        invocation: "revue-soak kill-test", summary: "kill -9 of a revue-node mid-call and mid-write; checks what survives.",
        options: [
            OptionSpec("--node", value: "PATH", help: "the revue-node binary (default: next to revue-soak)"),
            OptionSpec("--write-kills", value: "N", help: "kills during profile writes (default 20)"),
        ]),
]

let usage =
    "usage: revue-soak COMMAND [options]\n\ncommands:\n"
    + commands.map {
        "  " + $0.invocation.dropFirst("revue-soak ".count).padding(toLength: 12, withPad: " ", startingAt: 0) + $0.summary
    }
    .joined(separator: "\n")
    + "\n\n`revue-soak COMMAND --help` describes a command. Exit status: 0 passed, 1 failed, 2 bad usage."

let mode = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : ""
runTool("revue-soak") {
    if mode == "-h" || mode == "--help" { throw HelpRequested(text: usage) }
    guard let spec = commands.first(where: { $0.invocation == "revue-soak " + mode }) else {
        throw UsageError(description: mode.isEmpty ? "no command given" : "unknown command '\(mode)'")
    }
    let a = try spec.parse(Array(CommandLine.arguments.dropFirst(2)))
    if let extra = a.positional.first { throw UsageError(description: "unexpected argument \(extra)") }
    func double(_ name: String, _ fallback: Double) throws -> Double { try a.double(name) ?? fallback }
    do {
        switch mode {
        case "call":
            let minutes = try double("--minutes", 10)
            return try CallCommand.run(
                minutes: minutes, phaseSeconds: try double("--phase-seconds", min(45, max(15, minutes * 60 / 8))),
                rssBoundMiB: try double("--rss-bound-mib", 8))
        case "flood":
            guard let t = a.string("--target") else { throw UsageError(description: "flood needs --target HOST:PORT") }
            let target: SocketAddress
            do { target = try SocketAddress(parsing: t) } catch { throw UsageError(description: "--target \(t): \(error)") }
            let ssrcs = try a.strings("--ssrc").map { s throws(UsageError) -> UInt32 in
                guard let v = UInt32(s) else { throw UsageError(description: "--ssrc \(s): not a 32-bit number") }
                return v
            }
            return try FloodCommand.run(
                target: target, seconds: try double("--seconds", 10), rate: try a.int("--rate") ?? 0, ssrcs: ssrcs)
        case "flood-test":
            return try FloodCommand.test(
                calm: 8, flood: try double("--seconds", 10), rate: try a.int("--rate") ?? 0,
                minShare: try double("--min-share", 0.5))
        default:  // kill-test
            let node =
                a.string("--node")
                ?? URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
                .appendingPathComponent("revue-node").path
            return try KillCommand.run(node: node, writeKills: try a.int("--write-kills") ?? 20)
        }
    } catch let error as UsageError {
        throw error
    } catch {
        out("FAIL: \(error)")
        return 1
    }
}
