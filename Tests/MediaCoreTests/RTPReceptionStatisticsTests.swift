import MediaCore
import Testing

@Suite struct RTPReceptionStatisticsTests {
    @Test func extendedHighestSequenceCountsEveryWrap() {
        var s = RTPReceptionStatistics(ssrc: 1, clockRate: 90_000)
        var seq: UInt16 = 65_000
        for i in 0..<200_000 {
            s.update(sequenceNumber: seq, timestamp: 0, arrival: MonotonicTime(nanoseconds: UInt64(Int64(i))))
            seq &+= 1
        }
        #expect(s.extendedHighestSequence == 65_000 + 199_999)
        #expect(s.extendedHighestSequence >> 16 == 4)  // wrapped at 65536, 131072, 196608 and 262144
        #expect(s.cumulativeLost == 0)
        #expect(s.expected == 200_000)
    }

    @Test func lossAndFractionLostPerInterval() {
        var s = RTPReceptionStatistics(ssrc: 7, clockRate: 48_000)
        // 100 packets around the wrap with every 4th lost: 25 lost of 100 expected.
        for i in 0..<100 where i % 4 != 1 {
            s.update(
                sequenceNumber: UInt16(truncatingIfNeeded: 65_500 + i), timestamp: UInt32(i * 960),
                arrival: MonotonicTime(nanoseconds: UInt64(Int64(i) * 20_000_000)))
        }
        let block = s.makeReportBlock(lastSenderReport: 0xAABB_CCDD, delaySinceLastSenderReport: 65_536)
        #expect(block.ssrc == 7)
        #expect(block.cumulativeLost == 25)
        #expect(block.fractionLost == 64)  // 25/100 * 256
        #expect(block.extendedHighestSequence == 65_500 + 99)
        #expect(block.lastSenderReport == 0xAABB_CCDD && block.delaySinceLastSenderReport == 65_536)
        #expect(block.jitter == 0)  // perfectly paced
        // Next interval: no loss -> fraction 0, cumulative unchanged.
        for i in 100..<150 {
            s.update(
                sequenceNumber: UInt16(truncatingIfNeeded: 65_500 + i), timestamp: UInt32(i * 960),
                arrival: MonotonicTime(nanoseconds: UInt64(Int64(i) * 20_000_000)))
        }
        let f1706 = s.takeFractionLost()
        #expect(f1706 == 0)
        #expect(s.cumulativeLost == 25)
    }

    /// Resends keep their sequence numbers here (no RTX). With A.1's MAX_MISORDER of 100, two
    /// consecutive resends 300 behind read as a restarted sender and the counts start over; with
    /// the stream's NACK window as `lateWindow` they are late packets and nothing is lost.
    @Test func consecutiveResendsFarBehindAreLateWithinTheLateWindow() {
        func run(_ s: inout RTPReceptionStatistics) {
            for seq in 1_000..<1_400 where seq != 1_050 && seq != 1_051 {
                s.update(
                    sequenceNumber: UInt16(seq), timestamp: UInt32(seq * 3000),
                    arrival: MonotonicTime(nanoseconds: UInt64(Int64(seq) * 33_000_000)))
            }
            s.update(sequenceNumber: 1_050, timestamp: 1_050 * 3000, arrival: MonotonicTime(nanoseconds: 1_400 * 33_000_000))
            s.update(sequenceNumber: 1_051, timestamp: 1_051 * 3000, arrival: MonotonicTime(nanoseconds: 1_401 * 33_000_000))
            for seq in 1_400..<1_500 {
                s.update(
                    sequenceNumber: UInt16(seq), timestamp: UInt32(seq * 3000),
                    arrival: MonotonicTime(nanoseconds: UInt64(Int64(seq + 2) * 33_000_000)))
            }
        }
        var windowed = RTPReceptionStatistics(ssrc: 1, clockRate: 90_000, lateWindow: 1024)
        run(&windowed)
        #expect(windowed.expected == 500 && windowed.received == 500 && windowed.packetsLost == 0)
        var rfc = RTPReceptionStatistics(ssrc: 1, clockRate: 90_000)
        run(&rfc)
        #expect(rfc.expected != 500, "A.1 restarts on the second resend: the RFC default is kept")
    }

    @Test func duplicatesMakeCumulativeLostNegativeAndLateOnesAreCounted() {
        var s = RTPReceptionStatistics(ssrc: 1, clockRate: 90_000)
        for seq: UInt16 in [10, 11, 12, 12, 12, 14, 13] {
            s.update(sequenceNumber: seq, timestamp: 0, arrival: MonotonicTime(nanoseconds: 0))
        }
        #expect(s.extendedHighestSequence == 14)
        #expect(s.received == 7)
        #expect(s.cumulativeLost == -2)
        let f2180 = s.takeFractionLost()
        #expect(f2180 == 0)
    }

    @Test func largeJumpIsIgnoredUnlessTheSenderRestarted() {
        var s = RTPReceptionStatistics(ssrc: 1, clockRate: 90_000)
        for seq: UInt16 in 100..<110 { s.update(sequenceNumber: seq, timestamp: 0, arrival: MonotonicTime(nanoseconds: 0)) }
        let r1 = s.update(sequenceNumber: 30_000, timestamp: 0, arrival: MonotonicTime(nanoseconds: 0))
        #expect(!r1)  // stray packet
        #expect(s.extendedHighestSequence == 109)
        let r2 = s.update(sequenceNumber: 110, timestamp: 0, arrival: MonotonicTime(nanoseconds: 0))
        #expect(r2)
        // Two sequential packets far away: statistics restart there (RFC 3550 A.1).
        let r3 = s.update(sequenceNumber: 40_000, timestamp: 0, arrival: MonotonicTime(nanoseconds: 0))
        #expect(!r3)
        let r4 = s.update(sequenceNumber: 40_001, timestamp: 0, arrival: MonotonicTime(nanoseconds: 0))
        #expect(r4)
        #expect(s.extendedHighestSequence == 40_001)
        #expect(s.received == 1)
        #expect(s.cumulativeLost == 0)
    }

