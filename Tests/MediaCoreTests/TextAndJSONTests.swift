// The text helpers the engine and its tools share instead of Foundation's (trimming, padding,
// fixed-point numbers) and JSON built from plain Swift values, as the tools print their events.
import Foundation
import MediaCore
import Testing

struct TextAndJSONTests {
    @Test func trimmingRemovesWhitespaceAtBothEndsOnly() {
        #expect(" \t 12 k \r\n".trimmingWhitespace == "12 k")
        #expect("x".trimmingWhitespace == "x")
        #expect(" \n\t ".trimmingWhitespace == "")
        #expect("".trimmingWhitespace == "")
        let line = "Content-Length:  42 "
        #expect(line[line.index(after: line.firstIndex(of: ":")!)...].trimmingWhitespace == "42")
    }

    @Test func paddingFillsToTheWidthAndNeverCuts() {
        #expect("ab".padded(to: 5) == "ab   ")
        #expect("abcdef".padded(to: 3) == "abcdef")
        #expect("".padded(to: 2) == "  ")
    }

    /// `fixed` against Foundation's `String(format:)`, which the tools used before.
    @Test func fixedMatchesPrintf() {
        let values: [Double] = [0, -0.0, 1, 0.05, 0.125, 2.675, -3.14159, 1e15, 123_456.789, .infinity, -.nan]
        for v in values {
            for digits in 0...3 {
                #expect(v.fixed(digits) == String(format: "%.\(digits)f", v), "\(v) with \(digits) digits")
            }
        }
    }

    @Test func jsonFromTypedValuesKeepsTypesAndSortsKeys() throws {
        let name: String? = nil
        let json: JSONValue = [
            "event": "ok", "count": .integer(3), "ssrc": .integer(UInt32.max), "ratio": .double(0.5), "on": true,
            "name": .text(name), "list": .strings(["a", "b"]), "nested": ["id": .int(7), "loss": .double(0.25)],
            "none": .null, "big": .integer(UInt64.max),
        ]
        #expect(json["count"] == .int(3) && json["ssrc"] == .int(4_294_967_295) && json["on"] == .bool(true))
        #expect(json["name"] == .null && json["none"] == .null && json["list"] == ["a", "b"])
        #expect(json["nested"]?["id"] == .int(7) && json["nested"]?["loss"] == .double(0.25))
        #expect(json["big"] == .int(.max), "clamped to 64 bits")
        let line = try #require(json.sortedLine)
        #expect(!line.contains("\n"))
        let keys = ["big", "count", "event", "list", "name", "nested", "none", "on", "ratio", "ssrc"]
        let positions = keys.map { line.range(of: "\"\($0)\"")!.lowerBound }
        #expect(positions == positions.sorted(), "keys not sorted in \(line)")
        // An independent parser reads the same tree back.
        let parsed = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(parsed["ssrc"] as? Int == 4_294_967_295 && parsed["ratio"] as? Double == 0.5)
        #expect(parsed["name"] is NSNull && (parsed["list"] as? [String]) == ["a", "b"])
    }

    @Test func jsonRefusesWhatItCannotHold() {
        #expect(JSONValue.double(.nan).sortedLine == nil)
        #expect((["path": "a/b"] as JSONValue).sortedLine == #"{"path":"a/b"}"#)
    }
}
