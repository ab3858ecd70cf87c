import MediaBase

/// One probe: a short burst the pacer sends at `bitrate` (media first, RTX padding when the queue
/// runs dry) until it has sent `minimumBytes` in `minimumPackets` packets or more. Every packet of
/// the burst is logged with `id` in the transport-wide send log, so the feedback about it tells
/// how fast the path delivered it (`ProbeBitrateEstimator`).
/// Thread rule: a value type. Cost: none.
public struct ProbeCluster: Sendable, Equatable {
    /// The cluster's number in the send log, 1...32767.
    public var id: Int
    /// The rate the burst is sent at, bits per second.
    public var bitrate: Int
    /// The burst ends once it has sent this many bytes...
    public var minimumBytes: Int
    /// ...and at least this many packets.
    public var minimumPackets: Int

    /// A cluster lasting `durationMilliseconds` at `bitrate` (libwebrtc: 15 ms, 5 packets).
    public init(id: Int, bitrate: Int, durationMilliseconds: Int = 15, minimumPackets: Int = 5) {
        precondition((1...0x7FFF).contains(id), "probe cluster id \(id) out of 1...32767")
        self.id = id
        self.bitrate = bitrate
        minimumBytes = bitrate / 8 * durationMilliseconds / 1000
        self.minimumPackets = minimumPackets
    }
}

/// Turns transport feedback about probe clusters into the rate the path delivered them at
/// (after libwebrtc's `ProbeBitrateEstimator`). A cluster counts once at least 80 % of its
/// packets and bytes were reported received. Whether the path kept up is read from the packets'
/// one-way delays (arrival less send time, whatever the clock offset):
/// - They stayed within 1 ms (or a tenth of the time the sends took): the path kept up, and the
///   arrivals follow the sender's pacing. The result is the send rate: the bytes less the last
///   packet's (the span ends when it was sent) over the longer of the send and arrival spans.
/// - Otherwise a queue formed, and the result is libwebrtc's: the receive rate is the bytes less
///   the first packet's (the span starts when that one had arrived) over the arrival span; the
///   smaller of it and the send rate, or 95 % of the receive rate when that is below 90 % of the
///   send rate (the path was saturated).
/// libwebrtc reads every cluster the second way; a cluster that mixes a full-size media packet
/// with small padding then reads a path that kept up as saturated (a large first packet) or as
/// received implausibly fast (a large last one).
/// A cluster spread over more than a second, or whose arrivals took less than half the time its
/// sends did (the receiver's clock or the feedback is off), gives nothing.
public struct ProbeBitrateEstimator: Sendable {
    private struct Aggregate {
        var cluster: ProbeCluster
        var registeredNs: Int64
        var firstSendNs: Int64 = .max, lastSendNs: Int64 = .min
        var firstArrivalNs: Int64 = .max, lastArrivalNs: Int64 = .min
        var lastSendSize = 0, firstArrivalSize = 0
        var minDelayNs: Int64 = .max, maxDelayNs: Int64 = .min
        var bytes = 0, packets = 0
    }

    private var slots: [Aggregate?] = Array(repeating: nil, count: 8)
    /// Results computed so far (one per feedback that completed or extended a valid cluster).
    public private(set) var resultCount = 0
    /// Clusters whose packets came back unusable (spread over more than a second, or a receive
    /// rate more than twice the send rate).
    public private(set) var invalidCount = 0

    /// An estimator with no clusters.
    public init() {}

    /// Starts following `cluster`, sent at `now`. The oldest of 8 followed
    /// clusters makes room; a cluster older than 1 s is forgotten when its feedback is adapted.
    public mutating func register(_ cluster: ProbeCluster, now: MonotonicTime) {
        let nowNs = Int64(bitPattern: now.nanoseconds)
        var victim = 0
        for k in 0..<slots.count {
            guard let s = slots[k] else { victim = k; break }
            if s.cluster.id == cluster.id { victim = k; break }
            if let v = slots[victim], s.registeredNs < v.registeredNs { victim = k }
        }
        slots[victim] = Aggregate(cluster: cluster, registeredNs: nowNs)
    }

