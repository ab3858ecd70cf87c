import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A bounded lock-free FIFO that many producer threads push into and one consumer drains: the
/// hand-off from `capture()` callers (any thread, several at once) to an encode worker. It is also
/// the free list of the frame pools, where several threads pop.
///
/// The algorithm is Dmitry Vyukov's bounded MPMC queue: each slot carries a sequence number that
/// says whose turn it is. A producer claims position `p` by compare-exchange on `tail` when slot
/// `p & mask` has sequence `p`, writes the element, then stores sequence `p + 1` (releasing); a
/// consumer claims position `p` on `head` when the sequence is `p + 1`, takes the element, then
/// stores `p + capacity` (releasing), handing the slot to the producer one lap later. Counters are
/// free-running `UInt64`s compared by wrapping difference. Because popping claims positions with
/// compare-exchange too, producers may pop: that is how `pushDroppingOldest` evicts the oldest
/// element without a lock. Storage is pre-initialised `Optional<Element>` slots: no allocation per
/// push or pop. A thread suspended between claiming a slot and publishing it makes that slot (and,
/// for the consumer, what follows it) look busy until it resumes; the calls return false/nil then
/// rather than wait.
///
/// Thread rule: every method may be called from any number of threads at once. Cost: one
/// compare-exchange and two or three atomic loads/stores per call when uncontended.
@usableFromInline package final class MPSCRing<Element> {
    /// Number of slots (a power of two).
    @usableFromInline package let capacity: Int
    @usableFromInline let mask: UInt64
    @usableFromInline let sequences: UnsafeMutablePointer<Atomic<UInt64>>
    @usableFromInline let slots: UnsafeMutablePointer<Element?>

    @usableFromInline let head: Atomic<UInt64>
    private let padding0: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0)
    @usableFromInline let tail: Atomic<UInt64>
    private let padding1: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0, 0)

    /// Creates an empty ring. `capacity` must be a power of two >= 2 (a programmer error otherwise).
    /// Cost: one allocation of `capacity` slots and sequence numbers.
    package convenience init(capacity: Int) {
        self.init(capacity: capacity, startIndex: 0)
    }

    /// Creates an empty ring whose counters start at `startIndex`, so tests can reach every
    /// wrap-around of the `UInt64` counters quickly.
    package init(capacity: Int, startIndex: UInt64) {
        precondition(
            capacity >= 2 && capacity & (capacity - 1) == 0 && capacity <= 1 << 30,
            "MPSCRing capacity \(capacity) must be a power of two in 2...2^30")
        self.capacity = capacity
        mask = UInt64(capacity - 1)
        sequences = .allocate(capacity: capacity)
        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: nil, count: capacity)
        // Slot i serves the first position p >= startIndex with p & mask == i.
        for i in 0..<capacity {
            let offset = (UInt64(i) &- startIndex) & UInt64(capacity - 1)
            (sequences + i).initialize(to: Atomic(startIndex &+ offset))
        }
        head = Atomic(startIndex)
        tail = Atomic(startIndex)
    }

    deinit {
        sequences.deinitialize(count: capacity)
        sequences.deallocate()
        slots.deinitialize(count: capacity)
        slots.deallocate()
    }

    /// Appends `element` if there is room. Returns false when the ring is full (the caller keeps
    /// `element`); never blocks. Any thread.
    ///
    /// With several consumers, "full" can be transient: a consumer that has claimed the slot one lap
    /// behind but not yet marked it free makes the slot look occupied. Owners that know the ring
    /// cannot really be full (a pool's free list) use `pushRetryingTransientFull`.
    @inlinable
    package func tryPush(_ element: Element) -> Bool {
        var position = tail.load(ordering: .relaxed)
        while true {
            let slot = Int(truncatingIfNeeded: position & mask)
            let sequence = sequences[slot].load(ordering: .acquiring)
            let lag = Int64(bitPattern: sequence &- position)
            if lag == 0 {
                let (exchanged, current) = tail.weakCompareExchange(
                    expected: position, desired: position &+ 1,
                    successOrdering: .relaxed, failureOrdering: .relaxed)
                if exchanged {
                    slots[slot] = element
                    sequences[slot].store(position &+ 1, ordering: .releasing)  // publish
                    return true
                }
                position = current
            } else if lag < 0 {
                return false  // the slot still holds the element from one lap ago: full
            } else {
                position = tail.load(ordering: .relaxed)  // another producer took it; retry
            }
        }
    }

    /// Pushes `element` into a ring that the caller knows has room (it holds fewer elements than
    /// `capacity` by construction), retrying while a concurrent pop finishes freeing the slot.
    /// Returns false only if the ring stayed full for `attempts` tries, which means the caller's
    /// invariant is broken (e.g. an element returned twice). Never allocates; may spin briefly.
    @inlinable
    package func pushRetryingTransientFull(_ element: Element, attempts: Int = 1_000_000) -> Bool {
        for attempt in 0..<attempts {
            if tryPush(element) { return true }
            if attempt >= 64 { sched_yield() }
        }
        return false
    }

    /// Removes and returns the oldest element, or nil when the ring is empty (or its oldest slot
    /// is still being written); never blocks. Any thread.
    @inlinable
    package func tryPop() -> Element? {
        var position = head.load(ordering: .relaxed)
        while true {
            let slot = Int(truncatingIfNeeded: position & mask)
            let sequence = sequences[slot].load(ordering: .acquiring)
            let lag = Int64(bitPattern: sequence &- (position &+ 1))
            if lag == 0 {
                let (exchanged, current) = head.weakCompareExchange(
                    expected: position, desired: position &+ 1,
                    successOrdering: .relaxed, failureOrdering: .relaxed)
                if exchanged {
                    let element = slots[slot].take()
                    sequences[slot].store(position &+ mask &+ 1, ordering: .releasing)  // free it
                    return element
                }
                position = current
            } else if lag < 0 {
                return nil  // not yet published: empty
            } else {
                position = head.load(ordering: .relaxed)  // another popper took it; retry
            }
        }
    }

    /// Pushes `element`; when the ring is full, first evicts the oldest waiting element and hands
    /// it to `dropped` (so the caller can recycle and count it), then pushes. If the ring is still
    /// full after one eviction (other producers refilled it, or the consumer is mid-pop), the new
    /// element itself goes to `dropped` instead of evicting more: at most two elements are dropped
    /// per call and the call never loops unboundedly. Returns whether `element` was enqueued.
    /// This is the video capture policy: latency beats completeness. Any thread; `dropped` runs on
    /// the calling thread before this returns. Cost: as `tryPush`, plus one `tryPop` when full.
    @inlinable @discardableResult
    package func pushDroppingOldest(_ element: Element, dropped: (Element) -> Void) -> Bool {
        if tryPush(element) { return true }
        if let oldest = tryPop() { dropped(oldest) }
        if tryPush(element) { return true }
        dropped(element)
        return false
    }

    /// Elements waiting (an estimate while other threads push or pop).
    @inlinable
    package var count: Int {
        let h = head.load(ordering: .acquiring)
        let t = tail.load(ordering: .acquiring)
        let n = Int64(bitPattern: t &- h)
        return Int(min(max(n, 0), Int64(capacity)))
    }

    /// Whether the ring looks empty (an estimate while other threads push or pop).
    @inlinable
    package var isEmpty: Bool { count == 0 }
}

/// The ring hands elements from one thread to another, so it is Sendable only when its elements
/// are. Unchecked because the slots live behind a raw pointer; the acquire/release protocol on
/// `head` and `tail` (above) is what makes a slot visible to exactly one thread at a time.
/// Sendable: `head`, `tail` and each slot's sequence number are atomics; everything else is set in init.
extension MPSCRing: @unchecked Sendable where Element: Sendable {}
