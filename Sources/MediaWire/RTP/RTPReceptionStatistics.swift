import MediaBase

/// Per-source reception statistics for RTCP report blocks and W3C inbound-rtp: sequence
/// validation and extended highest sequence number (RFC 3550 Appendix A.1), packets lost and
/// fraction lost (§6.4.1, Appendix A.3), interarrival jitter (§6.4.1, Appendix A.8), bytes
/// received, and the last sender report for LSR/DLSR (§6.4.1).
///
/// Feed every received packet of one SSRC to `update`, sender reports to
/// `senderReportReceived`, and call `makeReportBlock` when sending an SR or RR. The receive
/// streams (`VideoReceiveStream`, `AudioReceiveStream`) keep one each.
/// Thread rule: a value type for one owner (the receive thread). Cost: O(1), no allocation.
public struct RTPReceptionStatistics: Sendable {
    /// RFC 3550 Appendix A.1 MAX_DROPOUT: a forward jump of up to this many counts as in order.
    public static let maxDropout: UInt16 = 3000
    /// RFC 3550 Appendix A.1 MAX_MISORDER: a backward step of up to this many is a late packet.
    public static let maxMisorder: UInt16 = 100

    /// How far behind the highest sequence number a packet still counts as late rather than as a
    /// jump (`maxMisorder` unless the stream says otherwise). A stream whose NACKed packets are
    /// resent with their original sequence numbers (no RTX stream) sets it to its NACK window:
    /// otherwise two consecutive resends more than 100 behind look like a restarted sender
    /// (A.1's "two sequential packets" rule) and the statistics start over.
    public let lateWindow: UInt16

    /// SSRC of the source.
    public let ssrc: UInt32
    /// RTP clock rate of the source (for jitter).
    public let clockRate: Int64

    private var maxSeq: UInt16 = 0
    private var cycles: UInt32 = 0  // count of wraps << 16
    private var baseSeq: UInt32 = 0
    private var badSeq: UInt32 = 0x1_0001
    private var probation: Int
    private var started = false
    /// Packets accepted (duplicates included, as in RFC 3550 A.3).
    public private(set) var received: UInt64 = 0
    private var expectedPrior: UInt64 = 0
    private var receivedPrior: UInt64 = 0
    private var transit: Int32?
    private var jitterQ4: Int64 = 0  // RFC 3550 A.8: jitter scaled by 16
    private var firstArrivalNs: Int64?
    private var lastSR: UInt32 = 0
    private var lastSRArrivalNs: Int64 = 0
    /// Payload bytes of every packet given to `update` (W3C `bytesReceived`).
    public private(set) var bytesReceived: UInt64 = 0
    /// RTP header bytes of every packet given to `update` (W3C `headerBytesReceived`).
    public private(set) var headerBytesReceived: UInt64 = 0

    /// Starts statistics for `ssrc`. `probation` is RFC 3550 A.1 MIN_SEQUENTIAL: the number of
    /// sequential packets required before a source is valid (0 accepts the first packet at once,
    /// fine when SRTP authenticates packets; RFC 3550 suggests 2).
    /// `lateWindow` (at most `maxDropout`) replaces A.1's MAX_MISORDER of 100 for this source.
    public init(ssrc: UInt32, clockRate: Int64, probation: Int = 0, lateWindow: UInt16 = maxMisorder) {
        precondition(clockRate > 0 && probation >= 0 && lateWindow <= Self.maxDropout)
        self.lateWindow = lateWindow
        self.ssrc = ssrc
        self.clockRate = clockRate
        self.probation = probation
    }

    private mutating func initSequence(_ seq: UInt16) {
        baseSeq = UInt32(seq)
        maxSeq = seq
        badSeq = 0x1_0001
        cycles = 0
        received = 0
        receivedPrior = 0
        expectedPrior = 0
    }

