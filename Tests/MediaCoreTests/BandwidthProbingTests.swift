import MediaCore
import Testing

/// Probe clusters measured from transport feedback, the controller that asks for them, and the
/// estimator taking their results.
@Suite struct BandwidthProbingTests {
    /// Results of a cluster of `count` packets of `size` bytes sent `sendGapNs` apart and
    /// arriving `arrivalGapNs` apart.
    static func cluster(
        id: Int, count: Int, size: Int = 1000, sendGapNs: Int64, arrivalGapNs: Int64, startNs: Int64 = 1_000_000_000
    ) -> [TransportPacketResult] {
        (0..<count).map { k in
            TransportPacketResult(
                sequenceNumber: Int64(k), sendNs: startNs + Int64(k) * sendGapNs,
                arrivalNs: 50_000_000 + startNs + Int64(k) * arrivalGapNs, size: size, probeCluster: id)
        }
    }

    /// The rate a 2 Mbit/s cluster of ten 1000-byte packets sent 4 ms apart is measured at when
    /// they arrive `arrivalGapNs` apart.
    static func measured(arrivalGapNs: Int64) -> Double? {
        var e = ProbeBitrateEstimator()
        e.register(ProbeCluster(id: 7, bitrate: 2_000_000), now: MonotonicTime(nanoseconds: 1_000_000_000))
        return e.update(
            Self.cluster(id: 7, count: 10, sendGapNs: 4_000_000, arrivalGapNs: arrivalGapNs),
            now: MonotonicTime(nanoseconds: 1_100_000_000))
    }

    @Test func aSaturatedPathGivesNinetyFivePercentOfItsReceiveRate() throws {
        // Delivered every 8 ms: 9 packets' bytes over 72 ms = 1 Mbit/s, below 90 % of the send
        // rate (9 packets' bytes over 36 ms = 2 Mbit/s).
        let r = try #require(Self.measured(arrivalGapNs: 8_000_000))
        #expect(abs(r - 950_000) < 1)
    }

    @Test func anUnsaturatedPathGivesTheSendRate() throws {
        // Received every 3.9 ms (a little bunched): the send rate, 2 Mbit/s.
        let r = try #require(Self.measured(arrivalGapNs: 3_900_000))
        #expect(abs(r - 2_000_000) < 1)
    }

    /// A 1.2 Mbit/s cluster of one 1200-byte media packet and nine 100-byte padding packets,
    /// paced (each packet followed by its own time at 1.2 Mbit/s), with the media packet first or
    /// last, through a path of `capacity` bits per second (nil: faster than the cluster) that
    /// sends each packet on once it has received all of it and sent the one before.
    static func mixed(mediaFirst: Bool, capacity: Int64?) -> [TransportPacketResult] {
        let sizes = mediaFirst ? [1200] + Array(repeating: 100, count: 9) : Array(repeating: 100, count: 9) + [1200]
        var sendNs: Int64 = 1_000_000_000
        var arrivalNs: Int64 = 0
        var out: [TransportPacketResult] = []
        for (k, size) in sizes.enumerated() {
            let serialisation = capacity.map { Int64(size) * 8 * 1_000_000_000 / $0 } ?? 0
            arrivalNs = max(arrivalNs, sendNs + 50_000_000) + serialisation
            out.append(
                TransportPacketResult(sequenceNumber: Int64(k), sendNs: sendNs, arrivalNs: arrivalNs, size: size, probeCluster: 3)
            )
            sendNs += Int64(size) * 8 * 1_000_000_000 / 1_200_000
        }
        return out
    }

    static func measuredMixed(mediaFirst: Bool, capacity: Int64?) -> Double? {
        var e = ProbeBitrateEstimator()
        e.register(ProbeCluster(id: 3, bitrate: 1_200_000), now: MonotonicTime(nanoseconds: 1_000_000_000))
        return e.update(Self.mixed(mediaFirst: mediaFirst, capacity: capacity), now: MonotonicTime(nanoseconds: 1_100_000_000))
    }

    @Test func aClusterMixingMediaAndSmallPaddingThatThePathKeptUpWithGivesTheSendRate() throws {
        // The arrivals keep the send spacing. Less the first packet's bytes, the arrivals alone
        // would read 900 bytes over 15 ms (0.48 Mbit/s: "saturated"); less the last one's, a
        // large last packet would make the receive rate over twice the send rate ("invalid").
        for mediaFirst in [true, false] {
            let r = try #require(Self.measuredMixed(mediaFirst: mediaFirst, capacity: nil), "media first: \(mediaFirst)")
            #expect(abs(r - 1_200_000) < 1_000, "media first: \(mediaFirst): \(r)")
        }
    }

