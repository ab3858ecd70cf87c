import Foundation
import MediaCore
import Testing

@Suite struct WAVTests {
    /// A hand-built WAV: RIFF header, the given chunks, sizes filled in.
    static func wav(_ chunks: [(String, [UInt8])], riffSize: UInt32? = nil) -> [UInt8] {
        var body: [UInt8] = Array("WAVE".utf8)
        for (id, data) in chunks {
            body.append(contentsOf: id.utf8); body.appendU32(UInt32(data.count), .little); body += data
            if data.count & 1 == 1 { body.append(0) }
        }
        var out: [UInt8] = Array("RIFF".utf8)
        out.appendU32(riffSize ?? UInt32(body.count), .little)
        return out + body
    }

    static func fmt(tag: UInt16, channels: Int, rate: Int, bits: Int, extensibleSubformat: UInt16? = nil) -> [UInt8] {
        var f: [UInt8] = []
        f.appendU16(extensibleSubformat == nil ? tag : 0xFFFE, .little); f.appendU16(UInt16(channels), .little)
        f.appendU32(UInt32(rate), .little); f.appendU32(UInt32(rate * channels * bits / 8), .little)
        f.appendU16(UInt16(channels * bits / 8), .little); f.appendU16(UInt16(bits), .little)
        if let sub = extensibleSubformat {
            f.appendU16(22, .little); f.appendU16(UInt16(bits), .little); f.appendU32(channels == 1 ? 4 : 3, .little)
            f.appendU16(sub, .little)
            f += [0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71]
        }
        return f
    }

    static func pcm16(_ samples: [Int16]) -> [UInt8] {
        var d: [UInt8] = []
        for s in samples { d.appendU16(UInt16(bitPattern: s), .little) }
        return d
    }

    @Test(arguments: [(WAVSampleFormat.int16, 1), (.int16, 2), (.float32, 1), (.float32, 2)])
    func roundTripsSamplesExactly(_ format: WAVSampleFormat, _ channels: Int) throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let path = dir.file("a.wav")
        let w = try WAVWriter(path: path, sampleRate: 44_100, channelCount: channels, format: format)
        let frames = 10_000
        let ints: [Int16] = (0..<(frames * channels)).map { Int16(truncatingIfNeeded: $0 &* 37 &- 20_000) }
        // Int16 through the span form, Float through the array form: both sample types land.
        try w.write(ints.span.extracting(0..<(4000 * channels)))
        try w.write(ints[(4000 * channels)...].map { WAVConvert.toFloat($0) })
        try w.finish()
        let bytes = dir.read("a.wav")
        #expect(bytes.count == (format == .int16 ? 44 : 58) + frames * channels * format.bytesPerSample)
        #expect(bytes.span.bytes.u32(4, .little) == UInt32(bytes.count - 8))

        let r = try WAVReader(path: path)
        #expect(r.sampleRate == 44_100 && r.channelCount == channels && r.sampleFormat == format)
        #expect(r.frameCount == Int64(frames))
        var asInt = [Int16](repeating: 0, count: 3000 * channels)
        var collected: [Int16] = []
        while true {
            var span = asInt.mutableSpan
            let n = try r.read(into: &span)
            if n == 0 { break }
            collected += asInt[0..<(n * channels)]
        }
        #expect(collected == ints)
        #expect(r.framesRead == Int64(frames))

