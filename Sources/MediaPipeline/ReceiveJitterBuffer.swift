import Glibc
import MediaBase

/// Settings of a receive-side `RTPJitterBuffer`: memory bound and the range its adaptive target
/// delay may take. Thread rule: a value type. Cost: none.
public struct JitterBufferSettings: Sendable, Equatable {
    /// Packet slots (a power of two, 16...32768): packets more than this far ahead of the next one
    /// to play reset the buffer, so memory never exceeds `capacity * maxPacketSize` bytes.
    public var capacity: Int = 512
    /// Largest packet kept; larger ones are dropped and counted.
    public var maxPacketSize: Int = 1500
    /// Lowest target delay in milliseconds (the buffer never plays out earlier than this after a
    /// packet's arrival when waiting for a hole to fill).
    public var minimumDelayMilliseconds: Double = 10
    /// Highest target delay in milliseconds: the longest a hole is waited for, and the cap on the
    /// adaptive delay however large the measured jitter.
    public var maximumDelayMilliseconds: Double = 400
    /// The target delay is `jitterFactor` x the recent peak delay variation, plus the minimum.
    public var jitterFactor: Double = 1.0
    /// How fast the measured peak delay variation decays when the network calms down: it halves
    /// every `1 / peakDecayPerSecond` seconds (0.5: every 2 s).
    public var peakDecayPerSecond: Double = 0.5

    /// Default settings: 512 slots of 1500 B, 10...400 ms.
    public init() {}

    /// Settings with the given delay range.
    public init(
        capacity: Int = 512, maxPacketSize: Int = 1500, minimumDelayMilliseconds: Double = 10,
        maximumDelayMilliseconds: Double = 400
    ) {
        self.capacity = capacity
        self.maxPacketSize = maxPacketSize
        self.minimumDelayMilliseconds = minimumDelayMilliseconds
        self.maximumDelayMilliseconds = maximumDelayMilliseconds
    }
}

/// One packet held by an `RTPJitterBuffer`: a view of its bytes in the buffer's own storage plus
/// what the buffer knows about it. Valid until the next `insert` (which may reuse the slot).
/// Thread rule: the buffer's thread. Cost: none (a view).
public struct JitterBufferPacket {
    /// The whole RTP packet (header and payload), as received after SRTP, in the buffer's storage
    /// (the engine's own code; others use `withBytes`).
    package let bytes: UnsafeRawBufferPointer
    /// Size of the packet in bytes.
    public var byteCount: Int { bytes.count }
    /// Lends the whole packet to `body`; before the buffer's next `insert` only. Cost: none.
    public func withBytes<R, E: Error>(_ body: (RawSpan) throws(E) -> R) throws(E) -> R { try body(bytes.bytes) }
    /// RFC 3550 sequence number extended with its rollover count (A.1), starting near the first packet's.
    public let extendedSequence: Int64
    /// RTP timestamp.
    public let timestamp: UInt32
    /// When it arrived.
    public let arrival: MonotonicTime
    /// RTP sequence number.
    public var sequenceNumber: UInt16 { UInt16(truncatingIfNeeded: extendedSequence) }
}

/// A per-SSRC RTP jitter buffer: puts packets back in sequence order, removes duplicates, detects
/// gaps, drops what comes after its turn has passed, and measures delay variation to pick an
/// adaptive target delay between the configured minimum and maximum (RFC 3550 §6.4.1 / A.8 for the
/// interarrival jitter it also reports). Playout policy (when to give up on a hole, when to play
/// audio) belongs to the stream that owns it: `VideoReceiveStream`, `AudioReceiveStream`.
///
/// Storage is preallocated: `capacity` slots of `maxPacketSize` bytes indexed by extended sequence
/// number `& mask`, so memory is bounded and `insert` never allocates.
/// Thread rule: one owner thread. Cost: `insert` copies the packet once; the rest is O(1) except
/// `skipToNextPresent`/`forEachMissing` which walk at most `capacity` slots.
public final class RTPJitterBuffer {
    /// What `insert` did with a packet.
    public enum InsertResult: Equatable, Sendable {
        /// Kept, waiting its turn.
        case stored
        /// The same sequence number is already held or was already played: dropped.
        case duplicate
        /// Its turn passed (the buffer gave up on it or played past it): dropped.
        case late
        /// Larger than `maxPacketSize`: dropped.
        case tooLarge
        /// So far ahead, or (twice in sequence) so far behind, that the buffer restarted at this
        /// packet: everything held was discarded (a sender restart, RFC 3550 A.1).
        case reset
    }

