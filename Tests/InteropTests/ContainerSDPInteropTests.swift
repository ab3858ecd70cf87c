import Foundation
import MediaCore
import Testing

/// SDP against ffmpeg and GStreamer: real SRTP streams between the two independent
/// implementations, keyed and described by our session descriptions.
@Suite struct ContainerSDPInteropTests {
    static func key(_ seed: UInt8) -> [UInt8] { (0..<30).map { UInt8(truncatingIfNeeded: Int($0) * 29 + Int(seed)) } }
    static func hex(_ b: [UInt8]) -> String { b.map { String(format: "%02x", $0) }.joined() }

    /// A send-only SRTP description of VP8 on `port` and Opus on `port + 2`, as `revue-media send --sdp` writes it.
    static func description(port: Int, crypto: Bool = true) -> SDPSessionDescription {
        var s = SDPSessionDescription(
            origin: SDPOrigin(sessionID: 1_234_567, address: "127.0.0.1"),
            sessionName: "Revue", connection: SDPConnection(address: "127.0.0.1"))
        var v = SDPMediaDescription(
            type: "video", port: port, proto: crypto ? "RTP/SAVP" : "RTP/AVP",
            payloadType: 96, encoding: "VP8", clockRate: 90_000)
        v.rtcpFeedback = [.nack(96), .pli(96), .fir(96), .remb(96)]
        v.extensionMaps = [SDPExtensionMap(id: 3, uri: SDPExtensionMap.absoluteSendTimeURI)]
        v.ssrcs = [SDPSSRCAttribute(ssrc: 1111, attribute: "cname", value: "revue")]
        var a = SDPMediaDescription(
            type: "audio", port: port + 2, proto: crypto ? "RTP/SAVP" : "RTP/AVP",
            payloadType: 111, encoding: "opus", clockRate: 48_000, channels: 2)
        a.formatParameters = [SDPFormatParameters(payloadType: 111, parameters: "minptime=10;useinbandfec=1")]
        a.extensionMaps = [SDPExtensionMap(id: 1, uri: SDPExtensionMap.audioLevelURI)]
        a.ssrcs = [SDPSSRCAttribute(ssrc: 2222, attribute: "cname", value: "revue")]
        if crypto {
            v.crypto = [SDPCrypto(tag: 1, suite: "AES_CM_128_HMAC_SHA1_80", keyAndSalt: key(1))]
            a.crypto = [SDPCrypto(tag: 1, suite: "AES_CM_128_HMAC_SHA1_80", keyAndSalt: key(2))]
        }
        s.media = [v, a]
        return s
    }

