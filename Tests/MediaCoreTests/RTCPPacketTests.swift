import MediaCore
import Testing

func rtcpBytes(_ packets: [RTCPPacket]) -> [UInt8] { RTCPCompound.bytes(packets) }

func parseRTCP(_ b: [UInt8], requireReportFirst: Bool = false) throws -> [RTCPPacket] {
    try RTCPCompound.parse(b.span.bytes, requireReportFirst: requireReportFirst)
}

func rtcpParseError(_ b: [UInt8]) -> RTPError? {
    do throws(RTPError) { _ = try RTCPCompound.parse(b.span.bytes); return nil } catch { return error }
}

@Suite struct RTCPPacketTests {
    // pion/rtcp's receiver report test vector.
    static let pionRR: [UInt8] = [
        0x81, 0xC9, 0x00, 0x07, 0x90, 0x2F, 0x9E, 0x2E, 0xBC, 0x5E, 0x9A, 0x40, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x46, 0xE1, 0x00, 0x00, 0x01, 0x11, 0x09, 0xF3, 0x64, 0x32, 0x00, 0x02, 0x4A, 0x79,
    ]

    /// A compound marshalled into an output span lands after what the span already holds, and
    /// each packet parses alone from its own bytes.
    @Test func compoundMarshalsIntoAnOutputSpanAndPacketsParseAlone() throws {
        let packets: [RTCPPacket] = [
            try RTCPPacket(parsing: Self.pionRR.span.bytes),
            .pictureLossIndication(RTCPPictureLossIndication(senderSSRC: 1, mediaSSRC: 2)),
        ]
        let size = RTCPCompound.marshalSize(packets)
        var out = [UInt8](repeating: 0xEE, count: 2 + size + 3)
        let (written, held) = out.withUnsafeMutableBytes { raw in
            var span = OutputRawSpan(buffer: raw, initializedCount: 2)
            let n = RTCPCompound.marshal(packets, into: &span)
            return (n, span.byteCount)
        }
        #expect(written == size && held == 2 + size)
        #expect(Array(out[2..<(2 + Self.pionRR.count)]) == Self.pionRR)
        #expect(out[..<2].allSatisfy { $0 == 0xEE } && out[(2 + size)...].allSatisfy { $0 == 0xEE })
        let datagram = Array(out[2..<(2 + size)])
        #expect(try RTCPCompound.parse(datagram.span.bytes) == packets)
        let pli = Array(datagram[Self.pionRR.count...])
        #expect(try RTCPPacket(parsing: pli.span.bytes) == packets[1])
    }

