// `revue-media demo`: a whole call in one process over real loopback UDP: a synthetic camera and
// microphone, the sender, SRTP, the impairment relay at mild settings, the receiver; then what
// arrived is measured against what was sent.
import MediaCore
import MediaTools
import RevueCommandLine
import RevueSession

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

enum DemoCommand: Command {
    static let name = "demo"
    static let summary = "run a full call in one process over loopback UDP and report what was received"
    static let help = """
        usage: revue-media demo [--seconds S] [--out DIR] [options]

        A synthetic camera (640x360, 30 fps, a moving picture whose bar code tells each frame's
        index) and microphone (a speech-like signal) are encoded (VP8 1 Mbit/s, Opus 32 kbit/s with
        FEC), sent as SRTP (AEAD_AES_128_GCM) over UDP through the impairment relay (1 % loss,
        20 ms delay, 5 ms jitter) to a receiver in the same process, which decodes and writes
        DIR/received.ivf and DIR/received.ogg. DIR/stats.json holds the measurements; a table on
        stdout sums them up: frames and packets sent, received and recovered, PSNR of the
        received video against the source frames, SNR and correlation of the received audio
        against the source, capture-to-decode latency p50/p99 and the bitrates.

          --seconds S      length of the call (default 10)
          --out DIR        where the files go (default out; created if missing)
          --loss P         relay loss (default 0.01); --delay MS (20); --jitter MS (5); --seed N (1)
          --size WxH       camera size (default 640x360); --bitrate BPS (default 1M)
          --codec vp8|vp9  (default vp8)
          --json           print stats.json instead of the table
          --quiet, -q      no progress on stderr
        """

    static let valueOptions: Set<String> = [
        "--seconds", "--out", "--loss", "--delay", "--jitter", "--seed", "--size", "--bitrate", "--codec",
    ]
    static let flagOptions: Set<String> = ["--json", "--quiet", "-q"]

    /// Capture times of sent video frames by index, and latencies/PSNR of decoded ones: kept in a
    /// `Locked` box while media flows, copied out once the pipelines stopped.
    struct Measurements: Sendable {
        var captureNs: [Int: UInt64] = [:]
        var latenciesMs: [Double] = []
        var psnr: [Double] = []
        var framesUnidentified = 0
        var audio: [Float] = []
        var lastIndex = -1
        var framesOutOfOrder = 0
        /// When the renderer was handed the frames captured on each whole second (index a
        /// multiple of 30), and the render time each was planned for.
        var markedDeliveredNs: [Int: UInt64] = [:]
        var markedRenderNs: [Int: UInt64] = [:]
        /// Each frame's first-packet arrival and render time, by index (render scheduling).
        var arrivalAndRenderNs: [Int: (arrival: UInt64, render: UInt64)] = [:]
    }

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments(argv, valueOptions: valueOptions, flagOptions: flagOptions)
        guard args.positional.isEmpty else { throw UsageError(description: "unexpected argument \(args.positional[0])") }
        let seconds = try args.double("--seconds", range: 0.5...600) ?? 10
        let outDir = args.string("--out") ?? "out"
        let size = try args.size("--size") ?? (640, 360)
        var videoOptions = VideoEncodeOptions()
        if let c = args.string("--codec") {
            guard let codec = VPXCodec(rawValue: c.lowercased()) else {
                throw UsageError(description: "--codec \(c): expected vp8 or vp9")
            }
            videoOptions.codec = codec
        }
        videoOptions.bitrate = try args.int("--bitrate", range: 50_000...20_000_000) ?? 1_000_000
        videoOptions.keyframeInterval = 300
        var audioOptions = AudioEncodeOptions()
        audioOptions.fec = true
        audioOptions.application = .voip
        audioOptions.bitrate = 32_000
        var impairment = ImpairmentModel.Settings()
        impairment.loss = try args.double("--loss", range: 0...0.5) ?? 0.01
        impairment.delayMilliseconds = try args.double("--delay", range: 0...1000) ?? 20
        impairment.jitterMilliseconds = try args.double("--jitter", range: 0...500) ?? 5
        let seed = UInt64(try args.int("--seed", range: 0...Int(Int32.max)) ?? 1)
        if let problem = impairment.problem { throw UsageError(description: problem) }

