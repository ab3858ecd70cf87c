import MediaBase
import MediaWire

/// One packet reported by transport-wide feedback, matched to when we sent it.
/// Thread rule: a value type. Cost: none.
public struct TransportPacketResult: Sendable, Equatable {
    /// Transport-wide sequence number, extended past 16 bits.
    public var sequenceNumber: Int64
    /// When it left (`CLOCK_MONOTONIC` ns, the sender's clock).
    public var sendNs: Int64
    /// When it arrived (the receiver's clock, ns: only differences mean anything), nil when the
    /// feedback says it was lost.
    public var arrivalNs: Int64?
    /// Wire size in bytes (RTP header and SRTP tag included).
    public var size: Int
    /// The probe cluster it was sent for (`ProbeCluster.id`), 0 when none.
    public var probeCluster: Int

    /// Makes a result.
    public init(sequenceNumber: Int64, sendNs: Int64, arrivalNs: Int64?, size: Int, probeCluster: Int = 0) {
        self.sequenceNumber = sequenceNumber; self.sendNs = sendNs; self.arrivalNs = arrivalNs; self.size = size
        self.probeCluster = probeCluster
    }
}

/// Turns transport-cc feedback (draft-holmer-rmcat-transport-wide-cc-extensions-01 §3.1) into
/// per-packet results: arrival times rebuilt from the reference time (64 ms units, 24 bits,
/// unwrapped across packets) plus the running sum of the receive deltas (250 µs units), sequence
/// numbers extended past 16 bits, and each packet matched to its logged send time and size.
/// Packets without a send record (never logged, or overwritten in the log) are skipped and counted.
/// Thread rule: one owner (where RTCP arrives). Cost: O(packets in the feedback); `results` is one
/// array reused for every feedback, so no allocation once it has grown to the largest feedback.
public struct TransportFeedbackAdapter: Sendable {
    /// The results of the last `adapt` call, in sequence number order.
    public private(set) var results: [TransportPacketResult] = []
    /// Reported packets that had no send record.
    public private(set) var unmatched = 0
    /// Feedback packets adapted.
    public private(set) var feedbackCount = 0
    /// Feedback packets missing by their 8-bit count (lost on the way back or reordered).
    public private(set) var feedbackGaps = 0
    private var reference: Int64 = 0
    private var lastRawReference: Int32 = 0
    private var highest: Int64 = -1
    private var lastCount: UInt8 = 0

    /// An adapter reserving room for `expectedPacketsPerFeedback` results.
    public init(expectedPacketsPerFeedback: Int = 512) { results.reserveCapacity(expectedPacketsPerFeedback) }

    /// Adapts `feedback`, looking each reported packet's send up with `lookup` (send time,
    /// wire size and probe cluster, nil when unknown); the results replace
    /// `results`.
    public mutating func adapt(
        _ feedback: RTCPTransportFeedback,
        lookup: (UInt16) -> (sendTime: MonotonicTime, size: Int, probeCluster: Int)?
    ) {
        results.removeAll(keepingCapacity: true)
        // Unwrap the 24-bit reference time against the previous one.
        if feedbackCount == 0 {
            reference = Int64(feedback.referenceTime)
        } else {
            // The smallest difference modulo 2^23: right for a sender wrapping at 2^24 (the draft's
            // 24 bits) and for one wrapping at 2^23, as long as feedback is < 3 days apart.
            let d = ((feedback.referenceTime &- lastRawReference) << 9) >> 9
            reference += Int64(d)
            if feedback.feedbackPacketCount != lastCount &+ 1 {
                feedbackGaps += Int(feedback.feedbackPacketCount &- lastCount &- 1)
            }
        }
        lastRawReference = feedback.referenceTime
        lastCount = feedback.feedbackPacketCount
        feedbackCount += 1
        // Extend the base against the highest number seen so far.
        let base: Int64 =
            highest < 0
            ? Int64(feedback.baseSequenceNumber)
            : highest + Int64(Int16(bitPattern: feedback.baseSequenceNumber &- UInt16(truncatingIfNeeded: highest)))
        var arrival = reference * 64_000_000
        // Index loops: an array's iterator allocates per element in unoptimised builds.
        for k in 0..<feedback.packets.count {
            let p = feedback.packets[k]
            let ext = base + Int64(k)
            var at: Int64? = nil
            if let d = p.receiveDelta {
                arrival += Int64(d) * 250_000
                at = arrival
            }
            guard let sent = lookup(UInt16(truncatingIfNeeded: ext)) else { unmatched += 1; continue }
            results.append(
                TransportPacketResult(
                    sequenceNumber: ext, sendNs: Int64(bitPattern: sent.sendTime.nanoseconds),
                    arrivalNs: at, size: sent.size, probeCluster: sent.probeCluster))
        }
        highest = max(highest, base + Int64(feedback.packets.count) - 1)
    }

