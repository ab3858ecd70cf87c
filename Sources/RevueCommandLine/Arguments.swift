// The one command-line parser of Revue's executables (revue-media, revue-node, revue-bench,
// revue-soak): options described once as `OptionSpec`s, from which both the parsing and the
// `--help` text come; typed errors with fixed exit statuses (`runTool`).
import MediaCore

#if canImport(Glibc)
    import Glibc
#endif

/// A usage error (an unknown option, a missing or malformed value): exit status 2.
package struct UsageError: Error, CustomStringConvertible {
    package var description: String
    package init(description: String) { self.description = description }
}

/// A bad-input error (a file or stream that cannot be used): exit status 1. The message names the
/// file or argument and what is wrong with it.
package struct InputError: Error, CustomStringConvertible {
    package var description: String
    package init(description: String) { self.description = description }
}

/// `-h` or `--help` was given: print `text` on stdout, exit status 0.
package struct HelpRequested: Error {
    package var text: String
    package init(text: String) { self.text = text }
}

/// One option of a command: its name, the placeholder of its value (nil for a flag), and one line
/// of help.
package struct OptionSpec: Sendable {
    /// `--name` or `-n`.
    package var name: String
    /// Other spellings (`-q` for `--quiet`).
    package var aliases: [String]
    /// The value's placeholder in the help (`DIR`, `N`); nil for a flag.
    package var value: String?
    /// The value may be left out (the next argument starts with `-`, or there is none): then the
    /// option counts as a flag as well.
    package var valueIsOptional: Bool
    /// The line `--help` shows.
    package var help: String

    package init(_ name: String, _ aliases: String..., value: String? = nil, valueIsOptional: Bool = false, help: String) {
        self.name = name; self.aliases = aliases; self.value = value
        self.valueIsOptional = valueIsOptional; self.help = help
    }
}

/// A command (or a whole tool without subcommands): what it is called, what it does, its
/// positional arguments and its options. `help` is generated from these.
package struct CommandSpec: Sendable {
    /// How it is invoked: `revue-node`, `revue-media encode`.
    package var invocation: String
    /// One line saying what it does.
    package var summary: String
    /// The positional arguments as shown in the usage line (`INPUT -o OUTPUT`); may be empty.
    package var positionals: String
    /// The options, in the order `--help` lists them.
    package var options: [OptionSpec]
    /// Text after the option list (examples, notes); may be empty.
    package var epilogue: String

    package init(invocation: String, summary: String, positionals: String = "", options: [OptionSpec], epilogue: String = "") {
        self.invocation = invocation; self.summary = summary; self.positionals = positionals
        self.options = options; self.epilogue = epilogue
    }

    /// The `--help` text: usage line, summary, one line per option, the epilogue.
    package var help: String {
        var lines = [
            "usage: \(invocation) \(positionals.isEmpty ? "" : positionals + " ")[options]", "", summary, "", "options:",
        ]
        let shown = options.map { o in
            ([o.name] + o.aliases).joined(separator: ", ") + (o.value.map { o.valueIsOptional ? " [\($0)]" : " \($0)" } ?? "")
        }
        let width = min(32, (shown.map(\.count).max() ?? 0) + 2)
        for (o, s) in zip(options, shown) {
            lines.append("  " + s.padded(to: max(width, s.count + 2)) + o.help)
        }
        lines.append("  " + "-h, --help".padded(to: width) + "show this help")
        if !epilogue.isEmpty { lines += ["", epilogue] }
        return lines.joined(separator: "\n")
    }

    /// Parses `args` against the options; throws `HelpRequested` for `-h`/`--help`.
    package func parse(_ args: [String]) throws -> Arguments {
        if args.contains("-h") || args.contains("--help") { throw HelpRequested(text: help) }
        return try Arguments(args, spec: self)
    }
}

