// The pacer on simulated time: our video and audio send streams, driven from the test's clock,
// and a bare pacer driven the way its thread runs it. Each packet is stamped with the simulated
// time it left, so burst sizes, spreads and queue delays are exact and the same in every run.
import Foundation
import MediaCore
import MediaTestSupport
import MediaTools
import Synchronization
import Testing

/// What left a simulated sender: each packet's simulated send time and bytes.
/// Sendable: touched only on the simulated clock's thread (the test's).
final class SimulatedWire: @unchecked Sendable {
    struct Packet {
        var ns: UInt64
        var bytes: [UInt8]
        var size: Int { bytes.count }
        var ssrc: UInt32 { bytes.count >= 12 ? word(at: 8) : 0 }
        var timestamp: UInt32 { bytes.count >= 8 ? word(at: 4) : 0 }
        func word(at i: Int) -> UInt32 {
            UInt32(bytes[i]) << 24 | UInt32(bytes[i + 1]) << 16 | UInt32(bytes[i + 2]) << 8 | UInt32(bytes[i + 3])
        }
    }
    private(set) var packets: [Packet] = []
    let time: SimulatedTime
    init(time: SimulatedTime) { self.time = time }
    func record(_ bytes: UnsafeRawBufferPointer) { packets.append(Packet(ns: time.now.nanoseconds, bytes: Array(bytes))) }

    /// The most bytes of `packets` that left within any `windowNs`.
    static func largestBurst(_ packets: [Packet], windowNs: UInt64 = 5_000_000) -> Int {
        var best = 0, sum = 0, first = 0
        for p in packets {
            sum += p.size
            while packets[first].ns + windowNs <= p.ns {
                sum -= packets[first].size
                first += 1
            }
            best = max(best, sum)
        }
        return best
    }
}

/// A packet sink that records into a `SimulatedWire`.
final class SimulatedWireSink: PacketSink, @unchecked Sendable {
    let wire: SimulatedWire
    init(_ wire: SimulatedWire) { self.wire = wire }
    func write(_ packet: RawSpan) { packet.withUnsafeBytes { wire.record($0) } }
    func flush() {}
}

/// Runs a bare pacer from a simulated clock as its thread would: when woken and when the last
/// turn said. Sendable: the simulated clock's thread only.
final class SimulatedPacerDriver: @unchecked Sendable {
    let pacer: RTPPacer
    let time: SimulatedTime
    private var timer: ScheduledWork?
    private var queued = false

    init(_ pacer: RTPPacer, time: SimulatedTime) {
        self.pacer = pacer
        self.time = time
        pacer.clock = EngineClock(time)
        pacer.startDriven { [unowned self] in
            guard !queued else { return }
            queued = true
            time.schedule(after: .zero) { [unowned self] in run() }
        }
    }

    private func run() {
        queued = false
        let now = time.now
        let next = pacer.runDriven(now: now)
        timer?.cancel()
        timer = time.schedule(after: max(next - now, .nanoseconds(1))) { [unowned self] in run() }
    }

    func stop() {
        timer?.cancel()
        pacer.stop()
    }
}

@Suite struct SimulatedPacerTests {
    static let width = 1280, height = 720, bitrate = 2_500_000

    /// Sends 15 720p frames at 30 fps (frame 0 a keyframe), paced or not, and returns what left,
    /// the stream's statistics and its first RTP timestamp.
    static func send(paced: Bool) throws -> ([SimulatedWire.Packet], VideoSendStream.Statistics, UInt32) {
        let time = SimulatedTime()
        let wire = SimulatedWire(time: time)
        let sender = try SimulatedSendPipeline(
            time: time, key: nil, width: width, height: height, bitrate: bitrate, output: wire.record
        ) { s in s.video.pacer = paced ? PacerSettings() : nil }
        sender.start(seconds: 0.5, audio: false)
        time.advance(by: .seconds(2))
        sender.stop()
        return (wire.packets, sender.video.statistics, sender.video.initialRTPTimestamp)
    }

