import Glibc
import MediaCore
import Synchronization
import Testing

/// Encodes `count` 20 ms Opus packets of speech-like audio with in-band FEC (and DTX when asked).
private func opusPackets(_ count: Int, fec: Bool = true, dtx: Bool = false, silenceFrom: Int = .max) throws -> [[UInt8]] {
    let enc = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .voip)
    enc.isInbandFECEnabled = fec
    enc.expectedPacketLossPercent = fec ? 20 : 0
    enc.isDTXEnabled = dtx
    var source = SyntheticAudio(pattern: .speech, sampleRate: 48_000)
    var out: [[UInt8]] = []
    for k in 0..<count {
        var pcm = source.int16s(frames: 960)
        if k >= silenceFrom { pcm = [Int16](repeating: 0, count: 960) }
        var packet = [UInt8](repeating: 0, count: 1500)
        let n = try pcm.withUnsafeBufferPointer { p in try packet.withUnsafeMutableBytes { try enc.encode(p, into: $0) } }
        out.append(Array(packet[0..<n]))
    }
    return out
}

private func insert(_ s: AudioReceiveStream, _ payload: [UInt8], seq: UInt16, ts: UInt32, at ns: UInt64) {
    var bytes: [UInt8] = []
    bytes.append(capacity: 12 + payload.count) {
        _ = RTPPacket.marshal(
            header: RTPHeader(payloadType: 111, sequenceNumber: seq, timestamp: ts, ssrc: 5),
            payload: payload.span.bytes, into: &$0)
    }
    bytes.withUnsafeBytes { s.insert(try! RTPPacket(parsing: $0.bytes), in: $0, arrival: MonotonicTime(nanoseconds: ns)) }
}

/// Plays `packets` (nil = lost) through a stream in real cadence and returns the stream after
/// `pulls` 10 ms pulls; `dropped` packets never arrive; `tsGap` adds timestamp jumps (DTX).
private func play(
    _ packets: [[UInt8]], lost: Set<Int> = [], fec: Bool = true, outputRate: Int = 48_000,
    timestamps: [UInt32]? = nil, sequenceNumbers: [UInt16]? = nil
) throws -> (AudioReceiveStream, [Int16]) {
    var settings = AudioReceiveSettings(payloadType: 111)
    settings.fecEnabled = fec
    settings.outputSampleRate = outputRate
    let s = try AudioReceiveStream(ssrc: 5, settings: settings)
    var out: [Int16] = []
    var buffer = [Int16](repeating: 0, count: s.samplesPerPull)
    var next = 0
    for pull in 0..<(packets.count * 2 + 10) {
        let now = UInt64(pull) * 10_000_000 + 1_000_000_000
        // A packet arrives every 20 ms.
        while next < packets.count && UInt64(next) * 20_000_000 + 1_000_000_000 <= now {
            if !lost.contains(next) {
                insert(
                    s, packets[next], seq: sequenceNumbers?[next] ?? UInt16(next), ts: timestamps?[next] ?? UInt32(next * 960),
                    at: now)
            }
            next += 1
        }
        var span = buffer.mutableSpan
        s.pullAudio(into: &span, now: MonotonicTime(nanoseconds: now))
        out += buffer
    }
    return (s, out)
}

@Suite struct AudioReceiveStreamTests {
    @Test func playsEveryPacketWithoutConcealmentWhenNothingIsLost() throws {
        let packets = try opusPackets(50)
        let (s, out) = try play(packets)
        #expect(s.stats.concealedSamples == 0 || s.stats.concealedSamples <= 960 * 10, "only the tail after the last packet")
        #expect(s.stats.totalSamplesReceived == UInt64(out.count))
        #expect(out.contains { abs(Int($0)) > 1000 })
    }

    @Test func aSenderThatRestartsBehindPlaysAgainAfterOnePacket() throws {
        // 100 packets, then the same SSRC restarts 10,000 sequence numbers back with new
        // timestamps (a process restart that kept its SSRC): RFC 3550 A.1 restart detection
        // drops one packet, not every packet of the new run.
        let packets = try opusPackets(200)
        let sequences = (0..<200).map { UInt16(truncatingIfNeeded: $0 < 100 ? 20_000 + $0 : 10_000 + $0) }
        let timestamps = (0..<200).map { UInt32(truncatingIfNeeded: $0 < 100 ? $0 * 960 : 7_000_000 + $0 * 960) }
        let (s, out) = try play(packets, timestamps: timestamps, sequenceNumbers: sequences)
        #expect(s.jitterBufferCounters.late == 1)
        #expect(s.jitterBufferCounters.resets == 1)
        #expect(s.stats.packetsDiscarded == 1, "\(s.jitterBufferCounters)")
        // The restarted run is heard: the last second of output (before the tail) is not silence
        // or concealment.
        let restartedRun = out[(out.count - 48_000 * 3 / 2)..<(out.count - 48_000 / 2)]
        #expect(restartedRun.filter { abs(Int($0)) > 1000 }.count > 4_800)
    }

