import Foundation
import MediaCore
// A corpus of bad inputs and bad usage for `revue-media`: every error names the file or argument
// and what is wrong, the exit status is 1 for bad input and 2 for bad usage, and no output (not
// even a temporary file) is left behind.
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.serialized) struct CLIErrorTests {
    /// A valid 64x48 Y4M of `frames` frames.
    static func y4m(frames: Int, chroma: String = "C420jpeg", width: Int = 64, height: Int = 48) -> [UInt8] {
        var bytes = Array("YUV4MPEG2 W\(width) H\(height) F25:1 Ip A1:1 \(chroma)\n".utf8)
        for i in 0..<frames {
            bytes += Array("FRAME\n".utf8)
            bytes += [UInt8](repeating: UInt8(truncatingIfNeeded: 16 + i * 7), count: width * height * 3 / 2)
        }
        return bytes
    }

    struct Case: CustomStringConvertible, Sendable {
        var name: String
        /// Files to create: name -> bytes.
        var files: [String: [UInt8]]
        var arguments: [String]
        var status: Int32
        /// Text the error message must contain (besides naming the file).
        var mentions: [String]
        var description: String { name }
    }

    static let good = y4m(frames: 3)

    static let inputCases: [Case] = [
        Case(
            name: "empty y4m", files: ["in.y4m": []], arguments: ["encode", "in.y4m", "-o", "out.ivf"], status: 1,
            mentions: ["in.y4m", "empty"]),
        Case(
            name: "truncated y4m frame", files: ["in.y4m": Array(good.prefix(good.count - 1000))],
            arguments: ["encode", "in.y4m", "-o", "out.ivf"], status: 1, mentions: ["in.y4m", "frame 2", "truncated"]),
        Case(
            name: "wrong magic", files: ["in.y4m": Array("YUV4MPEG3 W64 H48\n".utf8)],
            arguments: ["encode", "in.y4m", "-o", "out.ivf"], status: 1, mentions: ["in.y4m", "not a YUV4MPEG2"]),
        Case(
            name: "4:4:4 chroma", files: ["in.y4m": y4m(frames: 1, chroma: "C444")],
            arguments: ["encode", "in.y4m", "-o", "out.ivf"], status: 1, mentions: ["in.y4m", "C444"]),
        Case(
            name: "absurd size", files: ["in.y4m": Array("YUV4MPEG2 W100000 H100000 F25:1\nFRAME\n".utf8)],
            arguments: ["encode", "in.y4m", "-o", "out.ivf"], status: 1, mentions: ["in.y4m", "too large"]),
        Case(
            name: "missing input", files: [:], arguments: ["encode", "nothere.y4m", "-o", "out.ivf"], status: 1,
            mentions: ["nothere.y4m", "no such file"]),
        Case(
            name: "wav with 24-bit samples", files: ["in.wav": wav24()], arguments: ["encode", "in.wav", "-o", "out.ogg"],
            status: 1, mentions: ["in.wav", "24"]),
        Case(
            name: "truncated ivf", files: ["in.ivf": Array(ivf().prefix(60))], arguments: ["decode", "in.ivf", "-o", "out.y4m"],
            status: 1, mentions: ["in.ivf", "truncated"]),
        Case(
            name: "corrupt ivf frame", files: ["in.ivf": corruptIVF()], arguments: ["decode", "in.ivf", "-o", "out.y4m"],
            status: 1, mentions: ["in.ivf", "frame 0"]),
        Case(
            name: "ivf frame of absurd size",
            files: ["in.ivf": Array(ivf().prefix(32)) + [0xff, 0xff, 0xff, 0x7f] + [UInt8](repeating: 0, count: 8)],
            arguments: ["decode", "in.ivf", "-o", "out.y4m"], status: 1, mentions: ["in.ivf", "frame 0"]),
        Case(
            name: "ogg with a bad page CRC", files: ["in.ogg": badCRCOgg()], arguments: ["decode", "in.ogg", "-o", "out.wav"],
            status: 1, mentions: ["in.ogg", "CRC"]),
        Case(
            name: "random bytes", files: ["in.ivf": (0..<500).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }],
            arguments: ["decode", "in.ivf", "-o", "out.y4m"], status: 1, mentions: ["in.ivf"]),
        Case(
            name: "probe of an empty file", files: ["x.ivf": []], arguments: ["probe", "x.ivf"], status: 1,
            mentions: ["x.ivf", "empty"]),
        Case(
            name: "output directory missing", files: ["in.y4m": good],
            arguments: ["encode", "in.y4m", "-o", "no/such/dir/out.ivf"],
            status: 1, mentions: ["no/such/dir/out.ivf", "does not exist"]),
        Case(
            name: "output under a regular file", files: ["in.y4m": good, "plain": [1]],
            arguments: ["encode", "in.y4m", "-o", "plain/out.ivf"],
            status: 1, mentions: ["plain/out.ivf", "not a directory"]),
    ]

    static let usageCases: [Case] = [
        Case(name: "no output", files: ["in.y4m": good], arguments: ["encode", "in.y4m"], status: 2, mentions: ["-o"]),
        Case(
            name: "unknown output type", files: ["in.y4m": good], arguments: ["encode", "in.y4m", "-o", "out.mp4"], status: 2,
            mentions: ["out.mp4"]),
        Case(
            name: "bad number", files: ["in.y4m": good], arguments: ["encode", "in.y4m", "-o", "out.ivf", "--bitrate", "lots"],
            status: 2, mentions: ["--bitrate", "lots"]),
        Case(
            name: "number out of range", files: ["in.y4m": good],
            arguments: ["encode", "in.y4m", "-o", "out.ivf", "--threads", "99"],
            status: 2, mentions: ["--threads", "99"]),
        Case(
            name: "unknown option", files: ["in.y4m": good], arguments: ["encode", "in.y4m", "-o", "out.ivf", "--colour", "red"],
            status: 2, mentions: ["--colour"]),
        Case(
            name: "video option for audio", files: [:],
            arguments: ["encode", "--pattern", "tone", "-o", "out.ogg", "--codec", "vp9"],
            status: 2, mentions: ["--codec", "audio"]),
        Case(
            name: "unknown pattern", files: [:], arguments: ["encode", "--pattern", "plaid", "-o", "out.ivf"], status: 2,
            mentions: ["plaid"]),
        Case(
            name: "audio input to video output", files: ["in.wav": wav16()], arguments: ["encode", "in.wav", "-o", "out.ivf"],
            status: 2, mentions: ["in.wav", ".ogg"]),
        Case(name: "unknown command", files: [:], arguments: ["transmogrify"], status: 2, mentions: ["transmogrify"]),
        Case(name: "relay without --to", files: [:], arguments: ["relay", "--listen", "0"], status: 2, mentions: ["--to"]),
        Case(
            name: "relay loss above 1", files: [:], arguments: ["relay", "--listen", "0", "--to", "127.0.0.1:9", "--loss", "5"],
            status: 2, mentions: ["loss"]),
        Case(
            name: "webrtc recording to a non-IVF file", files: [:], arguments: ["webrtc", "--record-video", "x.mp4"], status: 2,
            mentions: ["--record-video", ".ivf"]),
        Case(
            name: "webrtc port out of range", files: [:], arguments: ["webrtc", "--port", "70000"], status: 2,
            mentions: ["--port"]),
        Case(
            name: "webrtc host not IPv4", files: [:], arguments: ["webrtc", "--host", "nothere"], status: 2, mentions: ["--host"]),
        Case(
            name: "webrtc missing input", files: [:], arguments: ["webrtc", "--input", "gone.y4m"], status: 1,
            mentions: ["gone.y4m"]),
        Case(
            name: "webrtc beyond loopback without a token", files: [:],
            arguments: ["webrtc", "--host", "0.0.0.0", "--port", "0"],
            status: 2, mentions: ["--token"]),
        Case(
            name: "webrtc token file missing", files: [:], arguments: ["webrtc", "--token-file", "gone.txt"], status: 1,
            mentions: ["gone.txt"]),
        Case(
            name: "webrtc token with a space", files: [:], arguments: ["webrtc", "--token", "two words"], status: 2,
            mentions: ["token"]),
    ]

    @Test(arguments: inputCases + usageCases)
    func failsCleanlyNamingTheProblem(_ c: Case) throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        for (name, bytes) in c.files { dir.write(name, bytes) }
        let before = dir.contents
        let r = try revueMedia(c.arguments + ["-q"], cwd: dir.path)
        #expect(r.status == c.status, "\(c.name): exit \(r.status), stderr: \(r.stderr)")
        #expect(r.stdout.isEmpty, "\(c.name): stdout \(r.stdout)")
        for text in c.mentions {
            #expect(r.stderr.lowercased().contains(text.lowercased()), "\(c.name): '\(text)' not in: \(r.stderr)")
        }
        #expect(r.stderr.split(separator: "\n").count <= 3, "\(c.name): a short message, got \(r.stderr)")
        #expect(dir.contents == before, "\(c.name): left \(Set(dir.contents).subtracting(before))")
    }

    /// Without root, a read-only directory refuses the output; as root, /proc does.
    @Test func unwritableOutputLeavesNothingBehind() throws {
        let dir = InteropTempDir(); defer { chmod(dir.path, 0o700); dir.remove() }
        dir.write("in.y4m", Self.good)
        let target: String
        if getuid() == 0 {
            target = "/proc/revue-cli-test-\(getpid()).ivf"
        } else {
            mkdir(dir.file("ro"), 0o500)
            target = "ro/out.ivf"
        }
        let r = try revueMedia(["encode", "in.y4m", "-o", target, "-q"], cwd: dir.path)
        #expect(r.status == 1)
        #expect(r.stderr.contains(target), "\(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: getuid() == 0 ? target : dir.file(target)))
        if getuid() != 0 { #expect(((try? FileManager.default.contentsOfDirectory(atPath: dir.file("ro"))) ?? []).isEmpty) }
    }

    @Test func everyCommandHasHelpAndNoArgumentsIsAUsageError() throws {
        for command in ["encode", "decode", "send", "receive", "probe", "relay", "demo", "webrtc"] {
            let r = try revueMedia([command, "--help"])
            #expect(r.status == 0, "\(command) --help: \(r.stderr)")
            #expect(r.stdout.contains("usage: revue-media \(command)"), "\(command) --help: \(r.stdout)")
        }
        let bare = try revueMedia([])
        #expect(bare.status == 2 && bare.stderr.contains("commands:"))
        let top = try revueMedia(["--help"])
        #expect(top.status == 0 && top.stdout.contains("demo"))
    }

    /// k/M suffixes: `--bitrate 200k` is 200 000 bit/s (the encoder lands near it).
    @Test func numbersAcceptSuffixes() throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let r = try revueMedia(
            [
                "encode", "--pattern", "moving", "--size", "160x120", "--seconds", "2", "--bitrate", "0.2M",
                "-o", "b.ivf", "--json", "-q",
            ], cwd: dir.path)
        #expect(r.status == 0, "\(r.stderr)")
        let bitrate = try #require(cliJSON(r.stdout)?["bitrate"] as? Int)
        #expect(bitrate > 120_000 && bitrate < 300_000, "bitrate \(bitrate)")
    }

    /// Ctrl-C during a long encode finishes the file cleanly: ffprobe reads exactly the frames the
    /// result line reports; exit status 130 says the work was cut short.
    @Test func interruptFinishesTheOutputCleanly() throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let p = try ToolProcess(
            CLIBinary.path,
            [
                "encode", "--pattern", "moving", "--size", "320x240", "--seconds", "600",
                "-o", "long.ivf", "--json", "-q",
            ], cwd: dir.path)
        // Wait until the temporary output has grown a little, then interrupt.
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if dir.contents.contains(where: { $0.hasPrefix(".long.ivf") }) { usleep(500_000); break }
            usleep(20_000)
        }
        p.signal(SIGINT)
        let r = p.wait(timeout: 30)
        #expect(r.status == 130, "\(r.stderr)")
        let frames = try #require(cliJSON(r.stdout)?["frames"] as? Int)
        #expect(frames > 0)
        #expect(dir.contents == ["long.ivf"])
        let info = try ffprobeStream(dir.file("long.ivf"))
        #expect(info["nb_read_frames"] == "\(frames)")
    }

    // MARK: fixtures

    static func wav16() -> [UInt8] { wavHeader(bits: 16, format: 1, dataBytes: 3200) + [UInt8](repeating: 0, count: 3200) }
    static func wav24() -> [UInt8] { wavHeader(bits: 24, format: 1, dataBytes: 4800) + [UInt8](repeating: 0, count: 4800) }
    static func wavHeader(bits: Int, format: Int, dataBytes: Int) -> [UInt8] {
        func le32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
        func le16(_ v: Int) -> [UInt8] { (0..<2).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
        let rate = 16_000, channels = 1, block = channels * bits / 8
        return Array("RIFF".utf8) + le32(36 + dataBytes) + Array("WAVEfmt ".utf8) + le32(16) + le16(format) + le16(channels)
            + le32(rate) + le32(rate * block) + le16(block) + le16(bits) + Array("data".utf8) + le32(dataBytes)
    }

    /// A one-frame VP8 IVF made by our encoder.
    static func ivf() -> [UInt8] {
        let frame = VideoFrame(width: 64, height: 48)
        SyntheticVideo.render(frameIndex: 0, into: frame)
        let encoder = try! VPXEncoder(VPXEncoderConfiguration(codec: .vp8, width: 64, height: 48))
        var payload: [UInt8] = []
        try! encoder.encode(frame.view, pts: 0) { payload = Array($0.data) }
        func le32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
        let header = IVFHeader(codec: .vp8, width: 64, height: 48, timeBase: ContainerRational(1, 30), declaredFrameCount: 1)
            .bytes
        return header + le32(payload.count) + [UInt8](repeating: 0, count: 8) + payload
    }

    /// The same IVF with the keyframe's partition garbled after its header.
    static func corruptIVF() -> [UInt8] {
        var b = ivf()
        for i in (32 + 12 + 10)..<b.count { b[i] = 0xff }
        b.removeLast(b.count - min(b.count, 32 + 12 + 40))
        let size = b.count - 44
        for k in 0..<4 { b[32 + k] = UInt8(truncatingIfNeeded: size >> (8 * k)) }
        return b
    }

    /// A tiny Ogg Opus file with one flipped body byte on its audio page.
    static func badCRCOgg() -> [UInt8] {
        let dir = InteropTempDir(); defer { dir.remove() }
        let w = try! OggOpusWriter(path: dir.file("t.ogg"), channelCount: 1)
        let encoder = try! OpusEncoder(sampleRate: .hz48000, channels: 1, application: .audio)
        var packet = [UInt8](repeating: 0, count: 4000)
        let pcm = [Int16](repeating: 0, count: 960)
        for _ in 0..<5 {
            let n = try! pcm.withUnsafeBufferPointer { p in try packet.withUnsafeMutableBytes { try encoder.encode(p, into: $0) }
            }
            try! w.write(Array(packet[0..<n]), sampleCount: 960)
        }
        try! w.finish()
        var b = dir.read("t.ogg")
        b[b.count - 3] ^= 0x55
        return b
    }
}