    @Test func aKeyframeLeavesInFiveMillisecondBurstsWhenPaced() throws {
        let (unpaced, _, ts0) = try Self.send(paced: false)
        let (paced, stats, ts1) = try Self.send(paced: true)
        let keyUnpaced = unpaced.filter { $0.timestamp == ts0 }
        let keyPaced = paced.filter { $0.timestamp == ts1 }
        let keyBytes = keyPaced.reduce(0) { $0 + $1.size }
        let burstBefore = SimulatedWire.largestBurst(keyUnpaced), burstAfter = SimulatedWire.largestBurst(keyPaced)
        let spreadMs = Double(keyPaced.last!.ns - keyPaced.first!.ns) / 1e6
        let allBefore = SimulatedWire.largestBurst(unpaced), allAfter = SimulatedWire.largestBurst(paced)
        let pacer = try #require(stats.pacer)
        print(
            "simulated pacer: 720p VP8 \(Self.bitrate / 1000) kbit/s keyframe \(keyBytes) B in \(keyPaced.count) packets: "
                + "largest 5 ms burst \(burstBefore) B unpaced, \(burstAfter) B paced (spread over \(spreadMs) ms); "
                + "whole run \(allBefore) B -> \(allAfter) B; \(paced.count) packets paced, \(unpaced.count) unpaced")
        // Pacing rate 2.5 x 2.5 Mbit/s: 3906 B per 5 ms interval; a window may hold one interval's
        // saved budget, its own budget and one packet's overshoot. Delta frames leave in one burst
        // each (`aDeltaFrameLeavesInOneBurstAKeyframeStaysPaced`): over the run, the largest
        // burst is the largest delta frame, well under the keyframe.
        let interval = Int(Double(Self.bitrate) * 2.5 * 0.005 / 8)
        #expect(burstAfter <= 2 * interval + 1200, "paced burst \(burstAfter) B")
        let largestDelta =
            Dictionary(grouping: paced.filter { $0.timestamp != ts1 }, by: \.timestamp).values
            .map { $0.reduce(0) { $0 + $1.size } }.max() ?? 0
        #expect(allAfter <= max(2 * interval + 1200, largestDelta), "paced burst over the run \(allAfter) B")
        #expect(burstBefore == keyBytes, "unpaced, the keyframe leaves at once: \(burstBefore) of \(keyBytes) B")
        #expect(burstAfter * 3 < burstBefore)
        // The keyframe takes about its size over the pacing rate (not one burst), and every packet
        // still leaves (none dropped): the same frames, so the same packets as unpaced.
        #expect(spreadMs * 1e-3 * Double(Self.bitrate) * 2.5 / 8 >= Double(keyBytes - 2 * interval))
        #expect(pacer.overflows == 0 && pacer.packetsPaced == UInt64(paced.count))
        #expect(paced.map(\.size) == unpaced.map(\.size))
    }

    /// Audio and paced video share one output: audio packets leave the instant they are
    /// captured (encoding takes no simulated time), between the paced keyframe's packets, while
    /// video packets wait in the pacer's queue.
    @Test func audioIsNeverQueuedBehindPacedVideo() throws {
        let time = SimulatedTime()
        let wire = SimulatedWire(time: time)
        let sender = try SimulatedSendPipeline(
            time: time, key: nil, width: Self.width, height: Self.height, bitrate: Self.bitrate, output: wire.record
        ) { s in s.audio.initialTimestamp = 0 }
        // 600 ms: audio every 20 ms, video at 30 fps, a keyframe forced at 300 ms.
        sender.onFrame = { i in if i == 9 { sender.video.requestKeyframe() } }
        let start = time.now.nanoseconds
        sender.start(seconds: 0.6)
        time.advance(by: .seconds(1))
        sender.stop()
        let audioEntries = wire.packets.filter { $0.ssrc == sender.audio.configuration.ssrc }
        let delays = audioEntries.map { e in Double(e.ns - start - UInt64(e.timestamp / 960) * 20_000_000) / 1e6 }.sorted()
        let pacer = try #require(sender.video.statistics.pacer)
        let videoEntries = wire.packets.filter { $0.ssrc == sender.video.configuration.ssrc }
        let keyframes = sender.video.statistics.outbound.keyFramesEncoded
        // The largest frame (a keyframe) and the audio packets that left while it was being paced.
        let byTimestamp = Dictionary(grouping: videoEntries, by: \.timestamp)
        let largest = try #require(byTimestamp.values.max { $0.reduce(0) { $0 + $1.size } < $1.reduce(0) { $0 + $1.size } })
        let during = audioEntries.filter { $0.ns > largest.first!.ns && $0.ns < largest.last!.ns }
        print(
            "simulated pacer: audio delay max \(delays.last!) ms (\(delays.count) packets); video queue delay max "
                + "\(pacer.maxQueueDelay.inSeconds * 1e3) ms, mean \(pacer.totalQueueDelay.inSeconds * 1e3 / Double(max(1, pacer.packetsPaced))) ms; "
                + "keyframes \(keyframes); largest frame \(largest.count) packets over \(Double(largest.last!.ns - largest.first!.ns) / 1e6) ms "
                + "with \(during.count) audio packets between")
        #expect(delays.count == 30, "audio packets sent: \(delays.count)")
        #expect(keyframes == 2)
        // The keyframe's paced drain spans more than one audio interval, and audio leaves in it.
        #expect(largest.last!.ns - largest.first!.ns > 20_000_000)
        #expect(!during.isEmpty, "audio packets left while the keyframe was being paced")
        // Video waited in the queue; audio never waited at all.
        #expect(pacer.maxQueueDelay > .milliseconds(20))
        #expect(delays.last! == 0)
    }

