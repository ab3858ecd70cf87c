import Foundation
import MediaCore
import MediaTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// GStreamer's srtpenc/srtpdec names for a suite (cipher, auth): RFC 7714 GCM carries its own tag.
private func gstCipher(_ suite: SRTPSuite) -> (cipher: String, auth: String) {
    suite == .aeadAES128GCM ? ("aes-128-gcm", "null") : ("aes-128-icm", "hmac-sha1-80")
}

private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

/// Keeps a copy of every decoded frame with its RTP timestamp.
private final class CopyingRenderer: VideoRenderer, @unchecked Sendable {
    let frames = Mutex<[(UInt32, VideoFrame)]>([])
    func render(_ frame: DecodedVideoFrame) {
        let copy = VideoFrame(width: frame.view.width, height: frame.view.height)
        copy.copy(from: frame.view)
        frames.withLock { $0.append((frame.rtpTimestamp, copy)) }
    }
}

private final class PCMSink: AudioSink, @unchecked Sendable {
    let samples = Mutex<[Int16]>([])
    func play(_ s: Span<Int16>, sampleRate: Int, channels: Int) { samples.withLock { $0 += copied(s) } }
}

/// Reads I420 frames of `width` x `height` packed back to back (GStreamer raw output).
func readI420Frames(_ bytes: [UInt8], width: Int, height: Int) -> [VideoFrame] {
    let size = width * height * 3 / 2
    var out: [VideoFrame] = []
    var at = 0
    while at + size <= bytes.count {
        let f = VideoFrame(width: width, height: height)
        bytes.withUnsafeBufferPointer { b in
            let base = b.baseAddress! + at
            f.copy(
                from: I420View(
                    width: width, height: height, y: base, strideY: width,
                    u: base + width * height, strideU: width / 2,
                    v: base + width * height * 5 / 4, strideV: width / 2))
        }
        out.append(f)
        at += size
    }
    return out
}

