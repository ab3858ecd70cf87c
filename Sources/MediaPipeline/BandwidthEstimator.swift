import MediaBase
import MediaWire

/// Sender-side bandwidth estimation from RTCP feedback: the loss-based controller of Google
/// Congestion Control (draft-ietf-rmcat-gcc-02 §6), the sender's own delay-based estimate from
/// transport-wide feedback (`DelayBasedBandwidthEstimator`, once the first transport-cc feedback
/// arrives), and the receiver's REMB (draft-alvestrand-rmcat-remb-03, which carries the
/// receiver's delay-based estimate). The target is the smallest of the three that are known.
/// Probe results (`probeSent`, then the feedback about the cluster) set the delay-based and the
/// loss-based estimate at once.
///
/// Loss below 2 % raises the rate by 8 % per second of feedback; loss above 10 % cuts it to
/// `rate x (1 - 0.5 x loss)`, at most once per 300 ms; in between the rate holds. The target is the smaller of that, the delay-based estimate and the
/// latest REMB, clamped to `minimumBitrate...maximumBitrate`.
/// Thread rule: one owner thread (where RTCP arrives). Cost: O(1) per report; O(packets) per
/// transport feedback; no allocation once the feedback buffer has grown.
public struct SendSideBandwidthEstimator: Sendable {
    /// Lowest target in bits per second.
    public var minimumBitrate: Int
    /// Highest target in bits per second.
    public var maximumBitrate: Int
    /// The loss-based estimate in bits per second.
    public private(set) var lossBasedBitrate: Double
    /// The last REMB value, nil before one arrived.
    public private(set) var remb: Int?
    /// The last loss fraction reported (0...1).
    public private(set) var lastFractionLost: Double = 0
    /// The delay-based estimator fed by transport-wide feedback.
    public private(set) var delayBased: DelayBasedBandwidthEstimator
    /// The delay-based estimate in bits per second, nil before the first transport feedback.
    public var delayBasedBitrate: Int? { usesDelayBased ? Int(delayBased.estimate) : nil }
    /// Matches transport feedback to the send log.
    public private(set) var feedbackAdapter = TransportFeedbackAdapter()
    /// Measures probe clusters from transport feedback.
    public private(set) var probes = ProbeBitrateEstimator()
    /// The rate the last transport feedback's probe cluster was delivered at, bits per second
    /// (nil when that feedback completed none).
    public private(set) var probeResult: Double?
    private var usesDelayBased = false
    private var lastIncreaseNs: UInt64 = 0
    private var lastDecreaseNs: UInt64 = 0

    /// Starts at `startBitrate`.
    public init(startBitrate: Int, minimumBitrate: Int = 50_000, maximumBitrate: Int = 5_000_000) {
        precondition(minimumBitrate > 0 && minimumBitrate <= maximumBitrate)
        self.minimumBitrate = minimumBitrate
        self.maximumBitrate = maximumBitrate
        lossBasedBitrate = Double(max(minimumBitrate, min(maximumBitrate, startBitrate)))
        delayBased = DelayBasedBandwidthEstimator(
            startBitrate: startBitrate, minimumBitrate: minimumBitrate,
            maximumBitrate: maximumBitrate)
    }

    /// The bitrate the encoder should use now: the smallest of the loss-based estimate, the
    /// delay-based one (once transport feedback arrived) and the last REMB.
    public var targetBitrate: Int {
        var t = min(lossBasedBitrate, Double(remb ?? Int.max))
        if usesDelayBased { t = min(t, delayBased.estimate) }
        return max(minimumBitrate, min(maximumBitrate, Int(t)))
    }

    /// Feeds one transport-cc feedback packet received at `now`, matched
    /// against the send times `numbers` logged; the delay-based estimate takes part from now on.
    public mutating func transportFeedback(
        _ feedback: RTCPTransportFeedback, sendLog numbers: TransportSequenceNumbers,
        now: MonotonicTime
    ) {
        feedbackAdapter.adapt(feedback, sendLog: numbers)
        transportFeedback(feedbackAdapter.results, now: now)
    }

    /// Feeds transport feedback already matched to send times (`TransportFeedbackAdapter`). A
    /// probe cluster these results complete (`probeResult`) becomes the delay-based estimate and
    /// the loss-based one, as with libwebrtc's goog_cc (unless the delay detector signals
    /// over-use).
    public mutating func transportFeedback(_ results: [TransportPacketResult], now: MonotonicTime) {
        probeResult = nil
        guard !results.isEmpty else { return }
        usesDelayBased = true
        delayBased.update(results, now: now)
        guard let result = probes.update(results, now: now) else { return }
        probeResult = result
        let applied = delayBased.probeResultsApplied
        let e = delayBased.applyProbeResult(result, now: now)
        if delayBased.probeResultsApplied != applied {
            lossBasedBitrate = max(Double(minimumBitrate), min(Double(maximumBitrate), e))
        }
    }