    /// Without a thread (driven by hand), a flush sends everything queued, in order.
    @Test func aPacerWithoutItsThreadSendsOnFlush() {
        let sink = MemoryPacketSink()
        let pacer = RTPPacer(sink: sink, maxPacketSize: 1500, targetBitrate: 100_000)
        for i in 0..<5 { [UInt8](repeating: UInt8(i), count: 100 + i).withUnsafeBytes { pacer.write($0) } }
        #expect(pacer.queuedPackets == 5 && sink.takePackets().isEmpty)
        pacer.flush()
        let out = sink.takePackets()
        #expect(out.map(\.count) == [100, 101, 102, 103, 104])
        #expect(out.map { $0[0] } == [0, 1, 2, 3, 4])
        #expect(pacer.statistics.packetsPaced == 5 && pacer.queuedPackets == 0)
        // Oversized packets and a full queue are dropped and counted.
        [UInt8](repeating: 0, count: 1501).withUnsafeBytes { pacer.write($0) }
        #expect(pacer.statistics.overflows == 1)
    }

    /// The pacer releases a queue at the pacing rate: 100 packets of 1000 B at 2.5 x 320 kbit/s
    /// (100 kB/s) take one second, never more than one interval's budget plus a packet per 5 ms.
    @Test func aQueueDrainsAtThePacingRate() {
        let time = SimulatedTime()
        let wire = SimulatedWire(time: time)
        let driver = SimulatedPacerDriver(
            RTPPacer(sink: SimulatedWireSink(wire), maxPacketSize: 1500, targetBitrate: 320_000), time: time)
        var packet = [UInt8](repeating: 0, count: 1000)
        packet[0] = 0x80
        for _ in 0..<100 { packet.withUnsafeBytes { driver.pacer.write($0) } }
        driver.pacer.flush()
        time.advance(by: .seconds(2))
        let queued = driver.pacer.queuedPackets
        driver.stop()
        let e = wire.packets
        let span = Double(e.last!.ns - e.first!.ns) / 1e9
        print("simulated pacer: 100 kB at 100 kB/s: \(span) s, largest 5 ms burst \(SimulatedWire.largestBurst(e)) B")
        #expect(queued == 0 && e.count == 100)
        #expect(span > 0.9 && span < 1.0, "spread over \(span) s")
        #expect(SimulatedWire.largestBurst(e) <= 2 * 500 + 1000)
    }