    /// Counters since creation.
    public struct Counters: Sendable, Equatable {
        /// Packets inserted (stored or reset).
        public var stored = 0
        /// Duplicates dropped.
        public var duplicates = 0
        /// Late packets dropped.
        public var late = 0
        /// Oversized packets dropped.
        public var tooLarge = 0
        /// Restarts after a jump forward, or after two sequential packets far behind (a sender that
        /// restarted its sequence numbers).
        public var resets = 0
        /// Packets skipped as missing (`skipToNextPresent`).
        public var skipped = 0
        /// Packets handed out by `popNext`.
        public var played = 0
    }

    /// The settings.
    public let settings: JitterBufferSettings
    /// RTP clock rate of the stream (90 000 video, 48 000 Opus).
    public let clockRate: Int
    /// Counters.
    public private(set) var counters = Counters()

    private let mask: Int64
    private let storage: UnsafeMutableRawPointer
    private let lengths: UnsafeMutablePointer<Int>
    private let sequences: UnsafeMutablePointer<Int64>
    private let timestamps: UnsafeMutablePointer<UInt32>
    private let arrivals: UnsafeMutablePointer<UInt64>
    /// Next extended sequence number to play; nil before the first packet.
    public private(set) var next: Int64?
    /// Highest extended sequence number seen (the end of the window).
    public private(set) var highest: Int64 = 0
    /// Packets held.
    public private(set) var count = 0

    // Delay variation (RFC 3550 A.8 jitter and a decaying peak of the relative transit delay).
    private var lastTransitNs: Int64?
    private var jitterNs: Double = 0
    private var minTransitNs: Int64 = .max
    private var peakVariationNs: Double = 0
    private var lastPeakUpdateNs: UInt64 = 0
    private var unwrappedTimestamp: Int64 = 0
    private var lastTimestamp: UInt32 = 0
    /// RFC 3550 A.1 `bad_seq`: the extended sequence number that, arriving next, confirms that a
    /// packet far behind the window was the first of a restarted sender and not a stray.
    private var restartCandidate: Int64?

    /// Preallocates `capacity * maxPacketSize` bytes. Traps on a capacity that is not a power of two in 16...32768.
    public init(settings: JitterBufferSettings = JitterBufferSettings(), clockRate: Int) {
        precondition(
            settings.capacity >= 16 && settings.capacity <= 32768 && settings.capacity & (settings.capacity - 1) == 0,
            "jitter buffer capacity \(settings.capacity) must be a power of two in 16...32768")
        precondition(
            settings.minimumDelayMilliseconds >= 0 && settings.maximumDelayMilliseconds >= settings.minimumDelayMilliseconds,
            "jitter buffer delay range \(settings.minimumDelayMilliseconds)...\(settings.maximumDelayMilliseconds) ms is empty")
        precondition(clockRate > 0 && settings.maxPacketSize > 0)
        self.settings = settings
        self.clockRate = clockRate
        mask = Int64(settings.capacity - 1)
        storage = .allocate(byteCount: settings.capacity * settings.maxPacketSize, alignment: 64)
        lengths = .allocate(capacity: settings.capacity)
        lengths.initialize(repeating: 0, count: settings.capacity)
        sequences = .allocate(capacity: settings.capacity)
        sequences.initialize(repeating: -1, count: settings.capacity)
        timestamps = .allocate(capacity: settings.capacity)
        timestamps.initialize(repeating: 0, count: settings.capacity)
        arrivals = .allocate(capacity: settings.capacity)
        arrivals.initialize(repeating: 0, count: settings.capacity)
    }

