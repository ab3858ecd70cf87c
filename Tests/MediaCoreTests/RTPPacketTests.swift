import MediaCore
import Testing

/// Parses `bytes` as RTP and hands the packet to `body`.
@discardableResult
func withParsedRTP<R>(_ bytes: [UInt8], _ body: (RTPPacket) throws -> R) throws -> R {
    try body(try RTPPacket(parsing: bytes.span.bytes))
}

/// The payload of the RTP packet `bytes`, copied out by the packet's `payloadRange`.
func rtpPayload(_ bytes: [UInt8]) throws -> [UInt8] {
    Array(bytes[try RTPPacket(parsing: bytes.span.bytes).payloadRange])
}

/// The RTPError code a parse of `bytes` throws, or nil when it parses.
func rtpParseError(_ bytes: [UInt8]) -> RTPError? {
    do throws(RTPError) { _ = try RTPPacket(parsing: bytes.span.bytes); return nil } catch { return error }
}

/// Marshals a header and payload into a new array.
func marshalRTP(_ h: RTPHeader, _ payload: [UInt8], padding: Int = 0) -> [UInt8] {
    let size = RTPPacket.marshalSize(header: h, payloadSize: payload.count, paddingSize: padding)
    var out: [UInt8] = []
    let n = out.append(capacity: size) {
        RTPPacket.marshal(header: h, payload: payload.span.bytes, paddingSize: padding, into: &$0)
    }
    #expect(n == size && out.count == size)
    return out
}

@Suite struct RTPPacketTests {
    // pion/rtp's TestBasic packet: X=1 with a profile-1 (non RFC 8285) extension, M=1, PT 96.
    static let pionPacket: [UInt8] = [
        0x90, 0xE0, 0x69, 0x8F, 0xD9, 0xC2, 0x93, 0xDA, 0x1C, 0x64, 0x27, 0x82,
        0x00, 0x01, 0x00, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0x98, 0x36, 0xBE, 0x89, 0x9E,
    ]

    @Test func parsesKnownPacketFields() throws {
        try withParsedRTP(Self.pionPacket) { p in
            #expect(p.header.marker)
            #expect(p.header.payloadType == 96)
            #expect(p.header.sequenceNumber == 27023)
            #expect(p.header.timestamp == 3_653_407_706)
            #expect(p.header.ssrc == 476_325_762)
            #expect(p.header.csrcs.isEmpty)
            #expect(p.extensionProfile == 1)
            #expect(Array(Self.pionPacket[p.extensionRange]) == [0xFF, 0xFF, 0xFF, 0xFF])
            #expect(p.header.extensions.isEmpty)  // profile 1 is not RFC 8285
            #expect(p.headerSize == 20)
            #expect(Array(Self.pionPacket[p.payloadRange]) == [0x98, 0x36, 0xBE, 0x89, 0x9E])
            #expect(p.payloadRange == 20..<25)
            #expect(p.paddingSize == 0)
        }
    }

    /// The packet keeps offsets, not pointers: it stays meaningful after the buffer it was
    /// parsed from is gone, and names the same bytes in any copy of them.
    @Test func aParsedPacketNamesItsPartsByOffsetAndOutlivesItsBuffer() throws {
        let p = try RTPPacket(parsing: Self.pionPacket.span.bytes)
        #expect(p.byteCount == 25 && p.headerSize == 20 && p.payloadSize == 5)
        #expect(p.extensionRange == 16..<20 && p.payloadRange == 20..<25)
        let copy = Array(Self.pionPacket)
        #expect(Array(copy[p.payloadRange]) == [0x98, 0x36, 0xBE, 0x89, 0x9E])
    }

    /// Marshalling into an output span appends after what it already holds.
    @Test func marshalAppendsToAnOutputSpan() throws {
        let h = RTPHeader(marker: true, payloadType: 111, sequenceNumber: 0x1234, timestamp: 0xDEADBEEF, ssrc: 0x01020304)
        let payload: [UInt8] = [0xAA, 0xBB]
        var out = [UInt8](repeating: 0xEE, count: 3 + RTPPacket.marshalSize(header: h, payloadSize: 2, paddingSize: 2) + 5)
        let (written, held) = out.withUnsafeMutableBytes { raw in
            var span = OutputRawSpan(buffer: raw, initializedCount: 3)
            let n = RTPPacket.marshal(header: h, payload: payload.span.bytes, paddingSize: 2, into: &span)
            return (n, span.byteCount)
        }
        #expect(written == 16 && held == 19)
        #expect(Array(out[3..<19]) == [0xA0, 0xEF, 0x12, 0x34, 0xDE, 0xAD, 0xBE, 0xEF, 1, 2, 3, 4, 0xAA, 0xBB, 0, 2])
        #expect(out[19...].allSatisfy { $0 == 0xEE } && out[..<3].allSatisfy { $0 == 0xEE })
        let parsed = try RTPPacket(parsing: out.span.bytes.extracting(3..<19))
        #expect(parsed.header.sequenceNumber == 0x1234 && parsed.paddingSize == 2 && parsed.payloadRange == 12..<14)
    }