    @Test func ffmpegReceivesSRTPFromGStreamerThroughOurSDP() throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let port = cliFreePort()
        let sdp = dir.file("stream.sdp")
        try Self.description(port: port).write(to: sdp)
        let out = dir.file("received.mkv")
        let ffmpeg = try ToolProcess(
            "ffmpeg",
            [
                "-v", "error", "-protocol_whitelist", "file,udp,rtp,srtp", "-i", sdp,
                "-map", "0:v", "-map", "0:a", "-c", "copy", "-t", "1", "-y", out,
            ])
        #expect(waitForUDPListener(port: port), "ffmpeg did not bind \(port)")
        let srtp = "rtp-cipher=aes-128-icm rtp-auth=hmac-sha1-80 rtcp-cipher=aes-128-icm rtcp-auth=hmac-sha1-80"
        let pipeline = """
            videotestsrc num-buffers=75 ! video/x-raw,width=160,height=120,framerate=30/1 ! vp8enc deadline=1 keyframe-max-dist=10 ! \
            rtpvp8pay pt=96 ssrc=1111 ! srtpenc key=\(Self.hex(Self.key(1))) \(srtp) ! udpsink host=127.0.0.1 port=\(port) sync=true \
            audiotestsrc num-buffers=125 samplesperbuffer=960 ! audio/x-raw,rate=48000,channels=2 ! opusenc ! \
            rtpopuspay pt=111 ssrc=2222 ! srtpenc key=\(Self.hex(Self.key(2))) \(srtp) ! udpsink host=127.0.0.1 port=\(port + 2) sync=true
            """
        let gst = try runTool("gst-launch-1.0", ["-q"] + pipeline.split(separator: " ").map(String.init), timeout: 20)
        #expect(gst.status == 0, "\(gst.stderr)")
        let ff = ffmpeg.wait(timeout: 10)
        #expect(!ff.timedOut && ff.status == 0, "\(ff.stderr)")
        let probe = try runTool(
            "ffprobe",
            [
                "-v", "error", "-count_packets", "-show_entries", "stream=codec_name,nb_read_packets",
                "-of", "csv=p=0", out,
            ])
        let streams = probe.stdout.split(separator: "\n").map { $0.split(separator: ",") }
        #expect(streams.count == 2, "\(probe.stdout)\(probe.stderr)")
        for s in streams where s.count == 2 {
            // One second of 30 fps video and 20 ms audio, minus what arrived before ffmpeg locked on.
            let minimum = s[0] == "vp8" ? 20 : 35
            #expect(["vp8", "opus"].contains(s[0]) && (Int(s[1]) ?? 0) >= minimum, "\(probe.stdout)")
        }
    }

    @Test func gstreamerReceivesSRTPFromFFmpegWithCapsFromOurSDP() throws {
        let port = cliFreePort()
        let video = Self.description(port: port).media[0]
        let caps = try #require(video.gstreamerCaps)
        #expect(caps.hasPrefix("application/x-srtp, media=(string)video, payload=(int)96, clock-rate=(int)90000"))
        let gst = try ToolProcess(
            "gst-launch-1.0",
            [
                "-q", "udpsrc", "port=\(port)", "caps=\(caps)", "!", "srtpdec", "!",
                "rtpvp8depay", "!", "vp8dec", "!", "fakesink", "num-buffers=10",
            ])
        #expect(waitForUDPListener(port: port), "gst-launch did not bind \(port)")
        let key = Base64.encode(video.crypto[0].keys[0].keyAndSalt)
        let ff = try runTool(
            "ffmpeg",
            [
                "-v", "error", "-re", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=30", "-t", "1",
                "-c:v", "libvpx", "-deadline", "realtime", "-g", "10", "-payload_type", "96", "-ssrc", "1111",
                "-f", "rtp", "-srtp_out_suite", "AES_CM_128_HMAC_SHA1_80", "-srtp_out_params", key,
                "srtp://127.0.0.1:\(port)?pkt_size=1200",
            ], timeout: 15)
        #expect(ff.status == 0, "\(ff.stderr)")
        let run = gst.wait(timeout: 5)
        #expect(!run.timedOut && run.status == 0, "GStreamer decoded fewer than 10 frames: \(run.stderr)")
    }

    @Test func parsesTheSDPFFmpegWritesForItsSRTPStream() throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let port = cliFreePort()
        let key = Self.key(7)
        let run = try runTool(
            "ffmpeg",
            [
                "-v", "error", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-frames:v", "1",
                "-c:v", "libvpx", "-f", "rtp", "-srtp_out_suite", "AES_CM_128_HMAC_SHA1_32",
                "-srtp_out_params", Base64.encode(key), "-sdp_file", dir.file("ff.sdp"),
                "srtp://127.0.0.1:\(port)",
            ])
        #expect(run.status == 0, "\(run.stderr)")
        let s = try SDPSessionDescription.read(path: dir.file("ff.sdp"))
        #expect(s.media.count == 1)
        let m = s.media[0]
        #expect(m.type == "video" && m.port == port && m.rtpMap(for: m.payloadTypes[0])?.encoding == "VP8")
        #expect(m.crypto.first?.suite == "AES_CM_128_HMAC_SHA1_32")
        #expect(m.crypto.first?.keys.first?.keyAndSalt == key)
    }

    @Test func gstreamerSdpdemuxReceivesThroughOurPlainSDP() throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        // sdpdemux binds the port the description names. In one `make test-e2e` run (lanes 2
        // and 3 side by side) it never bound the port chosen here within 10 s and then timed out
        // for want of packets, while alone it binds within a second: so a receiver that has not
        // bound its port is started again on another one (at most twice), and what held the
        // port is printed.
        var port = 0, gst: ToolProcess?, sdp = ""
        for attempt in 0..<3 where gst == nil {
            port = cliFreePort()
            var s = Self.description(port: port, crypto: false)
            s.media.removeLast()
            sdp = dir.file("plain-\(attempt).sdp")
            try s.write(to: sdp)
            let started = try ToolProcess(
                "gst-launch-1.0",
                [
                    "-q", "filesrc", "location=\(sdp)", "!", "sdpdemux", "timeout=5000000", "!",
                    "rtpvp8depay", "!", "vp8dec", "!", "fakesink", "num-buffers=10",
                ])
            if waitForUDPListener(port: port, seconds: 4) {
                gst = started
            } else {
                let holders = (try? runTool("sh", ["-c", "ss -uanp 'sport = :\(port)'"], timeout: 5))?.stdout ?? ""
                print("sdpdemux did not bind \(port) within 4 s (attempt \(attempt + 1)); on the port now: \(holders)")
                started.signal(SIGTERM)
                _ = started.wait(timeout: 2)
            }
        }
        let receiver = try #require(gst, "gst-launch did not bind the port of its description in 3 attempts")
        // 3 s of video with a keyframe every 10 frames: a receiver whose pipeline is still
        // starting when the first packets come (a busy machine) still sees 10 frames.
        let send = try runTool(
            "gst-launch-1.0",
            [
                "-q", "videotestsrc", "num-buffers=90", "!",
                "video/x-raw,width=160,height=120,framerate=30/1", "!", "vp8enc", "deadline=1", "keyframe-max-dist=10", "!",
                "rtpvp8pay", "pt=96", "ssrc=1111", "!", "udpsink", "host=127.0.0.1", "port=\(port)",
                "sync=true",
            ], timeout: 15)
        #expect(send.status == 0)
        let run = receiver.wait(timeout: 5)
        #expect(!run.timedOut && run.status == 0, "sdpdemux decoded fewer than 10 frames: \(run.stderr)")
    }
}
