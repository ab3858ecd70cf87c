// The Opus send pipeline (capture -> ring -> worker: level, speaking detector, Opus, RTP, SRTP)
// against a bare opus_encode_float loop and against opus-tools' `opusenc`.
import MediaCore
import CMediaShims
import Foundation
#if canImport(Glibc)
import Glibc
#endif

enum AudioSendSuite {
    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        let frames = max(100, Int(1000 * options.scale))  // 20 s of audio at scale 1
        let externalReps = BenchOptions(repetitions: min(options.repetitions, 2), warmup: 0, scale: options.scale)
        for channels in [1, 2] {
            var gen = SyntheticAudio(pattern: .speech, sampleRate: 48_000, channels: channels, amplitude: 0.4)
            let pcm = gen.floats(frames: 960 * frames)
            for complexity in [5, 10] {
                let name = "48k \(channels == 1 ? "mono" : "stereo") c\(complexity) 20ms"
                var captureCosts: [Double] = []
                let oursCPU = BenchReplay(), rawCPU = BenchReplay()
                func ours() throws -> Double {
                    var config = AudioSendStream.Configuration()
                    config.channels = channels
                    config.complexity = complexity
                    config.bitrate = 32_000 * channels
                    let sink = BenchCountingSink()
                    let stream = try AudioSendStream(configuration: config, sink: sink)
                    stream.start()
                    let t0 = nowNs(), cpu0 = benchProcessCPUNs()
                    pcm.withUnsafeBufferPointer { all in
                        for i in 0..<frames {
                            // Keep the ring (32) from overflowing: at most 28 buffers ahead of the encoder.
                            while Int(stream.statistics.outbound.framesEncoded) < i - 28 { usleep(1_000) }
                            let c0 = nowNs()
                            stream.capturer.capture(UnsafeBufferPointer(rebasing: all[(i * 960 * channels)..<((i + 1) * 960 * channels)]),
                                                    sampleRate: 48_000, channels: channels, timeStampNs: Int64(i) * 20_000_000)
                            captureCosts.append(Double(nowNs() - c0) / 1000)
                        }
                    }
                    while stream.statistics.outbound.framesEncoded < UInt64(frames) { usleep(1_000) }
                    let elapsed = nowNs() - t0
                    oursCPU.add(Double(frames) / (Double(benchProcessCPUNs() - cpu0) / 1e9))
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
                try compare(reporter, options, suite: "audiosend", case: name, metric: "frames/s", unit: "1/s", higherIsBetter: true,
                            anchorName: "opus_encode_float loop", ours: ours, anchor: raw)
                try compare(reporter, options, suite: "audiosend", case: name, metric: "frames/CPU-s", unit: "1/s", higherIsBetter: true,
                            anchorName: "opus_encode_float loop", ours: { oursCPU.pop() }, anchor: { rawCPU.pop() })
                record(reporter, options, suite: "audiosend", case: "capture() 20ms \(channels)ch", metric: "call p50", unit: "us",
                       higherIsBetter: false, values: [Summary(captureCosts).median])
                record(reporter, options, suite: "audiosend", case: "capture() 20ms \(channels)ch", metric: "call p99", unit: "us",
                       higherIsBetter: false, values: [Summary(captureCosts).p99])

                // opusenc on the same samples (a 16-bit WAV; its time includes process start and file I/O).
                if FileManager.default.isExecutableFile(atPath: "/usr/bin/opusenc") {
                    let dir = BenchTempDir()
                    defer { dir.remove() }
                    let wav = dir.file("in.wav")
                    try writeWAV(pcm, channels: channels, to: wav)
                    try compare(reporter, externalReps, suite: "audiosend", case: name, metric: "frames/s", unit: "1/s",
                                higherIsBetter: true, anchorName: "opusenc", ours: ours) {
                        let t = try benchRunTool("/usr/bin/opusenc", ["--quiet", "--bitrate", "\(32 * channels)", "--comp", "\(complexity)",
                                                                      "--framesize", "20", wav, dir.file("out.opus")])
                        return Double(frames) / t
                    }
                }
            }
        }
    }

    static func writeWAV(_ samples: [Float], channels: Int, to path: String) throws {
        var d = Data()
        func u32(_ v: Int) { withUnsafeBytes(of: UInt32(v).littleEndian) { d.append(contentsOf: $0) } }
        func u16(_ v: Int) { withUnsafeBytes(of: UInt16(v).littleEndian) { d.append(contentsOf: $0) } }
        let bytes = samples.count * 2
        d.append(contentsOf: Array("RIFF".utf8)); u32(36 + bytes); d.append(contentsOf: Array("WAVEfmt ".utf8))
        u32(16); u16(1); u16(channels); u32(48_000); u32(48_000 * channels * 2); u16(channels * 2); u16(16)
        d.append(contentsOf: Array("data".utf8)); u32(bytes)
        for s in samples { u16(Int(UInt16(bitPattern: Int16(max(-1, min(1, s)) * 32767)))) }
        try d.write(to: URL(fileURLWithPath: path))
    }
}
