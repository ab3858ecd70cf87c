import Foundation
import MediaCore
import Testing

@Suite struct OggOpusTests {
    @Test func packetInfoReadsDurationsFromTheTOC() {
        func n(_ b: [UInt8]) -> Int? { OpusPacketInfo.sampleCount(b) }
        #expect(n([0 << 3]) == 480)  // SILK NB 10 ms
        #expect(n([3 << 3]) == 2880)  // SILK NB 60 ms
        #expect(n([12 << 3]) == 480)  // hybrid SWB 10 ms
        #expect(n([15 << 3]) == 960)  // hybrid FB 20 ms
        #expect(n([16 << 3]) == 120)  // CELT NB 2.5 ms
        #expect(n([31 << 3]) == 960)  // CELT FB 20 ms
        #expect(n([31 << 3 | 1, 0]) == 1920)  // code 1: two equal frames
        #expect(n([31 << 3 | 2, 0]) == 1920)  // code 2: two frames
        #expect(n([31 << 3 | 3, 3]) == 2880)  // code 3: M = 3
        #expect(n([31 << 3 | 3, 0x86]) == 5760)  // code 3, VBR and padding flags set, M = 6
        #expect(n([3 << 3 | 3, 3]) == nil)  // 180 ms is over the 120 ms limit
        #expect(n([31 << 3 | 3, 0]) == nil)  // M = 0
        #expect(n([31 << 3 | 3]) == nil)  // code 3 without its count byte
        #expect(n([]) == nil)
    }

    static func packet(_ i: Int, samples: Int = 960) -> [UInt8] {
        // CELT FB: config 28-31 = 2.5/5/10/20 ms.
        let config: UInt8 = [120: 28, 240: 29, 480: 30, 960: 31][samples]!
        return [config << 3] + (0..<(i % 300 + 1)).map { UInt8(truncatingIfNeeded: $0 * 7 + i) }
    }

    @Test func roundTripsPacketsGranulesPreSkipAndEndTrimming() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let path = dir.file("a.opus")
        let w = try OggOpusWriter(
            path: path, channelCount: 2, preSkip: 312, inputSampleRate: 44_100,
            vendor: "Revue test", comments: ["TITLE=Tone", "ENCODER=revue"])
        for i in 0..<120 { try w.write(Self.packet(i), sampleCount: 960) }
        let original: Int64 = 120 * 960 - 312 - 500
        try w.finish(originalSampleCount: original)

        let r = try OggOpusReader(path: path)
        #expect(r.head == OggOpusHead(channelCount: 2, preSkip: 312, inputSampleRate: 44_100, outputGain: 0))
        #expect(r.tags.vendor == "Revue test" && r.tags.comments == ["TITLE=Tone", "ENCODER=revue"])
        #expect(r.tags.value(for: "title") == "Tone")
        var buffer: [UInt8] = []
        var infos: [OggOpusPacket] = []
        while let info = try r.readPacket(into: &buffer) {
            #expect(buffer == Self.packet(infos.count))
            infos.append(info)
        }
        #expect(infos.count == 120)
        #expect(infos[0].discardStart == 312 && infos[0].granuleEnd == 960)
        #expect(infos[1].discardStart == 0)
        #expect(infos[119].discardEnd == 500 && infos[119].isLast)
        #expect(infos.dropLast().allSatisfy { $0.discardEnd == 0 && !$0.isLast })
        #expect(infos.reduce(0) { $0 + $1.outputSampleCount } == Int(original))
        #expect(r.finalGranule == 312 + original)
        #expect(r.startGranule == 0)

