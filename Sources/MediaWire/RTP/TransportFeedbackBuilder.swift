import MediaBase

/// The receiver's half of transport-wide congestion control
/// (draft-holmer-rmcat-transport-wide-cc-extensions-01 §3.1): records the arrival time of every
/// packet by its transport-wide sequence number and turns what arrived since the last feedback
/// into one `RTCPTransportFeedback` (received or not, arrival deltas in 250 µs units).
///
/// Memory is bounded: `capacity` arrival slots (a power of two) indexed by extended sequence number;
/// a packet more than `capacity` ahead of the oldest unreported one pushes that window forward
/// (the skipped numbers are never reported), and a packet from before the last feedback is
/// ignored (counted `late`). Deltas are taken between arrival times rounded to 250 µs ticks, so
/// the sender rebuilds each arrival time to the tick; a delta beyond the 16-bit signed range is
/// clamped (counted `clampedDeltas`).
/// Thread rule: one owner (the receive engine). Cost: `packetArrived` is O(1) and allocates
/// nothing; `makeFeedback` allocates the feedback's arrays (a few times a second).
public struct TransportFeedbackBuilder: Sendable {
    /// Number of arrival slots.
    public let capacity: Int
    /// Packets from before the last feedback (or a duplicate of a reported one): ignored.
    public private(set) var late = 0
    /// Deltas that did not fit 16 bits (a gap of more than 8 s between two arrivals).
    public private(set) var clampedDeltas = 0
    /// Feedback packets made so far (their 8-bit count goes into each, §3.1).
    public private(set) var feedbackCount = 0

    private var arrivals: [Int64]
    private let mask: Int64
    private var started = false
    /// Extended sequence numbers: the first not yet reported and the highest seen.
    private var base: Int64 = 0
    private var highest: Int64 = -1

    /// A builder keeping `capacity` (a power of two, 16...32768) arrivals.
    public init(capacity: Int = 1024) {
        precondition(
            capacity >= 16 && capacity <= 32768 && capacity & (capacity - 1) == 0,
            "transport feedback capacity \(capacity) is not a power of two in 16...32768")
        self.capacity = capacity
        mask = Int64(capacity - 1)
        arrivals = [Int64](repeating: -1, count: capacity)
    }

    /// Whether packets arrived since the last feedback.
    public var hasPending: Bool { started && highest >= base }

    /// Records that the packet numbered `sequenceNumber` arrived at `arrival`.
    public mutating func packetArrived(sequenceNumber: UInt16, arrival: MonotonicTime) {
        let ns = Int64(bitPattern: arrival.nanoseconds & 0x7FFF_FFFF_FFFF_FFFF)
        if !started {
            started = true
            base = Int64(sequenceNumber)
            highest = base - 1
        }
        // Extend against the highest seen (or the window's start when nothing is pending).
        let reference = max(highest, base - 1)
        let ext = reference + Int64(Int16(bitPattern: sequenceNumber &- UInt16(truncatingIfNeeded: reference)))
        guard ext >= base else { late += 1; return }
        if ext > highest {
            // Clear the slots the window newly covers, then slide it if it got too long.
            let from = max(highest + 1, ext - Int64(capacity) + 1)
            var e = from
            while e < ext { arrivals[Int(e & mask)] = -1; e += 1 }
            highest = ext
            if highest - base >= Int64(capacity) { base = highest - Int64(capacity) + 1 }
        }
        arrivals[Int(ext & mask)] = ns
    }

    /// The feedback for every number from the oldest unreported one to the highest seen, or nil
    /// when nothing arrived since the last one; the next feedback starts after it.
    public mutating func makeFeedback(senderSSRC: UInt32, mediaSSRC: UInt32) -> RTCPTransportFeedback? {
        guard hasPending else { return nil }
        // The window starts at its first received packet (the numbers before it stay unreported:
        // they were either reported lost before or lie before anything this window saw).
        var first = base
        while first <= highest && arrivals[Int(first & mask)] < 0 { first += 1 }
        guard first <= highest else { base = highest + 1; return nil }
        let tick: Int64 = 250_000
        let firstNs = arrivals[Int(first & mask)]
        let reference = firstNs / 64_000_000
        var previousTicks = reference * 256  // 64 ms = 256 ticks of 250 µs
        var packets: [RTCPTransportFeedback.PacketResult] = []
        packets.reserveCapacity(Int(highest - first + 1))
        var e = first
        while e <= highest {
            let ns = arrivals[Int(e & mask)]
            if ns < 0 {
                packets.append(.init(receiveDelta: nil))
            } else {
                let ticks = (ns + tick / 2) / tick
                var delta = ticks - previousTicks
                if delta > Int64(Int16.max) || delta < Int64(Int16.min) {
                    clampedDeltas += 1
                    delta = min(max(delta, Int64(Int16.min)), Int64(Int16.max))
                }
                previousTicks += delta
                packets.append(.init(receiveDelta: Int16(delta)))
            }
            e += 1
        }
        let feedback = RTCPTransportFeedback(
            senderSSRC: senderSSRC, mediaSSRC: mediaSSRC,
            baseSequenceNumber: UInt16(truncatingIfNeeded: first),
            referenceTime: Int32(truncatingIfNeeded: (reference << 40) >> 40),  // low 24 bits, signed
            feedbackPacketCount: UInt8(truncatingIfNeeded: feedbackCount),
            packets: packets)
        feedbackCount += 1
        base = highest + 1
        return feedback
    }
}