    @Test func aSaturatedPathIsMeasuredAtItsRateWhateverThePacketSizes() throws {
        // A 0.6 Mbit/s path queues the cluster and passes it on at its own rate: 95 % of that.
        for mediaFirst in [true, false] {
            let r = try #require(Self.measuredMixed(mediaFirst: mediaFirst, capacity: 600_000), "media first: \(mediaFirst)")
            #expect(abs(r - 570_000) < 1_000, "media first: \(mediaFirst): \(r)")
        }
    }

    @Test func tooFewPacketsOtherClustersAndBadTimingGiveNothing() {
        var result: Double?
        var e = ProbeBitrateEstimator()
        // 3750 bytes, 5 packets.
        e.register(ProbeCluster(id: 2, bitrate: 2_000_000), now: MonotonicTime(nanoseconds: 1_000_000_000))
        // 3 of 5 packets (below 80 %).
        result = e.update(
            Self.cluster(id: 2, count: 3, size: 1500, sendGapNs: 4_000_000, arrivalGapNs: 4_000_000),
            now: MonotonicTime(nanoseconds: 1_100_000_000))
        #expect(result == nil)
        // A cluster never registered, and media (cluster 0).
        result = e.update(
            Self.cluster(id: 3, count: 10, sendGapNs: 4_000_000, arrivalGapNs: 4_000_000),
            now: MonotonicTime(nanoseconds: 1_100_000_000))
        #expect(result == nil)
        result = e.update(
            Self.cluster(id: 0, count: 10, sendGapNs: 4_000_000, arrivalGapNs: 4_000_000),
            now: MonotonicTime(nanoseconds: 1_100_000_000))
        #expect(result == nil)
        // Received more than twice as fast as sent: the feedback cannot be right.
        e.register(ProbeCluster(id: 4, bitrate: 1_000_000), now: MonotonicTime(nanoseconds: 1_000_000_000))
        result = e.update(
            Self.cluster(id: 4, count: 10, sendGapNs: 4_000_000, arrivalGapNs: 1_000_000),
            now: MonotonicTime(nanoseconds: 1_100_000_000))
        #expect(result == nil)
        #expect(e.invalidCount == 1)
        // A cluster registered more than a second before its feedback is forgotten.
        e.register(ProbeCluster(id: 5, bitrate: 1_000_000), now: MonotonicTime(nanoseconds: 1_000_000_000))
        result = e.update(
            Self.cluster(id: 5, count: 10, sendGapNs: 4_000_000, arrivalGapNs: 4_000_000),
            now: MonotonicTime(nanoseconds: 2_100_000_000))
        #expect(result == nil)
        #expect(e.resultCount == 0)
    }

    @Test func aClusterReportedOverTwoFeedbacksIsMeasuredWhole() throws {
        var result: Double?
        var e = ProbeBitrateEstimator()
        e.register(ProbeCluster(id: 9, bitrate: 4_000_000), now: MonotonicTime(nanoseconds: 1_000_000_000))  // 7500 bytes
        let all = Self.cluster(id: 9, count: 10, sendGapNs: 2_000_000, arrivalGapNs: 2_000_000)
        result = e.update(Array(all[0..<4]), now: MonotonicTime(nanoseconds: 1_050_000_000))
        #expect(result == nil, "4000 of 7500 bytes")
        let u = e.update(Array(all[4...]), now: MonotonicTime(nanoseconds: 1_100_000_000))
        let r = try #require(u)
        #expect(abs(r - 4_000_000) < 1)
    }

