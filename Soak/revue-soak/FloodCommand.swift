import Foundation
// `revue-soak flood`: forged datagrams at line rate; `revue-soak flood-test`: a call whose receive
// socket is flooded by a child `revue-soak flood` process.
import MediaCore
import MediaTools
import RevueSession

#if canImport(Glibc)
    import Glibc
#endif

enum FloodCommand {
    /// Sends forged datagrams to `target` for `seconds`: a third random bytes (1-1400), a third
    /// RTP-shaped (version 2, payload type 96 or 111, the given SSRCs or random ones) whose
    /// SRTP tag is garbage, a third truncated RTP (1-11 bytes). `rate` 0: as fast as the socket
    /// takes them.
    static func run(target: SocketAddress, seconds: Double, rate: Int, ssrcs: [UInt32]) throws -> Int32 {
        var o = UDPSocket.Options()
        o.sendBufferSize = 4 << 20
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0), options: o)
        var rng = SystemRandomNumberGenerator()
        // 1024 prepared datagrams, cycled (so the flood costs no generation time).
        var forged: [[UInt8]] = []
        for i in 0..<1024 {
            switch i % 3 {
            case 0: forged.append((0..<Int.random(in: 1...1400, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
            case 1:
                var p = (0..<Int.random(in: 40...1200, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                p[0] = 0x80; p[1] = (i % 2 == 0 ? 96 : 111) | (i % 7 == 0 ? 0x80 : 0)
                let ssrc = ssrcs.isEmpty ? UInt32.random(in: 1...UInt32.max, using: &rng) : ssrcs[i % ssrcs.count]
                withUnsafeBytes(of: ssrc.bigEndian) { for k in 0..<4 { p[8 + k] = $0[k] } }
                forged.append(p)
            default:
                var p = (0..<Int.random(in: 1...11, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                p[0] = 0x80
                forged.append(p)
            }
        }
        let t0 = Probe.now()
        var sent = 0, refused = 0, bytes = 0
        let interval = rate > 0 ? 1.0 / Double(rate) : 0
        while true {
            let elapsed = Probe.now() - t0
            if elapsed >= seconds { break }
            for _ in 0..<64 {
                let p = forged[sent % forged.count]
                do { bytes += try p.withUnsafeBytes { try socket.send($0, to: target) }; sent += 1 } catch {
                    refused += 1; sent += 1
                }
            }
            if interval > 0 {
                let ahead = Double(sent) * interval - (Probe.now() - t0)
                if ahead > 0 { usleep(UInt32(ahead * 1e6)) }
            }
        }
        let elapsed = Probe.now() - t0
        out(
            "{\"sent\":\(sent - refused),\"refused\":\(refused),\"bytes\":\(bytes),\"seconds\":\(String(format: "%.2f", elapsed)),\"rate\":\(Int(Double(sent - refused) / elapsed))}"
        )
        return 0
    }

    /// A call on a clean relay; after `calm` s its receive socket is flooded for `flood` s by a
    /// child process; then `calm` s more. Decoded frames per second are compared across the three
    /// windows; drops are counted by the pipeline (auth failures, malformed, unknown) and by the
    /// kernel (receive buffer full).
    static func test(calm: Double, flood: Double, rate: Int, minShare: Double) throws -> Int32 {
        let call = try SoakCall()
        call.impair(ImpairmentModel.Settings(delayMilliseconds: 10))
        call.startAll()
        let port = call.receiveAddress.port
        call.capture(seconds: 3)  // warm-up: first keyframe, jitter buffer settled
        struct Mark { var t: Double; var frames: Int; var samples: Int; var p: ReceivePipelineStatistics; var kernel: Int }
        func mark() -> Mark {
            Mark(
                t: Probe.now(), frames: call.framesDecoded, samples: call.audioSink.samples.load(ordering: .relaxed),
                p: call.receiver.statistics, kernel: Probe.kernelDrops(port: port))
        }
        let m0 = mark()
        call.capture(seconds: calm)
        let m1 = mark()
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        child.arguments = [
            "flood", "--target", call.receiveAddress.description, "--seconds", String(flood), "--rate", String(rate),
            "--ssrc", String(call.video.ssrc), "--ssrc", String(call.audio.ssrc),
        ]
        let pipe = Pipe()
        child.standardOutput = pipe
        try child.run()
        call.capture(seconds: flood)
        child.waitUntilExit()
        let m2 = mark()
        call.capture(seconds: calm)
        let m3 = mark()
        let floodReport = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self).trimmingCharacters(
            in: .whitespacesAndNewlines)
        let threads = Probe.threads()
        call.stopAll()

        func fps(_ a: Mark, _ b: Mark) -> Double { Double(b.frames - a.frames) / (b.t - a.t) }
        func aps(_ a: Mark, _ b: Mark) -> Double { Double(b.samples - a.samples) / (b.t - a.t) / 48_000 }
        let before = fps(m0, m1), during = fps(m1, m2), after = fps(m2, m3)
        let dp = m2.p, bp = m1.p
        let shed =
            (dp.authFailures - bp.authFailures) + (dp.malformed - bp.malformed) + (dp.unknownStream - bp.unknownStream)
            + (dp.other - bp.other) + (dp.srtpErrors - bp.srtpErrors) + (dp.truncated - bp.truncated) + (dp.replays - bp.replays)
        let kernel = m2.kernel - m1.kernel
        out(
            "== soak flood-test: call (320x240 VP8 + Opus, SRTP), receive socket \(call.receiveAddress) flooded for \(Int(flood)) s by a child process"
        )
        out("flood sender: \(floodReport)")
        out(
            "pipeline during the flood: \(dp.datagrams - bp.datagrams) datagrams read, \(shed) shed and counted "
                + "(auth failures \(dp.authFailures - bp.authFailures), malformed \(dp.malformed - bp.malformed), unknown stream \(dp.unknownStream - bp.unknownStream), "
                + "other \(dp.other - bp.other), replays \(dp.replays - bp.replays), SRTP errors \(dp.srtpErrors - bp.srtpErrors), truncated \(dp.truncated - bp.truncated)); "
                + "kernel receive-buffer drops \(kernel); datagrams read by kind: RTP \(dp.rtp - bp.rtp), RTCP \(dp.rtcp - bp.rtcp)"
        )
        out(
            String(
                format:
                    "video decoded: %.1f fps before, %.1f fps during (%.0f %%), %.1f fps after (%.0f %%); audio played: %.2f / %.2f / %.2f s per s",
                before, during, 100 * during / before, after, 100 * after / before, aps(m0, m1), aps(m1, m2), aps(m2, m3)))
        out("threads at the end: \(threads)")
        var failures: [String] = []
        if shed + kernel <= 0 { failures.append("no forged datagram was counted as dropped") }
        if during < minShare * before {
            failures.append(
                String(format: "decoding during the flood fell to %.0f %% (bound %.0f %%)", 100 * during / before, 100 * minShare)
            )
        }
        if after < 0.9 * before {
            failures.append(String(format: "decoding did not recover after the flood (%.0f %%)", 100 * after / before))
        }
        for f in failures { out("FAIL: " + f) }
        out(failures.isEmpty ? "flood-test: PASS" : "flood-test: FAIL")
        return failures.isEmpty ? 0 : 1
    }
}
