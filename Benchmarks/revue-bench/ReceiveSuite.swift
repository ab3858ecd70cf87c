// The receive path (SRTP unprotect + jitter buffer + depacketize + VP8 decode) against a raw loop
// of the same libsrtp + libvpx calls, and glass-to-glass latency over loopback UDP.
import CMediaShims
import Foundation
import MediaCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

enum ReceiveSuite {
    /// 720p30 VP8 at 2.5 Mbit/s, packetized at MTU 1200 and protected with AEAD_AES_128_GCM.
    struct Stream {
        let key: SRTPKeyMaterial
        let packets: [[UInt8]]
        let frames: Int
    }

    /// 720p30 VP8 at 2.5 Mbit/s from `SyntheticVideo`, packetized at MTU 1200 (SSRC 0xABCD, payload
    /// type 96, sequence numbers from 1) and protected with `key`: one frame's packets at a time.
    /// Shared by the throughput stream and the loopback latency loop.
    final class VP8PacketSource {
        let protect: SRTPContext
        let encoder: VPXEncoder
        var packetizer = VP8Packetizer(pictureID: 1)
        let frame = VideoFrame(width: 1280, height: 720)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 16)
        var seq: UInt16 = 1

        init(key: SRTPKeyMaterial) throws {
            protect = try SRTPContext(material: key, direction: .outbound)
            var conf = VPXEncoderConfiguration(codec: .vp8, width: 1280, height: 720)
            conf.bitrate = 2_500_000
            encoder = try VPXEncoder(conf)
        }

        deinit { buffer.deallocate() }