    /// Adapts `feedback` against the send log of `numbers` (see `TransportSequenceNumbers.sent`).
    public mutating func adapt(_ feedback: RTCPTransportFeedback, sendLog numbers: TransportSequenceNumbers) {
        adapt(feedback) { numbers.sent($0) }
    }
}

/// Send-side delay-based bandwidth estimation on transport-wide feedback, in the manner of Google
/// Congestion Control (draft-ietf-rmcat-gcc-02 §5; libwebrtc's goog_cc):
///
/// - Pre-filtering (§5.2): packets sent within `groupSpanMilliseconds` (5 ms, one pacer burst) of
///   a group's first packet form one group, and so do packets that arrive in a burst (within 5 ms
///   of the group's last arrival with a negative delay change); the delay variation between two
///   groups is (arrival delta) - (send delta), last packet to last packet.
/// - Trendline filter (in place of §5.3's Kalman filter, as libwebrtc): the variations are
///   accumulated, exponentially smoothed (0.9), and a least-squares line through the last
///   `windowSize` (arrival time, smoothed delay) points gives the slope; the detector sees the
///   slope times min(groups, 60) times 4.
/// - Over-use detector with the adaptive threshold of §5.4: γ moves towards |m| at rate K_u =
///   0.01 /ms when |m| > γ, K_d = 0.00018 /ms otherwise (the draft's constants), is clamped to
///   6...600 and does not move for outliers (|m| > γ + 15). Over-use is signalled once m has
///   exceeded γ for 10 ms over at least two groups and is not falling; under-use when m < -γ.
/// - AIMD rate control (§5.5): the draft's hold/increase/decrease state machine. Decrease sets
///   the estimate to β = 0.85 x the acknowledged bitrate (what the feedback says arrived over the
///   last 500 ms; β x the estimate before 500 ms of arrivals have been seen), at most once per clamp(RTT, 10...200 ms) while the over-use lasts. Increase is
///   multiplicative (8 % per second) far from the link capacity, and additive (about one packet
///   per response time, RTT + 100 ms) within 3 standard deviations of it, the capacity being the
///   mean acknowledged bitrate at past decreases. The estimate never exceeds 1.5 x the
///   acknowledged bitrate + 10 kbit/s: it must not run away from what the path is shown to carry.
///   Loss above 10 % over the last 5 feedbacks (20 packets or more, once the acknowledged
///   bitrate covers its whole window) also counts as over-use: a full drop-tail queue no longer
///   grows, so its delay trend is flat while it drops.
///
/// - Probing: a probe's result (`applyProbeResult`, from `ProbeBitrateEstimator`) replaces the
///   estimate when the detector does not signal over-use, so capacity found by a burst above
///   the estimate is taken at once rather than regained at 8 % per second.
/// Thread rule: one owner thread (where RTCP arrives). Cost: O(packets) per feedback, O(window)
/// per packet group; no allocation after `init`.
public struct DelayBasedBandwidthEstimator: Sendable {
    /// Detector output (§5.4).
    public enum Usage: Sendable, Equatable { case normal, overusing, underusing }
    /// Rate controller state (§5.5).
    public enum RateState: Sendable, Equatable { case hold, increase, decrease }