    @Test func theControllerProbesAtTheStartAndFurtherWhileResultsKeepUp() {
        var probes: [ProbeCluster]
        var c = ProbeController(maximumBitrate: 10_000_000)
        let first = c.start(estimate: 1_000_000, now: MonotonicTime(nanoseconds: 0))
        #expect(first.map(\.bitrate) == [3_000_000, 6_000_000])
        #expect(first.map(\.id) == [1, 2])
        #expect(first[0].minimumBytes == 3_000_000 / 8 * 15 / 1000 && first[0].minimumPackets == 5)
        probes = c.start(estimate: 1_000_000, now: MonotonicTime(nanoseconds: 0))
        #expect(probes.isEmpty, "once")
        // The 3 Mbit/s cluster's result alone is below 70 % of 6 Mbit/s: wait for the other.
        probes = c.update(estimate: 3_000_000, probeResult: 3_000_000, now: MonotonicTime(nanoseconds: 100_000_000))
        #expect(probes.isEmpty)
        // 5 Mbit/s came back from the 6 Mbit/s probe: probe 10 (2 x 5, the maximum).
        probes = c.update(estimate: 5_000_000, probeResult: 5_000_000, now: MonotonicTime(nanoseconds: 200_000_000))
        #expect(probes.map(\.bitrate) == [10_000_000])
        // The path carries 7: below 70 % of 10, no further probe, ever (the result timed out).
        probes = c.update(estimate: 7_000_000, probeResult: 6_500_000, now: MonotonicTime(nanoseconds: 300_000_000))
        #expect(probes.isEmpty)
        probes = c.update(estimate: 7_000_000, probeResult: nil, now: MonotonicTime(nanoseconds: 1_400_000_000))
        #expect(probes.isEmpty)
        #expect(c.clustersRequested == 3)
        // A start at the maximum probes nothing.
        var atMax = ProbeController(maximumBitrate: 1_000_000)
        probes = atMax.start(estimate: 1_000_000, now: MonotonicTime(nanoseconds: 0))
        #expect(probes.isEmpty)
    }

    /// One feedback for the controller: the estimate (kbit/s), the probe result (kbit/s), the
    /// time (ms), the acknowledged rate (kbit/s), and the probe rates expected back (kbit/s).
    struct Step {
        var estimate: Int, result: Int?, atMs: Int64, acked: Int? = nil, expected: [Int]
        var note: Comment = ""
    }

    /// Feeds `steps` to `c`, checking each one's probes.
    static func play(_ c: inout ProbeController, _ steps: [Step], sourceLocation: SourceLocation = #_sourceLocation) {
        for s in steps {
            let probes = c.update(
                estimate: s.estimate * 1000, probeResult: s.result.map { Double($0 * 1000) },
                now: MonotonicTime(nanoseconds: UInt64(s.atMs * 1_000_000)),
                acknowledgedBitrate: s.acked.map { Double($0 * 1000) })
            #expect(probes.map { $0.bitrate / 1000 } == s.expected, "at \(s.atMs) ms: \(s.note)", sourceLocation: sourceLocation)
        }
    }

    @Test func theControllerProbesEveryThreeSecondsAfterALargeDropUntilRecovered() {
        var c = ProbeController(maximumBitrate: 3_000_000)
        #expect(c.start(estimate: 2_500_000, now: MonotonicTime(nanoseconds: 0)).map(\.bitrate) == [3_000_000])
        Self.play(
            &c,
            [
                Step(estimate: 2500, result: nil, atMs: 2000, expected: [3000], note: "no result: the start probes once more"),
                Step(estimate: 1000, result: nil, atMs: 3000, expected: [], note: "a large drop: recovery starts"),
            ])
        #expect(c.isRecovering)
        // Recovery probes at twice the estimate (at most the highest), 3 s apart.
        Self.play(
            &c,
            [
                Step(estimate: 1000, result: nil, atMs: 5900, expected: []),
                Step(estimate: 1000, result: nil, atMs: 6000, expected: [2000]),
                Step(estimate: 1000, result: 1000, atMs: 6100, expected: [], note: "found only 1 Mbit/s: wait"),
                Step(estimate: 1000, result: nil, atMs: 8000, expected: []),
                Step(estimate: 800, result: nil, atMs: 9000, expected: [1600]),
                Step(
                    estimate: 1600, result: 1600, atMs: 9100, expected: [3000], note: "the path is back: at once, to the maximum"),
                Step(estimate: 2400, result: 2400, atMs: 9200, expected: [], note: "within 85 % of the highest: recovered"),
            ])
        #expect(!c.isRecovering)
        Self.play(&c, [Step(estimate: 2400, result: nil, atMs: 20_000, expected: [])])
    }

