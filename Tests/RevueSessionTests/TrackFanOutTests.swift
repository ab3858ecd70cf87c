import Foundation
import MediaCore
import Synchronization
import Testing
@testable import RevueSession

/// One encoder, two legs: a NACK from one leg is resent to that leg only; the encoder follows the
/// lowest estimate of the legs it sends to.
@Suite struct TrackFanOutTests {
    /// Sequence numbers of the datagrams queued on `socket` (SRTP leaves the RTP header in clear).
    static func drain(_ socket: MediaCore.UDPSocket) -> [UInt16] {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 16)
        defer { buffer.deallocate() }
        var seqs: [UInt16] = []
        while let r = try? socket.receive(into: buffer), r.count >= 12 { seqs.append(UInt16(buffer[2]) << 8 | UInt16(buffer[3])) }
        return seqs
    }

    @Test func nackFromOneLegIsResentToThatLegOnlyAndTheLowestEstimateWins() throws {
        let out = try MediaCore.UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let legs = try (0..<2).map { _ in try MediaCore.UDPSocket(bindingTo: .loopbackIPv4(port: 0)) }
        for l in legs { try l.setReceiveTimeout(nanoseconds: 100_000_000) }
        let fanOut = TrackFanOut()
        var o = SRTPContext.Options()
        o.allowRepeatTransmission = true
        fanOut.setTargets(try legs.enumerated().map { k, leg in
            TrackFanOut.Target(participant: "p\(k)", route: 10 + k,
                               context: try SRTPContext(material: .random(for: .aeadAES128GCM), direction: .outbound, options: o),
                               socket: out, path: ICESendPath(.direct(try leg.localAddress())))
        })
        var c = VideoSendStream.Configuration(codec: .vp8, width: 160, height: 120)
        c.srtp = nil
        let stream = try VideoSendStream(configuration: c, sink: fanOut)
        stream.start()
        defer { stream.stop() }
        let frame = VideoFrame(width: 160, height: 120)
        for i in 0..<5 {
            SyntheticVideo.render(frameIndex: i, into: frame)
            withExtendedLifetime(frame) { stream.capturer.capture(PixelBufferView(frame.view), timeStampNs: Int64(i) * 33_333_333) }
            usleep(40_000)
        }
        let first = legs.map { Self.drain($0) }
        #expect(first[0].count >= 5 && first[0] == first[1], "both legs got every packet: \(first)")
        // Leg 1 (route 11) lost two packets.
        let lost = [first[1][1], first[1][3]]
        stream.handleNack(lost, route: 11)
        usleep(100_000)
        #expect(Self.drain(legs[1]) == lost)
        #expect(Self.drain(legs[0]).isEmpty, "leg 0 did not ask")
        #expect(stream.statistics.outbound.retransmittedPacketsSent == 2 && fanOut.packetsResent.load(ordering: .relaxed) == 2)

        // Estimates: the encoder follows the lowest of the legs it sends to.
        #expect(fanOut.noteEstimate(300_000, route: 10) == 300_000)
        #expect(fanOut.noteEstimate(800_000, route: 11) == 300_000)
        fanOut.setTargets([])
        #expect(fanOut.lowestEstimate() == nil, "legs that left hold nothing down")
    }
}
