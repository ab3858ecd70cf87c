import CBenchAlloc
import CMediaShims
import Foundation
// The video send pipeline from BGRA (capture -> libyuv -> ring -> worker: libvpx, RTP, SRTP ->
// sink) against a bare loop of the same libyuv + libvpx + libsrtp calls on one thread, both in
// this process, timed from the first frame (the command-line tools, timed as whole processes, are
// compared with the whole `revue-media encode` process in the cli suite). Plus capture() call cost,
// capture-to-packet latency at a real-time 30 fps pace, and heap allocations per frame (counted by
// CBenchAlloc's malloc-family wrappers, every thread of the process).
import MediaCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A sink that only counts (so the network is not measured) and can time each frame's last packet.
final class BenchCountingSink: PacketSink, @unchecked Sendable {
    let packets = Atomic<Int>(0)
    let bytes = Atomic<Int>(0)
    /// Called with the RTP timestamp of each marker packet (the header stays clear under SRTP).
    nonisolated(unsafe) var onFrameEnd: ((UInt32) -> Void)?
    func write(_ packet: RawSpan) {
        packet.withUnsafeBytes { packet in
            packets.add(1, ordering: .relaxed)
            bytes.add(packet.count, ordering: .relaxed)
            if let onFrameEnd, packet.count >= 12, packet[1] & 0x80 != 0 {
                onFrameEnd(UInt32(packet[4]) << 24 | UInt32(packet[5]) << 16 | UInt32(packet[6]) << 8 | UInt32(packet[7]))
            }
        }
    }
    func flush() {}
}

/// CPU time of the whole process (all threads), in nanoseconds.
func benchProcessCPUNs() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Figures recorded during one `compare` run, handed out again in the same order to a second
/// `compare` (same options), so one run reports two metrics (wall-clock and CPU throughput).
final class BenchReplay {
    private var values: [Double] = []
    private var next = 0
    func add(_ v: Double) { values.append(v) }
    func reset() { values.removeAll(); next = 0 }
    func pop() -> Double { defer { next += 1 }; return values[next] }
    /// The figure added last.
    var last: Double { values[values.count - 1] }
}

enum VideoSendSuite {
    /// The anchor: one thread doing ARGBToI420, vpx_codec_encode (same configuration as
    /// VPXEncoder's defaults), an even split into MTU-sized RTP packets and srtp_protect of each.
    final class RawLoop {
        let ctx = UnsafeMutablePointer<vpx_codec_ctx_t>.allocate(capacity: 1)
        let image = UnsafeMutablePointer<vpx_image_t>.allocate(capacity: 1)
        let frame: VideoFrame
        let srtp: SRTPBenchSuite.RawSession
        let packet = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)
        var seq: UInt16 = 0
        let w: Int, h: Int

