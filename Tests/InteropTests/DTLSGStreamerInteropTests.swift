import Foundation
import MediaCore
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Counts decoded frames and remembers which synthetic frame indices came out.
private final class CountingRenderer: VideoRenderer, @unchecked Sendable {
    let frames = Mutex(0)
    func render(_ frame: DecodedVideoFrame) { frames.withLock { $0 += 1 } }
}

/// `openssl x509 -fingerprint -sha256` of a PEM certificate, as an SDP fingerprint.
private func opensslFingerprint(_ pemPath: String) throws -> DTLSFingerprint? {
    let run = try runTool("openssl", ["x509", "-in", pemPath, "-noout", "-fingerprint", "-sha256"])
    guard run.status == 0, let hex = run.stdout.split(separator: "=").last else { return nil }
    return DTLSFingerprint(sdpValue: "sha-256 " + hex.trimmingCharacters(in: .whitespacesAndNewlines))
}

/// DTLS-SRTP against an independent implementation: GStreamer's `dtlssrtpenc`/`dtlssrtpdec`
/// (gst-plugins-bad, OpenSSL underneath but its own agent, certificate handling and SRTP element),
/// over UDP on loopback. One `DTLSTransport` and one socket on our side; one DTLS association on
/// GStreamer's (the encoder and decoder share a connection id). GStreamer sends VP8 that our
/// receive pipeline decrypts with the exported keys and decodes; we send VP8 that GStreamer
/// decrypts with its keys and decodes to a file.
@Suite(
    .serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/gst-launch-1.0"), "GStreamer not installed"))
struct DTLSGStreamerInteropTests {
    @Test(arguments: [false, true])
    func dtlsSRTPWithGStreamerCarriesVP8BothWays(gstreamerIsClient: Bool) throws {
        let inspect = try runTool("gst-inspect-1.0", ["dtlssrtpenc"])
        try #require(inspect.status == 0, "GStreamer's dtls plugin (gst-plugins-bad) is missing: \(inspect.stderr)")
        let dir = InteropTempDir()
        defer { dir.remove() }

        // GStreamer's certificate: we make it, so we know the fingerprint to expect (as signalling
        // would tell us) and compute it with openssl, not with our own code.
        let made = try runTool(
            "openssl",
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", dir.file("key.pem"),
                "-out", dir.file("cert.pem"), "-days", "2", "-subj", "/CN=gstreamer-peer",
            ])
        try #require(made.status == 0, "openssl could not make a certificate: \(made.stderr)")
        let gstFingerprint = try #require(try opensslFingerprint(dir.file("cert.pem")))
        let pem = String(decoding: dir.read("cert.pem") + dir.read("key.pem"), as: UTF8.self)

        var conf = DTLSTransport.Configuration(role: gstreamerIsClient ? .passive : .active)
        conf.handshakeTimeout = 10
        let transport = try DTLSTransport(configuration: conf)
        transport.setRemoteFingerprint(gstFingerprint)
        // Our fingerprint is the one openssl computes for our certificate.
        dir.write("ours.pem", Array(transport.certificatePEM.utf8))
        #expect(try opensslFingerprint(dir.file("ours.pem")) == transport.fingerprint)

        var options = UDPSocket.Options()
        options.receiveBufferSize = 1 << 21
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0), options: options)
        let ourPort = try socket.localAddress().port
        let gstPort = cliFreePort()
        let gstAddress = SocketAddress.loopbackIPv4(port: UInt16(gstPort))
        transport.onDatagram = { d in _ = try? socket.send(d, to: gstAddress) }

        let ourSSRC: UInt32 = 0x5EED_0001
        let ourFrames = 45
        let packetsOfFrame = try synthesizedVP8Packets(frames: ourFrames, ssrc: ourSSRC, firstSequence: 1000, mtu: 1100)
        let gstFrames = 150

        // udpsrc -> dtlssrtpdec (DTLS in, our SRTP decrypted) -> decode to a file;
        // videotestsrc -> VP8 -> dtlssrtpenc (its DTLS flights and SRTP) -> udpsink to our port.
        let rtpCaps = "application/x-rtp,media=(string)video,clock-rate=(int)90000,encoding-name=(string)VP8,payload=(int)96"
        let gst = try ToolProcess(
            "gst-launch-1.0",
            [
                "-q", "udpsrc", "port=\(gstPort)", "address=127.0.0.1", "!",
                "dtlssrtpdec", "name=d", "connection-id=revue", "pem=\"\(pem)\"",
                "d.rtp_src", "!", rtpCaps, "!", "rtpjitterbuffer", "latency=100", "!", "rtpvp8depay", "!", "vp8dec", "!",
                "video/x-raw,format=I420", "!", "filesink", "location=\(dir.file("out.yuv"))", "buffer-mode=2",
                "d.rtcp_src", "!", "fakesink", "async=false",
                "videotestsrc", "is-live=true", "num-buffers=\(gstFrames)", "pattern=smpte", "!",
                "video/x-raw,format=I420,width=320,height=240,framerate=30/1", "!",
                "vp8enc", "deadline=1", "keyframe-max-dist=10", "target-bitrate=600000", "!",
                // The encoder's sink pad is named: GStreamer 1.22 crashes when gst-launch requests one
                // without a name.
                "rtpvp8pay", "pt=96", "ssrc=305419896", "mtu=1100", "!", "e.rtp_sink_0",
                "dtlssrtpenc", "name=e", "connection-id=revue", "is-client=\(gstreamerIsClient)", "e.src", "!",
                "udpsink", "host=127.0.0.1", "port=\(ourPort)", "sync=false", "async=false",
            ])
        defer { if gst.process.isRunning { gst.signal(SIGKILL) } }
        #expect(waitForUDPListener(port: gstPort), "gst-launch did not bind \(gstPort)")
        try #require(gst.process.isRunning, "gst-launch exited at once: \(gst.wait(timeout: 1).stderr)")

        // The handshake, driven as a peer connection would: datagrams in, timers.
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 16)
        defer { buffer.deallocate() }
        let start = MonotonicTime.now
        transport.start(now: start)
        var media = 0
        while transport.state == .connecting || transport.state == .new {
            let now = MonotonicTime.now
            if now - start > .seconds(12) { break }
            let wait = transport.nextDeadline(now: now).map { $0 > now ? Int(($0 - now).inNanoseconds / 1_000_000) + 1 : 0 } ?? 50
            if try socket.waitUntilReadable(timeoutMilliseconds: min(wait, 50)) {
                let got = try socket.receive(into: buffer)
                let datagram = UnsafeRawBufferPointer(rebasing: buffer[0..<got.count])
                if let first = datagram.first, DTLSTransport.isDTLS(firstByte: first) {
                    transport.handle(datagram: datagram, now: .now)
                } else {
                    media += 1
                }
            }
            transport.handleTimeout(now: .now)
        }
        let handshakeMs = Double((MonotonicTime.now - start).inNanoseconds) / 1e6
        try #require(
            transport.state == .connected,
            "DTLS with GStreamer: \(transport.state), \(transport.statistics); gst-launch: \(gst.process.isRunning ? "running" : gst.wait(timeout: 1).stderr)"
        )
        let keys = try #require(transport.takeKeys())
        print(
            "DTLS with GStreamer (GStreamer \(gstreamerIsClient ? "client" : "server")): \(keys.suite) in \(handshakeMs) ms, "
                + "\(transport.statistics.retransmissions) retransmissions, \(media) media datagrams before connected")
        #expect(transport.peerFingerprint == gstFingerprint)
        // Our pre-check refused none of GStreamer's records.
        #expect(
            transport.statistics.malformedDropped == 0 && transport.statistics.unexpectedDropped == 0, "\(transport.statistics)")

        // GStreamer -> us: our receive pipeline owns the socket from here, with the exported keys.
        var receive = ReceivePipelineConfiguration(remoteKey: keys.receive)
        receive.localKey = keys.send
        receive.video = [VideoReceiveSettings(codec: .vp8, payloadType: 96)]
        let renderer = CountingRenderer()
        let receiver = try ReceivePipeline(socket: socket, configuration: receive, renderer: renderer)
        receiver.start()

        // Us -> GStreamer: our VP8, protected with our send key, paced at 30 fps.
        let protect = try SRTPContext(material: keys.send, direction: .outbound)
        let sendStart = MonotonicTime.now.nanoseconds
        for (i, packets) in packetsOfFrame.enumerated() {
            while MonotonicTime.now.nanoseconds < sendStart + UInt64(i) * 33_333_333 { usleep(1000) }
            for p in packets {
                p.withUnsafeBytes { buffer.copyMemory(from: $0) }
                var bufferSpan = buffer.mutableBytes
                let m = try protect.protect(&bufferSpan, length: p.count)
                _ = try socket.send(UnsafeRawBufferPointer(rebasing: buffer[0..<m]), to: gstAddress)
            }
        }
        _ = pollUntil(5) { renderer.frames.withLock { $0 } >= 60 }
        usleep(500_000)  // GStreamer's jitter buffer and decoder drain
        receiver.stop()
        let listened = MonotonicTime.now.nanoseconds - sendStart
        let decodedByUs = renderer.frames.withLock { $0 }
        let receiveStats = receiver.statistics
        gst.signal(SIGINT)
        let run = gst.wait(timeout: 5)

        let out = readI420Frames(dir.read("out.yuv"), width: 320, height: 240)
        var indices = Set<Int>()
        for f in out { if let i = SyntheticVideo.frameIndex(in: f.view) { indices.insert(i) } }
        print(
            "DTLS with GStreamer: we decoded \(decodedByUs) frames of GStreamer's 30 fps stream in the "
                + "\(Double(listened) / 1e9) s we listened "
                + "(auth failures \(receiveStats.authFailures)); GStreamer decoded \(out.count) frames, "
                + "\(indices.count) of our \(ourFrames) distinct")
        #expect(decodedByUs >= 20, "we decoded \(decodedByUs) frames of GStreamer's SRTP")
        // dtlssrtpenc sends SRTP under a placeholder key until its own handshake completes; as
        // client it completes after us, so a few packets may still fail authentication here.
        #expect(receiveStats.authFailures < 30, "\(receiveStats.authFailures) SRTP packets from GStreamer failed authentication")
        #expect(
            indices.count >= ourFrames - 5,
            "GStreamer decoded \(indices.count) of our \(ourFrames) frames; missing \(Set(0..<ourFrames).subtracting(indices).sorted()); \(run.stderr)"
        )
    }
}
