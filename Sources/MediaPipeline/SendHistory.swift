import MediaBase

/// The packets a sender sent recently, kept so that a generic NACK (RFC 4585 §6.2.1) can be
/// answered by resending them.
///
/// A send stream stores packets as sent on the wire (already SRTP-protected), so a plain
/// retransmission costs a copy and a send, not a second encryption; the receiver accepts it because
/// its replay window never saw the lost original. With RFC 4588 RTX the stream stores them
/// unprotected instead and protects each retransmission anew on the RTX SSRC. Storage is preallocated: `capacity` slots (a power of two) of
/// `maxPacketSize` bytes each, indexed by sequence number `& mask`, so a store never allocates.
/// A packet also expires after `maxAgeNs`, so a NACK for stale media is refused.
/// Thread rule: owned by one thread (the send worker); NACKs reach it through a ring.
/// Cost: `store` copies the packet once; `lookup` is O(1).
public final class SendHistory {
    /// Number of packets kept (a power of two).
    public let capacity: Int
    /// Largest packet that fits in a slot.
    public let maxPacketSize: Int
    /// Packets older than this are not retransmitted.
    public var maxAge: Duration { .nanoseconds(maxAgeNs) }
    private let maxAgeNs: Int64

    private let mask: Int
    private let storage: UnsafeMutableRawPointer
    private var lengths: [Int]
    private var sequence: [UInt16]
    private var sentAt: [UInt64]
    private var retransmissions: [UInt8]

    /// Creates a history; allocates `capacity * maxPacketSize` bytes once.
    public init(capacity: Int = 1024, maxPacketSize: Int = 1500, maxAge: Duration = .seconds(1)) {
        precondition(
            capacity > 0 && capacity & (capacity - 1) == 0 && capacity <= 32768,
            "SendHistory capacity must be a power of two up to 32768")
        precondition(maxPacketSize > 0)
        self.capacity = capacity
        self.maxPacketSize = maxPacketSize
        maxAgeNs = maxAge.inNanoseconds
        mask = capacity - 1
        storage = UnsafeMutableRawPointer.allocate(byteCount: capacity * maxPacketSize, alignment: 64)
        lengths = [Int](repeating: 0, count: capacity)
        sequence = [UInt16](repeating: 0, count: capacity)
        sentAt = [UInt64](repeating: 0, count: capacity)
        retransmissions = [UInt8](repeating: 0, count: capacity)
    }

    deinit { storage.deallocate() }

    /// Keeps a copy of a sent packet with RTP sequence number `seq`, replacing whatever used its
    /// slot, sent at `now`. Packets larger than `maxPacketSize` are not kept (returns false).
    @discardableResult
    package func store(seq: UInt16, packet: UnsafeRawBufferPointer, now: MonotonicTime) -> Bool {
        let slot = Int(seq) & mask
        guard packet.count <= maxPacketSize, let base = packet.baseAddress else {
            lengths[slot] = 0
            return false
        }
        (storage + slot * maxPacketSize).copyMemory(from: base, byteCount: packet.count)
        lengths[slot] = packet.count
        sequence[slot] = seq
        sentAt[slot] = now.nanoseconds
        retransmissions[slot] = 0
        return true
    }

    /// Lends the stored bytes of `seq` to `body` without counting a retransmission (a sender's
    /// probe resending recent media as padding); false when it is not held. Thread rule and cost
    /// as `retransmitStored`.
    package func peek(seq: UInt16, _ body: (UnsafeRawBufferPointer) -> Void) -> Bool {
        let slot = Int(seq) & mask
        guard lengths[slot] > 0, sequence[slot] == seq else { return false }
        body(UnsafeRawBufferPointer(start: storage + slot * maxPacketSize, count: lengths[slot]))
        return true
    }

    /// What a NACK lookup found.
    public enum Lookup: Equatable {
        /// The packet is available; it has now been retransmitted `count` times.
        case found(count: Int)
        /// The packet was never stored or was overwritten by a later one.
        case missing
        /// The packet is older than `maxAgeNs`.
        case expired
        /// The packet was already retransmitted `maxRetransmissions` times.
        case exhausted
    }

    /// Looks up `seq` for retransmission at `now`; when found, calls `body` with the stored bytes
    /// (valid only inside it) and counts the retransmission.
    public func retransmit(seq: UInt16, now: MonotonicTime, maxRetransmissions: Int = 3, _ body: (RawSpan) -> Void)
        -> Lookup
    {
        retransmitStored(seq: seq, now: now, maxRetransmissions: maxRetransmissions) {
            body($0.bytes)
            return true
        }
    }

    /// `retransmit(seq:now:maxRetransmissions:_:)` lending a raw buffer, for the engine's own
    /// callers; `body` returns false when it did not resend (a rate limit), which does not count
    /// as one of the packet's retransmissions.
    package func retransmitStored(
        seq: UInt16, now: MonotonicTime, maxRetransmissions: Int = 3,
        _ body: (UnsafeRawBufferPointer) -> Bool
    ) -> Lookup {
        let slot = Int(seq) & mask
        guard lengths[slot] > 0, sequence[slot] == seq else { return .missing }
        guard now.nanoseconds(since: MonotonicTime(nanoseconds: sentAt[slot])) <= maxAgeNs else { return .expired }
        guard Int(retransmissions[slot]) < maxRetransmissions else { return .exhausted }
        retransmissions[slot] &+= 1
        if !body(UnsafeRawBufferPointer(start: storage + slot * maxPacketSize, count: lengths[slot])) {
            retransmissions[slot] &-= 1
        }
        return .found(count: Int(retransmissions[slot]))
    }

    /// Forgets every packet (e.g. after a stream restart).
    public func removeAll() {
        for i in 0..<capacity { lengths[i] = 0 }
    }
}

extension SendHistory {
    /// Keeps a copy of a sent packet with RTP sequence number `seq`, replacing whatever used its
    /// slot, sent at `now`. Packets larger than `maxPacketSize` are not kept (returns false).
    @discardableResult
    public func store(seq: UInt16, packet: RawSpan, now: MonotonicTime) -> Bool {
        packet.withUnsafeBytes { store(seq: seq, packet: $0, now: now) }
    }
}
