import Foundation
// The README's CLI examples, run exactly as written: every ```sh block of the "The CLI" section
// is run with `sh -e` in a fresh directory, with the built revue-media first on PATH.
import Testing

@Suite(.serialized) struct READMECLITests {
    /// The ```sh blocks of the README section titled "The CLI".
    static func examples() throws -> [String] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        guard let start = text.range(of: "\n## The CLI\n") else { return [] }
        let rest = text[start.upperBound...]
        let section = rest.range(of: "\n## ").map { rest[..<$0.lowerBound] } ?? rest
        var blocks: [String] = []
        var current: [Substring]?
        for line in section.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line.trimmingCharacters(in: .whitespaces) == "```sh" { current = []; continue }
            if current != nil, line.trimmingCharacters(in: .whitespaces) == "```" {
                blocks.append(current!.joined(separator: "\n")); current = nil; continue
            }
            current?.append(line)
        }
        return blocks
    }

    @Test func theSectionHasExamples() throws {
        let blocks = try Self.examples()
        #expect(blocks.count >= 3)
        #expect(blocks.allSatisfy { $0.contains("revue-media") })
    }

    @Test(arguments: try examples())
    func exampleRunsAsWritten(_ script: String) throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        var env = ProcessInfo.processInfo.environment
        env["PATH"] = CLIBinary.directory + ":" + (env["PATH"] ?? "/usr/bin:/bin")
        let p = try ToolProcess("sh", ["-e", "-c", script], cwd: dir.path, environment: env)
        let r = p.wait(timeout: 60)
        #expect(
            r.status == 0 && !r.timedOut,
            "README example failed (\(r.status)):\n\(script)\nstdout: \(r.stdout)\nstderr: \(r.stderr)")
        #expect(!r.stdout.isEmpty)
    }
}