        // Output directory.
        var isDir = false
        if FileManager.default.fileExists(atPath: outDir, isDirectory: &isDir) {
            guard isDir else { throw InputError(description: "\(outDir): exists and is not a directory") }
        } else {
            do { try FileManager.default.createDirectory(atPath: outDir, withIntermediateDirectories: true) } catch {
                throw InputError(description: "\(outDir): cannot create the output directory: \(error)")
            }
        }
        let videoPath = "\(outDir)/received.ivf", audioPath = "\(outDir)/received.ogg", statsPath = "\(outDir)/stats.json"

        // Receive pipeline on a loopback port, relay in front of it, send pipelines to the relay.
        let key = SRTPKeyMaterial.random(for: .aeadAES128GCM)
        let measurements = Locked(Measurements())
        let reference = VideoFrame(width: size.width, height: size.height)
        let receiver = try PipelineReceiver(
            key: key, codec: videoOptions.codec, width: size.width, height: size.height,
            videoPath: videoPath, audioPath: audioPath
        ) { frame in
            let deliveredNs = MonotonicTime.now.nanoseconds
            let view = frame.view, decodedNs = frame.decodedAt.nanoseconds
            guard let index = SyntheticVideo.frameIndex(in: view) else {
                measurements.withLock { $0.framesUnidentified += 1 }
                return
            }
            var psnr = Double.nan
            if view.width == reference.width && view.height == reference.height {
                SyntheticVideo.render(frameIndex: index, into: reference)
                psnr = Quality.psnr(reference.view, view)
            }
            measurements.withLock { m in
                if let captured = m.captureNs[index], decodedNs >= captured {
                    m.latenciesMs.append(Double(decodedNs - captured) / 1e6)
                }
                if psnr.isFinite { m.psnr.append(psnr) }
                if index <= m.lastIndex { m.framesOutOfOrder += 1 }
                if index % 30 == 0 {
                    m.markedDeliveredNs[index / 30] = deliveredNs
                    m.markedRenderNs[index / 30] = frame.renderTime.nanoseconds
                }
                m.arrivalAndRenderNs[index] = (frame.firstPacketArrival.nanoseconds, frame.renderTime.nanoseconds)
                m.lastIndex = index
            }
        }
        let receiverAddress = try receiver.socket.localAddress()
        let relay: ImpairmentRelay
        do {
            relay = try ImpairmentRelay(
                configuration: .init(
                    listen: .loopbackIPv4(port: 0), to: receiverAddress, impairment: impairment,
                    reverse: ImpairmentModel.Settings(), seed: seed))
        } catch { throw InputError(description: "cannot start the relay: \(error)") }

        let camera = PatternVideoSource(
            name: "camera", width: size.width, height: size.height, frameRate: ContainerRational(30, 1),
            frames: Int(seconds * 30))
        let microphone = PatternAudioSource(
            pattern: .speech, name: "microphone", sampleRate: 48_000, channels: 1,
            frames: Int64(seconds * 48_000), beepEverySecond: true)
        var wire = SendWire(destination: relay.listenAddress, key: key)
        wire.separateAudioPort = false  // one 5-tuple through the relay, demultiplexed by payload type
        wire.rtcpMux = true  // and RTCP on it too: the receiver demultiplexes RTCP from RTP
        let sender = try MediaSender(
            video: camera, audio: microphone, videoOptions: videoOptions, audioOptions: audioOptions, wire: wire)

        sender.onVideoFrame = { index, ns in
            measurements.withLock { $0.captureNs[index] = ns }
        }

        relay.start()
        receiver.start()
        if !args.quiet {
            Console.error(
                "demo: \(size.width)x\(size.height) \(videoOptions.codec.rawValue) + opus, SRTP \(key.suite), "
                    + "\(relay.listenAddress) -> relay (loss \(impairment.loss), delay \(impairment.delayMilliseconds) ms, "
                    + "jitter \(impairment.jitterMilliseconds) ms) -> \(receiverAddress)")
        }
        let progress = Progress(label: "demo", total: Int(seconds.rounded(.up)), unit: "s", quiet: args.quiet)
        let started = Date()
        let interrupted = try sender.run(shouldStop: { Interrupt.requested }, progress: { progress.update(Int($0)) })
        // Let the last packets through the relay's delay.
        usleep(UInt32(min(1_000_000, (impairment.delayMilliseconds + impairment.jitterMilliseconds) * 1000 + 200_000)))
        if !interrupted { progress.update(Int(seconds.rounded(.up))) }
        progress.finish()
        relay.stop()
        receiver.stop()
        let elapsed = Date().timeIntervalSince(started)
        let written = try receiver.finish()
        try sender.finish()
        let m = measurements.withLock { $0 }

