#if canImport(Glibc)
    import Testing
    import Foundation
    import Glibc
    import MediaCore

    /// The send pipelines against an independent receiver: GStreamer's libsrtp-based `srtpdec`, its
    /// RTP depayloaders and libvpx/libopus decoders take what our streams send over loopback UDP,
    /// and the decoded pictures and sound are compared with what was captured.
    @Suite(
        .serialized,
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/gst-launch-1.0"), "GStreamer not installed"))
    struct SendGStreamerTests {
        /// GStreamer's caps for an SRTP (or plain RTP) stream: srtpdec looks its key up by SSRC.
        static func caps(
            media: String, encoding: String, clockRate: Int, payloadType: UInt8, ssrc: UInt32,
            key: SRTPKeyMaterial?
        ) -> String {
            var c =
                "media=(string)\(media), payload=(int)\(payloadType), clock-rate=(int)\(clockRate), "
                + "encoding-name=(string)\(encoding), ssrc=(uint)\(ssrc)"
            guard let key else { return "application/x-rtp, " + c }
            let (cipher, auth): (String, String)
            switch key.suite {
            case .aeadAES128GCM: (cipher, auth) = ("aes-128-gcm", "null")
            case .aeadAES256GCM: (cipher, auth) = ("aes-256-gcm", "null")
            case .aesCM128HMACSHA1_80: (cipher, auth) = ("aes-128-icm", "hmac-sha1-80")
            case .aesCM128HMACSHA1_32: (cipher, auth) = ("aes-128-icm", "hmac-sha1-32")
            }
            let hex = key.keyAndSalt.map { String(format: "%02x", $0) }.joined()
            c +=
                ", srtp-key=(buffer)\(hex), srtp-cipher=(string)\(cipher), srtp-auth=(string)\(auth)"
                + ", srtcp-cipher=(string)\(cipher), srtcp-auth=(string)\(auth)"
            return "application/x-srtp, " + c
        }

        /// Starts `gst-launch-1.0 udpsrc port caps [! srtpdec] ! rest... ! filesink (unbuffered)`, runs
        /// `send`, lets the last packets through, then ends it (it never sees an end of stream; the
        /// unbuffered file sink has written every buffer). Returns its stderr if it stopped on its own.
        static func receive(port: Int, caps: String, srtp: Bool, _ rest: [String], send: () throws -> Void) throws -> String? {
            var args = ["-q", "udpsrc", "port=\(port)", "buffer-size=4194304", "caps=\(caps)", "!"]
            if srtp { args += ["srtpdec", "!"] }
            let gst = try ToolProcess("gst-launch-1.0", args + rest + ["buffer-mode=2", "sync=false"])
            #expect(waitForUDPListener(port: port), "gst-launch did not bind \(port)")
            try send()
            usleep(700_000)  // let the last packets through the decoder
            let stillRunning = gst.process.isRunning
            kill(gst.process.processIdentifier, SIGKILL)
            let run = gst.wait(timeout: 5)
            return stillRunning ? nil : "gst-launch stopped early with status \(run.status): \(run.stderr)"
        }

        static func udpSink(port: Int) throws -> UDPPacketSink {
            let socket = try UDPSocket(family: .ipv4)
            return UDPPacketSink(socket: socket, destination: .loopbackIPv4(port: UInt16(port)))
        }

        @Test(arguments: [(VPXCodec.vp8, SRTPSuite?.some(.aeadAES128GCM)), (.vp8, .aesCM128HMACSHA1_80), (.vp9, nil)])
        func gstreamerDecodesOurVideoWithPSNRAboveBound(_ codec: VPXCodec, _ suite: SRTPSuite?) throws {
            let dir = InteropTempDir(); defer { dir.remove() }
            let port = cliFreePort()
            let w = 320, h = 240, count = 30
            var config = VideoSendStream.Configuration(codec: codec, width: w, height: h)
            config.encoder.bitrate = 1_500_000
            config.srtp = suite.map { SRTPKeyMaterial.random(for: $0) }
            let stream = try VideoSendStream(configuration: config, sink: try Self.udpSink(port: port))
            let caps = Self.caps(
                media: "video", encoding: codec == .vp8 ? "VP8" : "VP9", clockRate: 90_000,
                payloadType: config.payloadType, ssrc: config.ssrc, key: config.srtp)
            let out = dir.file("out.yuv")
            let failure = try Self.receive(
                port: port, caps: caps, srtp: suite != nil,
                [
                    codec == .vp8 ? "rtpvp8depay" : "rtpvp9depay", "!", codec == .vp8 ? "vp8dec" : "vp9dec", "!",
                    "video/x-raw,format=I420", "!", "filesink", "location=\(out)",
                ]
            ) {
                stream.start()
                // BGRA input from the capture thread, as a camera would deliver it.
                var bgra = [UInt8](repeating: 0, count: w * h * 4)
                for i in 0..<count {
                    try bgra.withUnsafeMutableBytes { raw in
                        SyntheticVideo.renderBGRA(frameIndex: i, width: w, height: h, into: raw.baseAddress!, stride: w * 4)
                        let view = try PixelBufferView.packed(
                            format: .bgra, width: w, height: h, data: UnsafeRawBufferPointer(raw), stride: w * 4)
                        stream.capturer.capture(view, timeStampNs: Int64(i) * 33_333_333)
                    }
                    usleep(20_000)
                }
                stream.stop()
            }
            #expect(failure == nil, "\(failure ?? "")")
            #expect(stream.statistics.outbound.framesEncoded == UInt64(count))

            // Each decoded frame: read its bar code, convert the same BGRA source with libyuv, compare.
            let bytes = dir.read("out.yuv")
            let frameBytes = w * h * 3 / 2
            let decodedCount = bytes.count / frameBytes
            #expect(decodedCount == count, "GStreamer decoded \(decodedCount) of \(count) frames")
            let reference = VideoFrame(width: w, height: h)
            let converter = ColorConverter()
            var bgra = [UInt8](repeating: 0, count: w * h * 4)
            var indices: [Int] = []
            try bytes.withUnsafeBytes { all in
                for k in 0..<decodedCount {
                    let frame = UnsafeRawBufferPointer(rebasing: all[(k * frameBytes)..<((k + 1) * frameBytes)])
                    let view = try PixelBufferView.contiguous(frame, format: .i420, width: w, height: h)
                    let decoded = I420View(
                        width: w, height: h,
                        y: view.base(ofPlane: 0).assumingMemoryBound(to: UInt8.self), strideY: w,
                        u: view.base(ofPlane: 1).assumingMemoryBound(to: UInt8.self), strideU: w / 2,
                        v: view.base(ofPlane: 2).assumingMemoryBound(to: UInt8.self), strideV: w / 2)
                    guard let index = SyntheticVideo.frameIndex(in: decoded) else {
                        Issue.record("frame \(k): no bar code"); continue
                    }
                    indices.append(index)
                    try bgra.withUnsafeMutableBytes { raw in
                        SyntheticVideo.renderBGRA(frameIndex: index, width: w, height: h, into: raw.baseAddress!, stride: w * 4)
                        try converter.convert(
                            PixelBufferView.packed(
                                format: .bgra, width: w, height: h, data: UnsafeRawBufferPointer(raw), stride: w * 4),
                            into: reference)
                    }
                    // Synthetic pictures at 1.5 Mbit/s, 320x240: measured 36-40 dB; bound 30 dB.
                    let psnr = Quality.psnr(decoded, reference.view)
                    #expect(psnr > 30, "frame \(index): PSNR \(psnr) dB")
                }
            }
            #expect(indices == Array(0..<decodedCount))
        }

        @Test(arguments: [SRTPSuite?.some(.aeadAES128GCM), nil])
        func gstreamerDecodesOurOpus(_ suite: SRTPSuite?) throws {
            let dir = InteropTempDir(); defer { dir.remove() }
            let port = cliFreePort()
            var config = AudioSendStream.Configuration()
            config.bitrate = 64_000
            config.srtp = suite.map { SRTPKeyMaterial.random(for: $0) }
            let stream = try AudioSendStream(configuration: config, sink: try Self.udpSink(port: port))
            let caps = Self.caps(
                media: "audio", encoding: "OPUS", clockRate: 48_000, payloadType: config.payloadType,
                ssrc: config.ssrc, key: config.srtp)
            let out = dir.file("out.f32")
            // 1 s of a 440 Hz tone at 32 kHz Int16 stereo in 10 ms buffers (resampled and mixed to mono).
            var gen = SyntheticAudio(pattern: .tone(frequency: 440), sampleRate: 32_000, channels: 2, amplitude: 0.5)
            let pcm = gen.int16s(frames: 32_000)
            let failure = try Self.receive(
                port: port, caps: caps, srtp: suite != nil,
                [
                    "rtpopusdepay", "!", "opusdec", "!", "audioconvert", "!",
                    "audio/x-raw,format=F32LE,channels=1,rate=48000", "!", "filesink", "location=\(out)",
                ]
            ) {
                stream.start()
                pcm.withUnsafeBufferPointer { all in
                    for b in 0..<100 {
                        stream.capturer.capture(
                            UnsafeBufferPointer(rebasing: all[(b * 640)..<((b + 1) * 640)]), sampleRate: 32_000,
                            channels: 2, timeStampNs: Int64(b) * 10_000_000)
                        usleep(5_000)
                    }
                }
                stream.stop()
            }
            #expect(failure == nil, "\(failure ?? "")")
            let bytes = dir.read("out.f32")
            let samples = bytes.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
            // About 1 s decoded (50 packets of 20 ms; the resampler's tail may hold back part of one).
            #expect(samples.count >= 48_000 - 960 && samples.count <= 48_000 + 960, "\(samples.count) samples")
            guard samples.count > 40_000 else { return }
            // The tone's pitch and loudness survive: 880 zero crossings per second, RMS 0.354 (-9 dBov).
            let middle = samples[4_800..<40_800]  // 0.75 s
            var crossings = 0
            for i in middle.indices.dropFirst() where (middle[i - 1] < 0) != (middle[i] < 0) { crossings += 1 }
            #expect(abs(crossings - 660) <= 3, "\(crossings) zero crossings in 0.75 s")
            let rms = (middle.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(middle.count)).squareRoot()
            #expect(abs(rms - 0.354) < 0.04, "RMS \(rms)")
        }
    }
#endif
