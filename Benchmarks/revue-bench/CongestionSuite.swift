import Dispatch
// Congestion control side by side with Chromium on the same bottleneck (`revue-bench congestion`;
// root only: it skips with a message otherwise, or when Chromium is missing).
//
// The path. The suite makes two network namespaces of its own (`rvcg<pid>a`, the sender's, and
// `rvcg<pid>b`, the receiver's) joined by a veth pair, and deletes them afterwards; nothing leaves
// them. The bottleneck is `tc qdisc tbf` on the sender's end of the veth, `latency 200ms`, so its
// queue holds 200 ms at whatever rate is set (tbf recomputes its byte limit from the rate on each
// change), a 1600-byte burst. tbf counts each packet with its Ethernet, IP and UDP headers. This
// kernel has no netem: the delay comes from the project's `ImpairmentRelay`, which runs in the
// receiver's namespace after the bottleneck and holds every packet 20 ms each way (40 ms round
// trip before any queue); the sender knows the receiver only as the relay's address, the receiver
// knows no candidate of the sender and learns the relay's from its checks (peer reflexive), so
// every packet of both directions crosses the relay, and the media crosses the tbf. With loss, the
// relay drops 1 % of the packets that crossed the bottleneck, at random (seeded; RTCP and STUN
// alike, the reverse direction untouched).
//
// The scenarios, each three phases of 20 s (`--scale` multiplies them): capacity 2.5, 0.5 and
// 2.5 Mbit/s; the same with 1 % random loss; the same with one TCP flow (iperf3, the kernel's
// default congestion control, from the sender's namespace to the receiver's) through the same
// tbf for the whole run. The TCP flow does not cross the relay: its round trip is the queue's
// alone, shorter than the media's by 40 ms, which favours TCP.
//
// The senders, one at a time on a fresh path: Revue to Revue (two `PeerConnection`s in this
// process, their sockets opened in the namespaces), then Chromium to Chromium (two headless
// browsers, one per namespace through `ip netns exec`, scripts/webrtc/chromium_page.html's cc*
// functions; the suite carries the descriptions). Both send VP8 video only, 640x480 at 30 fps
// (the same picture of random blocks on both, `drawNoise`), starting at 300 kbit/s with a 5 Mbit/s ceiling;
// the media is connected and its first frame decoded before the clock starts.
//
// The figures, per scenario and sender, over the whole run: utilisation (what the sender put
// through the bottleneck, at the wire, counted by the relay, over the capacity); beside it, what
// the sender's own counters say it sent, over the same capacity: first transmissions of media
// payload, retransmitted payload (Revue's send statistics, Chromium's outbound-rtp) and padding
// (Revue's pacer; Chromium's getStats does not tell it apart): these count what was sent, so
// they exceed what crossed when the queue overflows; p50/p95 of the bottleneck's queuing delay, read
// from tbf's backlog every ~60 ms (backlog bytes x 8 / rate: the wait of a packet joining the
// queue; the base delay is the relay's, constant); loss seen by the receiver (its inbound-rtp
// packetsLost over packets expected; for our receiver plus its packetsDiscarded, since RFC 3550's
// count takes a duplicate as making up for a loss); the time after the last step up until the sender's rate
// through the bottleneck (over 2 s) and its own estimate reach 90 % of the capacity; frames
// decoded by the receiver; with TCP, the media's share of what both flows delivered (TCP's
// bytes scaled by 1514/1448 for its headers). One run per scenario and sender: these are
// measurements of one run, not medians. `--svg DIR` also draws rate over time per scenario.
import Foundation
import MediaCore
import MediaTools
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

enum CongestionSuite {
    /// One stretch of constant capacity. Thread rule: a value type.
    struct Phase {
        var seconds: Double
        var kbit: Int
    }

    /// One path condition: its name in the table, its random loss, whether a TCP flow competes.
    /// Thread rule: a value type.
    struct Scenario {
        var name: String
        /// Its chart's file name is congestion-`slug`.svg.
        var slug: String
        var loss: Double
        var tcp: Bool
    }

    static let all = [
        Scenario(name: "steps", slug: "steps", loss: 0, tcp: false),
        Scenario(name: "steps+1%loss", slug: "loss", loss: 0.01, tcp: false),
        Scenario(name: "steps+TCP", slug: "tcp", loss: 0, tcp: true),
    ]
    static let oneWayDelayMs = 20.0
    static let startBitrate = 300_000
    static let maxBitrate = 5_000_000
    /// Ethernet, IPv4 and UDP headers: what tbf counts beyond the UDP payload the relay counts.
    static let wireOverhead = 42
    static let senderIP: (UInt8, UInt8, UInt8, UInt8) = (10, 79, 0, 1)
    static let receiverIP: (UInt8, UInt8, UInt8, UInt8) = (10, 79, 0, 2)

    /// The three phases of capacity, 20 s each times `--scale`.
    static func schedule(_ options: BenchOptions) -> [Phase] {
        [2500, 500, 2500].map { Phase(seconds: 20 * options.scale, kbit: $0) }
    }

    // MARK: The path

