/// Hands out RTP sequence numbers (RFC 3550 §5.1) for one stream and counts rollovers.
///
/// The sequence number and its rollover counter (ROC, RFC 3711 §3.3.1) are packed into one 64-bit
/// extended sequence number (ROC in the upper bits, sequence in the low 16), as pion/rtp's
/// sequencer does. The random initial value lies in the lower half (0...32767): SRTP receivers
/// guess the ROC of the first packet as 0 (RFC 3711 §3.3.1), which stays safe only if the first
/// packets cannot be mistaken for a wrap.
/// Thread rule: a value type for one owner (the packetizing thread). Cost: an add per packet.
public struct RTPSequencer: Sendable {
    private var nextExtended: UInt64

    /// Starts at `initial`, or at a random value in 0...32767 when nil (RFC 3550 §5.1 says the
    /// initial value SHOULD be random).
    public init(initial: UInt16? = nil) {
        nextExtended = UInt64(initial ?? UInt16.random(in: 0...0x7FFF))
    }

    /// Returns the next sequence number; after 65535 comes 0 and the rollover count increases.
    public mutating func next() -> UInt16 {
        let v = nextExtended
        nextExtended &+= 1
        return UInt16(truncatingIfNeeded: v)
    }

    /// The sequence number `next()` will return.
    public var nextSequenceNumber: UInt16 { UInt16(truncatingIfNeeded: nextExtended) }

    /// The extended (ROC << 16 | seq) number of the packet `next()` will return.
    public var nextExtendedSequenceNumber: UInt64 { nextExtended }

    /// Rollover count (RFC 3711 §3.3.1 ROC) of the sequence number returned last, i.e. how many
    /// times the 16-bit sequence has wrapped before it. 0 before the first call.
    public var rolloverCount: UInt32 {
        nextExtended == 0 ? 0 : UInt32(truncatingIfNeeded: (nextExtended - 1) >> 16)
    }
}

/// Converts capture timestamps (nanoseconds) into RTP timestamps of one clock (RFC 3550 §5.1
/// "timestamp": 90 kHz for video per RFC 7741 §4.1 and RFC 9628 §4.1, 48 kHz for Opus per RFC 7587 §4.1).
///
/// Each timestamp is computed from the first capture time (the origin), never by adding per-frame
/// increments, so rounding never accumulates into drift. The origin maps to a random initial
/// timestamp (RFC 3550 §5.1 says it SHOULD be random).
/// Thread rule: a value type for one owner. Cost: a few integer divisions per call.
public struct RTPClock: Sendable {
    /// Ticks per second (90_000 video, 48_000 Opus).
    public let rate: Int64
    /// The RTP timestamp of the origin.
    public let initialTimestamp: UInt32
    /// Capture time of the origin in ns; set by the first `timestamp(captureNs:)` call when nil.
    public private(set) var originNs: Int64?

    /// The 90 kHz video clock (RFC 7741 §4.1).
    public static let videoRate: Int64 = 90_000
    /// The 48 kHz Opus clock (RFC 7587 §4.1).
    public static let opusRate: Int64 = 48_000

    /// Makes a clock of `rate` Hz whose origin maps to `initialTimestamp` (random when nil).
    public init(rate: Int64, initialTimestamp: UInt32? = nil, originNs: Int64? = nil) {
        precondition(rate > 0 && rate <= 1_000_000_000, "RTP clock rate \(rate) out of range")
        self.rate = rate
        self.initialTimestamp = initialTimestamp ?? UInt32.random(in: 0...UInt32.max)
        self.originNs = originNs
    }

    /// Ticks (rounded to nearest) elapsed between the origin and `ns`, which may be negative.
    public func ticks(sinceOriginTo ns: Int64) -> Int64 {
        let delta = ns &- (originNs ?? ns)
        // Split to avoid overflow of delta * rate: whole seconds times rate plus the rounded rest.
        let s = delta / 1_000_000_000, r = delta % 1_000_000_000
        let restTicks = (r * rate + (r >= 0 ? 500_000_000 : -500_000_000)) / 1_000_000_000
        return s * rate + restTicks
    }

    /// The RTP timestamp for a capture at `captureNs`. The first call fixes the origin.
    public mutating func timestamp(captureNs: Int64) -> UInt32 {
        if originNs == nil { originNs = captureNs }
        return initialTimestamp &+ UInt32(truncatingIfNeeded: ticks(sinceOriginTo: captureNs))
    }
}
