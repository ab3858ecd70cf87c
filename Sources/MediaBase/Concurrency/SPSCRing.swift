import Synchronization

/// A bounded lock-free FIFO for exactly one producer thread and one consumer thread. Its user is
/// `ReceiveAudioStream`: received Opus packets go from the network thread to the playout thread in
/// pre-allocated slots (one ring of filled slots, one of free ones). The send pipeline's stages use
/// `MPSCRing`.
///
/// Capacity is a power of two fixed at `init`; the ring never grows. Slots are addressed with
/// `index & mask`; `head` (next to pop) and `tail` (next to push) are free-running `UInt64`
/// counters, published with releasing stores and read with acquiring loads, so an element written
/// before `tryPush` is fully visible to the thread whose `tryPop` returns it. Storage is a
/// pre-initialised array of `Optional<Element>`, so push and pop never allocate.
///
/// Thread rule: `tryPush` from one thread at a time, `tryPop` (and `peekCount`) from one other
/// thread at a time; `count` is an estimate from anywhere. Cost: a few loads and one store each.
@usableFromInline package final class SPSCRing<Element> {
    /// Number of slots (a power of two).
    @usableFromInline package let capacity: Int
    @usableFromInline let mask: UInt64
    @usableFromInline let slots: UnsafeMutablePointer<Element?>

    // Consumer-owned line: `head` plus the consumer's cached copy of `tail`.
    @usableFromInline let head: Atomic<UInt64>
    @exclusivity(unchecked) @usableFromInline var cachedTail: UInt64
    private let padding0: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0)
    // Producer-owned line: `tail` plus the producer's cached copy of `head`.
    @usableFromInline let tail: Atomic<UInt64>
    @exclusivity(unchecked) @usableFromInline var cachedHead: UInt64
    private let padding1: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0)

    /// Creates an empty ring. `capacity` must be a power of two >= 2 (a programmer error otherwise).
    /// Cost: one allocation of `capacity` slots.
    package convenience init(capacity: Int) {
        self.init(capacity: capacity, startIndex: 0)
    }

    /// Creates an empty ring whose counters start at `startIndex`, so tests can reach every
    /// wrap-around of the `UInt64` counters quickly.
    package init(capacity: Int, startIndex: UInt64) {
        precondition(
            capacity >= 2 && capacity & (capacity - 1) == 0 && capacity <= 1 << 30,
            "SPSCRing capacity \(capacity) must be a power of two in 2...2^30")
        self.capacity = capacity
        mask = UInt64(capacity - 1)
        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: nil, count: capacity)
        head = Atomic(startIndex)
        tail = Atomic(startIndex)
        cachedTail = startIndex
        cachedHead = startIndex
    }

    deinit {
        slots.deinitialize(count: capacity)
        slots.deallocate()
    }

    /// Appends `element` if there is room. Returns false (and keeps nothing) when the ring is full;
    /// never blocks. Producer thread only.
    @inlinable
    package func tryPush(_ element: Element) -> Bool {
        let t = tail.load(ordering: .relaxed)  // only this thread stores `tail`
        if t &- cachedHead >= UInt64(capacity) {
            cachedHead = head.load(ordering: .acquiring)  // the consumer released that slot
            if t &- cachedHead >= UInt64(capacity) { return false }
        }
        slots[Int(truncatingIfNeeded: t & mask)] = element
        tail.store(t &+ 1, ordering: .releasing)  // publishes the element
        return true
    }

    /// Removes and returns the oldest element, or nil when the ring is empty; never blocks.
    /// Consumer thread only.
    @inlinable
    package func tryPop() -> Element? {
        let h = head.load(ordering: .relaxed)  // only this thread stores `head`
        if h == cachedTail {
            cachedTail = tail.load(ordering: .acquiring)  // sees the producer's element writes
            if h == cachedTail { return nil }
        }
        let element = slots[Int(truncatingIfNeeded: h & mask)].take()
        head.store(h &+ 1, ordering: .releasing)  // hands the slot back to the producer
        return element
    }

    /// Elements waiting: exact on the consumer thread (it may only grow), an estimate elsewhere.
    @inlinable
    package var count: Int {
        let h = head.load(ordering: .acquiring)
        let t = tail.load(ordering: .acquiring)
        return Int(truncatingIfNeeded: min(t &- h, UInt64(capacity)))
    }

    /// Whether the ring looks empty (exact on the consumer thread).
    @inlinable
    package var isEmpty: Bool { count == 0 }
}

/// The ring hands elements from one thread to another, so it is Sendable only when its elements
/// are. Unchecked because the slots live behind a raw pointer; the acquire/release protocol on
/// `head` and `tail` (above) is what makes a slot visible to exactly one thread at a time.
/// Sendable: `head`/`tail` are atomics; `cachedHead` belongs to the producer, `cachedTail` to the consumer.
extension SPSCRing: @unchecked Sendable where Element: Sendable {}
