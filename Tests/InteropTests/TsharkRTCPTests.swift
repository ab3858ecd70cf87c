#if canImport(Glibc)
    import Testing
    import Foundation
    import MediaCore

    @Suite(.enabled(if: Tshark.available, "tshark not installed"))
    struct TsharkRTCPTests {
        static func bytes(_ packets: [RTCPPacket]) -> [UInt8] { RTCPCompound.bytes(packets) }

        @Test func compoundPacketsMatchTshark() throws {
            let sr = RTCPSenderReport(
                ssrc: 0x1111_1111, ntpTime: NTPTime(unixNanoseconds: 1_764_000_000_500_000_000), rtpTime: 90_000,
                packetCount: 1234, octetCount: 987_654,
                reports: [
                    RTCPReportBlock(
                        ssrc: 0x2222_2222, fractionLost: 64, cumulativeLost: -3,
                        extendedHighestSequence: 0x0002_0010, jitter: 77,
                        lastSenderReport: 0x1234_5678, delaySinceLastSenderReport: 0x0001_8000)
                ])
            let nack = RTCPGenericNack(senderSSRC: 0x2222_2222, mediaSSRC: 0x1111_1111, lost: [65534, 65535, 0, 5, 40])
            let datagrams: [[UInt8]] = [
                Self.bytes([
                    .senderReport(sr), .sourceDescription(RTCPSourceDescription(ssrc: 0x1111_1111, cname: "revue@sender")),
                ]),
                Self.bytes([
                    .receiverReport(
                        RTCPReceiverReport(
                            ssrc: 0x2222_2222, reports: [RTCPReportBlock(ssrc: 0x1111_1111, cumulativeLost: 100_000)])),
                    .genericNack(nack),
                    .pictureLossIndication(RTCPPictureLossIndication(senderSSRC: 0x2222_2222, mediaSSRC: 0x1111_1111)),
                ]),
                Self.bytes([
                    .receiverReport(RTCPReceiverReport(ssrc: 0x2222_2222)),
                    .fullIntraRequest(
                        RTCPFullIntraRequest(senderSSRC: 0x2222_2222, entries: [.init(ssrc: 0x1111_1111, sequenceNumber: 7)])),
                    .receiverEstimatedMaxBitrate(
                        RTCPReceiverEstimatedMaxBitrate(
                            senderSSRC: 0x2222_2222, bitrate: 2_500_000, ssrcs: [0x1111_1111, 0x3333_3333])),
                    .goodbye(RTCPGoodbye(sources: [0x2222_2222], reason: "call ended")),
                ]),
            ]
            let (dir, file) = try Tshark.capture(datagrams, port: 5007)
            defer { try? FileManager.default.removeItem(at: dir) }
            let decode = ["udp.port==5007,rtcp"]
            let rows = try Tshark.fields(
                file, decode: decode,
                [
                    "rtcp.pt", "rtcp.sender.packetcount", "rtcp.sender.octetcount", "rtcp.ssrc.fraction", "rtcp.ssrc.cum_nr",
                    "rtcp.ssrc.ext_high", "rtcp.ssrc.jitter", "rtcp.ssrc.lsr", "rtcp.ssrc.dlsr", "rtcp.sdes.text",
                    "rtcp.rtpfb.nack_pid", "rtcp.rtpfb.nack_blp", "rtcp.psfb.fmt", "rtcp.psfb.fir.fci.csn",
                    "rtcp.psfb.remb.fci.br_exp", "rtcp.psfb.remb.fci.ssrc", "rtcp.psfb.remb.fci.br_mantissa",
                ])
            try #require(rows.count == 3)
            #expect(rows[0][0] == "200,202")
            #expect(rows[0][1] == "1234" && rows[0][2] == "987654")
            #expect(rows[0][3] == "64")
            #expect(rows[0][4] == "-3")
            #expect(rows[0][5] == "\(0x0002_0010)")
            #expect(rows[0][6] == "77")
            #expect(rows[0][7] == "\(0x1234_5678)")
            #expect(rows[0][8] == "\(0x0001_8000)")
            #expect(rows[0][9] == "revue@sender")
            #expect(rows[1][0] == "201,205,206")
            #expect(rows[1][4] == "100000")
            let pids = rows[1][10].split(separator: ",").map { Int($0) }
            let blps = rows[1][11].split(separator: ",").map { UInt16($0.dropFirst(2), radix: 16) }
            // tshark lists every lost packet it expands from PID + BLP (without wrapping at 2^16).
            #expect(pids.map { $0.map { UInt16($0 % 65536) } } == nack.lostSequenceNumbers)
            #expect(blps == nack.pairs.map { $0.lostBitmask })
            #expect(rows[1][12] == "1")
            #expect(rows[2][0] == "201,206,206,203")
            #expect(rows[2][12] == "4,15")
            #expect(rows[2][13] == "7")
            let (e, m) = RTCPReceiverEstimatedMaxBitrate.encode(bitrate: 2_500_000)
            #expect(rows[2][14] == "\(e)" && rows[2][16] == "\(m)", "\(rows[2])")
            #expect(UInt64(m) << UInt64(e) == 2_500_000)
            #expect(rows[2][15] == "0x11111111,0x33333333")
            let verbose = try Tshark.verbose(file, decode: decode)
            #expect(Tshark.problems(verbose).isEmpty, "tshark reported: \(Tshark.problems(verbose).prefix(5))")
            #expect(verbose.contains("call ended"))
        }

        @Test func transportFeedbackMatchesTshark() throws {
            typealias R = RTCPTransportFeedback.PacketResult
            var packets: [R] = [R(receiveDelta: 10), R(receiveDelta: nil), R(receiveDelta: -40), R(receiveDelta: 1000)]
            packets += [R](repeating: R(receiveDelta: 4), count: 30)  // run length chunk
            packets += [0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 1, 1, 0].map { R(receiveDelta: $0 == 1 ? 20 : nil) }  // 1-bit vector
            let fb = RTCPTransportFeedback(
                senderSSRC: 0x2222_2222, mediaSSRC: 0x1111_1111, baseSequenceNumber: 65_520,
                referenceTime: 123_456, feedbackPacketCount: 17, packets: packets)
            let rr = RTCPPacket.receiverReport(RTCPReceiverReport(ssrc: 0x2222_2222))
            let (dir, file) = try Tshark.capture([Self.bytes([rr, .transportFeedback(fb)])], port: 5011)
            defer { try? FileManager.default.removeItem(at: dir) }
            let decode = ["udp.port==5011,rtcp"]
            let rows = try Tshark.fields(
                file, decode: decode,
                [
                    "rtcp.pt", "rtcp.rtpfb.fmt", "rtcp.rtpfb.transportcc.baseseq", "rtcp.rtpfb.transportcc.statuscount",
                    "rtcp.rtpfb.transportcc.reftime", "rtcp.rtpfb.transportcc.pktcount", "rtcp.rtpfb.transportcc.recv_delta",
                ])
            try #require(rows.count == 1)
            let r = rows[0]
            #expect(r[0] == "201,205" && r[1] == "15")
            #expect(r[2] == "65520" && r[3] == "\(packets.count)")
            #expect(r[4] == "123456" && r[5] == "17", "\(r)")
            // tshark lists one receive delta per received packet.
            #expect(r[6].split(separator: ",").count == packets.filter { $0.receiveDelta != nil }.count, "\(r[6])")
            let verbose = try Tshark.verbose(file, decode: decode)
            #expect(Tshark.problems(verbose).isEmpty, "tshark reported: \(Tshark.problems(verbose).prefix(5))")
        }

        @Test func problemDetectorFlagsABrokenPacket() throws {
            // Control for the checks above: an RR whose length field claims more than the datagram
            // holds must be flagged by tshark and by our parser.
            var rr = Self.bytes([.receiverReport(RTCPReceiverReport(ssrc: 1, reports: [RTCPReportBlock(ssrc: 2)]))])
            rr[3] = 20
            let (dir, file) = try Tshark.capture([rr], port: 5009)
            defer { try? FileManager.default.removeItem(at: dir) }
            #expect(!Tshark.problems(try Tshark.verbose(file, decode: ["udp.port==5009,rtcp"])).isEmpty)
            #expect(throws: RTPError.badRTCPLength) { try RTCPCompound.parse(rr.span.bytes) }
        }
    }
#endif