        /// Renders, encodes and packetizes frame `index`, calling `body` with each protected packet
        /// (valid during the call).
        func packets(frame index: Int, _ body: (UnsafeRawBufferPointer) -> Void) throws {
            SyntheticVideo.render(frameIndex: index, into: frame)
            try encoder.encode(frame.view, pts: Int64(index) * 3000) { e in
                var header = RTPHeader(payloadType: 96, timestamp: UInt32(index * 3000), ssrc: 0xABCD)
                let split = packetizer.packetize(frameSize: e.byteCount, maxPayloadSize: header.maxPayloadSize(mtu: 1200))
                for p in 0..<split.count {
                    header.sequenceNumber = seq
                    seq &+= 1
                    let n = buffer.appending { split.writePacket(at: p, header: &header, of: e.data.bytes, into: &$0) }
                    var bufferSpan = buffer.mutableBytes
                    let m = try! protect.protect(&bufferSpan, length: n)
                    body(UnsafeRawBufferPointer(rebasing: buffer[0..<m]))
                }
            }
        }
    }

    static func makeStream(frames: Int) throws -> Stream {
        let key = SRTPKeyMaterial.random(for: .aeadAES128GCM)
        let source = try VP8PacketSource(key: key)
        var packets: [[UInt8]] = []
        for i in 0..<frames { try source.packets(frame: i) { packets.append(Array($0)) } }
        return Stream(key: key, packets: packets, frames: frames)
    }

    /// A `ReceivePipeline` on a loopback socket with one VP8 track (payload type 96) keyed with a
    /// fresh AEAD_AES_128_GCM key, rendering into a `LatencyRenderer`. Started: stop `pipeline`.
    struct LoopbackReceiver {
        let key: SRTPKeyMaterial
        let socket: UDPSocket
        let renderer: LatencyRenderer
        let pipeline: ReceivePipeline
    }

    static func startLoopbackReceiver() throws -> LoopbackReceiver {
        let key = SRTPKeyMaterial.random(for: .aeadAES128GCM)
        var so = UDPSocket.Options()
        so.receiveBufferSize = 1 << 22
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0), options: so)
        var conf = ReceivePipelineConfiguration(remoteKey: key)
        conf.video = [VideoReceiveSettings(codec: .vp8, payloadType: 96)]
        let renderer = LatencyRenderer()
        let pipeline = try ReceivePipeline(socket: socket, configuration: conf, renderer: renderer)
        pipeline.start()
        return LoopbackReceiver(key: key, socket: socket, renderer: renderer, pipeline: pipeline)
    }

    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        let stream = try makeStream(frames: max(30, Int(150 * options.scale)))
        let work = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 16)
        defer { work.deallocate() }

        try compare(
            reporter, options, suite: "receive", case: "720p30 VP8 SRTP-GCM: unprotect+jitter buffer+depacketize+decode",
            metric: "frames/s", unit: "1/s", higherIsBetter: true, anchorName: "raw libsrtp+libvpx loop"
        ) {
            let inbound = try SRTPContext(material: stream.key, direction: .inbound)
            var settings = VideoReceiveSettings(codec: .vp8, payloadType: 96)
            settings.nackEnabled = false
            // Every packet is fed at one instant to time the processing path: frames are decoded
            // as they complete, not held for their playout time.
            settings.schedulesRendering = false
            let video = try VideoReceiveStream(ssrc: 0xABCD, settings: settings, renderer: nil)
            let t0 = nowNs()
            for p in stream.packets {
                p.withUnsafeBytes { work.copyMemory(from: $0) }
                var workSpan = work.mutableBytes
                let n = try inbound.unprotect(&workSpan, length: p.count)
                let bytes = UnsafeRawBufferPointer(rebasing: work[0..<n])
                let packet = try RTPPacket(parsing: bytes.bytes)
                video.insert(packet, in: bytes, arrival: MonotonicTime(nanoseconds: t0))
                video.process(now: MonotonicTime(nanoseconds: t0))
            }
            let dt = Double(nowNs() - t0) / 1e9
            precondition(video.statsSnapshot().framesDecoded == UInt64(stream.frames), "receive path lost frames")
            return Double(stream.frames) / dt
        } anchor: {
            try rawLoop(stream, work)
        }

        try latency(reporter, options)
        try pipelineLatency(reporter, options)
    }

    /// A sink sending every packet to one address on one socket.
    final class LoopbackSink: PacketSink, @unchecked Sendable {
        let socket: UDPSocket
        let destination: SocketAddress
        init(socket: UDPSocket, destination: SocketAddress) { self.socket = socket; self.destination = destination }
        func write(_ packet: RawSpan) { _ = try? socket.send(packet, to: destination) }
        func flush() {}
    }

    /// Glass to glass through the engine's two halves: `BufferCapturer.capture` (BGRA, as a camera
    /// delivers) -> VideoSendStream (convert, encode, packetize, SRTP) -> loopback UDP ->
    /// ReceivePipeline -> renderer. Measured from the capture call to the renderer call.
    static func pipelineLatency(_ reporter: Reporter, _ options: BenchOptions) throws {
        let rx = try startLoopbackReceiver()
        defer { rx.pipeline.stop() }
        let key = rx.key, rxSocket = rx.socket, renderer = rx.renderer
        var vc = VideoSendStream.Configuration(codec: .vp8, width: 1280, height: 720)
        vc.encoder.bitrate = 2_500_000
        vc.srtp = key
        vc.payloadType = 96
        let tx = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let stream = try VideoSendStream(
            configuration: vc, sink: LoopbackSink(socket: tx, destination: try rxSocket.localAddress()))
        stream.start()
        defer { stream.stop() }
        let frames = max(60, Int(300 * options.scale))
        // Pre-rendered camera frames (BGRA), cycled, so rendering is not part of the latency.
        let distinct = 30
        let stride = 1280 * 4
        let pictures = (0..<distinct).map { i -> UnsafeMutableRawBufferPointer in
            let b = UnsafeMutableRawBufferPointer.allocate(byteCount: stride * 720, alignment: 64)
            SyntheticVideo.renderBGRA(frameIndex: i, width: 1280, height: 720, into: b.baseAddress!, stride: stride)
            return b
        }
        defer { for picture in pictures { picture.deallocate() } }
        var captured = [UInt64](repeating: 0, count: distinct)
        var latencies: [Double] = []
        let start = nowNs()
        for i in 0..<frames {
            while nowNs() < start + UInt64(i) * 33_333_333 { usleep(500) }
            let slot = i % distinct
            // The previous use of this picture index has been shown (or lost) by now: collect it.
            if i >= distinct, let shownAt = renderer.shown.withLock({ $0.removeValue(forKey: slot) }) {
                latencies.append(Double(shownAt &- captured[slot]) / 1e6)
            }
            captured[slot] = nowNs()
            let view = try PixelBufferView.packed(
                format: .bgra, width: 1280, height: 720,
                data: UnsafeRawBufferPointer(pictures[slot]), stride: stride)
            stream.capturer.capture(view, timeStampNs: Int64(captured[slot]))
        }
        usleep(300_000)
        for (slot, t) in renderer.shown.withLock({ $0 }) { latencies.append(Double(t &- captured[slot]) / 1e6) }
        latencies.sort()
        guard !latencies.isEmpty else { return }
        let p50 = latencies[latencies.count / 2], p99 = latencies[min(latencies.count - 1, latencies.count * 99 / 100)]
        record(
            reporter, options, suite: "receive",
            case: "glass-to-glass 720p30 VP8 send+receive pipelines p50 (capture BGRA->rendered)",
            metric: "latency", unit: "ms", higherIsBetter: false, values: [p50])
        record(
            reporter, options, suite: "receive", case: "glass-to-glass 720p30 VP8 send+receive pipelines p99",
            metric: "latency", unit: "ms", higherIsBetter: false, values: [p99])
        record(
            reporter, options, suite: "receive", case: "glass-to-glass send+receive frames measured", metric: "frames", unit: "",
            higherIsBetter: true, values: [Double(latencies.count)])
    }

    /// The same calls without the engine: srtp_unprotect, strip the VP8 descriptor, append to a
    /// frame buffer, vpx_codec_decode + vpx_codec_get_frame at the marker bit.
    static func rawLoop(_ stream: Stream, _ work: UnsafeMutableRawBufferPointer) throws -> Double {
        _ = try SRTPContext(material: stream.key, direction: .inbound)  // srtp_init has run
        var session: srtp_t? = nil
        var policy = srtp_policy_t()
        srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp)
        srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp)
        policy.ssrc.type = ssrc_any_inbound
        policy.window_size = 1024
        var keyBytes = stream.key.keyAndSalt
        keyBytes.withUnsafeMutableBufferPointer {
            policy.key = $0.baseAddress!; _ = srtp_create(&session, &policy)
        }
        defer { srtp_dealloc(session) }
        let ctx = UnsafeMutablePointer<vpx_codec_ctx_t>.allocate(capacity: 1)
        ctx.initialize(to: vpx_codec_ctx_t())
        var cfg = vpx_codec_dec_cfg_t(threads: 1, w: 0, h: 0)
        _ = cms_vpx_dec_init(ctx, vpx_codec_vp8_dx(), &cfg, 0)
        defer { vpx_codec_destroy(ctx); ctx.deallocate() }
        let frame = UnsafeMutableRawPointer.allocate(byteCount: 1 << 21, alignment: 64)
        defer { frame.deallocate() }
        var length = 0
        var decoded = 0
        let t0 = nowNs()
        for p in stream.packets {
            p.withUnsafeBytes { work.copyMemory(from: $0) }
            var octets = Int32(p.count)
            guard srtp_unprotect(session, work.baseAddress, &octets) == srtp_err_status_ok else { fatalError("srtp") }
            let b = work.baseAddress!.assumingMemoryBound(to: UInt8.self)
            let marker = b[1] & 0x80 != 0
            // 12-byte header, no CSRC or extension here; VP8 descriptor: X, then I with M (2 bytes).
            var at = 12
            let x = b[at] & 0x80 != 0
            at += 1
            if x {
                let flags = b[at]; at += 1
                if flags & 0x80 != 0 { at += b[at] & 0x80 != 0 ? 2 : 1 }
                if flags & 0x40 != 0 { at += 1 }
                if flags & 0x30 != 0 { at += 1 }
            }
            let size = Int(octets) - at
            (frame + length).copyMemory(from: b + at, byteCount: size)
            length += size
            if marker {
                _ = vpx_codec_decode(ctx, frame.assumingMemoryBound(to: UInt8.self), UInt32(length), nil, 0)
                var iter: vpx_codec_iter_t? = nil
                if vpx_codec_get_frame(ctx, &iter) != nil { decoded += 1 }
                length = 0
            }
        }
        let dt = Double(nowNs() - t0) / 1e9
        precondition(decoded == stream.frames, "raw loop decoded \(decoded) of \(stream.frames)")
        return Double(stream.frames) / dt
    }

    /// Records decode times per frame index (the SyntheticVideo bar code).
    final class LatencyRenderer: VideoRenderer, @unchecked Sendable {
        let shown = Mutex<[Int: UInt64]>([:])
        func render(_ frame: DecodedVideoFrame) {
            guard let i = SyntheticVideo.frameIndex(in: frame.view) else { return }
            let now = nowNs()
            shown.withLock { $0[i] = now }
        }
    }

    /// Glass to glass in process: capture (render the picture) -> VP8 encode -> packetize -> SRTP
    /// -> loopback UDP -> ReceivePipeline (recvmmsg, unprotect, jitter buffer, decode) -> renderer.
    static func latency(_ reporter: Reporter, _ options: BenchOptions) throws {
        let rx = try startLoopbackReceiver()
        defer { rx.pipeline.stop() }
        let key = rx.key, rxSocket = rx.socket, renderer = rx.renderer
        let destination = try rxSocket.localAddress()
        let tx = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let source = try VP8PacketSource(key: key)
        let frames = max(60, Int(300 * options.scale))
        var captured = [UInt64](repeating: 0, count: frames)
        let start = nowNs()
        for i in 0..<frames {
            while nowNs() < start + UInt64(i) * 33_333_333 { usleep(500) }
            captured[i] = nowNs()
            try source.packets(frame: i) { _ = try? tx.send($0, to: destination) }
        }
        usleep(200_000)
        let shown = renderer.shown.withLock { $0 }
        var ms: [Double] = []
        for (i, t) in shown where i < frames { ms.append(Double(t &- captured[i]) / 1e6) }
        ms.sort()
        guard !ms.isEmpty else { return }
        let p50 = ms[ms.count / 2], p99 = ms[min(ms.count - 1, ms.count * 99 / 100)]
        record(
            reporter, options, suite: "receive",
            case: "glass-to-glass 720p30 VP8 loopback p50 (capture->decoded, own packetizer loop)",
            metric: "latency", unit: "ms", higherIsBetter: false, values: [p50])
        record(
            reporter, options, suite: "receive", case: "glass-to-glass 720p30 VP8 loopback p99",
            metric: "latency", unit: "ms", higherIsBetter: false, values: [p99])
        record(
            reporter, options, suite: "receive", case: "glass-to-glass frames shown", metric: "frames", unit: "",
            higherIsBetter: true, values: [Double(ms.count)])
    }
}