        // Page layout (RFC 7845 §3): OpusHead alone (BOS), OpusTags alone, then audio pages of at
        // most one second (50 packets of 20 ms), EOS on the last.
        let pages = try OggPageReader(path: path, strict: true)
        var layout: [(OggPageFlags, Int64, Int)] = []
        while try pages.nextPage() { layout.append((pages.page.flags, pages.page.granule, pages.page.lacing.count)) }
        #expect(layout.map(\.0) == [[.beginningOfStream], [], [], [], [.endOfStream]])
        #expect(layout.map(\.1) == [0, 0, 48_000, 96_000, 312 + original])
        #expect(layout[2].2 >= 50)
    }

    @Test func preSkipLongerThanAPacketSpansPackets() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let path = dir.file("p.opus")
        let w = try OggOpusWriter(path: path, channelCount: 1, preSkip: 3000)
        for i in 0..<10 { try w.write(Self.packet(i, samples: 480), sampleCount: 480) }
        try w.finish()
        let r = try OggOpusReader(path: path)
        var b: [UInt8] = []
        var discards: [Int] = []
        while let p = try r.readPacket(into: &b) { discards.append(p.discardStart) }
        #expect(discards == [480, 480, 480, 480, 480, 480, 120, 0, 0, 0])
        #expect(r.finalGranule == 4800)
    }

    @Test func readerComputesStartGranuleOfAStreamThatStartsLate() throws {
        // A live recording may start at a granule above zero (RFC 7845 §4.5): build one by hand.
        let dir = ContainerTempDir(); defer { dir.remove() }
        let path = dir.file("late.opus")
        let file = try ContainerFileWriter(path: path)
        let pw = OggPageWriter(file: file, serial: 7)
        pw.append(OggOpusHead(channelCount: 1, preSkip: 312).bytes.span.bytes, granule: 0)
        try pw.flush(flags: .beginningOfStream)
        pw.append(OggOpusTags().bytes.span.bytes, granule: 0)
        try pw.flush()
        for i in 0..<3 { pw.append(Self.packet(i).span.bytes, granule: 100_000 + Int64(i + 1) * 960) }
        try pw.flush(flags: .endOfStream)
        try file.finish()
        let r = try OggOpusReader(path: path)
        var b: [UInt8] = []
        var total = 0
        while let p = try r.readPacket(into: &b) { total += p.outputSampleCount }
        #expect(r.startGranule == 100_000)
        #expect(total == 3 * 960 - 312)
    }

    @Test func rejectsBadInputsWithMessagesNamingTheFile() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        func stream(
            head: [UInt8], tags: [UInt8]? = OggOpusTags().bytes, audio: [[UInt8]] = [],
            audioGranule: Int64? = nil
        ) throws -> [UInt8] {
            let path = dir.file("tmp.ogg")
            let file = try ContainerFileWriter(path: path)
            let pw = OggPageWriter(file: file, serial: 9)
            pw.append(head.span.bytes, granule: 0)
            try pw.flush(flags: .beginningOfStream)
            if let t = tags { pw.append(t.span.bytes, granule: 0); try pw.flush() }
            for (i, a) in audio.enumerated() { pw.append(a.span.bytes, granule: audioGranule ?? Int64(i + 1) * 960) }
            try pw.flush(flags: audio.isEmpty ? [] : .endOfStream)
            try file.finish()
            return dir.read("tmp.ogg")
        }
        var family1 = OggOpusHead(channelCount: 2).bytes
        family1[18] = 1
        let good = try stream(head: OggOpusHead(channelCount: 1).bytes, audio: [Self.packet(0), Self.packet(1)])
        var badCRC = good
        badCRC[good.count - 5] ^= 0x40
        let cases: [(String, [UInt8], ContainerError.Kind, String)] = [
            ("empty.opus", [], .truncated, "file is empty"),
            ("magic.opus", Array("RIFF\0\0\0\0WAVEfmt ".utf8), .badMagic, "not an Ogg file"),
            (
                "vorbis.ogg", try stream(head: [1] + Array("vorbis".utf8) + [UInt8](repeating: 0, count: 23), tags: nil),
                .badMagic, "not an Ogg Opus file (no OpusHead header)"
            ),
            ("family.opus", try stream(head: family1), .unsupported, "channel mapping family 1 is not supported"),
            (
                "shorthead.opus", try stream(head: Array("OpusHead\u{1}\u{1}".utf8)), .malformed,
                "OpusHead header is shorter than 19 bytes"
            ),
            (
                "notags.opus", try stream(head: OggOpusHead(channelCount: 1).bytes, tags: nil), .truncated,
                "file ends before the OpusTags header"
            ),
            (
                "badtags.opus",
                try stream(
                    head: OggOpusHead(channelCount: 1).bytes, tags: Array("OpusTags\u{FF}\u{FF}\u{FF}\u{FF}xxxxxxxx".utf8)),
                .malformed, "vendor string runs past the packet"
            ),
            ("cut.opus", Array(good.prefix(good.count - 3)), .truncated, "is truncated"),
            ("crc.opus", badCRC, .corrupt, "has a bad CRC"),
            (
                "toc.opus", try stream(head: OggOpusHead(channelCount: 1).bytes, audio: [[31 << 3 | 3]]), .malformed,
                "is not a valid Opus packet (bad TOC)"
            ),
            (
                "granule.opus",
                try stream(
                    head: OggOpusHead(channelCount: 1).bytes, audio: [Self.packet(0), Self.packet(1)],
                    audioGranule: 5
                ).dropLastPageEOS(), .malformed,
                "first audio page's granule position 5 is smaller than its 1920 samples"
            ),
        ]
        for (name, bytes, kind, text) in cases {
            let path = dir.write(name, bytes)
            let e = containerError {
                let r = try OggOpusReader(path: path)
                var b: [UInt8] = []
                while try r.readPacket(into: &b) != nil {}
            }
            #expect(e?.kind == kind, "\(name): \(String(describing: e))")
            #expect(
                e?.description.hasPrefix("\(path): ") == true && e?.message.contains(text) == true,
                "\(name): \(String(describing: e))")
        }
        // Tolerant mode skips the damaged page and counts it.
        let r = try OggOpusReader(path: dir.file("crc.opus"), strict: false)
        var b: [UInt8] = []
        #expect(try r.readPacket(into: &b) == nil)
        #expect(r.corruptPages == 1)
    }

    @Test func writerRejectsPacketsWhoseTOCContradictsTheDuration() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let w = try OggOpusWriter(path: dir.file("w.opus"), channelCount: 1)
        let e = containerError { try w.write(Self.packet(0, samples: 480), sampleCount: 960) }
        #expect(e?.description == "\(dir.file("w.opus")): packet 0 lasts 480 samples by its TOC, not 960")
        #expect(containerError { try w.write([], sampleCount: 960) }?.kind == .malformed)
        try w.write(Self.packet(0), sampleCount: 960)
        try w.finish()
        #expect(w.packetsWritten == 1 && w.granule == 960)
    }

    @Test func writerLeavesNothingBehindWithoutFinish() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        do {
            let w = try OggOpusWriter(path: dir.file("a.opus"), channelCount: 1)
            try w.write(Self.packet(0), sampleCount: 960)
        }
        #expect(dir.contents.isEmpty)
    }

    @Test(arguments: [true, false])
    func survivesEveryTruncationAndRandomCorruption(strict: Bool) throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let w = try OggOpusWriter(path: dir.file("s.opus"), channelCount: 2, comments: ["A=b"])
        w.maximumPageDuration = 1920
        for i in 0..<6 { try w.write(Self.packet(i * 40, samples: 960), sampleCount: 960) }
        try w.finish(originalSampleCount: 5000)
        let result = exerciseCorruptions(of: dir.read("s.opus"), in: dir, mutations: 400, truncationStep: 3) { path in
            let r = try OggOpusReader(path: path, strict: strict)
            var b: [UInt8] = []
            while try r.readPacket(into: &b) != nil {}
        }
        #expect(result.errors > 0)
        #expect(result.unnamed.isEmpty, "\(result.unnamed)")
    }

    @Test func writerReportsReadOnlyOutputDirectory() {
        // /sys refuses new files even to root: the error names the output and nothing is created.
        let path = "/sys/revue-test.opus"
        let e = containerError { _ = try OggOpusWriter(path: path, channelCount: 1) }
        #expect(e?.kind == .permissionDenied)
        #expect(e?.description == "\(path): cannot create output file: Permission denied")
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}

extension Array where Element == UInt8 {
    /// Clears the end-of-stream flag of the last page and fixes its CRC (test helper).
    func dropLastPageEOS() -> [UInt8] {
        var b = self
        var start = b.count - 27
        while start >= 0 && !(b[start] == 0x4F && b[start + 1] == 0x67 && b[start + 2] == 0x67 && b[start + 3] == 0x53) {
            start -= 1
        }
        b[start + 5] &= ~4
        b[start + 22] = 0; b[start + 23] = 0; b[start + 24] = 0; b[start + 25] = 0
        let crc = OggCRC.checksum(Array(b[start...]))
        b[start + 22] = UInt8(crc & 0xFF); b[start + 23] = UInt8((crc >> 8) & 0xFF)
        b[start + 24] = UInt8((crc >> 16) & 0xFF); b[start + 25] = UInt8(crc >> 24)
        return b
    }
}
