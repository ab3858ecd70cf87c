import MediaCore
import Testing

@Suite struct BandwidthEstimatorTests {
    @Test func lossBasedEstimateFallsUnderHeavyLossHoldsInBetweenAndRecovers() {
        var e = SendSideBandwidthEstimator(startBitrate: 1_000_000, minimumBitrate: 50_000, maximumBitrate: 2_000_000)
        var t: UInt64 = 1_000_000_000
        for _ in 0..<5 { t += 500_000_000; e.receiverReport(fractionLost: 51, now: MonotonicTime(nanoseconds: t)) }  // 20 %
        let low = e.targetBitrate
        #expect(low < 600_000, "\(low)")
        t += 500_000_000; e.receiverReport(fractionLost: 13, now: MonotonicTime(nanoseconds: t))  // 5 %: hold
        #expect(e.targetBitrate == low)
        for _ in 0..<20 { t += 500_000_000; e.receiverReport(fractionLost: 0, now: MonotonicTime(nanoseconds: t)) }
        #expect(e.targetBitrate > low * 2, "recovers at 8 %/s: \(e.targetBitrate)")
        for _ in 0..<200 { t += 500_000_000; e.receiverReport(fractionLost: 0, now: MonotonicTime(nanoseconds: t)) }
        #expect(e.targetBitrate == 2_000_000, "capped at the maximum")
    }

    @Test func rembCapsTheTarget() {
        var e = SendSideBandwidthEstimator(startBitrate: 1_000_000)
        e.receiverEstimatedMaxBitrate(300_000)
        #expect(e.targetBitrate == 300_000)
        e.receiverEstimatedMaxBitrate(10)
        #expect(e.targetBitrate == e.minimumBitrate)
    }

    /// Feeds 30 fps frames of `bytes` whose one-way delay grows by `queueGrowthMs` per frame.
    private func feed(
        _ r: inout ReceiveSideBandwidthEstimator, frames: Range<Int>, bytes: Int, queueGrowthMs: Double,
        startDelayMs: Double = 0
    ) -> Double {
        var delay = startDelayMs
        for k in frames {
            delay = max(0, delay + queueGrowthMs)
            let arrival = UInt64(Double(k) * 33.333_333e6 + delay * 1e6) + 1_000_000_000
            _ = r.packetArrived(timestamp: UInt32(k * 3000), arrival: MonotonicTime(nanoseconds: arrival), size: bytes)
        }
        return delay
    }

    @Test func delayBasedEstimateDropsWhenQueuesGrowAndRisesWhenTheyDoNot() {
        var r = ReceiveSideBandwidthEstimator(clockRate: 90_000)
        var delay = feed(&r, frames: 0..<90, bytes: 4000, queueGrowthMs: 0)  // 960 kbit/s, steady
        let steady = r.estimate
        #expect(r.usage == .normal)
        #expect(steady > 960_000, "\(steady)")
        delay = feed(&r, frames: 90..<120, bytes: 4000, queueGrowthMs: 4, startDelayMs: delay)
        #expect(r.usage == .overusing)
        #expect(r.estimate < 0.9 * 960_000, "\(r.estimate)")
        let low = r.estimate
        _ = feed(&r, frames: 120..<300, bytes: 4000, queueGrowthMs: 0, startDelayMs: delay)
        #expect(r.usage == .normal)
        #expect(r.estimate > low, "recovers: \(low) -> \(r.estimate)")
    }
}