    /// Two namespaces joined by a veth, tbf on the sender's side (see the file comment). Thread
    /// rule: one thread. Cost: a few `ip`/`tc` processes to make, change and delete.
    final class Path {
        let prefix = "rvcg\(getpid())"
        var sender: String { prefix + "a" }
        var receiver: String { prefix + "b" }
        var device: String { prefix + "va" }

        /// Makes the namespaces and the bottleneck at `kbit`.
        init(kbit: Int) throws {
            tearDown()
            try Self.sh(
                """
                ip netns add \(sender)
                ip netns add \(receiver)
                ip link add \(prefix)va netns \(sender) type veth peer name \(prefix)vb netns \(receiver)
                for n in \(sender) \(receiver); do ip netns exec $n sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || true; done
                ip -n \(sender) addr add 10.79.0.1/24 dev \(prefix)va
                ip -n \(receiver) addr add 10.79.0.2/24 dev \(prefix)vb
                ip -n \(sender) link set lo up
                ip -n \(receiver) link set lo up
                ip -n \(sender) link set \(prefix)va up
                ip -n \(receiver) link set \(prefix)vb up
                ip netns exec \(sender) tc qdisc add dev \(device) root tbf rate \(kbit)kbit burst 1600 latency 200ms
                """)
        }

        /// Changes the bottleneck's rate; the queue stays 200 ms long at the new rate.
        func setRate(kbit: Int) throws {
            try Self.sh(
                "ip netns exec \(sender) tc qdisc change dev \(device) root tbf rate \(kbit)kbit burst 1600 latency 200ms")
        }

        /// Deletes both namespaces (and so the veth); quiet when they are gone already.
        func tearDown() {
            _ = try? Self.sh("ip netns del \(sender) 2>/dev/null; ip netns del \(receiver) 2>/dev/null; true")
        }

        /// Runs `body` with the calling thread in namespace `name` (sockets made inside stay
        /// there), then switches back. Cost: two `setns` calls.
        func inside<T>(_ name: String, _ body: () throws -> T) throws -> T {
            let own = open("/proc/self/ns/net", O_RDONLY), target = open("/var/run/netns/\(name)", O_RDONLY)
            defer {
                Glibc.close(own)
                Glibc.close(target)
            }
            guard own >= 0, target >= 0 else { throw BenchError(description: "congestion: cannot open namespace \(name)") }
            typealias SetNS = @convention(c) (Int32, Int32) -> Int32
            // glibc declares setns only under _GNU_SOURCE: look it up.
            let setns = unsafeBitCast(dlsym(nil, "setns")!, to: SetNS.self)
            let newNet: Int32 = 0x4000_0000  // CLONE_NEWNET
            guard setns(target, newNet) == 0 else { throw BenchError(description: "congestion: setns \(name): \(errno)") }
            defer { precondition(setns(own, newNet) == 0, "setns back: errno \(errno)") }
            return try body()
        }

        /// Runs a shell script; throws with its output when it fails.
        @discardableResult
        static func sh(_ script: String) throws -> String {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/bin/sh")
            p.arguments = ["-ec", script]
            let out = Pipe()
            p.standardOutput = out
            p.standardError = out
            try p.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            let text = String(decoding: data, as: UTF8.self)
            if p.terminationStatus != 0 { throw BenchError(description: "congestion: `\(script)` failed: \(text)") }
            return text
        }
    }

    /// Reads tbf's counters about every 60 ms from one shell loop in the sender's namespace.
    /// Thread rule: made and stopped on one thread; its reader thread appends to `samples` (a
    /// Mutex). Cost: one `tc` process per sample, a thread.
    final class QueueSampler: @unchecked Sendable {
        /// tbf's counters when one sample was read (`at`: `nowNs`). Thread rule: a value type.
        struct Sample {
            var at: UInt64
            var sentBytes = 0
            var sentPackets = 0
            var dropped = 0
            var backlogBytes = 0
        }
        let process = Process()
        let output = Pipe()
        let samples = Mutex<[Sample]>([])

        /// Starts the loop on `path`'s bottleneck and the thread that reads it.
        init(_ path: Path) throws {
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
            process.arguments = [
                "netns", "exec", path.sender, "/bin/sh", "-c",
                "while :; do tc -s qdisc show dev \(path.device); echo .; sleep 0.05; done",
            ]
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            let reader = output.fileHandleForReading
            Thread { [weak self] in
                var pending = Data()
                var current = Sample(at: 0)
                while true {
                    let chunk = reader.availableData
                    if chunk.isEmpty { return }
                    pending.append(chunk)
                    while let nl = pending.firstIndex(of: 10) {
                        let line = String(decoding: pending[pending.startIndex..<nl], as: UTF8.self)
                        pending.removeSubrange(pending.startIndex...nl)
                        let words = line.split(separator: " ")
                        if line == "." {
                            current.at = nowNs()
                            self?.samples.withLock { $0.append(current) }
                            current = Sample(at: 0)
                        } else if words.first == "Sent", words.count >= 7 {
                            // "Sent 1234 bytes 12 pkt (dropped 0, overlimits 0 requeues 0)"
                            current.sentBytes = Int(words[1]) ?? 0
                            current.sentPackets = Int(words[3]) ?? 0
                            current.dropped = Int(words[6].trimmingCharacters(in: CharacterSet(charactersIn: ","))) ?? 0
                        } else if words.first == "backlog", words.count >= 2 {
                            current.backlogBytes = Self.size(words[1])
                        }
                    }
                }
            }.start()
            try process.run()
        }

