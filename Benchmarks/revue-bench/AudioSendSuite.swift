import CMediaShims
import Foundation
// The Opus send pipeline (capture -> ring -> worker: level, speaking detector, Opus, RTP, SRTP)
// against two single-thread loops of C calls: the same work (RFC 6464 level, opus_encode_float,
// RTP header with the audio-level and abs-send-time extensions, srtp_protect AES-GCM) and a bare
// opus_encode_float loop (encode only: no level, no RTP, no SRTP), all in this process (opus-tools'
// `opusenc`, a whole process, is compared with the whole `revue-media encode` process in the cli
// suite). Per configuration: wall-clock frames/s; frames per CPU-second of the whole process
// (the benchmark's feeding thread included: its capture() calls, and its pacing naps' wake-ups,
// which a real capture callback does not have); frames per pipeline-CPU-second (the same with the
// feeding thread's pacing left out, its capture() calls kept); the feeding thread's CPU per frame.
import MediaCore

#if canImport(Glibc)
    import Glibc
#endif

enum AudioSendSuite {
    /// The same-work anchor: what one thread does with the C libraries to send the packets the
    /// pipeline sends. Per 20 ms frame: the RMS level in Double (RFC 6465 Appendix A, as
    /// `AudioLevel`), opus_encode_float straight into the packet after a 24-byte RTP header
    /// (RFC 3550 §5.1 with an RFC 8285 one-byte extension block: RFC 6464 audio level, id 1, and
    /// abs-send-time, id 3, read from the clock per packet), srtp_protect (AEAD_AES_128_GCM).
    /// Not done here and done by the pipeline: the speaking detector, the NACK history copy, the
    /// hand-off between the capture thread and the worker, statistics.
    final class RawAudioLoop {
        let encoder: OpaquePointer
        let srtp: SRTPBenchSuite.RawSession
        let packet = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 16)
        let channels: Int
        var seq: UInt16 = 0
        var bytes = 0
        static let headerSize = 24

        init(channels: Int, complexity: Int, bitrate: Int, key: SRTPKeyMaterial) {
            var error: Int32 = 0
            encoder = opus_encoder_create(48_000, Int32(channels), OPUS_APPLICATION_VOIP, &error)!
            _ = cms_opus_encoder_set_bitrate(encoder, Int32(bitrate))
            _ = cms_opus_encoder_set_complexity(encoder, Int32(complexity))
            self.channels = channels
            srtp = SRTPBenchSuite.RawSession(key, outbound: true)
            packet.initializeMemory(as: UInt8.self, repeating: 0)
            let fixed: [UInt8] = [
                0x90, 111, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0x56, 0x78,  // V=2 X=1, PT 111, SSRC
                0xBE, 0xDE, 0, 2,  // one-byte extensions, 2 words
                0x10, 0, 0x32, 0, 0, 0, 0, 0,
            ]  // level (id 1), abs-send-time (id 3), pad
            packet.copyBytes(from: fixed)
        }

        deinit { opus_encoder_destroy(encoder); packet.deallocate() }

        /// Sends frame `index` (960 samples per channel at `pcm`).
        func send(_ pcm: UnsafePointer<Float>, index: Int) {
            let count = 960 * channels
            var sum = 0.0
            for k in 0..<count { let v = Double(pcm[k]); sum += v * v }
            let rms = (sum / Double(count)).squareRoot()
            let dBov = rms > 0 ? 20 * log10(rms) : -.infinity
            let level = dBov.isFinite ? UInt8(min(127, max(0, (-dBov).rounded()))) : 127
            let h = Self.headerSize
            let length = opus_encode_float(encoder, pcm, 960, packet.baseAddress! + h, Int32(packet.count - h - 16))
            guard length > 2 else { return }
            let ts = UInt32(truncatingIfNeeded: index * 960)
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let abs = UInt32(truncatingIfNeeded: ((UInt64(now.tv_sec) << 18) | (UInt64(now.tv_nsec) << 18) / 1_000_000_000))
            packet[2] = UInt8(seq >> 8); packet[3] = UInt8(truncatingIfNeeded: seq); seq &+= 1
            packet[4] = UInt8(ts >> 24); packet[5] = UInt8(truncatingIfNeeded: ts >> 16)
            packet[6] = UInt8(truncatingIfNeeded: ts >> 8); packet[7] = UInt8(truncatingIfNeeded: ts)
            packet[17] = level  // V bit clear: no speaking detector here
            packet[19] = UInt8(truncatingIfNeeded: abs >> 16); packet[20] = UInt8(truncatingIfNeeded: abs >> 8)
            packet[21] = UInt8(truncatingIfNeeded: abs)
            var wire = Int32(h) + length
            if index == 0 { checkHeader(Int(wire)) }
            let status = srtp_protect(srtp.session, packet.baseAddress, &wire)
            precondition(status == srtp_err_status_ok, "same-work anchor: srtp_protect failed (\(status))")
            bytes += Int(wire)
        }