    /// Delta frames leave at once on the budget saved between frames, a keyframe stays paced: at
    /// 2.5 x 2.5 Mbit/s (3906 B per 5 ms interval), 30 frames of 11 kB a frame interval apart each
    /// leave at one instant, where one interval's budget at a time took three intervals (10 ms)
    /// per frame; a keyframe of 44 kB written the same way after a pause still leaves in bursts of
    /// about one interval's budget, over 50 ms.
    @Test func aDeltaFrameLeavesInOneBurstAKeyframeStaysPaced() {
        let time = SimulatedTime()
        let wire = SimulatedWire(time: time)
        let driver = SimulatedPacerDriver(
            RTPPacer(sink: SimulatedWireSink(wire), maxPacketSize: 1500, targetBitrate: Self.bitrate), time: time)
        var packet = [UInt8](repeating: 0, count: 1100)
        packet[0] = 0x80
        func frame(_ index: UInt8, packets: Int, keyframe: Bool) {
            packet[4] = index  // the RTP timestamp's first byte tells the frames apart
            for _ in 0..<packets { packet.withUnsafeBytes { driver.pacer.write($0, burstable: !keyframe) } }
            driver.pacer.flush()
        }
        var written: [UInt8: UInt64] = [:]
        for i in 0..<30 {
            time.advance(by: .nanoseconds(33_333_333))
            written[UInt8(i)] = time.now.nanoseconds
            frame(UInt8(i), packets: 10, keyframe: false)
        }
        time.advance(by: .milliseconds(100))
        frame(200, packets: 40, keyframe: true)
        time.advance(by: .milliseconds(200))
        driver.stop()
        let frames = Dictionary(grouping: wire.packets) { $0.timestamp >> 24 }
        var worst = 0.0
        for i in 0..<30 {
            let f = frames[UInt32(i)] ?? []
            // From the write to the frame's last packet leaving.
            worst = max(worst, Double(f.map(\.ns).max()! - written[UInt8(i)]!) / 1e6)
            #expect(f.count == 10)
        }
        let key = frames[200] ?? []
        let keySpread = Double(key.last!.ns - key.first!.ns) / 1e6
        print(
            "simulated pacer: 11 kB delta frames leave within \(worst) ms of their write; a 44 kB keyframe over \(keySpread) ms")
        #expect(worst == 0, "a delta frame waited \(worst) ms")
        #expect(key.count == 40 && keySpread >= 45, "keyframe over \(keySpread) ms")
        let interval = Int(Double(Self.bitrate) * 2.5 * 0.005 / 8)
        #expect(SimulatedWire.largestBurst(key) <= 2 * interval + 1100)
    }

    /// The queue-time limit counts the time the queued packets have already waited: 100 kB queued
    /// at once at 2.5 x 100 kbit/s (3.2 s at the pacing rate) is out within the 2 s limit, where a
    /// rate that drained the queue's bytes over a fresh 2 s at every interval (falling as the
    /// queue shrank) let the last packets wait 2.9 s.
    @Test func aLongQueueLeavesWithinTheQueueTimeLimit() {
        let time = SimulatedTime()
        let wire = SimulatedWire(time: time)
        let driver = SimulatedPacerDriver(
            RTPPacer(sink: SimulatedWireSink(wire), maxPacketSize: 1500, targetBitrate: 100_000), time: time)
        var packet = [UInt8](repeating: 0, count: 1000)
        packet[0] = 0x80
        let start = time.now.nanoseconds
        for _ in 0..<100 { packet.withUnsafeBytes { driver.pacer.write($0) } }
        driver.pacer.flush()
        time.advance(by: .seconds(4))
        let stats = driver.pacer.statistics
        driver.stop()
        let lastMs = Double(wire.packets.last!.ns - start) / 1e6
        print("simulated pacer: 100 kB queued at 250 kbit/s pacing: the last packet left after \(lastMs) ms")
        #expect(wire.packets.count == 100)
        #expect(lastMs <= 2_010 && stats.maxQueueDelay <= .milliseconds(2_010), "last packet after \(lastMs) ms")
    }