        /// tc's sizes: "1234b", "12Kb", "1.5Mb".
        static func size(_ word: Substring) -> Int {
            if word.hasSuffix("Mb") { return Int((Double(word.dropLast(2)) ?? 0) * 1_048_576) }
            if word.hasSuffix("Kb") { return Int((Double(word.dropLast(2)) ?? 0) * 1024) }
            return Int(word.dropLast()) ?? 0
        }

        /// Ends the loop (the shell this sampler started) and waits for it.
        func stop() {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
    }

    // MARK: One run

    /// What a sender's counters said at one moment (cumulative; nil where the sender has none). Thread rule: a value type.
    struct Counters {
        var payloadBytes = 0.0
        var retransmittedBytes = 0.0
        var paddingBytes: Double?
        var estimate = 0.0
        var framesDecoded = 0.0
        var packetsReceived = 0.0
        var packetsLost = 0.0
        /// The width the encoder encodes at now (pixels).
        var frameWidth = 0.0
    }

    /// The figures of one scenario and sender. Thread rule: a value type.
    struct Figures {
        var utilisation = 0.0, media = 0.0, retransmitted = 0.0
        var padding: Double?
        var queueP50 = 0.0, queueP95 = 0.0
        var loss = 0.0
        var bottleneckDrops = 0
        var rateT90: Double?
        var estimateT90: Double?
        var frames = 0.0
        var tcpShare: Double?
    }

    /// Time series of one run for the chart (seconds, bits per second). Thread rule: a value type.
    struct Run {
        var sender: String
        var rate: [(t: Double, bps: Double)] = []
        var estimate: [(t: Double, bps: Double)] = []
        /// The encoded width at each estimate sample.
        var widths: [Double] = []
        var tcp: [(t: Double, bps: Double)] = []
        var figures = Figures()
    }