    deinit {
        storage.deallocate(); lengths.deallocate(); sequences.deallocate()
        timestamps.deallocate(); arrivals.deallocate()
    }

    /// Bytes of packet storage (the memory bound).
    public var storageBytes: Int { settings.capacity * settings.maxPacketSize }

    /// RFC 3550 A.8 interarrival jitter, in seconds.
    public var jitterSeconds: Double { jitterNs / 1e9 }
    /// RFC 3550 A.8 interarrival jitter in RTP timestamp units (for report blocks).
    public var jitterTimestampUnits: UInt32 { UInt32(clamping: Int64(jitterNs * Double(clockRate) / 1e9)) }

    /// The adaptive target delay: the minimum plus `jitterFactor` x the recent peak of delay
    /// variation, capped at the maximum.
    public var targetDelay: Duration { .nanoseconds(Int64(targetDelayNs)) }

    /// `targetDelay` in nanoseconds.
    var targetDelayNs: UInt64 {
        let minNs = settings.minimumDelayMilliseconds * 1e6, maxNs = settings.maximumDelayMilliseconds * 1e6
        return UInt64(min(maxNs, minNs + settings.jitterFactor * peakVariationNs))
    }

    /// When a packet with RTP `timestamp` would arrive over the least-delayed path seen lately:
    /// the baseline that follows the sender's media clock, so times computed from it are spaced as
    /// the media was captured. Adding a delay that covers the delay variation (`targetDelay`)
    /// gives a playout time. Nil before the first packet was measured (and after a reset).
    /// Cost: a few operations.
    public func baselineArrival(forTimestamp timestamp: UInt32) -> MonotonicTime? {
        guard lastTransitNs != nil, minTransitNs != .max else { return nil }
        let unwrapped = unwrappedTimestamp + Int64(Int32(bitPattern: timestamp &- lastTimestamp))
        let t = unwrapped * 1_000_000_000 / Int64(clockRate) + minTransitNs
        return MonotonicTime(nanoseconds: t > 0 ? UInt64(t) : 0)
    }

    /// Extends a 16-bit sequence number to the one nearest the highest seen (RFC 3550 A.1).
    @inline(__always)
    public func extend(_ seq: UInt16) -> Int64 {
        let delta = Int64(Int16(bitPattern: seq &- UInt16(truncatingIfNeeded: highest)))
        return highest + delta
    }

    /// Stores one RTP packet (`bytes` is the whole packet) that arrived at `arrival`.
    public func insert(_ bytes: RawSpan, sequenceNumber seq: UInt16, timestamp: UInt32, arrival: MonotonicTime)
        -> InsertResult
    {
        bytes.withUnsafeBytes { insert($0, sequenceNumber: seq, timestamp: timestamp, arrival: arrival) }
    }

