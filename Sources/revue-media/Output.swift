import MediaCore
import RevueCommandLine
import RevueSession

// Results on stdout (text or --json), messages on stderr, and the ordered JSON values both use.
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

/// A JSON value whose objects keep their key order, so `--json` output reads like the text form.
enum JSON {
    case string(String)
    case int(Int)
    case double(Double)
    case bool(Bool)
    case null
    case array([JSON])
    case object([(String, JSON)])

    /// Text with two-space indentation (or one line when `compact`).
    func rendered(compact: Bool = false, indent: String = "") -> String {
        switch self {
        case .string(let s): return JSON.quote(s)
        case .int(let v): return String(v)
        case .double(let v):
            guard v.isFinite else { return "null" }
            if v == v.rounded(), abs(v) < 1e15 { return v.fixed(1) }
            return "\(v)"
        case .bool(let v): return v ? "true" : "false"
        case .null: return "null"
        case .array(let items):
            if items.isEmpty { return "[]" }
            if compact { return "[" + items.map { $0.rendered(compact: true) }.joined(separator: ",") + "]" }
            let inner = indent + "  "
            return "[\n" + items.map { inner + $0.rendered(indent: inner) }.joined(separator: ",\n") + "\n\(indent)]"
        case .object(let fields):
            if fields.isEmpty { return "{}" }
            if compact {
                return "{" + fields.map { JSON.quote($0.0) + ":" + $0.1.rendered(compact: true) }.joined(separator: ",") + "}"
            }
            let inner = indent + "  "
            return "{\n"
                + fields.map { inner + JSON.quote($0.0) + ": " + $0.1.rendered(indent: inner) }
                .joined(separator: ",\n") + "\n\(indent)}"
        }
    }

    static func quote(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// A number rounded to `digits` decimals (for readable JSON).
    static func rounded(_ v: Double, _ digits: Int = 3) -> JSON {
        guard v.isFinite else { return .null }
        let scale = pow(10, Double(digits))
        return .double((v * scale).rounded() / scale)
    }
}

enum Console {
    /// Writes to stderr.
    static func error(_ s: String) { StandardStream.error(s.hasSuffix("\n") ? s : s + "\n") }
    /// Writes a result line to stdout and flushes (stdout may be a pipe).
    static func out(_ s: String) {
        StandardStream.output(s.hasSuffix("\n") ? s : s + "\n")
    }
}

/// Formatting helpers for result lines.
enum Format {
    /// `1.50 Mb/s`, `32.0 kb/s`.
    static func bitrate(_ bps: Double) -> String {
        if bps >= 1e6 { return "\((bps / 1e6).fixed(2)) Mb/s" }
        return "\((bps / 1e3).fixed(1)) kb/s"
    }
    /// `12.345 s`.
    static func seconds(_ s: Double) -> String { "\(s.fixed(3)) s" }
    /// A frame rate: `30`, `29.97`.
    static func rate(_ r: ContainerRational) -> String {
        r.denominator == 1 ? "\(r.numerator)" : r.doubleValue.fixed(3)
    }
}