        // Audio quality: best lag by cross-correlation on the first seconds, then SNR and
        // correlation over everything at that lag.
        var source = SyntheticAudio(pattern: .speech, sampleRate: 48_000, channels: 1, amplitude: 0.5)
        var reference48k = source.floats(frames: Int(seconds * 48_000))
        PatternAudioSource.addBeeps(to: &reference48k, firstFrame: 0, sampleRate: 48_000)
        let received = receiver.audioSink?.playedSamples ?? []
        let (lag, snr, correlation, segmentLags) = audioQuality(reference: reference48k, received: received, maxLag: 48_000)
        // Lip sync: each whole second of capture time is marked in both streams (the beep's first
        // sample, the frame with index 30 x k); the beep's play time (where the alignment above
        // put that sample in what was played) minus the time the renderer was handed the marked
        // frame (what a renderer that shows frames as it gets them would show), and minus the
        // render time the frame was planned for.
        var syncOffsetsMs: [Double] = [], plannedOffsetsMs: [Double] = []
        for (k, deliveredNs) in m.markedDeliveredNs.sorted(by: { $0.key < $1.key }) where k >= 3 {
            guard let segmentLag = segmentLags[k * 48_000],
                let playNs = receiver.audioSink?.playTime(ofSample: k * 48_000 + segmentLag)
            else { continue }
            syncOffsetsMs.append((Double(playNs) - Double(deliveredNs)) / 1e6)
            if let renderNs = m.markedRenderNs[k] { plannedOffsetsMs.append((Double(playNs) - Double(renderNs)) / 1e6) }
        }
        let plannedMean =
            plannedOffsetsMs.isEmpty ? Double.nan : plannedOffsetsMs.reduce(0, +) / Double(plannedOffsetsMs.count)
        let syncMean = syncOffsetsMs.isEmpty ? Double.nan : syncOffsetsMs.reduce(0, +) / Double(syncOffsetsMs.count)
        let syncWorst = syncOffsetsMs.max { abs($0) < abs($1) } ?? .nan
        let syncWithin = syncOffsetsMs.filter { abs($0) <= 45 }.count
        // The extra delays the receiver's lip-sync controller gave each stream at the end.
        let syncState = receiver.pipeline.audioVideoSync
        let syncVideoDelay = syncState?.videoDelayMilliseconds ?? 0, syncAudioDelay = syncState?.audioDelayMilliseconds ?? 0
        // Render scheduling: how far consecutive frames' intervals stray from the capture
        // interval (33.3 ms), as they arrived (first packet) and as they are to be shown.
        func intervalJitterP95(_ time: ((arrival: UInt64, render: UInt64)) -> UInt64) -> Double {
            var deviations: [Double] = []
            for (i, t) in m.arrivalAndRenderNs where i > 0 {
                guard let previous = m.arrivalAndRenderNs[i - 1] else { continue }
                deviations.append(abs((Double(time(t)) - Double(time(previous))) / 1e6 - 1000.0 / 30))
            }
            deviations.sort()
            return deviations.isEmpty ? .nan : deviations[min(deviations.count - 1, Int(Double(deviations.count) * 0.95))]
        }
        let arrivalJitter = intervalJitterP95 { $0.arrival }, renderJitter = intervalJitterP95 { $0.render }