    @Test func marshalMatchesKnownBytesForMinimalHeader() {
        let h = RTPHeader(marker: true, payloadType: 111, sequenceNumber: 0x1234, timestamp: 0xDEADBEEF, ssrc: 0x01020304)
        #expect(marshalRTP(h, [0xAA]) == [0x80, 0xEF, 0x12, 0x34, 0xDE, 0xAD, 0xBE, 0xEF, 0x01, 0x02, 0x03, 0x04, 0xAA])
    }

    @Test func roundTripsCSRCsExtensionsAndPadding() throws {
        var ext = RTPHeaderExtensions()
        ext.setAudioLevel(RTPAudioLevel(voiceActivity: true, level: 30), id: 1)
        ext.setAbsSendTime(RTPAbsSendTime(rawValue: 0xABCDEF), id: 3)
        for padding in [0, 1, 3, 4, 255] {
            for csrcCount in [0, 1, 15] {
                let h = RTPHeader(
                    marker: csrcCount == 1, payloadType: 100, sequenceNumber: 65535,
                    timestamp: UInt32.max, ssrc: 7, csrcs: (0..<csrcCount).map { UInt32($0) * 0x01010101 },
                    extensions: ext)
                let payload: [UInt8] = (0..<37).map { UInt8($0) }
                let bytes = marshalRTP(h, payload, padding: padding)
                try withParsedRTP(bytes) { p in
                    var expected = h
                    expected.padding = padding > 0
                    #expect(p.header == expected)
                    #expect(Array(bytes[p.payloadRange]) == payload)
                    #expect(p.paddingSize == padding)
                    #expect(p.extensionProfile == 0xBEDE)
                }
            }
        }
    }

    @Test func rejectsTruncatedAndZeroLength() {
        #expect(rtpParseError([]) == .truncated)
        for n in 1..<12 { #expect(rtpParseError(Array(Self.pionPacket.prefix(n))) == .truncated) }
    }

    @Test func rejectsWrongVersion() {
        var b = Self.pionPacket
        b[0] = 0x50
        #expect(rtpParseError(b) == .badVersion)
    }

    @Test func rejectsCSRCCountBeyondPacket() {
        // CC=2 needs 20 bytes of header; give 19.
        var b: [UInt8] = [0x82, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1] + [UInt8](repeating: 0, count: 7)
        #expect(rtpParseError(b) == .csrcOverrun)
        b.append(0)
        #expect(rtpParseError(b) == nil)  // exactly fits, empty payload
    }

    @Test func rejectsExtensionOverrunningPacket() {
        // X=1 without the 4-byte extension header.
        #expect(rtpParseError([0x90, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0xBE, 0xDE]) == .extensionOverrun)
        // Extension length 2 words but only 1 word present.
        let b: [UInt8] = [0x90, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0xBE, 0xDE, 0, 2, 0x10, 0xAA, 0, 0]
        #expect(rtpParseError(b) == .extensionOverrun)
    }

    @Test func rejectsExtensionElementOverrunningBlock() {
        // One-byte element ID 1 with L=3 (4 bytes) starting at the last-but-one byte of a 1-word block.
        let b: [UInt8] = [0x90, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0xBE, 0xDE, 0, 1, 0, 0, 0x13, 0xAA]
        #expect(rtpParseError(b) == .badExtensionElement)
        // Two-byte element whose length byte is missing.
        let c: [UInt8] = [0x90, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0x10, 0x00, 0, 1, 0, 0, 0, 0x05]
        #expect(rtpParseError(c) == .badExtensionElement)
    }

    @Test func rejectsBadPadding() {
        let base: [UInt8] = [0xA0, 96, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]
        #expect(rtpParseError(base) == .badPadding)  // P set, nothing after the header
        #expect(rtpParseError(base + [1, 2, 0]) == .badPadding)  // count 0
        #expect(rtpParseError(base + [1, 2, 4]) == .badPadding)  // 4 > 3 bytes after header
        try? withParsedRTP(base + [1, 2, 3]) { p in  // padding eats the whole payload: valid
            #expect(p.payloadSize == 0 && p.payloadRange.isEmpty)
            #expect(p.paddingSize == 3)
        }
        #expect(rtpParseError(base + [1, 2, 3]) == nil)
    }

    @Test func errorsCarryAMessageNamingTheInput() {
        let e = rtpParseError([0x80, 96, 0])
        #expect(e?.message.contains("3 bytes") == true)
        #expect(e.map { "\($0)" }?.contains("truncated") == true)
    }

    @Test func maxPayloadSizeAccountsForHeader() {
        var h = RTPHeader()
        #expect(h.maxPayloadSize(mtu: 1200) == 1188)
        h.extensions.setAudioLevel(RTPAudioLevel(voiceActivity: false, level: 127), id: 1)
        #expect(h.maxPayloadSize(mtu: 1200) == 1180)
    }
}
