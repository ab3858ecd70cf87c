import Foundation
import RevueMedia
import Testing

/// The README's short example, kept byte-identical to the README (checked below) and run.
@Suite struct ReadmeExampleTests {
    /// Runs the example's body; returns the PSNR of every decoded frame.
    static func runExample() throws -> [Double] {
        var psnrs: [Double] = []
        func print(_ line: String) {
            if let value = line.split(separator: " ").dropLast().last.flatMap({ Double($0) }) { psnrs.append(value) }
        }
        // README-EXAMPLE-BEGIN
        var config = VPXEncoderConfiguration(codec: .vp8, width: 1280, height: 720)
        config.bitrate = 1_500_000
        let encoder = try VPXEncoder(config)
        let decoder = try VPXDecoder(codec: .vp8)
        let source = VideoFrame(width: 1280, height: 720)
        for n in 0..<30 {
            SyntheticVideo.render(frameIndex: n, into: source)
            try source.withView { picture in
                try encoder.encode(picture, pts: Int64(n) * 3000) { packet in
                    let psnr = try? packet.withBytes { try decoder.decode($0) { Quality.psnr(picture, $0) } }
                    print("frame \(n): \(packet.byteCount) bytes, PSNR \(psnr ?? 0) dB")
                }
            }
        }
        // README-EXAMPLE-END
        return psnrs
    }

    @Test func exampleDecodesEveryFrameAboveThirtyDB() throws {
        let psnrs = try Self.runExample()
        #expect(psnrs.count == 30)
        #expect(psnrs.allSatisfy { $0 > 30 }, "PSNRs: \(psnrs)")
    }

    @Test func readmeShowsExactlyThisExample() throws {
        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let source = try String(contentsOf: here, encoding: .utf8)
        func normalise(_ lines: some Sequence<Substring>) -> [String] {
            lines.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        let begin = try #require(source.range(of: "// README-EXAMPLE-BEGIN\n"))
        let end = try #require(source.range(of: "        // README-EXAMPLE-END"))
        let example = normalise(source[begin.upperBound..<end.lowerBound].split(separator: "\n"))
        let start = try #require(readme.range(of: "A short example"))
        let block = try #require(readme.range(of: "```swift\n", range: start.upperBound..<readme.endIndex))
        let close = try #require(readme.range(of: "```", range: block.upperBound..<readme.endIndex))
        let shown = normalise(readme[block.upperBound..<close.lowerBound].split(separator: "\n"))
        #expect(shown.first == "import RevueMedia")
        #expect(Array(shown.dropFirst()) == example)
    }
}