    /// Tuning; the defaults are the draft's and libwebrtc's. Thread rule: a value type.
    public struct Settings: Sendable, Equatable {
        /// Packets sent within this of a group's first packet belong to that group.
        public var groupSpanMilliseconds: Double = 5
        /// Points in the trendline's regression window.
        public var windowSize: Int = 20
        /// Exponential smoothing of the accumulated delay.
        public var smoothing: Double = 0.9
        /// Multiplier of the trend before it meets the threshold.
        public var thresholdGain: Double = 4
        /// γ at start, ms.
        public var initialThreshold: Double = 12.5
        /// Threshold adaptation gains per ms (§5.4 K_u, K_d).
        public var thresholdUp: Double = 0.01, thresholdDown: Double = 0.00018
        /// Time above γ before over-use is signalled, ms.
        public var overuseTimeMilliseconds: Double = 10
        /// Multiplicative decrease factor (§5.5 β).
        public var beta: Double = 0.85
        /// Loss above this fraction over the last 5 feedbacks (20 packets or more) counts as
        /// over-use (a full drop-tail queue whose delay has stopped growing).
        public var lossOveruseFraction: Double = 0.1
        /// Acknowledged bitrate window, ms.
        public var acknowledgedWindowMilliseconds: Int = 500
        /// Defaults.
        public init() {}
    }

    /// The settings in use.
    public let settings: Settings
    /// Lowest and highest estimate, bits per second.
    public var minimumBitrate: Double, maximumBitrate: Double
    /// The delay-based estimate, bits per second.
    public private(set) var estimate: Double
    /// The last detector output.
    public private(set) var usage: Usage = .normal
    /// The rate controller's state.
    public private(set) var state: RateState = .increase
    /// The adaptive threshold γ, ms.
    public private(set) var threshold: Double
    /// The last modified trend m (slope x min(groups, 60) x gain), ms.
    public private(set) var trend: Double = 0
    /// What arrived over the last `acknowledgedWindowMilliseconds` per the feedback, bits per
    /// second (0 before any).
    public private(set) var acknowledgedBitrate: Double = 0
    /// Times the detector signalled over-use, and decreases made.
    public private(set) var overuseCount = 0, decreaseCount = 0
    /// Decreases made because the feedback reported heavy loss rather than growing delay.
    public private(set) var lossDecreaseCount = 0
    /// Packet groups compared.
    public private(set) var groupDeltas = 0
    /// Probe results taken as the estimate (`applyProbeResult`).
    public private(set) var probeResultsApplied = 0
    /// Link capacity (mean acknowledged bitrate at decreases), bits per second; nil when unknown.
    public var linkCapacity: Double? { capacityKbps.map { $0 * 1000 } }

    // Grouping.
    private var groupFirstSend: Int64 = 0, groupLastSend: Int64 = 0
    private var groupFirstArrival: Int64 = 0, groupLastArrival: Int64 = 0
    private var haveGroup = false
    private var prevLastSend: Int64 = 0, prevLastArrival: Int64 = 0
    private var havePrevious = false
    // Trendline.
    private var firstArrivalNs: Int64 = 0
    private var accumulated = 0.0, smoothed = 0.0
    private var xs: [Double], ys: [Double]
    private var points = 0
    private var deltaCount = 0
    private var slope = 0.0
    // Detector.
    private var overuseTime = -1.0
    private var overuseStreak = 0
    private var previousTrend = 0.0
    private var lastThresholdUpdateMs: Double = -1
    // Rate control.
    private var lastUpdateNs: Int64 = 0
    private var lastDecreaseNs: Int64 = .min
    private var capacityKbps: Double? = nil
    private var capacityVariance = 0.4
    private var roundTripNs: Int64 = 100_000_000
    // Loss over the last feedbacks: (lost, reported) per feedback.
    private var lossLost = [Int](repeating: 0, count: 5), lossReported = [Int](repeating: 0, count: 5)
    private var feedbacks = 0
    // Acknowledged bitrate: bytes per 50 ms bucket of arrival time.
    private var buckets: [Int]
    private var bucketIndex: Int64 = -1
    private var firstAckNs: Int64 = .min
    private var latestArrivalNs: Int64 = 0
    private static let bucketNs: Int64 = 50_000_000