    /// `insert(_:sequenceNumber:timestamp:arrival:)` over a raw buffer, for the engine's own callers.
    package func insert(
        _ bytes: UnsafeRawBufferPointer, sequenceNumber seq: UInt16, timestamp: UInt32,
        arrival: MonotonicTime
    ) -> InsertResult {
        let arrivalNs = arrival.nanoseconds
        guard bytes.count <= settings.maxPacketSize, bytes.count > 0 else {
            counters.tooLarge += 1
            return .tooLarge
        }
        var result = InsertResult.stored
        let ext: Int64
        if let n = next {
            ext = extend(seq)
            if ext < n {
                if n - ext > mask + 1 {
                    // Further behind than the window can hold: no retransmission or reordering
                    // explains it. As RFC 3550 A.1 does, one such packet is dropped as late and
                    // remembered; if the next one follows it in sequence, the sender restarted
                    // behind us (same SSRC, new sequence numbers) and playout restarts there.
                    guard let candidate = restartCandidate, candidate == ext else {
                        restartCandidate = ext + 1
                        counters.late += 1
                        return .late
                    }
                    restart(at: ext, timestamp: timestamp)
                    result = .reset
                } else if counters.played == 0 && counters.skipped == 0 && highest - ext <= mask {
                    // Before anything played, an earlier packet moves the start back (the first
                    // packets of a stream may arrive reordered too).
                    next = ext
                } else {
                    counters.late += 1
                    return .late
                }
            }
            if ext >= n + mask + 1 {
                // A jump beyond the window: the sender restarted or we fell hopelessly behind.
                reset()
                next = ext
                highest = ext
                counters.resets += 1
                result = .reset
            }
            restartCandidate = nil
        } else {
            ext = 65536 + Int64(seq)  // start in cycle 1 so that reordered predecessors stay positive
            next = ext
            highest = ext
            if lastTransitNs == nil { lastTimestamp = timestamp; unwrappedTimestamp = 0 }
        }
        let slot = Int(ext & mask)
        if sequences[slot] == ext && lengths[slot] > 0 {
            counters.duplicates += 1
            return .duplicate
        }
        if lengths[slot] > 0 { count -= 1 }  // stale occupant (cannot happen inside the window)
        (storage + slot * settings.maxPacketSize).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        lengths[slot] = bytes.count
        sequences[slot] = ext
        timestamps[slot] = timestamp
        arrivals[slot] = arrivalNs
        count += 1
        if ext > highest { highest = ext }
        counters.stored += 1
        measure(timestamp: timestamp, arrivalNs: arrivalNs)
        return result
    }

    /// Starts over at `ext` after a sender restart detected behind the window: drops what is held
    /// and the transit-time baseline (the restarted sender's RTP timestamps start anywhere), keeps
    /// the measured jitter.
    private func restart(at ext: Int64, timestamp: UInt32) {
        reset()
        next = ext
        highest = ext
        counters.resets += 1
        lastTransitNs = nil
        minTransitNs = .max
        lastTimestamp = timestamp
        unwrappedTimestamp = 0
    }

    /// Updates RFC 3550 A.8 jitter and the peak of relative transit delay from one arrival.
    private func measure(timestamp: UInt32, arrivalNs: UInt64) {
        // Unwrap the RTP timestamp relative to the first one (RFC 3550 timestamps wrap at 2^32).
        let delta = Int64(Int32(bitPattern: timestamp &- lastTimestamp))
        let unwrapped = unwrappedTimestamp + delta
        if delta > 0 { unwrappedTimestamp = unwrapped; lastTimestamp = timestamp }
        let mediaNs = unwrapped * 1_000_000_000 / Int64(clockRate)
        let transit = Int64(bitPattern: arrivalNs) - mediaNs
        if let last = lastTransitNs {
            let dd = Double(abs(transit - last))
            jitterNs += (dd - jitterNs) / 16
        }
        lastTransitNs = transit
        if transit < minTransitNs { minTransitNs = transit }
        // Decay the peak with time, then take the new variation if larger.
        var elapsedNs: UInt64 = 0
        if lastPeakUpdateNs != 0 && arrivalNs > lastPeakUpdateNs {
            elapsedNs = arrivalNs - lastPeakUpdateNs
            let dt = Double(elapsedNs) / 1e9
            peakVariationNs *= pow2(-dt * settings.peakDecayPerSecond)
        }
        lastPeakUpdateNs = arrivalNs
        let variation = Double(transit - minTransitNs)
        if variation > peakVariationNs { peakVariationNs = variation }
        // Let the baseline creep up so that clock drift does not inflate the variation forever:
        // 1 us per packet plus 0.2 % of the time elapsed, more than the 0.1 % by which a sender's
        // clock may run slow (its transit time then grows by 1 ms a second).
        minTransitNs += 1_000 + Int64(min(elapsedNs, 1_000_000_000) / 500)
    }

