// A JSON value of any shape as a Sendable, Codable value: the Janus API's requests, responses
// and events are built from and read into it, and revue-node's command ids are kept in it.
// Integers are kept exact as Int64 (Janus's identifiers are integers below 2^53).
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A JSON value. Thread rule: a value type. Cost: parsing and writing go through Foundation's
/// `JSONDecoder`/`JSONEncoder` (a few microseconds per small message).
package enum JSONValue: Sendable, Hashable, Codable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral
{
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number without fraction or exponent that fits 64 bits.
    case int(Int64)
    /// Any other number.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object.
    case object([String: JSONValue])

    /// A string literal. Cost: none.
    package init(stringLiteral value: String) { self = .string(value) }
    /// An integer literal. Cost: none.
    package init(integerLiteral value: Int64) { self = .int(value) }
    /// A Boolean literal. Cost: none.
    package init(booleanLiteral value: Bool) { self = .bool(value) }
    /// An object literal. Cost: a dictionary.
    package init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    /// An array literal. Cost: an array.
    package init(arrayLiteral elements: JSONValue...) { self = .array(elements) }

    /// Decodes any JSON value (Codable). Cost: recursive.
    package init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let i = try? c.decode(Int64.self) {
            self = .int(i)
        } else if let d = try? c.decode(Double.self) {
            self = .double(d)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([JSONValue].self) {
            self = .array(a)
        } else {
            self = .object(try c.decode([String: JSONValue].self))
        }
    }

    /// Encodes the value (Codable). Cost: recursive.
    package func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .null: try c.encodeNil()
        case .bool(let b): try c.encode(b)
        case .int(let i): try c.encode(i)
        case .double(let d): try c.encode(d)
        case .string(let s): try c.encode(s)
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    /// The value as compact UTF-8 JSON text. Cost: one encode.
    package var bytes: [UInt8] {
        // Encoding a tree of plain values cannot fail.
        (try? [UInt8](JSONEncoder().encode(self))) ?? Array("null".utf8)
    }

    /// The member `key` of an object (nil for a missing key or a non-object). Cost: a lookup.
    package subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    /// The string, if it is one. Cost: none.
    package var string: String? { if case .string(let s) = self { s } else { nil } }
    /// The integer (a whole `double` too), if it is one. Cost: none.
    package var int: Int64? {
        switch self {
        case .int(let i): i
        case .double(let d) where d.rounded() == d && abs(d) < 9.0e15: Int64(d)
        default: nil
        }
    }
    /// An unsigned identifier (sessions, handles, rooms, feeds), if the value is one. Cost: none.
    package var id: UInt64? { int.flatMap { $0 >= 0 ? UInt64($0) : nil } }
    /// The Boolean, if it is one. Cost: none.
    package var bool: Bool? { if case .bool(let b) = self { b } else { nil } }
    /// The elements, if it is an array. Cost: none.
    package var array: [JSONValue]? { if case .array(let a) = self { a } else { nil } }

    /// The value with `key` set to `value` (an object; any other value becomes one). Cost: a copy.
    package func setting(_ key: String, _ value: JSONValue) -> JSONValue {
        var o: [String: JSONValue] = [:]
        if case .object(let existing) = self { o = existing }
        o[key] = value
        return .object(o)
    }

    /// An integer (any width; clamped to 64 bits). Cost: none.
    package static func integer(_ value: some BinaryInteger) -> JSONValue { .int(Int64(clamping: value)) }
    /// A string, or `null` for nil. Cost: none.
    package static func text(_ value: String?) -> JSONValue { value.map { .string($0) } ?? .null }
    /// An array of strings. Cost: an array.
    package static func strings(_ values: [String]) -> JSONValue { .array(values.map { .string($0) }) }

    /// The value as one line of JSON text with its object keys sorted and slashes unescaped, as
    /// the tools print their events; nil when it holds a non-finite number, which JSON cannot
    /// write. Cost: one encode.
    package var sortedLine: String? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) }
    }
}
