// The bookkeeping a rendezvous node bounds strangers with: token buckets (per source, per
// registration, in total) and per-network counts that know their heaviest network, so a full
// node can make room by evicting from it.
internal import MediaCore

/// One token bucket: tokens refill at a rate up to a burst. Value type, no allocation; O(1).
struct TokenBucket {
    private(set) var tokens: Double
    private(set) var at: MonotonicTime

    /// A full bucket (`burst` tokens) at `now`.
    init(burst: Double, now: MonotonicTime) {
        tokens = burst
        at = now
    }

    /// Adds what `rate` refilled since the last call, up to `burst`.
    mutating func refill(now: MonotonicTime, rate: Double, burst: Double) {
        tokens = min(burst, tokens + max(0, (now - at).inSeconds) * rate)
        at = now
    }

    /// Whether a token is there to take.
    var hasToken: Bool { tokens >= 1 }

    /// Takes one token. Precondition: `hasToken`.
    mutating func spend() { tokens -= 1 }

    /// Refills, then takes a token when there is one; whether it took one.
    mutating func take(now: MonotonicTime, rate: Double, burst: Double) -> Bool {
        refill(now: now, rate: rate, burst: burst)
        guard hasToken else { return false }
        spend()
        return true
    }
}

/// Token buckets per source key (`SocketAddress.sourceKey`) beside one bucket for all sources,
/// with at most `maxSources` per-source buckets: a full table refuses sources it has no bucket
/// for until `sweep` drops idle ones. Value type; O(1) per `take`, O(sources) per `sweep`.
struct RateLimiter {
    let rate: Double
    let burst: Double
    let ratePerSource: Double
    let burstPerSource: Double
    let maxSources: Int
    private var total: TokenBucket
    private var sources: [UInt64: TokenBucket] = [:]

    /// Buckets that start full at `now`.
    init(rate: Double, burst: Double, ratePerSource: Double, burstPerSource: Double, maxSources: Int, now: MonotonicTime) {
        self.rate = rate
        self.burst = burst
        self.ratePerSource = ratePerSource
        self.burstPerSource = burstPerSource
        self.maxSources = maxSources
        total = TokenBucket(burst: burst, now: now)
    }

    /// Per-source buckets held now.
    var sourceCount: Int { sources.count }

    /// Takes a token from `source`'s bucket and from the total one, or from neither; whether it
    /// took them.
    mutating func take(_ source: UInt64, now: MonotonicTime) -> Bool {
        total.refill(now: now, rate: rate, burst: burst)
        guard sources.count < maxSources || sources[source] != nil else { return false }
        var bucket = sources[source] ?? TokenBucket(burst: burstPerSource, now: now)
        bucket.refill(now: now, rate: ratePerSource, burst: burstPerSource)
        defer { sources[source] = bucket }
        guard bucket.hasToken, total.hasToken else { return false }
        bucket.spend()
        total.spend()
        return true
    }

    /// Drops the per-source buckets that have been idle long enough to be full again.
    mutating func sweep(now: MonotonicTime) {
        let idle = burstPerSource / ratePerSource
        sources = sources.filter { (now - $0.value.at).inSeconds < idle }
    }
}

/// How much each network holds (entries or tags), keyed by a network key (`prefixKey`,
/// `widePrefixKey`), with the heaviest network at hand and the bulk: the sum, over networks, of
/// what each holds beyond its first `smallShare` (what networks with few entries never add to).
/// Value type; `add` is O(1) amortised (the heaviest count is kept by count buckets).
struct NetworkLoad {
    /// What a network holds before the rest counts as bulk.
    let smallShare: Int
    private(set) var counts: [UInt64: Int] = [:]
    /// Networks by what they hold (only counts above zero), in the order they reached that count.
    private var byCount: [Int: ArrivalOrder<UInt64>] = [:]
    /// The largest count held by a network (0 when none holds anything).
    private(set) var maxCount = 0
    /// The sum of all counts.
    private(set) var total = 0
    /// The sum over networks of `max(0, count - smallShare)`.
    private(set) var bulk = 0

    init(smallShare: Int) { self.smallShare = smallShare }

    /// What `network` holds.
    subscript(_ network: UInt64) -> Int { counts[network, default: 0] }

    /// The network that first reached `maxCount` of those holding it (nil when none holds anything).
    var heaviest: UInt64? { maxCount > 0 ? byCount[maxCount]?.first : nil }

    /// Changes what `network` holds by `delta` (negative to release; never below zero).
    mutating func add(_ network: UInt64, _ delta: Int) {
        let old = counts[network, default: 0]
        let new = max(0, old + delta)
        guard new != old else { return }
        if old > 0 {
            byCount[old]?.remove(network)
            if byCount[old]?.isEmpty == true { byCount[old] = nil }
        }
        if new > 0 {
            byCount[new, default: ArrivalOrder()].append(network)
            counts[network] = new
        } else {
            counts[network] = nil
        }
        total += new - old
        bulk += max(0, new - smallShare) - max(0, old - smallShare)
        if new > maxCount {
            maxCount = new
        } else {
            while maxCount > 0 && byCount[maxCount] == nil { maxCount -= 1 }
        }
    }
}