    /// An estimator starting at `startBitrate`, kept within `minimumBitrate...maximumBitrate`.
    public init(
        startBitrate: Int, minimumBitrate: Int = 50_000, maximumBitrate: Int = 5_000_000,
        settings: Settings = Settings()
    ) {
        precondition(minimumBitrate > 0 && minimumBitrate <= maximumBitrate && settings.windowSize >= 2)
        self.settings = settings
        self.minimumBitrate = Double(minimumBitrate)
        self.maximumBitrate = Double(maximumBitrate)
        estimate = Double(max(minimumBitrate, min(maximumBitrate, startBitrate)))
        threshold = settings.initialThreshold
        xs = [Double](repeating: 0, count: settings.windowSize)
        ys = [Double](repeating: 0, count: settings.windowSize)
        buckets = [Int](repeating: 0, count: max(1, settings.acknowledgedWindowMilliseconds / 50))
    }

    /// The latest round-trip time (from RTCP receiver reports), for the decrease interval and the
    /// additive increase's response time.
    public mutating func roundTripTime(seconds: Double) {
        guard seconds.isFinite, seconds >= 0 else { return }
        roundTripNs = Int64(min(seconds, 10) * 1e9)
    }

    /// Feeds one transport feedback's results (`TransportFeedbackAdapter.results`) received at
    /// `now`: the delay filter sees every received packet, then the rate
    /// controller runs once. Returns the new estimate.
    @discardableResult
    public mutating func update(_ results: [TransportPacketResult], now: MonotonicTime) -> Double {
        let nowNs = Int64(bitPattern: now.nanoseconds)
        var any = false, lost = 0
        for k in 0..<results.count {
            let r = results[k]
            guard let arrival = r.arrivalNs else { lost += 1; continue }
            any = true
            acknowledge(arrival, size: r.size)
            packet(sendNs: r.sendNs, arrivalNs: arrival)
        }
        let slot = feedbacks % lossLost.count
        lossLost[slot] = lost
        lossReported[slot] = results.count
        feedbacks += 1
        if any { control(nowNs: nowNs) }
        return estimate
    }

    // MARK: Pre-filtering

    private mutating func packet(sendNs: Int64, arrivalNs: Int64) {
        let span = Int64(settings.groupSpanMilliseconds * 1e6)
        guard haveGroup else {
            haveGroup = true
            groupFirstSend = sendNs; groupLastSend = sendNs
            groupFirstArrival = arrivalNs; groupLastArrival = arrivalNs
            return
        }
        if sendNs < groupFirstSend { return }  // older than the group: reordered, ignored
        let inSpan = sendNs - groupFirstSend <= span
        // A burst: arrived right after the group's last packet although sent later than it
        // (a queue released them together), so the queue says nothing about these.
        let arrivalDelta = arrivalNs - groupLastArrival, sendDelta = sendNs - groupLastSend
        let burst =
            arrivalDelta >= 0 && arrivalDelta <= 5_000_000 && arrivalDelta - sendDelta < 0
            && arrivalNs - groupFirstArrival < 100_000_000
        if inSpan || burst {
            groupLastSend = max(groupLastSend, sendNs)
            groupLastArrival = max(groupLastArrival, arrivalNs)
            return
        }
        // The group is complete: compare it with the one before.
        if havePrevious {
            let sendDeltaMs = Double(groupLastSend - prevLastSend) / 1e6
            let arrivalDeltaMs = Double(groupLastArrival - prevLastArrival) / 1e6
            if arrivalDeltaMs >= 0 {
                trendline(sendDeltaMs: sendDeltaMs, arrivalDeltaMs: arrivalDeltaMs, arrivalNs: groupLastArrival)
            }
        }
        havePrevious = true
        prevLastSend = groupLastSend; prevLastArrival = groupLastArrival
        groupFirstSend = sendNs; groupLastSend = sendNs
        groupFirstArrival = arrivalNs; groupLastArrival = arrivalNs
    }

    // MARK: Trendline and detector

