import MediaBase
import Synchronization

/// The transport-wide sequence number counter (draft-holmer-rmcat-transport-wide-cc-extensions-01
/// §2) that every send stream on one transport (one 5-tuple) shares, so the receiver's transport
/// feedback covers all of them in one sequence. Each packet takes the next number when it leaves
/// (media, retransmission), never when it is queued.
///
/// The counter also keeps the send log the sender's delay-based estimate needs: `take(sendTime:size:)`
/// records when each numbered packet left and how big it was, in a bounded table of
/// `sendLogCapacity` slots indexed by sequence number (the oldest entries are overwritten), and
/// `sent(_:)` looks one up when its feedback arrives.
/// Thread rule: any thread (atomics; several senders may take numbers at once, one reader looks
/// entries up). Cost: `take` is one atomic increment, plus three atomic stores and a fence when
/// logging; `sent` three atomic loads; no allocation after `init`.
/// Sendable: the counter and every log slot are atomics (a seqlock per slot) behind `let` pointers made in init;
/// nothing else changes after init.
public final class TransportSequenceNumbers: @unchecked Sendable {
    private let next: Atomic<UInt64>
    /// Number of send-log slots (a power of two; 0: no log).
    public let sendLogCapacity: Int
    private let mask: Int
    /// Per slot a seqlock-style tag (0 while being written, else
    /// `1 << 63 | seq << 32 | probeCluster << 16 | size`) and
    /// the send time. One writer per slot per lap: the thread that took that number.
    private let tags: UnsafeMutablePointer<Atomic<UInt64>>
    private let times: UnsafeMutablePointer<Atomic<UInt64>>

    /// A counter starting at `initial` (random in the lower half when nil, as for RTP), logging the
    /// send time and size of the last `sendLogCapacity` packets (a power of two up to 32768; 0
    /// keeps no log).
    public init(initial: UInt16? = nil, sendLogCapacity: Int = 4096) {
        precondition(
            sendLogCapacity == 0
                || (sendLogCapacity >= 16 && sendLogCapacity <= 32768
                    && sendLogCapacity & (sendLogCapacity - 1) == 0),
            "send log capacity \(sendLogCapacity) is not 0 or a power of two in 16...32768")
        next = Atomic(UInt64(initial ?? RandomBytes.initialSequenceNumber()))
        self.sendLogCapacity = sendLogCapacity
        mask = max(0, sendLogCapacity - 1)
        let n = max(1, sendLogCapacity)
        tags = .allocate(capacity: n)
        times = .allocate(capacity: n)
        for i in 0..<n {
            (tags + i).initialize(to: Atomic(0))
            (times + i).initialize(to: Atomic(0))
        }
    }

    deinit {
        let n = max(1, sendLogCapacity)
        tags.deinitialize(count: n); tags.deallocate()
        times.deinitialize(count: n); times.deallocate()
    }

    /// Takes the next number (not logged).
    public func take() -> UInt16 { UInt16(truncatingIfNeeded: next.wrappingAdd(1, ordering: .relaxed).oldValue) }

    /// Takes the next number for a packet of `size` bytes (as it goes on the wire, RTP header and
    /// SRTP tag included) leaving at `sendTime`, and logs both, with the probe
    /// cluster it was sent for (`ProbeCluster.id`, 1...32767; 0: none).
    public func take(sendTime: MonotonicTime, size: Int, probeCluster: Int = 0) -> UInt16 {
        let seq = take()
        guard sendLogCapacity > 0 else { return seq }
        let slot = Int(seq) & mask
        // Writer half of a seqlock: invalidate, publish the data, then the tag that vouches for it.
        tags[slot].store(0, ordering: .relaxed)
        atomicMemoryFence(ordering: .releasing)
        times[slot].store(sendTime.nanoseconds, ordering: .relaxed)
        let cluster = UInt64(min(max(probeCluster, 0), 0x7FFF))
        let tag = 1 << 63 | UInt64(seq) << 32 | cluster << 16 | UInt64(min(max(size, 0), 0xFFFF))
        tags[slot].store(tag, ordering: .releasing)
        return seq
    }

    /// The logged send time, wire size and probe cluster (0: none) of
    /// packet `sequenceNumber`, or nil when it was never logged, has been overwritten, or is being
    /// written right now.
    public func sent(_ sequenceNumber: UInt16) -> (sendTime: MonotonicTime, size: Int, probeCluster: Int)? {
        guard sendLogCapacity > 0 else { return nil }
        let slot = Int(sequenceNumber) & mask
        let t1 = tags[slot].load(ordering: .acquiring)
        let ns = times[slot].load(ordering: .relaxed)
        atomicMemoryFence(ordering: .acquiring)
        let t2 = tags[slot].load(ordering: .relaxed)
        guard t1 == t2, t1 >> 63 == 1, UInt16(truncatingIfNeeded: t1 >> 32) == sequenceNumber else { return nil }
        return (MonotonicTime(nanoseconds: ns), Int(t1 & 0xFFFF), Int(t1 >> 16 & 0x7FFF))
    }
}