    @inline(__always) private func pow2(_ x: Double) -> Double { exp2(x) }

    /// The packet with extended sequence `ext`, if held.
    public func packet(at ext: Int64) -> JitterBufferPacket? {
        let slot = Int(ext & mask)
        guard lengths[slot] > 0, sequences[slot] == ext else { return nil }
        return JitterBufferPacket(
            bytes: UnsafeRawBufferPointer(start: storage + slot * settings.maxPacketSize, count: lengths[slot]),
            extendedSequence: ext, timestamp: timestamps[slot], arrival: MonotonicTime(nanoseconds: arrivals[slot]))
    }

    /// The next packet in sequence order, if it is here (without removing it).
    public var peekNext: JitterBufferPacket? {
        guard let n = next else { return nil }
        return packet(at: n)
    }

    /// Removes and returns the next packet in sequence order when it is here; nil when the next
    /// one is missing (a hole) or the buffer is empty. The view is valid until the next `insert`.
    public func popNext() -> JitterBufferPacket? {
        guard let n = next, let p = packet(at: n) else { return nil }
        lengths[Int(n & mask)] = 0
        count -= 1
        next = n + 1
        counters.played += 1
        return p
    }

    /// True when the next packet to play is missing while later ones are held.
    public var hasHole: Bool { next != nil && count > 0 && peekNext == nil }

    /// The first held packet after the next one (nil when none): where playout resumes past a hole.
    public func firstPresent() -> JitterBufferPacket? {
        guard let n = next, count > 0 else { return nil }
        var e = n
        while e <= highest {
            if let p = packet(at: e) { return p }
            e += 1
        }
        return nil
    }

    /// Gives up on the missing packets before the first held one: they become late. Returns how
    /// many were skipped.
    @discardableResult
    public func skipToNextPresent() -> Int {
        guard let n = next, let p = firstPresent() else { return 0 }
        let skipped = Int(p.extendedSequence - n)
        next = p.extendedSequence
        counters.skipped += skipped
        return skipped
    }

    /// Before anything played, moves the start back by one sequence number, so that the packet
    /// before the first one received becomes a hole to wait for (and NACK): for a stream whose
    /// first received packet does not start a frame, the packets that did were lost. Returns the
    /// new missing extended sequence number, or nil once anything played or was skipped, or when
    /// the window is full.
    public func extendStartBack() -> Int64? {
        guard let n = next, counters.played == 0, counters.skipped == 0, highest - (n - 1) <= mask, n > 0 else { return nil }
        next = n - 1
        return n - 1
    }

    /// Gives up on one packet (the next): it becomes late. For audio, which plays in time order.
    public func skipOne() {
        guard let n = next else { return }
        if packet(at: n) != nil { lengths[Int(n & mask)] = 0; count -= 1 }
        next = n + 1
        counters.skipped += 1
    }

    /// Calls `body` with every missing extended sequence number between the next one and the highest.
    public func forEachMissing(_ body: (Int64) -> Void) {
        guard let n = next else { return }
        var e = n
        while e < highest {
            if packet(at: e) == nil { body(e) }
            e += 1
        }
    }

    /// Media duration held from the next packet to the highest, in RTP timestamp units (0 when empty).
    public var bufferedTimestampSpan: UInt32 {
        guard let first = peekNext ?? firstPresent(), let last = packet(at: highest) else { return 0 }
        let d = last.timestamp &- first.timestamp
        return d < 0x8000_0000 ? d : 0
    }

    /// Discards everything held; the next insert starts afresh.
    public func reset() {
        for i in 0..<settings.capacity { lengths[i] = 0; sequences[i] = -1 }
        count = 0
        next = nil
    }
}