        init(codec: VPXCodec, width: Int, height: Int, bitrate: Int, key: SRTPKeyMaterial) {
            w = width; h = height
            frame = VideoFrame(width: width, height: height)
            srtp = SRTPBenchSuite.RawSession(key, outbound: true)
            let defaults = VPXEncoderConfiguration(codec: codec, width: width, height: height)
            var cfg = vpx_codec_enc_cfg_t()
            let iface = codec == .vp8 ? vpx_codec_vp8_cx() : vpx_codec_vp9_cx()
            vpx_codec_enc_config_default(iface, &cfg, 0)
            cfg.g_w = UInt32(width); cfg.g_h = UInt32(height)
            cfg.g_timebase = vpx_rational(num: 1, den: 90_000)
            cfg.g_threads = 1; cfg.g_lag_in_frames = 0; cfg.g_pass = VPX_RC_ONE_PASS; cfg.g_error_resilient = 0
            cfg.rc_end_usage = VPX_CBR; cfg.rc_target_bitrate = UInt32(bitrate / 1000)
            cfg.rc_min_quantizer = UInt32(defaults.minQuantizer); cfg.rc_max_quantizer = UInt32(defaults.maxQuantizer)
            cfg.rc_dropframe_thresh = 0; cfg.rc_resize_allowed = 0
            cfg.rc_buf_initial_sz = 500; cfg.rc_buf_optimal_sz = 600; cfg.rc_buf_sz = 1000
            cfg.rc_undershoot_pct = codec == .vp8 ? 100 : 50; cfg.rc_overshoot_pct = codec == .vp8 ? 15 : 50
            cfg.kf_mode = VPX_KF_DISABLED; cfg.kf_min_dist = 0; cfg.kf_max_dist = 3000
            ctx.initialize(to: vpx_codec_ctx_t())
            precondition(cms_vpx_enc_init(ctx, iface, &cfg, 0) == VPX_CODEC_OK, "raw vpx init failed")
            _ = cms_vpx_control_int(ctx, Int32(VP8E_SET_CPUUSED.rawValue), Int32(defaults.speed))
            _ = cms_vpx_control_int(ctx, Int32(VP8E_SET_STATIC_THRESHOLD.rawValue), 1)
            _ = cms_vpx_control_int(ctx, Int32(VP8E_SET_MAX_INTRA_BITRATE_PCT.rawValue), 900)
            if codec == .vp8 {
                _ = cms_vpx_control_int(ctx, Int32(VP8E_SET_NOISE_SENSITIVITY.rawValue), 0)
                _ = cms_vpx_control_int(ctx, Int32(VP8E_SET_TOKEN_PARTITIONS.rawValue), 0)
            } else {
                _ = cms_vpx_control_int(ctx, Int32(VP9E_SET_NOISE_SENSITIVITY.rawValue), 0)
                _ = cms_vpx_control_int(ctx, Int32(VP9E_SET_AQ_MODE.rawValue), 3)
                _ = cms_vpx_control_int(ctx, Int32(VP9E_SET_FRAME_PARALLEL_DECODING.rawValue), 0)
                _ = cms_vpx_control_int(ctx, Int32(VP9E_SET_TILE_COLUMNS.rawValue), 0)
                _ = cms_vpx_control_int(ctx, Int32(VP9E_SET_ROW_MT.rawValue), 0)
            }
            image.initialize(to: vpx_image_t())
            vpx_img_wrap(image, VPX_IMG_FMT_I420, UInt32(width), UInt32(height), 1, frame.y)
            image.pointee.planes.1 = frame.u; image.pointee.planes.2 = frame.v
            image.pointee.stride.0 = Int32(frame.strideY); image.pointee.stride.1 = Int32(frame.strideUV)
            image.pointee.stride.2 = Int32(frame.strideUV)
            packet.initializeMemory(as: UInt8.self, repeating: 0)
        }

        deinit {
            vpx_codec_destroy(ctx)
            ctx.deallocate(); image.deallocate(); packet.deallocate()
        }