    /// Adds one feedback's results; returns the delivered rate in bits per second of the last
    /// cluster these results made valid, nil when none.
    public mutating func update(_ results: [TransportPacketResult], now: MonotonicTime) -> Double? {
        let nowNs = Int64(bitPattern: now.nanoseconds)
        for k in 0..<slots.count where slots[k].map({ nowNs - $0.registeredNs > 1_000_000_000 }) == true { slots[k] = nil }
        var touched: UInt8 = 0
        for i in 0..<results.count {
            let r = results[i]
            guard r.probeCluster != 0, let arrival = r.arrivalNs else { continue }
            for k in 0..<slots.count where slots[k]?.cluster.id == r.probeCluster {
                touched |= 1 << k
                var a = slots[k]!
                if r.sendNs < a.firstSendNs { a.firstSendNs = r.sendNs }
                if r.sendNs >= a.lastSendNs { a.lastSendNs = r.sendNs; a.lastSendSize = r.size }
                if arrival < a.firstArrivalNs { a.firstArrivalNs = arrival; a.firstArrivalSize = r.size }
                if arrival > a.lastArrivalNs { a.lastArrivalNs = arrival }
                a.minDelayNs = min(a.minDelayNs, arrival - r.sendNs)
                a.maxDelayNs = max(a.maxDelayNs, arrival - r.sendNs)
                a.bytes += r.size
                a.packets += 1
                slots[k] = a
            }
        }
        var result: Double?
        for k in 0..<slots.count where touched & (1 << k) != 0 {
            guard let a = slots[k],
                Double(a.packets) >= 0.8 * Double(a.cluster.minimumPackets),
                Double(a.bytes) >= 0.8 * Double(a.cluster.minimumBytes), a.packets >= 2
            else { continue }
            let sendInterval = Double(a.lastSendNs - a.firstSendNs) / 1e9
            let receiveInterval = Double(a.lastArrivalNs - a.firstArrivalNs) / 1e9
            guard sendInterval > 0, sendInterval <= 1, receiveInterval > 0, receiveInterval <= 1 else {
                invalidCount += 1
                continue
            }
            guard 2 * receiveInterval >= sendInterval else {
                invalidCount += 1
                continue
            }
            let sent = Double(a.bytes - a.lastSendSize) * 8
            let queued = Double(a.maxDelayNs - a.minDelayNs) / 1e9 > max(0.001, 0.1 * sendInterval)
            if !queued {
                result = sent / max(sendInterval, receiveInterval)
            } else {
                let sendRate = sent / sendInterval
                let receiveRate = Double(a.bytes - a.firstArrivalSize) * 8 / receiveInterval
                result = receiveRate < 0.9 * sendRate ? 0.95 * receiveRate : min(sendRate, receiveRate)
            }
            resultCount += 1
        }
        return result
    }
}

