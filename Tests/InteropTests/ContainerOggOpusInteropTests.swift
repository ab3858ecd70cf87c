import Foundation
import MediaCore
import Testing

/// Ogg Opus against opus-tools (opusenc, opusinfo, opusdec) and ffmpeg: we read what they write
/// (headers, granules, pre-skip, end trimming, every page CRC), and they accept what we write and
/// decode it to the same number of samples.
@Suite struct ContainerOggOpusInteropTests {
    /// Writes a tone WAV with our writer.
    static func writeTone(_ path: String, rate: Int, channels: Int, frames: Int) throws {
        let w = try WAVWriter(path: path, sampleRate: rate, channelCount: channels, format: .int16)
        let samples: [Int16] = (0..<(frames * channels)).map { i in
            Int16(10_000 * sin(2 * .pi * Double((i % channels) * 220 + 440) * Double(i / channels) / Double(rate)))
        }
        try w.write(samples)
        try w.finish()
    }

    /// Checks every page's CRC and structure in `bytes` independently of OggPageReader.
    static func verifyPageCRCs(_ bytes: [UInt8]) -> Int {
        var at = 0, pages = 0
        while at + 27 <= bytes.count {
            guard bytes[at..<(at + 4)].elementsEqual("OggS".utf8) else { return -1 }
            let nsegs = Int(bytes[at + 26])
            let size = 27 + nsegs + bytes[(at + 27)..<(at + 27 + nsegs)].reduce(0) { $0 + Int($1) }
            var page = Array(bytes[at..<(at + size)])
            let stored = page.span.bytes.u32(22, .little)
            page[22] = 0; page[23] = 0; page[24] = 0; page[25] = 0
            if OggCRC.checksum(page) != stored { return -1 }
            at += size
            pages += 1
        }
        return at == bytes.count ? pages : -1
    }

    /// Samples (per channel) in the WAV ffprobe sees.
    static func probedSamples(_ path: String) throws -> Int? {
        Int(try ffprobeStream(path, count: .packets)["duration_ts"] ?? "")
    }

    @Test(arguments: [("opusenc", 48_000, 2), ("opusenc", 44_100, 1), ("ffmpeg", 48_000, 2), ("ffmpeg", 16_000, 1)])
    func readsForeignFilesAndRewritesThemForOpusTools(_ producer: String, _ rate: Int, _ channels: Int) throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let wav = dir.file("in.wav"), source = dir.file("src.opus")
        let inputFrames = rate * 13 / 10  // 1.3 s: the last packet is padded and must be trimmed
        try Self.writeTone(wav, rate: rate, channels: channels, frames: inputFrames)
        let enc =
            producer == "opusenc"
            ? try runTool("opusenc", ["--quiet", wav, source])
            : try runTool("ffmpeg", ["-v", "error", "-i", wav, "-c:a", "libopus", "-y", source])
        #expect(enc.status == 0, "\(enc.stderr)")
        #expect(Self.verifyPageCRCs(dir.read("src.opus")) > 2)

        // Our reader against the file's own headers and opusdec's sample count.
        let r = try OggOpusReader(path: source)
        #expect(r.head.channelCount == channels)
        #expect(r.head.inputSampleRate == rate)
        #expect(r.head.preSkip == 312)
        #expect(r.tags.vendor.hasPrefix(producer == "opusenc" ? "libopus" : "Lavf"), "\(r.tags.vendor)")
        var packets: [([UInt8], Int)] = []
        var buffer: [UInt8] = []
        var total = 0
        var lastGranule: Int64 = 0
        while let p = try r.readPacket(into: &buffer) {
            #expect(p.granuleEnd > lastGranule)
            lastGranule = p.granuleEnd
            packets.append((buffer, p.sampleCount))
            total += p.outputSampleCount
        }
        #expect(r.finalGranule == Int64(total + r.preSkip) + r.startGranule)
        let decoded = dir.file("src.wav")
        #expect(try runTool("opusdec", ["--quiet", "--rate", "48000", "--float", source, decoded]).status == 0)
        let reference = try #require(try Self.probedSamples(decoded))
        #expect(total == reference)
        // The original duration at 48 kHz, within the resampler's rounding.
        #expect(abs(total - inputFrames * 48_000 / rate) <= 2, "\(total) vs \(inputFrames * 48_000 / rate)")