    private mutating func trendline(sendDeltaMs: Double, arrivalDeltaMs: Double, arrivalNs: Int64) {
        groupDeltas += 1
        if deltaCount == 0 { firstArrivalNs = arrivalNs }
        deltaCount = min(deltaCount + 1, 1000)
        accumulated += arrivalDeltaMs - sendDeltaMs
        smoothed = settings.smoothing * smoothed + (1 - settings.smoothing) * accumulated
        let n = settings.windowSize
        let i = points % n
        xs[i] = Double(arrivalNs - firstArrivalNs) / 1e6
        ys[i] = smoothed
        points += 1
        if points >= n {
            var mx = 0.0, my = 0.0
            for k in 0..<n { mx += xs[k]; my += ys[k] }
            mx /= Double(n); my /= Double(n)
            var num = 0.0, den = 0.0
            for k in 0..<n {
                let dx = xs[k] - mx
                num += dx * (ys[k] - my); den += dx * dx
            }
            if den > 0 { slope = num / den }
        }
        detect(nowMs: Double(arrivalNs) / 1e6, sendDeltaMs: sendDeltaMs)
    }

    private mutating func detect(nowMs: Double, sendDeltaMs: Double) {
        guard deltaCount >= 2 else { return }
        let m = Double(min(deltaCount, 60)) * slope * settings.thresholdGain
        trend = m
        if m > threshold {
            overuseTime = overuseTime < 0 ? sendDeltaMs / 2 : overuseTime + sendDeltaMs
            overuseStreak += 1
            if overuseTime > settings.overuseTimeMilliseconds && overuseStreak > 1 && m >= previousTrend {
                overuseTime = 0
                overuseStreak = 0
                if usage != .overusing { overuseCount += 1 }
                usage = .overusing
            }
        } else {
            overuseTime = -1
            overuseStreak = 0
            usage = m < -threshold ? .underusing : .normal
        }
        previousTrend = m
        // §5.4 adaptive threshold.
        if lastThresholdUpdateMs < 0 { lastThresholdUpdateMs = nowMs }
        if m.magnitude <= threshold + 15 {
            let k = m.magnitude < threshold ? settings.thresholdDown : settings.thresholdUp
            let dt = min(max(nowMs - lastThresholdUpdateMs, 0), 100)
            threshold = min(max(threshold + k * (m.magnitude - threshold) * dt, 6), 600)
        }
        lastThresholdUpdateMs = nowMs
    }

    // MARK: Acknowledged bitrate

    private mutating func acknowledge(_ arrivalNs: Int64, size: Int) {
        let index = arrivalNs / Self.bucketNs
        if bucketIndex < 0 {
            bucketIndex = index
            firstAckNs = arrivalNs
        }
        if index > bucketIndex {
            // Clear the buckets the window moves over.
            let steps = min(index - bucketIndex, Int64(buckets.count))
            for s in 1...steps { buckets[Int((bucketIndex + s) % Int64(buckets.count))] = 0 }
            bucketIndex = index
        }
        // A reordered packet older than the window's current bucket counts in the current bucket.
        buckets[Int(bucketIndex % Int64(buckets.count))] += size
        latestArrivalNs = max(latestArrivalNs, arrivalNs)
        var bytes = 0
        for k in 0..<buckets.count { bytes += buckets[k] }
        let window = Int64(buckets.count) * Self.bucketNs
        // Until a full window has passed, divide by the time covered so far (at least 100 ms).
        let span = min(window, max(100_000_000, latestArrivalNs - firstAckNs))
        acknowledgedBitrate = Double(bytes) * 8 / (Double(span) / 1e9)
    }

    // MARK: Rate control

