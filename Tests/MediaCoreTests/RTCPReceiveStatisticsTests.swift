import Testing
@testable import MediaCore

@Suite struct RTCPReceiveStatisticsTests {
    @Test func reportsFractionAndCumulativeLossPerInterval() {
        var s = RTCPReceiveStatistics(ssrc: 9, clockRate: 90_000)
        // 100 expected, 90 received (10 lost) in the first interval.
        for k in 0..<100 where k % 10 != 5 {
            s.packetReceived(extendedSequence: 65536 + Int64(k), size: 100, headerSize: 12, timestamp: UInt32(k * 3000),
                             arrivalNs: UInt64(k) * 33_333_333)
        }
        let b1 = s.makeReportBlock(nowNs: 0)
        #expect(b1.ssrc == 9)
        #expect(b1.cumulativeLost == 10)
        #expect(b1.fractionLost == UInt8(10 * 256 / 100))  // RFC 3550 A.3: (lost << 8) / expected
        #expect(b1.extendedHighestSequence == 99)
        // Second interval: no loss.
        for k in 100..<150 {
            s.packetReceived(extendedSequence: 65536 + Int64(k), size: 100, headerSize: 12, timestamp: UInt32(k * 3000),
                             arrivalNs: UInt64(k) * 33_333_333)
        }
        let b2 = s.makeReportBlock(nowNs: 0)
        #expect(b2.fractionLost == 0 && b2.cumulativeLost == 10 && b2.extendedHighestSequence == 149)
        #expect(s.bytesReceived == 140 * 88 && s.headerBytesReceived == 140 * 12)
    }

    @Test func countsRolloverInTheExtendedHighestSequence() {
        var s = RTCPReceiveStatistics(ssrc: 1, clockRate: 90_000)
        s.packetReceived(extendedSequence: 65536 + 65535, size: 20, headerSize: 12, timestamp: 0, arrivalNs: 0)
        s.packetReceived(extendedSequence: 65536 + 65536 + 2, size: 20, headerSize: 12, timestamp: 0, arrivalNs: 0)
        let b = s.makeReportBlock(nowNs: 0)
        #expect(b.extendedHighestSequence == 0x1_0002)
        #expect(b.cumulativeLost == 2)
    }

    @Test func jitterMatchesRFC3550FormulaAndLSRDLSRComeFromTheLastSenderReport() {
        var s = RTCPReceiveStatistics(ssrc: 1, clockRate: 90_000)
        // Alternate 0 and 9 ms late: |D| = 810 units every packet; J converges to 810.
        for k in 0..<400 {
            let late: UInt64 = k % 2 == 0 ? 0 : 9_000_000
            s.packetReceived(extendedSequence: Int64(k), size: 20, headerSize: 12, timestamp: UInt32(k * 3000),
                             arrivalNs: 1_000_000_000 + UInt64(k) * 33_333_333 + late)
        }
        #expect(abs(Int(s.jitter) - 810) <= 2, "\(s.jitter)")
        let sr = RTCPSenderReport(ssrc: 1, ntpTime: NTPTime(rawValue: 0x0001_2345_6789_0000), rtpTime: 0, packetCount: 0, octetCount: 0)
        s.senderReportReceived(sr, arrivalNs: 5_000_000_000)
        let b = s.makeReportBlock(nowNs: 5_500_000_000)
        #expect(b.lastSenderReport == 0x2345_6789)
        #expect(b.delaySinceLastSenderReport == 32768)  // 0.5 s in 1/65536 s
    }
}