    /// A probe cluster leaves at the cluster's rate, padded on the RTX SSRC (SRTP-protected there,
    /// tagged with the cluster in the transport-wide send log), after the media sent before it:
    /// each padding packet is the last media packet again as an RTX packet (RFC 4588: its
    /// sequence number, then its payload), as libwebrtc pads when it holds media.
    @Test func aProbeIsPaddedOnTheRTXSSRCAtItsRateAndLoggedWithItsCluster() throws {
        let time = SimulatedTime()
        let wire = SimulatedWire(time: time)
        let key = SRTPKeyMaterial.random(for: .aeadAES128GCM)
        let numbers = TransportSequenceNumbers()
        var c = VideoSendStream.Configuration(codec: .vp8, width: 320, height: 180)
        c.rtxPayloadType = 97
        c.transportSequence = (id: 5, numbers: numbers)
        #expect(!(try VideoSendStream(configuration: c, sink: MemoryPacketSink())).canProbe, "not started")
        let sender = try SimulatedSendPipeline(
            time: time, key: key, width: 320, height: 180, bitrate: 300_000, output: wire.record
        ) { s in
            s.video.rtxPayloadType = 97
            s.video.transportSequence = (id: 5, numbers: numbers)
        }
        c = sender.video.configuration
        sender.start(seconds: 0.1, audio: false)
        time.advance(by: .milliseconds(200))  // the three frames have left
        let mediaCount = wire.packets.count
        #expect(mediaCount > 0)
        #expect(sender.video.canProbe)
        let cluster = ProbeCluster(id: 321, bitrate: 4_000_000)  // 7500 bytes in 15 ms
        #expect(sender.video.handleProbe(cluster))
        time.advance(by: .milliseconds(500))
        let stats = try #require(sender.video.statistics.pacer)
        #expect(stats.probeClusters == 1)
        let padding = Array(wire.packets[mediaCount...])
        let bytes = padding.reduce(0) { $0 + $1.size }
        #expect(padding.count >= cluster.minimumPackets && bytes >= cluster.minimumBytes)
        #expect(UInt64(padding.count) == stats.paddingPackets && UInt64(bytes) == stats.paddingBytes)
        // Protected on the RTX SSRC: a receiver's context (its own replay window per SSRC) takes
        // every one.
        let inbound = try SRTPContext(material: key, direction: .inbound)
        var lastMedia = wire.packets[mediaCount - 1].bytes
        let lastLength = try lastMedia.withUnsafeMutableBytes {
            var span = $0.mutableBytes
            return try inbound.unprotect(&span, length: span.byteCount)
        }
        let last = try RTPPacket(parsing: lastMedia.span.bytes.extracting(0..<lastLength))
        let lastPayload = Array(lastMedia[last.header.marshalSize..<(lastLength - last.paddingSize)])
        for p in padding {
            var plain = p.bytes
            let n = try plain.withUnsafeMutableBytes {
                var span = $0.mutableBytes
                return try inbound.unprotect(&span, length: span.byteCount)
            }
            let packet = try RTPPacket(parsing: plain.span.bytes.extracting(0..<n))
            #expect(packet.header.ssrc == c.rtxSSRC && packet.header.payloadType == 97)
            #expect(packet.header.timestamp == last.header.timestamp)
            let payload = Array(plain[packet.header.marshalSize..<(n - packet.paddingSize)])
            #expect(payload.count == lastPayload.count + 2)
            #expect(UInt16(payload[0]) << 8 | UInt16(payload[1]) == last.header.sequenceNumber, "OSN")
            #expect(Array(payload.dropFirst(2)) == lastPayload, "the last media packet's payload")
            let seq = try #require(packet.header.extensions.transportSequenceNumber(id: 5))
            #expect(numbers.sent(seq)?.probeCluster == 321)
        }
        // Spread at about the cluster's rate (7500 bytes at 4 Mbit/s: 15 ms), not in one burst.
        let spreadMs = Double(padding.last!.ns - padding.first!.ns) / 1e6
        print("simulated probe cluster: \(padding.count) padding packets, \(bytes) bytes over \(spreadMs) ms")
        #expect(spreadMs >= 12 && spreadMs <= 16, "\(spreadMs) ms")
        // Media sent before the probe is not in the cluster.
        var mediaTagged = 0
        for p in wire.packets[..<mediaCount] {
            // The header is in the clear under SRTP: parse it without the (encrypted) payload.
            let packet = try RTPPacket(parsing: p.bytes.span.bytes)
            if let seq = packet.header.extensions.transportSequenceNumber(id: 5), numbers.sent(seq)?.probeCluster != 0 {
                mediaTagged += 1
            }
        }
        #expect(mediaTagged == 0)
    }