@Suite(.serialized) struct ReceiveGStreamerInteropTests {
    @Test(arguments: [SRTPSuite.aesCM128HMACSHA1_80, .aeadAES128GCM])
    func gstreamerSendsSRTPVideoAndOpusAndWeDecodeEveryFrame(suite: SRTPSuite) throws {
        let dir = InteropTempDir()
        defer { dir.remove() }
        let key = SRTPKeyMaterial.random(for: suite)
        var options = UDPSocket.Options()
        options.receiveBufferSize = 1 << 21
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0), options: options)
        var conf = ReceivePipelineConfiguration(remoteKey: key)
        conf.video = [VideoReceiveSettings(codec: .vp8, payloadType: 96)]
        conf.audio = AudioReceiveSettings(payloadType: 111)
        let renderer = CopyingRenderer()
        let receiver = try ReceivePipeline(socket: socket, configuration: conf, renderer: renderer)
        let sink = PCMSink()
        let clock = AudioPlayoutClock(stream: receiver.audio!, sink: sink)
        receiver.start()
        clock.start()
        let port = try socket.localAddress().port
        let (cipher, auth) = gstCipher(suite)
        let srtp =
            "srtpenc key=\(hex(key.keyAndSalt)) rtp-cipher=\(cipher) rtp-auth=\(auth) rtcp-cipher=\(cipher) rtcp-auth=\(auth)"
        let frames = 45
        let pipeline = """
            videotestsrc num-buffers=\(frames) is-live=true pattern=smpte horizontal-speed=4 \
            ! video/x-raw,format=I420,width=320,height=240,framerate=30/1 ! tee name=t \
            t. ! queue ! filesink location=\(dir.file("raw.yuv")) \
            t. ! queue ! vp8enc deadline=1 target-bitrate=800000 keyframe-max-dist=1000 \
            ! rtpvp8pay pt=96 ssrc=305419896 mtu=1200 ! \(srtp) ! udpsink host=127.0.0.1 port=\(port) \
            audiotestsrc is-live=true num-buffers=75 samplesperbuffer=960 freq=440 volume=0.5 \
            ! audio/x-raw,rate=48000,channels=1 ! opusenc frame-size=20 ! rtpopuspay pt=111 ssrc=2271560481 \
            ! \(srtp) ! udpsink host=127.0.0.1 port=\(port)
            """
        let run = try runTool("gst-launch-1.0", ["-q"] + pipeline.split(separator: " ").map(String.init), timeout: 30)
        #expect(run.status == 0, "gst-launch failed: \(run.stderr)")
        usleep(20_000)
        let playing = receiver.inboundStats
        usleep(300_000)
        let final = receiver.inboundStats
        clock.stop()
        receiver.stop()

        let raw = readI420Frames(dir.read("raw.yuv"), width: 320, height: 240)
        #expect(raw.count == frames)
        let decoded = renderer.frames.withLock { $0 }.sorted { $0.0 < $1.0 }
        #expect(decoded.count == frames, "decoded \(decoded.count) of \(frames) frames")
        var worst = 100.0
        for (i, (_, f)) in decoded.enumerated() where i < raw.count {
            worst = min(worst, Quality.psnr(raw[i].view, f.view))
        }
        #expect(worst > 30, "lowest PSNR against GStreamer's source frames: \(worst) dB")
        let stats = receiver.statistics
        #expect(stats.authFailures == 0 && stats.replays == 0)
        let video = try #require(final.first { $0.kind == "video" })
        #expect(video.framesDecoded == UInt64(frames) && video.packetsLost == 0)

        // Audio: the 440 Hz tone comes out at 440 Hz, with no concealment while it played.
        let audio = try #require(playing.first { $0.kind == "audio" })
        #expect(audio.packetsReceived >= 75)
        #expect(audio.concealedSamples == 0, "concealed \(audio.concealedSamples)")
        let pcm = sink.samples.withLock { $0 }
        let loud = pcm.enumerated().filter { abs(Int($0.element)) > 2000 }.map(\.offset)
        let body = pcm[(loud.first ?? 0)..<(loud.last ?? 0)]
        var crossings = 0
        var previous: Int16 = 0
        for s in body { if (previous < 0) != (s < 0) { crossings += 1 }; previous = s }
        let frequency = Double(crossings) / 2 / (Double(body.count) / 48_000)
        #expect(abs(frequency - 440) < 10, "decoded tone at \(frequency) Hz over \(body.count) samples")
    }

    @Test(arguments: [SRTPSuite.aesCM128HMACSHA1_80, .aeadAES128GCM])
    func weSendSRTPVideoAndGStreamerDecodesEveryFrame(suite: SRTPSuite) throws {
        let dir = InteropTempDir()
        defer { dir.remove() }
        let key = SRTPKeyMaterial.random(for: suite)
        let port = cliFreePort()
        let ssrc: UInt32 = 0x0BAD_CAFE
        let (cipher, auth) = gstCipher(suite)
        let caps =
            "application/x-srtp,media=(string)video,clock-rate=(int)90000,encoding-name=(string)VP8,"
            + "payload=(int)96,ssrc=(uint)\(ssrc),srtp-key=(buffer)\(hex(key.keyAndSalt)),"
            + "srtp-cipher=(string)\(cipher),srtp-auth=(string)\(auth),srtcp-cipher=(string)\(cipher),srtcp-auth=(string)\(auth)"
        // Encode and packetize first, so GStreamer can be told how many packets to expect
        // (udpsrc num-buffers: it ends the stream by itself and flushes the file).
        let frames = 45
        let packetsOfFrame = try synthesizedVP8Packets(frames: frames, ssrc: ssrc, firstSequence: 100, mtu: 1200)
        let total = packetsOfFrame.reduce(0) { $0 + $1.count }

        let gst = try ToolProcess(
            "gst-launch-1.0",
            [
                "-q", "udpsrc", "port=\(port)", "address=127.0.0.1", "num-buffers=\(total)", "caps=\(caps)", "!", "srtpdec", "!",
                "rtpjitterbuffer", "latency=200", "!", "rtpvp8depay", "!", "vp8dec", "!",
                "video/x-raw,format=I420", "!", "filesink", "location=\(dir.file("out.yuv"))",
            ])
        #expect(waitForUDPListener(port: port), "gst-launch did not bind \(port)")

        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let destination = SocketAddress.loopbackIPv4(port: UInt16(port))
        let protect = try SRTPContext(material: key, direction: .outbound)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 16)
        defer { buffer.deallocate() }
        let start = MonotonicTime.now.nanoseconds
        for (i, packets) in packetsOfFrame.enumerated() {
            while MonotonicTime.now.nanoseconds < start + UInt64(i) * 33_333_333 { usleep(1000) }
            for p in packets {
                p.withUnsafeBytes { buffer.copyMemory(from: $0) }
                var bufferSpan = buffer.mutableBytes
                let m = (try? protect.protect(&bufferSpan, length: p.count)) ?? 0
                _ = try? socket.send(UnsafeRawBufferPointer(rebasing: buffer[0..<m]), to: destination)
            }
        }
        let run = gst.wait(timeout: 10)
        #expect(!run.timedOut && run.status == 0, "gst-launch did not finish: \(run.stderr)")

        let out = readI420Frames(dir.read("out.yuv"), width: 320, height: 240)
        var indices = Set<Int>()
        var worst = 100.0
        let reference = VideoFrame(width: 320, height: 240)
        for f in out {
            guard let i = SyntheticVideo.frameIndex(in: f.view) else { continue }
            indices.insert(i)
            SyntheticVideo.render(frameIndex: i, into: reference)
            worst = min(worst, Quality.psnr(reference.view, f.view))
        }
        #expect(
            indices == Set(0..<frames),
            "GStreamer decoded \(out.count) frames; missing \(Set(0..<frames).subtracting(indices).sorted()); \(run.stderr)")
        #expect(worst > 30, "lowest PSNR \(worst) dB")
    }
}

