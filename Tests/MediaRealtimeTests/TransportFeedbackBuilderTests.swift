import Foundation
import Glibc
import MediaCore
import MediaTools
import Testing

@Suite struct TransportFeedbackBuilderTests {
    /// Rebuilds arrival times (ns, to the 250 µs tick) from a parsed feedback, nil for lost.
    static func arrivals(_ f: RTCPTransportFeedback) -> [Int64?] {
        var ticks = Int64(f.referenceTime) * 256
        return f.packets.map { p in
            guard let d = p.receiveDelta else { return nil }
            ticks += Int64(d)
            return ticks * 250_000
        }
    }

    static func roundTrip(_ f: RTCPTransportFeedback) throws -> RTCPTransportFeedback {
        var bytes: [UInt8] = []
        let n = bytes.append(capacity: f.marshalSize) { f.marshal(into: &$0) }
        #expect(n == f.marshalSize && n % 4 == 0)
        return try RTCPTransportFeedback(parsing: bytes.span.bytes)
    }

    @Test func feedbackAcrossTheWrapListsLossesAndArrivalTimesToTheTick() throws {
        var b = TransportFeedbackBuilder()
        let start: UInt64 = 5_000_000_000
        // 65530...65541 (wrapping), 65533 and 2 lost, 65536 (=0) arriving after 1 (reordered), a
        // 100 ms gap before 4 (a large delta).
        var sent: [(UInt16, UInt64?)] = []
        var t = start
        for k in 0..<12 {
            let seq = UInt16(truncatingIfNeeded: 65_530 + k)
            t += 1_300_000
            if k == 10 { t += 100_000_000 }
            sent.append((seq, (seq == 65_533 || seq == 2) ? nil : t))
        }
        let order = [0, 1, 2, 3, 4, 5, 7, 6, 8, 9, 10, 11]
        for i in order {
            if let at = sent[i].1 { b.packetArrived(sequenceNumber: sent[i].0, arrival: MonotonicTime(nanoseconds: at)) }
        }
        let made = b.makeFeedback(senderSSRC: 1, mediaSSRC: 2)
        let f = try #require(made)
        let parsed = try Self.roundTrip(f)
        #expect(parsed == f)
        #expect(parsed.baseSequenceNumber == 65_530 && parsed.packets.count == 12)
        #expect(parsed.feedbackPacketCount == 0)
        let rebuilt = Self.arrivals(parsed)
        for (k, (seq, at)) in sent.enumerated() {
            if let at {
                let r = try #require(rebuilt[k], "seq \(seq) reported lost")
                #expect(abs(r - Int64(at)) <= 125_000, "seq \(seq): \(r) vs \(at)")
            } else {
                #expect(rebuilt[k] == nil, "seq \(seq) should be lost")
            }
        }
        // Nothing new: no feedback; the next one starts after the last and counts up.
        let none = b.makeFeedback(senderSSRC: 1, mediaSSRC: 2)
        #expect(none == nil)
        b.packetArrived(sequenceNumber: 6, arrival: MonotonicTime(nanoseconds: t + 1_000_000))
        b.packetArrived(sequenceNumber: 65_535, arrival: MonotonicTime(nanoseconds: t + 2_000_000))  // already reported: late
        let madeAgain = b.makeFeedback(senderSSRC: 1, mediaSSRC: 2)
        let g = try #require(madeAgain)
        #expect(g.baseSequenceNumber == 6 && g.packets.count == 1 && g.feedbackPacketCount == 1)
        #expect(b.late == 1)
    }