        let r2 = try WAVReader(path: path)
        var asFloat = [Float](repeating: 0, count: frames * channels + 10)
        var floatSpan = asFloat.mutableSpan
        let n = try r2.read(into: &floatSpan)
        #expect(n == frames)
        #expect(asFloat[0..<(frames * channels)].map(WAVConvert.toInt16) == ints)
    }

    @Test func floatToInt16ClampsAndRounds() {
        #expect(WAVConvert.toInt16(1.5) == 32767)
        #expect(WAVConvert.toInt16(-1.5) == -32768)
        #expect(WAVConvert.toInt16(.nan) == 0)
        #expect(WAVConvert.toInt16(0.5) == 16384)
        #expect(WAVConvert.toInt16(-1) == -32768)
    }

    @Test func skipsUnknownChunksWithOddPadding() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let bytes = Self.wav([
            ("LIST", Array("INFOISFT\u{5}\0\0\0abcde".utf8)),
            ("fmt ", Self.fmt(tag: 1, channels: 1, rate: 8000, bits: 16)),
            ("odd ", [1, 2, 3]),
            ("data", Self.pcm16([1, -2, 3, -4])),
            ("LIST", [9, 9]),
        ])
        let r = try WAVReader(path: dir.write("l.wav", bytes))
        #expect(r.frameCount == 4)
        var out = [Int16](repeating: 0, count: 16)
        let n = try readSamples(r, into: &out)
        #expect(Array(out[0..<n]) == [1, -2, 3, -4])
    }

    @Test func readsWaveFormatExtensible() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        var data: [UInt8] = []
        for f: Float in [0.5, -0.25] { data.appendU32(f.bitPattern, .little) }
        let r = try WAVReader(
            path: dir.write(
                "x.wav",
                Self.wav([
                    ("fmt ", Self.fmt(tag: 3, channels: 2, rate: 96_000, bits: 32, extensibleSubformat: 3)), ("data", data),
                ])))
        #expect(r.sampleFormat == .float32 && r.channelCount == 2 && r.sampleRate == 96_000)
        var out = [Float](repeating: 0, count: 2)
        let one = try readSamples(r, into: &out)
        #expect(one == 1)
        #expect(out == [0.5, -0.25])
    }

    @Test func readsStreamingDataSizeToEndOfFile() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        var bytes = Self.wav(
            [
                ("fmt ", Self.fmt(tag: 1, channels: 2, rate: 48_000, bits: 16)),
                ("data", Self.pcm16([1, 2, 3, 4, 5, 6])),
            ], riffSize: 0xFFFF_FFFF)
        bytes[40...43] = [0xFF, 0xFF, 0xFF, 0xFF]
        bytes.append(7)  // a partial sample at the end of a stream is dropped
        let r = try WAVReader(path: dir.write("s.wav", bytes))
        #expect(r.frameCount == nil)
        var out = [Int16](repeating: 0, count: 100)
        let n = try readSamples(r, into: &out)
        #expect(n == 3 && Array(out[0..<6]) == [1, 2, 3, 4, 5, 6])
        let none = try readSamples(r, into: &out)
        #expect(none == 0)
    }

    @Test func rejectsBadInputsWithMessagesNamingTheFile() {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let fmt16 = Self.fmt(tag: 1, channels: 1, rate: 8000, bits: 16)
        var truncatedData = Self.wav([("fmt ", fmt16), ("data", Self.pcm16([1, 2, 3, 4]))])
        truncatedData.removeLast(3)
        let cases: [(String, [UInt8], ContainerError.Kind, String)] = [
            ("empty.wav", [], .truncated, "file is empty"),
            ("short.wav", Array("RIFF".utf8), .truncated, "RIFF header is truncated"),
            ("magic.wav", Array("OggS\0\0\0\0\0\0\0\0\0\0".utf8), .badMagic, "not a WAV file"),
            ("avi.wav", Array("RIFF\u{4}\0\0\0AVI ".utf8), .badMagic, "RIFF form type is not WAVE"),
            ("nofmt.wav", Self.wav([("LIST", [1, 2])]), .truncated, "file ends before the fmt chunk"),
            ("nodata.wav", Self.wav([("fmt ", fmt16)]), .truncated, "file ends before the data chunk"),
            ("order.wav", Self.wav([("data", [0, 0]), ("fmt ", fmt16)]), .malformed, "data chunk comes before the fmt chunk"),
            (
                "24bit.wav", Self.wav([("fmt ", Self.fmt(tag: 1, channels: 1, rate: 8000, bits: 24)), ("data", [])]),
                .unsupported, "unsupported sample format: 24-bit PCM"
            ),
            (
                "mp3.wav", Self.wav([("fmt ", Self.fmt(tag: 0x55, channels: 1, rate: 8000, bits: 16)), ("data", [])]),
                .unsupported, "unsupported WAV format tag 0x0055"
            ),
            (
                "surround.wav", Self.wav([("fmt ", Self.fmt(tag: 1, channels: 6, rate: 8000, bits: 16)), ("data", [])]),
                .unsupported, "6 channels are not supported"
            ),
            (
                "rate.wav", Self.wav([("fmt ", Self.fmt(tag: 1, channels: 1, rate: 0, bits: 16)), ("data", [])]),
                .malformed, "sample rate of 0"
            ),
            (
                "hugefmt.wav", Array("RIFF\0\0\0\0WAVEfmt \u{7F}\u{7F}\u{7F}\u{7F}".utf8), .malformed,
                "fmt chunk has an invalid size"
            ),
            (
                "hugechunk.wav", Array("RIFF\0\0\0\0WAVEjunk\u{7F}\u{7F}\u{7F}\u{7F}".utf8), .truncated,
                "chunk 'junk' at byte 12 is truncated"
            ),
        ]
        for (name, bytes, kind, text) in cases {
            let path = dir.write(name, bytes)
            let e = containerError { _ = try WAVReader(path: path) }
            #expect(e?.kind == kind, "\(name): \(String(describing: e))")
            #expect(
                e?.description.hasPrefix("\(path): ") == true && e?.message.contains(text) == true,
                "\(name): \(String(describing: e))")
        }
        let path = dir.write("cut.wav", truncatedData)
        let e = containerError {
            let r = try WAVReader(path: path)
            var out = [Int16](repeating: 0, count: 8)
            _ = try readSamples(r, into: &out)
        }
        #expect(e?.description == "\(path): data chunk is truncated (got 5 of 8 bytes)")
        let missing = containerError { _ = try WAVReader(path: dir.file("nope.wav")) }
        #expect(missing?.kind == .notFound)
    }

    @Test func writerLeavesNothingBehindOnFailure() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        do {
            let w = try WAVWriter(path: dir.file("a.wav"), sampleRate: 8000, channelCount: 1, format: .int16)
            try w.write([Int16](repeating: 1, count: 100))
        }
        #expect(dir.contents.isEmpty)
        let e = containerError { _ = try WAVWriter(path: dir.file("x/a.wav"), sampleRate: 8000, channelCount: 1, format: .int16) }
        #expect(e?.description == "\(dir.file("x/a.wav")): cannot create output file: No such file or directory")
    }

    @Test func survivesEveryTruncationAndRandomCorruption() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let bytes = Self.wav([
            ("LIST", [1, 2, 3]), ("fmt ", Self.fmt(tag: 3, channels: 2, rate: 8000, bits: 32, extensibleSubformat: 3)),
            ("data", [UInt8](repeating: 0x3F, count: 64)),
        ])
        let result = exerciseCorruptions(of: bytes, in: dir, mutations: 400) { path in
            let r = try WAVReader(path: path)
            var out = [Float](repeating: 0, count: 6)
            while try readSamples(r, into: &out) > 0 {}
        }
        #expect(result.errors > 0)
        #expect(result.unnamed.isEmpty, "\(result.unnamed)")
    }

    @Test func writerReportsReadOnlyOutputDirectory() {
        // /sys refuses new files even to root: the error names the output and nothing is created.
        let path = "/sys/revue-test.wav"
        let e = containerError { _ = try WAVWriter(path: path, sampleRate: 8000, channelCount: 1, format: .int16) }
        #expect(e?.kind == .permissionDenied)
        #expect(e?.description == "\(path): cannot create output file: Permission denied")
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}

/// Reads into the front of `out` through the reader's span form; returns the frames read.
private func readSamples(_ r: WAVReader, into out: inout [Int16]) throws -> Int {
    var span = out.mutableSpan
    return try r.read(into: &span)
}

/// Reads into the front of `out` through the reader's span form; returns the frames read.
private func readSamples(_ r: WAVReader, into out: inout [Float]) throws -> Int {
    var span = out.mutableSpan
    return try r.read(into: &span)
}
