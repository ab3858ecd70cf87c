#if canImport(Glibc)
    import Testing
    import Foundation
    import MediaCore
    import MediaTools

    extension TsharkRTPTests {
        /// One audio send stream made as a WebRTC connection makes it (keys and IDs given late),
        /// its SRTP packets read back by tshark: the header extension elements carry exactly the
        /// negotiated IDs (the RTP header, extensions included, is authenticated but not
        /// encrypted by SRTP), an extension a later exchange dropped disappears from the next
        /// packets, and the transport-wide numbers count up by one per packet. The mid (RFC 8843)
        /// goes in its own element, exactly its bytes, and a mid too long for the reserved room
        /// (over 4 bytes) is left out rather than cut.
        @Test func webRTCStreamSendsOnlyTheNegotiatedExtensionsUnderThePeersIDs() throws {
            let sink = MemoryPacketSink()
            let late = LateSendProtection(midReservedID: PeerConnectionHeaderExtensions.reserved.mid)
            var c = AudioSendStream.Configuration()
            c.srtp = nil
            c.lateProtection = late
            let reserved = PeerConnectionHeaderExtensions.reserved
            c.audioLevelExtensionID = reserved.audioLevel
            c.absSendTimeExtensionID = reserved.absSendTime
            c.transportSequence = (reserved.transportSequence, TransportSequenceNumbers())
            c.ssrc = 0x1234_5678
            let stream = try AudioSendStream(configuration: c, sink: sink)
            stream.startWithoutWorker()
            defer { stream.stop() }
            let context = try SRTPContext(material: .random(for: .aesCM128HMACSHA1_80), direction: .outbound)
            late.provide(context: context, payloadType: 109)

            var timeNs: Int64 = 1_000_000_000
            func send(frames: Int) -> [[UInt8]] {
                for _ in 0..<frames {
                    // 20 ms of a 440 Hz tone at half scale (about -9 dBov).
                    let pcm = (0..<960).map { i in
                        Int16(16_384 * sin(2 * Double.pi * 440 * Double(i) / 48_000))
                    }
                    stream.capturer.capture(pcm.span, sampleRate: 48_000, channels: 1, timeStampNs: timeNs)
                    timeNs += 20_000_000
                    stream.pump()
                }
                return sink.takePackets()
            }
            // The first exchange: Chromium's IDs (1, 2, 3) would be too easy; a peer with its own.
            late.setExtensionIDs(NegotiatedHeaderExtensionIDs(audioLevel: 10, absSendTime: 12, transportSequence: 5, mid: 3))
            late.setMid("a1")
            let first = send(frames: 5)
            // The section's mid is too long to carry here: the mid element is left out.
            late.setMid("audio0")
            let firstLongMid = send(frames: 5)
            late.setMid("a1")
            // A renegotiation dropped abs-send-time and moved transport-cc.
            late.setExtensionIDs(NegotiatedHeaderExtensionIDs(audioLevel: 10, absSendTime: 0, transportSequence: 7))
            let second = send(frames: 10)
            // An exchange that kept none.
            late.setExtensionIDs(NegotiatedHeaderExtensionIDs())
            let third = send(frames: 10)
            try #require(
                first.count >= 4 && firstLongMid.count >= 4 && second.count >= 8 && third.count >= 8,
                "\(first.count) \(firstLongMid.count) \(second.count) \(third.count)")

            let (dir, file) = try Tshark.capture(first + firstLongMid + second + third, port: 5008)
            defer { try? FileManager.default.removeItem(at: dir) }
            let rows = try Tshark.fields(
                file, decode: ["udp.port==5008,rtp"],
                ["rtp.seq", "rtp.p_type", "rtp.ext.rfc5285.id", "rtp.ext.rfc5285.len", "rtp.ext.rfc5285.data"])
            try #require(rows.count == first.count + firstLongMid.count + second.count + third.count)
            func elements(_ r: [String]) -> [(id: Int, data: String)] {
                let ids = r[2].split(separator: ",").compactMap { Int($0) }
                let data = r[4].split(separator: ",", omittingEmptySubsequences: false).map(String.init)
                return ids.enumerated().map { ($0.element, $0.offset < data.count ? data[$0.offset] : "") }
            }
            var transportNumbers: [Int] = []
            for (i, r) in rows.enumerated() {
                #expect(r[1] == "109", "the negotiated payload type: \(r)")
                let e = elements(r)
                let ids = e.map(\.id).sorted()
                if i < first.count {
                    #expect(ids == [3, 5, 10, 12], "first exchange, packet \(i): \(r)")
                    #expect(e.first { $0.id == 3 }?.data == "6131", "the mid \"a1\", packet \(i): \(r)")
                } else if i < first.count + firstLongMid.count {
                    #expect(ids == [5, 10, 12], "a 6-byte mid left out, packet \(i): \(r)")
                } else if i < first.count + firstLongMid.count + second.count {
                    #expect(ids == [7, 10], "abs-send-time left out after the renegotiation, packet \(i): \(r)")
                } else {
                    #expect(ids.isEmpty, "nothing negotiated, nothing sent, packet \(i): \(r)")
                }
                if let level = e.first(where: { $0.id == 10 }), let byte = UInt8(level.data, radix: 16) {
                    // RFC 6464: -dBov in the low 7 bits; a half-scale tone is about 9 dB below full scale.
                    #expect((byte & 0x7F) >= 6 && (byte & 0x7F) <= 12, "audio level \(level.data)")
                }
                if let t = e.first(where: { $0.id == 5 || $0.id == 7 }), let n = Int(t.data, radix: 16) {
                    transportNumbers.append(n)
                }
                if let abs = e.first(where: { $0.id == 12 }) { #expect(abs.data.count == 6, "3 bytes of abs-send-time") }
            }
            #expect(transportNumbers.count == first.count + firstLongMid.count + second.count)
            #expect(zip(transportNumbers, transportNumbers.dropFirst()).allSatisfy { $1 == $0 + 1 }, "\(transportNumbers)")
            let problems = Tshark.problems(try Tshark.verbose(file, decode: ["udp.port==5008,rtp"]))
            #expect(problems.isEmpty, "tshark reported: \(problems.prefix(5))")
            print(
                "TsharkRTPTests header extensions: \(rows.count) packets; elements of the first \(rows[0][2]) (\(rows[0][4])), after the renegotiation \(rows[first.count + firstLongMid.count][2]), with none negotiated '\(rows[rows.count - 1][2])'; transport-wide numbers \(transportNumbers.first ?? -1)...\(transportNumbers.last ?? -1)"
            )
        }
    }
#endif