        /// Once: the hand-written header parses as RTP with both extension elements.
        private func checkHeader(_ length: Int) {
            let parsed = try? RTPHeader(parsing: UnsafeRawBufferPointer(rebasing: packet[0..<length]).bytes)
            precondition(
                parsed?.payloadType == 111 && parsed?.extensions.length(id: 1) == 1
                    && parsed?.extensions.length(id: 3) == 3, "same-work anchor: bad RTP header")
        }
    }

    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        let frames = max(100, Int(1000 * options.scale))  // 20 s of audio at scale 1
        for channels in [1, 2] {
            var gen = SyntheticAudio(pattern: .speech, sampleRate: 48_000, channels: channels, amplitude: 0.4)
            let pcm = gen.floats(frames: 960 * frames)
            for complexity in [5, 10] {
                let name = "48k \(channels == 1 ? "mono" : "stereo") c\(complexity) 20ms"
                var captureCosts: [Double] = []
                var driverCPU: [Double] = []  // the calling thread's CPU per frame (capture calls, pacing), us
                let oursCPU = BenchReplay(), rawCPU = BenchReplay(), sameCPU = BenchReplay()
                let oursPipelineCPU = BenchReplay(), samePipelineCPU = BenchReplay()
                let key = SRTPKeyMaterial.random(for: .aeadAES128GCM)
                func ours() throws -> Double {
                    var config = AudioSendStream.Configuration()
                    config.channels = channels
                    config.complexity = complexity
                    config.bitrate = 32_000 * channels
                    let sink = BenchCountingSink()
                    let stream = try AudioSendStream(configuration: config, sink: sink)
                    stream.start()
                    let t0 = nowNs(), cpu0 = benchProcessCPUNs(), thread0 = benchThreadCPUNs()
                    var captureNs: UInt64 = 0
                    pcm.withUnsafeBufferPointer { all in
                        var encoded = 0
                        for i in 0..<frames {
                            // Keep the ring (32) from overflowing: at most 28 buffers ahead of the encoder,
                            // in 1 ms naps (longer naps, sized by the measured encode rate, starved the
                            // worker when the machine was loaded: a late wake-up cost more than the
                            // 3 ms of queued work). The statistics are read only when the last figure
                            // says we may be that far ahead (reading them every frame made this thread
                            // pull the worker's counter cache lines once per frame).
                            while encoded < i - 28 {
                                encoded = Int(stream.statistics.outbound.framesEncoded)
                                if encoded < i - 28 { usleep(1_000) }
                            }
                            let c0 = nowNs()
                            stream.capturer.capture(
                                UnsafeBufferPointer(rebasing: all[(i * 960 * channels)..<((i + 1) * 960 * channels)]),
                                sampleRate: 48_000, channels: channels, timeStampNs: Int64(i) * 20_000_000)
                            let c1 = nowNs()
                            captureNs += c1 - c0
                            captureCosts.append(Double(c1 - c0) / 1000)
                        }
                    }
                    // The last frames: sleep for the time they should take at the rate so far, then
                    // in 50 us naps (1 ms naps overshot the last frame by up to a millisecond of a
                    // 100-400 ms run).
                    var encoded = Int(stream.statistics.outbound.framesEncoded)
                    while encoded < frames {
                        let perFrameNs = encoded > 0 ? Int(nowNs() - t0) / encoded : 100_000
                        usleep(UInt32(clamping: max(50, perFrameNs * (frames - encoded) / 1000)))
                        encoded = Int(stream.statistics.outbound.framesEncoded)
                    }
                    let elapsed = nowNs() - t0
                    let processNs = benchProcessCPUNs() - cpu0, feedingNs = benchThreadCPUNs() - thread0
                    oursCPU.add(Double(frames) / (Double(processNs) / 1e9))
                    // The pipeline's CPU: the worker's (everything but the feeding thread) plus the
                    // capture() calls themselves; the feeding thread's pacing and wake-ups left out.
                    oursPipelineCPU.add(Double(frames) / (Double(processNs - feedingNs + min(captureNs, feedingNs)) / 1e9))
                    driverCPU.append(Double(feedingNs) / 1000 / Double(frames))
                    stream.stop()
                    precondition(stream.statistics.capture.dropped == 0, "audio bench dropped buffers")
                    return Double(frames) / (Double(elapsed) / 1e9)
                }
                func raw() -> Double {
                    var error: Int32 = 0
                    let enc = opus_encoder_create(48_000, Int32(channels), OPUS_APPLICATION_VOIP, &error)!
                    defer { opus_encoder_destroy(enc) }
                    _ = cms_opus_encoder_set_bitrate(enc, Int32(32_000 * channels))
                    _ = cms_opus_encoder_set_complexity(enc, Int32(complexity))
                    var packet = [UInt8](repeating: 0, count: 4000)
                    let t0 = nowNs(), cpu0 = benchProcessCPUNs()
                    pcm.withUnsafeBufferPointer { all in
                        packet.withUnsafeMutableBufferPointer { out in
                            for i in 0..<frames {
                                _ = opus_encode_float(enc, all.baseAddress! + i * 960 * channels, 960, out.baseAddress!, 4000)
                            }
                        }
                    }
                    let elapsed = nowNs() - t0
                    rawCPU.add(Double(frames) / (Double(benchProcessCPUNs() - cpu0) / 1e9))
                    return Double(frames) / (Double(elapsed) / 1e9)
                }
                func same() -> Double {
                    let loop = RawAudioLoop(channels: channels, complexity: complexity, bitrate: 32_000 * channels, key: key)
                    let t0 = nowNs(), cpu0 = benchProcessCPUNs()
                    pcm.withUnsafeBufferPointer { all in
                        for i in 0..<frames { loop.send(all.baseAddress! + i * 960 * channels, index: i) }
                    }
                    let elapsed = nowNs() - t0
                    sameCPU.add(Double(frames) / (Double(benchProcessCPUNs() - cpu0) / 1e9))
                    samePipelineCPU.add(sameCPU.last)
                    precondition(loop.bytes > 0, "same-work anchor sent nothing")
                    return Double(frames) / (Double(elapsed) / 1e9)
                }
                let sameName = "opus+level+RTP+SRTP loop"
                try compare(
                    reporter, options, suite: "audiosend", case: name, metric: "frames/s", unit: "1/s", higherIsBetter: true,
                    anchorName: sameName, ours: ours, anchor: same)
                try compare(
                    reporter, options, suite: "audiosend", case: name, metric: "frames/CPU-s", unit: "1/s", higherIsBetter: true,
                    anchorName: sameName, ours: { oursCPU.pop() }, anchor: { sameCPU.pop() })
                try compare(
                    reporter, options, suite: "audiosend", case: name, metric: "frames/pipeline-CPU-s", unit: "1/s",
                    higherIsBetter: true, anchorName: sameName,
                    ours: { oursPipelineCPU.pop() }, anchor: { samePipelineCPU.pop() })
                oursCPU.reset()
                try compare(
                    reporter, options, suite: "audiosend", case: name, metric: "frames/s", unit: "1/s", higherIsBetter: true,
                    anchorName: "opus_encode_float loop (encode only)", ours: ours, anchor: raw)
                try compare(
                    reporter, options, suite: "audiosend", case: name, metric: "frames/CPU-s", unit: "1/s", higherIsBetter: true,
                    anchorName: "opus_encode_float loop (encode only)", ours: { oursCPU.pop() }, anchor: { rawCPU.pop() })
                record(
                    reporter, options, suite: "audiosend", case: "capture() 20ms \(channels)ch", metric: "call p50", unit: "us",
                    higherIsBetter: false, values: [Summary(captureCosts).median])
                record(
                    reporter, options, suite: "audiosend", case: "capture() 20ms \(channels)ch", metric: "call p99", unit: "us",
                    higherIsBetter: false, values: [Summary(captureCosts).p99])
                // Part of ours' CPU figure: what the feeding thread spent per frame (its capture()
                // calls, the pacing loop and its sleeps' wake-ups); the rest is the worker's.
                record(
                    reporter, options, suite: "audiosend", case: "\(name) capture thread", metric: "CPU per frame",
                    unit: "us", higherIsBetter: false, values: [Summary(driverCPU).median])
            }
        }
    }

    /// CPU time of the calling thread, ns.
    static func benchThreadCPUNs() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
