import Foundation
import MediaCore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct Y4MTests {
    @Test func roundTripsOddSizedFramesExactly() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let path = dir.file("a.y4m")
        let w = try Y4MWriter(path: path, width: 33, height: 17, frameRate: ContainerRational(30000, 1001))
        let src = VideoFrame(width: 33, height: 17)
        for i in 0..<5 { drawContainerTestPattern(src, index: i); try w.write(src.view) }
        #expect(!dir.contents.contains("a.y4m"), "file must not appear before finish")
        try w.finish()
        #expect(dir.contents == ["a.y4m"])
        // Header + 5 * ("FRAME\n" + 33*17 + 2*17*9).
        let header = "YUV4MPEG2 W33 H17 F30000:1001 Ip A1:1 C420jpeg\n"
        #expect(dir.read("a.y4m").count == header.utf8.count + 5 * (6 + 561 + 306))
        #expect(dir.read("a.y4m").prefix(header.utf8.count).elementsEqual(header.utf8))

        let r = try Y4MReader(path: path)
        #expect(r.width == 33 && r.height == 17 && r.frameRate == ContainerRational(30000, 1001))
        #expect(r.estimatedFrameCount == 5)
        let got = r.makeFrame()
        for i in 0..<5 {
            #expect(try r.readFrame(into: got))
            drawContainerTestPattern(src, index: i)
            #expect(Quality.psnr(src.view, got.view) == 100)
            #expect(got.timestampNs == Int64(i) * 1_001_000_000 / 30)
        }
        #expect(try !r.readFrame(into: got))
        #expect(r.framesRead == 5)
    }

    @Test(arguments: ["", " C420", " C420jpeg", " C420paldv", " C420mpeg2"])
    func acceptsEvery420ChromaTag(_ tag: String) throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let bytes = Array("YUV4MPEG2 W4 H2 F25:1 It A0:0\(tag) XYSCSS=420JPEG\nFRAME\n".utf8) + [UInt8](repeating: 9, count: 12)
        let r = try Y4MReader(path: dir.write("c.y4m", bytes))
        #expect(r.header.interlacing == .topFieldFirst)
        let f = r.makeFrame()
        #expect(try r.readFrame(into: f))
        #expect(f.y[0] == 9 && f.v[0] == 9)
    }

    @Test(arguments: ["C444", "C422", "Cmono", "C420p10"])
    func rejectsOtherChromaNamingIt(_ tag: String) {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let path = dir.write("c.y4m", Array("YUV4MPEG2 W4 H2 F25:1 \(tag)\n".utf8))
        let e = containerError { _ = try Y4MReader(path: path) }
        #expect(e?.kind == .unsupported)
        #expect(e?.description == "\(path): unsupported chroma format \(tag) (only 4:2:0: C420, C420jpeg, C420paldv, C420mpeg2)")
    }

    @Test func reportsTruncatedFrameWithByteCounts() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        var bytes = Array("YUV4MPEG2 W8 H4 F25:1\n".utf8)
        for _ in 0..<2 { bytes += Array("FRAME\n".utf8) + [UInt8](repeating: 1, count: 48) }
        bytes += Array("FRAME\n".utf8) + [UInt8](repeating: 1, count: 20)
        let path = dir.write("t.y4m", bytes)
        let r = try Y4MReader(path: path)
        let f = r.makeFrame()
        #expect(try r.readFrame(into: f))
        #expect(try r.readFrame(into: f))
        let e = containerError { _ = try r.readFrame(into: f) }
        #expect(e?.kind == .truncated)
        #expect(e?.description == "\(path): frame 2 is truncated (got 20 of 48 bytes)")
    }

    @Test func rejectsBadInputsWithMessagesNamingTheFile() {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let cases: [(String, [UInt8], ContainerError.Kind, String)] = [
            ("empty.y4m", [], .truncated, "file is empty"),
            ("magic.y4m", Array("RIFF1234WAVEfmt \n".utf8), .badMagic, "not a YUV4MPEG2 file"),
            ("binary.y4m", [UInt8](repeating: 0, count: 5000), .badMagic, "not a YUV4MPEG2 file"),
            ("cut.y4m", Array("YUV4MPEG2 W8 H4".utf8), .truncated, "header line is truncated"),
            ("huge.y4m", Array("YUV4MPEG2 W20000 H20000 F25:1\n".utf8), .tooLarge, "frame size 20000x20000 is too large"),
            ("zero.y4m", Array("YUV4MPEG2 W0 H4 F25:1\n".utf8), .malformed, "empty frame size"),
            ("overflow.y4m", Array("YUV4MPEG2 W99999999999999999999999 H4\n".utf8), .malformed, "invalid width"),
            ("nowidth.y4m", Array("YUV4MPEG2 H4 F25:1\n".utf8), .malformed, "no width"),
            ("rate.y4m", Array("YUV4MPEG2 W4 H4 F25:0\n".utf8), .malformed, "invalid frame rate"),
        ]
        for (name, bytes, kind, text) in cases {
            let path = dir.write(name, bytes)
            let e = containerError { _ = try Y4MReader(path: path) }
            #expect(e?.kind == kind, "\(name)")
            #expect(
                e?.description.hasPrefix("\(path): ") == true && e?.message.contains(text) == true,
                "\(name): \(String(describing: e))")
        }
        let missing = containerError { _ = try Y4MReader(path: dir.file("missing.y4m")) }
        #expect(missing?.kind == .notFound)
        #expect(missing?.description == "\(dir.file("missing.y4m")): cannot open: No such file or directory")
        let isDir = containerError { _ = try Y4MReader(path: dir.path) }
        #expect(isDir?.description.hasSuffix("is a directory, not a file") == true)
    }

    @Test func rejectsFrameWithoutMarker() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let path = dir.write("m.y4m", Array("YUV4MPEG2 W2 H2 F25:1\nFRAMX\n".utf8) + [UInt8](repeating: 0, count: 6))
        let r = try Y4MReader(path: path)
        let e = containerError { _ = try r.readFrame(into: r.makeFrame()) }
        #expect(e?.kind == .malformed)
        #expect(e?.message.hasPrefix("frame 0 does not start with FRAME") == true)
    }

    @Test func writerLeavesNothingBehindOnAbortOrDeinit() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let frame = VideoFrame(width: 16, height: 16)
        let w = try Y4MWriter(path: dir.file("x.y4m"), width: 16, height: 16, frameRate: ContainerRational(25, 1))
        try w.write(frame.view)
        #expect(dir.contents.count == 1 && dir.contents[0].hasPrefix(".x.y4m.tmp-"))
        w.abort()
        #expect(dir.contents.isEmpty)
        do {
            let w2 = try Y4MWriter(path: dir.file("y.y4m"), width: 16, height: 16, frameRate: ContainerRational(25, 1))
            try w2.write(frame.view)
        }
        #expect(dir.contents.isEmpty)
    }

    @Test func writerReportsUnwritableDirectory() {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let e = containerError {
            _ = try Y4MWriter(path: dir.file("no/such/dir/out.y4m"), width: 16, height: 16, frameRate: ContainerRational(25, 1))
        }
        #expect(e?.kind == .notFound)
        #expect(e?.description == "\(dir.file("no/such/dir/out.y4m")): cannot create output file: No such file or directory")
        chmod(dir.path, 0o500)
        defer { chmod(dir.path, 0o700) }
        if getuid() != 0 {
            let denied = containerError {
                _ = try Y4MWriter(path: dir.file("out.y4m"), width: 16, height: 16, frameRate: ContainerRational(25, 1))
            }
            #expect(denied?.kind == .permissionDenied)
            #expect(denied?.description == "\(dir.file("out.y4m")): cannot create output file: Permission denied")
        }
        #expect(dir.contents.isEmpty)
    }

    @Test func writerRejectsAFrameOfAnotherSize() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let w = try Y4MWriter(path: dir.file("s.y4m"), width: 4, height: 4, frameRate: ContainerRational(25, 1))
        // A view borrows its frame's planes: keep the frame alive while it is written (ASan found
        // the temporary freed before the write read it).
        let small = VideoFrame(width: 4, height: 4), large = VideoFrame(width: 8, height: 4)
        try withExtendedLifetime(small) { try w.write(small.view) }
        let e = containerError { try withExtendedLifetime(large) { try w.write(large.view) } }
        #expect(e?.description == "\(dir.file("s.y4m")): frame 1 is 8x4 but the file is 4x4 (Y4M cannot change size)")
        try w.finish()
        #expect(dir.read("s.y4m").count == "YUV4MPEG2 W4 H4 F25:1 Ip A1:1 C420jpeg\n".utf8.count + 6 + 24)
    }

    @Test func finishReplacesAnExistingFileAtomically() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        _ = dir.write("o.y4m", Array("old".utf8))
        let w = try Y4MWriter(path: dir.file("o.y4m"), width: 2, height: 2, frameRate: ContainerRational(1, 1))
        let frame = VideoFrame(width: 2, height: 2)
        try withExtendedLifetime(frame) { try w.write(frame.view) }
        #expect(dir.read("o.y4m") == Array("old".utf8))
        try w.finish()
        #expect(dir.read("o.y4m").starts(with: Array("YUV4MPEG2 W2 H2".utf8)))
        #expect(dir.contents == ["o.y4m"])
    }

    @Test func survivesEveryTruncationAndRandomCorruption() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let w = try Y4MWriter(path: dir.file("s.y4m"), width: 6, height: 4, frameRate: ContainerRational(25, 1))
        let f = VideoFrame(width: 6, height: 4)
        for i in 0..<3 { drawContainerTestPattern(f, index: i); try w.write(f.view) }
        try w.finish()
        let result = exerciseCorruptions(of: dir.read("s.y4m"), in: dir) { path in
            let r = try Y4MReader(path: path)
            let frame = r.makeFrame()
            while try r.readFrame(into: frame) {}
        }
        #expect(result.errors > 0)
        #expect(result.unnamed.isEmpty, "\(result.unnamed)")
    }

    @Test func writerReportsReadOnlyOutputDirectory() {
        // /sys refuses new files even to root: the error names the output and nothing is created.
        let path = "/sys/revue-test.y4m"
        let e = containerError { _ = try Y4MWriter(path: path, width: 16, height: 16, frameRate: ContainerRational(25, 1)) }
        #expect(e?.kind == .permissionDenied)
        #expect(e?.description == "\(path): cannot create output file: Permission denied")
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}