    /// RFC 3550 Appendix A.1 `update_seq` plus the A.8 jitter update. Returns false when the
    /// packet is not (yet) counted: still in probation, or a single large sequence jump (a second,
    /// sequential packet after the jump restarts the statistics, as for a restarted sender).
    /// `arrival` is when the packet arrived. Jitter is updated only for packets
    /// that advance the highest sequence number, so late, duplicate and retransmitted packets
    /// (resent with their original sequence number and timestamp) do not distort it.
    /// `size` (the whole packet) and `headerSize` feed the byte counters, counted for every call.
    @discardableResult
    public mutating func update(
        sequenceNumber seq: UInt16, timestamp: UInt32, arrival: MonotonicTime,
        size: Int = 0, headerSize: Int = 0
    ) -> Bool {
        let arrivalNs = Int64(bitPattern: arrival.nanoseconds)
        bytesReceived &+= UInt64(max(0, size - headerSize))
        headerBytesReceived &+= UInt64(max(0, headerSize))
        if !started {
            started = true
            initSequence(seq)
            maxSeq = seq &- 1
            if probation == 0 {
                initSequence(seq)
                received = 1
                updateJitter(timestamp: timestamp, arrivalNs: arrivalNs)
                return true
            }
        }
        let udelta = seq &- maxSeq
        var advanced = false
        if probation > 0 {
            if seq == maxSeq &+ 1 {
                probation -= 1
                maxSeq = seq
                if probation == 0 {
                    initSequence(seq)
                    received += 1
                    updateJitter(timestamp: timestamp, arrivalNs: arrivalNs)
                    return true
                }
            } else {
                probation = 1
                maxSeq = seq
            }
            return false
        } else if udelta < Self.maxDropout {
            if seq < maxSeq { cycles &+= 0x1_0000 }  // wrapped
            maxSeq = seq
            advanced = udelta != 0
        } else if udelta <= UInt16.max - lateWindow {
            // A very large jump: accept only if the next packet continues from here.
            if UInt32(seq) == badSeq {
                initSequence(seq)
                transit = nil
                advanced = true
            } else {
                badSeq = (UInt32(seq) + 1) & 0xFFFF
                return false
            }
        }
        // else: duplicate or reordered packet, counted but not advancing.
        received += 1
        if advanced { updateJitter(timestamp: timestamp, arrivalNs: arrivalNs) }
        return true
    }

    /// RFC 3550 Appendix A.8: J += (|D| - J) / 16 with D the change in relative transit time.
    private mutating func updateJitter(timestamp: UInt32, arrivalNs: Int64) {
        let origin = firstArrivalNs ?? arrivalNs
        firstArrivalNs = origin
        let dt = arrivalNs &- origin
        let ticks = dt / 1_000_000_000 * clockRate + (dt % 1_000_000_000) * clockRate / 1_000_000_000
        let t = Int32(truncatingIfNeeded: ticks &- Int64(timestamp))
        if let prev = transit {
            let d = Int64(abs(Int64(t &- prev)))
            jitterQ4 += d - ((jitterQ4 + 8) >> 4)
        }
        transit = t
    }

    /// Copies the packet counters and jitter into W3C inbound-rtp statistics (`packetsReceived`,
    /// `bytesReceived`, `headerBytesReceived`, `packetsLost`, `jitter`). Owner thread; O(1).
    public func fill(_ s: inout InboundRTPStreamStats) {
        s.packetsReceived = packetsReceived
        s.bytesReceived = bytesReceived
        s.headerBytesReceived = headerBytesReceived
        s.packetsLost = packetsLost
        s.jitter = jitterSeconds
    }

    /// RFC 3550 §6.4.1 extended highest sequence number received (cycles << 16 | max seq).
    public var extendedHighestSequence: UInt32 { cycles &+ UInt32(maxSeq) }

    /// RFC 3550 A.3 packets expected: extended highest - base + 1.
    public var expected: UInt64 {
        guard started && probation == 0 else { return 0 }
        return UInt64(extendedHighestSequence) &- UInt64(baseSeq) &+ 1
    }

    /// RFC 3550 A.3 cumulative packets lost (negative with duplicates), clamped to 24-bit signed.
    public var cumulativeLost: Int32 {
        let lost = Int64(expected) - Int64(received)
        return Int32(max(-0x80_0000, min(0x7F_FFFF, lost)))
    }

