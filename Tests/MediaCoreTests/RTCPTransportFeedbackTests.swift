import MediaCore
import Testing

@Suite struct RTCPTransportFeedbackTests {
    typealias R = RTCPTransportFeedback.PacketResult

    static func feedback(_ packets: [R], base: UInt16 = 65530, ref: Int32 = -2) -> RTCPTransportFeedback {
        RTCPTransportFeedback(
            senderSSRC: 1, mediaSSRC: 2, baseSequenceNumber: base, referenceTime: ref,
            feedbackPacketCount: 9, packets: packets)
    }

    @Test func chunkLayoutsMatchTheDraftExamples() {
        // §3.1.3 example: a run of 221 packets received with small deltas -> 0x20DD.
        let run = Self.feedback([R](repeating: R(receiveDelta: 4), count: 221))
        #expect(run.chunks == [0x20DD])
        // §3.1.4 example: 1-bit vector 0,1,1,1,1,1,0,0,0,1,1,1,0,0 -> 0x9F1C.
        let bits: [Int] = [0, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 0]
        let vec = Self.feedback(bits.map { R(receiveDelta: $0 == 1 ? 1 : nil) })
        #expect(vec.chunks == [0x9F1C])
        // A large delta forces 2-bit symbols: received small, large, lost, small -> 11 01 10 00 01 00 00 00.
        let two = Self.feedback([R(receiveDelta: 3), R(receiveDelta: -1), R(receiveDelta: nil), R(receiveDelta: 255)])
        #expect(two.chunks == [0b1101_1000_0100_0000])
    }

    @Test func knownBytesWithZeroPadding() throws {
        let fb = Self.feedback([R(receiveDelta: 1), R(receiveDelta: nil), R(receiveDelta: 300)], base: 7, ref: 0x12345)
        let b = rtcpBytes([.transportFeedback(fb)])
        // 20 header/fixed + 2 chunk + 1 + 2 deltas = 25 -> 28 with 3 zero bytes (draft §3.1), P clear.
        #expect(
            b == [
                0x8F, 0xCD, 0x00, 0x06, 0, 0, 0, 1, 0, 0, 0, 2, 0x00, 0x07, 0x00, 0x03, 0x01, 0x23, 0x45, 9,
                0xD2, 0x00, 0x01, 0x01, 0x2C, 0x00, 0x00, 0x00,
            ])
        #expect(try parseRTCP(b) == [.transportFeedback(fb)])
        // libwebrtc pads with the RFC 3550 P bit and a count byte instead: still read the same.
        var pBit = b; pBit[0] |= 0x20; pBit[27] = 3
        #expect(try parseRTCP(pBit) == [.transportFeedback(fb)])
    }

    @Test func paddedFeedbackBeforeAnotherPacketRoundTrips() throws {
        // Marshalling used to pad with the P bit; a compound with another packet after the feedback
        // then no longer parsed (RFC 3550 §6.4.1: only the last packet may carry P). Found by
        // fuzz-rtcp (Fuzz/crashes/fuzz-rtcp/crash-b3ef2edc...).
        let fb = Self.feedback([R(receiveDelta: 1), R(receiveDelta: nil), R(receiveDelta: 300)])
        let packets: [RTCPPacket] = [
            .transportFeedback(fb), .receiverReport(RTCPReceiverReport(ssrc: 2)),
            .transportFeedback(fb),
        ]
        let b = rtcpBytes(packets)
        #expect(try parseRTCP(b) == packets)
        // The fuzzer's input: unknown PT 153, then a 28-byte feedback whose 82 statuses re-encode
        // to an odd size (its zero-length run chunk is dropped), then an RR and a REMB.
        let input: [UInt8] = [
            0x80, 0x99, 0x00, 0x01, 0, 0, 0, 0,
            0x8F, 0xCD, 0x00, 0x06, 0x00, 0xFF, 0x06, 0xFF, 0x21, 0x0A, 0x08, 0x00, 0x00, 0x08, 0x00, 0x52,
            0x45, 0xFF, 0xFF, 0xFF, 0x80, 0x20, 0x00, 0x00, 0x00, 0x60, 0x3D, 0x01,
            0x80, 0xC9, 0x00, 0x01, 0, 0, 0, 2,
            0x8F, 0xCE, 0x00, 0x06, 0, 0, 0, 2, 0, 0, 0, 0, 0x52, 0x45, 0x4D, 0x42, 0x02, 0x0E, 0xDC, 0x6C,
            0, 0, 0, 0x2A, 0, 0, 0, 0x2B,
        ]
        let parsed = try parseRTCP(input)
        #expect(parsed.count == 4)
        let again = rtcpBytes(parsed)
        #expect(again[8] & 0x20 == 0, "P bit set on a feedback packet that is not the last")
        #expect(try parseRTCP(again) == parsed)
    }

    @Test func randomPatternsRoundTrip() throws {
        var x: UInt64 = 0xFEED
        func rnd() -> UInt64 { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x }
        for _ in 0..<300 {
            let n = 1 + Int(rnd() % 400)
            var packets: [R] = []
            while packets.count < n {
                // Runs of one kind mixed with noise, so every chunk type appears.
                let kind = rnd() % 4, len = 1 + Int(rnd() % 30)
                for _ in 0..<min(len, n - packets.count) {
                    switch kind {
                    case 0: packets.append(R(receiveDelta: nil))
                    case 1: packets.append(R(receiveDelta: Int16(rnd() % 256)))
                    case 2: packets.append(R(receiveDelta: Int16(truncatingIfNeeded: rnd())))
                    default: packets.append(rnd() % 2 == 0 ? R(receiveDelta: nil) : R(receiveDelta: Int16(rnd() % 256)))
                    }
                }
            }
            let fb = Self.feedback(
                packets, base: UInt16(truncatingIfNeeded: rnd()), ref: Int32(truncatingIfNeeded: rnd() % 0x100_0000) - 0x80_0000)
            let b = rtcpBytes([.transportFeedback(fb)])
            #expect(b.count % 4 == 0)
            #expect(try parseRTCP(b) == [.transportFeedback(fb)])
        }
    }

    @Test func rejectsTruncatedChunksDeltasAndReservedSymbols() {
        let fb = Self.feedback([R(receiveDelta: 1), R(receiveDelta: 500), R(receiveDelta: nil), R(receiveDelta: 2)])
        let b = rtcpBytes([.transportFeedback(fb)])
        // Shrink the length field by one word: the deltas no longer fit.
        var short = Array(b.dropLast(4)); short[0] &= ~0x20; short[3] -= 1
        #expect(rtcpParseError(short) == .badRTCPLength)
        // Status count larger than the chunks describe.
        var more = b; more[14] = 0x10
        #expect(rtcpParseError(more) != nil)
        // Reserved 2-bit symbol 11 in a status vector.
        var reserved = b; reserved[20] = 0xFF
        #expect(rtcpParseError(reserved) == .badRTCPPacket)
    }
}
