import RevueCommandLine
import Testing

/// The shared parser: options from their specs, generated help, typed errors.
@Suite struct CommandSpecTests {
    static let spec = CommandSpec(
        invocation: "tool run", summary: "Runs something.", positionals: "INPUT",
        options: [
            OptionSpec("--count", value: "N", help: "how many"),
            OptionSpec("--quiet", "-q", help: "no progress"),
            OptionSpec("--peer", value: "HOST:PORT", valueIsOptional: true, help: "a peer (repeatable); alone: serve"),
        ],
        epilogue: "Exit status: 0 success.")

    @Test func parsesValuesFlagsAliasesAndPositionals() throws {
        let a = try Self.spec.parse(["in.y4m", "--count", "2k", "-q", "--peer=a:1", "--peer", "b:2", "--", "--literal"])
        #expect(a.positional == ["in.y4m", "--literal"])
        #expect(try a.int("--count") == 2000)
        #expect(a.flag("--quiet"))
        #expect(a.strings("--peer") == ["a:1", "b:2"])
        #expect(!a.flag("--peer"))
    }

    @Test func optionalValueLeftOutCountsAsAFlag() throws {
        let alone = try Self.spec.parse(["--peer"])
        #expect(alone.flag("--peer") && alone.strings("--peer").isEmpty)
        let beforeOption = try Self.spec.parse(["--peer", "--quiet"])
        #expect(beforeOption.flag("--peer") && beforeOption.flag("--quiet"))
    }

    @Test func badUsageThrowsUsageErrorsNamingTheArgument() {
        func message(_ args: [String]) -> String? {
            do { _ = try Self.spec.parse(args); return nil } catch let e as UsageError { return e.description } catch {
                return "other \(error)"
            }
        }
        #expect(message(["--colour"]) == "unknown option --colour")
        #expect(message(["--count"]) == "--count needs a value")
        #expect(message(["--quiet=yes"]) == "--quiet takes no value")
        #expect(throws: UsageError.self) { try Self.spec.parse(["--count", "many"]).int("--count") }
        #expect(throws: UsageError.self) { try Self.spec.parse(["--count", "5"]).int("--count", range: 1...3) }
    }

    @Test func helpIsGeneratedFromTheSpecs() throws {
        var text = ""
        do { _ = try Self.spec.parse(["x", "--help"]) } catch let help as HelpRequested { text = help.text }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.first == "usage: tool run INPUT [options]")
        #expect(lines.contains("Runs something."))
        #expect(lines.contains { $0.hasPrefix("  --count N") && $0.hasSuffix("how many") })
        #expect(lines.contains { $0.hasPrefix("  --quiet, -q") && $0.hasSuffix("no progress") })
        #expect(lines.contains { $0.hasPrefix("  --peer [HOST:PORT]") })
        #expect(lines.contains { $0.hasPrefix("  -h, --help") })
        #expect(lines.last == "Exit status: 0 success.")
    }

    @Test func numbersTakeSuffixes() {
        #expect(Arguments.parseNumber("1500k") == 1_500_000)
        #expect(Arguments.parseNumber("2M") == 2_000_000)
        #expect(Arguments.parseNumber("0.5G") == 500_000_000)
        #expect(Arguments.parseNumber("k") == nil)
    }
}