    /// Follows probe `cluster`, sent at `now`, so its feedback gives a
    /// `probeResult`.
    public mutating func probeSent(_ cluster: ProbeCluster, now: MonotonicTime) {
        probes.register(cluster, now: now)
    }

    /// The latest round-trip time in seconds (RTCP LSR/DLSR), for the delay-based rate control.
    public mutating func roundTripTime(seconds: Double) { delayBased.roundTripTime(seconds: seconds) }

    /// Feeds an RTCP report block's fraction lost (RFC 3550 §6.4.1, 0...255 as 1/256) received at `now`.
    public mutating func receiverReport(fractionLost: UInt8, now: MonotonicTime) {
        let nowNs = now.nanoseconds
        let loss = Double(fractionLost) / 256
        lastFractionLost = loss
        if loss < 0.02 {
            let dt = lastIncreaseNs == 0 ? 0.5 : min(1.0, Double(nowNs &- lastIncreaseNs) / 1e9)
            lossBasedBitrate *= 1 + 0.08 * dt
            lastIncreaseNs = nowNs
        } else if loss > 0.10 {
            // At most one cut per 300 ms (GCC: 300 ms + RTT), so a burst of reports about the same
            // congestion episode does not compound.
            if lastDecreaseNs == 0 || nowNs >= lastDecreaseNs + 300_000_000 {
                lossBasedBitrate *= 1 - 0.5 * loss
                lastDecreaseNs = nowNs
            }
            lastIncreaseNs = nowNs
        }
        // Never run far ahead of what the receiver says the path carries.
        if let remb { lossBasedBitrate = min(lossBasedBitrate, Double(remb) * 1.5) }
        if usesDelayBased { lossBasedBitrate = min(lossBasedBitrate, delayBased.estimate * 1.5) }
        lossBasedBitrate = max(Double(minimumBitrate), min(Double(maximumBitrate), lossBasedBitrate))
    }

    /// Feeds a REMB value in bits per second.
    public mutating func receiverEstimatedMaxBitrate(_ bitrate: UInt64) {
        remb = Int(clamping: bitrate)
    }
}

/// Receiver-side delay-based bandwidth estimation for REMB: the arrival-time filter of Google
/// Congestion Control (draft-ietf-rmcat-gcc-02 §5; libwebrtc's trendline estimator). Packets are
/// grouped by RTP timestamp (one video frame); the delay variation between groups is accumulated
/// and smoothed, and the slope of a least-squares line through the last 20 points says whether
/// queues grow. Growing queues (overuse) set the estimate to 85 % of the measured incoming rate
/// (at most once per 500 ms, and never below half the previous estimate); otherwise it grows by
/// 8 % per second, never above 1.5 x the incoming rate.
/// Thread rule: one owner thread (the receive engine). Cost: O(window) per frame, no allocation.
public struct ReceiveSideBandwidthEstimator: Sendable {
    /// Detector state (draft-ietf-rmcat-gcc-02 §5.4).
    public enum Usage: Sendable, Equatable { case normal, overusing, underusing }

    /// Clock rate of the timestamps fed in (90 kHz RTP, or 2^26 Hz for abs-send-time shifted
    /// left by 8 bits).
    public let clockRate: Int
    /// Packets whose send times lie within this many ticks of their group's first packet belong
    /// to that group (0: one group per timestamp, as for RTP timestamps; libwebrtc groups
    /// abs-send-times over 5 ms). The delay between groups runs from the last packet of one
    /// to the first of the next.
    public var groupSpanTicks: UInt32 = 0
    /// The current estimate in bits per second (0 until enough data).
    public private(set) var estimate: Double = 0
    /// The last detector state.
    public private(set) var usage: Usage = .normal
    /// Incoming rate over the last second, bits per second.
    public var incomingBitrate: Double { Double(windowBytes) * 8 / 1.0 }

    private static let window = 20
    private var times = [Double](repeating: 0, count: 20)
    private var delays = [Double](repeating: 0, count: 20)
    private var points = 0
    private var accumulated: Double = 0
    private var smoothed: Double = 0
    private var groupTimestamp: UInt32 = 0
    private var groupLastTimestamp: UInt32 = 0
    private var groupArrivalNs: UInt64 = 0
    private var haveGroup = false
    private var firstArrivalNs: UInt64 = 0
    private var lastUpdateNs: UInt64 = 0
    // Incoming rate: 10 buckets of 100 ms.
    private var buckets = [Int](repeating: 0, count: 10)
    private var bucketStart: UInt64 = 0
    private var windowBytes = 0
    private var overuseSinceNs: UInt64 = 0
    private var lastDecreaseNs: UInt64 = 0
    private static let decreaseIntervalNs: UInt64 = 500_000_000

