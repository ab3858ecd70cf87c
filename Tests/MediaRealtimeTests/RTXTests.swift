import Foundation
import Glibc
import MediaCore
import MediaTestSupport
import MediaTools
import Synchronization
import Testing

@Suite(.serialized) struct RTXTests {
    /// An RTP packet with CSRCs, a one-byte header extension, the marker bit and a payload.
    static func original() -> [UInt8] {
        var h = RTPHeader(marker: true, payloadType: 96, sequenceNumber: 0xBEEF, timestamp: 0x0102_0304, ssrc: 0xAABB_CCDD)
        h.csrcs = [0x1111_1111]
        h.extensions.setAbsSendTime(RTPAbsSendTime(rawValue: 0x123456), id: 3)
        let payload: [UInt8] = (0..<100).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
        var out: [UInt8] = []
        out.append(capacity: 200) { _ = RTPPacket.marshal(header: h, payload: payload.span.bytes, into: &$0) }
        return out
    }

    @Test func wrapWritesTheRFC4588LayoutAndUnwrapRestoresTheOriginalExactly() throws {
        let original = Self.original()
        let headerSize = try RTPPacket(parsing: original.span.bytes).headerSize
        #expect(headerSize == 12 + 4 + 8)  // fixed + one CSRC + extension header and one word
        var rtx = [UInt8](repeating: 0, count: 300)
        let n = try #require(
            original.withUnsafeBytes { o in
                rtx.withUnsafeMutableBytes {
                    RTXPacket.wrap(o, payloadType: 97, sequenceNumber: 0x0102, ssrc: 0x5566_7788, into: $0)
                }
            })
        #expect(n == original.count + 2)
        // RFC 4588 §4 by hand: V=2, X and CC as the original; M kept with the RTX payload type;
        // the RTX stream's sequence number and SSRC; the original timestamp, CSRC and extension;
        // then the OSN (0xBEEF) and the original payload.
        #expect(rtx[0] == original[0])
        #expect(rtx[1] == 0x80 | 97)
        #expect(rtx[2] == 0x01 && rtx[3] == 0x02)
        #expect(Array(rtx[4..<8]) == [0x01, 0x02, 0x03, 0x04])
        #expect(Array(rtx[8..<12]) == [0x55, 0x66, 0x77, 0x88])
        #expect(Array(rtx[12..<headerSize]) == Array(original[12..<headerSize]))
        #expect(rtx[headerSize] == 0xBE && rtx[headerSize + 1] == 0xEF)
        #expect(Array(rtx[(headerSize + 2)..<n]) == Array(original[headerSize...]))
        // Our parser reads it as an ordinary RTP packet of the RTX stream.
        try rtx.withUnsafeBytes { raw in
            let p = try RTPPacket(parsing: UnsafeRawBufferPointer(rebasing: raw[0..<n]).bytes)
            #expect(p.header.payloadType == 97 && p.header.ssrc == 0x5566_7788 && p.header.marker)
            #expect(p.header.extensions.absSendTime(id: 3)?.rawValue == 0x123456)
            #expect(RTXPacket.originalSequenceNumber(UnsafeRawBufferPointer(rebasing: raw[0..<n]).bytes) == 0xBEEF)
        }
        var back = [UInt8](repeating: 0, count: 300)
        let m = try #require(
            rtx.withUnsafeBytes { r in
                back.withUnsafeMutableBytes {
                    RTXPacket.unwrap(UnsafeRawBufferPointer(rebasing: r[0..<n]), payloadType: 96, ssrc: 0xAABB_CCDD, into: $0)
                }
            })
        #expect(Array(back[0..<m]) == original)
    }

    @Test func unwrapRefusesPacketsWithoutAnOriginalSequenceNumber() {
        var out = [UInt8](repeating: 0, count: 64)
        func unwrap(_ bytes: [UInt8]) -> Int? {
            bytes.withUnsafeBytes { b in out.withUnsafeMutableBytes { RTXPacket.unwrap(b, payloadType: 96, ssrc: 1, into: $0) } }
        }
        let header: [UInt8] = [0x80, 97, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9]
        #expect(unwrap(header) == nil, "no payload at all")
        #expect(unwrap(header + [0xAB]) == nil, "one byte is not an OSN")
        #expect(unwrap([0xA0] + header.dropFirst() + [0, 0, 0, 4]) == nil, "padding only (a probe)")
        #expect(unwrap([0xA0] + header.dropFirst() + [0xFF]) == nil, "padding count past the header")
        #expect(unwrap([0x90] + header.dropFirst() + [0xBE, 0xDE, 0, 9]) == nil, "extension past the end")
        #expect(unwrap([0x40] + header.dropFirst() + [1, 2]) == nil, "version 1")
        #expect(unwrap(header + [0x12, 0x34]) == 12, "an empty original payload is fine")
        #expect(out[2] == 0x12 && out[3] == 0x34 && out[1] == 96)
    }

    /// A NACKed packet of a stream with RTX leaves on the RTX SSRC and payload type with the OSN;
    /// without RTX the original bytes are resent.
    @Test(arguments: [true, false])
    func nackedPacketsAreResentAsRTXOnlyWhenConfigured(rtx: Bool) throws {
        var config = sendTestVideoConfiguration()
        if rtx { config.rtxPayloadType = 97; config.rtxSSRC = 0x0102_0304 }
        let sink = MemoryPacketSink()
        let stream = try VideoSendStream(configuration: config, sink: sink)
        stream.startWithoutWorker()
        for i in 0..<3 {
            sendTestCapture(stream.capturer, sendTestFrame(i, width: 320, height: 240), timeStampNs: Int64(i) * 33_333_333)
            stream.pump()
        }
        let sent = sink.takePackets()
        #expect(sent.count >= 3)
        let headers = try sent.map { p in try RTPPacket(parsing: p.span.bytes).header }
        let asked = [headers[1].sequenceNumber, headers[2].sequenceNumber]
        stream.handleNack(asked)
        stream.pump()
        stream.handleNack([headers[1].sequenceNumber])
        stream.pump()
        let resent = sink.takePackets()
        stream.stop()
        #expect(resent.count == 3)
        #expect(stream.statistics.outbound.retransmittedPacketsSent == 3)
        for (k, packet) in resent.enumerated() {
            let index = k == 2 ? 1 : k + 1
            if rtx {
                try packet.withUnsafeBytes { raw in
                    let p = try RTPPacket(parsing: raw.bytes)
                    #expect(p.header.ssrc == 0x0102_0304 && p.header.payloadType == 97)
                    #expect(p.header.timestamp == headers[index].timestamp && p.header.marker == headers[index].marker)
                    #expect(RTXPacket.originalSequenceNumber(raw.bytes) == headers[index].sequenceNumber)
                    let original = try sent[index].withUnsafeBytes { try RTPPacket(parsing: $0.bytes) }
                    #expect(Array(raw[p.payloadRange].dropFirst(2)) == Array(sent[index][original.payloadRange]))
                }
            } else {
                #expect(packet == sent[index])
            }
        }
        if rtx {
            // The RTX stream numbers its own packets consecutively.
            let seqs = try resent.map { p in try RTPPacket(parsing: p.span.bytes).header.sequenceNumber }
            #expect(seqs[1] == seqs[0] &+ 1 && seqs[2] == seqs[1] &+ 1)
            // Room for the OSN: an RTX packet stays within the MTU.
            #expect(resent.allSatisfy { $0.count <= config.mtu })
        }
    }

    /// An independent parser: GStreamer's `rtprtxreceive` (RFC 4588 receiver) takes our stream
    /// with holes plus our RTX packets for them from a pcap and gives back the original packets,
    /// byte for byte. Skips when gst-launch-1.0 is not installed.
    @Test func gstreamerRtxReceiveRestoresOurRTXPacketsToTheOriginals() throws {
        guard ExternalTool.path("gst-launch-1.0") != nil else {
            print("gst-launch-1.0 not installed: skipping the GStreamer RTX check")
            return
        }
        var config = sendTestVideoConfiguration()
        config.ssrc = 0x1111_2222
        config.rtxPayloadType = 97
        config.rtxSSRC = 0x3333_4444
        let sink = MemoryPacketSink()
        let stream = try VideoSendStream(configuration: config, sink: sink)
        stream.startWithoutWorker()
        for i in 0..<4 {
            sendTestCapture(stream.capturer, sendTestFrame(i, width: 320, height: 240), timeStampNs: Int64(i) * 33_333_333)
            stream.pump()
        }
        let media = sink.takePackets()
        let seqs = try media.map { p in try RTPPacket(parsing: p.span.bytes).header.sequenceNumber }
        let lost = [1, 4, media.count - 2].map { seqs[$0] }
        stream.handleNack(lost)
        stream.pump()
        let rtx = sink.takePackets()
        stream.stop()
        #expect(rtx.count == 3)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
            "revue-rtx-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        ).path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let pcap = dir + "/in.pcap", out = dir + "/out.rtpstream"
        let w = try PcapWriter(path: pcap)
        let from = PcapEndpoint(192, 0, 2, 1, port: 40_000), to = PcapEndpoint(192, 0, 2, 2, port: 50_000)
        var ns: UInt64 = 1_000_000_000
        for (p, seq) in zip(media, seqs) where !lost.contains(seq) {
            try p.withUnsafeBytes { try w.write($0, from: from, to: to, timestampNs: ns) }
            ns += 1_000_000
        }
        for p in rtx {
            try p.withUnsafeBytes { try w.write($0, from: from, to: to, timestampNs: ns) }
            ns += 1_000_000
        }
        try w.finish()
        let status = try ExternalTool.run(
            "gst-launch-1.0",
            [
                "-q", "filesrc", "location=\(pcap)", "!",
                "pcapparse", "caps=application/x-rtp,media=video,clock-rate=90000,encoding-name=VP8,payload=96", "!",
                "rtprtxreceive", "payload-type-map=application/x-rtp-pt-map,96=(uint)97",
                "ssrc-map=application/x-rtp-ssrc-map,\(config.ssrc)=(uint)\(config.rtxSSRC)", "!",
                "rtpstreampay", "!", "filesink", "location=\(out)",
            ])
        #expect(status == 0)
        // rtpstreampay: RFC 4571 framing, a 16-bit length before each packet.
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: out)))
        var restored: [UInt16: [UInt8]] = [:]
        var at = 0
        while at + 2 <= bytes.count {
            let n = Int(bytes[at]) << 8 | Int(bytes[at + 1])
            let p = Array(bytes[(at + 2)..<(at + 2 + n)])
            at += 2 + n
            let seq = UInt16(p[2]) << 8 | UInt16(p[3])
            if lost.contains(seq) { restored[seq] = p }
        }
        #expect(restored.count == 3, "GStreamer restored \(restored.count) of 3")
        for (seq, original) in zip(seqs, media) where lost.contains(seq) {
            #expect(restored[seq] == original, "packet \(seq) as GStreamer restored it from our RTX")
        }
    }

    @Test func sdpNegotiatesRTXWithAptAndAnFIDGroup() throws {
        var m = SDPMediaDescription(
            type: "video", port: 5004, proto: "RTP/SAVPF", payloadType: 96, encoding: "VP8", clockRate: 90_000)
        m.ssrcs = [SDPSSRCAttribute(ssrc: 1111, attribute: "cname", value: "revue")]
        m.addRetransmission(payloadType: 97, for: 96, mediaSSRC: 1111, rtxSSRC: 2222)
        let sdp = SDPSessionDescription(origin: SDPOrigin(sessionID: 1, address: "127.0.0.1"), media: [m])
        let text = sdp.text
        #expect(text.contains("m=video 5004 RTP/SAVPF 96 97\r\n"))
        #expect(text.contains("a=rtpmap:97 rtx/90000\r\n"))
        #expect(text.contains("a=fmtp:97 apt=96\r\n"))
        #expect(text.contains("a=ssrc-group:FID 1111 2222\r\n"))
        #expect(text.contains("a=ssrc:2222 cname:revue\r\n"))
        let parsed = try SDPSessionDescription(parsing: text)
        #expect(parsed == sdp)
        #expect(parsed.media[0].retransmissionPayloadType(for: 96) == 97)
        #expect(parsed.media[0].retransmissionPayloadType(for: 98) == nil)
        #expect(parsed.media[0].retransmissionSSRC(for: 1111) == 2222)
        // As browsers write it (LF ends, other payload types around).
        let browser = """
            v=0
            o=- 1 2 IN IP4 127.0.0.1
            s=-
            t=0 0
            m=video 9 UDP/TLS/RTP/SAVPF 96 97 98 99
            a=rtpmap:96 VP8/90000
            a=rtpmap:97 rtx/90000
            a=fmtp:97 apt=96
            a=rtpmap:98 VP9/90000
            a=rtpmap:99 rtx/90000
            a=fmtp:99 apt=98
            a=ssrc-group:FID 10 20
            a=ssrc:10 cname:x
            a=ssrc:20 cname:x

            """
        let b = try SDPSessionDescription(parsing: browser).media[0]
        #expect(b.retransmissionPayloadType(for: 96) == 97 && b.retransmissionPayloadType(for: 98) == 99)
        #expect(b.ssrcGroups == [SDPSSRCGroup(semantics: "FID", ssrcs: [10, 20])])
        #expect(throws: ContainerError.self) {
            try SDPSessionDescription(parsing: browser.replacingOccurrences(of: "FID 10 20", with: "FID 10 x"))
        }
    }
}

