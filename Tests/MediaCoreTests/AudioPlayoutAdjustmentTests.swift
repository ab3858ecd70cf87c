import Glibc
import MediaCore
import MediaTestSupport
import MediaTools
import Testing

/// A 440 Hz tone block (Int16, amplitude 8000) starting at sample `from`.
private func tone(_ frames: Int, from: Int = 0, frequency: Double = 440) -> [Int16] {
    (0..<frames).map { Int16(8000 * sin(2 * Double.pi * frequency * Double(from + $0) / 48_000)) }
}

/// Largest jump between neighbouring samples.
private func largestStep(_ x: ArraySlice<Int16>) -> Int {
    zip(x, x.dropFirst()).map { abs(Int($0) - Int($1)) }.max() ?? 0
}

@Suite struct AudioTimeStretchTests {
    @Test func accelerateRemovesWholePeriodsOfATone() {
        let stretch = AudioTimeStretch()
        var block = tone(960)
        var span = block.mutableSpan
        let removed = stretch.accelerate(&span, frames: 960)
        let period = 48_000.0 / 440
        #expect(removed >= stretch.minLag && removed <= stretch.maxLag)
        let periods = Double(removed) / period
        #expect(abs(periods - periods.rounded()) < 0.05, "\(removed) samples is \(periods) periods")
        // Continuous: no step larger than the tone's own steepest one (plus rounding).
        let toneStep = largestStep(tone(960)[...])
        #expect(largestStep(block[0..<(960 - removed)]) <= toneStep + 60)
    }

    @Test func preemptiveExpandRepeatsAPeriodContinuously() {
        let stretch = AudioTimeStretch()
        var block = tone(960) + [Int16](repeating: 0, count: stretch.maxLag)
        var span = block.mutableSpan
        let inserted = stretch.preemptiveExpand(&span, frames: 960)
        #expect(inserted >= stretch.minLag && inserted <= stretch.maxLag)
        #expect(largestStep(block[0..<(960 + inserted)]) <= largestStep(tone(960)[...]) + 60)
        // The block still ends on the source's last sample.
        #expect(block[960 + inserted - 1] == tone(960)[959])
    }

    @Test func loudNoiseIsLeftAloneAndQuietNoiseIsStretched() {
        let stretch = AudioTimeStretch()
        var rng: UInt64 = 0x9E37_79B9_7F4A_7C15
        func noise(_ amplitude: Double) -> [Int16] {
            (0..<960).map { _ -> Int16 in
                rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17
                let unit: Double = Double(rng >> 11) / 9_007_199_254_740_992  // 2^53: in [0, 1)
                return Int16(amplitude * (2 * unit - 1))
            }
        }
        var loud = noise(10_000)
        let original = loud
        #expect(loud.withUnsafeMutableBufferPointer { stretch.accelerate($0, frames: 960) } == 0)
        #expect(loud == original)
        var quiet = noise(100)
        #expect(quiet.withUnsafeMutableBufferPointer { stretch.accelerate($0, frames: 960) } > 0)
    }

    @Test func blocksShorterThanTwoLongestPeriodsAreLeftAlone() {
        let stretch = AudioTimeStretch()
        var block = tone(900)
        #expect(block.withUnsafeMutableBufferPointer { stretch.accelerate($0, frames: 900) } == 0)
    }

    @Test func stereoIsStretchedOnBothChannelsAlike() {
        let stretch = AudioTimeStretch(channels: 2)
        let mono = tone(960)
        var block = mono.flatMap { [$0, $0] }
        let removed = block.withUnsafeMutableBufferPointer { stretch.accelerate($0, frames: 960) }
        #expect(removed > 0)
        let kept: Int = 960 - removed
        let channelsAlike = (0..<kept).allSatisfy { (i: Int) -> Bool in block[2 * i] == block[2 * i + 1] }
        #expect(channelsAlike)
    }
}

/// Sender clock drift and network jitter through `AudioReceiveStream` on a simulated clock
/// (`PlayoutSimulation`): real Opus encode and decode of a tone.
@Suite struct AudioPlayoutAdjustmentTests {
    static let seconds = 60

    /// 60 s from a sender whose clock runs `ppm` fast (or slow), with small network jitter.
    static func drift(_ ppm: Double) throws -> PlayoutSimulation.Outcome {
        let count = Self.seconds * 50 + 100
        let rtp = PlayoutSimulation.rtpPackets(try PlayoutSimulation.tonePackets(count))
        let arrivals = PlayoutSimulation.arrivals(count: count, driftPPM: ppm, maxJitterMs: 2, seed: 7)
        return try PlayoutSimulation.run(rtp, arrivals: arrivals, pulls: Self.seconds * 100, adjustment: .timeStretch)
    }

