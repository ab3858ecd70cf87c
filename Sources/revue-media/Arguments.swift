// Command-line parsing for revue-media: options with values, flags, positional arguments, and
// numbers with k/M/G suffixes. Errors are usage errors (exit status 2) naming the argument.
import Foundation

/// A usage error: exit status 2.
struct UsageError: Error, CustomStringConvertible {
    var description: String
}

/// A bad-input error: exit status 1. The message names the file or argument and what is wrong.
struct InputError: Error, CustomStringConvertible {
    var description: String
}

/// Parsed arguments of one command.
struct Arguments {
    private(set) var positional: [String] = []
    private var values: [String: [String]] = [:]
    private var flags: Set<String> = []

    /// Parses `args` given the options that take a value and the flags that do not.
    init(_ args: [String], valueOptions: Set<String>, flagOptions: Set<String>) throws(UsageError) {
        var rest = args[...]
        while let arg = rest.popFirst() {
            if arg == "--" { positional.append(contentsOf: rest); break }
            if arg.hasPrefix("-") && arg.count > 1 {
                var name = arg
                var inline: String?
                if let eq = arg.firstIndex(of: "="), arg.hasPrefix("--") {
                    name = String(arg[..<eq]); inline = String(arg[arg.index(after: eq)...])
                }
                if valueOptions.contains(name) {
                    guard let v = inline ?? rest.popFirst() else { throw UsageError(description: "\(name) needs a value") }
                    values[name, default: []].append(v)
                } else if flagOptions.contains(name) {
                    flags.insert(name)
                } else {
                    throw UsageError(description: "unknown option \(name)")
                }
            } else {
                positional.append(arg)
            }
        }
    }

    func flag(_ name: String) -> Bool { flags.contains(name) }
    func string(_ name: String) -> String? { values[name]?.last }
    func strings(_ name: String) -> [String] { values[name] ?? [] }

    /// An integer option, accepting k/M/G suffixes (1000-based): `1500k`, `2M`.
    func int(_ name: String, range: ClosedRange<Int>? = nil) throws(UsageError) -> Int? {
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
    func double(_ name: String, range: ClosedRange<Double>? = nil) throws(UsageError) -> Double? {
        guard let raw = string(name) else { return nil }
        guard let v = Self.parseNumber(raw), v.isFinite else { throw UsageError(description: "\(name) \(raw): not a number") }
        if let range, !range.contains(v) {
            throw UsageError(description: "\(name) \(raw): must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return v
    }

    /// `WxH`, e.g. `1280x720`.
    func size(_ name: String) throws(UsageError) -> (width: Int, height: Int)? {
        guard let raw = string(name) else { return nil }
        let parts = raw.lowercased().split(separator: "x")
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), (2...16384).contains(w), (2...16384).contains(h) else {
            throw UsageError(description: "\(name) \(raw): expected WIDTHxHEIGHT, each 2-16384")
        }
        return (w, h)
    }

    /// Parses a number with an optional k (1e3), M (1e6) or G (1e9) suffix.
    static func parseNumber(_ s: String) -> Double? {
        var text = s.trimmingCharacters(in: .whitespaces)
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