    @Test func aNegativeDeltaForAReorderedPacketSurvivesTheWire() throws {
        var b = TransportFeedbackBuilder()
        b.packetArrived(sequenceNumber: 10, arrival: MonotonicTime(nanoseconds: 1_000_000_000))
        b.packetArrived(sequenceNumber: 12, arrival: MonotonicTime(nanoseconds: 1_010_000_000))
        b.packetArrived(sequenceNumber: 11, arrival: MonotonicTime(nanoseconds: 1_020_000_000))
        // Earlier than 12 and 11: a negative delta.
        b.packetArrived(sequenceNumber: 13, arrival: MonotonicTime(nanoseconds: 1_005_000_000))
        let made = b.makeFeedback(senderSSRC: 1, mediaSSRC: 2)
        let f = try Self.roundTrip(try #require(made))
        let r = Self.arrivals(f).map { $0! }
        #expect(r == [1_000_000_000, 1_020_000_000, 1_010_000_000, 1_005_000_000])
    }

    @Test func aStrangerCannotGrowTheWindowBeyondItsCapacity() throws {
        var b = TransportFeedbackBuilder(capacity: 64)
        for k in 0..<1000 {
            b.packetArrived(sequenceNumber: UInt16(k * 7 % 65_536), arrival: MonotonicTime(nanoseconds: UInt64(k) * 1_000_000))
        }
        let made = b.makeFeedback(senderSSRC: 1, mediaSSRC: 2)
        let f = try #require(made)
        #expect(f.packets.count <= 64)
        _ = try Self.roundTrip(f)
    }

    /// A send stream numbers its packets, and its RTX retransmissions, with the transport's
    /// counter, as they leave.
    @Test func sendStreamsNumberPacketsAndRetransmissionsTransportWide() throws {
        let numbers = TransportSequenceNumbers(initial: 65_534)
        var config = sendTestVideoConfiguration()
        config.rtxPayloadType = 97
        config.transportSequence = (id: 5, numbers: numbers)
        let sink = MemoryPacketSink()
        let stream = try VideoSendStream(configuration: config, sink: sink)
        stream.startWithoutWorker()
        for i in 0..<2 {
            sendTestCapture(stream.capturer, sendTestFrame(i, width: 320, height: 240), timeStampNs: Int64(i) * 33_333_333)
            stream.pump()
        }
        let media = sink.takePackets()
        let first = try media[0].withUnsafeBytes { try RTPPacket(parsing: $0.bytes).header.sequenceNumber }
        stream.handleNack([first])
        stream.pump()
        let all = media + sink.takePackets()
        stream.stop()
        let numbered = try all.map { p in
            try #require(RTPPacket(parsing: p.span.bytes).header.extensions.transportSequenceNumber(id: 5))
        }
        #expect(numbered == (0..<all.count).map { UInt16(truncatingIfNeeded: 65_534 + $0) }, "\(numbered)")
        #expect(numbers.take() == UInt16(truncatingIfNeeded: 65_534 + all.count))
    }

    /// A paced video stream numbering its packets, a receive pipeline sending transport feedback
    /// back over loopback: the feedback, parsed, reports every packet sent, with arrival times
    /// that advance with the packets'.
    @Test func theReceivePipelineSendsTransportFeedbackCoveringEveryPacket() throws {
        let rxSocket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        var conf = ReceivePipelineConfiguration(remoteKey: nil)
        conf.video = [VideoReceiveSettings(codec: .vp8, payloadType: 96)]
        conf.transportSequenceNumberExtensionID = 5
        let receiver = try ReceivePipeline(socket: rxSocket, configuration: conf, renderer: nil)
        let txSocket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let sink = UDPPacketSink(socket: txSocket, destination: try rxSocket.localAddress())
        var config = sendTestVideoConfiguration()
        config.transportSequence = (id: 5, numbers: TransportSequenceNumbers(initial: 65_500))
        let stream = try VideoSendStream(configuration: config, sink: sink)
        receiver.start(); stream.start()
        let start = MonotonicTime.now.nanoseconds
        for i in 0..<20 {
            while MonotonicTime.now.nanoseconds < start + UInt64(i) * 33_333_333 { usleep(1000) }
            sendTestCapture(stream.capturer, sendTestFrame(i, width: 320, height: 240), timeStampNs: Int64(i) * 33_333_333)
        }
        usleep(300_000)
        stream.stop()
        usleep(200_000)
        receiver.stop()
        let sent = Int(stream.statistics.outbound.packetsSent)
        var feedback: [RTCPTransportFeedback] = []
        var buffer = [UInt8](repeating: 0, count: 2048)
        while (try? txSocket.waitUntilReadable(timeoutMilliseconds: 0)) == true {
            let n = try buffer.withUnsafeMutableBytes { try txSocket.receive(into: $0).count }
            let packets = try buffer.withUnsafeBytes { try RTCPCompound.parse($0.bytes.extracting(0..<n)) }
            for case .transportFeedback(let f) in packets { feedback.append(f) }
        }
        var reported: [UInt16: Int64] = [:]
        for f in feedback {
            for (k, t) in Self.arrivals(f).enumerated() {
                if let t { reported[f.baseSequenceNumber &+ UInt16(k)] = t }
            }
        }
        print("transport feedback: \(feedback.count) packets for \(sent) RTP packets, \(reported.count) reported received")
        #expect(receiver.statistics.transportFeedbackSent == feedback.count)
        #expect(feedback.count >= 5, "one per 100 ms over ~1 s")
        #expect(feedback.map(\.feedbackPacketCount) == (0..<feedback.count).map { UInt8($0) })
        #expect(reported.count == sent, "every packet reported received on loopback")
        let expected = Set((0..<sent).map { UInt16(truncatingIfNeeded: 65_500 + $0) })
        #expect(Set(reported.keys) == expected)
        // Arrival times follow the numbering (packets are sent in order on one socket), within a
        // tick of reordering noise.
        let times = expected.sorted { ($0 &- 65_500) < ($1 &- 65_500) }.map { reported[$0]! }
        #expect(zip(times, times.dropFirst()).allSatisfy { $1 >= $0 - 250_000 })
        #expect(times.last! - times.first! > 500_000_000, "20 frames at 30 fps span over half a second")
    }
}
