import Foundation
import MediaCore
// `revue-media send`, `receive`, `relay` and `demo` over real loopback UDP against independent
// peers: ffmpeg receives our stream through our SDP (AES-CM, the suite ffmpeg knows) and writes a
// decodable file whose frames are the source frames (bar code and PSNR); GStreamer decodes our
// stream with caps from our SDP; our receiver decodes GStreamer's; tshark reads our pcap.
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.serialized) struct CLIStreamTests {
    static let keyBytes: [UInt8] = (0..<30).map { UInt8(truncatingIfNeeded: $0 * 17 + 3) }
    static var keyBase64: String { Data(keyBytes).base64EncodedString() }
    static var keyHex: String { keyBytes.map { String(format: "%02x", $0) }.joined() }

    /// Frames of a Y4M whose bar code names a source frame: how many, and their mean PSNR
    /// against the source frame re-rendered.
    static func identifiedFrames(_ path: String) throws -> (frames: Int, identified: Int, psnr: Double) {
        let r = try Y4MReader(path: path)
        let f = r.makeFrame(), ref = r.makeFrame()
        var n = 0, ok = 0, sum = 0.0
        while try r.readFrame(into: f) {
            n += 1
            guard let index = SyntheticVideo.frameIndex(in: f.view) else { continue }
            SyntheticVideo.render(frameIndex: index, into: ref)
            ok += 1
            sum += Quality.psnr(ref.view, f.view)
        }
        return (n, ok, ok == 0 ? 0 : sum / Double(ok))
    }

    @Test func ffmpegReceivesOurSendThroughOurSDPAndTsharkReadsThePcap() throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let port = cliFreePort()
        let send = try ToolProcess(
            CLIBinary.path,
            [
                "send", "--pattern", "moving", "--pattern", "speech", "--size", "320x240",
                "--seconds", "4", "--keyint", "10", "--to", "127.0.0.1:\(port)",
                "--suite", "aes-cm-128-hmac-sha1-80", "--key", Self.keyBase64,
                "--sdp", "s.sdp", "--pcap", "sent.pcap", "--json", "-q",
            ], cwd: dir.path)
        // The SDP is written before the first packet; ffmpeg joins from it (keyframes every 10 frames).
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: dir.file("s.sdp")) && Date() < deadline { usleep(10_000) }
        let ffmpeg = try ToolProcess(
            "ffmpeg",
            [
                "-v", "error", "-protocol_whitelist", "file,udp,rtp,srtp", "-i", dir.file("s.sdp"),
                "-map", "0:v", "-map", "0:a", "-c", "copy", "-t", "2", "-y", dir.file("ff.mkv"),
            ])
        let sent = send.wait(timeout: 30)
        #expect(sent.status == 0, "\(sent.stderr)")
        let ff = ffmpeg.wait(timeout: 15)
        #expect(!ff.timedOut && ff.status == 0, "\(ff.stderr)")
        // The SDP parses back with the AES-CM key ffmpeg needs.
        let sdp = try SDPSessionDescription.read(path: dir.file("s.sdp"))
        #expect(sdp.media.map(\.type) == ["video", "audio"])
        #expect(
            sdp.media.allSatisfy {
                $0.crypto.first?.isSupportedByFFmpeg == true && $0.crypto.first?.keys.first?.keyAndSalt == Self.keyBytes
            })
        // ffmpeg's file decodes: its frames are our source frames.
        let dec = try runTool(
            "ffmpeg", ["-v", "error", "-i", dir.file("ff.mkv"), "-map", "0:v", "-pix_fmt", "yuv420p", dir.file("ff.y4m")])
        #expect(dec.status == 0, "\(dec.stderr)")
        let frames = try Self.identifiedFrames(dir.file("ff.y4m"))
        #expect(frames.frames >= 30, "\(frames)")
        #expect(frames.identified >= frames.frames - 2 && frames.psnr > 30, "\(frames)")
        let audio = try runTool(
            "ffprobe",
            [
                "-v", "error", "-count_packets", "-select_streams", "a", "-show_entries",
                "stream=codec_name,nb_read_packets", "-of", "csv=p=0", dir.file("ff.mkv"),
            ])
        #expect(
            audio.stdout.hasPrefix("opus,")
                && (Int(audio.stdout.split(separator: ",").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0)
                    >= 50,
            "\(audio.stdout)")
        // tshark reads every sent packet from the pcap, none malformed.
        let result = try #require(cliJSON(sent.stdout))
        let packets =
            ((result["video"] as? [String: Any])?["packets"] as? Int ?? 0)
            + ((result["audio"] as? [String: Any])?["packets"] as? Int ?? 0)
        let tshark = try runTool(
            "tshark",
            [
                "-r", dir.file("sent.pcap"), "-d", "udp.port==\(port),rtp", "-d", "udp.port==\(port + 2),rtp",
                "-T", "fields", "-e", "rtp.ssrc", "-e", "_ws.expert.message",
            ])
        #expect(tshark.status == 0, "\(tshark.stderr)")
        let lines = tshark.stdout.split(separator: "\n")
        #expect(lines.count == packets && packets > 300, "tshark saw \(lines.count), we sent \(packets)")
        #expect(!tshark.stdout.lowercased().contains("malformed"))
    }

    @Test(arguments: ["aes-cm-128-hmac-sha1-80", "aes-128-gcm"])
    func gstreamerDecodesOurSendWithCapsFromOurSDP(_ suite: String) throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let port = cliFreePort()
        // Write the SDP first with a short run to a discard port, then send for real with the same key.
        let key = suite == "aes-128-gcm" ? Data(Self.keyBytes.prefix(28)).base64EncodedString() : Self.keyBase64
        let common = ["--pattern", "moving", "--size", "160x120", "--ssrc", "4242", "--suite", suite, "--key", key, "-q"]
        let dry = try revueMedia(["send", "--seconds", "0.05", "--to", "127.0.0.1:9", "--sdp", "s.sdp"] + common, cwd: dir.path)
        #expect(dry.status == 0, "\(dry.stderr)")
        let sdp = try SDPSessionDescription.read(path: dir.file("s.sdp"))
        let caps = try #require(sdp.media.first?.gstreamerCaps)
        let gst = try ToolProcess(
            "gst-launch-1.0",
            [
                "-q", "udpsrc", "port=\(port)", "caps=\(caps)", "!", "srtpdec", "!", "rtpvp8depay",
                "!", "vp8dec", "!", "fakesink", "num-buffers=20",
            ])
        #expect(waitForUDPListener(port: port), "gst-launch did not bind \(port)")
        let send = try revueMedia(["send", "--seconds", "2", "--to", "127.0.0.1:\(port)"] + common, cwd: dir.path)
        #expect(send.status == 0, "\(send.stderr)")
        let run = gst.wait(timeout: 5)
        #expect(!run.timedOut && run.status == 0, "GStreamer decoded fewer than 20 frames: \(run.stderr)")
    }

    /// GStreamer sends VP8 and Opus as SRTP (AES-CM); our receive (through the receive pipeline,
    /// and with --raw through the CLI's bitstream path) decodes the video frames (count, size) and
    /// the audio (a 440 Hz tone: nearly all of its power stays at 440 Hz).
    @Test(arguments: [false, true])
    func ourReceiveDecodesAStreamSentByGStreamer(raw: Bool) throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let port = cliFreePort()
        let recv = try ToolProcess(
            CLIBinary.path,
            [
                "receive", "--listen", "127.0.0.1:\(port)", "--suite", "aes-cm-128-hmac-sha1-80",
                "--key", Self.keyBase64, "-o", "r.y4m", "-o", "r.wav", "-o", "r.ivf",
                "--duration", "4", "--json", "-q",
            ] + (raw ? ["--raw"] : []), cwd: dir.path)
        #expect(waitForUDPListener(port: port), "receive did not bind \(port)")
        let srtp = "rtp-cipher=aes-128-icm rtp-auth=hmac-sha1-80 rtcp-cipher=aes-128-icm rtcp-auth=hmac-sha1-80"
        let pipeline = """
            videotestsrc num-buffers=45 ! video/x-raw,width=160,height=120,framerate=30/1 ! vp8enc deadline=1 keyframe-max-dist=15 ! \
            rtpvp8pay pt=96 ssrc=1111 ! srtpenc key=\(Self.keyHex) \(srtp) ! udpsink host=127.0.0.1 port=\(port) sync=true \
            audiotestsrc freq=440 num-buffers=75 samplesperbuffer=960 ! audio/x-raw,rate=48000,channels=1 ! opusenc ! \
            rtpopuspay pt=111 ssrc=2222 ! srtpenc key=\(Self.keyHex) \(srtp) ! udpsink host=127.0.0.1 port=\(port + 2) sync=true
            """
        let gst = try runTool("gst-launch-1.0", ["-q"] + pipeline.split(separator: " ").map(String.init), timeout: 20)
        #expect(gst.status == 0, "\(gst.stderr)")
        let r = recv.wait(timeout: 15)
        #expect(r.status == 0, "\(r.stderr)")
        let result = try #require(cliJSON(r.stdout))
        let video = try #require(result["video"] as? [String: Any]), audio = try #require(result["audio"] as? [String: Any])
        #expect((video["framesDecoded"] as? Int ?? 0) >= 43, "\(video)")
        #expect((audio["packets"] as? Int ?? 0) >= 73, "\(audio)")
        let info = try ffprobeStream(dir.file("r.y4m"))
        #expect(info["width"] == "160" && (Int(info["nb_read_frames"] ?? "") ?? 0) >= 43)
        let ivf = try ffprobeStream(dir.file("r.ivf"))
        #expect(ivf["codec_name"] == "vp8" && (Int(ivf["nb_read_frames"] ?? "") ?? 0) >= 43)
        let wav = try cliReadWAV(dir.file("r.wav"))
        #expect(wav.rate == 48_000 && wav.samples.count >= 70 * 960)
        // The tone survived: in each 100 ms with sound, the power at 440 Hz (Goertzel) is most of
        // the power. (Playout may shift the phase where it conceals or adapts, so no waveform SNR.)
        var ratios: [Double] = []
        for start in stride(from: 4800, to: wav.samples.count - 4800, by: 4800) {
            let x = wav.samples[start..<(start + 4800)].map(Double.init)
            let total = x.map { $0 * $0 }.reduce(0, +) / 4800
            guard total > 1e-4 else { continue }
            let w = 2 * Double.pi * 440 / 48_000
            var re = 0.0, im = 0.0
            for (n, v) in x.enumerated() { re += v * cos(w * Double(n)); im -= v * sin(w * Double(n)) }
            ratios.append(2 * (re * re + im * im) / (4800 * 4800) / total)
        }
        #expect(ratios.count >= 10)
        let median = ratios.sorted()[ratios.count / 2]
        #expect(median > 0.9, "share of power at 440 Hz: \(ratios)")
    }

    /// Our send -> relay (5 % loss, seeded) -> our receive: the relay's counters add up, the
    /// receive pipeline NACKs the losses, the send pipeline resends them, and nearly every frame
    /// of the 75 decodes.
    @Test func sendThroughTheRelayToReceive() throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let port = cliFreePort()
        let relayPort = cliFreePort()
        let recv = try ToolProcess(
            CLIBinary.path,
            [
                "receive", "--listen", "127.0.0.1:\(port)", "--suite", "aes-128-gcm",
                "--key", Data(Self.keyBytes.prefix(28)).base64EncodedString(), "-o", "r.ivf",
                "--duration", "4", "--json", "-q",
            ], cwd: dir.path)
        let relay = try ToolProcess(
            CLIBinary.path,
            [
                "relay", "--listen", "127.0.0.1:\(relayPort)", "--to", "127.0.0.1:\(port)",
                "--loss", "0.05", "--delay", "10", "--seed", "7", "--duration", "4", "--json", "-q",
            ])
        #expect(waitForUDPListener(port: relayPort), "relay did not bind \(relayPort)")
        let send = try revueMedia([
            "send", "--pattern", "moving", "--size", "160x120", "--seconds", "2.5", "--to", "127.0.0.1:\(relayPort)",
            "--suite", "aes-128-gcm", "--key", Data(Self.keyBytes.prefix(28)).base64EncodedString(), "--json", "-q",
        ])
        #expect(send.status == 0, "\(send.stderr)")
        let rr = relay.wait(timeout: 15), r = recv.wait(timeout: 15)
        #expect(rr.status == 0 && r.status == 0, "\(rr.stderr) \(r.stderr)")
        let sent = try #require((cliJSON(send.stdout)?["video"] as? [String: Any])?["packets"] as? Int)
        let forward = try #require(cliJSON(rr.stdout)?["forward"] as? [String: Any])
        // NACKed packets are resent through the relay, so it saw at least what was sent.
        let received = forward["received"] as? Int ?? 0
        #expect(received >= sent)
        let lost = forward["droppedByLoss"] as? Int ?? 0
        #expect(lost > 0 && lost < received / 5, "lost \(lost) of \(received)")
        #expect(forward["forwarded"] as? Int == received - lost)
        let receivedJSON = try #require(cliJSON(r.stdout))
        let video = try #require(receivedJSON["video"] as? [String: Any])
        // Every forwarded packet is counted: decoded, or refused by SRTP's replay window (a second
        // copy when a packet was resent after its first copy had already arrived).
        let refused = receivedJSON["rejectedPackets"] as? Int ?? 0
        #expect((video["packets"] as? Int ?? 0) + refused >= sent - lost, "\(video), \(refused) refused")
        #expect((video["nackSent"] as? Int ?? 0) >= 1, "\(video)")
        #expect((video["framesDecoded"] as? Int ?? 0) >= 60, "\(video)")
        #expect((try ffprobeStream(dir.file("r.ivf")))["codec_name"] == "vp8")
    }

    /// Ctrl-C ends `receive` normally: the files are finished and renamed into place, exit 0.
    @Test func interruptFinishesTheReceivedFiles() throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let port = cliFreePort()
        let key = Data(Self.keyBytes.prefix(28)).base64EncodedString()
        let recv = try ToolProcess(
            CLIBinary.path,
            [
                "receive", "--listen", "127.0.0.1:\(port)", "--key", key, "-o", "r.y4m", "-o", "r.ogg",
                "--json", "-q",
            ], cwd: dir.path)
        #expect(waitForUDPListener(port: port), "receive did not bind \(port)")
        let send = try revueMedia([
            "send", "--pattern", "moving", "--pattern", "tone", "--size", "160x120", "--seconds", "1.5",
            "--to", "127.0.0.1:\(port)", "--key", key, "-q",
        ])
        #expect(send.status == 0, "\(send.stderr)")
        usleep(300_000)
        recv.signal(SIGINT)
        let r = recv.wait(timeout: 15)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(dir.contents == ["r.ogg", "r.y4m"])
        let frames = Int(try ffprobeStream(dir.file("r.y4m"))["nb_read_frames"] ?? "") ?? 0
        #expect(frames >= 40, "\(frames) frames")
        let ogg = try runTool("opusinfo", [dir.file("r.ogg")])
        #expect(ogg.status == 0, "\(ogg.stdout)")
    }

    @Test func demoWritesReceivedMediaAndStats() throws {
        let dir = InteropTempDir(); defer { dir.remove() }
        let r = try revueMedia(["demo", "--seconds", "7", "--out", "out", "--size", "320x180", "-q"], cwd: dir.path, timeout: 60)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("PSNR") && r.stdout.contains("p99") && r.stdout.contains("lip sync"))
        let stats = try #require(cliJSON(String(decoding: Data(dir.read("out/stats.json")), as: UTF8.self)))
        let video = try #require(stats["video"] as? [String: Any]), audio = try #require(stats["audio"] as? [String: Any])
        #expect((video["framesSent"] as? Int) == 210)
        #expect((video["framesDecoded"] as? Int ?? 0) >= 190, "\(video)")
        // Lip sync, end to end: the beep of each second the demo reports (from the third, once
        // sync has settled) plays within 45 ms of the frame captured with it (ITU-R BT.1359's
        // detectability bound). As in `LipSyncTests`, one second may measure up to 90 ms, for a
        // late render or pull on a busy machine.
        let sync = try #require(stats["lipSync"] as? [String: Any])
        let offsets = sync["offsetsMs"] as? [Double] ?? []
        #expect(
            offsets.count >= 3 && offsets.filter { abs($0) > 45 }.count <= 1 && offsets.allSatisfy { abs($0) <= 90 }, "\(sync)")
        // The sender's RTCP sender reports reach the receiver, so its lip-sync controller acts:
        // audio is the slower path here (a 40 ms playout buffer after the relay), so video waits.
        #expect((sync["videoDelayMs"] as? Double ?? 0) > 10, "\(sync)")
        #expect((video["psnrMean"] as? Double ?? 0) > 30, "\(video)")
        #expect((video["latencyP50Ms"] as? Double ?? 0) >= 20, "the relay adds 20 ms: \(video)")
        #expect((audio["correlation"] as? Double ?? 0) > 0.6, "\(audio)")
        let ivf = try ffprobeStream(dir.file("out/received.ivf"))
        #expect(ivf["codec_name"] == "vp8" && (Int(ivf["nb_read_frames"] ?? "") ?? 0) >= 50)
        let ogg = try runTool("opusinfo", [dir.file("out/received.ogg")])
        #expect(ogg.status == 0, "\(ogg.stdout)")
        #expect(
            Set(try FileManager.default.contentsOfDirectory(atPath: dir.file("out"))) == [
                "received.ivf", "received.ogg", "stats.json",
            ])
    }
}
