import MediaCore
import Testing

/// The span forms of the byte-level tools give what their raw-buffer forms (which the engine uses
/// and the other suites test in depth) give: SFrame, RTX, the jitter buffer, colour conversion,
/// the synthetic BGRA source and the quality measure.
@Suite struct SpanFormTests {
    static let rtp: [UInt8] = [0x80, 96, 0x12, 0x34, 0, 0, 0x0B, 0xB8, 0xDE, 0xAD, 0xBE, 0xEF] + (0..<200).map { UInt8($0) }

    @Test func sframeSealsAndOpensThroughSpans() throws {
        let base: [UInt8] = Array(0..<32)
        let sender = try SFrameSender(suite: .aes128GCMSHA256_128, keyID: 5, baseKey: base)
        let receiver = SFrameReceiver(suite: .aes128GCMSHA256_128)
        try receiver.addKey(keyID: 5, baseKey: base)
        let plain = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) }, metadata: [UInt8] = [1, 2, 3]

        var sealed = [UInt8](repeating: 0, count: sender.maxEncryptedLength(plaintextLength: plain.count))
        var sealedView = sealed.mutableSpan
        var sealedBytes = sealedView.mutableBytes
        let n = try sender.encrypt(plain.span.bytes, metadata: metadata.span.bytes, into: &sealedBytes)
        sealed.removeLast(sealed.count - n)
        #expect(try receiver.decrypt(sealed, metadata: metadata) == plain)

        var frame = [UInt8](repeating: 0, count: plain.count + 64)
        var frameView = frame.mutableSpan
        var frameBytes = frameView.mutableBytes
        let m = try sender.encryptFrame(plain.span.bytes, clearPrefix: 10, into: &frameBytes)
        #expect(Array(frame[0..<10]) == Array(plain[0..<10]))
        var opened = [UInt8](repeating: 0, count: m)
        var openedView = opened.mutableSpan
        var openedBytes = openedView.mutableBytes
        let k = try receiver.decryptFrame(frame.span.bytes.extracting(0..<m), clearPrefix: 10, into: &openedBytes)
        #expect(k == plain.count && opened[0..<k].elementsEqual(plain))

        var tooSmall = [UInt8](repeating: 0, count: 8)
        var tooSmallView = tooSmall.mutableSpan
        var tooSmallBytes = tooSmallView.mutableBytes
        #expect(throws: SFrameError.bufferTooSmall) {
            try sender.encrypt(plain.span.bytes, metadata: metadata.span.bytes, into: &tooSmallBytes)
        }
    }

    @Test func rtxWrapsAndUnwrapsThroughSpans() {
        var rtx = [UInt8](repeating: 0, count: 300)
        var rtxView = rtx.mutableSpan
        var rtxBytes = rtxView.mutableBytes
        let n = RTXPacket.wrap(Self.rtp.span.bytes, payloadType: 97, sequenceNumber: 7, ssrc: 0x0102_0304, into: &rtxBytes)
        #expect(n == Self.rtp.count + 2)
        var back = [UInt8](repeating: 0, count: 300)
        var backView = back.mutableSpan
        var backBytes = backView.mutableBytes
        let m = RTXPacket.unwrap(rtx.span.bytes.extracting(0..<(n ?? 0)), payloadType: 96, ssrc: 0xDEAD_BEEF, into: &backBytes)
        #expect(m == Self.rtp.count)
        #expect(Array(back[0..<(m ?? 0)]) == Self.rtp)
        var small = [UInt8](repeating: 0, count: 20)
        var smallView = small.mutableSpan
        var smallBytes = smallView.mutableBytes
        #expect(RTXPacket.wrap(Self.rtp.span.bytes, payloadType: 97, sequenceNumber: 7, ssrc: 1, into: &smallBytes) == nil)
    }

    @Test func theJitterBufferStoresAPacketGivenAsASpan() {
        let jb = RTPJitterBuffer(settings: JitterBufferSettings(capacity: 64), clockRate: 90_000)
        #expect(jb.insert(Self.rtp.span.bytes, sequenceNumber: 0x1234, timestamp: 3000, arrival: .zero) == .stored)
        #expect(jb.count == 1)
    }

    @Test func conversionSyntheticBGRAAndQualityAgreeWithTheRawForms() throws {
        let (w, h) = (64, 48)
        var bySpan = [UInt8](repeating: 0, count: w * h * 4), byRaw = bySpan
        var view = bySpan.mutableSpan
        var bytes = view.mutableBytes
        SyntheticVideo.renderBGRA(frameIndex: 3, width: w, height: h, into: &bytes, stride: w * 4)
        byRaw.withUnsafeMutableBytes {
            SyntheticVideo.renderBGRA(frameIndex: 3, width: w, height: h, into: $0.baseAddress!, stride: w * 4)
        }
        #expect(bySpan == byRaw)
        #expect(bySpan.contains { $0 != 0 && $0 != 255 })

        let frame = VideoFrame(width: w, height: h)
        SyntheticVideo.render(frameIndex: 5, into: frame)
        var rgbSpan = [UInt8](repeating: 0, count: w * h * 3), rgbRaw = rgbSpan
        try frame.withView { picture in
            var v = rgbSpan.mutableSpan
            var b = v.mutableBytes
            try ColorConverter().convert(picture, to: .rgb24, into: &b, stride: w * 3)
            try rgbRaw.withUnsafeMutableBytes { try ColorConverter().convert(picture, to: .rgb24, into: $0, stride: w * 3) }
        }
        #expect(rgbSpan == rgbRaw)

        var other = rgbSpan
        other[5] &+= 10
        other[500] &+= 20
        let bySpans = Quality.meanSquaredError(rgbSpan.span, w * 3, other.span, w * 3, width: w * 3, height: h)
        let byPointers = rgbSpan.withUnsafeBufferPointer { a in
            other.withUnsafeBufferPointer { b in
                Quality.meanSquaredError(a.baseAddress!, w * 3, b.baseAddress!, w * 3, width: w * 3, height: h)
            }
        }
        #expect(bySpans == byPointers)
        #expect(bySpans == Double(10 * 10 + 20 * 20) / Double(w * 3 * h))
    }
}
