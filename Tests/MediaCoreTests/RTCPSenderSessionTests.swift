import MediaCore
import Testing

/// A feedback handler over a real `SendHistory` that records what was asked.
private final class RecordingHandler: RTCPFeedbackHandler {
    let history = SendHistory(capacity: 64, maxPacketSize: 200)
    var resent: [UInt16] = []
    var keyframes = 0
    var bitrates: [Int] = []
    func retransmit(ssrc: UInt32, sequenceNumber: UInt16) -> SendHistory.Lookup {
        history.retransmit(seq: sequenceNumber, now: MonotonicTime(nanoseconds: 0), maxRetransmissions: 2) { _ in
            resent.append(sequenceNumber)
        }
    }
    func requestKeyframe(ssrc: UInt32) { keyframes += 1 }
    func setTargetBitrate(_ bitsPerSecond: Int) { bitrates.append(bitsPerSecond) }
}

nonisolated(unsafe) private var fakeClock: UInt64 = 0

private func handle(_ s: RTCPSenderSession, _ packets: [RTCPPacket], nowNs: UInt64? = nil, arrival: NTPTime? = nil) {
    fakeClock += 1_000_000_000
    let now = nowNs ?? fakeClock
    RTCPCompound.bytes(packets).withUnsafeBytes {
        s.handle($0, now: MonotonicTime(nanoseconds: now), arrival: arrival ?? RTCPSenderSession.wallClock())
    }
}

@Suite struct RTCPSenderSessionTests {
    @Test func nackResendsFromHistoryAndCountsButNeverKeyframesAPacketThatIsGoneOrResentTooOften() {
        let h = RecordingHandler()
        for s: UInt16 in 10...20 {
            [UInt8](repeating: UInt8(s), count: 50).withUnsafeBytes {
                _ = h.history.store(seq: s, packet: $0, now: MonotonicTime(nanoseconds: 0))
            }
        }
        let s = RTCPSenderSession(ssrcs: [42], handler: h, startBitrate: 500_000)
        handle(s, [.genericNack(RTCPGenericNack(senderSSRC: 1, mediaSSRC: 42, lost: [12, 14, 15]))])
        #expect(h.resent == [12, 14, 15] && h.keyframes == 0)
        handle(s, [.genericNack(RTCPGenericNack(senderSSRC: 1, mediaSSRC: 42, lost: [12]))])
        handle(s, [.genericNack(RTCPGenericNack(senderSSRC: 1, mediaSSRC: 42, lost: [12]))])  // third time: exhausted
        #expect(h.resent == [12, 14, 15, 12])
        // Refused, not keyframed: the receiver gives up on the packet and sends PLI itself.
        #expect(h.keyframes == 0 && s.counters.packetsNotResent == 1)
        handle(s, [.genericNack(RTCPGenericNack(senderSSRC: 1, mediaSSRC: 42, lost: [500]))])  // never stored
        #expect(h.keyframes == 0 && s.counters.packetsNotResent == 2 && s.counters.keyframesRequested == 0)
        handle(s, [.genericNack(RTCPGenericNack(senderSSRC: 1, mediaSSRC: 99, lost: [12]))])  // not our stream
        #expect(s.counters.nacksReceived == 4 && s.counters.packetsRetransmitted == 4)
    }

    @Test func pliAndNewFIRRequestKeyframesARepeatedFIRDoesNot() {
        let h = RecordingHandler()
        let s = RTCPSenderSession(ssrcs: [42], handler: h, startBitrate: 500_000)
        handle(s, [.pictureLossIndication(RTCPPictureLossIndication(senderSSRC: 1, mediaSSRC: 42))])
        handle(s, [.fullIntraRequest(RTCPFullIntraRequest(senderSSRC: 1, entries: [.init(ssrc: 42, sequenceNumber: 7)]))])
        handle(s, [.fullIntraRequest(RTCPFullIntraRequest(senderSSRC: 1, entries: [.init(ssrc: 42, sequenceNumber: 7)]))])
        handle(s, [.fullIntraRequest(RTCPFullIntraRequest(senderSSRC: 1, entries: [.init(ssrc: 42, sequenceNumber: 8)]))])
        #expect(h.keyframes == 3 && s.counters.plisReceived == 1 && s.counters.firsReceived == 2)
        // Requests in a burst get one keyframe.
        for k: UInt64 in 0..<5 {
            handle(
                s, [.pictureLossIndication(RTCPPictureLossIndication(senderSSRC: 1, mediaSSRC: 42))],
                nowNs: 100_000_000_000 + k * 50_000_000)
        }
        #expect(h.keyframes == 4 && s.counters.keyframeRequestsThrottled == 4)
    }

    @Test func receiverReportsGiveRoundTripTimeAndLossAndDriveTheBitrate() {
        let h = RecordingHandler()
        let s = RTCPSenderSession(ssrcs: [42], handler: h, startBitrate: 1_000_000)
        let sent = NTPTime(unixNanoseconds: 1_700_000_000_000_000_000)
        let sr = s.senderReport(ssrc: 42, rtpTimestamp: 0, ntpTime: sent)
        // The receiver held the SR 100 ms and the report arrives 150 ms after the SR left: RTT 50 ms.
        let block = RTCPReportBlock(
            ssrc: 42, fractionLost: 64, cumulativeLost: 30, lastSenderReport: sr.ntpTime.middle32,
            delaySinceLastSenderReport: NTPTime.delaySinceLastSenderReport(nanoseconds: 100_000_000))
        handle(
            s, [.receiverReport(RTCPReceiverReport(ssrc: 1, reports: [block]))], nowNs: 2_000_000_000,
            arrival: NTPTime(unixNanoseconds: 1_700_000_000_150_000_000))
        let remote = s.remoteInbound[42]!
        #expect(abs(remote.roundTripTime - 0.050) < 0.001, "\(remote.roundTripTime)")
        #expect(remote.fractionLost == 0.25 && remote.packetsLost == 30)
        #expect(h.bitrates.last! < 1_000_000, "25 % loss lowers the bitrate")
        handle(s, [.receiverEstimatedMaxBitrate(RTCPReceiverEstimatedMaxBitrate(senderSSRC: 1, bitrate: 200_000, ssrcs: [42]))])
        #expect(h.bitrates.last == 200_000)
    }

    @Test func malformedRTCPIsCountedAndIgnored() {
        let s = RTCPSenderSession(ssrcs: [42], handler: nil, startBitrate: 500_000)
        [0x80, 201, 0, 9].withUnsafeBytes { s.handle(UnsafeRawBufferPointer($0), now: MonotonicTime(nanoseconds: 0)) }
        #expect(s.counters.malformed == 1)
    }
}