    @Test func parsesKnownReceiverReport() throws {
        let rr = try RTCPReceiverReport(parsing: Self.pionRR.span.bytes)
        #expect(
            rr
                == RTCPReceiverReport(
                    ssrc: 0x902F_9E2E,
                    reports: [
                        RTCPReportBlock(
                            ssrc: 0xBC5E_9A40, fractionLost: 0, cumulativeLost: 0, extendedHighestSequence: 0x46E1,
                            jitter: 273, lastSenderReport: 0x09F3_6432, delaySinceLastSenderReport: 150_137)
                    ]))
        #expect(rtcpBytes([.receiverReport(rr)]) == Self.pionRR)
    }

    @Test func cumulativeLostIs24BitSigned() throws {
        for lost: Int32 in [0, 1, -1, 0x7F_FFFF, -0x80_0000, 12345, -12345] {
            let rr = RTCPReceiverReport(ssrc: 1, reports: [RTCPReportBlock(ssrc: 2, fractionLost: 255, cumulativeLost: lost)])
            let b = rtcpBytes([.receiverReport(rr)])
            #expect(try parseRTCP(b) == [.receiverReport(rr)])
        }
        #expect(RTCPReportBlock(ssrc: 1, cumulativeLost: 20_000_000).cumulativeLost == 0x7F_FFFF)  // saturates
        let b = rtcpBytes([.receiverReport(RTCPReceiverReport(ssrc: 1, reports: [RTCPReportBlock(ssrc: 2, cumulativeLost: -1)]))])
        #expect(Array(b[13...15]) == [0xFF, 0xFF, 0xFF])
    }

    @Test func senderReportRoundTripsAndLayout() throws {
        let sr = RTCPSenderReport(
            ssrc: 0x11223344, ntpTime: NTPTime(rawValue: 0xDA8B_D1FC_DDDD_A05A), rtpTime: 0x12345678,
            packetCount: 7, octetCount: 1000,
            reports: [
                RTCPReportBlock(
                    ssrc: 9, fractionLost: 26, cumulativeLost: 3, extendedHighestSequence: 0x1_0005,
                    jitter: 90, lastSenderReport: 0xD1FC_DDDD, delaySinceLastSenderReport: 65536)
            ])
        let b = rtcpBytes([.senderReport(sr)])
        #expect(b.count == 52)
        #expect(Array(b[0..<4]) == [0x81, 0xC8, 0x00, 0x0C])
        #expect(Array(b[8..<16]) == [0xDA, 0x8B, 0xD1, 0xFC, 0xDD, 0xDD, 0xA0, 0x5A])
        #expect(try parseRTCP(b) == [.senderReport(sr)])
    }

    @Test func sdesAndByeRoundTrip() throws {
        let sdes = RTCPSourceDescription(ssrc: 0xCAFEBABE, cname: "revue@host")
        let b = rtcpBytes([.sourceDescription(sdes)])
        // 4 header + 4 SSRC + 2 + 10 text + 1 null = 21 -> 24.
        #expect(b.count == 24)
        #expect(Array(b[0..<4]) == [0x81, 0xCA, 0x00, 0x05])
        #expect(Array(b[8..<10]) == [0x01, 10])
        #expect(b[20] == 0)
        let parsed = try parseRTCP(b)
        #expect(parsed == [.sourceDescription(sdes)])
        if case .sourceDescription(let s) = parsed[0] { #expect(s.chunks[0].cname == "revue@host") }
        // A CNAME whose chunk ends exactly on a boundary still gets a full word of nulls.
        let aligned = RTCPSourceDescription(ssrc: 1, cname: "ab")  // 4 + 2 + 2 = 8, +1 null -> 12
        #expect(aligned.marshalSize == 16)
        #expect(try parseRTCP(rtcpBytes([.sourceDescription(aligned)])) == [.sourceDescription(aligned)])
        let bye = RTCPGoodbye(sources: [1, 2], reason: "bye now")
        let bb = rtcpBytes([.goodbye(bye)])
        #expect(bb.count == 4 + 8 + 8)
        #expect(try parseRTCP(bb) == [.goodbye(bye)])
        let silent = RTCPGoodbye(sources: [5])
        #expect(try parseRTCP(rtcpBytes([.goodbye(silent)])) == [.goodbye(silent)])
    }

    @Test func compoundBuildsAndParsesInOrder() throws {
        let packets: [RTCPPacket] = [
            .receiverReport(RTCPReceiverReport(ssrc: 1)),
            .sourceDescription(RTCPSourceDescription(ssrc: 1, cname: "x")),
            .genericNack(RTCPGenericNack(senderSSRC: 1, mediaSSRC: 2, lost: [10, 11, 40])),
            .pictureLossIndication(RTCPPictureLossIndication(senderSSRC: 1, mediaSSRC: 2)),
            .fullIntraRequest(RTCPFullIntraRequest(senderSSRC: 1, entries: [.init(ssrc: 2, sequenceNumber: 9)])),
            .receiverEstimatedMaxBitrate(RTCPReceiverEstimatedMaxBitrate(senderSSRC: 1, bitrate: 1_000_000, ssrcs: [2, 3])),
            .goodbye(RTCPGoodbye(sources: [1])),
        ]
        let b = rtcpBytes(packets)
        #expect(try parseRTCP(b, requireReportFirst: true) == packets)
        var it: [UInt8] = []
        var walk = RTCPCompoundIterator()
        while let (h, _) = try walk.next(in: b.span.bytes) { it.append(h.packetType.rawValue) }
        #expect(it == [201, 202, 205, 206, 206, 206, 203])
        it = []
        // RFC 3550 §6.1: a compound must start with SR/RR when asked to check.
        #expect(throws: RTPError.badRTCPPacket) { try parseRTCP(Array(b[20...]), requireReportFirst: true) }
    }

    @Test func unknownTypesAreKeptRaw() throws {
        // APP packet (PT 204), subtype 3, name "TEST", 4 bytes of data.
        let app: [UInt8] = [0x83, 0xCC, 0x00, 0x03, 0, 0, 0, 1, 0x54, 0x45, 0x53, 0x54, 1, 2, 3, 4]
        let parsed = try parseRTCP(app)
        guard case .other(let h, let bytes) = parsed[0] else { Issue.record("not raw"); return }
        #expect(h.packetType == .application && h.count == 3)
        #expect(bytes == app)
        #expect(rtcpBytes(parsed) == app)
    }

    @Test func rejectsMalformedCompounds() {
        let rr = rtcpBytes([.receiverReport(RTCPReceiverReport(ssrc: 1, reports: [RTCPReportBlock(ssrc: 2)]))])
        #expect(rtcpParseError([]) == .truncated)
        #expect(rtcpParseError([0x80, 0xC9]) == .truncated)
        #expect(rtcpParseError(Array(rr.dropLast(4))) == .badRTCPLength)  // length says more than present
        var v1 = rr; v1[0] = 0x41
        #expect(rtcpParseError(v1) == .badRTCPPacket)
        var rc = rr; rc[0] = 0x82  // two report blocks announced, one present
        #expect(rtcpParseError(rc) == .badRTCPLength)
        #expect(rtcpParseError(rr + [0x81]) == .truncated)  // trailing garbage shorter than a header
        // Padding: count 0, count larger than the body, and padding on a non-last packet.
        var pad0 = rtcpBytes([.pictureLossIndication(RTCPPictureLossIndication(senderSSRC: 1, mediaSSRC: 2))])
        pad0[0] |= 0x20; pad0[11] = 0
        #expect(rtcpParseError(pad0) == .badRTCPLength)
        var padBig = pad0; padBig[11] = 9
        #expect(rtcpParseError(padBig) == .badRTCPLength)
        let padded: [UInt8] = [0xA0, 0xC9, 0x00, 0x02, 0, 0, 0, 1, 0, 0, 0, 4]  // RR with 4 padding bytes: valid
        #expect(rtcpParseError(padded) == nil)
        #expect(rtcpParseError(padded + rr) == .badRTCPPacket)
        // NACK with a half FCI entry; FIR with no entry.
        #expect(rtcpParseError([0x81, 0xCD, 0x00, 0x02, 0, 0, 0, 1, 0, 0, 0, 2]) == .badRTCPLength)
        #expect(rtcpParseError([0x84, 0xCE, 0x00, 0x02, 0, 0, 0, 1, 0, 0, 0, 0]) == .badRTCPLength)
        // SDES item running past the packet, chunk without null terminator.
        #expect(rtcpParseError([0x81, 0xCA, 0x00, 0x02, 0, 0, 0, 1, 0x01, 0x09, 0x41, 0x41]) == .badRTCPPacket)
        #expect(rtcpParseError([0x81, 0xCA, 0x00, 0x02, 0, 0, 0, 1, 0x01, 0x02, 0x41, 0x41]) == .badRTCPPacket)
        // BYE with more sources than bytes, REMB with more SSRCs than bytes.
        #expect(rtcpParseError([0x83, 0xCB, 0x00, 0x01, 0, 0, 0, 1]) == .badRTCPLength)
        #expect(
            rtcpParseError([0x8F, 0xCE, 0x00, 0x04, 0, 0, 0, 1, 0, 0, 0, 0, 0x52, 0x45, 0x4D, 0x42, 2, 0, 0, 1]) == .badRTCPLength
        )
    }

    @Test func wrongTypeIsReported() {
        #expect(throws: RTPError.wrongPacketType) { try RTCPSenderReport(parsing: Self.pionRR.span.bytes) }
        #expect(throws: RTPError.wrongPacketType) { try RTCPGenericNack(parsing: Self.pionRR.span.bytes) }
    }
}
