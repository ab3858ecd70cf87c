import Foundation
import MediaCore
import Synchronization
import Testing

@testable import RevueSession

/// One encoder, two legs: a NACK from one leg is resent to that leg only; each leg numbers the
/// packets it sends with its own transport-wide sequence, and a resend is byte for byte the first
/// transmission; the encoder follows the lowest estimate
/// of the legs it sends to.
@Suite struct TrackFanOutTests {
    /// Sequence numbers of the datagrams queued on `socket` (SRTP leaves the RTP header in clear).
    static func drain(_ socket: MediaCore.UDPSocket) -> [UInt16] { drainNumbered(socket).map(\.seq) }

    /// RTP and transport-wide sequence numbers (nil: no element) and the whole datagrams queued
    /// on `socket`.
    static func drainNumbered(_ socket: MediaCore.UDPSocket) -> [(seq: UInt16, transport: UInt16?, bytes: [UInt8])] {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 16)
        defer { buffer.deallocate() }
        var out: [(UInt16, UInt16?, [UInt8])] = []
        while let r = try? socket.receive(into: buffer), r.count >= 12 {
            let at = RTPHeaderExtensions.elementOffset(
                id: TrackFanOut.transportSequenceExtensionID, in: buffer.bytes.extracting(..<r.count))
            out.append(
                (
                    UInt16(buffer[2]) << 8 | UInt16(buffer[3]), at.map { UInt16(buffer[$0]) << 8 | UInt16(buffer[$0 + 1]) },
                    Array(buffer[0..<r.count])
                ))
        }
        return out
    }

    @Test func nackFromOneLegIsResentToThatLegOnlyAndTheLowestEstimateWins() throws {
        let out = try MediaCore.UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let legs = try (0..<2).map { _ in try MediaCore.UDPSocket(bindingTo: .loopbackIPv4(port: 0)) }
        for l in legs { try l.setReceiveTimeout(nanoseconds: 100_000_000) }
        let fanOut = TrackFanOut()
        let counters = [TransportSequenceNumbers(initial: 100), TransportSequenceNumbers(initial: 60_000)]
        var o = SRTPContext.Options()
        o.allowRepeatTransmission = true
        fanOut.setTargets(
            try legs.enumerated().map { k, leg in
                TrackFanOut.Target(
                    participant: "p\(k)", route: 10 + k,
                    context: try SRTPContext(material: .random(for: .aeadAES128GCM), direction: .outbound, options: o),
                    socket: out, path: ICESendPath(.direct(try leg.localAddress(), from: nil)),
                    numbering: TransportNumbering(counter: counters[k]))
            })
        var c = VideoSendStream.Configuration(codec: .vp8, width: 160, height: 120)
        c.srtp = nil
        c.transportSequence = (TrackFanOut.transportSequenceExtensionID, nil)  // reserved, as a call does
        let stream = try VideoSendStream(configuration: c, sink: fanOut)
        stream.start()
        defer { stream.stop() }
        let frame = VideoFrame(width: 160, height: 120)
        for i in 0..<5 {
            SyntheticVideo.render(frameIndex: i, into: frame)
            withExtendedLifetime(frame) {
                stream.capturer.capture(PixelBufferView(frame.view), timeStampNs: Int64(i) * 33_333_333)
            }
            usleep(40_000)
        }
        let numbered = legs.map { Self.drainNumbered($0) }
        let first = numbered.map { $0.map(\.seq) }
        #expect(first[0].count >= 5 && first[0] == first[1], "both legs got every packet: \(first)")
        // Each leg is its own transport: its packets carry its own counter's numbers, in order,
        // and its send log knows each of them.
        for (k, start) in [(0, UInt16(100)), (1, UInt16(60_000))] {
            let transport = numbered[k].map(\.transport)
            #expect(transport == (0..<numbered[k].count).map { start &+ UInt16($0) }, "leg \(k): \(transport)")
            #expect(transport.allSatisfy { $0.flatMap { counters[k].sent($0) } != nil }, "leg \(k)'s send log")
        }
        // Leg 1 (route 11) lost two packets.
        let lost = [first[1][1], first[1][3]]
        stream.handleNack(lost, route: 11)
        usleep(100_000)
        let resent = Self.drainNumbered(legs[1])
        #expect(resent.map(\.seq) == lost)
        // A resend is the first transmission's bytes, transport-wide number and SRTP tag
        // included: AES-GCM must not protect different bytes under one index.
        let originals = lost.compactMap { s in numbered[1].first { $0.seq == s } }
        #expect(resent.map(\.bytes) == originals.map(\.bytes), "resends differ from the first transmissions")
        #expect(Self.drain(legs[0]).isEmpty, "leg 0 did not ask")
        #expect(stream.statistics.outbound.retransmittedPacketsSent == 2 && fanOut.packetsResent.load(ordering: .relaxed) == 2)

        // Estimates: the encoder follows the lowest of the legs it sends to.
        #expect(fanOut.noteEstimate(300_000, route: 10) == 300_000)
        #expect(fanOut.noteEstimate(800_000, route: 11) == 300_000)
        fanOut.setTargets([])
        #expect(fanOut.lowestEstimate() == nil, "legs that left hold nothing down")
    }
}
