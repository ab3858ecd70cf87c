import Foundation
import Glibc
import MediaCore
import Testing

/// Two network namespaces joined by a veth pair; the sender's side shapes its egress with
/// `tc qdisc tbf` (rate changeable mid-run, `latency 50ms`). Sockets are opened inside each
/// namespace by switching the calling thread into it (`setns`) and straight back. Root only.
final class ShapedVethPair {
    let prefix: String
    let senderAddress = SocketAddress(ipv4: 10, 77, 0, 1, port: 0)
    let receiverAddress = SocketAddress(ipv4: 10, 77, 0, 2, port: 0)
    var sender: String { prefix + "a" }
    var receiver: String { prefix + "b" }

    static var available: Bool {
        getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip")
            && FileManager.default.isExecutableFile(atPath: "/usr/sbin/tc")
    }

    init(rateKbit: Int) throws {
        prefix = "rgcc\(getpid() % 100_000)"
        _ = try? Self.sh("ip netns del \(sender) 2>/dev/null; ip netns del \(receiver) 2>/dev/null; true")
        try Self.sh(
            """
            ip netns add \(sender)
            ip netns add \(receiver)
            ip link add \(prefix)va netns \(sender) type veth peer name \(prefix)vb netns \(receiver)
            ip -n \(sender) addr add 10.77.0.1/24 dev \(prefix)va
            ip -n \(receiver) addr add 10.77.0.2/24 dev \(prefix)vb
            ip -n \(sender) link set lo up
            ip -n \(receiver) link set lo up
            ip -n \(sender) link set \(prefix)va up
            ip -n \(receiver) link set \(prefix)vb up
            ip netns exec \(sender) tc qdisc add dev \(prefix)va root tbf rate \(rateKbit)kbit burst 1600 latency 50ms
            """)
    }

    /// Changes the shaped rate (the queue's time limit stays 50 ms).
    func setRate(kbit: Int) throws {
        try Self.sh("ip netns exec \(sender) tc qdisc change dev \(prefix)va root tbf rate \(kbit)kbit burst 1600 latency 50ms")
    }

    /// tbf's counters (sent, dropped, overlimits) as `tc -s` prints them.
    func qdiscStatistics() -> String {
        (try? Self.sh("ip netns exec \(sender) tc -s qdisc show dev \(prefix)va")) ?? ""
    }

    func tearDown() {
        _ = try? Self.sh("ip netns del \(sender); ip netns del \(receiver)")
    }

    /// A UDP socket bound in namespace `name` at `address`.
    func socket(in name: String, at address: SocketAddress) throws -> UDPSocket {
        let own = open("/proc/self/ns/net", O_RDONLY), target = open("/var/run/netns/\(name)", O_RDONLY)
        defer { Glibc.close(own); Glibc.close(target) }
        precondition(own >= 0 && target >= 0, "cannot open the namespaces")
        let newNet: Int32 = 0x4000_0000  // CLONE_NEWNET
        // glibc declares setns only under _GNU_SOURCE: look it up.
        typealias SetNS = @convention(c) (Int32, Int32) -> Int32
        let setns = unsafeBitCast(dlsym(nil, "setns")!, to: SetNS.self)
        precondition(setns(target, newNet) == 0, "setns into \(name): errno \(errno)")
        defer { precondition(setns(own, newNet) == 0, "setns back: errno \(errno)") }
        var o = UDPSocket.Options()
        o.receiveBufferSize = 1 << 20
        return try UDPSocket(bindingTo: address, options: o)
    }

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
        if p.terminationStatus != 0 {
            throw NSError(domain: "sh", code: Int(p.terminationStatus), userInfo: ["out": text, "script": script])
        }
        return text
    }
}