    @Test func aSenderClockOnePermilleFastIsAbsorbedByAcceleration() throws {
        let o = try Self.drift(1_000)
        // 0.1 % of 60 s at 48 kHz is 2880 samples too many.
        #expect(o.stats.packetsDiscarded == 0)
        #expect(o.stats.concealedSamples == 0)
        let removed = Double(o.stats.removedSamplesForAcceleration)
        #expect(removed >= 0.4 * 2880 && removed <= 2 * 2880, "removed \(removed)")
        #expect(o.stats.insertedSamplesForDeceleration <= o.stats.removedSamplesForAcceleration / 4)
        // The level (one-second means, which average out the 20 ms packet and 10 ms pull sawtooth)
        // stays in the band around the target; the instantaneous level never runs dry.
        #expect(
            o.meanMarginMs.low >= -20 && o.meanMarginMs.high <= 25,
            "mean level - target \(o.meanMarginMs), level - target \(o.marginMs), level \(o.levelMs)")
        #expect(o.levelMs.low >= 5 && o.marginMs.high <= 45, "level - target \(o.marginMs), level \(o.levelMs)")
        #expect(PlayoutSimulation.alignedSNR(o.output) > 30)
    }

    @Test func aSenderClockOnePermilleSlowIsAbsorbedByExpansion() throws {
        let o = try Self.drift(-1_000)
        #expect(o.stats.packetsDiscarded == 0)
        #expect(o.stats.concealedSamples == 0)
        let inserted = Double(o.stats.insertedSamplesForDeceleration)
        #expect(inserted >= 0.4 * 2880 && inserted <= 2 * 2880, "inserted \(inserted)")
        #expect(o.stats.removedSamplesForAcceleration <= o.stats.insertedSamplesForDeceleration / 4)
        // The level (one-second means, which average out the 20 ms packet and 10 ms pull sawtooth)
        // stays in the band around the target; the instantaneous level never runs dry.
        #expect(
            o.meanMarginMs.low >= -20 && o.meanMarginMs.high <= 25,
            "mean level - target \(o.meanMarginMs), level - target \(o.marginMs), level \(o.levelMs)")
        #expect(o.levelMs.low >= 5 && o.marginMs.high <= 45, "level - target \(o.marginMs), level \(o.levelMs)")
        #expect(o.finalTargetMs <= 60, "the slow clock did not inflate the target: \(o.finalTargetMs) ms")
        #expect(PlayoutSimulation.alignedSNR(o.output) > 30)
    }

    @Test func underJitterTimeStretchingLosesLessAndSoundsBetterThanDroppingPackets() throws {
        // 40 s, each packet delayed by a seeded random 5...85 ms (reordered when delays differ by
        // more than 20 ms). The target climbs from the 40 ms minimum to about 110 ms: stretching
        // follows it up by expanding, dropping packets only gets there by running dry.
        let count = 40 * 50 + 50
        let rtp = PlayoutSimulation.rtpPackets(try PlayoutSimulation.tonePackets(count))
        let arrivals = PlayoutSimulation.arrivals(count: count, driftPPM: 0, maxJitterMs: 80, seed: 42)
        let old = try PlayoutSimulation.run(rtp, arrivals: arrivals, pulls: 40 * 100, adjustment: .dropPackets)
        let new = try PlayoutSimulation.run(rtp, arrivals: arrivals, pulls: 40 * 100, adjustment: .timeStretch)
        let oldLost = old.stats.concealedSamples + old.stats.packetsDiscarded * 960
        let newLost = new.stats.concealedSamples + new.stats.packetsDiscarded * 960
        let oldSNR = PlayoutSimulation.alignedSNR(old.output), newSNR = PlayoutSimulation.alignedSNR(new.output)
        let summary =
            "drop: \(old.stats.concealedSamples) concealed, \(old.stats.packetsDiscarded) discarded, \(oldSNR) dB; "
            + "stretch: \(new.stats.concealedSamples) concealed, \(new.stats.packetsDiscarded) discarded, "
            + "-\(new.stats.removedSamplesForAcceleration)/+\(new.stats.insertedSamplesForDeceleration) stretched, \(newSNR) dB"
        #expect(newLost < oldLost, "\(summary)")
        #expect(newSNR > oldSNR + 3, "\(summary)")
        #expect(new.stats.removedSamplesForAcceleration + new.stats.insertedSamplesForDeceleration > 0)
    }

    @Test func theHardCapStillDropsWhenFarAboveTheTarget() throws {
        // All 60 packets (1.2 s) at once: stretching cannot remove that fast; packets beyond
        // target + 200 ms are dropped.
        let rtp = PlayoutSimulation.rtpPackets(try PlayoutSimulation.tonePackets(60))
        let o = try PlayoutSimulation.run(
            rtp, arrivals: [UInt64](repeating: 1_000_000_000, count: 60), pulls: 30,
            adjustment: .timeStretch, settleSeconds: 0)
        #expect(o.stats.packetsDiscarded >= 40, "\(o.stats.packetsDiscarded)")
    }
}

/// The playout path with time stretching allocates nothing once warm (the stream's contract).
@Suite struct AudioReceiveAllocationTests {
    @Test func pullsThatAccelerateAndExpandAllocateNothing() throws {
        let count = 700
        let rtp = PlayoutSimulation.rtpPackets(try PlayoutSimulation.tonePackets(count))
        // 2 % fast for the first half (accelerates), then 2 % slow (expands).
        var arrivals: [UInt64] = []
        var t = 1_000_000_000.0
        for k in 0..<count {
            arrivals.append(UInt64(t))
            t += k < count / 2 ? 19_600_000 : 20_400_000
        }
        let s = try AudioReceiveStream(ssrc: 5, settings: AudioReceiveSettings(payloadType: 111))
        let out = UnsafeMutableBufferPointer<Int16>.allocate(capacity: 480)
        defer { out.deallocate() }
        var next = 0, pull = 0
        func step() {
            let now = 1_000_000_000 + UInt64(pull) * 10_000_000
            while next < count && arrivals[next] <= now {
                rtp[next].withUnsafeBytes {
                    s.insert(try! RTPPacket(parsing: $0.bytes), in: $0, arrival: MonotonicTime(nanoseconds: arrivals[next]))
                }
                next += 1
            }
            s.pullAudio(into: out, now: MonotonicTime(nanoseconds: now))
            pull += 1
        }
        for _ in 0..<100 { step() }
        let before = s.stats
        let allocations = AllocationCounter.count {
            for _ in 0..<1_250 { step() }
        }
        let after = s.stats
        #expect(after.removedSamplesForAcceleration > before.removedSamplesForAcceleration)
        #expect(after.insertedSamplesForDeceleration > before.insertedSamplesForDeceleration)
        #expect(allocations == 0)
    }
}
