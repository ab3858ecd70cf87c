/// What a receiver knows about one incoming RTP source for its RTCP reception report
/// (RFC 3550 §6.4.1 and Appendix A.1, A.3): extended highest sequence number, cumulative and
/// interval loss, and the last sender report for LSR/DLSR.
///
/// Thread rule: one owner thread (the receive engine). Cost: O(1) per packet, no allocation.
public struct RTCPReceiveStatistics: Sendable {
    /// SSRC of the source.
    public let ssrc: UInt32
    /// Packets received, duplicates and retransmissions included (RFC 3550 A.3 "received").
    public private(set) var packetsReceived: UInt64 = 0
    /// Payload and header bytes received.
    public private(set) var bytesReceived: UInt64 = 0
    /// Header bytes received.
    public private(set) var headerBytesReceived: UInt64 = 0
    private var baseSeq: Int64 = -1
    private var maxSeq: Int64 = -1
    private var expectedPrior: Int64 = 0
    private var receivedPrior: UInt64 = 0
    private var lastSR: UInt32 = 0
    private var lastSRArrivalNs: UInt64 = 0

    /// RTP clock rate of the source.
    public let clockRate: Int
    private var lastTransit: Int64?
    private var jitterUnits: Double = 0

    /// Starts statistics for `ssrc` whose RTP clock runs at `clockRate`.
    public init(ssrc: UInt32, clockRate: Int) { self.ssrc = ssrc; self.clockRate = clockRate }

    /// RFC 3550 A.8 interarrival jitter in timestamp units.
    public var jitter: UInt32 { UInt32(jitterUnits) }
    /// Interarrival jitter in seconds (W3C `jitter`).
    public var jitterSeconds: Double { jitterUnits / Double(clockRate) }

    /// Counts one packet with extended sequence `ext` (from `RTPJitterBuffer.extend`, which starts
    /// in cycle 1: reports subtract 65 536).
    public mutating func packetReceived(extendedSequence ext: Int64, size: Int, headerSize: Int,
                                        timestamp: UInt32, arrivalNs: UInt64) {
        // RFC 3550 A.8: D = (Rj - Ri) - (Sj - Si) in timestamp units; J += (|D| - J) / 16.
        let arrivalUnits = Int64(arrivalNs / 1000) * Int64(clockRate) / 1_000_000
        let transit = arrivalUnits &- Int64(timestamp)
        if let last = lastTransit {
            var d = Int64(Int32(truncatingIfNeeded: transit &- last))
            if d < 0 { d = -d }
            jitterUnits += (Double(d) - jitterUnits) / 16
        }
        lastTransit = transit
        if baseSeq < 0 { baseSeq = ext; maxSeq = ext }
        if ext > maxSeq { maxSeq = ext }
        packetsReceived += 1
        bytesReceived += UInt64(size - headerSize)
        headerBytesReceived += UInt64(headerSize)
    }

    /// RFC 3550 A.3 "expected": packets from the first to the highest sequence number.
    public var expected: Int64 { baseSeq < 0 ? 0 : maxSeq - baseSeq + 1 }
    /// RFC 3550 A.3 cumulative packets lost (expected minus received; negative with duplicates).
    public var cumulativeLost: Int64 { expected - Int64(packetsReceived) }

    /// Notes a sender report from this source (for LSR and DLSR).
    public mutating func senderReportReceived(_ sr: RTCPSenderReport, arrivalNs: UInt64) {
        lastSR = sr.ntpTime.middle32
        lastSRArrivalNs = arrivalNs
    }

    /// Makes the report block for this source and starts a new interval (RFC 3550 A.3 fraction).
    public mutating func makeReportBlock(nowNs: UInt64) -> RTCPReportBlock {
        let expectedInterval = expected - expectedPrior
        expectedPrior = expected
        let receivedInterval = Int64(packetsReceived) - Int64(receivedPrior)
        receivedPrior = packetsReceived
        let lostInterval = expectedInterval - receivedInterval
        let fraction: UInt8 = expectedInterval == 0 || lostInterval <= 0
            ? 0 : UInt8(min(255, (lostInterval << 8) / expectedInterval))
        let dlsr: UInt32 = lastSR == 0 ? 0 : NTPTime.delaySinceLastSenderReport(nanoseconds: nowNs &- lastSRArrivalNs)
        let extHighest = maxSeq < 0 ? 0 : UInt32(truncatingIfNeeded: max(0, maxSeq - 65536))
        return RTCPReportBlock(ssrc: ssrc, fractionLost: fraction,
                               cumulativeLost: Int32(clamping: cumulativeLost),
                               extendedHighestSequence: extHighest, jitter: jitter,
                               lastSenderReport: lastSR, delaySinceLastSenderReport: dlsr)
    }
}
