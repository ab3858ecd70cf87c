import MediaCore
import Testing

@Suite struct RTPHeaderExtensionsTests {
    static func packet(withExtension ext: [UInt8]) -> [UInt8] {
        [0x90, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1] + ext + [0x42]
    }

    // RFC 8285 §4.2 figure: elements with L=0 (1 byte), L=1 (2 bytes), two padding bytes, L=3 (4 bytes).
    static let rfcOneByte: [UInt8] = [
        0xBE, 0xDE, 0x00, 0x03,
        0x10, 0xA1, 0x21, 0xB1,
        0xB2, 0x00, 0x00, 0x33,
        0xC1, 0xC2, 0xC3, 0xC4,
    ]

    // RFC 8285 §4.3 figure: L=0, L=1, one padding byte, L=4.
    static let rfcTwoByte: [UInt8] = [
        0x10, 0x00, 0x00, 0x03,
        0x01, 0x00, 0x02, 0x01,
        0xB1, 0x00, 0x03, 0x04,
        0xC1, 0xC2, 0xC3, 0xC4,
    ]

    @Test func parsesRFC8285OneByteExample() throws {
        let bytes = Self.packet(withExtension: Self.rfcOneByte)
        try withParsedRTP(bytes) { p in
            let e = p.header.extensions
            #expect(e.form == .oneByte)
            #expect(e.elementIDs == [1, 2, 3])
            #expect(e.data(id: 1) == [0xA1])
            #expect(e.data(id: 2) == [0xB1, 0xB2])
            #expect(e.data(id: 3) == [0xC1, 0xC2, 0xC3, 0xC4])
            #expect(Array(bytes[p.payloadRange]) == [0x42])
        }
    }

    @Test func parsesRFC8285TwoByteExample() throws {
        try withParsedRTP(Self.packet(withExtension: Self.rfcTwoByte)) { p in
            let e = p.header.extensions
            #expect(e.form == .twoByte)
            #expect(e.elementIDs == [1, 2, 3])
            #expect(e.data(id: 1) == [])
            #expect(e.data(id: 2) == [0xB1])
            #expect(e.data(id: 3) == [0xC1, 0xC2, 0xC3, 0xC4])
        }
    }

    @Test func writesCanonicalOneByteLayout() {
        var e = RTPHeaderExtensions()
        let third: [UInt8] = [0xC1, 0xC2, 0xC3, 0xC4]
        e.set(id: 1, [0xA1]); e.set(id: 2, [0xB1, 0xB2]); e.set(id: 3, bytes: third.span.bytes)
        var out = [UInt8](repeating: 0xEE, count: e.marshalSize)
        _ = out.withUnsafeMutableBytes { $0.appending { e.marshal(into: &$0) } }
        // Same elements as the RFC figure without the interior padding; zero padded at the end.
        #expect(out == [0xBE, 0xDE, 0x00, 0x03, 0x10, 0xA1, 0x21, 0xB1, 0xB2, 0x33, 0xC1, 0xC2, 0xC3, 0xC4, 0x00, 0x00])
    }