/// The real bottleneck: a VideoSendStream (VP8 640x360, 30 fps, numbering packets with
/// transport-wide sequence numbers) in one namespace sends through a tbf-shaped veth
/// (2.5 -> 0.5 -> 2.5 Mbit/s, 50 ms queue) to a ReceivePipeline in the other, which sends
/// transport-cc feedback (every 100 ms), receiver reports and, in the comparison run, REMB. The
/// test thread is the sender's RTCP endpoint: it reads the feedback, hands it to an
/// `RTCPSenderSession` driving the stream, and measures one-way delay per packet from the
/// feedback (both namespaces share `CLOCK_MONOTONIC`). Prints link utilisation over time, the p95
/// queuing delay (one-way delay minus the minimum) and the estimate. Root only; skipped
/// otherwise. Asserts only that the runs happened (feedback arrived, packets were matched):
/// the figures are measurements, printed.
@Suite(.serialized) struct DelayBasedBottleneckNamespaceTests {
    enum Mode: String {
        case transportCC = "transport-cc"
        case remb = "REMB"
    }

    struct Phase { var seconds: Double; var kbit: Int }
    static let phases = [Phase(seconds: 20, kbit: 2500), Phase(seconds: 20, kbit: 500), Phase(seconds: 25, kbit: 2500)]

    struct Result {
        var perSecond: [(t: Int, capacity: Int, delivered: Int, target: Int)] = []
        var queueMs: [(t: Double, ms: Double)] = []
        var feedback = 0
        var unmatched = 0
        var parts: [String] = []
        /// The session's target after each frame (seconds since the start, bits per second).
        var estimates: [(t: Double, bps: Int)] = []
        var probeClusters = 0
        var paddingPackets: UInt64 = 0
        /// Padding the receiver recorded for feedback and dropped.
        var paddingReceived = 0
        var repairsSent: UInt64 = 0
        /// Each feedback that requested clusters or gave a probe result: the time, the result
        /// and the estimates after it.
        var probeLog: [String] = []
        /// Each probe cluster's packets as the feedback reported them: size, send and arrival
        /// time in tenths of a millisecond since the start ("-": lost).
        var clusterPackets: [String] = []

        /// The target at `t` seconds (the last one set by then).
        func estimate(at t: Double) -> Int { estimates.last { $0.t <= t }?.bps ?? 0 }
        /// The first time at or after `t` the target reached `bps`, nil when it never did.
        func reached(_ bps: Int, after t: Double) -> Double? { estimates.first { $0.t >= t && $0.bps >= bps }?.t }
    }