    /// Runs the phases over a connected sender: steps the bottleneck, samples the relay every
    /// 100 ms and `counters` every 500 ms, runs the TCP flow when the scenario has one, and
    /// reduces it all to the figures. Cost: the scenario's length.
    static func measure(
        _ sender: String, path: Path, relay: ImpairmentRelay, scenario: Scenario, phases: [Phase],
        counters: () throws -> Counters
    ) throws -> Run {
        let sampler = try QueueSampler(path)
        defer { sampler.stop() }
        let total = phases.reduce(0) { $0 + $1.seconds }
        var iperfServer: Process?
        var iperfClient: Process?
        let iperfOutput = Pipe()
        if scenario.tcp {
            let server = Process()
            server.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
            server.arguments = ["netns", "exec", path.receiver, "iperf3", "-s", "-1", "-B", "10.79.0.2", "-p", "5201"]
            server.standardOutput = FileHandle.nullDevice
            server.standardError = FileHandle.nullDevice
            try server.run()
            iperfServer = server
            usleep(300_000)
        }
        defer {
            if let c = iperfClient, c.isRunning { c.terminate() }
            if let s = iperfServer, s.isRunning { s.terminate() }
            iperfClient?.waitUntilExit()
            iperfServer?.waitUntilExit()
        }
        let first = try counters()
        let firstRelay = relay.statistics.forward
        let start = nowNs()
        if scenario.tcp {
            let client = Process()
            client.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
            client.arguments = [
                "netns", "exec", path.sender, "iperf3", "-c", "10.79.0.2", "-p", "5201", "-J", "-t",
                String(Int(total.rounded(.up))),
            ]
            client.standardOutput = iperfOutput
            client.standardError = FileHandle.nullDevice
            try client.run()
            iperfClient = client
        }
        var run = Run(sender: sender)
        var relaySamples: [(t: Double, wire: Double)] = [(0, 0)]
        var ends: [Double] = []
        for p in phases { ends.append((ends.last ?? 0) + p.seconds) }
        var phase = 0
        var tick = 0
        var last = first
        while true {
            let t = Double(nowNs() - start) / 1e9
            if t >= total { break }
            if t >= ends[phase] {
                phase += 1
                try path.setRate(kbit: phases[phase].kbit)
            }
            let r = relay.statistics.forward
            relaySamples.append(
                (t, Double(r.bytesReceived - firstRelay.bytesReceived + wireOverhead * (r.received - firstRelay.received))))
            if tick % 5 == 0 {
                last = try counters()
                run.estimate.append((t, last.estimate))
                run.widths.append(last.frameWidth)
            }
            tick += 1
            let next = start + UInt64(tick) * 100_000_000
            let now = nowNs()
            if next > now { usleep(UInt32((next - now) / 1000)) }
        }
        let end = try counters()
        let endRelay = relay.statistics.forward
        let queue = sampler.samples.withLock { $0 }.filter { $0.at >= start }
        // Rate through the bottleneck in 500 ms steps for the chart.
        var k = 0
        for i in 1..<relaySamples.count where relaySamples[i].t >= Double(k + 1) * 0.5 {
            let j = relaySamples.lastIndex { $0.t <= relaySamples[i].t - 0.5 } ?? 0
            run.rate.append(
                (relaySamples[i].t, (relaySamples[i].wire - relaySamples[j].wire) * 8 / (relaySamples[i].t - relaySamples[j].t)))
            k += 1
        }

        var f = Figures()
        let capacityBytes = phases.reduce(0.0) { $0 + Double($1.kbit) * 125 * $1.seconds }
        let wire = Double(
            endRelay.bytesReceived - firstRelay.bytesReceived + wireOverhead * (endRelay.received - firstRelay.received))
        f.utilisation = wire / capacityBytes
        f.retransmitted = (end.retransmittedBytes - first.retransmittedBytes) / capacityBytes
        f.media = (end.payloadBytes - first.payloadBytes) / capacityBytes - f.retransmitted
        if let p0 = first.paddingBytes, let p1 = end.paddingBytes { f.padding = (p1 - p0) / capacityBytes }
        let rateAt = { (at: UInt64) -> Double in
            let t = Double(at - start) / 1e9
            return Double(phases[ends.firstIndex { t < $0 } ?? (phases.count - 1)].kbit) * 1000
        }
        let delays = queue.map { Double($0.backlogBytes) * 8 / rateAt($0.at) * 1000 }.sorted()
        if !delays.isEmpty {
            f.queueP50 = Summary.percentile(delays, 0.5)
            f.queueP95 = Summary.percentile(delays, 0.95)
        }
        if let q0 = queue.first, let q1 = queue.last { f.bottleneckDrops = q1.dropped - q0.dropped }
        let lost = end.packetsLost - first.packetsLost, received = end.packetsReceived - first.packetsReceived
        f.loss = lost + received > 0 ? lost / (lost + received) : 0
        f.frames = end.framesDecoded - first.framesDecoded
        // After the last step up: the start of the first 2 s over which the rate through the
        // bottleneck averaged 90 % of the capacity (2 s: the queue left from the low phase, or a
        // burst of retransmissions, cannot fake it), and the first estimate at 90 %.
        let stepUp = ends[phases.count - 2], target = 0.9 * Double(phases.last!.kbit) * 1000
        for i in relaySamples.indices where relaySamples[i].t >= stepUp + 2 {
            let j = relaySamples.lastIndex { $0.t <= relaySamples[i].t - 2 } ?? 0
            if (relaySamples[i].wire - relaySamples[j].wire) * 8 / (relaySamples[i].t - relaySamples[j].t) >= target {
                f.rateT90 = relaySamples[j].t - stepUp
                break
            }
        }
        f.estimateT90 = run.estimate.first { $0.t >= stepUp && $0.bps >= target }.map { $0.t - stepUp }
        if let client = iperfClient {
            client.waitUntilExit()
            let data = iperfOutput.fileHandleForReading.readDataToEndOfFile()
            let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
            let endSum = (object?["end"] as? [String: Any])?["sum_received"] as? [String: Any]
            let tcpBytes = (endSum?["bytes"] as? NSNumber)?.doubleValue ?? 0
            let tcpWire = tcpBytes * 1514 / 1448
            f.tcpShare = wire + tcpWire > 0 ? wire / (wire + tcpWire) : nil
            for interval in object?["intervals"] as? [[String: Any]] ?? [] {
                if let sum = interval["sum"] as? [String: Any], let e = (sum["end"] as? NSNumber)?.doubleValue,
                    let bps = (sum["bits_per_second"] as? NSNumber)?.doubleValue
                {
                    run.tcp.append((e, bps))
                }
            }
        }
        run.figures = f
        return run
    }

    // MARK: The senders

    /// The picture both senders send: grey 4x4 blocks of random luma between 96 and 159, new
    /// every frame, flat chroma (the page's `ccNoise` draws the same on a canvas). A camera's or
    /// a pattern's easy content leaves the encoder short of any target above a few hundred
    /// kbit/s, so the link would never be the limit; full-range noise costs more than 0.5 Mbit/s
    /// at the coarsest quantizer, so no encoder could follow a low estimate; this narrow range
    /// quantizes to almost nothing when coarse and costs a few Mbit/s when fine. Thread rule: the
    /// feeder's thread. Cost: one random number per block.
    @Sendable static func drawNoise(_ n: Int, _ frame: VideoFrame) {
        var state = UInt64(n &+ 1) &* 0x9E37_79B9_7F4A_7C15
        for by in stride(from: 0, to: frame.height, by: 4) {
            for bx in stride(from: 0, to: frame.width, by: 4) {
                state ^= state << 13
                state ^= state >> 7
                state ^= state << 17
                let value = 96 + UInt8(truncatingIfNeeded: state >> 58)
                for row in by..<min(by + 4, frame.height) {
                    (frame.y + row * frame.strideY + bx).update(repeating: value, count: min(4, frame.width - bx))
                }
            }
        }
        let chroma = frame.strideUV * frame.chromaHeight
        frame.u.update(repeating: 128, count: chroma)
        frame.v.update(repeating: 128, count: chroma)
    }