    /// A slow cluster made of full-size media packets: at 370 kbit/s five 1200-byte packets take
    /// about 100 ms, so a cluster cut at 50 ms had three and gave no result; it runs until it has
    /// its packets.
    @Test func aSlowClusterOfFullSizeMediaPacketsRunsUntilItHasItsPackets() throws {
        let time = SimulatedTime()
        let wire = SimulatedWire(time: time)
        let numbers = TransportSequenceNumbers()
        let sender = try SimulatedSendPipeline(
            time: time, key: nil, width: 640, height: 360, bitrate: 3_000_000, output: wire.record
        ) { s in
            s.video.rtxPayloadType = 97
            s.video.transportSequence = (id: 5, numbers: numbers)
        }
        // The pacer drains slowly (100 kbit/s x its factor): the keyframe's packets wait in its
        // queue when the probe starts, and the cluster is made of them.
        sender.video.handleEstimatedBitrate(100_000)
        sender.start(seconds: 0.01, audio: false)
        #expect(time.runUntil(timeout: .seconds(1), step: .milliseconds(1)) { !wire.packets.isEmpty })
        let cluster = ProbeCluster(id: 77, bitrate: 370_000)  // 693 bytes in 15 ms, 5 packets
        #expect(sender.video.handleProbe(cluster))
        time.advance(by: .milliseconds(500))
        #expect(sender.video.statistics.pacer?.probeClusters == 1)
        var tagged: [(ns: UInt64, size: Int, padding: Bool)] = []
        for p in wire.packets {
            let packet = try RTPPacket(parsing: p.bytes.span.bytes)
            guard let seq = packet.header.extensions.transportSequenceNumber(id: 5), numbers.sent(seq)?.probeCluster == 77
            else { continue }
            tagged.append((p.ns, p.size, packet.header.ssrc == sender.video.configuration.rtxSSRC))
        }
        sender.stop()
        let spreadMs = tagged.count > 1 ? Double(tagged.last!.ns - tagged.first!.ns) / 1e6 : 0
        print(
            "simulated slow cluster: \(tagged.count) packets (\(tagged.filter(\.padding).count) padding), sizes \(tagged.map(\.size)), over \(spreadMs) ms"
        )
        #expect(tagged.count >= cluster.minimumPackets, "the cluster ended with \(tagged.count) packets")
        #expect(tagged.filter { !$0.padding }.count >= 3, "media made up the cluster")
        // Still at the cluster's rate: four full-size packets at 370 kbit/s take about 100 ms.
        #expect(spreadMs > 60, "\(spreadMs) ms")
    }