/// RTX retransmissions on the send worker allocate nothing once warm (plain RTP, so nothing of
/// libsrtp's own is counted): wrap, sequence, write through the pacer to a UDP sink.
@Suite(.serialized) struct RTXAllocationTests {
    @Test func rtxResendsAllocateNothingOnceWarm() throws {
        let (sink, receiver) = try SendPipelineAllocationTests.udpSink()
        var config = sendTestVideoConfiguration(width: 320, height: 240)
        config.encoder.bitrate = 800_000
        config.rtxPayloadType = 97
        let stream = try VideoSendStream(configuration: config, sink: sink)
        stream.startWithoutWorker()
        let frames = (0..<8).map { sendTestFrame($0, width: 320, height: 240) }
        var n = 0
        func oneFrame(nack: UInt16?) {
            sendTestCapture(stream.capturer, frames[n % 8], timeStampNs: Int64(n) * 33_333_333)
            if let nack { stream.handleNack(CollectionOfOne(nack)) }
            stream.pump()
            n += 1
        }
        for k in 0..<15 { oneFrame(nack: UInt16(truncatingIfNeeded: 65_530 + k)) }  // warm, RTX SSRC seen
        let before = stream.statistics.outbound
        let allocations = AllocationCounter.count {
            for k in 0..<20 { oneFrame(nack: UInt16(truncatingIfNeeded: 65_545 + k)) }
        }
        let after = stream.statistics.outbound
        stream.stop()
        #expect(after.framesEncoded == before.framesEncoded + 20)
        #expect(after.retransmittedPacketsSent == before.retransmittedPacketsSent + 20)
        #expect(allocations == 0, "\(allocations) allocations in 20 frames with 20 RTX resends")
        withExtendedLifetime(receiver) {}
    }
}
