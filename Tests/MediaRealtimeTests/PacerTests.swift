import Foundation
import Glibc
import Synchronization
import Testing

@testable import MediaCore

/// Records when each packet reached the sink (monotonic ns), its size, SSRC and RTP timestamp.
final class TimingSink: PacketSink, @unchecked Sendable {
    struct Entry { var ns: UInt64; var size: Int; var ssrc: UInt32; var timestamp: UInt32 }
    let entries = Mutex<[Entry]>([])
    func write(_ packet: RawSpan) {
        packet.withUnsafeBytes { packet in
            let now = MonotonicTime.now.nanoseconds
            let e = Entry(
                ns: now, size: packet.count, ssrc: packet.count >= 12 ? packet.u32(8) : 0,
                timestamp: packet.count >= 12 ? packet.u32(4) : 0)
            entries.withLock { $0.append(e) }
        }
    }
    func flush() {}
    var all: [Entry] { entries.withLock { $0 } }
}

/// The most bytes of `entries` that reached the sink within any `windowNs`.
func largestBurst(_ entries: [TimingSink.Entry], windowNs: UInt64 = 5_000_000) -> Int {
    var best = 0, sum = 0, first = 0
    for (i, e) in entries.enumerated() {
        sum += e.size
        while entries[first].ns + windowNs <= e.ns { sum -= entries[first].size; first += 1 }
        _ = i
        best = max(best, sum)
    }
    return best
}

@Suite(.serialized) struct PacerTests {
    static let width = 1280, height = 720, bitrate = 2_500_000

    /// Sends `frames` 720p frames at 30 fps in real time (frame 0 a keyframe) and returns what
    /// reached the sink, plus the stream's statistics.
    static func send(paced: Bool, frames: Int = 15) throws -> ([TimingSink.Entry], VideoSendStream.Statistics, UInt32) {
        var c = VideoSendStream.Configuration(codec: .vp8, width: width, height: height)
        c.encoder.bitrate = bitrate
        c.srtp = nil
        c.pacer = paced ? PacerSettings() : nil
        let sink = TimingSink()
        let stream = try VideoSendStream(configuration: c, sink: sink)
        stream.start()
        let picture = VideoFrame(width: width, height: height)
        let start = MonotonicTime.now.nanoseconds
        for i in 0..<frames {
            while MonotonicTime.now.nanoseconds < start + UInt64(i) * 33_333_333 { usleep(500) }
            SyntheticVideo.render(frameIndex: i, into: picture)
            sendTestCapture(stream.capturer, picture, timeStampNs: Int64(i) * 33_333_333)
        }
        // Let the pacer send what it holds (stopping sends the rest at once).
        let deadline = MonotonicTime.now.nanoseconds + 5_000_000_000
        usleep(100_000)
        while MonotonicTime.now.nanoseconds < deadline {
            let s = stream.statistics
            if s.outbound.framesEncoded + s.capture.droppedRingFull >= UInt64(frames),
                (s.pacer?.packetsPaced ?? 0) == s.outbound.packetsSent || !paced
            {
                break
            }
            usleep(10_000)
        }
        stream.stop()
        return (sink.all, stream.statistics, stream.initialRTPTimestamp)
    }

    @Test func aKeyframeLeavesInFiveMillisecondBurstsWhenPaced() throws {
        let (unpaced, _, ts0) = try Self.send(paced: false)
        let (paced, stats, ts1) = try Self.send(paced: true)
        let keyUnpaced = unpaced.filter { $0.timestamp == ts0 }
        let keyPaced = paced.filter { $0.timestamp == ts1 }
        let keyBytes = keyPaced.reduce(0) { $0 + $1.size }
        let burstBefore = largestBurst(keyUnpaced), burstAfter = largestBurst(keyPaced)
        let spreadMs = Double(keyPaced.last!.ns - keyPaced.first!.ns) / 1e6
        let allBefore = largestBurst(unpaced), allAfter = largestBurst(paced)
        let pacer = try #require(stats.pacer)
        if ProcessInfo.processInfo.environment["PACER_DEBUG"] != nil {
            for e in paced { print((e.ns - paced[0].ns) / 1000, e.size, e.timestamp &- ts1) }
        }
        print(
            "720p VP8 \(Self.bitrate / 1000) kbit/s keyframe \(keyBytes) B in \(keyPaced.count) packets: largest 5 ms burst "
                + "\(burstBefore) B unpaced, \(burstAfter) B paced (spread over \(String(format: "%.1f", spreadMs)) ms); "
                + "whole run \(allBefore) B -> \(allAfter) B; pacer \(pacer)")
        // Pacing rate 2.5 x 2.5 Mbit/s: 7812 B per 5 ms interval; a window may hold one interval's
        // saved budget, its own budget and one packet's overshoot.
        let interval = Int(Double(Self.bitrate) * 2.5 * 0.005 / 8)
        #expect(burstAfter <= 2 * interval + 1200, "paced burst \(burstAfter) B")
        #expect(allAfter <= 2 * interval + 1200, "paced burst over the run \(allAfter) B")
        #expect(burstBefore >= keyBytes * 9 / 10, "unpaced, the keyframe leaves at once: \(burstBefore) of \(keyBytes) B")
        #expect(burstAfter * 3 < burstBefore)
        // The keyframe takes about its size over the pacing rate (not one burst), and every packet
        // still leaves (none dropped).
        #expect(spreadMs * 1e-3 * Double(Self.bitrate) * 2.5 / 8 >= Double(keyBytes - 2 * interval))
        #expect(pacer.overflows == 0 && pacer.packetsPaced == UInt64(paced.count))
        #expect(paced.count == unpaced.count || abs(paced.count - unpaced.count) < paced.count / 5)
    }