    /// Retransmissions of a paced stream take at most its target bitrate (libwebrtc's
    /// retransmission rate limiter: half a second of it saved, refilled at the rate) and leave
    /// through the pacer's budget, so a receiver behind a full queue cannot make the sender add
    /// more than its estimate to it: every packet of about 0.6 s of video NACKed twice at once
    /// (about 2.4 times what the allowance holds) gets about half a second's worth resent; the
    /// rest is refused and counted as rate-limited, not as lost from the history, and a request
    /// after the allowance refilled is answered.
    @Test func retransmissionsStayWithinTheTargetBitrate() throws {
        let time = SimulatedTime()
        let wire = SimulatedWire(time: time)
        let bitrate = 300_000
        let sender = try SimulatedSendPipeline(
            time: time, key: .random(for: .aeadAES128GCM), width: 320, height: 180, bitrate: bitrate,
            output: wire.record
        ) { s in s.video.rtxPayloadType = 97 }
        let ssrc = sender.video.ssrc, rtxSSRC = sender.video.configuration.rtxSSRC
        sender.start(seconds: 0.6, audio: false)
        time.advance(by: .milliseconds(700))
        let media = wire.packets.filter { $0.ssrc == ssrc }
        let seqs = media.map { UInt16($0.bytes[2]) << 8 | UInt16($0.bytes[3]) }
        let mediaBytes = media.reduce(0) { $0 + $1.size }
        let allowance = Double(bitrate) / 8 * 0.5
        #expect(Double(2 * mediaBytes) > 2 * allowance, "the requests exceed the allowance: \(2 * mediaBytes) bytes")
        let before = wire.packets.count, askedAt = time.now.nanoseconds
        sender.video.handleNack(seqs + seqs)
        time.advance(by: .milliseconds(50))
        let resent = wire.packets[before...].filter { $0.ssrc == rtxSSRC }
        let resentBytes = resent.reduce(0) { $0 + $1.size }
        let elapsed = Double((resent.last?.ns ?? askedAt) - askedAt) / 1e9
        let stats = sender.video.statistics
        print(
            "simulated RTX limit: \(2 * seqs.count) packets (\(2 * mediaBytes) B) asked at \(bitrate / 1000) kbit/s, "
                + "\(resent.count) resent (\(resentBytes) B over \(elapsed * 1000) ms), "
                + "\(stats.retransmissionsRateLimited) rate-limited, \(stats.retransmissionsRefused) refused")
        #expect(resent.count > 0 && Double(resentBytes) >= allowance - 1300, "\(resentBytes) B resent")
        #expect(Double(resentBytes) <= allowance + Double(bitrate) / 8 * elapsed + 1300, "\(resentBytes) B resent")
        #expect(Int(stats.retransmissionsRateLimited) == 2 * seqs.count - resent.count)
        #expect(stats.retransmissionsRefused == 0)
        // Asked again once the allowance has refilled: the last packet, which the limit refused
        // twice, is resent.
        time.advance(by: .milliseconds(200))
        let again = wire.packets.count
        sender.video.handleNack([seqs.last!])
        time.advance(by: .milliseconds(20))
        #expect(wire.packets[again...].filter { $0.ssrc == rtxSSRC }.count == 1)
        sender.stop()
    }

    /// Under an estimate, what the stream puts on the wire (RTP headers, SRTP tags and
    /// retransmissions included) stays within it: the encoder's target leaves room for what the
    /// stream sends beyond its frames. Small packets make that overhead large: 320x180 at
    /// 150 kbit/s, with 3 % of the packets NACKed.
    @Test func whatAStreamSendsUnderAnEstimateStaysWithinIt() throws {
        let time = SimulatedTime()
        let wire = SimulatedWire(time: time)
        let sender = try SimulatedSendPipeline(
            time: time, key: .random(for: .aeadAES128GCM), width: 320, height: 180, bitrate: 1_000_000,
            output: wire.record
        ) { s in
            s.video.rtxPayloadType = 97
            s.video.mtu = 400  // several packets per frame: the headers weigh
            s.video.encoder.frameDropThreshold = VideoSendStream.congestionFrameDropThreshold
        }
        let estimate = 150_000
        sender.video.handleEstimatedBitrate(estimate)
        sender.start(seconds: 6, audio: false)
        var nacked = 0
        for step in 0..<60 {
            time.advance(by: .milliseconds(100))
            let media = wire.packets.suffix(40).filter { $0.ssrc == sender.video.ssrc }
            if step % 3 == 0, let p = media.last {
                sender.video.handleNack([UInt16(p.bytes[2]) << 8 | UInt16(p.bytes[3])])
                nacked += 1
            }
        }
        // The last 4 s: the first 2 s hold the first keyframe and the first overhead measures.
        let from = UInt64(2_000_000_000) + wire.packets.first!.ns
        let late = wire.packets.filter { $0.ns >= from }
        let span = Double(late.last!.ns - from) / 1e9
        let rate = Double(late.reduce(0) { $0 + $1.size }) * 8 / span
        let stats = sender.video.statistics
        print(
            "simulated overhead: \(late.count) packets over \(span) s at \(Int(rate / 1000)) kbit/s on the wire under a "
                + "\(estimate / 1000) kbit/s estimate; encoder target \(Int(stats.outbound.targetBitrate / 1000)) kbit/s; "
                + "\(stats.outbound.retransmittedPacketsSent) resent of \(nacked) NACKs")
        #expect(stats.outbound.retransmittedPacketsSent > 0)
        #expect(stats.outbound.targetBitrate < Double(estimate) * 0.95, "the target left no room")
        #expect(rate <= Double(estimate) * 1.05, "\(Int(rate)) bit/s on the wire under \(estimate)")
        sender.stop()
    }
}
