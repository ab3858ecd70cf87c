import MediaCore

/// Decides what a lossy network does to each packet: drop it, or deliver it (once or twice) at a
/// later time. Pure and deterministic: the same settings, seed and arrivals give the same
/// decisions (xoshiro256** seeded through splitmix64, never the system generator). The
/// `ImpairmentRelay` runs one per direction; tests can run it without sockets.
///
/// Stages, in order: loss (random, or Gilbert bursts) -> rate limit (a link of `rateBitsPerSecond`
/// with a tail-drop queue of `queueLimitMilliseconds`) -> fixed delay + uniform jitter (order is
/// kept, as in a queue: a packet never leaves before the one in front of it) -> reordering (a
/// chosen packet is held `reorderDelayMilliseconds` longer, so later packets overtake it) ->
/// duplication (a second copy at the same time, right after the first).
///
/// Thread rule: a value type; one thread mutates it. Cost: a few arithmetic operations and up to
/// five random draws per packet; no allocation.
package struct ImpairmentModel: Sendable {
    /// What to do to packets. Probabilities are fractions (0.02 = 2 %); durations in milliseconds.
    /// The fields map 1:1 to `revue-media relay` options.
    package struct Settings: Sendable, Equatable {
        /// `--loss P`: share of packets lost.
        package var loss: Double = 0
        /// `--burst N`: mean length of a loss burst in packets. At most 1: independent (Bernoulli)
        /// losses. Above 1: a Gilbert model whose bad state lasts `burst` packets on average and
        /// whose long-run loss is `loss`.
        package var burst: Double = 1
        /// `--delay MS`: fixed one-way delay.
        package var delayMilliseconds: Double = 0
        /// `--jitter MS`: each packet's delay varies uniformly within ±jitter (never below zero,
        /// and never ahead of the packet in front of it).
        package var jitterMilliseconds: Double = 0
        /// `--reorder P`: share of packets held back so that later ones overtake them.
        package var reorder: Double = 0
        /// `--reorder-delay MS`: how long a reordered packet is held beyond its normal time.
        package var reorderDelayMilliseconds: Double = 20
        /// `--duplicate P`: share of packets delivered twice.
        package var duplicate: Double = 0
        /// `--rate BPS`: link rate in bits per second, counting UDP payload bytes x 8 (headers are
        /// not counted); 0 means unlimited.
        package var rateBitsPerSecond: Int = 0
        /// `--queue MS`: longest wait in the rate limiter's queue; a packet that would wait longer
        /// is dropped (tail drop). Only used with a rate limit.
        package var queueLimitMilliseconds: Double = 100

        /// No impairment.
        package init() {}

        /// Settings from their option values; every argument defaults to "no impairment".
        package init(
            loss: Double = 0, burst: Double = 1, delayMilliseconds: Double = 0,
            jitterMilliseconds: Double = 0, reorder: Double = 0, reorderDelayMilliseconds: Double = 20,
            duplicate: Double = 0, rateBitsPerSecond: Int = 0, queueLimitMilliseconds: Double = 100
        ) {
            self.loss = loss
            self.burst = burst
            self.delayMilliseconds = delayMilliseconds
            self.jitterMilliseconds = jitterMilliseconds
            self.reorder = reorder
            self.reorderDelayMilliseconds = reorderDelayMilliseconds
            self.duplicate = duplicate
            self.rateBitsPerSecond = rateBitsPerSecond
            self.queueLimitMilliseconds = queueLimitMilliseconds
        }

        /// True when the settings change nothing.
        package var isTransparent: Bool {
            loss == 0 && delayMilliseconds == 0 && jitterMilliseconds == 0 && reorder == 0
                && duplicate == 0 && rateBitsPerSecond == 0
        }

        /// Why the settings are unusable, or nil when they are fine.
        package var problem: String? {
            func fraction(_ v: Double) -> Bool { v >= 0 && v <= 1 }
            if !fraction(loss) { return "loss \(loss) is not a fraction in 0...1" }
            if !fraction(reorder) { return "reorder \(reorder) is not a fraction in 0...1" }
            if !fraction(duplicate) { return "duplicate \(duplicate) is not a fraction in 0...1" }
            if !(burst >= 0) || !burst.isFinite { return "burst \(burst) must be a finite number >= 0" }
            if burst > 1 && loss >= 1 { return "burst loss needs loss below 1" }
            for (name, v) in [
                ("delay", delayMilliseconds), ("jitter", jitterMilliseconds),
                ("reorder delay", reorderDelayMilliseconds), ("queue", queueLimitMilliseconds),
            ]
            where !(v >= 0) || !v.isFinite {
                return "\(name) \(v) ms must be a finite number >= 0"
            }
            if rateBitsPerSecond < 0 { return "rate \(rateBitsPerSecond) bit/s must be >= 0" }
            return nil
        }
    }

    /// Why a packet was dropped.
    package enum DropReason: Sendable, Equatable {
        /// Random or burst loss.
        case loss
        /// The rate limiter's queue was full (tail drop).
        case queue
    }

    /// The fate of one packet. Times are in the caller's clock (nanoseconds, like the arrival).
    package enum Decision: Sendable, Equatable {
        /// The packet is lost.
        case drop(DropReason)
        /// Deliver once at this time.
        case deliver(at: UInt64)
        /// Deliver at `at`, then a copy right after it at `duplicateAt` (the same time).
        case deliverTwice(at: UInt64, duplicateAt: UInt64)
    }

    /// What the model has decided so far.
    package struct Counters: Sendable, Equatable {
        /// Packets offered.
        package var packets = 0
        /// Bytes offered.
        package var bytes = 0
        /// Packets dropped by loss.
        package var lost = 0
        /// Packets dropped by the rate limiter's queue.
        package var queueDropped = 0
        /// Packets delivered (a duplicated packet counts once here).
        package var delivered = 0
        /// Extra copies made.
        package var duplicated = 0
        /// Packets held back so that later ones overtake them.
        package var reordered = 0
        /// Loss bursts started (a run of consecutive losses counts once).
        package var lossBursts = 0
    }

    /// The settings in use.
    package let settings: Settings
    /// Decisions so far.
    package private(set) var counters = Counters()

    private var random: SeededGenerator
    private let goodToBad: Double  // Gilbert: P(enter the bad state) per packet
    private let badToGood: Double  // Gilbert: P(leave the bad state) per packet
    private var inBadState = false
    private var lastWasLost = false
    private var linkFreeAt: UInt64 = 0  // rate limiter: when the link finishes its queue
    private var lastInOrderDelivery: UInt64 = 0
    private let delayNs: Double
    private let jitterNs: Double
    private let reorderDelayNs: UInt64
    private let queueLimitNs: UInt64

    /// A model with `settings` and `seed`. Invalid settings trap: check `settings.problem` first
    /// for values that come from a user.
    package init(settings: Settings, seed: UInt64) {
        if let problem = settings.problem { preconditionFailure("ImpairmentModel: \(problem)") }
        self.settings = settings
        random = SeededGenerator(seed: seed)
        if settings.burst > 1 {
            badToGood = 1 / settings.burst
            goodToBad = settings.loss * badToGood / (1 - settings.loss)
        } else {
            badToGood = 1
            goodToBad = settings.loss
        }
        delayNs = settings.delayMilliseconds * 1e6
        jitterNs = settings.jitterMilliseconds * 1e6
        reorderDelayNs = UInt64(settings.reorderDelayMilliseconds * 1e6)
        queueLimitNs = UInt64(settings.queueLimitMilliseconds * 1e6)
    }

    /// Decides the fate of a packet of `size` bytes arriving at `arrival` (nanoseconds; arrivals
    /// must not go backwards).
    package mutating func decide(arrival: UInt64, size: Int) -> Decision {
        decide(arrival: arrival, size: size, applyingLoss: true)
    }

    /// `decide(arrival:size:)` with the loss stage skipped when `applyingLoss` is false: the
    /// relay's per-stream mode draws each stream's losses from the stream's own model
    /// (`drawLoss()`) and lets this one do the rest.
    package mutating func decide(arrival: UInt64, size: Int, applyingLoss: Bool) -> Decision {
        counters.packets += 1
        counters.bytes += size

        // 1. Loss.
        if applyingLoss && drawLoss() { return .drop(.loss) }

        // 2. Rate limit: a link serialising bytes at the configured rate behind a bounded queue.
        var departure = arrival
        if settings.rateBitsPerSecond > 0 {
            let start = max(arrival, linkFreeAt)
            if start - arrival > queueLimitNs {
                counters.queueDropped += 1
                return .drop(.queue)
            }
            let serialisation = UInt64(size) * 8 * 1_000_000_000 / UInt64(settings.rateBitsPerSecond)
            linkFreeAt = start + serialisation
            departure = linkFreeAt
        }

        // 3. Delay and jitter, keeping order.
        var offset = delayNs
        if jitterNs > 0 { offset += (random.nextUnitInterval() * 2 - 1) * jitterNs }
        var delivery = departure + UInt64(max(0, offset).rounded())

        // 4. Reordering: hold this packet back without moving the in-order floor.
        if settings.reorder > 0 && random.nextUnitInterval() < settings.reorder {
            counters.reordered += 1
            delivery = max(delivery, lastInOrderDelivery) + reorderDelayNs
        } else {
            delivery = max(delivery, lastInOrderDelivery)
            lastInOrderDelivery = delivery
        }
        counters.delivered += 1

        // 5. Duplication.
        if settings.duplicate > 0 && random.nextUnitInterval() < settings.duplicate {
            counters.duplicated += 1
            return .deliverTwice(at: delivery, duplicateAt: delivery)
        }
        return .deliver(at: delivery)
    }

    /// The loss stage alone: whether the next packet is lost (random or in a Gilbert burst).
    /// Counts the loss and its burst in `counters`, but not the packet.
    package mutating func drawLoss() -> Bool {
        guard isLost() else {
            lastWasLost = false
            return false
        }
        if !lastWasLost { counters.lossBursts += 1 }
        lastWasLost = true
        counters.lost += 1
        return true
    }

    private mutating func isLost() -> Bool {
        guard settings.loss > 0 else { return false }
        if settings.burst <= 1 { return random.nextUnitInterval() < settings.loss }
        // Gilbert model: the state for this packet, then lose it when bad.
        if inBadState {
            if random.nextUnitInterval() < badToGood { inBadState = false }
        } else {
            if random.nextUnitInterval() < goodToBad { inBadState = true }
        }
        return inBadState
    }
}