        let inbound = receiver.pipeline.inboundStats
        let vin = inbound.first { $0.kind == "video" } ?? InboundRTPStreamStats()
        let ain = inbound.first { $0.kind == "audio" } ?? receiver.pipeline.audio?.stats ?? InboundRTPStreamStats()
        let pstats = receiver.pipeline.statistics
        let vout = sender.videoPipeline?.statistics.outbound
        let retransmitted = Int(vout?.retransmittedPacketsSent ?? 0)
        let fecSamples = receiver.pipeline.audio?.fecRecoveredSamples ?? 0
        let relayStats = relay.statistics
        let v = sender.videoStream!.counters, a = sender.audioStream!.counters
        let lat = m.latenciesMs.sorted()
        func pct(_ p: Double) -> Double { lat.isEmpty ? .nan : lat[min(lat.count - 1, Int(Double(lat.count - 1) * p + 0.5))] }
        let psnrMean = m.psnr.isEmpty ? Double.nan : m.psnr.reduce(0, +) / Double(m.psnr.count)
        let psnrMin = m.psnr.min() ?? .nan
        let videoBitrate = Double(v.bytes.load(ordering: .relaxed) * 8) / max(elapsed, 0.001)
        let audioBitrate = Double(a.bytes.load(ordering: .relaxed) * 8) / max(elapsed, 0.001)

        let stats = JSON.object([
            ("seconds", JSON.rounded(elapsed, 3)), ("interrupted", .bool(interrupted)),
            (
                "path",
                .object([
                    ("sender", .string("BufferCapturer + VideoSendStream, AudioBufferCapturer + AudioSendStream")),
                    ("receiver", .string("ReceivePipeline (jitter buffer, NACK, PLI, decode) + AudioPlayoutClock")),
                    ("relay", .string(relay.listenAddress.description)),
                    ("receiverAddress", .string(receiverAddress.description)), ("srtp", .string(key.suite.sdpName)),
                    ("loss", .double(impairment.loss)), ("delayMs", .double(impairment.delayMilliseconds)),
                    ("jitterMs", .double(impairment.jitterMilliseconds)), ("seed", .int(Int(seed))),
                ])
            ),
            (
                "video",
                .object([
                    ("codec", .string(videoOptions.codec.rawValue)), ("width", .int(size.width)), ("height", .int(size.height)),
                    ("framesSent", .int(v.frames.load(ordering: .relaxed))),
                    ("keyframesSent", .int(v.keyframes.load(ordering: .relaxed))),
                    ("packetsSent", .int(v.packets.load(ordering: .relaxed))), ("packetsRetransmitted", .int(retransmitted)),
                    ("packetsReceived", .int(Int(vin.packetsReceived))), ("packetsLost", .int(Int(vin.packetsLost))),
                    ("framesDecoded", .int(Int(vin.framesDecoded))), ("framesDropped", .int(Int(vin.framesDropped))),
                    ("keyframesDecoded", .int(Int(vin.keyFramesDecoded))), ("freezeCount", .int(Int(vin.freezeCount))),
                    ("nackSent", .int(Int(vin.nackCount))), ("pliSent", .int(Int(vin.pliCount))),
                    (
                        "jitterBufferDelayMs",
                        JSON.rounded(
                            vin.jitterBufferEmittedCount > 0
                                ? vin.jitterBufferDelay / Double(vin.jitterBufferEmittedCount) * 1000 : 0, 2)
                    ),
                    ("keyframeRequestsReceived", .int(v.keyframeRequests.load(ordering: .relaxed))),
                    ("framesIdentified", .int(m.psnr.count)), ("psnrMean", JSON.rounded(psnrMean, 2)),
                    ("psnrMin", JSON.rounded(psnrMin, 2)),
                    ("latencyP50Ms", JSON.rounded(pct(0.5), 2)), ("latencyP99Ms", JSON.rounded(pct(0.99), 2)),
                    ("arrivalIntervalJitterP95Ms", JSON.rounded(arrivalJitter, 2)),
                    ("renderIntervalJitterP95Ms", JSON.rounded(renderJitter, 2)),
                    ("bitrate", .int(Int(videoBitrate))),
                ])
            ),
            (
                "audio",
                .object([
                    ("framesSent", .int(a.frames.load(ordering: .relaxed))),
                    ("packetsSent", .int(a.packets.load(ordering: .relaxed))),
                    ("packetsReceived", .int(Int(ain.packetsReceived))), ("packetsLost", .int(Int(ain.packetsLost))),
                    ("fecRecoveredSamples", .int(fecSamples)), ("concealedSamples", .int(Int(ain.concealedSamples))),
                    ("concealmentEvents", .int(Int(ain.concealmentEvents))), ("samplesPlayed", .int(received.count)),
                    ("lagSamples", .int(lag)),
                    ("snrDb", JSON.rounded(snr, 2)), ("correlation", JSON.rounded(correlation, 4)),
                    ("bitrate", .int(Int(audioBitrate))),
                ])
            ),
            (
                "lipSync",
                .object([
                    ("marks", .int(syncOffsetsMs.count)), ("meanMs", JSON.rounded(syncMean, 1)),
                    ("worstMs", JSON.rounded(syncWorst, 1)), ("within45Ms", .int(syncWithin)),
                    ("offsetsMs", .array(syncOffsetsMs.map { JSON.rounded($0, 1) })),
                    ("plannedMeanMs", JSON.rounded(plannedMean, 1)),
                    ("plannedOffsetsMs", .array(plannedOffsetsMs.map { JSON.rounded($0, 1) })),
                    ("videoDelayMs", JSON.rounded(syncVideoDelay, 1)), ("audioDelayMs", JSON.rounded(syncAudioDelay, 1)),
                ])
            ),
            (
                "relay",
                .object([
                    ("received", .int(relayStats.forward.received)), ("forwarded", .int(relayStats.forward.forwarded)),
                    ("lost", .int(relayStats.forward.droppedByLoss)), ("feedbackForwarded", .int(relayStats.reverse.forwarded)),
                ])
            ),
            (
                "receivePipeline",
                .object([
                    ("datagrams", .int(pstats.datagrams)), ("authFailures", .int(pstats.authFailures)),
                    ("replays", .int(pstats.replays)), ("rtcpSent", .int(pstats.rtcpSent)),
                    ("nacksSent", .int(pstats.nacksSent)), ("plisSent", .int(pstats.plisSent)),
                    ("rembsSent", .int(pstats.rembsSent)),
                ])
            ),
            ("files", .array(written.map { .string($0) } + [.string(statsPath)])),
        ])
        try writeAtomically(stats.rendered() + "\n", to: statsPath)

