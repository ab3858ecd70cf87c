import Foundation
import FuzzEntries
import Testing

/// Replays every seed (`Fuzz/corpus/<target>/`) and every input a fuzzer ever crashed on
/// (`Fuzz/crashes/<target>/`) through the same entry functions the libFuzzer targets call, in the
/// normal debug build (with Swift's bounds and overflow checks on). A parser regression traps here.
@Suite struct FuzzRegressionTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz")

    static func files(_ kind: String, _ target: String) -> [URL] {
        let dir = root.appendingPathComponent(kind).appendingPathComponent(target)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return names.filter { !$0.hasPrefix(".") }.sorted().map { dir.appendingPathComponent($0) }
    }

    static func replay(_ target: FuzzEntries.Target, _ files: [URL]) throws {
        for file in files {
            let data = try Data(contentsOf: file)
            data.withUnsafeBytes { target.run($0) }
        }
    }

    @Test(arguments: FuzzEntries.targets.map(\.name))
    func seedCorpusReplaysWithoutCrashing(target name: String) throws {
        let target = try #require(FuzzEntries.target(named: name))
        let seeds = Self.files("corpus", name)
        // An empty corpus means scripts/make-fuzz-corpus was not run or lost a target.
        #expect(seeds.count >= 2, "Fuzz/corpus/\(name) holds \(seeds.count) seeds")
        // Twice: an entry that keeps state between inputs (fuzz-srtp reuses its contexts) must
        // behave the same on a replay, or libFuzzer's crash inputs would not reproduce.
        try Self.replay(target, seeds + seeds)
    }

    @Test(arguments: FuzzEntries.targets.map(\.name))
    func crashInputsNoLongerCrash(target name: String) throws {
        let target = try #require(FuzzEntries.target(named: name))
        try Self.replay(target, Self.files("crashes", name))
    }

    @Test func everyTargetHasALibFuzzerExecutable() throws {
        for target in FuzzEntries.targets {
            let source = Self.root.appendingPathComponent(target.name).appendingPathComponent("FuzzTarget.swift")
            let text = try String(contentsOf: source, encoding: .utf8)
            #expect(text.contains("LLVMFuzzerTestOneInput"), "\(source.path) defines no LLVMFuzzerTestOneInput")
        }
    }
}