    @Test func probationWaitsForSequentialPackets() {
        var s = RTPReceptionStatistics(ssrc: 1, clockRate: 90_000, probation: 2)
        let r5 = s.update(sequenceNumber: 500, timestamp: 0, arrival: MonotonicTime(nanoseconds: 0))
        #expect(!r5)
        #expect(s.expected == 0)
        let r6 = s.update(sequenceNumber: 9, timestamp: 0, arrival: MonotonicTime(nanoseconds: 0))
        #expect(!r6)  // not sequential: probation restarts with 9 as the first of a new run
        #expect(s.expected == 0)
        let r7 = s.update(sequenceNumber: 10, timestamp: 0, arrival: MonotonicTime(nanoseconds: 0))
        #expect(r7)  // second sequential packet: the source is valid, statistics start at 10
        #expect(s.received == 1 && s.expected == 1)
        let r8 = s.update(sequenceNumber: 12, timestamp: 0, arrival: MonotonicTime(nanoseconds: 0))
        #expect(r8)
        #expect(s.received == 2 && s.expected == 3 && s.cumulativeLost == 1)
    }

    @Test func jitterFollowsRFC3550Estimator() {
        // Video at 30 fps whose arrivals alternate 5 ms early and late: |D| is 10 ms = 900 ticks
        // for every packet after the first, so J converges to 900 (J += (|D| - J) / 16).
        var s = RTPReceptionStatistics(ssrc: 1, clockRate: 90_000)
        var model = 0.0
        for i in 0..<400 {
            let arrival = Int64(i) * 33_333_333 + (i % 2 == 0 ? 5_000_000 : -5_000_000)
            s.update(sequenceNumber: UInt16(i), timestamp: UInt32(i * 3000), arrival: MonotonicTime(nanoseconds: UInt64(arrival)))
            if i > 0 { model += (900 - model) / 16 }
        }
        #expect(abs(Double(s.jitter) - model) <= 2, "jitter \(s.jitter) vs model \(model)")
        #expect(s.jitter >= 895)
        // Jitter survives a timestamp wrap.
        var w = RTPReceptionStatistics(ssrc: 2, clockRate: 90_000)
        for i in 0..<100 {
            w.update(
                sequenceNumber: UInt16(i), timestamp: UInt32.max &- 100_000 &+ UInt32(i * 3000),
                arrival: MonotonicTime(nanoseconds: UInt64(Int64(i) * 1_000_000_000 / 30)))
        }
        #expect(w.jitter <= 1)
    }

    @Test func countsBytesAndPacketsForW3CStats() {
        var s = RTPReceptionStatistics(ssrc: 9, clockRate: 90_000)
        for k in 0..<100 where k % 10 != 5 {
            s.update(
                sequenceNumber: UInt16(k), timestamp: UInt32(k * 3000),
                arrival: MonotonicTime(nanoseconds: UInt64(Int64(k) * 33_333_333)),
                size: 100, headerSize: 12)
        }
        #expect(s.packetsReceived == 90 && s.packetsLost == 10)
        #expect(s.bytesReceived == 90 * 88 && s.headerBytesReceived == 90 * 12)
        #expect(s.jitterSeconds < 0.000_1, "evenly paced: under one 90 kHz tick of rounding")
    }

    @Test func retransmissionsDoNotInflateJitter() {
        // A NACKed packet resent 40 ms late with its original sequence number and timestamp is
        // counted (the loss is repaired) but, being behind the highest sequence number, does not
        // enter the A.8 estimate.
        var s = RTPReceptionStatistics(ssrc: 1, clockRate: 90_000)
        for k in 0..<50 where k != 20 {
            s.update(
                sequenceNumber: UInt16(k), timestamp: UInt32(k * 3000),
                arrival: MonotonicTime(nanoseconds: UInt64(Int64(k) * 33_333_333)))
            if k == 21 {
                s.update(
                    sequenceNumber: 20, timestamp: 20 * 3000, arrival: MonotonicTime(nanoseconds: 20 * 33_333_333 + 40_000_000))
            }
        }
        #expect(s.jitter == 0)
        #expect(s.cumulativeLost == 0)
    }

    @Test func reportBlockTakesLSRAndDLSRFromTheLastSenderReport() {
        var s = RTPReceptionStatistics(ssrc: 1, clockRate: 90_000)
        s.update(sequenceNumber: 1, timestamp: 0, arrival: MonotonicTime(nanoseconds: 0))
        #expect(s.makeReportBlock(now: MonotonicTime(nanoseconds: 1_000_000_000)).lastSenderReport == 0, "no SR yet")
        let sr = RTCPSenderReport(
            ssrc: 1, ntpTime: NTPTime(rawValue: 0x0001_2345_6789_0000), rtpTime: 0, packetCount: 0, octetCount: 0)
        s.senderReportReceived(sr, arrival: MonotonicTime(nanoseconds: 5_000_000_000))
        let b = s.makeReportBlock(now: MonotonicTime(nanoseconds: 5_500_000_000))
        #expect(b.lastSenderReport == 0x2345_6789)  // RFC 3550 §6.4.1: middle 32 bits of the NTP time
        #expect(b.delaySinceLastSenderReport == 32768)  // 0.5 s in 1/65536 s
    }
}