        if args.flag("--json") {
            Console.out(stats.rendered())
        } else {
            func row(_ name: String, _ a: String, _ b: String, _ c: String) -> String {
                name.padded(to: 16) + a.padded(to: 14)
                    + b.padded(to: 14) + c
            }
            Console.out(
                """
                demo: \(elapsed.fixed(1)) s call over loopback UDP, SRTP \(key.suite), relay loss \(impairment.loss * 100) %, delay \(Int(impairment.delayMilliseconds)) ms, jitter \(Int(impairment.jitterMilliseconds)) ms
                \(row("", "sent", "received", "recovered / lost"))
                \(row("video frames", "\(v.frames.load(ordering: .relaxed))", "\(vin.framesDecoded)", "\(max(0, Int(vin.keyFramesDecoded) - 1)) keyframes on PLI, \(vin.freezeCount) freezes"))
                \(row("video packets", "\(v.packets.load(ordering: .relaxed))", "\(vin.packetsReceived)", "\(retransmitted) resent on NACK / \(vin.packetsLost) lost"))
                \(row("audio packets", "\(a.packets.load(ordering: .relaxed))", "\(ain.packetsReceived)", "\(fecSamples / 960) by FEC / \(ain.packetsLost) lost"))
                video quality   PSNR \(psnrMean.fixed(2)) dB mean, \(psnrMin.fixed(2)) dB min over \(m.psnr.count) frames identified by bar code
                audio quality   SNR \(snr.fixed(2)) dB, correlation \(correlation.fixed(3)) (lag \(lag) samples)
                latency         capture to decoded frame p50 \(pct(0.5).fixed(1)) ms, p99 \(pct(0.99).fixed(1)) ms
                frame timing    interval off 33.3 ms (p95): arrival \(arrivalJitter.fixed(1)) ms, render \(renderJitter.fixed(1)) ms
                lip sync        beep minus marked frame as handed to the renderer \(syncMean.fixed(1)) ms mean, worst \(syncWorst.fixed(1)) ms, \(syncWithin) of \(syncOffsetsMs.count) seconds within 45 ms (\(plannedMean.fixed(1)) ms mean against its planned render time); extra delay video \(syncVideoDelay.fixed(1)) ms, audio \(syncAudioDelay.fixed(1)) ms
                bitrates        video \(Format.bitrate(videoBitrate)), audio \(Format.bitrate(audioBitrate))
                files           \((written + [statsPath]).joined(separator: ", "))
                """)
        }
        return interrupted ? 130 : 0
    }

    /// Lag (received behind reference), SNR in dB and Pearson correlation of `received` against
    /// `reference` at the best lag within `maxLag`, found by cross-correlation on the first 2 s.
    /// Lag (received behind reference), SNR in dB and correlation of `received` against
    /// `reference`. Playout may drop or stretch audio (jitter buffer adaptation, concealment), so
    /// each 200 ms segment of the reference is aligned on its own: a coarse search on 8x block averages
    /// within `maxLag`, then within +-50 ms of the previous segment's lag, refined to the sample.
    /// SNR sums signal and error over all segments; correlation is the mean of the segments'.
    static func audioQuality(reference: [Float], received: [Float], maxLag: Int) -> (Int, Double, Double, [Int: Int]) {
        guard reference.count >= 48_000, received.count > 4800 else { return (0, .nan, .nan, [:]) }
        func decimate(_ x: [Float]) -> [Float] {
            stride(from: 0, to: x.count - 7, by: 8).map { i in (x[i..<(i + 8)].reduce(0, +)) / 8 }
        }
        let dr = decimate(reference), dx = decimate(received)
        /// The lag in `lags` maximising the dot product of a[from..<from+window] with b shifted by it.
        func bestLag(_ a: [Float], _ b: [Float], from: Int, window: Int, _ lags: ClosedRange<Int>) -> Int? {
            var best = -Float.infinity, lag: Int?
            a.withUnsafeBufferPointer { a in
                b.withUnsafeBufferPointer { b in
                    for l in lags where from + l >= 0 && from + l + window <= b.count {
                        var dot: Float = 0
                        for i in 0..<window { dot += a[from + i] * b[from + l + i] }
                        if dot > best { best = dot; lag = l }
                    }
                }
            }
            return lag
        }
        let segment = 9_600
        var previous: Int?
        var signal = 0.0, noise = 0.0, correlations: [Double] = [], firstLag = 0
        var lags: [Int: Int] = [:]
        for start in stride(from: 0, to: reference.count - segment + 1, by: segment) {
            let coarseRange = previous.map { ($0 / 8 - 300)...($0 / 8 + 300) } ?? 0...(maxLag / 8)
            guard let coarse = bestLag(dr, dx, from: start / 8, window: segment / 8, coarseRange),
                let lag = bestLag(reference, received, from: start, window: segment, (coarse * 8 - 16)...(coarse * 8 + 16))
            else { continue }
            if previous == nil { firstLag = lag }
            previous = lag
            lags[start] = lag
            var sxy = 0.0, sxx = 0.0, syy = 0.0, sx = 0.0, sy = 0.0
            for i in start..<(start + segment) {
                let x = Double(reference[i]), y = Double(received[i + lag])
                signal += x * x; noise += (x - y) * (x - y)
                sxy += x * y; sxx += x * x; syy += y * y; sx += x; sy += y
            }
            let n = Double(segment)
            let den = (sxx / n - (sx / n) * (sx / n)).squareRoot() * (syy / n - (sy / n) * (sy / n)).squareRoot()
            if den > 1e-9 { correlations.append((sxy / n - (sx / n) * (sy / n)) / den) }
        }
        guard !correlations.isEmpty else { return (0, .nan, .nan, lags) }
        return (
            firstLag, noise > 0 ? 10 * log10(signal / noise) : 100, correlations.reduce(0, +) / Double(correlations.count),
            lags
        )
    }

    /// Writes `text` to `path` through the engine's atomic writer (temporary file, fsync, rename).
    static func writeAtomically(_ text: String, to path: String) throws {
        do { try AtomicFileWriter.write(Array(text.utf8), to: path) } catch {
            throw InputError(description: error.description)
        }
    }

}

extension ReceiveCounters {
    var framesDecodedTotal: Int { videoFramesDecoded }
}
