import Glibc
import MediaCore

/// Drives an `AudioReceiveStream` on a simulated clock: a sender of Opus-encoded tone whose
/// clock may run fast or slow, a network that delays each packet by a seeded random amount, and
/// a 10 ms pull cadence on the receiver's clock. Used by the tests and `revue-bench` to compare
/// playout policies on identical input, independently of machine load.
/// Thread rule: one thread. Cost: the Opus encode of the source (once) and the stream's own work.
package enum PlayoutSimulation {
    /// Frequency of the source tone (Hz).
    package static let toneFrequency = 440.0
    /// Peak amplitude of the source tone (Int16 scale).
    package static let toneAmplitude = 8_000.0

    /// `count` 20 ms Opus packets (48 kHz mono, VoIP, in-band FEC) of the source tone.
    package static func tonePackets(_ count: Int) throws -> [[UInt8]] {
        let enc = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .voip)
        enc.isInbandFECEnabled = true
        enc.expectedPacketLossPercent = 10
        var out: [[UInt8]] = []
        out.reserveCapacity(count)
        var pcm = [Int16](repeating: 0, count: 960)
        var packet = [UInt8](repeating: 0, count: 1500)
        let w = 2 * Double.pi * toneFrequency / 48_000
        for k in 0..<count {
            for i in 0..<960 { pcm[i] = Int16(toneAmplitude * sin(w * Double(k * 960 + i))) }
            let n = try pcm.withUnsafeBufferPointer { p in try packet.withUnsafeMutableBytes { try enc.encode(p, into: $0) } }
            out.append(Array(packet[0..<n]))
        }
        return out
    }

    /// Whole RTP packets (payload type 111, SSRC 5, sequence numbers and timestamps from 0).
    package static func rtpPackets(_ payloads: [[UInt8]]) -> [[UInt8]] {
        payloads.enumerated().map { k, payload in
            var bytes: [UInt8] = []
            bytes.append(capacity: 12 + payload.count) { out in
                _ = RTPPacket.marshal(
                    header: RTPHeader(
                        payloadType: 111, sequenceNumber: UInt16(truncatingIfNeeded: k),
                        timestamp: UInt32(truncatingIfNeeded: k * 960), ssrc: 5),
                    payload: payload.span.bytes, into: &out)
            }
            return bytes
        }
    }

    /// Arrival times (receiver clock, ns) of `count` packets sent every 20 ms of the sender's clock,
    /// which runs `driftPPM` parts per million fast (positive) or slow, each delayed by a uniform
    /// random 0...`maxJitterMs` (seeded; reordering happens when delays differ by more than 20 ms),
    /// plus, every `spikeEverySeconds` (0: never), a stall: the packets of the last 100 ms before it
    /// are held, the first by `spikeMs`, and arrive in a burst.
    package static func arrivals(
        count: Int, driftPPM: Double, maxJitterMs: Double, seed: UInt64,
        spikeMs: Double = 0, spikeEverySeconds: Double = 0
    ) -> [UInt64] {
        var rng = seed | 1
        let interval = 20_000_000.0 / (1 + driftPPM / 1e6)
        return (0..<count).map { k in
            rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17
            let u = Double(rng >> 11) / Double(1 << 53)
            let sent = Double(k) * interval
            var delay = 5_000_000 + u * maxJitterMs * 1e6
            if spikeMs > 0 && spikeEverySeconds > 0 {
                let phase = (sent / 1e9).truncatingRemainder(dividingBy: spikeEverySeconds)
                // A stall: the packets of the window are held and arrive in a burst.
                if phase >= spikeEverySeconds - 0.1 { delay += spikeMs * 1e6 * (spikeEverySeconds - phase) / 0.1 }
            }
            return 1_000_000_000 + UInt64(sent + delay)
        }
    }

    /// What one simulated run produced.
    package struct Outcome {
        /// The output, 48 kHz mono, one 10 ms pull after another.
        package var output: [Int16]
        /// The stream's statistics after the last pull.
        package var stats: InboundRTPStreamStats
        /// Lowest and highest buffer level minus target (ms) over the pulls after `settleSeconds`.
        package var marginMs: (low: Double, high: Double)
        /// Lowest and highest of the one-second means of buffer level minus target (ms) after
        /// `settleSeconds`: the level with the 20 ms packet and 10 ms pull sawtooth averaged out.
        package var meanMarginMs: (low: Double, high: Double)
        /// Lowest and highest buffer level (ms) over the same pulls.
        package var levelMs: (low: Double, high: Double)
        /// The target delay (ms) after the last pull.
        package var finalTargetMs: Double
    }

    /// Plays `rtp` (whole packets) arriving at `arrivals` through a new stream for `pulls` pulls of
    /// 10 ms starting at 1 s on the receiver's clock.
    package static func run(
        _ rtp: [[UInt8]], arrivals: [UInt64], pulls: Int, adjustment: AudioReceiveSettings.PlayoutAdjustment,
        settleSeconds: Double = 3
    ) throws -> Outcome {
        var settings = AudioReceiveSettings(payloadType: 111)
        settings.playoutAdjustment = adjustment
        let s = try AudioReceiveStream(ssrc: 5, settings: settings)
        let order = arrivals.indices.sorted { arrivals[$0] < arrivals[$1] }
        var next = 0
        var out = [Int16](repeating: 0, count: pulls * 480)
        var low = Double.infinity, high = -Double.infinity, lowL = Double.infinity, highL = -Double.infinity
        var meanLow = Double.infinity, meanHigh = -Double.infinity, secondSum = 0.0
        for pull in 0..<pulls {
            let now = 1_000_000_000 + UInt64(pull) * 10_000_000
            while next < order.count && arrivals[order[next]] <= now {
                let k = order[next]
                rtp[k].withUnsafeBytes {
                    s.insert(try! RTPPacket(parsing: $0.bytes), in: $0, arrival: MonotonicTime(nanoseconds: arrivals[k]))
                }
                next += 1
            }
            out.withUnsafeMutableBufferPointer { o in
                _ = s.pullAudio(
                    into: UnsafeMutableBufferPointer(rebasing: o[(pull * 480)..<((pull + 1) * 480)]),
                    now: MonotonicTime(nanoseconds: now))
            }
            if Double(pull) / 100 >= settleSeconds {
                let level = s.bufferLevelMilliseconds, m = level - s.targetDelayMilliseconds
                low = min(low, m); high = max(high, m); lowL = min(lowL, level); highL = max(highL, level)
                secondSum += m
                if pull % 100 == 99 {
                    meanLow = min(meanLow, secondSum / 100); meanHigh = max(meanHigh, secondSum / 100)
                    secondSum = 0
                }
            }
        }
        return Outcome(
            output: out, stats: s.stats, marginMs: (low, high), meanMarginMs: (meanLow, meanHigh), levelMs: (lowL, highL),
            finalTargetMs: s.targetDelayMilliseconds)
    }

    /// SNR (dB) of `output` against the source tone, phase-aligned per block: for each 10 ms block
    /// from the first audible one, the tone at the source amplitude and the block's best-fitting
    /// phase is the reference and everything else is noise; the SNR is the sum of the references'
    /// energy over the sum of the noise. A concealed, faded, silent or glitched block adds noise;
    /// a block that is merely shifted in time, as stretching does, does not.
    package static func alignedSNR(_ output: [Int16]) -> Double {
        let w = 2 * Double.pi * toneFrequency / 48_000
        guard let first = output.firstIndex(where: { abs(Int($0)) > 1000 }) else { return -10 }
        var start = first / 480 * 480 + 480
        var totalSignal = 0.0, totalNoise = 0.0
        while start + 480 <= output.count {
            var a = 0.0, b = 0.0
            for i in 0..<480 {
                let y = Double(output[start + i]), t = w * Double(i)
                a += y * sin(t); b += y * cos(t)
            }
            let phase = atan2(b, a)
            var signal = 0.0, noise = 0.0
            for i in 0..<480 {
                let r = toneAmplitude * sin(w * Double(i) + phase)
                let d = Double(output[start + i]) - r
                signal += r * r; noise += d * d
            }
            totalSignal += signal; totalNoise += noise
            start += 480
        }
        return totalNoise < 1e-9 ? 100 : 10 * log10(totalSignal / totalNoise)
    }
}