        func encode(_ bgra: UnsafeRawPointer, index: Int, forceKey: Bool) -> Int {
            _ = ARGBToI420(
                bgra.assumingMemoryBound(to: UInt8.self), Int32(w * 4), frame.y, Int32(frame.strideY),
                frame.u, Int32(frame.strideUV), frame.v, Int32(frame.strideUV), Int32(w), Int32(h))
            _ = vpx_codec_encode(
                ctx, image, Int64(index) * 3000, 3000, forceKey ? vpx_enc_frame_flags_t(VPX_EFLAG_FORCE_KF) : 0,
                UInt(VPX_DL_REALTIME))
            var iter: vpx_codec_iter_t? = nil
            var sent = 0
            while let pkt = vpx_codec_get_cx_data(ctx, &iter) {
                guard pkt.pointee.kind == VPX_CODEC_CX_FRAME_PKT else { continue }
                let data = UnsafeRawBufferPointer(start: pkt.pointee.data.frame.buf, count: Int(pkt.pointee.data.frame.sz))
                let room = 1200 - 12 - 8 - 16 - 6  // header, abs-send-time, GCM tag, VP8 descriptor
                let n = max(1, (data.count + room - 1) / room)
                for k in 0..<n {
                    let from = k * data.count / n, to = (k + 1) * data.count / n
                    packet[0] = 0x80; packet[1] = 96 | (k == n - 1 ? 0x80 : 0)
                    packet[2] = UInt8(seq >> 8); packet[3] = UInt8(truncatingIfNeeded: seq); seq &+= 1
                    UnsafeMutableRawBufferPointer(rebasing: packet[18..<(18 + to - from)])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: data[from..<to]))
                    var length = Int32(18 + to - from)
                    _ = srtp_protect(srtp.session, packet.baseAddress, &length)
                    sent += 1
                }
            }
            return sent
        }
    }

    /// A frame counter bumped by the sink at each frame's last (marker) packet: waiting on it reads
    /// no statistics, so the measuring thread allocates nothing while it waits.
    final class FrameEnds: @unchecked Sendable { let count = Atomic<Int>(0) }

    /// Frames fed before allocations are counted (encoder buffers, the SRTP stream clone, the
    /// converter's scratch and the frame pool are made then), and frames counted.
    static let allocationWarmFrames = 15, allocationMeasuredFrames = 30

    /// Allocation calls one `srtp_protect` of a 1000-byte RTP payload makes (warm), by Debian's
    /// NSS-backed libsrtp: a PKCS#11 context per packet. The tests measure the same figure
    /// (`SendPipelineAllocationTests.libsrtpAllocationsPerPacket`). Also proves that calls made
    /// inside libsrtp and NSS reach the counting wrappers.
    static func libsrtpAllocationsPerPacket(_ key: SRTPKeyMaterial) -> Double {
        let session = SRTPBenchSuite.RawSession(key, outbound: true)
        let packet = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)
        defer { packet.deallocate() }
        packet.initializeMemory(as: UInt8.self, repeating: 0x5A)
        packet[0] = 0x80; packet[1] = 96
        var seq: UInt16 = 0
        func one() {
            packet[2] = UInt8(seq >> 8); packet[3] = UInt8(truncatingIfNeeded: seq); seq &+= 1
            var length = Int32(12 + 1000)
            _ = srtp_protect(session.session, packet.baseAddress, &length)
        }
        for _ in 0..<5 { one() }
        let a0 = cba_allocations()
        for _ in 0..<100 { one() }
        return Double(cba_allocations() - a0) / 100
    }

    nonisolated(unsafe) static var allocationProbe: UnsafeMutableRawPointer?

    /// Traps unless an allocation made inside libswiftCore (`swift_slowAlloc` calling `malloc`
    /// through its PLT) reaches CBenchAlloc: without that every count would silently read 0.
    static func checkAllocationCountingWorks() {
        let a0 = cba_allocations()
        allocationProbe = UnsafeMutableRawPointer.allocate(byteCount: 4096, alignment: 16)  // a global: cannot be elided
        let a1 = cba_allocations()
        allocationProbe?.deallocate()
        allocationProbe = nil
        precondition(a1 > a0, "CBenchAlloc does not see libswiftCore's malloc calls: is malloc exported from revue-bench?")
    }

    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        checkAllocationCountingWorks()
        for (codec, w, h, bitrate) in [
            (VPXCodec.vp8, 1280, 720, 2_500_000), (.vp8, 1920, 1080, 4_000_000),
            (.vp9, 1280, 720, 2_500_000), (.vp9, 1920, 1080, 4_000_000),
        ] {
            let frames = max(20, Int(Double(w == 1280 ? 90 : 60) * options.scale))
            let name = "\(codec) \(h)p30 BGRA"
            // 8 distinct BGRA pictures, cycled.
            let distinct = 8
            let bgra = UnsafeMutableRawBufferPointer.allocate(byteCount: distinct * w * h * 4, alignment: 64)
            defer { bgra.deallocate() }
            for i in 0..<distinct {
                SyntheticVideo.renderBGRA(
                    frameIndex: i, width: w, height: h, into: bgra.baseAddress! + i * w * h * 4, stride: w * 4)
            }
            let views = try (0..<distinct).map { i in
                try PixelBufferView.packed(
                    format: .bgra, width: w, height: h,
                    data: UnsafeRawBufferPointer(rebasing: bgra[(i * w * h * 4)..<((i + 1) * w * h * 4)]), stride: w * 4)
            }
            var config = VideoSendStream.Configuration(codec: codec, width: w, height: h)
            config.encoder.bitrate = bitrate
            config.ringCapacity = 8  // slack for the feeding thread on a loaded machine
            config.srtp = .random(for: .aeadAES128GCM)

            // Throughput: frames are fed as fast as the encoder takes them (polling every 1 ms, never
            // more than the ring holds, so nothing is dropped); the clock stops when the last
            // frame's last packet (its marker) has reached the sink, as the raw loop's clock stops
            // after its last `srtp_protect`. Pacing is off here: at full speed the pacer would set
            // the rate (2.5x the bitrate), not the CPU; the latency case below runs paced at 30 fps.
            var captureCosts: [Double] = []
            let oursCPU = BenchReplay(), rawCPU = BenchReplay()
            var unpaced = config
            unpaced.pacer = nil
            func ours() throws -> Double {
                let sink = BenchCountingSink()
                let ends = FrameEnds()
                sink.onFrameEnd = { _ in ends.count.add(1, ordering: .relaxed) }
                let stream = try VideoSendStream(configuration: unpaced, sink: sink)
                stream.start()
                let t0 = nowNs(), c0 = benchProcessCPUNs()
                for i in 0..<frames {
                    while ends.count.load(ordering: .relaxed) < i - (config.ringCapacity - 1) { usleep(1_000) }
                    let c0 = nowNs()
                    stream.capturer.capture(views[i % distinct], timeStampNs: Int64(i) * 33_333_333)
                    captureCosts.append(Double(nowNs() - c0) / 1000)
                }
                while ends.count.load(ordering: .relaxed) < frames { usleep(1_000) }
                let elapsed = nowNs() - t0
                oursCPU.add(Double(frames) / (Double(benchProcessCPUNs() - c0) / 1e9))
                stream.stop()
                precondition(stream.statistics.capture.dropped == 0, "video bench dropped frames")
                return Double(frames) / (Double(elapsed) / 1e9)
            }
            func raw() -> Double {
                let loop = RawLoop(codec: codec, width: w, height: h, bitrate: bitrate, key: config.srtp!)
                let t0 = nowNs(), c0 = benchProcessCPUNs()
                for i in 0..<frames {
                    _ = loop.encode(bgra.baseAddress! + (i % distinct) * w * h * 4, index: i, forceKey: i == 0)
                }
                let elapsed = nowNs() - t0
                rawCPU.add(Double(frames) / (Double(benchProcessCPUNs() - c0) / 1e9))
                return Double(frames) / (Double(elapsed) / 1e9)
            }
            try compare(
                reporter, options, suite: "videosend", case: name, metric: "frames/s", unit: "1/s", higherIsBetter: true,
                anchorName: "libyuv+libvpx+libsrtp loop", ours: ours, anchor: raw)
            // The same runs per CPU-second (all threads): what the pipeline costs, whatever the load.
            try compare(
                reporter, options, suite: "videosend", case: name, metric: "frames/CPU-s", unit: "1/s", higherIsBetter: true,
                anchorName: "libyuv+libvpx+libsrtp loop", ours: { oursCPU.pop() }, anchor: { rawCPU.pop() })
            try allocations(reporter, options, config: config, views: views, bgra: UnsafeRawBufferPointer(bgra), name: name)
            if w == 1280 {
                record(
                    reporter, options, suite: "videosend", case: "capture() \(name)", metric: "call p50", unit: "us",
                    higherIsBetter: false, values: [Summary(captureCosts).median])
                record(
                    reporter, options, suite: "videosend", case: "capture() \(name)", metric: "call p99", unit: "us",
                    higherIsBetter: false, values: [Summary(captureCosts).p99])
            }

            if codec == .vp8 && w == 1280 { try latency(reporter, options, config: config, views: views, name: name) }
        }
    }

    /// Heap allocation calls per frame once warm, of the whole pipeline (capture on this thread;
    /// libvpx, RTP, SRTP and the sink on the worker) against the raw loop, counted over every
    /// thread of the process by CBenchAlloc. Debian's libsrtp2 is built against NSS and mallocs
    /// inside `srtp_protect` (a PKCS#11 context per packet), so neither figure is 0; the row
    /// "beyond libsrtp" subtracts libsrtp's own count (measured here per packet) times the packets
    /// sent, which is what `SendPipelineAllocationTests` asserts to be exactly 0.
    static func allocations(
        _ reporter: Reporter, _ options: BenchOptions, config: VideoSendStream.Configuration,
        views: [PixelBufferView], bgra: UnsafeRawBufferPointer, name: String
    ) throws {
        let warm = allocationWarmFrames, measured = allocationMeasuredFrames
        let w = config.encoder.width, h = config.encoder.height
        let perPacket = libsrtpAllocationsPerPacket(config.srtp!)
        if perPacket == 0 {
            FileHandle.standardError.write(
                Data(
                    "revue-bench: srtp_protect made no heap allocation: libsrtp not NSS-backed, or its calls bypass CBenchAlloc\n"
                        .utf8))
        }
        let oursBeyond = BenchReplay(), rawBeyond = BenchReplay()
        var oursPackets: [Double] = [], rawPackets: [Double] = []
        func ours() throws -> Double {
            let sink = BenchCountingSink()
            let ends = FrameEnds()
            sink.onFrameEnd = { _ in ends.count.add(1, ordering: .relaxed) }
            let stream = try VideoSendStream(configuration: config, sink: sink)
            stream.start()
            // Feeds frames `range`, never more than the ring holds, and waits for their last packets.
            func feed(_ range: Range<Int>) {
                for i in range {
                    while ends.count.load(ordering: .relaxed) < i - (config.ringCapacity - 1) { usleep(1_000) }
                    stream.capturer.capture(views[i % views.count], timeStampNs: Int64(i) * 33_333_333)
                }
                var waited = 0
                while ends.count.load(ordering: .relaxed) < range.upperBound {
                    usleep(1_000)
                    waited += 1
                    precondition(waited < 10_000, "videosend allocations: frames \(range) never all reached the sink")
                }
            }
            feed(0..<warm)
            let a0 = cba_allocations(), p0 = sink.packets.load(ordering: .relaxed)
            feed(warm..<(warm + measured))
            let a1 = cba_allocations(), p1 = sink.packets.load(ordering: .relaxed)
            stream.stop()
            precondition(stream.statistics.capture.dropped == 0, "video bench dropped frames")
            let allocations = Double(a1 - a0), packets = Double(p1 - p0)
            oursBeyond.add((allocations - perPacket * packets) / Double(measured))
            oursPackets.append(packets / Double(measured))
            return allocations / Double(measured)
        }
        func raw() -> Double {
            let loop = RawLoop(
                codec: config.encoder.codec, width: w, height: h, bitrate: config.encoder.bitrate, key: config.srtp!)
            func frame(_ i: Int) -> Int {
                loop.encode(bgra.baseAddress! + (i % views.count) * w * h * 4, index: i, forceKey: i == 0)
            }
            for i in 0..<warm { _ = frame(i) }
            let a0 = cba_allocations()
            var packets = 0
            for i in warm..<(warm + measured) { packets += frame(i) }
            let allocations = Double(cba_allocations() - a0)
            rawBeyond.add((allocations - perPacket * Double(packets)) / Double(measured))
            rawPackets.append(Double(packets) / Double(measured))
            return allocations / Double(measured)
        }
        try compare(
            reporter, options, suite: "videosend", case: name, metric: "heap allocations/frame", unit: "calls",
            higherIsBetter: false, anchorName: "libyuv+libvpx+libsrtp loop", ours: ours, anchor: raw)
        // The same runs less libsrtp's own count: what the pipeline (ours) or libyuv+libvpx (loop) add.
        try compare(
            reporter, options, suite: "videosend", case: name, metric: "heap allocations/frame beyond libsrtp", unit: "calls",
            higherIsBetter: false, anchorName: "libyuv+libvpx+libsrtp loop", ours: { oursBeyond.pop() },
            anchor: { rawBeyond.pop() })
        // The warm-up repetition is in the arrays too: keep the measured ones.
        let keep = options.repetitions
        record(
            reporter, options, suite: "videosend", case: name, metric: "RTP packets/frame (ours)", unit: "packets",
            higherIsBetter: false, values: Array(oursPackets.suffix(keep)))
        record(
            reporter, options, suite: "videosend", case: name, metric: "RTP packets/frame (loop)", unit: "packets",
            higherIsBetter: false, values: Array(rawPackets.suffix(keep)))
        if config.encoder.codec == .vp8 && w == 1280 {  // the same figure for every case: one row
            record(
                reporter, options, suite: "videosend", case: "srtp_protect 1000 B \(config.srtp!.suite.rawValue)",
                metric: "heap allocations/packet", unit: "calls", higherIsBetter: false, values: [perPacket])
        }
    }

    /// Capture-to-packet latency at a real-time 30 fps pace: from the capture() call to the sink
    /// receiving the frame's last packet.
    static func latency(
        _ reporter: Reporter, _ options: BenchOptions, config: VideoSendStream.Configuration,
        views: [PixelBufferView], name: String
    ) throws {
        let frames = max(30, Int(90 * options.scale))
        var c = config
        c.initialTimestamp = 0
        let sink = BenchCountingSink()
        let captured = UnsafeMutablePointer<UInt64>.allocate(capacity: frames)
        let done = UnsafeMutablePointer<UInt64>.allocate(capacity: frames)
        defer { captured.deallocate(); done.deallocate() }
        done.initialize(repeating: 0, count: frames)
        sink.onFrameEnd = { ts in
            let i = Int(ts / 3000)  // 90 kHz ticks from the first capture, 3000 per 33.3 ms frame
            if i < frames { done[i] = nowNs() }
        }
        let stream = try VideoSendStream(configuration: c, sink: sink)
        stream.start()
        let start = nowNs()
        for i in 0..<frames {
            let due = start + UInt64(i) * 33_333_333
            while nowNs() < due { usleep(200) }
            captured[i] = nowNs()
            stream.capturer.capture(views[i % views.count], timeStampNs: Int64(i) * 33_333_333)
        }
        stream.stop()
        let st = stream.statistics.outbound
        if st.framesEncoded > 0 {
            record(
                reporter, options, suite: "videosend", case: "capture->packet \(name)", metric: "encode mean", unit: "ms",
                higherIsBetter: false, values: [st.totalEncodeTime * 1000 / Double(st.framesEncoded)])
        }
        let latencies = (0..<frames).compactMap { done[$0] > captured[$0] ? Double(done[$0] - captured[$0]) / 1e6 : nil }
        guard latencies.count > frames / 2 else { return }
        let s = Summary(latencies)
        record(
            reporter, options, suite: "videosend", case: "capture->packet \(name)", metric: "p50", unit: "ms",
            higherIsBetter: false, values: [s.median])
        record(
            reporter, options, suite: "videosend", case: "capture->packet \(name)", metric: "p99", unit: "ms",
            higherIsBetter: false, values: [s.p99])
    }
}
