#if canImport(Glibc)
    import Testing
    import Foundation
    @testable import MediaCore
    import MediaTestSupport

    /// Helpers for checking our payload formats against GStreamer's depayloaders: encode a clip with
    /// ffmpeg (libvpx) into IVF, packetize its frames into a pcap with `PcapWriter`, depayload and
    /// decode the pcap with `pcapparse ! rtpvp8depay|rtpvp9depay ! vp8dec|vp9dec`, and compare the
    /// decoded pixels with ffmpeg decoding the IVF directly (both decoders are libvpx: bit-exact).
    enum GStreamerPayloadCheck {
        static func tool(_ name: String) -> String? { ExternalTool.path(name) }
        static var available: Bool { tool("ffmpeg") != nil && tool("gst-launch-1.0") != nil }

        @discardableResult
        static func run(_ exe: String, _ args: [String]) throws -> Int32 { try ExternalTool.run(exe, args) }

        /// Index of the first frame whose bytes differ (nil when all frames are equal).
        static func firstDifferingFrame(_ a: [UInt8], _ b: [UInt8], frameSize: Int) -> Int? {
            let n = min(a.count, b.count) / frameSize
            for i in 0..<n where a[(i * frameSize)..<((i + 1) * frameSize)] != b[(i * frameSize)..<((i + 1) * frameSize)] {
                return i
            }
            return a.count == b.count ? nil : n
        }

        /// Frames of an IVF file (32-byte file header; per frame a 12-byte header with LE32 size).
        static func ivfFrames(_ path: String) throws -> [[UInt8]] {
            let b = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            var at = Int(b[6]) | Int(b[7]) << 8
            var frames: [[UInt8]] = []
            while at + 12 <= b.count {
                let n = Int(b[at]) | Int(b[at + 1]) << 8 | Int(b[at + 2]) << 16 | Int(b[at + 3]) << 24
                frames.append(Array(b[(at + 12)..<(at + 12 + n)]))
                at += 12 + n
            }
            return frames
        }

        /// Runs `body` with a fresh temporary directory, removed afterwards (kept when GSTPAY_KEEP is set).
        static func withTempDir<R>(_ body: (URL) throws -> R) throws -> R {
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("gstpay-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            defer {
                if ProcessInfo.processInfo.environment["GSTPAY_KEEP"] == nil { try? FileManager.default.removeItem(at: dir) }
            }
            return try body(dir)
        }

        /// Encodes 30 frames of 640x480 test pattern (I420, key frame every 15) with ffmpeg into IVF.
        static func encodeClip(encoder: String, in dir: URL) throws -> String {
            let ivf = dir.appendingPathComponent("clip.ivf").path
            try run(
                "ffmpeg",
                [
                    "-loglevel", "error", "-f", "lavfi", "-i", "testsrc=size=640x480:rate=30", "-frames:v", "30",
                    "-pix_fmt", "yuv420p", "-c:v", encoder, "-b:v", "3M", "-deadline", "realtime", "-cpu-used", "8",
                    "-g", "15", ivf,
                ])
            return ivf
        }

        /// Encodes, packetizes with `packetize`, and returns (GStreamer-decoded, ffmpeg-decoded) I420 bytes.
        static func roundTrip(
            codec: String, encoder: String, depay: String, decoder: String,
            packetize: ([[UInt8]]) -> [[UInt8]]
        ) throws -> (gst: [UInt8], reference: [UInt8], frames: Int, packets: Int) {
            try withTempDir { dir in
                let ivf = try encodeClip(encoder: encoder, in: dir)
                let pcap = dir.appendingPathComponent("clip.pcap").path
                let gstOut = dir.appendingPathComponent("gst.yuv").path
                let refOut = dir.appendingPathComponent("ref.yuv").path
                let frames = try ivfFrames(ivf)
                let packets = packetize(frames)
                let w = try PcapWriter(path: pcap)
                for (i, p) in packets.enumerated() {
                    try p.withUnsafeBytes {
                        try w.write(
                            $0, from: PcapEndpoint(127, 0, 0, 1, port: 40_000), to: PcapEndpoint(127, 0, 0, 1, port: 5004),
                            timestampNs: 1_764_000_000_000_000_000 + UInt64(i) * 1_000_000)
                    }
                }
                try w.finish()
                try run(
                    "gst-launch-1.0",
                    [
                        "-q", "filesrc", "location=\(pcap)", "!", "pcapparse", "!",
                        "application/x-rtp,media=video,clock-rate=90000,encoding-name=\(codec),payload=96", "!",
                        depay, "!", decoder, "!", "video/x-raw,format=I420", "!", "filesink", "location=\(gstOut)",
                    ])
                try run("ffmpeg", ["-loglevel", "error", "-i", ivf, "-f", "rawvideo", "-pix_fmt", "yuv420p", refOut])
                let gst = (try? Data(contentsOf: URL(fileURLWithPath: gstOut))).map { [UInt8]($0) } ?? []
                let ref = [UInt8](try Data(contentsOf: URL(fileURLWithPath: refOut)))
                return (gst, ref, frames.count, packets.count)
            }
        }

        /// Encodes a clip, payloads it with GStreamer (`ivfparse ! <payloader> ! rtpstreampay`, RFC 4571
        /// framing: 2-byte length before each packet) and returns (IVF frames, RTP packets).
        static func gstreamerPackets(encoder: String, payloader: [String]) throws -> (frames: [[UInt8]], packets: [[UInt8]]) {
            try withTempDir { dir in
                let ivf = try encodeClip(encoder: encoder, in: dir)
                let stream = dir.appendingPathComponent("rtp.stream").path
                try run(
                    "gst-launch-1.0",
                    ["-q", "filesrc", "location=\(ivf)", "!", "ivfparse", "!"] + payloader
                        + ["!", "rtpstreampay", "!", "filesink", "location=\(stream)"])
                let b = (try? Data(contentsOf: URL(fileURLWithPath: stream))).map { [UInt8]($0) } ?? []
                var packets: [[UInt8]] = []
                var at = 0
                while at + 2 <= b.count {
                    let n = Int(b[at]) << 8 | Int(b[at + 1])
                    guard at + 2 + n <= b.count else { break }
                    packets.append(Array(b[(at + 2)..<(at + 2 + n)]))
                    at += 2 + n
                }
                return (try ivfFrames(ivf), packets)
            }
        }

        /// Feeds packets to `push` in order and collects (frame bytes, key frame flag, incomplete count).
        static func depacketize(_ packets: [[UInt8]], _ push: (RTPPacket, RawSpan) throws -> RTPDepacketizeResult)
            throws -> (
                frames: [[UInt8]], keys: [Bool], incomplete: Int
            )
        {
            var frames: [[UInt8]] = [], keys: [Bool] = [], incomplete = 0
            for p in packets {
                let r = try push(try RTPPacket(parsing: p.span.bytes), p.span.bytes)
                incomplete += r.incompleteFrames
                if let f = r.frame { frames.append(Array(f.data)); keys.append(f.isKeyframe) }
            }
            return (frames, keys, incomplete)
        }
    }

    @Suite(.enabled(if: GStreamerPayloadCheck.available, "ffmpeg or gst-launch-1.0 missing"))
    struct VP8PayloadGStreamerTests {
        @Test func gstreamerDepayloadsAndDecodesOurVP8Packets() throws {
            let r = try GStreamerPayloadCheck.roundTrip(codec: "VP8", encoder: "libvpx", depay: "rtpvp8depay", decoder: "vp8dec")
            { frames in
                var packetizer = VP8Packetizer()
                var header = RTPHeader(payloadType: 96, ssrc: 0x5EED)
                var seq = RTPSequencer(initial: 65_500)  // wraps inside the clip
                var clock = RTPClock(rate: RTPClock.videoRate)
                var out: [[UInt8]] = []
                var buf = [UInt8](repeating: 0, count: 1500)
                for (i, f) in frames.enumerated() {
                    header.timestamp = clock.timestamp(captureNs: Int64(i) * 1_000_000_000 / 30)
                    f.withUnsafeBytes { raw in
                        let plan = packetizer.packetize(frameSize: raw.count, maxPayloadSize: header.maxPayloadSize(mtu: 1200))
                        for k in 0..<plan.count {
                            header.sequenceNumber = seq.next()
                            let n = buf.withUnsafeMutableBytes {
                                $0.appending { plan.writePacket(at: k, header: &header, of: raw.bytes, into: &$0) }
                            }
                            out.append(Array(buf[0..<n]))
                        }
                    }
                }
                return out
            }
            let frameSize = 640 * 480 * 3 / 2
            #expect(r.packets > r.frames)  // multi-packet frames were exercised
            #expect(r.reference.count == r.frames * frameSize)
            #expect(r.gst.count == r.reference.count, "GStreamer decoded \(r.gst.count / frameSize) of \(r.frames) frames")
            // Compare outside #expect: a failing array comparison would make Swift Testing diff 14 MB.
            let firstBadFrame = GStreamerPayloadCheck.firstDifferingFrame(r.gst, r.reference, frameSize: frameSize)
            #expect(firstBadFrame == nil, "decoded frame \(firstBadFrame ?? -1) differs")
        }

        @Test func ourDepacketizerRestoresGStreamerVP8Frames() throws {
            let (frames, packets) = try GStreamerPayloadCheck.gstreamerPackets(
                encoder: "libvpx", payloader: ["rtpvp8pay", "mtu=1200", "picture-id-mode=15-bit"])
            try #require(frames.count == 30)
            #expect(packets.count > frames.count)
            #expect(packets.allSatisfy { $0.count <= 1200 })
            let d = VP8Depacketizer()
            let got = try GStreamerPayloadCheck.depacketize(packets) { try d.push($0, in: $1) }
            #expect(got.incomplete == 0)
            #expect(got.frames.count == frames.count)
            #expect(got.frames == frames)
            #expect(got.keys == frames.map { $0[0] & 0x01 == 0 })
            #expect(got.keys.filter { $0 }.count == 2)  // key frame every 15 of 30
        }
    }
#endif