        // Rewrite with our writer; opusinfo must find nothing to complain about.
        let ours = dir.file("ours.opus")
        let w = try OggOpusWriter(
            path: ours, head: r.head,
            tags: OggOpusTags(vendor: "Revue", comments: r.tags.comments + ["TITLE=rewrite"]))
        for (bytes, samples) in packets { try w.write(bytes, sampleCount: samples) }
        try w.finish(originalSampleCount: Int64(total))
        #expect(Self.verifyPageCRCs(dir.read("ours.opus")) >= 4)
        let info = try runTool("opusinfo", [ours])
        #expect(info.status == 0)
        let report = (info.stdout + info.stderr).lowercased()
        #expect(!report.contains("warning") && !report.contains("error"), "\(info.stdout)\(info.stderr)")
        #expect(report.contains("pre-skip: 312") && report.contains("channels: \(channels)"), "\(info.stdout)")

        // opusdec decodes our file to exactly the same PCM as the original; ffmpeg to the same count.
        let again = dir.file("ours.wav")
        #expect(try runTool("opusdec", ["--quiet", "--rate", "48000", "--float", ours, again]).status == 0)
        #expect(try Self.probedSamples(again) == total)
        #expect(
            Array(dir.read("ours.wav").suffix(total * channels * 4)) == Array(dir.read("src.wav").suffix(total * channels * 4)))
        let ff = try runTool(
            "ffmpeg",
            [
                "-v", "error", "-i", ours, "-f", "s16le", "-ac", "\(channels)", "-ar", "48000",
                "-y", dir.file("ff.pcm"),
            ])
        #expect(ff.status == 0 && ff.stderr.isEmpty, "\(ff.stderr)")
        #expect(dir.read("ff.pcm").count == total * channels * 2)
        let probe = try ffprobeStream(ours, count: .packets)
        #expect(probe["codec_name"] == "opus" && probe["nb_read_packets"] == "\(packets.count)", "\(probe)")
    }

    @Test func decodersHonourThePreSkipWeWrite() throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let wav = dir.file("in.wav"), source = dir.file("src.opus")
        try Self.writeTone(wav, rate: 48_000, channels: 1, frames: 48_000)
        #expect(try runTool("opusenc", ["--quiet", wav, source]).status == 0)
        let r = try OggOpusReader(path: source)
        var packets: [([UInt8], Int)] = []
        var buffer: [UInt8] = []
        var total = 0
        while let p = try r.readPacket(into: &buffer) { packets.append((buffer, p.sampleCount)); total += p.outputSampleCount }
        // Declare a lookahead of 312 + 960 (as a codec with more delay would): one more packet skipped.
        let ours = dir.file("ours.opus")
        let w = try OggOpusWriter(path: ours, channelCount: 1, preSkip: 312 + 960, inputSampleRate: 48_000)
        w.maximumPageDuration = 9600  // 200 ms pages
        for (bytes, samples) in packets { try w.write(bytes, sampleCount: samples) }
        try w.finish(originalSampleCount: Int64(total - 960))
        let info = try runTool("opusinfo", [ours])
        #expect(info.stdout.contains("Pre-skip: 1272"), "\(info.stdout)")
        #expect(info.stdout.contains("Page duration:    200.0ms (max)"), "\(info.stdout)")
        #expect(!(info.stdout + info.stderr).lowercased().contains("warning"))
        #expect(try runTool("opusdec", ["--quiet", "--rate", "48000", ours, dir.file("d.wav")]).status == 0)
        #expect(try Self.probedSamples(dir.file("d.wav")) == total - 960)
        #expect(try OggOpusReader(path: ours).preSkip == 1272)
    }
}
