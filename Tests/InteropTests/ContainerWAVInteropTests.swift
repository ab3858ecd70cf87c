import Foundation
import MediaCore
import Testing

/// WAV against ffmpeg/ffprobe: they read what we write sample-exactly; we read what they write
/// (plain, WAVE_FORMAT_EXTENSIBLE, RF64, streamed to a pipe).
@Suite struct ContainerWAVInteropTests {
    static func tone(frames: Int, channels: Int) -> [Int16] {
        (0..<(frames * channels)).map { i in
            let t = Double(i / channels) / 48_000
            return Int16(12_000 * sin(2 * .pi * (i % channels == 0 ? 440 : 660) * t))
        }
    }

    @Test(arguments: [(WAVSampleFormat.int16, 1), (.int16, 2), (.float32, 1), (.float32, 2)])
    func ffmpegReadsOurWAVExactly(_ format: WAVSampleFormat, _ channels: Int) throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let path = dir.file("ours.wav")
        let frames = 22_050
        let samples = Self.tone(frames: frames, channels: channels)
        let w = try WAVWriter(path: path, sampleRate: 22_050, channelCount: channels, format: format)
        try w.write(samples)
        try w.finish()

        let probe = try ffprobeStream(path, count: .packets)
        #expect(probe["codec_name"] == (format == .int16 ? "pcm_s16le" : "pcm_f32le"), "\(probe)")
        #expect(probe["channels"] == "\(channels)" && probe["sample_rate"] == "22050")
        #expect(probe["duration_ts"] == "\(frames)", "\(probe)")
        #expect(probe["duration"] == "1.000000")
        #expect(probe["stderr"] == "")

        let r = try runTool("ffmpeg", ["-v", "error", "-i", path, "-f", "s16le", "-y", dir.file("raw.pcm")])
        #expect(r.status == 0 && r.stderr.isEmpty, "\(r.stderr)")
        let raw = dir.read("raw.pcm")
        var expected: [UInt8] = []
        for s in samples { expected.appendU16(UInt16(bitPattern: s), .little) }
        #expect(raw == expected)
    }

    /// Reads a WAV fully as Int16.
    static func readAll(_ path: String) throws -> (WAVReader, [Int16]) {
        let r = try WAVReader(path: path)
        var buffer = [Int16](repeating: 0, count: 4096)
        var all: [Int16] = []
        while true {
            var span = buffer.mutableSpan
            let n = try r.read(into: &span)
            if n == 0 { break }
            all += buffer[0..<(n * r.channelCount)]
        }
        return (r, all)
    }

    @Test(arguments: [
        ("pcm_s16le", 1, 8_000, [String]()),  // plain PCM
        ("pcm_f32le", 2, 44_100, []),  // ffmpeg writes float as WAVE_FORMAT_EXTENSIBLE
        ("pcm_s16le", 2, 96_000, []),  // > 48 kHz: extensible too
        ("pcm_s16le", 2, 48_000, ["-rf64", "always"]),  // RF64 with ds64
    ])
    func readsFFmpegWAVs(_ codec: String, _ channels: Int, _ rate: Int, _ extra: [String]) throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let src = [
            "-v", "error", "-f", "lavfi", "-i", "sine=frequency=500:sample_rate=\(rate):duration=0.5",
            "-ac", "\(channels)", "-metadata", "title=odd length title",
        ]
        #expect(try runTool("ffmpeg", src + extra + ["-c:a", codec, "-y", dir.file("a.wav")]).status == 0)
        #expect(try runTool("ffmpeg", src + ["-f", "s16le", "-y", dir.file("a.pcm")]).status == 0)
        let (r, samples) = try Self.readAll(dir.file("a.wav"))
        #expect(r.channelCount == channels && r.sampleRate == rate)
        #expect(r.sampleFormat == (codec == "pcm_s16le" ? .int16 : .float32))
        #expect(r.frameCount == Int64(rate / 2))
        var expected: [Int16] = []
        let raw = dir.read("a.pcm")
        for i in stride(from: 0, to: raw.count, by: 2) { expected.append(Int16(bitPattern: raw.span.bytes.u16(i, .little))) }
        if codec == "pcm_s16le" {
            #expect(samples == expected)
        } else {
            // ffmpeg's float -> s16 conversion and ours may round differently by one step.
            #expect(samples.count == expected.count)
            #expect(zip(samples, expected).allSatisfy { abs(Int($0) - Int($1)) <= 1 })
        }
    }

    @Test func readsAWAVStreamedThroughAPipe() throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        // Written to a pipe, ffmpeg cannot seek back to fill in the sizes.
        let r = try runTool(
            "sh", ["-c", "ffmpeg -v error -f lavfi -i sine=sample_rate=16000:duration=0.25 -f wav - > '\(dir.file("p.wav"))'"])
        #expect(r.status == 0)
        let (reader, samples) = try Self.readAll(dir.file("p.wav"))
        #expect(samples.count == 4000)
        #expect(reader.framesRead == 4000)
    }

    @Test(arguments: [
        ("pcm_s24le", 1, "unsupported sample format: 24-bit PCM"),
        ("pcm_u8", 1, "unsupported sample format: 8-bit PCM"),
        ("pcm_s16le", 6, "6 channels are not supported (only mono and stereo)"),
    ])
    func rejectsWhatWeDoNotHandleClearly(_ codec: String, _ channels: Int, _ text: String) throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let path = dir.file("x.wav")
        #expect(
            try runTool(
                "ffmpeg",
                [
                    "-v", "error", "-f", "lavfi", "-i", "sine=duration=0.1", "-ac", "\(channels)",
                    "-c:a", codec, "-y", path,
                ]
            ).status == 0)
        do {
            _ = try WAVReader(path: path)
            Issue.record("accepted \(codec) x\(channels)")
        } catch {
            #expect(error.kind == .unsupported)
            #expect(error.description == "\(path): \(text)" || error.description.hasPrefix("\(path): \(text)"), "\(error)")
        }
    }
}