/// Parsed arguments of one command.
/// Thread rule: a value. Cost: a few small dictionaries.
package struct Arguments {
    /// Arguments that are not options, in order.
    package private(set) var positional: [String] = []
    private var values: [String: [String]] = [:]
    private var flags: Set<String> = []

    /// Parses `args` given the options that take a value and the flags that do not.
    package init(_ args: [String], valueOptions: Set<String>, flagOptions: Set<String>) throws(UsageError) {
        try self.init(
            args,
            options: valueOptions.map { OptionSpec($0, value: "V", help: "") }
                + flagOptions.map { OptionSpec($0, help: "") })
    }

    /// Parses `args` against a command's option specs (aliases are stored under the main name).
    package init(_ args: [String], spec: CommandSpec) throws(UsageError) {
        try self.init(args, options: spec.options)
    }

    private init(_ args: [String], options: [OptionSpec]) throws(UsageError) {
        var byName: [String: OptionSpec] = [:]
        for o in options { for n in [o.name] + o.aliases { byName[n] = o } }
        var rest = args[...]
        while let arg = rest.popFirst() {
            if arg == "--" { positional.append(contentsOf: rest); break }
            if arg.hasPrefix("-") && arg.count > 1 && Double(arg) == nil {
                var name = arg
                var inline: String?
                if let eq = arg.firstIndex(of: "="), arg.hasPrefix("--") {
                    name = String(arg[..<eq]); inline = String(arg[arg.index(after: eq)...])
                }
                guard let option = byName[name] else { throw UsageError(description: "unknown option \(name)") }
                if option.value == nil {
                    if inline != nil { throw UsageError(description: "\(name) takes no value") }
                    flags.insert(option.name)
                } else if let v = inline {
                    values[option.name, default: []].append(v)
                } else if option.valueIsOptional, rest.first.map({ $0.hasPrefix("-") }) ?? true {
                    flags.insert(option.name)
                } else {
                    guard let v = rest.popFirst() else { throw UsageError(description: "\(name) needs a value") }
                    values[option.name, default: []].append(v)
                }
            } else {
                positional.append(arg)
            }
        }
    }

    /// Whether the flag was given.
    package func flag(_ name: String) -> Bool { flags.contains(name) }
    /// The last value of an option.
    package func string(_ name: String) -> String? { values[name]?.last }
    /// Every value of a repeated option, in order.
    package func strings(_ name: String) -> [String] { values[name] ?? [] }

    /// An integer option, accepting k/M/G suffixes (1000-based): `1500k`, `2M`.
    package func int(_ name: String, range: ClosedRange<Int>? = nil) throws(UsageError) -> Int? {
        guard let raw = string(name) else { return nil }
        guard let d = Self.parseNumber(raw), d == d.rounded(), abs(d) < 9e18 else {
            throw UsageError(description: "\(name) \(raw): not a whole number")
        }
        let v = Int(d)
        if let range, !range.contains(v) {
            throw UsageError(description: "\(name) \(raw): must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return v
    }

    /// A real-number option, accepting k/M/G suffixes.
    package func double(_ name: String, range: ClosedRange<Double>? = nil) throws(UsageError) -> Double? {
        guard let raw = string(name) else { return nil }
        guard let v = Self.parseNumber(raw), v.isFinite else { throw UsageError(description: "\(name) \(raw): not a number") }
        if let range, !range.contains(v) {
            throw UsageError(description: "\(name) \(raw): must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return v
    }

    /// `WxH`, e.g. `1280x720`.
    package func size(_ name: String) throws(UsageError) -> (width: Int, height: Int)? {
        guard let raw = string(name) else { return nil }
        let parts = raw.lowercased().split(separator: "x")
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), (2...16384).contains(w), (2...16384).contains(h)
        else {
            throw UsageError(description: "\(name) \(raw): expected WIDTHxHEIGHT, each 2-16384")
        }
        return (w, h)
    }

    /// Parses a number with an optional k (1e3), M (1e6) or G (1e9) suffix.
    package static func parseNumber(_ s: String) -> Double? {
        var text = s.trimmingWhitespace
        var scale = 1.0
        switch text.last {
        case "k", "K": scale = 1e3; text.removeLast()
        case "M", "m": scale = 1e6; text.removeLast()
        case "G", "g": scale = 1e9; text.removeLast()
        default: break
        }
        guard !text.isEmpty, let v = Double(text) else { return nil }
        return v * scale
    }
}

/// Runs a tool's body and exits with Revue's statuses: the body's own status on success, 0 after
/// printing help (`HelpRequested`), 2 for a `UsageError` (with a hint to run `--help`), 1 for any
/// other error. Messages go to stderr prefixed with `tool`.
package func runTool(_ tool: String, _ body: () throws -> Int32) -> Never {
    do {
        exit(try body())
    } catch let help as HelpRequested {
        print(help.text)
        exit(0)
    } catch let error as UsageError {
        StandardStream.error("\(tool): \(error)\nrun '\(tool) --help' for usage\n")
        exit(2)
    } catch {
        StandardStream.error("\(tool): \(error)\n")
        exit(1)
    }
}