    @Test func switchesToTwoByteFormWhenAnElementNeedsIt() throws {
        var e = RTPHeaderExtensions()
        e.set(id: 1, [])  // length 0 only exists in the two-byte form
        e.set(id: 2, [0xB1])
        e.set(id: 3, [0xC1, 0xC2, 0xC3, 0xC4])
        #expect(e.effectiveForm == .twoByte)
        var out = [UInt8](repeating: 0xEE, count: e.marshalSize)
        _ = out.withUnsafeMutableBytes { $0.appending { e.marshal(into: &$0) } }
        #expect(out == [0x10, 0x00, 0x00, 0x03, 0x01, 0x00, 0x02, 0x01, 0xB1, 0x03, 0x04, 0xC1, 0xC2, 0xC3, 0xC4, 0x00])
        var big = RTPHeaderExtensions()
        big.set(id: 200, [1])  // ID over 14
        #expect(big.effectiveForm == .twoByte)
        var long = RTPHeaderExtensions()
        long.set(id: 5, [UInt8](repeating: 9, count: 17))  // over 16 bytes
        #expect(long.effectiveForm == .twoByte)
        // Both round-trip through a packet.
        for x in [e, big, long] {
            let bytes = marshalRTP(RTPHeader(extensions: x), [1])
            try withParsedRTP(bytes) { p in #expect(p.header.extensions == x) }
        }
    }

    @Test func oneByteID15StopsProcessing() throws {
        // RFC 8285 §4.2: ID 15 ends processing; its length is ignored.
        let ext: [UInt8] = [0xBE, 0xDE, 0x00, 0x02, 0x10, 0x77, 0xF3, 0x99, 0x20, 0x55, 0x00, 0x00]
        try withParsedRTP(Self.packet(withExtension: ext)) { p in
            #expect(p.header.extensions.elementIDs == [1])
        }
    }

    @Test func oneByteID0WithALengthStopsProcessing() throws {
        // 0x00 is a padding byte; 0x02 (ID 0, three bytes) is no element: parsing stops there, so
        // the ID 2 element after it is not read and nothing is stored under ID 0.
        let ext: [UInt8] = [0xBE, 0xDE, 0x00, 0x03, 0x10, 0x77, 0x00, 0x02, 0xAA, 0xBB, 0xCC, 0x20, 0x55, 0x00, 0x00, 0x00]
        try withParsedRTP(Self.packet(withExtension: ext)) { p in
            #expect(p.header.extensions.elementIDs == [1])
        }
    }

    @Test func audioLevelMatchesRFC6464Layout() {
        #expect(RTPAudioLevel(voiceActivity: true, level: 0x2A).byte == 0xAA)
        #expect(RTPAudioLevel(voiceActivity: false, level: 127).byte == 0x7F)
        #expect(RTPAudioLevel(voiceActivity: false, level: 500).level == 127)
        #expect(RTPAudioLevel(voiceActivity: false, dBov: -30.4).level == 30)
        #expect(RTPAudioLevel(voiceActivity: false, dBov: -.infinity).level == 127)
        #expect(RTPAudioLevel(byte: 0x85) == RTPAudioLevel(voiceActivity: true, level: 5))
        var e = RTPHeaderExtensions()
        e.setAudioLevel(RTPAudioLevel(voiceActivity: true, level: 42), id: 1)
        var out = [UInt8](repeating: 0, count: e.marshalSize)
        _ = out.withUnsafeMutableBytes { $0.appending { e.marshal(into: &$0) } }
        #expect(out == [0xBE, 0xDE, 0x00, 0x01, 0x10, 0xAA, 0x00, 0x00])
        #expect(e.audioLevel(id: 1) == RTPAudioLevel(voiceActivity: true, level: 42))
        #expect(e.audioLevel(id: 2) == nil)
    }

    @Test func absSendTimeIs6Dot18FixedPoint() {
        #expect(RTPAbsSendTime(nanoseconds: 1_000_000_000).rawValue == 1 << 18)
        #expect(RTPAbsSendTime(nanoseconds: 500_000_000).rawValue == 1 << 17)
        #expect(RTPAbsSendTime(nanoseconds: 64_000_000_000).rawValue == 0)  // wraps every 64 s
        #expect(RTPAbsSendTime(nanoseconds: 63_999_999_999).rawValue == 0)  // rounds to the wrap
        #expect(abs(RTPAbsSendTime(nanoseconds: 12_345_678_901).seconds - 12.345678901) < 1.0 / 262_144)
        var e = RTPHeaderExtensions()
        e.setAbsSendTime(RTPAbsSendTime(rawValue: 0x123456), id: 3)
        var out = [UInt8](repeating: 0, count: e.marshalSize)
        _ = out.withUnsafeMutableBytes { $0.appending { e.marshal(into: &$0) } }
        #expect(out == [0xBE, 0xDE, 0x00, 0x01, 0x32, 0x12, 0x34, 0x56])
        #expect(e.absSendTime(id: 3)?.rawValue == 0x123456)
    }

    @Test func transportSequenceNumberAndReplacement() {
        let map = RTPExtensionMap()
        var e = RTPHeaderExtensions()
        e.setTransportSequenceNumber(0xBEEF, id: map.transportSequenceNumber!)
        e.setTransportSequenceNumber(0xCAFE, id: map.transportSequenceNumber!)  // replaces
        #expect(e.count == 1)
        #expect(e.transportSequenceNumber(id: 5) == 0xCAFE)
        e.setAudioLevel(RTPAudioLevel(voiceActivity: false, level: 1), id: map.audioLevel!)
        e.remove(id: 5)
        #expect(e.elementIDs == [1])
        #expect(e.audioLevel(id: 1)?.level == 1)
    }

    @Test func capacityOverflowIsAParseError() {
        // 17 one-byte elements of 1 byte each: more than maxElements.
        var body: [UInt8] = []
        for id in 1...14 { body += [UInt8(id) << 4, 0] }
        for id in 1...3 { body += [UInt8(id) << 4, 0] }  // repeated IDs are ignored, not counted
        let words = (body.count + 3) / 4
        body += [UInt8](repeating: 0, count: words * 4 - body.count)
        let ok = Self.packet(withExtension: [0xBE, 0xDE, 0, UInt8(words)] + body)
        #expect(rtpParseError(ok) == nil)
        var two: [UInt8] = []
        for id in 1...17 { two += [UInt8(id), 1, 0xAB] }
        let w2 = (two.count + 3) / 4
        two += [UInt8](repeating: 0, count: w2 * 4 - two.count)
        #expect(rtpParseError(Self.packet(withExtension: [0x10, 0x00, 0, UInt8(w2)] + two)) == .extensionCapacity)
    }
}
