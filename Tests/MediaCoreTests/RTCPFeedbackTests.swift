import MediaCore
import Testing

@Suite struct RTCPFeedbackTests {
    @Test func nackListCompressesAndExpands() {
        let lost: [UInt16] = [100, 101, 103, 116, 117, 200]
        let pairs = RTCPGenericNack.pairs(from: lost)
        #expect(
            pairs == [
                .init(packetID: 100, lostBitmask: 0b1000_0000_0000_0101), .init(packetID: 117, lostBitmask: 0),
                .init(packetID: 200, lostBitmask: 0),
            ])
        #expect(RTCPGenericNack(senderSSRC: 1, mediaSSRC: 2, pairs: pairs).lostSequenceNumbers == lost)
    }

    @Test func nackListRoundTripsAcrossRolloverAndRandomSets() throws {
        // Across 65535 -> 0.
        let wrap: [UInt16] = [65530, 65535, 0, 3, 17, 18]
        let n = RTCPGenericNack(senderSSRC: 1, mediaSSRC: 2, lost: wrap)
        #expect(n.lostSequenceNumbers == wrap)
        #expect(n.pairs.count == 2)
        // Random sets: expansion equals the sorted unique input (in wrap order), via the wire.
        var seed: UInt64 = 0x1234
        for _ in 0..<500 {
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            let start = UInt16(truncatingIfNeeded: seed >> 33)
            let count = Int(seed >> 20 & 63) + 1
            var set: [UInt16] = []
            var s = start
            for k in 0..<count {
                s &+= UInt16(1 + (Int(truncatingIfNeeded: seed >> UInt64(k % 40)) & 7) * (k % 3 == 0 ? 5 : 1))
                set.append(s)
            }
            let nack = RTCPGenericNack(senderSSRC: 7, mediaSSRC: 8, lost: set.shuffled())
            let parsed = try parseRTCP(rtcpBytes([.genericNack(nack)]))
            guard case .genericNack(let back) = parsed[0] else { Issue.record("not a NACK"); return }
            #expect(back.lostSequenceNumbers == set)
            // Never more pairs than needed: each pair starts more than 16 after the previous PID.
            for (a, b) in zip(back.pairs, back.pairs.dropFirst()) { #expect(b.packetID &- a.packetID > 16) }
        }
    }

    @Test func nackKnownBytes() {
        let b = rtcpBytes([
            .genericNack(RTCPGenericNack(senderSSRC: 0x01020304, mediaSSRC: 0x05060708, lost: [0xAAAA, 0xAAAB, 0xAABA]))
        ])
        #expect(b == [0x81, 0xCD, 0x00, 0x03, 1, 2, 3, 4, 5, 6, 7, 8, 0xAA, 0xAA, 0x80, 0x01])
    }

    @Test func pliAndFirKnownBytes() throws {
        let pli = rtcpBytes([.pictureLossIndication(RTCPPictureLossIndication(senderSSRC: 1, mediaSSRC: 2))])
        #expect(pli == [0x81, 0xCE, 0x00, 0x02, 0, 0, 0, 1, 0, 0, 0, 2])
        let fir = RTCPFullIntraRequest(senderSSRC: 1, entries: [.init(ssrc: 0xAABBCCDD, sequenceNumber: 42)])
        #expect(
            rtcpBytes([.fullIntraRequest(fir)]) == [
                0x84, 0xCE, 0x00, 0x04, 0, 0, 0, 1, 0, 0, 0, 0,
                0xAA, 0xBB, 0xCC, 0xDD, 42, 0, 0, 0,
            ])
        #expect(try parseRTCP(rtcpBytes([.fullIntraRequest(fir)])) == [.fullIntraRequest(fir)])
    }

    @Test func rembMatchesPionVectorAndEncodesMantissa() throws {
        // pion/rtcp TestReceiverEstimatedMaximumBitrateUnmarshal: 8927168 bps for SSRC 1215622422.
        let pion: [UInt8] = [143, 206, 0, 5, 0, 0, 0, 1, 0, 0, 0, 0, 82, 69, 77, 66, 1, 26, 32, 223, 72, 116, 237, 22]
        let p = try parseRTCP(pion)
        let expected = RTCPReceiverEstimatedMaxBitrate(senderSSRC: 1, bitrate: 8_927_168, ssrcs: [1_215_622_422])
        #expect(p == [.receiverEstimatedMaxBitrate(expected)])
        #expect(rtcpBytes(p) == pion)
        #expect(RTCPReceiverEstimatedMaxBitrate.encode(bitrate: 262_143) == (0, 262_143))
        #expect(RTCPReceiverEstimatedMaxBitrate.encode(bitrate: 262_144) == (1, 131_072))
        let (e, m) = RTCPReceiverEstimatedMaxBitrate.encode(bitrate: 2_500_000_000)
        #expect(UInt64(m) << UInt64(e) <= 2_500_000_000 && UInt64(m) << UInt64(e) > 2_499_000_000)
    }

    @Test func ntpConversionAndRoundTripTime() {
        // 1970-01-01 + 0.5 s.
        let t = NTPTime(unixNanoseconds: 500_000_000)
        #expect(t.rawValue == (UInt64(2_208_988_800) << 32) | 0x8000_0000)
        #expect(t.unixNanoseconds == 500_000_000)
        #expect(t.middle32 == UInt32(truncatingIfNeeded: UInt64(2_208_988_800) << 16) | 0x8000)
        // RFC 3550 §6.4.1 example: A = 0xb710:8000 (46864.500 s), LSR = 0xb705:2000 (46853.125 s),
        // DLSR = 0x0005:4000 (5.250 s) -> RTT 6.125 s.
        let arrival = NTPTime(rawValue: UInt64(0xB710_8000) << 16)
        let rtt = NTPTime.roundTripTime(arrival: arrival, lastSenderReport: 0xB705_2000, delaySinceLastSenderReport: 0x0005_4000)
        #expect(rtt == 6.125)
        #expect(NTPTime.roundTripTime(arrival: arrival, lastSenderReport: 0, delaySinceLastSenderReport: 0) == nil)
        #expect(NTPTime.roundTripTime(arrival: arrival, lastSenderReport: 0xB710_8000, delaySinceLastSenderReport: 1) == nil)
        #expect(NTPTime.delaySinceLastSenderReport(nanoseconds: 5_250_000_000) == 0x0005_4000)
    }
}
