import Synchronization

/// The transport-wide sequence number counter (draft-holmer-rmcat-transport-wide-cc-extensions-01
/// §2) that every send stream on one transport (one 5-tuple) shares, so the receiver's transport
/// feedback covers all of them in one sequence. Each packet takes the next number when it leaves
/// (media, retransmission), never when it is queued.
/// Thread rule: any thread (one atomic). Cost: one atomic increment per packet.
public final class TransportSequenceNumbers: Sendable {
    private let next: Atomic<UInt16>

    /// A counter starting at `initial` (random in the lower half when nil, as for RTP).
    public init(initial: UInt16? = nil) { next = Atomic(initial ?? RandomBytes.initialSequenceNumber()) }

    /// Takes the next number.
    public func take() -> UInt16 { next.wrappingAdd(1, ordering: .relaxed).oldValue }
}