    static func run(
        _ mode: Mode, phases: [Phase] = Self.phases, probing: Bool = true, startBitrate: Int = 1_000_000
    ) throws -> Result {
        let lab = try ShapedVethPair(rateKbit: phases[0].kbit)
        defer { lab.tearDown() }
        let rxSocket = try lab.socket(in: lab.receiver, at: SocketAddress(ipv4: 10, 77, 0, 2, port: 0))
        let txSocket = try lab.socket(in: lab.sender, at: SocketAddress(ipv4: 10, 77, 0, 1, port: 0))
        var conf = ReceivePipelineConfiguration(remoteKey: nil)
        var videoSettings = VideoReceiveSettings(codec: .vp8, payloadType: 96)
        videoSettings.rtxPayloadType = 97
        conf.video = [videoSettings]
        conf.transportSequenceNumberExtensionID = 5
        conf.sendREMB = mode == .remb
        conf.reportIntervalMilliseconds = 250
        let receiver = try ReceivePipeline(socket: rxSocket, configuration: conf, renderer: nil)
        let numbers = TransportSequenceNumbers()
        var vc = VideoSendStream.Configuration(codec: .vp8, width: 640, height: 360)
        vc.encoder.bitrate = 3_000_000
        vc.srtp = nil
        vc.transportSequence = (id: 5, numbers: numbers)
        vc.rtxPayloadType = 97
        let sink = UDPPacketSink(socket: txSocket, destination: try rxSocket.localAddress())
        let video = try VideoSendStream(configuration: vc, sink: sink)
        let session = RTCPSenderSession(
            targets: [video], startBitrate: startBitrate, minimumBitrate: 100_000,
            maximumBitrate: 3_000_000)
        if mode == .transportCC { session.transportSequenceNumbers = numbers }
        if !probing { session.probeController = nil }
        video.handleEstimatedBitrate(session.estimator.targetBitrate)
        receiver.start(); video.start()
        defer { video.stop(); receiver.stop() }

        var result = Result()
        var measure = TransportFeedbackAdapter()
        var minOWD = Int64.max
        var owds: [(t: Double, owd: Int64)] = []
        var deliveredBytes: [Int: Int] = [:]  // per second of arrival
        let picture = VideoFrame(width: 640, height: 360)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 16)
        defer { buffer.deallocate() }
        let start = MonotonicTime.now.nanoseconds
        var frame = 0
        var phaseEnd = 0.0
        var targets: [Int: Int] = [:]
        var parts: [Int: String] = [:]
        var clusterResults: [Int: [TransportPacketResult]] = [:]  // the feedback about each probe cluster
        for (k, phase) in phases.enumerated() {
            if k > 0 { try lab.setRate(kbit: phase.kbit) }
            phaseEnd += phase.seconds
            while Double(MonotonicTime.now.nanoseconds - start) / 1e9 < phaseEnd {
                let due = start + UInt64(frame) * 33_333_333
                while true {
                    let before = MonotonicTime.now.nanoseconds
                    guard before < due else { break }
                    let wait = Int((due - before) / 1_000_000)
                    guard (try? txSocket.waitUntilReadable(timeoutMilliseconds: max(0, wait))) == true,
                        let n = try? txSocket.receive(into: buffer).count
                    else { continue }
                    let now = MonotonicTime.now.nanoseconds
                    let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
                    let requestedBefore = session.probeController?.clustersRequested ?? 0
                    session.handle(bytes, now: MonotonicTime(nanoseconds: now))
                    let requested = session.probeController?.clustersRequested ?? 0
                    if requested != requestedBefore || session.estimator.probeResult != nil {
                        let e = session.estimator
                        result.probeLog.append(
                            String(format: "%.2f s", Double(now - start) / 1e9)
                                + " result \(e.probeResult.map { String(Int($0) / 1000) } ?? "-")"
                                + " clusters +\(requested - requestedBefore) target \(e.targetBitrate / 1000)"
                                + " delay \(e.delayBasedBitrate.map { $0 / 1000 } ?? -1) loss \(Int(e.lossBasedBitrate) / 1000)"
                                + " acked \(Int(e.delayBased.acknowledgedBitrate) / 1000) \(e.delayBased.usage)")
                    }
                    guard let packets = try? RTCPCompound.parse(bytes.bytes) else { continue }
                    for case .transportFeedback(let f) in packets {
                        result.feedback += 1
                        measure.adapt(f, sendLog: numbers)
                        for r in measure.results {
                            if r.probeCluster != 0 { clusterResults[r.probeCluster, default: []].append(r) }
                            guard let a = r.arrivalNs else { continue }
                            let owd = a - r.sendNs
                            minOWD = min(minOWD, owd)
                            owds.append((Double(UInt64(r.sendNs) &- start) / 1e9, owd))
                            deliveredBytes[Int((UInt64(a) &- start) / 1_000_000_000), default: 0] += r.size
                        }
                    }
                }
                SyntheticVideo.render(frameIndex: frame, into: picture)
                sendTestCapture(video.capturer, picture, timeStampNs: Int64(frame) * 33_333_333)
                frame += 1
                result.estimates.append((Double(MonotonicTime.now.nanoseconds - start) / 1e9, session.estimator.targetBitrate))
                if frame % 30 == 0 {
                    targets[frame / 30 - 1] = Int(video.statistics.outbound.targetBitrate)
                    let e = session.estimator
                    parts[frame / 30 - 1] =
                        "delay \(e.delayBasedBitrate.map { $0 / 1000 } ?? -1) loss \(Int(e.lossBasedBitrate) / 1000) remb \(e.remb.map { $0 / 1000 } ?? -1) acked \(Int(e.delayBased.acknowledgedBitrate) / 1000) \(e.delayBased.usage)"
                }
            }
        }
        result.unmatched = measure.unmatched
        for (id, rs) in clusterResults.sorted(by: { $0.key < $1.key }) {
            let sends = rs.map(\.sendNs), arrivals = rs.compactMap(\.arrivalNs)
            let spanMs = { (t: [Int64]) in String(format: "%.1f", Double((t.max() ?? 0) - (t.min() ?? 0)) / 1e6) }
            result.probeLog.append(
                "cluster \(id): sent at \(String(format: "%.2f", Double(UInt64(sends.min()!) &- start) / 1e9)) s, \(rs.count) packets \(rs.map(\.size).reduce(0, +)) bytes, \(rs.count - arrivals.count) lost, "
                    + "sent over \(spanMs(sends)) ms, arrived over \(spanMs(arrivals)) ms")
            let packets = rs.map { r in
                "\(r.size)B s\((UInt64(r.sendNs) &- start) / 100_000) a\(r.arrivalNs.map { String((UInt64($0) &- start) / 100_000) } ?? "-")"
            }
            result.clusterPackets.append("cluster \(id): " + packets.joined(separator: " "))
        }
        result.probeClusters = session.counters.probeClustersSent
        result.paddingPackets = video.statistics.pacer?.paddingPackets ?? 0
        // Probes pad with the last media packet again (an RTX packet the receiver unwraps and
        // drops as a duplicate) or, with none held, padding only; NACK repairs are unwrapped too.
        result.paddingReceived = receiver.statistics.rtxPadding + receiver.statistics.rtxUnwrapped
        result.repairsSent = video.statistics.outbound.retransmittedPacketsSent
        let capacityAt: (Int) -> Int = { s in
            var end = 0.0
            for p in phases { end += p.seconds; if Double(s) < end { return p.kbit * 1000 } }
            return phases.last!.kbit * 1000
        }
        for s in 0..<Int(phaseEnd) {
            result.perSecond.append((s, capacityAt(s), (deliveredBytes[s] ?? 0) * 8, targets[s] ?? 0))
            result.parts.append(parts[s] ?? "")
        }
        result.queueMs = owds.map { ($0.t, Double($0.owd - minOWD) / 1e6) }
        let d = session.estimator.delayBased
        print(
            "\(mode.rawValue): over-use \(d.overuseCount), decreases \(d.decreaseCount) (\(d.lossDecreaseCount) on loss), "
                + "RTCP loss-based \(Int(session.estimator.lossBasedBitrate)), last loss \(session.estimator.lastFractionLost), "
                + "threshold \(d.threshold)")
        print("\(mode.rawValue): \(lab.qdiscStatistics().split(separator: "\n").prefix(3).joined(separator: " | "))")
        return result
    }

    static func report(_ mode: Mode, _ r: Result) {
        func p95(_ a: Double, _ b: Double) -> Double {
            let xs = r.queueMs.filter { $0.t >= a && $0.t < b }.map(\.ms).sorted()
            return xs.isEmpty ? 0 : xs[min(xs.count - 1, Int(Double(xs.count) * 0.95))]
        }
        func utilisation(_ a: Int, _ b: Int) -> Double {
            let rows = r.perSecond.filter { $0.t >= a && $0.t < b }
            let d = rows.map(\.delivered).reduce(0, +), c = rows.map(\.capacity).reduce(0, +)
            return c == 0 ? 0 : Double(d) / Double(c)
        }
        func meanTarget(_ a: Int, _ b: Int) -> Int {
            let rows = r.perSecond.filter { $0.t >= a && $0.t < b }
            return rows.isEmpty ? 0 : rows.map(\.target).reduce(0, +) / rows.count
        }
        var lines = "\(mode.rawValue) per second (capacity kbit/s, delivered kbit/s, target kbit/s):\n"
        for (k, row) in r.perSecond.enumerated() {
            lines += "  t=\(row.t) \(row.capacity / 1000) \(row.delivered / 1000) \(row.target / 1000)  (\(r.parts[k]))\n"
        }
        print(lines, terminator: "")
        print(
            """
            \(mode.rawValue) summary: feedback \(r.feedback), unmatched \(r.unmatched)
              2.5 Mbit/s (10-20 s): utilisation \(String(format: "%.2f", utilisation(10, 20))), p95 queuing \(String(format: "%.1f", p95(10, 20))) ms, mean target \(meanTarget(10, 20) / 1000) kbit/s
              0.5 Mbit/s (25-40 s): utilisation \(String(format: "%.2f", utilisation(25, 40))), p95 queuing \(String(format: "%.1f", p95(25, 40))) ms, mean target \(meanTarget(25, 40) / 1000) kbit/s
              0.5 Mbit/s first 5 s (20-25 s): p95 queuing \(String(format: "%.1f", p95(20, 25))) ms
              2.5 Mbit/s again (40-65 s): utilisation \(String(format: "%.2f", utilisation(40, 65))), p95 queuing \(String(format: "%.1f", p95(40, 65))) ms; last 5 s utilisation \(String(format: "%.2f", utilisation(60, 65))), mean target \(meanTarget(60, 65) / 1000) kbit/s
            """)
    }

    /// Probing on a real bottleneck: a call starting at 300 kbit/s on a 2.5 Mbit/s path finds
    /// the path within 2 s (without probes it climbs 8 % a second), and after 6 s at 0.5 Mbit/s
    /// the estimate is back above 1.7 Mbit/s within the 6 s the path is back at 2.5 Mbit/s.
    @Test(.enabled(if: ShapedVethPair.available, "root only: network namespaces and tc"))
    func probesFindCapacityAtTheStartAndWhenThePathReturns() throws {
        let phases = [Phase(seconds: 6, kbit: 2500), Phase(seconds: 6, kbit: 500), Phase(seconds: 6, kbit: 2500)]
        let probed = try Self.run(.transportCC, phases: phases, probing: true, startBitrate: 300_000)
        let plain = try Self.run(.transportCC, phases: [Phase(seconds: 3, kbit: 2500)], probing: false, startBitrate: 300_000)
        print(
            "probing: target at 2 s \(probed.estimate(at: 2) / 1000) kbit/s (without probes \(plain.estimate(at: 2) / 1000)); "
                + "at 11.5 s \(probed.estimate(at: 11.5) / 1000); 1.7 Mbit/s again \(probed.reached(1_700_000, after: 12).map { String($0 - 12) } ?? "never") s after the path returned; "
                + "\(probed.probeClusters) clusters, \(probed.paddingPackets) padding packets")
        print(
            "probing: the feedback that asked for probes or gave a result, then each cluster:\n  "
                + probed.probeLog.joined(separator: "\n  "))
        #expect(probed.estimate(at: 2) >= 1_500_000, "the start probes found the path")
        #expect(plain.estimate(at: 2) < 600_000, "without probes the start is slow")
        #expect(plain.probeClusters == 0 && plain.paddingPackets == 0)
        #expect(probed.estimate(at: 11.5) < 700_000, "the estimate followed the path down")
        // Within the 6 s the path stays at 2.5 Mbit/s (8 % a second from 0.3 Mbit/s would take
        // over 20 s): one recovery probe every 3 s, and a chain of probes once one keeps up.
        #expect(probed.reached(1_700_000, after: 12) != nil, "the estimate did not come back within 6 s")
        // A recovery slower than the first probe after the path returned: show why.
        if (probed.reached(1_700_000, after: 12) ?? .infinity) > 13.5 {
            print("probing: the clusters' packets:\n  " + probed.clusterPackets.joined(separator: "\n  "))
        }
        #expect(probed.probeClusters >= 3 && probed.paddingPackets > 0)
        // Padding lost on the narrow path is not received; most is. The RTX packets received are
        // probe padding and NACK repairs, so at most as many as both.
        #expect(
            probed.paddingReceived > 0 && UInt64(probed.paddingReceived) <= probed.paddingPackets + probed.repairsSent,
            "\(probed.paddingReceived) RTX packets received, \(probed.paddingPackets) padding and \(probed.repairsSent) repairs sent"
        )
    }

    @Test(
        .enabled(
            if: ShapedVethPair.available && ProcessInfo.processInfo.environment["REVUE_GCC_NETNS"] != nil,
            "a 130 s measurement through a tbf bottleneck: run it as root with REVUE_GCC_NETNS=1"))
    func transportCCAgainstREMBThroughATBFBottleneck() throws {
        let gcc = try Self.run(.transportCC)
        Self.report(.transportCC, gcc)
        let remb = try Self.run(.remb)
        Self.report(.remb, remb)
        #expect(gcc.feedback > 100 && gcc.unmatched == 0)
        #expect(remb.feedback > 100)
    }
}