    /// Audio and paced video share one sink: audio packets leave as soon as they are encoded,
    /// between the paced keyframe's packets, while video packets wait in the pacer's queue.
    @Test func audioIsNeverQueuedBehindPacedVideo() throws {
        var vc = VideoSendStream.Configuration(codec: .vp8, width: Self.width, height: Self.height)
        vc.encoder.bitrate = Self.bitrate
        vc.srtp = nil
        vc.pacer = PacerSettings()
        var ac = AudioSendStream.Configuration()
        ac.srtp = nil
        ac.initialTimestamp = 0
        let sink = TimingSink()
        let video = try VideoSendStream(configuration: vc, sink: sink)
        let audio = try AudioSendStream(configuration: ac, sink: sink)
        video.start(); audio.start()
        let picture = VideoFrame(width: Self.width, height: Self.height)
        var source = SyntheticAudio(pattern: .speech, sampleRate: 48_000)
        var captureNs: [UInt64] = []
        let start = MonotonicTime.now.nanoseconds
        var nextFrame = 0
        // 600 ms: audio every 20 ms, video at 30 fps, a keyframe forced at 300 ms.
        for k in 0..<30 {
            while MonotonicTime.now.nanoseconds < start + UInt64(k) * 20_000_000 { usleep(300) }
            let pcm = source.int16s(frames: 960)
            captureNs.append(MonotonicTime.now.nanoseconds)
            pcm.withUnsafeBufferPointer {
                audio.capturer.capture($0, sampleRate: 48_000, channels: 1, timeStampNs: Int64(k) * 20_000_000)
            }
            while Int64(nextFrame) * 33_333_333 <= Int64(k) * 20_000_000 {
                if nextFrame == 9 { video.requestKeyframe() }
                SyntheticVideo.render(frameIndex: nextFrame, into: picture)
                sendTestCapture(video.capturer, picture, timeStampNs: Int64(nextFrame) * 33_333_333)
                nextFrame += 1
            }
        }
        usleep(300_000)
        video.stop(); audio.stop()
        let entries = sink.all
        let audioEntries = entries.filter { $0.ssrc == ac.ssrc }
        // Audio delay: from the capture call to the sink (resample, encode, protect, write).
        var delays: [Double] = []
        for e in audioEntries {
            let k = Int(e.timestamp / 960)
            if k < captureNs.count { delays.append(Double(e.ns - captureNs[k]) / 1e6) }
        }
        delays.sort()
        let pacer = try #require(video.statistics.pacer)
        let videoEntries = entries.filter { $0.ssrc == vc.ssrc }
        let keyframes = video.statistics.outbound.keyFramesEncoded
        // The largest frame (a keyframe) and the audio packets that left while it was being paced.
        var byTimestamp: [UInt32: [TimingSink.Entry]] = [:]
        for e in videoEntries { byTimestamp[e.timestamp, default: []].append(e) }
        let largest = try #require(byTimestamp.values.max { $0.reduce(0) { $0 + $1.size } < $1.reduce(0) { $0 + $1.size } })
        let during = audioEntries.filter { $0.ns > largest.first!.ns && $0.ns < largest.last!.ns }
        let medianAudio = delays[delays.count / 2], worstAudio = delays.last!
        print(
            "audio delay median \(String(format: "%.2f", medianAudio)) ms, max \(String(format: "%.2f", worstAudio)) ms "
                + "(\(delays.count) packets); video queue delay max \(pacer.maxQueueDelay.inSeconds * 1e3) ms, mean "
                + "\(pacer.totalQueueDelay.inSeconds * 1e3 / Double(max(1, pacer.packetsPaced))) ms; keyframes \(keyframes); "
                + "largest frame \(largest.count) packets over \(Double(largest.last!.ns - largest.first!.ns) / 1e6) ms with \(during.count) audio packets between"
        )
        #expect(delays.count >= 28, "audio packets sent: \(delays.count)")
        #expect(keyframes >= 2)
        // The keyframe's paced drain spans more than one audio interval, and audio leaves in it.
        #expect(largest.last!.ns - largest.first!.ns > 20_000_000)
        #expect(!during.isEmpty, "audio packets left while the keyframe was being paced")
        // Video waited in the queue; audio did not wait for it: its median delay is a small part
        // of the video's longest queueing (no audio packet took as long as the keyframe's tail).
        #expect(pacer.maxQueueDelay.inSeconds * 1e3 > 4 * medianAudio)
        #expect(worstAudio * 1e6 < Double(pacer.maxQueueDelay.inNanoseconds))
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

    /// The thread releases a queue at the pacing rate: 100 packets of 1000 B at 2.5 x 320 kbit/s
    /// (100 kB/s) take about one second, never more than one interval's budget plus a packet per 5 ms.
    @Test func aQueueDrainsAtThePacingRate() {
        let sink = TimingSink()
        let pacer = RTPPacer(sink: sink, maxPacketSize: 1500, targetBitrate: 320_000)
        pacer.start()
        var packet = [UInt8](repeating: 0, count: 1000)
        packet[0] = 0x80
        for _ in 0..<100 { packet.withUnsafeBytes { pacer.write($0) } }
        pacer.flush()
        let start = MonotonicTime.now.nanoseconds
        while pacer.queuedPackets > 0 && MonotonicTime.now.nanoseconds - start < 3_000_000_000 { usleep(5000) }
        pacer.stop()
        let e = sink.all
        let span = Double(e.last!.ns - e.first!.ns) / 1e9
        print("100 kB at 100 kB/s: \(String(format: "%.3f", span)) s, largest 5 ms burst \(largestBurst(e)) B")
        #expect(e.count == 100)
        #expect(span > 0.8, "spread over \(span) s")
        #expect(largestBurst(e) <= 2 * 500 + 1000)
    }
}

/// Keeps every packet's bytes and when it reached the sink.
final class CopyingSink: PacketSink, @unchecked Sendable {
    let packets = Mutex<[(ns: UInt64, bytes: [UInt8])]>([])
    func write(_ packet: RawSpan) {
        packet.withUnsafeBytes { packet in
            let now = MonotonicTime.now.nanoseconds
            packets.withLock { $0.append((now, Array(packet))) }
        }
    }
    func flush() {}
}

/// Probe clusters leave from the pacer's thread at the cluster's rate, padded on the RTX SSRC.
@Suite(.serialized) struct ProbeClusterPacerTests {
    @Test func aProbeIsPaddedOnTheRTXSSRCAtItsRateAndLoggedWithItsCluster() throws {
        var c = VideoSendStream.Configuration(codec: .vp8, width: 320, height: 180)
        c.encoder.bitrate = 300_000
        let key = SRTPKeyMaterial.random(for: .aeadAES128GCM)
        c.srtp = key
        c.rtxPayloadType = 97
        let numbers = TransportSequenceNumbers()
        c.transportSequence = (id: 5, numbers: numbers)
        let sink = CopyingSink()
        let stream = try VideoSendStream(configuration: c, sink: sink)
        #expect(!stream.canProbe, "no pacer thread yet")
        stream.start()
        defer { stream.stop() }
        let picture = VideoFrame(width: 320, height: 180)
        for i in 0..<3 {
            SyntheticVideo.render(frameIndex: i, into: picture)
            sendTestCapture(stream.capturer, picture, timeStampNs: Int64(i) * 33_333_333)
            usleep(33_333)
        }
        usleep(100_000)  // the frames have left
        let mediaCount = sink.packets.withLock { $0.count }
        #expect(mediaCount > 0)
        #expect(stream.canProbe)
        let cluster = ProbeCluster(id: 321, bitrate: 4_000_000)  // 7500 bytes in 15 ms
        #expect(stream.handleProbe(cluster))
        let deadline = MonotonicTime.now.nanoseconds + 2_000_000_000
        while stream.statistics.pacer?.probeClusters != 1 && MonotonicTime.now.nanoseconds < deadline { usleep(2_000) }
        let stats = try #require(stream.statistics.pacer)
        #expect(stats.probeClusters == 1)
        let padding = sink.packets.withLock { Array($0[mediaCount...]) }
        let bytes = padding.reduce(0) { $0 + $1.bytes.count }
        #expect(padding.count >= cluster.minimumPackets && bytes >= cluster.minimumBytes)
        #expect(UInt64(padding.count) == stats.paddingPackets && UInt64(bytes) == stats.paddingBytes)
        // Protected on the RTX SSRC: a receiver's context (its own replay window per SSRC)
        // takes every one.
        let inbound = try SRTPContext(material: key, direction: .inbound)
        for p in padding {
            var plain = p.bytes
            let n = try plain.withUnsafeMutableBytes { try inbound.unprotect($0, length: $0.count) }
            let packet = try plain.withUnsafeBytes { try RTPPacket(parsing: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            #expect(packet.header.ssrc == c.rtxSSRC && packet.header.payloadType == 97 && packet.header.padding)
            #expect(packet.payloadSize == 0 && packet.paddingSize == n - packet.header.marshalSize)
            let seq = try #require(packet.header.extensions.transportSequenceNumber(id: 5))
            #expect(numbers.sent(seq)?.probeCluster == 321)
            #expect(plain.withUnsafeBytes { RTXPacket.isPaddingOnly(UnsafeRawBufferPointer(rebasing: $0[0..<n]).bytes) })
        }
        // Spread at about the cluster's rate (7500 bytes at 4 Mbit/s: 15 ms), not in one burst.
        let spreadMs = Double(padding.last!.ns - padding.first!.ns) / 1e6
        print("probe cluster: \(padding.count) padding packets, \(bytes) bytes over \(spreadMs) ms")
        #expect(spreadMs >= 8, "a burst, not paced: \(spreadMs) ms")
        // Media sent before the probe is not in the cluster.
        var mediaTagged = 0
        for p in sink.packets.withLock({ Array($0[..<mediaCount]) }) {
            // The header is in the clear under SRTP: parse it without the (encrypted) payload.
            let packet = try p.bytes.withUnsafeBytes { try RTPPacket(parsing: $0) }
            if let seq = packet.header.extensions.transportSequenceNumber(id: 5), numbers.sent(seq)?.probeCluster != 0 {
                mediaTagged += 1
            }
        }
        #expect(mediaTagged == 0)
    }

    /// A slow cluster made of full-size media packets: at 370 kbit/s five 1200-byte packets take
    /// about 100 ms, so a cluster cut at 50 ms had three and gave no result; it now runs until it
    /// has its packets.
    @Test func aSlowClusterOfFullSizeMediaPacketsRunsUntilItHasItsPackets() throws {
        var c = VideoSendStream.Configuration(codec: .vp8, width: 640, height: 360)
        c.encoder.bitrate = 3_000_000
        c.rtxPayloadType = 97
        let numbers = TransportSequenceNumbers()
        c.transportSequence = (id: 5, numbers: numbers)
        let sink = CopyingSink()
        let stream = try VideoSendStream(configuration: c, sink: sink)
        stream.start()
        defer { stream.stop() }
        // The pacer drains slowly (100 kbit/s x its factor): the keyframe's packets wait in its
        // queue when the probe starts, and the cluster is made of them.
        stream.handleEstimatedBitrate(100_000)
        let picture = VideoFrame(width: 640, height: 360)
        SyntheticVideo.render(frameIndex: 0, into: picture)
        sendTestCapture(stream.capturer, picture, timeStampNs: 0)
        let queued = MonotonicTime.now.nanoseconds + 1_000_000_000
        while sink.packets.withLock({ $0.isEmpty }) && MonotonicTime.now.nanoseconds < queued { usleep(1_000) }
        let cluster = ProbeCluster(id: 77, bitrate: 370_000)  // 693 bytes in 15 ms, 5 packets
        #expect(stream.handleProbe(cluster))
        let deadline = MonotonicTime.now.nanoseconds + 2_000_000_000
        while stream.statistics.pacer?.probeClusters != 1 && MonotonicTime.now.nanoseconds < deadline { usleep(2_000) }
        #expect(stream.statistics.pacer?.probeClusters == 1)
        var tagged: [(ns: UInt64, size: Int, padding: Bool)] = []
        for p in sink.packets.withLock({ $0 }) {
            let packet = try p.bytes.withUnsafeBytes { try RTPPacket(parsing: $0) }
            guard let seq = packet.header.extensions.transportSequenceNumber(id: 5), numbers.sent(seq)?.probeCluster == 77
            else { continue }
            tagged.append((p.ns, p.bytes.count, packet.header.ssrc == c.rtxSSRC))
        }
        let spreadMs = tagged.count > 1 ? Double(tagged.last!.ns - tagged.first!.ns) / 1e6 : 0
        print(
            "slow cluster: \(tagged.count) packets (\(tagged.filter(\.padding).count) padding), sizes \(tagged.map(\.size)), over \(spreadMs) ms"
        )
        #expect(tagged.count >= cluster.minimumPackets, "the cluster ended with \(tagged.count) packets")
        #expect(tagged.filter { !$0.padding }.count >= 3, "media made up the cluster")
        // Still at the cluster's rate: four full-size packets at 370 kbit/s take about 100 ms.
        #expect(spreadMs > 60, "\(spreadMs) ms")
    }
}