    /// Counts the frames a receiver decoded. Thread rule: any thread. Cost: an atomic add.
    final class FrameCounter: VideoRenderer, @unchecked Sendable {
        let count = Atomic<Int>(0)
        func render(_ frame: DecodedVideoFrame) { count.add(1, ordering: .relaxed) }
    }

    /// The offer without its candidates (the receiver learns the sender from its checks) and the
    /// answer with the relay's address as its one candidate.
    static func replacingCandidates(in sdp: String, with candidate: String?) -> String {
        var lines: [Substring] = []
        for line in sdp.split(separator: "\r\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("a=candidate:") || line.hasPrefix("a=end-of-candidates") { continue }
            lines.append(line)
            if line.hasPrefix("a=ice-ufrag:"), let candidate {
                lines.append(Substring("a=" + candidate))
                lines.append("a=end-of-candidates")
            }
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    /// The relay in the receiver's namespace, to `port` there, delaying both ways and losing
    /// `scenario.loss` of what crossed the bottleneck.
    static func makeRelay(_ path: Path, to port: UInt16, _ scenario: Scenario) throws -> ImpairmentRelay {
        let relay = try path.inside(path.receiver) {
            try ImpairmentRelay(
                configuration: ImpairmentRelay.Configuration(
                    listen: SocketAddress(ipv4: 10, 79, 0, 2, port: 0), to: SocketAddress(ipv4: 10, 79, 0, 2, port: port),
                    impairment: ImpairmentModel.Settings(loss: scenario.loss, delayMilliseconds: oneWayDelayMs),
                    reverse: ImpairmentModel.Settings(delayMilliseconds: oneWayDelayMs), seed: 7))
        }
        relay.start()
        return relay
    }

    /// The relay's listen address as the one candidate of an answer.
    static func relayCandidate(_ relay: ImpairmentRelay) -> String {
        "candidate:1 1 udp 2130706431 10.79.0.2 \(relay.listenAddress.port) typ host"
    }

    /// Revue to Revue: a `PeerConnection` sending in the sender's namespace, one receiving in the
    /// receiver's, through the relay.
    static func revue(_ scenario: Scenario, _ options: BenchOptions) throws -> Run {
        let phases = schedule(options)
        let path = try Path(kbit: phases[0].kbit)
        defer { path.tearDown() }
        func configuration(_ ip: (UInt8, UInt8, UInt8, UInt8)) -> PeerConnectionConfiguration {
            var c = PeerConnectionConfiguration()
            c.bindAddress = SocketAddress(ipv4: ip.0, ip.1, ip.2, ip.3, port: 0)
            c.hostAddresses = [c.bindAddress]
            c.videoWidth = 640
            c.videoHeight = 480
            c.videoBitrate = startBitrate
            c.videoMaximumBitrate = maxBitrate
            return c
        }
        let a = try path.inside(path.sender) { try PeerConnection(configuration: configuration(senderIP)) }
        let b = try path.inside(path.receiver) { try PeerConnection(configuration: configuration(receiverIP)) }
        defer {
            a.close()
            b.close()
        }
        let feeder = WebRTCSuite.Feeder(try a.addVideoTrack(codec: .vp8), width: 640, height: 480, draw: drawNoise)
        let frames = FrameCounter()
        b.videoRenderer = frames
        let answer = try WebRTCSuite.blocking {
            let offer = try await a.createOffer()
            try await b.setRemoteDescription(
                try JSEPSessionDescription(parsing: replacingCandidates(in: offer.sdp, with: nil), type: .offer))
            return try await b.createAnswer()
        }
        guard let port = b.localAddress?.port else { throw BenchError(description: "congestion: receiver has no port") }
        let relay = try makeRelay(path, to: port, scenario)
        defer { relay.stop() }
        try WebRTCSuite.blocking {
            try await a.setRemoteDescription(
                try JSEPSessionDescription(
                    parsing: replacingCandidates(in: answer.sdp, with: relayCandidate(relay)), type: .answer))
        }
        feeder.start()
        defer { feeder.stop() }
        try WebRTCSuite.poll("Revue to Revue connected through the bottleneck", timeout: 30) {
            a.state == .failed || b.state == .failed || frames.count.load(ordering: .relaxed) > 0
        }
        guard a.state == .connected else {
            throw BenchError(description: "congestion: Revue to Revue: \(a.error.map { "\($0)" } ?? "\(a.state)")")
        }
        return try measure("Revue", path: path, relay: relay, scenario: scenario, phases: phases) {
            var c = senderCounters(a)
            c.framesDecoded = Double(frames.count.load(ordering: .relaxed))
            if let v = b.inboundStats.first(where: { $0.kind == "video" }) {
                c.packetsReceived = Double(v.packetsReceived)
                // RFC 3550's count takes a packet that came twice (a repair of a packet that was
                // not lost, a probe's copy) as making up for one lost: add back what the jitter
                // buffer discarded, so this is what stayed lost after repair.
                c.packetsLost = Double(v.packetsLost) + Double(v.packetsDiscarded)
            }
            return c
        }
    }

    /// Chromium to Chromium: a browser in each namespace, the video through the relay.
    static func chromium(_ scenario: Scenario, _ options: BenchOptions) throws -> Run {
        let phases = schedule(options)
        let path = try Path(kbit: phases[0].kbit)
        defer { path.tearDown() }
        let tx = try WebRTCSuite.Chromium(namespace: path.sender)
        defer { tx.stop() }
        let rx = try WebRTCSuite.Chromium(namespace: path.receiver)
        defer { rx.stop() }
        let offer = try tx.call("ccSendOffer")
        let answer = try rx.call("ccReceiveAnswer", replacingCandidates(in: offer, with: nil))
        // The receiver's port from its first UDP candidate (its address may be an mDNS name).
        guard
            let line = answer.split(separator: "\r\n").first(where: {
                $0.hasPrefix("a=candidate:") && $0.lowercased().contains(" udp ")
            }),
            case let fields = line.split(separator: " "), fields.count > 5, let port = UInt16(fields[5])
        else { throw BenchError(description: "congestion: no UDP candidate in Chromium's answer") }
        let relay = try makeRelay(path, to: port, scenario)
        defer { relay.stop() }
        _ = try tx.call("ccTakeAnswer", replacingCandidates(in: answer, with: relayCandidate(relay)))
        _ = try tx.call("ccSetMaxBitrate", String(maxBitrate))
        try WebRTCSuite.poll("Chromium to Chromium connected through the bottleneck", timeout: 30) {
            (WebRTCSuite.json((try? rx.call("ccStats")) ?? "{}")["framesDecoded"] ?? 0) > 0
        }
        return try measure("Chromium", path: path, relay: relay, scenario: scenario, phases: phases) {
            let s = WebRTCSuite.json(try tx.call("ccStats")), r = WebRTCSuite.json(try rx.call("ccStats"))
            var c = Counters()
            c.payloadBytes = s["bytesSent"] ?? 0
            c.retransmittedBytes = s["retransmittedBytesSent"] ?? 0
            c.estimate = s["availableOutgoingBitrate"] ?? 0
            c.frameWidth = s["frameWidth"] ?? 0
            c.framesDecoded = r["framesDecoded"] ?? 0
            c.packetsReceived = r["packetsReceived"] ?? 0
            c.packetsLost = r["packetsLost"] ?? 0
            return c
        }
    }

    /// What a Revue sender counts of itself: media, RTX and padding bytes, its picture width and
    /// its estimate (the receiver's fields are left at zero). Thread rule: any thread. Cost: the
    /// connection's statistics.
    static func senderCounters(_ a: PeerConnection) -> Counters {
        var c = Counters()
        if let s = a.videoSendStatistics {
            c.payloadBytes = Double(s.outbound.bytesSent)
            c.retransmittedBytes = Double(s.outbound.retransmittedBytesSent)
            c.paddingBytes = Double(s.pacer?.paddingBytes ?? 0)
            c.frameWidth = Double(s.outbound.frameWidth)
        }
        c.estimate = Double(a.sendBandwidthEstimate ?? 0)
        return c
    }

    /// Revue sends, Chromium receives (in the receiver's namespace), through the relay.
    static func revueToChromium(_ scenario: Scenario, _ options: BenchOptions) throws -> Run {
        let phases = schedule(options)
        let path = try Path(kbit: phases[0].kbit)
        defer { path.tearDown() }
        var configuration = PeerConnectionConfiguration()
        configuration.bindAddress = SocketAddress(ipv4: 10, 79, 0, 1, port: 0)
        configuration.hostAddresses = [configuration.bindAddress]
        configuration.videoWidth = 640
        configuration.videoHeight = 480
        configuration.videoBitrate = startBitrate
        configuration.videoMaximumBitrate = maxBitrate
        let a = try path.inside(path.sender) { try PeerConnection(configuration: configuration) }
        defer { a.close() }
        let rx = try WebRTCSuite.Chromium(namespace: path.receiver)
        defer { rx.stop() }
        let feeder = WebRTCSuite.Feeder(try a.addVideoTrack(codec: .vp8), width: 640, height: 480, draw: drawNoise)
        let offer = try WebRTCSuite.blocking { try await a.createOffer() }
        let answer = try rx.call("ccReceiveAnswer", replacingCandidates(in: offer.sdp, with: nil))
        guard let port = udpPort(answer) else {
            throw BenchError(description: "congestion: no UDP candidate in Chromium's answer")
        }
        let relay = try makeRelay(path, to: port, scenario)
        defer { relay.stop() }
        let relayed = replacingCandidates(in: answer, with: relayCandidate(relay))
        try WebRTCSuite.blocking { try await a.setRemoteDescription(try JSEPSessionDescription(parsing: relayed, type: .answer)) }
        feeder.start()
        defer { feeder.stop() }
        try WebRTCSuite.poll("Revue to Chromium connected through the bottleneck", timeout: 30) {
            a.state == .failed || (WebRTCSuite.json((try? rx.call("ccStats")) ?? "{}")["framesDecoded"] ?? 0) > 0
        }
        guard a.state == .connected else {
            throw BenchError(description: "congestion: Revue to Chromium: \(a.error.map { "\($0)" } ?? "\(a.state)")")
        }
        return try measure("Revue to Chromium", path: path, relay: relay, scenario: scenario, phases: phases) {
            let r = WebRTCSuite.json(try rx.call("ccStats"))
            var c = senderCounters(a)
            c.framesDecoded = r["framesDecoded"] ?? 0
            c.packetsReceived = r["packetsReceived"] ?? 0
            c.packetsLost = r["packetsLost"] ?? 0
            return c
        }
    }

    /// Chromium sends (in the sender's namespace), Revue receives, through the relay.
    static func chromiumToRevue(_ scenario: Scenario, _ options: BenchOptions) throws -> Run {
        let phases = schedule(options)
        let path = try Path(kbit: phases[0].kbit)
        defer { path.tearDown() }
        var configuration = PeerConnectionConfiguration()
        configuration.bindAddress = SocketAddress(ipv4: 10, 79, 0, 2, port: 0)
        configuration.hostAddresses = [configuration.bindAddress]
        let b = try path.inside(path.receiver) { try PeerConnection(configuration: configuration) }
        defer { b.close() }
        let frames = FrameCounter()
        b.videoRenderer = frames
        let tx = try WebRTCSuite.Chromium(namespace: path.sender)
        defer { tx.stop() }
        let offer = replacingCandidates(in: try tx.call("ccSendOffer"), with: nil)
        let answer = try WebRTCSuite.blocking {
            try await b.setRemoteDescription(try JSEPSessionDescription(parsing: offer, type: .offer))
            return try await b.createAnswer()
        }
        guard let port = b.localAddress?.port else { throw BenchError(description: "congestion: receiver has no port") }
        let relay = try makeRelay(path, to: port, scenario)
        defer { relay.stop() }
        _ = try tx.call("ccTakeAnswer", replacingCandidates(in: answer.sdp, with: relayCandidate(relay)))
        _ = try tx.call("ccSetMaxBitrate", String(maxBitrate))
        try WebRTCSuite.poll("Chromium to Revue connected through the bottleneck", timeout: 30) {
            b.state == .failed || frames.count.load(ordering: .relaxed) > 0
        }
        guard b.state == .connected else {
            throw BenchError(description: "congestion: Chromium to Revue: \(b.error.map { "\($0)" } ?? "\(b.state)")")
        }
        return try measure("Chromium to Revue", path: path, relay: relay, scenario: scenario, phases: phases) {
            let s = WebRTCSuite.json(try tx.call("ccStats"))
            var c = Counters()
            c.payloadBytes = s["bytesSent"] ?? 0
            c.retransmittedBytes = s["retransmittedBytesSent"] ?? 0
            c.estimate = s["availableOutgoingBitrate"] ?? 0
            c.frameWidth = s["frameWidth"] ?? 0
            c.framesDecoded = Double(frames.count.load(ordering: .relaxed))
            if let v = b.inboundStats.first(where: { $0.kind == "video" }) {
                c.packetsReceived = Double(v.packetsReceived)
                // RFC 3550's count takes a packet that came twice (a repair of a packet that was
                // not lost, a probe's copy) as making up for one lost: add back what the jitter
                // buffer discarded, so this is what stayed lost after repair.
                c.packetsLost = Double(v.packetsLost) + Double(v.packetsDiscarded)
            }
            return c
        }
    }

    /// The port of an answer's first UDP candidate (its address may be an mDNS name).
    static func udpPort(_ sdp: String) -> UInt16? {
        guard
            let line = sdp.split(separator: "\r\n").first(where: {
                $0.hasPrefix("a=candidate:") && $0.lowercased().contains(" udp ")
            })
        else { return nil }
        let fields = line.split(separator: " ")
        return fields.count > 5 ? UInt16(fields[5]) : nil
    }

    /// The mixed pairs on the first scenario (`revue-bench congestion-mixed`): Revue to Chromium
    /// and Chromium to Revue, with the table and a chart of their own; no records (there is no
    /// anchor of the same kind). Cost: about 2 x (60 s x `--scale` + set-up).
    static func runMixed(_ reporter: Reporter, _ options: BenchOptions) throws {
        if let why = missing() {
            print("congestion: skipped: \(why)")
            return
        }
        print("congestion: one run per scenario and sender (--reps and --warmup do not apply here)")
        let scenario = all[0]
        let runs = [try revueToChromium(scenario, options), try chromiumToRevue(scenario, options)]
        for run in runs { print(trace(scenario, run)) }
        if let dir = options.svgDirectory {
            let file = try SVGChart.writeRates(
                title: "\(scenario.name), mixed pairs: rate through the bottleneck (500 ms) and estimates",
                phases: schedule(options), runs: runs, to: dir, name: "congestion-mixed")
            print("wrote \(file)")
        }
        print(table(runs.map { (scenario, $0) }))
    }

    // MARK: Running and reporting

    /// Why the suite cannot run here, nil when it can.
    static func missing() -> String? {
        if getuid() != 0 { return "needs root (network namespaces, tc)" }
        for tool in ["/usr/sbin/ip", "/usr/sbin/tc"] where !FileManager.default.isExecutableFile(atPath: tool) {
            return "needs \(tool) (iproute2)"
        }
        if !FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium") {
            return "needs /usr/bin/chromium (scripts/install-deps)"
        }
        if !FileManager.default.fileExists(atPath: "scripts/webrtc/chromium_peer.py") { return "run it from the repository root" }
        return nil
    }

    /// Runs the scenarios named (all when empty), Revue then Chromium each, prints the table and
    /// records ours against Chromium. Cost: about 2 x (60 s x `--scale` + set-up) per scenario.
    static func run(_ reporter: Reporter, _ options: BenchOptions, only: [String]) throws {
        if let why = missing() {
            print("congestion: skipped: \(why)")
            return
        }
        print("congestion: one run per scenario and sender (--reps and --warmup do not apply here)")
        var rows: [(Scenario, Run)] = []
        for scenario in all where only.isEmpty || only.contains(scenario.name) {
            if scenario.tcp && !FileManager.default.isExecutableFile(atPath: "/usr/bin/iperf3") {
                print("congestion: \(scenario.name) skipped: needs /usr/bin/iperf3 (scripts/install-deps)")
                continue
            }
            let ours = try revue(scenario, options)
            let anchor = try chromium(scenario, options)
            rows.append((scenario, ours))
            rows.append((scenario, anchor))
            for run in [ours, anchor] { print(trace(scenario, run)) }
            record(reporter, scenario, ours.figures, anchor.figures)
            if let dir = options.svgDirectory {
                let file = try SVGChart.writeRates(
                    title: "\(scenario.name): rate through the bottleneck (500 ms) and estimates", phases: schedule(options),
                    runs: [ours, anchor], to: dir, name: "congestion-\(scenario.slug)")
                print("wrote \(file)")
            }
        }
        print(table(rows))
    }

    /// Adds one record per figure: Revue as ours, Chromium as the anchor (one run each).
    static func record(_ reporter: Reporter, _ scenario: Scenario, _ ours: Figures, _ anchor: Figures) {
        func add(_ name: String, _ unit: String, _ higher: Bool, _ o: Double, _ a: Double) {
            let so = Summary([o]), sa = Summary([a])
            reporter.add(
                BenchRecord(
                    suite: "congestion", case: "\(scenario.name): \(name)", metric: name, unit: unit, ours: o, anchor: a,
                    anchorName: "Chromium to Chromium", ratio: a != 0 ? o / a : nil,
                    ratioSummary: a != 0 ? Summary([o / a]) : nil,
                    higherIsBetter: higher, repetitions: 1, oursSummary: so, anchorSummary: sa, machine: .current))
        }
        add("utilisation", "%", true, ours.utilisation * 100, anchor.utilisation * 100)
        add("queue p95", "ms", false, ours.queueP95, anchor.queueP95)
        add("loss", "%", false, ours.loss * 100, anchor.loss * 100)
        add("frames decoded", "frames", true, ours.frames, anchor.frames)
        if let o = ours.tcpShare, let a = anchor.tcpShare { add("share against TCP", "%", true, o * 100, a * 100) }
    }

    /// One run's rate through the bottleneck and estimate every 2 s, kbit/s, for the log.
    static func trace(_ scenario: Scenario, _ run: Run) -> String {
        var out = "\(scenario.name), \(run.sender), kbit/s every 2 s (rate through the bottleneck/estimate/encoded width):"
        var next = 2.0
        for r in run.rate where r.t >= next {
            let k = run.estimate.lastIndex { $0.t <= r.t }
            let e = k.map { run.estimate[$0].bps } ?? 0, w = k.map { run.widths[$0] } ?? 0
            out += " \(Int(r.bps / 1000))/\(Int(e / 1000))/\(Int(w))"
            next += 2
        }
        return out
    }

    /// The markdown table of every scenario and sender.
    static func table(_ rows: [(Scenario, Run)]) -> String {
        func pct(_ v: Double?) -> String { v.map { String(format: "%.1f", $0 * 100) } ?? "–" }
        func s(_ v: Double?) -> String { v.map { String(format: "%.1f", $0) } ?? "not reached" }
        var out = """
            | scenario | sender | utilisation % | media sent % | RTX sent % | padding sent % | queue p50 ms | queue p95 ms | loss % | tbf drops | rate 90 % after step up (2 s), s | estimate 90 %, s | frames decoded | share vs TCP % |
            |---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|

            """
        for (scenario, run) in rows {
            let f = run.figures
            out += "| \(scenario.name) | \(run.sender) | \(pct(f.utilisation)) | \(pct(f.media)) | \(pct(f.retransmitted)) | "
            out += "\(pct(f.padding)) | \(String(format: "%.0f", f.queueP50)) | \(String(format: "%.0f", f.queueP95)) | "
            out += "\(String(format: "%.2f", f.loss * 100)) | \(f.bottleneckDrops) | \(s(f.rateT90)) | \(s(f.estimateT90)) | "
            out += "\(Int(f.frames)) | \(pct(f.tcpShare)) |\n"
        }
        return out
    }
}