    private mutating func control(nowNs: Int64) {
        // Heavy loss over the last feedbacks: a drop-tail queue is full, so its delay no longer
        // grows and the trend cannot see it; it is over-use all the same.
        // Only once the acknowledged bitrate covers a full window (the decrease goes to a share
        // of it), and only over 20 packets or more.
        var lost = 0, reported = 0
        for k in 0..<lossLost.count { lost += lossLost[k]; reported += lossReported[k] }
        let lossy = windowFull && reported >= 20 && Double(lost) > settings.lossOveruseFraction * Double(reported)
        // §5.5 state machine.
        switch lossy ? .overusing : usage {
        case .overusing: state = .decrease
        case .underusing: state = .hold
        case .normal: if state == .hold { state = .increase }
        }
        let dt = lastUpdateNs == 0 ? 0 : min(1.0, Double(nowNs - lastUpdateNs) / 1e9)
        lastUpdateNs = nowNs
        // The acknowledged bitrate counts only once it covers its whole window: a decrease to a
        // share of the first few packets' rate (say, of a keyframe's first burst) would be far
        // too deep.
        let acked = windowFull ? acknowledgedBitrate : 0
        let before = estimate
        switch state {
        case .increase:
            if let c = capacityKbps, acked / 1000 > c + 3 * capacityDeviation(c) { capacityKbps = nil }
            if let c = capacityKbps, acked > 0, (acked / 1000 - c).magnitude <= 3 * capacityDeviation(c) || estimate > c * 1000 {
                // Near the known capacity: about one packet per response time.
                let responseS = Double(roundTripNs) / 1e9 + 0.1
                let frameBits = estimate / 30
                let packets = max(1, (frameBits / (1200 * 8)).rounded(.up))
                let perSecond = max(4000, frameBits / packets / responseS)
                estimate += perSecond * dt
            } else {
                estimate *= pow108(dt)
            }
            // An increase never goes past what the path is shown to carry; an estimate already
            // above that (a probe found more) is kept, not pulled down.
            if acked > 0 { estimate = min(estimate, max(before, 1.5 * acked + 10_000)) }
        case .decrease:
            let interval = min(max(roundTripNs, 10_000_000), 200_000_000)
            if lastDecreaseNs == .min || nowNs - lastDecreaseNs >= interval {
                if acked > 0 {
                    estimate = min(estimate, settings.beta * acked)
                    updateCapacity(acked / 1000)
                } else {
                    estimate *= settings.beta
                }
                lastDecreaseNs = nowNs
                decreaseCount += 1
                if lossy {
                    lossDecreaseCount += 1
                    for k in 0..<lossLost.count { lossLost[k] = 0; lossReported[k] = 0 }  // this loss is answered
                }
            }
            state = .hold
        case .hold:
            break
        }
        estimate = min(max(estimate, minimumBitrate), maximumBitrate)
    }

    /// Takes a probe's result (`ProbeBitrateEstimator`) at `now` as the estimate, unless the
    /// detector signals over-use (then the decrease stands). A result is never taken below
    /// the smaller of the estimate and the acknowledged bitrate: a probe that found less than
    /// the path is already seen to carry measured the probe, not the path. Returns the estimate.
    @discardableResult
    public mutating func applyProbeResult(_ bitsPerSecond: Double, now: MonotonicTime) -> Double {
        guard bitsPerSecond.isFinite, bitsPerSecond > 0, usage != .overusing else { return estimate }
        let floor = windowFull ? min(estimate, acknowledgedBitrate) : 0
        estimate = min(max(max(bitsPerSecond, floor), minimumBitrate), maximumBitrate)
        probeResultsApplied += 1
        return estimate
    }

    private var windowFull: Bool { latestArrivalNs - firstAckNs >= Int64(buckets.count) * Self.bucketNs }

    private func capacityDeviation(_ c: Double) -> Double { (capacityVariance * c).squareRoot() }

    private mutating func updateCapacity(_ sampleKbps: Double) {
        guard let c = capacityKbps else { capacityKbps = sampleKbps; return }
        if sampleKbps < c - 3 * capacityDeviation(c) { capacityKbps = sampleKbps; return }  // the link changed
        let mean = 0.95 * c + 0.05 * sampleKbps
        let norm = max(mean, 1)
        capacityVariance = min(max(0.95 * capacityVariance + 0.05 * (mean - sampleKbps) * (mean - sampleKbps) / norm, 0.4), 2.5)
        capacityKbps = mean
    }

    /// 1.08 to the power `dt` (8 % per second), without Foundation.
    private func pow108(_ dt: Double) -> Double {
        // exp(dt x ln 1.08) by a short series: dt x ln 1.08 <= 0.077.
        let x = dt * 0.076961041136128
        return 1 + x + x * x / 2 + x * x * x / 6
    }
}