/// The plain RTP packets, frame by frame, of `frames` synthetic 320x240 frames (`SyntheticVideo`)
/// encoded with VP8 at 800 kbit/s and packetized for `mtu`, payload type 96, 90 kHz timestamps
/// 3000 apart, sequence numbers from `firstSequence`.
func synthesizedVP8Packets(frames: Int, ssrc: UInt32, firstSequence: UInt16, mtu: Int) throws -> [[[UInt8]]] {
    var conf = VPXEncoderConfiguration(codec: .vp8, width: 320, height: 240)
    conf.bitrate = 800_000
    let encoder = try VPXEncoder(conf)
    var packetizer = VP8Packetizer()
    let frame = VideoFrame(width: 320, height: 240)
    var packetsOfFrame: [[[UInt8]]] = []
    var seq = firstSequence
    for i in 0..<frames {
        SyntheticVideo.render(frameIndex: i, into: frame)
        var packets: [[UInt8]] = []
        try encoder.encode(frame.view, pts: Int64(i) * 3000) { encoded in
            var header = RTPHeader(payloadType: 96, timestamp: UInt32(i * 3000), ssrc: ssrc)
            let split = packetizer.packetize(frameSize: encoded.byteCount, maxPayloadSize: header.maxPayloadSize(mtu: mtu))
            for p in 0..<split.count {
                header.sequenceNumber = seq
                seq &+= 1
                var bytes = [UInt8](repeating: 0, count: mtu + 100)
                let n = bytes.withUnsafeMutableBytes {
                    $0.appending { split.writePacket(at: p, header: &header, of: encoded.data.bytes, into: &$0) }
                }
                packets.append(Array(bytes[0..<n]))
            }
        }
        packetsOfFrame.append(packets)
    }
    return packetsOfFrame
}
