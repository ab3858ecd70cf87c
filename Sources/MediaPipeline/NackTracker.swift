import MediaBase

/// Receive-side bookkeeping for generic NACK (RFC 4585 §6.2.1, §3.5.1): which sequence numbers are
/// missing, when each was last asked for, and when to give up on one.
///
/// A missing packet is NACKed at once, then again every round-trip time (at least
/// `minimumRetryInterval`) until it arrives, `maxTries` requests went out, or it falls out of the
/// window; libwebrtc's `NackRequester` behaves the same way. Storage is preallocated (`capacity`
/// entries indexed by extended sequence number `& mask`).
/// Thread rule: one owner thread (the receive engine). Cost: O(1) per packet; `collect` walks the
/// missing range (at most `capacity` entries).
public final class NackTracker {
    /// Counters since creation.
    public struct Counters: Sendable, Equatable {
        /// Sequence numbers found missing.
        public var missing = 0
        /// NACK requests (one per sequence number per try).
        public var requests = 0
        /// Missing packets that arrived later (retransmitted or reordered).
        public var recovered = 0
        /// Missing packets given up on after `maxTries` requests.
        public var givenUp = 0
    }

    /// Window size (a power of two).
    public let capacity: Int
    /// Requests per missing packet before giving up.
    public var maxTries: Int
    /// Shortest time between two requests for the same packet.
    public var minimumRetryInterval: Duration {
        get { .nanoseconds(Int64(minimumRetryIntervalNs)) }
        set { minimumRetryIntervalNs = UInt64(max(0, newValue.inNanoseconds)) }
    }
    private var minimumRetryIntervalNs: UInt64
    /// Counters.
    public private(set) var counters = Counters()

    private let mask: Int64
    private var missing: [Bool]
    private var lastSent: [UInt64]
    private var tries: [UInt8]
    private var exts: [Int64]
    private var low: Int64 = 0
    private var high: Int64 = 0
    private var started = false

    /// Makes a tracker for a window of `capacity` packets (power of two).
    public init(capacity: Int = 512, maxTries: Int = 10, minimumRetryInterval: Duration = .milliseconds(20)) {
        precondition(capacity >= 16 && capacity & (capacity - 1) == 0, "NACK window \(capacity) must be a power of two >= 16")
        precondition(maxTries >= 1)
        self.capacity = capacity
        self.maxTries = maxTries
        minimumRetryIntervalNs = UInt64(max(0, minimumRetryInterval.inNanoseconds))
        mask = Int64(capacity - 1)
        missing = [Bool](repeating: false, count: capacity)
        lastSent = [UInt64](repeating: 0, count: capacity)
        tries = [UInt8](repeating: 0, count: capacity)
        exts = [Int64](repeating: -1, count: capacity)
    }

    /// Round-trip time measured from NACK to retransmission (smoothed, RFC 6298 style); nil before
    /// the first sample. A receive-only endpoint has no sender reports of its own to measure RTT
    /// with (RFC 3550 §6.4.1), so this is what paces its retries.
    public var roundTripEstimate: Duration? { roundTripEstimateNs > 0 ? .nanoseconds(Int64(roundTripEstimateNs)) : nil }
    /// `roundTripEstimate` in nanoseconds, 0 before the first sample.
    package private(set) var roundTripEstimateNs: Double = 0

    /// Missing packets being tracked.
    public private(set) var missingCount = 0

    /// Notes the arrival of extended sequence `ext` at `now`: packets skipped between the
    /// highest seen and `ext` become missing; a missing `ext` is recovered.
    public func packetArrived(_ ext: Int64, now: MonotonicTime) {
        let nowNs = now.nanoseconds
        if !started {
            started = true
            low = ext; high = ext + 1
            return
        }
        if ext >= high {
            if ext - high >= Int64(capacity) { clear(); started = true; low = ext; high = ext + 1; return }
            var e = high
            while e < ext {
                let s = Int(e & mask)
                if missing[s] { missingCount -= 1 }  // stale entry being reused
                exts[s] = e; missing[s] = true; lastSent[s] = 0; tries[s] = 0
                missingCount += 1
                counters.missing += 1
                e += 1
            }
            high = ext + 1
            if high - low > Int64(capacity) { forget(below: high - Int64(capacity)) }
        } else if ext >= low {
            let s = Int(ext & mask)
            if exts[s] == ext && missing[s] {
                missing[s] = false
                missingCount -= 1
                counters.recovered += 1
                // A packet asked for exactly once and answered: a round-trip sample (the request
                // and the retransmission, plus the sender's reaction time).
                if tries[s] == 1 && nowNs > lastSent[s] {
                    let sample = Double(nowNs - lastSent[s])
                    roundTripEstimateNs = roundTripEstimateNs == 0 ? sample : 0.875 * roundTripEstimateNs + 0.125 * sample
                }
            }
        }
    }

    /// Marks `ext`, just below the lowest sequence number tracked, as missing (the stream's first
    /// received packet did not start a frame: the packets before it were lost). Ignored when `ext`
    /// is not `low - 1` or the window is full.
    public func expectBefore(_ ext: Int64) {
        guard started, ext == low - 1, high - ext <= Int64(capacity) else { return }
        let s = Int(ext & mask)
        if missing[s] { missingCount -= 1 }
        exts[s] = ext; missing[s] = true; lastSent[s] = 0; tries[s] = 0
        missingCount += 1
        counters.missing += 1
        low = ext
    }

    /// Stops tracking everything below `ext` (the jitter buffer played or gave up on it).
    public func forget(below ext: Int64) {
        guard ext > low else { return }
        var e = low
        let end = min(ext, high)
        while e < end {
            let s = Int(e & mask)
            if exts[s] == e && missing[s] { missing[s] = false; missingCount -= 1 }
            e += 1
        }
        low = ext
        if high < low { high = low }
    }

    /// Appends to `out` the sequence numbers to request now (never asked, or asked more than
    /// `max(roundTrip, minimumRetryInterval)` ago) and marks them sent. Entries that used up
    /// `maxTries` are dropped and counted in `givenUp`; returns how many were given up in this call.
    @discardableResult
    public func collect(now: MonotonicTime, roundTrip: Duration, into out: inout [UInt16]) -> Int {
        let rttNs = UInt64(max(0, roundTrip.inNanoseconds))
        let nowNs = now.nanoseconds
        guard missingCount > 0 else { return 0 }
        let interval = max(rttNs, minimumRetryIntervalNs)
        var gaveUp = 0
        var e = low
        while e < high {
            let s = Int(e & mask)
            if exts[s] == e && missing[s] {
                if tries[s] == 0 || nowNs >= lastSent[s] + interval {
                    if Int(tries[s]) >= maxTries {
                        missing[s] = false
                        missingCount -= 1
                        counters.givenUp += 1
                        gaveUp += 1
                    } else {
                        tries[s] += 1
                        lastSent[s] = nowNs
                        out.append(UInt16(truncatingIfNeeded: e))
                        counters.requests += 1
                    }
                }
            }
            e += 1
        }
        return gaveUp
    }

    /// Forgets everything (a stream restart).
    public func clear() {
        for i in 0..<capacity { missing[i] = false; exts[i] = -1 }
        missingCount = 0
        started = false
    }
}