/// Decides when to probe and how high (in the manner of libwebrtc's `ProbeController`):
///
/// - At the start, two clusters at 3x and 6x the start bitrate (at most the maximum; sent once
///   more when no result came back within a second, as when the first keyframe crowds them out); while a
///   result comes back at 70 % or more of what was probed, the next probe goes to twice the
///   result, until the maximum is reached. So a call finds its path's capacity within a few
///   round trips instead of climbing 8 % per second from where it started.
/// - After a large drop (the estimate below 66 % of the highest it reached), a probe at twice the
///   estimate (at most that highest) every `recoveryInterval` (3 s; 10 s after ten probes that
///   found nothing) until the estimate is back within 85 % of the highest. A result that keeps up
///   leads to the next probe at once, as above, so a path whose capacity returns is found within
///   one interval and a few round trips, not regained at 8 % per second; a path still narrow
///   sees a burst of 15 ms at twice its rate every few seconds.
/// - While the sender is application-limited (less than 65 % of the estimate arrives: a still
///   picture, a low encoder ceiling), a probe at twice the estimate every 5 s, so the estimate
///   keeps up with the path's capacity instead of staying at 1.5 x the little that is sent.
///
/// Thread rule: one owner (where RTCP arrives). Cost: O(1) per estimate; no allocation.
public struct ProbeController: Sendable {
    /// Tuning; the defaults are libwebrtc's where it has one.
    public struct Settings: Sendable, Equatable {
        /// The first probes, as multiples of the start bitrate.
        public var firstScale = 3.0, secondScale = 6.0
        /// Later probes while results keep up: this multiple of the last result...
        public var furtherScale = 2.0
        /// ...when the result was at least this share of the probed rate.
        public var furtherThreshold = 0.7
        /// A drop below this share of the highest estimate starts recovery probing.
        public var dropThreshold = 0.66
        /// Recovery ends when the estimate is back within this share of the highest.
        public var recoveredThreshold = 0.85
        /// Time between recovery probes (while they find nothing: ten, then `slowRecoveryInterval`).
        public var recoveryInterval: Duration = .seconds(3)
        /// Time between recovery probes after ten found nothing.
        public var slowRecoveryInterval: Duration = .seconds(10)
        /// A probe whose result has not come back in this time is given up.
        public var resultTimeout: Duration = .seconds(1)
        /// The sender is application-limited when what arrives is below this share of the
        /// estimate (libwebrtc's ALR detector: 65 %)...
        public var applicationLimitedThreshold = 0.65
        /// ...and then probes at `furtherScale` x the estimate this often (libwebrtc: 5 s).
        public var applicationLimitedInterval: Duration = .seconds(5)
        /// Defaults.
        public init() {}
    }

    /// The settings in use.
    public let settings: Settings
    /// Highest rate probed, bits per second.
    public var maximumBitrate: Int
    /// Clusters requested so far.
    public private(set) var clustersRequested = 0
    /// Recovery probes sent since the last drop.
    public private(set) var recoveryProbes = 0

    private var started = false
    /// Whether any probe result came back, and whether the start probes were sent a second time.
    private var anyResult = false
    private var startRetried = false
    private var nextId = 1
    /// The rate of the highest probe whose result is awaited (0: none), and when it was sent.
    private var awaitedBitrate = 0
    private var awaitedSinceNs: Int64 = 0
    private var highestEstimate = 0.0
    private var recovering = false
    private var lastRecoveryProbeNs: Int64 = .min
    private var lastApplicationLimitedProbeNs: Int64 = .min
    /// Probes sent because the sender was application-limited.
    public private(set) var applicationLimitedProbes = 0

    /// A controller probing up to `maximumBitrate`.
    public init(maximumBitrate: Int, settings: Settings = Settings()) {
        self.maximumBitrate = maximumBitrate
        self.settings = settings
    }

    /// The first probes, once: call when media starts flowing with transport feedback.
    public mutating func start(estimate: Int, now: MonotonicTime) -> [ProbeCluster] {
        let nowNs = Int64(bitPattern: now.nanoseconds)
        guard !started else { return [] }
        started = true
        highestEstimate = Double(estimate)
        return startProbes(estimate: estimate, nowNs: nowNs)
    }

    private mutating func startProbes(estimate: Int, nowNs: Int64) -> [ProbeCluster] {
        var out: [ProbeCluster] = []
        for scale in [settings.firstScale, settings.secondScale] {
            let rate = min(maximumBitrate, Int(Double(estimate) * scale))
            guard rate > estimate, rate > out.last?.bitrate ?? 0 else { continue }
            out.append(cluster(rate))
        }
        if let top = out.last { expectResult(top.bitrate, nowNs: nowNs) }
        return out
    }

