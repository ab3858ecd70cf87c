import FuzzEntries
import MediaCore
import Testing

/// Random and mutated buffers through every parser, with the fuzz targets' properties checked
/// (`FuzzEntries`): each buffer parses, or throws an `RTPError`; none crashes (a trap, or a
/// violated property, fails the whole run).
@Suite struct RTPParserFuzzTests {
    struct Rng {
        var s: UInt64
        mutating func next() -> UInt64 { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return s }
        mutating func int(_ n: Int) -> Int { Int(next() % UInt64(n)) }
    }

    static func seeds() -> [[UInt8]] {
        var h = RTPHeader(marker: true, payloadType: 96, sequenceNumber: 1, timestamp: 2, ssrc: 3, csrcs: [4, 5])
        h.extensions.setAudioLevel(RTPAudioLevel(voiceActivity: true, level: 3), id: 1)
        h.extensions.set(id: 200, [1, 2, 3])
        return [
            RTPPacketTests.pionPacket,
            marshalRTP(
                h, [0x90, 0xE0, 0x92, 0x34, 0x05, 0xA0, 0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A, 0x80, 0x02, 0xE0, 0x01], padding: 3),
            marshalRTP(
                RTPHeader(payloadType: 98),
                [
                    0x9A, 0x92, 0x34, 0x38, 0x01, 0x40, 0x00, 0xB4, 0x02, 0x80, 0x01, 0x68, 0x02, 0x04, 0x01, 0x28, 0x01, 0x02,
                    0xAB,
                ]),
            rtcpBytes([
                .senderReport(
                    RTCPSenderReport(
                        ssrc: 1, ntpTime: NTPTime(rawValue: 5), rtpTime: 6, packetCount: 7, octetCount: 8,
                        reports: [RTCPReportBlock(ssrc: 2)])),
                .sourceDescription(RTCPSourceDescription(ssrc: 1, cname: "abc")),
                .genericNack(RTCPGenericNack(senderSSRC: 1, mediaSSRC: 2, lost: [1, 5, 40])),
                .fullIntraRequest(RTCPFullIntraRequest(senderSSRC: 1, entries: [.init(ssrc: 2, sequenceNumber: 1)])),
                .receiverEstimatedMaxBitrate(RTCPReceiverEstimatedMaxBitrate(senderSSRC: 1, bitrate: 5000, ssrcs: [2])),
                .goodbye(RTCPGoodbye(sources: [1], reason: "x")),
            ]),
            rtcpBytes([
                .transportFeedback(
                    RTCPTransportFeedback(
                        senderSSRC: 1, mediaSSRC: 2, baseSequenceNumber: 3, referenceTime: 4, feedbackPacketCount: 5,
                        packets: [.init(receiveDelta: 1), .init(receiveDelta: nil), .init(receiveDelta: -300)]
                            + Array(repeating: .init(receiveDelta: 2), count: 20)))
            ]),
        ]
    }

    /// The libFuzzer entries (`FuzzEntries`: parse, re-marshal, parse back, compare) on the buffer,
    /// then what they do not cover: depacketizers that keep state across inputs, and the payload
    /// descriptor parsers on bare bytes.
    static func exercise(_ b: [UInt8], _ vp8: VP8Depacketizer, _ vp9: VP9Depacketizer) {
        b.withUnsafeBytes { raw in
            FuzzEntries.datagram(raw)
            FuzzEntries.rtp(raw)
            FuzzEntries.rtcp(raw)
            FuzzEntries.opus(raw)
            if let p = try? RTPPacket(parsing: raw.bytes) {
                _ = try? vp8.push(p, in: raw.bytes)
                _ = try? vp9.push(p, in: raw.bytes)
                _ = try? OpusPayload.depacketize(p)
            }
            _ = try? VP8PayloadDescriptor.parse(raw.bytes)
            _ = try? VP9PayloadDescriptor.parse(raw.bytes)
            _ = try? VP9ScalabilityStructure.parse(raw.bytes)
            _ = try? RTCPTransportFeedback(parsing: raw.bytes)
        }
    }

    @Test func randomBuffersNeverCrashAnyParser() {
        var rng = Rng(s: 0x9E37_79B9_7F4A_7C15)
        let vp8 = VP8Depacketizer(maxFrameSize: 4096), vp9 = VP9Depacketizer(maxFrameSize: 4096)
        for _ in 0..<20_000 {
            let n = rng.int(80)
            var b = (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            // Bias half the inputs towards valid-looking RTP/RTCP version bits.
            if n > 0 && rng.int(2) == 0 { b[0] = 0x80 | (b[0] & 0x3F) }
            Self.exercise(b, vp8, vp9)
        }
    }

    @Test func mutatedValidPacketsNeverCrashAnyParser() {
        var rng = Rng(s: 42)
        let vp8 = VP8Depacketizer(maxFrameSize: 4096), vp9 = VP9Depacketizer(maxFrameSize: 4096)
        let seeds = Self.seeds()
        for i in 0..<20_000 {
            var b = seeds[i % seeds.count]
            for _ in 0..<(1 + rng.int(4)) {
                switch rng.int(3) {
                case 0 where !b.isEmpty: b[rng.int(b.count)] = UInt8(truncatingIfNeeded: rng.next())
                case 1 where !b.isEmpty: b.removeLast(rng.int(b.count))
                default: b.append(UInt8(truncatingIfNeeded: rng.next()))
                }
            }
            Self.exercise(b, vp8, vp9)
        }
    }

    @Test func everyTruncationOfValidPacketsIsRejectedOrParsed() {
        // Truncating a valid RTCP compound anywhere other than a packet boundary must throw.
        let rtcp = Self.seeds()[3]
        var boundaries: Set<Int> = [0]
        var it = RTCPCompoundIterator()
        var at = 0
        while let (h, _) = try? it.next(in: rtcp.span.bytes) { at += h.packetSize; boundaries.insert(at) }
        for cut in 0..<rtcp.count where !boundaries.contains(cut) {
            #expect(rtcpParseError(Array(rtcp.prefix(cut))) != nil, "cut at \(cut)")
        }
    }
}