    /// RFC 3550 A.3 cumulative packets lost, not clamped (W3C `packetsLost`).
    public var packetsLost: Int64 { Int64(expected) - Int64(received) }

    /// Packets counted (W3C `packetsReceived`; the same as `received`).
    public var packetsReceived: UInt64 { received }

    /// RFC 3550 A.8 interarrival jitter in timestamp units.
    public var jitter: UInt32 { UInt32(clamping: jitterQ4 >> 4) }

    /// Interarrival jitter in seconds (W3C `jitter`).
    public var jitterSeconds: Double { Double(jitterQ4) / 16 / Double(clockRate) }

    /// Notes a sender report from this source received at `arrival`, for the LSR and DLSR fields
    /// of the next report blocks (RFC 3550 §6.4.1).
    public mutating func senderReportReceived(_ sr: RTCPSenderReport, arrival: MonotonicTime) {
        lastSR = sr.ntpTime.middle32
        lastSRArrivalNs = Int64(bitPattern: arrival.nanoseconds)
        lastSenderReportTimes = (sr.ntpTime, sr.rtpTime)
    }

    /// The NTP and RTP timestamps of the last sender report: the sender's mapping from its media
    /// clock to its wall clock, which lip sync relates the streams of one sender by.
    public private(set) var lastSenderReportTimes: (ntp: NTPTime, rtpTimestamp: UInt32)?

    /// The sender's wall-clock time (Unix-epoch nanoseconds, from its NTP time) of RTP `timestamp`
    /// by the last sender report, at `clockRate`; nil before one arrived. Cost: a few operations.
    public func senderTimeNs(ofRTPTimestamp timestamp: UInt32, clockRate: Int) -> Double? {
        guard let (ntp, rtp) = lastSenderReportTimes else { return nil }
        return Double(ntp.unixNanoseconds) + Double(Int32(bitPattern: timestamp &- rtp)) * 1e9 / Double(clockRate)
    }

    /// A report block at `now` with LSR/DLSR from the last sender report (0 when none); advances
    /// the fraction-lost interval.
    public mutating func makeReportBlock(now: MonotonicTime) -> RTCPReportBlock {
        let nowNs = Int64(bitPattern: now.nanoseconds)
        let dlsr: UInt32 =
            lastSR == 0
            ? 0
            : NTPTime.delaySinceLastSenderReport(nanoseconds: UInt64(max(0, nowNs &- lastSRArrivalNs)))
        return makeReportBlock(lastSenderReport: lastSR, delaySinceLastSenderReport: dlsr)
    }

    /// RFC 3550 A.3 fraction lost since the previous call (in 1/256), and advances the interval.
    public mutating func takeFractionLost() -> UInt8 {
        let exp = expected
        let expectedInterval = Int64(exp) - Int64(expectedPrior)
        let receivedInterval = Int64(received) - Int64(receivedPrior)
        expectedPrior = exp
        receivedPrior = received
        let lostInterval = expectedInterval - receivedInterval
        guard expectedInterval > 0, lostInterval > 0 else { return 0 }
        return UInt8(min(255, (lostInterval << 8) / expectedInterval))
    }

    /// A report block for this source (RFC 3550 §6.4.1); advances the fraction-lost interval.
    /// `lastSenderReport` is the middle 32 bits of the NTP time of the last SR received from this
    /// source (0 if none) and `delaySinceLastSenderReport` the time since, in 1/65536 s.
    public mutating func makeReportBlock(lastSenderReport: UInt32 = 0, delaySinceLastSenderReport: UInt32 = 0) -> RTCPReportBlock
    {
        RTCPReportBlock(
            ssrc: ssrc, fractionLost: takeFractionLost(), cumulativeLost: cumulativeLost,
            extendedHighestSequence: extendedHighestSequence, jitter: jitter,
            lastSenderReport: lastSenderReport, delaySinceLastSenderReport: delaySinceLastSenderReport)
    }
}