    /// The estimate after a feedback, with the probe result that feedback gave (nil when none)
    /// and the acknowledged bitrate (what the feedback says arrived, nil when unknown): the
    /// probes to send now.
    public mutating func update(
        estimate: Int, probeResult: Double?, now: MonotonicTime, acknowledgedBitrate: Double? = nil
    ) -> [ProbeCluster] {
        guard started else { return [] }
        let nowNs = Int64(bitPattern: now.nanoseconds)
        let e = Double(estimate)
        var out: [ProbeCluster] = []
        if awaitedBitrate > 0 {
            // A result below the threshold may be an earlier, lower cluster's: keep waiting.
            if let result = probeResult, result >= settings.furtherThreshold * Double(awaitedBitrate) {
                let probed = awaitedBitrate
                awaitedBitrate = 0
                let next = min(maximumBitrate, Int(settings.furtherScale * result))
                if next > estimate && next > probed {
                    out.append(cluster(next))
                    expectResult(next, nowNs: nowNs)
                }
            } else if nowNs - awaitedSinceNs > settings.resultTimeout.inNanoseconds {
                awaitedBitrate = 0
                // The start probes gave nothing usable (lost behind the first keyframe, say):
                // once, the same probes again.
                if !startRetried, probeResult == nil, !anyResult {
                    startRetried = true
                    out = startProbes(estimate: estimate, nowNs: nowNs)
                }
            }
        }
        if probeResult != nil { anyResult = true }
        // Recovery after a large drop.
        if e >= highestEstimate {
            highestEstimate = e
        } else if !recovering, e < settings.dropThreshold * highestEstimate {
            recovering = true
            recoveryProbes = 0
            lastRecoveryProbeNs = nowNs
        }
        if recovering, e >= settings.recoveredThreshold * highestEstimate {
            recovering = false
            highestEstimate = e
        }
        // Application-limited: the estimate cannot grow past what little is sent (1.5 x the
        // acknowledged rate), so probe to keep it near the path's capacity.
        if !recovering, awaitedBitrate == 0, out.isEmpty, let acked = acknowledgedBitrate, acked > 0,
            acked < settings.applicationLimitedThreshold * e, estimate < maximumBitrate,
            lastApplicationLimitedProbeNs == .min
                || nowNs - lastApplicationLimitedProbeNs >= settings.applicationLimitedInterval.inNanoseconds
        {
            lastApplicationLimitedProbeNs = nowNs
            let rate = min(maximumBitrate, Int(settings.furtherScale * e))
            applicationLimitedProbes += 1
            out.append(cluster(rate))
            expectResult(rate, nowNs: nowNs)
        }
        if recovering, awaitedBitrate == 0, out.isEmpty {
            let interval =
                recoveryProbes < 10 ? settings.recoveryInterval.inNanoseconds : settings.slowRecoveryInterval.inNanoseconds
            if nowNs - lastRecoveryProbeNs >= interval {
                lastRecoveryProbeNs = nowNs
                recoveryProbes += 1
                let rate = min(maximumBitrate, Int(min(highestEstimate, settings.furtherScale * e)))
                if rate > estimate {
                    out.append(cluster(rate))
                    expectResult(rate, nowNs: nowNs)
                }
            }
        }
        return out
    }

    /// Whether `start` was called.
    public var hasStarted: Bool { started }

    /// Whether the estimate is below 66 % of its highest and not yet back within 85 % of it.
    public var isRecovering: Bool { recovering }

    private mutating func cluster(_ bitrate: Int) -> ProbeCluster {
        let c = ProbeCluster(id: nextId, bitrate: bitrate)
        nextId = nextId == 0x7FFF ? 1 : nextId + 1
        clustersRequested += 1
        return c
    }

    private mutating func expectResult(_ bitrate: Int, nowNs: Int64) {
        awaitedBitrate = max(awaitedBitrate, bitrate)
        awaitedSinceNs = nowNs
    }
}