    @Test func anApplicationLimitedSenderIsProbedEveryFiveSeconds() {
        var c = ProbeController(maximumBitrate: 3_000_000)
        #expect(c.start(estimate: 500_000, now: MonotonicTime(nanoseconds: 0)).map(\.bitrate) == [1_500_000, 3_000_000])
        // Only 200 kbit/s arrives of the estimate throughout.
        Self.play(
            &c,
            [
                Step(estimate: 500, result: nil, atMs: 1500, acked: 200, expected: [1500, 3000], note: "no result: once more"),
                Step(estimate: 500, result: nil, atMs: 2600, acked: 200, expected: [1000], note: "application-limited: 2x"),
                Step(estimate: 1000, result: 1000, atMs: 2700, acked: 200, expected: [2000], note: "it keeps up: further"),
                Step(estimate: 2000, result: 2000, atMs: 2800, acked: 200, expected: [3000]),
                Step(estimate: 2200, result: 2200, atMs: 2900, acked: 200, expected: [], note: "no further than the maximum"),
                Step(estimate: 2200, result: nil, atMs: 7500, acked: 200, expected: []),
                Step(estimate: 2200, result: nil, atMs: 7600, acked: 200, expected: [3000], note: "5 s after the last"),
                Step(estimate: 2200, result: nil, atMs: 20_000, acked: 2000, expected: [], note: "not application-limited"),
            ])
        #expect(c.applicationLimitedProbes == 2)
    }

    /// The delay-based estimate takes a probe's result, but not while over-using, and never
    /// below what the feedback shows arriving; later increases do not pull it back down to
    /// 1.5 x the acknowledged bitrate.
    @Test func theDelayBasedEstimateTakesProbeResults() {
        var d = DelayBasedBandwidthEstimator(startBitrate: 500_000, maximumBitrate: 5_000_000)
        // One second of steady 500 kbit/s arrivals (1250 B every 20 ms), no queue growth.
        var results: [TransportPacketResult] = []
        for k in 0..<50 {
            let t = Int64(k) * 20_000_000
            results.append(TransportPacketResult(sequenceNumber: Int64(k), sendNs: t, arrivalNs: t + 30_000_000, size: 1250))
        }
        d.update(results, now: MonotonicTime(nanoseconds: 1_050_000_000))
        #expect(d.usage == .normal)
        let before = d.estimate
        #expect(d.applyProbeResult(2_000_000, now: MonotonicTime(nanoseconds: 1_060_000_000)) == 2_000_000)
        #expect(d.probeResultsApplied == 1)
        // Another second at the same rate: the increase is capped at 1.5 x acknowledged + 10k,
        // which no longer lowers the probed estimate.
        results = (50..<100).map { k in
            let t = Int64(k) * 20_000_000
            return TransportPacketResult(sequenceNumber: Int64(k), sendNs: t, arrivalNs: t + 30_000_000, size: 1250)
        }
        d.update(results, now: MonotonicTime(nanoseconds: 2_050_000_000))
        #expect(d.estimate == 2_000_000)
        // A result below both the estimate and the acknowledged rate is raised to the latter.
        #expect(abs(d.applyProbeResult(100_000, now: MonotonicTime(nanoseconds: 2_060_000_000)) - d.acknowledgedBitrate) < 1)
        #expect(before < 1_000_000)
    }

    /// The send-side estimator applies a registered cluster's result to the delay-based and the
    /// loss-based estimate, so the target jumps.
    @Test func theSendSideTargetFollowsAProbe() {
        var e = SendSideBandwidthEstimator(startBitrate: 300_000, maximumBitrate: 3_000_000)
        e.probeSent(ProbeCluster(id: 1, bitrate: 2_000_000), now: MonotonicTime(nanoseconds: 1_000_000_000))
        e.transportFeedback(
            Self.cluster(id: 1, count: 10, sendGapNs: 4_000_000, arrivalGapNs: 4_000_000),
            now: MonotonicTime(nanoseconds: 1_100_000_000))
        #expect(e.probeResult.map { abs($0 - 2_000_000) < 1 } == true)
        #expect(e.targetBitrate == 2_000_000)
        // The next feedback has no cluster: no result.
        e.transportFeedback(
            Self.cluster(id: 0, count: 3, sendGapNs: 4_000_000, arrivalGapNs: 4_000_000, startNs: 1_200_000_000),
            now: MonotonicTime(nanoseconds: 1_300_000_000))
        #expect(e.probeResult == nil)
    }
}
