import MediaCore
import Testing

@Suite struct RTPDemultiplexerTests {
    @Test func classifiesEveryFirstByteByRFC7983() {
        for b in 0...255 {
            let kind = RTPDemultiplexer.classify([UInt8(b), 96])
            let expected: DatagramKind
            switch b {
            case 0...3: expected = .stun
            case 16...19: expected = .zrtp
            case 20...63: expected = .dtls
            case 64...79: expected = .turnChannel
            case 128...191: expected = .rtp
            default: expected = .other
            }
            #expect(kind == expected, "first byte \(b)")
        }
    }

    @Test func separatesRTCPFromRTPByPacketTypeRFC5761() {
        for second in 0...255 {
            let kind = RTPDemultiplexer.classify([0x80, UInt8(second)])
            #expect(kind == ((192...223).contains(second) || (64...95).contains(second) ? .rtcp : .rtp), "byte 2 = \(second)")
        }
        #expect(
            RTPDemultiplexer.classify(rtcpBytes([.pictureLossIndication(RTCPPictureLossIndication(senderSSRC: 1, mediaSSRC: 2))]))
                == .rtcp)
        #expect(RTPDemultiplexer.classify(RTPPacketTests.pionPacket) == .rtp)
    }

    @Test func emptyAndOneByteDatagramsAreOther() {
        #expect(RTPDemultiplexer.classify([]) == .other)
        #expect(RTPDemultiplexer.classify([0x80]) == .other)
        #expect(RTPDemultiplexer.classify([0x01]) == .stun)
    }
}
