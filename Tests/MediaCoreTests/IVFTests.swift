import Foundation
import MediaCore
import Testing

@Suite struct IVFTests {
    @Test func roundTripsFramesAndFixesFrameCount() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let path = dir.file("a.ivf")
        let w = try IVFWriter(path: path, codec: .vp9, width: 320, height: 240, timeBase: ContainerRational(1, 90_000))
        let frames: [[UInt8]] = (0..<7).map { i in (0..<(i * 100 + 1)).map { UInt8(truncatingIfNeeded: $0 * 31 + i) } }
        // Odd frames through the span form, even ones through the array form.
        for (i, f) in frames.enumerated() {
            if i % 2 == 1 {
                try w.write(f.span.bytes, pts: Int64(i) * 3000 + 1 << 33)
            } else {
                try w.write(f, pts: Int64(i) * 3000 + 1 << 33)
            }
        }
        try w.finish()
        let bytes = dir.read("a.ivf")
        #expect(bytes.count == 32 + frames.reduce(0) { $0 + 12 + $1.count })
        #expect(Array(bytes[0..<12]) == Array("DKIF".utf8) + [0, 0, 32, 0] + Array("VP90".utf8))
        #expect(bytes.span.bytes.u32(24, .little) == 7)

        let r = try IVFReader(path: path)
        #expect(
            r.header
                == IVFHeader(
                    codec: .vp9, width: 320, height: 240, timeBase: ContainerRational(1, 90_000),
                    declaredFrameCount: 7))
        var buffer: [UInt8] = []
        for (i, f) in frames.enumerated() {
            let h = try r.readFrame(into: &buffer)
            #expect(h == IVFFrameHeader(size: f.count, pts: Int64(i) * 3000 + 1 << 33))
            #expect(buffer == f)
        }
        #expect(try r.readFrame(into: &buffer) == nil)
        #expect(r.framesRead == 7)
    }

    /// `readPayload(into:)` appends each payload after what the output span holds.
    @Test func readsPayloadsIntoAnOutputSpan() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let w = try IVFWriter(path: dir.file("o.ivf"), codec: .vp8, width: 16, height: 16, timeBase: ContainerRational(1, 30))
        try w.write([1, 2, 3], pts: 0); try w.write([4, 5], pts: 1); try w.write([], pts: 2)
        try w.finish()
        let r = try IVFReader(path: dir.file("o.ivf"))
        var out = [UInt8](repeating: 0xEE, count: 9)
        let held = try out.withUnsafeMutableBytes { raw throws in
            var span = OutputRawSpan(buffer: raw, initializedCount: 2)
            while let h = try r.nextFrameHeader() {
                let before = span.byteCount
                try r.readPayload(into: &span)
                #expect(span.byteCount == before + h.size)
            }
            return span.byteCount
        }
        #expect(held == 7 && out == [0xEE, 0xEE, 1, 2, 3, 4, 5, 0xEE, 0xEE])
        #expect(r.framesRead == 3)
    }

    @Test func skipsPayloadsOnRequest() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let w = try IVFWriter(path: dir.file("s.ivf"), codec: .vp8, width: 16, height: 16, timeBase: ContainerRational(1, 30))
        try w.write([1, 2, 3], pts: 0); try w.write([4, 5], pts: 1)
        try w.finish()
        let r = try IVFReader(path: dir.file("s.ivf"))
        _ = try r.nextFrameHeader(); try r.skipPayload()
        var b: [UInt8] = []
        #expect(try r.readFrame(into: &b)?.pts == 1 && b == [4, 5])
    }

    static func header(
        fourcc: String = "VP80", width: UInt16 = 64, height: UInt16 = 48,
        rate: UInt32 = 30, scale: UInt32 = 1, headerSize: UInt16 = 32
    ) -> [UInt8] {
        var h: [UInt8] = Array("DKIF".utf8)
        h.appendU16(0, .little); h.appendU16(headerSize, .little); h.append(contentsOf: fourcc.utf8)
        h.appendU16(width, .little); h.appendU16(height, .little); h.appendU32(rate, .little); h.appendU32(scale, .little)
        h.appendU32(0, .little); h.appendU32(0, .little)
        return h
    }

    static func frame(_ size: UInt32, _ payload: [UInt8]) -> [UInt8] {
        var f: [UInt8] = []
        f.appendU32(size, .little); f.appendU64(0, .little)
        return f + payload
    }

    @Test func rejectsBadInputsWithMessagesNamingTheFile() {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let cases: [(String, [UInt8], ContainerError.Kind, String)] = [
            ("empty.ivf", [], .truncated, "file is empty"),
            ("magic.ivf", Array("RIFF0000000000000000000000000000".utf8), .badMagic, "not an IVF file"),
            ("short.ivf", Array(Self.header().prefix(20)), .truncated, "IVF header is truncated (got 20 of 32 bytes)"),
            ("av1.ivf", Self.header(fourcc: "AV01"), .unsupported, "unsupported codec fourcc 'AV01'"),
            ("huge.ivf", Self.header(width: 65535, height: 65535), .tooLarge, "frame size 65535x65535 is too large"),
            ("zero.ivf", Self.header(width: 0), .malformed, "empty frame size"),
            ("tb.ivf", Self.header(rate: 0), .malformed, "invalid time base"),
            ("hsize.ivf", Self.header(headerSize: 16), .malformed, "header size 16"),
        ]
        for (name, bytes, kind, text) in cases {
            let path = dir.write(name, bytes)
            let e = containerError { _ = try IVFReader(path: path) }
            #expect(e?.kind == kind, "\(name): \(String(describing: e))")
            #expect(
                e?.description.hasPrefix("\(path): ") == true && e?.message.contains(text) == true,
                "\(name): \(String(describing: e))")
        }
        let frameCases: [(String, [UInt8], ContainerError.Kind, String)] = [
            (
                "fh.ivf", Self.header() + Self.frame(3, [1, 2, 3]) + [1, 2, 3, 4, 5], .truncated,
                "frame 1 header is truncated (got 5 of 12 bytes)"
            ),
            ("payload.ivf", Self.header() + Self.frame(100, [1, 2, 3]), .truncated, "frame 0 is truncated (got 3 of 100 bytes)"),
            (
                "absurd.ivf", Self.header() + Self.frame(0xFFFF_FFF0, [1]), .tooLarge,
                "frame 0 declares 4294967280 bytes (limit 1048576 for 64x48)"
            ),
        ]
        for (name, bytes, kind, text) in frameCases {
            let path = dir.write(name, bytes)
            let e = containerError {
                let r = try IVFReader(path: path)
                var b: [UInt8] = []
                while try r.readFrame(into: &b) != nil {}
            }
            #expect(e?.kind == kind, "\(name): \(String(describing: e))")
            #expect(e?.description == "\(path): \(text)", "\(name)")
        }
    }

    @Test func writerLeavesNothingBehindWithoutFinish() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        do {
            let w = try IVFWriter(path: dir.file("a.ivf"), codec: .vp8, width: 16, height: 16, timeBase: ContainerRational(1, 30))
            try w.write([1, 2, 3], pts: 0)
        }
        #expect(dir.contents.isEmpty)
    }

    @Test func survivesEveryTruncationAndRandomCorruption() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let w = try IVFWriter(path: dir.file("s.ivf"), codec: .vp8, width: 16, height: 16, timeBase: ContainerRational(1, 30))
        for i in 0..<4 { try w.write([UInt8](repeating: UInt8(i), count: 10 + i), pts: Int64(i)) }
        try w.finish()
        let result = exerciseCorruptions(of: dir.read("s.ivf"), in: dir, mutations: 400) { path in
            let r = try IVFReader(path: path)
            var b: [UInt8] = []
            while try r.readFrame(into: &b) != nil {}
        }
        #expect(result.errors > 0)
        #expect(result.unnamed.isEmpty, "\(result.unnamed)")
    }

    @Test func writerReportsReadOnlyOutputDirectory() {
        // /sys refuses new files even to root: the error names the output and nothing is created.
        let path = "/sys/revue-test.ivf"
        let e = containerError {
            _ = try IVFWriter(path: path, codec: .vp8, width: 16, height: 16, timeBase: ContainerRational(1, 30))
        }
        #expect(e?.kind == .permissionDenied)
        #expect(e?.description == "\(path): cannot create output file: Permission denied")
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}