    @Test func recoversASingleLossFromTheNextPacketsFEC() throws {
        let packets = try opusPackets(50)
        let lost: Set<Int> = [10, 20, 30]
        let (withFEC, _) = try play(packets, lost: lost, fec: true)
        let (withoutFEC, _) = try play(packets, lost: lost, fec: false)
        #expect(withFEC.fecRecoveredSamples == 3 * 960)
        #expect(withoutFEC.fecRecoveredSamples == 0)
        #expect(withoutFEC.stats.concealedSamples >= withFEC.stats.concealedSamples + 3 * 960)
        #expect(withoutFEC.stats.concealmentEvents >= withFEC.stats.concealmentEvents + 3)
    }

    @Test func aBurstIsConcealedExceptItsLastPacketWhichFECRecovers() throws {
        let packets = try opusPackets(50)
        let (s, _) = try play(packets, lost: [20, 21, 22])
        #expect(s.fecRecoveredSamples == 960)
        let tail = 960 * 10
        #expect(s.stats.concealedSamples >= 2 * 960 && s.stats.concealedSamples <= UInt64(2 * 960 + tail))
    }

    @Test func dtxSilenceIsComfortNoiseNotConcealment() throws {
        // 20 packets of speech, then DTX: the encoder sends a packet only every 400 ms while silent.
        let all = try opusPackets(100, dtx: true, silenceFrom: 20)
        var packets: [[UInt8]] = []
        var timestamps: [UInt32] = []
        for (k, p) in all.enumerated() where k < 20 || p.count > 2 || (k - 20) % 20 == 0 {
            packets.append(p)
            timestamps.append(UInt32(k * 960))
        }
        #expect(packets.count < all.count, "DTX left packets out")
        let (s, _) = try play(packets, timestamps: timestamps)
        // Packets are consecutive in sequence, so the timestamp jumps are DTX, not loss.
        #expect(s.stats.concealmentEvents <= 1, "\(s.stats.concealmentEvents) (at most the tail)")
    }

    @Test func resamplesToTheSinksRate() throws {
        let packets = try opusPackets(30)
        let (s, out) = try play(packets, outputRate: 16_000)
        #expect(s.samplesPerPull == 160)
        #expect(out.count == 160 * (30 * 2 + 10))
        #expect(out.contains { abs(Int($0)) > 1000 })
    }

    @Test func keepsTheDelayBoundedWhenPacketsPileUp() throws {
        let packets = try opusPackets(60)
        var settings = AudioReceiveSettings(payloadType: 111)
        settings.jitterBuffer.maximumDelayMilliseconds = 100
        let s = try AudioReceiveStream(ssrc: 5, settings: settings)
        // All 60 packets (1.2 s) arrive at once, then playout runs for 300 ms.
        for k in 0..<60 { insert(s, packets[k], seq: UInt16(k), ts: UInt32(k * 960), at: 1_000_000_000) }
        var buffer = [Int16](repeating: 0, count: 480)
        for pull in 0..<30 {
            buffer.withUnsafeMutableBufferPointer {
                _ = s.pullAudio(into: $0, now: MonotonicTime(nanoseconds: 1_000_000_000 + UInt64(pull) * 10_000_000))
            }
        }
        // 300 ms played; packets beyond the hard cap (target + 200 ms) were dropped rather than
        // delaying playout.
        #expect(s.stats.packetsDiscarded >= 40, "\(s.stats.packetsDiscarded)")
    }

    @Test func networkAndAudioThreadsShareTheStreamSafely() throws {
        let packets = try opusPackets(400)
        let s = try AudioReceiveStream(ssrc: 5, settings: AudioReceiveSettings(payloadType: 111))
        let pulls = Atomic<Int>(0)
        runOnThreads(2) { thread in
            if thread == 0 {
                for (k, p) in packets.enumerated() {
                    insert(s, p, seq: UInt16(k), ts: UInt32(k * 960), at: UInt64(k) * 20_000_000)
                    if k % 8 == 0 { usleep(100) }
                }
            } else {
                var buffer = [Int16](repeating: 0, count: 480)
                for k in 0..<1000 {
                    buffer.withUnsafeMutableBufferPointer {
                        _ = s.pullAudio(into: $0, now: MonotonicTime(nanoseconds: UInt64(k) * 10_000_000))
                    }
                    _ = s.stats
                    pulls.add(1, ordering: .relaxed)
                }
            }
        }
        #expect(pulls.load(ordering: .relaxed) == 1000)
        #expect(s.statsSnapshot().packetsReceived == 400)
        #expect(s.stats.totalSamplesReceived == 480_000)
    }
}