    /// Makes an estimator for timestamps at `clockRate`.
    public init(clockRate: Int = 90_000) { self.clockRate = clockRate }

    /// Feeds one packet's arrival. Returns true when the estimate changed enough (5 % or more
    /// down) that a REMB should go out now rather than with the next regular report.
    public mutating func packetArrived(timestamp: UInt32, arrival: MonotonicTime, size: Int) -> Bool {
        let arrivalNs = arrival.nanoseconds
        addBytes(size, at: arrivalNs)
        if firstArrivalNs == 0 { firstArrivalNs = arrivalNs }
        if !haveGroup {
            haveGroup = true; groupTimestamp = timestamp; groupLastTimestamp = timestamp; groupArrivalNs = arrivalNs
            return false
        }
        let dts = Int32(bitPattern: timestamp &- groupTimestamp)
        if dts <= Int32(clamping: groupSpanTicks) {
            // Same frame (or send burst) or reordered: the group's arrival is its last packet's.
            if dts >= 0 && arrivalNs > groupArrivalNs { groupArrivalNs = arrivalNs }
            if Int32(bitPattern: timestamp &- groupLastTimestamp) > 0 { groupLastTimestamp = timestamp }
            return false
        }
        // A new group: delay variation between the previous group and this one's first packet.
        let sendDeltaMs = Double(Int32(bitPattern: timestamp &- groupLastTimestamp)) * 1000 / Double(clockRate)
        let arrivalDeltaMs = (Double(arrivalNs) - Double(groupArrivalNs)) / 1e6
        groupTimestamp = timestamp
        groupLastTimestamp = timestamp
        groupArrivalNs = arrivalNs
        accumulated += arrivalDeltaMs - sendDeltaMs
        smoothed = 0.9 * smoothed + 0.1 * accumulated
        let t = Double(arrivalNs &- firstArrivalNs) / 1e6
        let i = points % Self.window
        times[i] = t; delays[i] = smoothed
        points += 1
        return update(nowNs: arrivalNs)
    }

    private mutating func addBytes(_ n: Int, at ns: UInt64) {
        let tick: UInt64 = 100_000_000
        if bucketStart == 0 || ns >= bucketStart + 10 * tick {
            for k in 0..<10 { buckets[k] = 0 }
            windowBytes = 0
            bucketStart = ns - ns % tick
        }
        while ns >= bucketStart + tick {
            bucketStart += tick
            let slot = Int(bucketStart / tick % 10)
            windowBytes -= buckets[slot]
            buckets[slot] = 0
        }
        buckets[Int(bucketStart / tick % 10)] += n
        windowBytes += n
    }

    private mutating func update(nowNs: UInt64) -> Bool {
        let n = min(points, Self.window)
        guard n >= Self.window else { return false }
        var mt = 0.0, md = 0.0
        for k in 0..<n { mt += times[k]; md += delays[k] }
        mt /= Double(n); md /= Double(n)
        var num = 0.0, den = 0.0
        for k in 0..<n { num += (times[k] - mt) * (delays[k] - md); den += (times[k] - mt) * (times[k] - mt) }
        let slope = den > 0 ? num / den : 0
        let trend = slope * Double(min(points, 60)) * 4
        let threshold = 12.5
        let previous = estimate
        let incoming = incomingBitrate
        guard nowNs &- firstArrivalNs > 1_000_000_000, incoming > 0 else { return false }
        if trend > threshold {
            if overuseSinceNs == 0 { overuseSinceNs = nowNs }
            usage = nowNs - overuseSinceNs >= 10_000_000 ? .overusing : usage
        } else {
            overuseSinceNs = 0
            usage = trend < -threshold ? .underusing : .normal
        }
        let dt = lastUpdateNs == 0 ? 0 : min(1.0, Double(nowNs &- lastUpdateNs) / 1e9)
        lastUpdateNs = nowNs
        switch usage {
        case .overusing:
            // Decrease (draft-ietf-rmcat-gcc-02 §5.5), then hold: queues take a while to drain,
            // so one cut per `decreaseIntervalNs` -- cutting on every overuse signal would spiral
            // down with the incoming rate.
            if estimate == 0 || nowNs >= lastDecreaseNs + Self.decreaseIntervalNs {
                estimate = estimate == 0 ? 0.85 * incoming : max(0.5 * estimate, min(estimate, 0.85 * incoming))
                lastDecreaseNs = nowNs
            }
        case .underusing:
            if estimate == 0 { estimate = incoming }  // hold: queues drain
        case .normal:
            estimate = estimate == 0 ? 1.5 * incoming : estimate * (1 + 0.08 * dt)
            estimate = min(estimate, 1.5 * incoming + 10_000)
        }
        return previous > 0 && estimate < 0.95 * previous
    }
}
