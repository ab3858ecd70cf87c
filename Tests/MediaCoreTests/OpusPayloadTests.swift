import MediaCore
import Testing

@Suite struct OpusPayloadTests {
    @Test func onePacketPerFrameWithCallerMarker() throws {
        let opus: [UInt8] = [0x78] + rtpTestBytes(80, seed: 2)  // TOC: config 15 (hybrid FB 20 ms), code 0
        var header = RTPHeader(marker: true, payloadType: 111, timestamp: 48_000, ssrc: 3)
        var seq = RTPSequencer(initial: 65535)
        let packets = writeRTPPackets(
            OpusPayload.packetize(frameSize: opus.count, maxPayloadSize: 1188), of: opus, header: &header, sequencer: &seq)
        #expect(packets.count == 1)
        let packet = packets[0]
        try withParsedRTP(packet) { p throws in
            #expect(p.header.marker)  // audio: marker is the caller's (first packet after DTX)
            #expect(p.header.sequenceNumber == 65535)
            #expect(Array(packet[try OpusPayload.depacketize(p)]) == opus)
            #expect(try OpusPayload.sampleCount(packet: packet.span.bytes.extracting(p.payloadRange)) == 960)
        }
        #expect(seq.next() == 0)
    }

    @Test func sampleCountFollowsTOC() throws {
        func count(_ b: [UInt8]) throws -> Int { try OpusPayload.sampleCount(packet: b.span.bytes) }
        #expect(try count([0 << 3]) == 480)  // SILK NB 10 ms
        #expect(try count([3 << 3]) == 2880)  // SILK NB 60 ms
        #expect(try count([12 << 3]) == 480)  // hybrid SWB 10 ms
        #expect(try count([16 << 3]) == 120)  // CELT NB 2.5 ms
        #expect(try count([31 << 3]) == 960)  // CELT FB 20 ms
        #expect(try count([31 << 3 | 1, 0]) == 1920)  // code 1: two frames
        #expect(try count([31 << 3 | 3, 6]) == 5760)  // code 3: six 20 ms frames = 120 ms
        #expect(throws: RTPError.badPayloadDescriptor) { try count([31 << 3 | 3, 7]) }  // 140 ms
        #expect(throws: RTPError.badPayloadDescriptor) { try count([31 << 3 | 3, 0]) }  // zero frames
        #expect(throws: RTPError.truncated) { try count([31 << 3 | 3]) }
        #expect(throws: RTPError.truncated) { try count([]) }
    }

    @Test func emptyPayloadIsRejected() throws {
        let bytes = marshalRTP(RTPHeader(payloadType: 111, ssrc: 1), [])
        try withParsedRTP(bytes) { p in
            #expect(throws: RTPError.emptyPayload) { try OpusPayload.depacketize(p) }
        }
    }
}
