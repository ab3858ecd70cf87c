import Foundation
import MediaCore
import MediaTools
import Testing

#if canImport(Glibc)
    import Glibc
#endif

// MARK: Shared helpers of the send pipeline tests (prefixed to stay clear of other suites).

/// A synthetic I420 frame `index` at `width` x `height`, and a view of it for `capture`.
func sendTestFrame(_ index: Int, width: Int, height: Int) -> VideoFrame {
    let f = VideoFrame(width: width, height: height)
    SyntheticVideo.render(frameIndex: index, into: f)
    return f
}

func sendTestView(_ f: VideoFrame) -> PixelBufferView {
    PixelBufferView(f.view)
}

/// Captures `frame` (kept alive for the call: a view does not own its pixels).
func sendTestCapture(_ capturer: BufferCapturer, _ frame: VideoFrame, timeStampNs: Int64) {
    withExtendedLifetime(frame) { capturer.capture(sendTestView(frame), timeStampNs: timeStampNs) }
}

/// One frame a receiver rebuilt from the sent packets.
struct SendTestDecodedFrame {
    var rtpTimestamp: UInt32
    var barcode: Int?
    var width: Int
    var height: Int
    var isKeyframe: Bool
    var psnr: Double?
}

/// What our own receiver makes of a stream's packets: parsed headers and decoded frames.
struct SendTestReceived {
    var headers: [RTPHeader] = []
    var sizes: [Int] = []
    var frames: [SendTestDecodedFrame] = []
    var incomplete = 0
}

/// Unprotects (when `key` is given), parses, depacketizes and decodes `packets` in order; PSNR is
/// measured against `reference(barcode, width, height)` when given.
func sendTestReceive(
    _ packets: [[UInt8]], codec: VPXCodec, key: SRTPKeyMaterial?,
    reference: ((_ ordinal: Int, _ barcode: Int?, _ width: Int, _ height: Int) -> VideoFrame?)? = nil
)
    throws -> SendTestReceived
{
    var out = SendTestReceived()
    let srtp = try key.map { try SRTPContext(material: $0, direction: .inbound) }
    let decoder = try VPXDecoder(codec: codec)
    let vp8 = VP8Depacketizer()
    let vp9 = VP9Depacketizer()
    for var bytes in packets {
        out.sizes.append(bytes.count)
        if let srtp {
            let n = try bytes.withUnsafeMutableBytes {
                var span = $0.mutableBytes
                return try srtp.unprotect(&span, length: span.byteCount)
            }
            bytes.removeLast(bytes.count - n)
        }
        try bytes.withUnsafeBytes { raw in
            let packet = try RTPPacket(parsing: raw.bytes)
            out.headers.append(packet.header)
            let result = codec == .vp8 ? try vp8.push(packet, in: raw.bytes) : try vp9.push(packet, in: raw.bytes)
            out.incomplete += result.incompleteFrames
            guard let frame = result.frame else { return }
            let decoded: SendTestDecodedFrame? = try decoder.decode(frame.data) { view in
                let code = SyntheticVideo.frameIndex(in: view)
                var psnr: Double? = nil
                if let ref = reference?(out.frames.count, code, view.width, view.height) { psnr = Quality.psnr(view, ref.view) }
                return SendTestDecodedFrame(
                    rtpTimestamp: frame.timestamp, barcode: code, width: view.width,
                    height: view.height, isKeyframe: frame.isKeyframe, psnr: psnr)
            }
            if let decoded { out.frames.append(decoded) }
        }
    }
    return out
}

/// A plain-RTP (or SRTP) VP8 stream configuration for tests at `width` x `height`.
func sendTestVideoConfiguration(
    codec: VPXCodec = .vp8, width: Int = 320, height: Int = 240,
    srtp: SRTPKeyMaterial? = nil
) -> VideoSendStream.Configuration {
    var c = VideoSendStream.Configuration(codec: codec, width: width, height: height)
    c.encoder.bitrate = 1_500_000
    c.srtp = srtp
    c.initialSequenceNumber = 65_530  // crosses the 16-bit rollover in every test
    return c
}

@Suite struct VideoSendPipelineTests {
    static let frameNs: Int64 = 33_333_333

    /// Captures frames 0..<count (I420 source) into a stream driven on this thread, returns the packets.
    static func sendFrames(
        _ config: VideoSendStream.Configuration, count: Int, first: Int = 0,
        between: ((VideoSendStream, Int) -> Void)? = nil
    ) throws -> (VideoSendStream, [[UInt8]]) {
        let sink = MemoryPacketSink()
        let stream = try VideoSendStream(configuration: config, sink: sink)
        stream.startWithoutWorker()
        for i in first..<(first + count) {
            let f = sendTestFrame(i, width: config.encoder.width, height: config.encoder.height)
            sendTestCapture(stream.capturer, f, timeStampNs: 1_000_000_000 + Int64(i) * frameNs)
            stream.pump()
            between?(stream, i)
        }
        stream.stop()
        return (stream, sink.takePackets())
    }

    @Test func sendsDecodableVP8WithRTPHeadersFromCaptureTimes() throws {
        let config = sendTestVideoConfiguration()
        let (stream, packets) = try Self.sendFrames(config, count: 20)
        let rx = try sendTestReceive(packets, codec: .vp8, key: nil) { _, i, w, h in
            i.map { sendTestFrame($0, width: w, height: h) }
        }
        #expect(rx.frames.count == 20)
        #expect(rx.frames.map(\.barcode) == (0..<20).map { Optional($0) })
        // Synthetic pictures at 1.5 Mbit/s, 320x240: measured ~38 dB; bound 30 dB.
        for f in rx.frames { #expect((f.psnr ?? 0) > 30, "frame \(f.barcode ?? -1) PSNR \(f.psnr ?? 0)") }
        #expect(rx.frames.first?.isKeyframe == true)
        // RFC 3550: one SSRC, PT, sequence numbers contiguous across the 16-bit wrap.
        for (i, h) in rx.headers.enumerated() {
            #expect(h.ssrc == config.ssrc && h.payloadType == 96)
            #expect(h.sequenceNumber == UInt16(truncatingIfNeeded: 65_530 + i))
            #expect(h.extensions.absSendTime(id: 3) != nil)
        }
        // 90 kHz timestamps from capture times: 3000 ticks per 33.3 ms frame.
        let ts = rx.frames.map(\.rtpTimestamp)
        for k in 1..<ts.count { #expect(ts[k] &- ts[k - 1] == 3000) }
        #expect(ts[0] == stream.initialRTPTimestamp)
        // Marker exactly on each frame's last packet; at most 1200 bytes; packets of one frame even.
        var byTimestamp: [UInt32: [Int]] = [:]
        for (h, size) in zip(rx.headers, rx.sizes) { byTimestamp[h.timestamp, default: []].append(size) }
        for (i, h) in rx.headers.enumerated() {
            let last = i == rx.headers.count - 1 || rx.headers[i + 1].timestamp != h.timestamp
            #expect(h.marker == last)
        }
        for sizes in byTimestamp.values {
            #expect(sizes.allSatisfy { $0 <= 1200 })
            #expect(sizes.max()! - sizes.min()! <= 1)
        }
        #expect(byTimestamp.values.contains { $0.count > 1 })  // the keyframe needs several packets
        let s = stream.statistics
        #expect(s.outbound.framesEncoded == 20 && s.outbound.keyFramesEncoded == 1)
        #expect(s.outbound.packetsSent == UInt64(packets.count))
        #expect(s.outbound.headerBytesSent == UInt64(packets.count * rx.headers[0].marshalSize))
        #expect(s.outbound.bytesSent + s.outbound.headerBytesSent == UInt64(rx.sizes.reduce(0, +)))
        #expect(s.outbound.frameWidth == 320 && s.outbound.frameHeight == 240)
        #expect(s.outbound.qpSum > 0 && s.outbound.totalEncodeTime > 0)
        #expect(abs(s.outbound.framesPerSecond - 30) < 1)
        #expect(s.capture.captured == 20 && s.capture.dropped == 0)
        let info = stream.senderInfo
        #expect(info.packetCount == UInt64(packets.count) && info.octetCount == s.outbound.bytesSent)
        #expect(info.lastRTPTimestamp == ts.last! && info.lastCaptureNs == 1_000_000_000 + 19 * Self.frameNs)
    }

    @Test func senderReportTimeComesFromCaptureNotFromTheEndOfTheEncode() throws {
        // A live source stamps frames with the monotonic clock at capture. The sender report's RTP
        // time for "now" must be the capture clock's (libwebrtc maps from capture time); projecting
        // from when the packets left would put it behind by the encode time.
        let sink = MemoryPacketSink()
        let config = sendTestVideoConfiguration(width: 640, height: 480)
        let stream = try VideoSendStream(configuration: config, sink: sink)
        stream.startWithoutWorker()
        var firstCaptureNs: Int64?
        for i in 0..<5 {
            let f = sendTestFrame(i, width: 640, height: 480)
            let ts = Int64(MonotonicTime.now.nanoseconds)
            if firstCaptureNs == nil { firstCaptureNs = ts }
            sendTestCapture(stream.capturer, f, timeStampNs: ts)
            stream.pump()
        }
        stream.stop()
        let info = stream.senderInfo
        #expect(
            info.lastCapturedAt.nanoseconds > 0 && info.lastSendTime.nanoseconds > info.lastCapturedAt.nanoseconds,
            "the encode took time")
        let now = MonotonicTime.now.nanoseconds + 7_000_000
        let reported = info.rtpTimestamp(at: MonotonicTime(nanoseconds: now), clockRate: 90_000)
        let expected = stream.initialRTPTimestamp &+ UInt32((Int64(now) - firstCaptureNs!) * 90_000 / 1_000_000_000)
        let error = abs(Int(Int32(bitPattern: reported &- expected)))
        #expect(error <= 9, "sender report off the capture clock by \(error) ticks")
    }

    @Test func srtpGCMPacketsDecryptAndDecode() throws {
        let key = SRTPKeyMaterial.random(for: .aeadAES128GCM)
        let (_, packets) = try Self.sendFrames(sendTestVideoConfiguration(srtp: key), count: 10)
        #expect(packets.allSatisfy { $0.count <= 1200 })
        let rx = try sendTestReceive(packets, codec: .vp8, key: key) { _, i, w, h in
            i.map { sendTestFrame($0, width: w, height: h) }
        }
        #expect(rx.frames.map(\.barcode) == (0..<10).map { Optional($0) })
        // A different key must not verify.
        #expect(throws: SRTPError.self) { _ = try sendTestReceive(packets, codec: .vp8, key: .random(for: .aeadAES128GCM)) }
    }

    @Test func vp9FlexibleModeDecodes() throws {
        let config = sendTestVideoConfiguration(codec: .vp9, srtp: .random(for: .aesCM128HMACSHA1_80))
        let (_, packets) = try Self.sendFrames(config, count: 10)
        let rx = try sendTestReceive(packets, codec: .vp9, key: config.srtp) { _, i, w, h in
            i.map { sendTestFrame($0, width: w, height: h) }
        }
        #expect(rx.frames.map(\.barcode) == (0..<10).map { Optional($0) })
        for f in rx.frames { #expect((f.psnr ?? 0) > 30) }
    }

    @Test func keyframeOnPictureLossAndFullIntraRequest() throws {
        let (stream, packets) = try Self.sendFrames(sendTestVideoConfiguration(), count: 30) { s, i in
            if i == 14 { s.handlePictureLossIndication() }
            if i == 24 { s.handleFullIntraRequest() }
        }
        let rx = try sendTestReceive(packets, codec: .vp8, key: nil)
        #expect(rx.frames.filter(\.isKeyframe).map(\.barcode) == [0, 15, 25])
        let s = stream.statistics
        #expect(s.outbound.keyFramesEncoded == 3 && s.outbound.pliCount == 1 && s.outbound.firCount == 1)
        #expect(s.keyframeRequestsCoalesced == 0)
    }

    @Test func keyframeRequestsFromEveryPathShareOneMinimumInterval() throws {
        // 300 ms is just over 9 frames at 30 fps (capture clock): 10. The window runs from the last
        // keyframe a request forced (libwebrtc's EncoderRtcpFeedback), not from keyframe 0: the
        // PLI + API request after frame 1 force frame 2 at once; the FIR after frame 3 waits for
        // frame 12; a storm of PLIs after frames 20...31 gets one keyframe per interval (22, 32),
        // not one per request.
        let (stream, packets) = try Self.sendFrames(sendTestVideoConfiguration(), count: 40) { s, i in
            if i == 1 { s.handlePictureLossIndication(); s.requestKeyframe() }
            if i == 3 { s.handleFullIntraRequest() }
            if (20..<32).contains(i) { s.handlePictureLossIndication() }
        }
        let rx = try sendTestReceive(packets, codec: .vp8, key: nil)
        let keyframes = rx.frames.filter(\.isKeyframe).compactMap(\.barcode)
        #expect(keyframes == [0, 2, 12, 22, 32], "\(keyframes)")
        for (a, b) in zip(keyframes.dropFirst(), keyframes.dropFirst(2)) { #expect(b - a >= 10) }
        let s = stream.statistics
        #expect(s.outbound.keyFramesEncoded == 5)
        #expect(s.outbound.pliCount == 13 && s.outbound.firCount == 1)
        // The API request joining the PLI after frame 1, and 10 of the storm's 12 PLIs.
        #expect(s.keyframeRequestsCoalesced == 11, "\(s.keyframeRequestsCoalesced)")
    }

    @Test func pictureLossRightAfterTheFirstKeyframeIsAnsweredAtOnceAndAStormGetsOne() throws {
        // The receiver lost the first keyframe: its PLI must not wait out a window counted from
        // that keyframe (the old limiter held it ~10 frames). A request made before the first frame
        // (a new receiver) is served by the first keyframe, which the encoder makes anyway, so it
        // starts no window either. Then five PLIs inside one window produce one keyframe.
        let sink = MemoryPacketSink()
        let stream = try VideoSendStream(configuration: sendTestVideoConfiguration(), sink: sink)
        stream.startWithoutWorker()
        stream.requestKeyframe()
        var delivered: [[UInt8]] = []
        for i in 0..<20 {
            sendTestCapture(
                stream.capturer, sendTestFrame(i, width: 320, height: 240),
                timeStampNs: 1_000_000_000 + Int64(i) * Self.frameNs)
            stream.pump()
            let packets = sink.takePackets()
            if i == 0 {
                #expect(!packets.isEmpty)
                stream.handlePictureLossIndication()  // frame 0 lost on the way
            } else {
                delivered += packets
            }
            if (2...6).contains(i) { stream.handlePictureLossIndication() }
        }
        stream.stop()
        let rx = try sendTestReceive(delivered, codec: .vp8, key: nil) { _, i, w, h in
            i.map { sendTestFrame($0, width: w, height: h) }
        }
        // Every frame from 1 decodes (the decoder starts on keyframe 1); keyframe 11 is frame 1 plus
        // the 300 ms window (10 frames), serving the five PLIs after frames 2...6.
        #expect(rx.frames.map(\.barcode) == (1..<20).map { Optional($0) })
        #expect(rx.frames.filter(\.isKeyframe).compactMap(\.barcode) == [1, 11])
        for f in rx.frames { #expect((f.psnr ?? 0) > 30, "frame \(f.barcode ?? -1) PSNR \(f.psnr ?? 0)") }
        let s = stream.statistics
        #expect(s.outbound.keyFramesEncoded == 3 && s.outbound.pliCount == 6)
        #expect(s.keyframeRequestsCoalesced == 4, "\(s.keyframeRequestsCoalesced)")
    }

    @Test func periodicKeyframesNeitherDelayRequestsNorStartAWindow() throws {
        // keyframeInterval 8: the encoder's own keyframes at 0 and 8. A PLI right after keyframe 8
        // forces frame 9 (a periodic keyframe is not a request); the next periodic one is 8 frames
        // after that, 17, and it serves the PLI after frame 10 that was waiting for 9's window
        // (which would have ended at 19), so no keyframe is forced at 19.
        var config = sendTestVideoConfiguration()
        config.encoder.keyframeInterval = 8
        let (stream, packets) = try Self.sendFrames(config, count: 30) { s, i in
            if i == 8 || i == 10 { s.handlePictureLossIndication() }
        }
        let rx = try sendTestReceive(packets, codec: .vp8, key: nil)
        #expect(rx.frames.count == 30)
        #expect(rx.frames.filter(\.isKeyframe).compactMap(\.barcode) == [0, 8, 9, 17, 25])
        #expect(stream.statistics.keyframeRequestsCoalesced == 1)
    }

    @Test func roundTripTimeLongerThanTheMinimumSpacesKeyframesFurther() throws {
        let (_, packets) = try Self.sendFrames(sendTestVideoConfiguration(), count: 30) { s, i in
            if i == 0 { s.handleRoundTripTime(0.5) }  // just over 15 frames: 16
            if i == 1 || i == 3 { s.handlePictureLossIndication() }
        }
        let rx = try sendTestReceive(packets, codec: .vp8, key: nil)
        // The first PLI forces frame 2 at once; the second waits 16 frames from it.
        #expect(rx.frames.filter(\.isKeyframe).compactMap(\.barcode) == [0, 2, 18])
    }

    @Test func nackResendsStoredPacketsAndRefusesWithoutAKeyframe() throws {
        var config = sendTestVideoConfiguration(srtp: .random(for: .aeadAES128GCM))
        config.maxRetransmissions = 1
        let sink = MemoryPacketSink()
        let stream = try VideoSendStream(configuration: config, sink: sink)
        stream.startWithoutWorker()
        for i in 0..<3 {
            sendTestCapture(stream.capturer, sendTestFrame(i, width: 320, height: 240), timeStampNs: Int64(i) * Self.frameNs)
            stream.pump()
        }
        let sent = sink.takePackets()
        let seqs = sent.map { UInt16($0[2]) << 8 | UInt16($0[3]) }
        stream.handleNack([seqs[1], seqs[3]])
        stream.pump()
        let resent = sink.takePackets()
        // Byte-identical protected packets (no second encryption, same SRTP index).
        #expect(resent == [sent[1], sent[3]])
        stream.handleNack([seqs[1], 12_345])  // resent once already (limit 1), and never sent
        stream.pump()
        #expect(sink.takePackets().isEmpty)
        sendTestCapture(stream.capturer, sendTestFrame(3, width: 320, height: 240), timeStampNs: 3 * Self.frameNs)
        stream.pump()
        stream.stop()
        let s = stream.statistics
        #expect(s.outbound.nackCount == 2 && s.outbound.retransmittedPacketsSent == 2)
        // webrtc-stats: packetsSent and bytesSent include the retransmissions.
        let firstTransmissions = sent.count + sink.packets.count  // frames 0-2, then frame 3
        #expect(s.outbound.packetsSent == UInt64(firstTransmissions) + 2)
        let resentFirst = sent[1]
        let header = try RTPHeader(parsing: resentFirst.span.bytes)
        let resentPayload = UInt64(sent[1].count + sent[3].count - 2 * (header.marshalSize + 16))  // GCM tag 16
        #expect(s.outbound.retransmittedBytesSent == resentPayload)
        // webrtc-stats: headerBytesSent counts the resent headers too, so with bytesSent it adds
        // up to every RTP byte handed to the transport (SRTP tags excluded).
        #expect(s.outbound.headerBytesSent == s.outbound.packetsSent * UInt64(header.marshalSize))
        let everyTransmission = sent + sink.packets + resent
        #expect(
            s.outbound.bytesSent + s.outbound.headerBytesSent
                == UInt64(everyTransmission.reduce(0) { $0 + $1.count - 16 }))
        #expect(
            s.outbound.bytesSent == stream.senderInfo.octetCount + resentPayload,
            "the sender report's octet count stays first transmissions only")
        #expect(s.retransmissionsRefused == 2)
        // Only frame 0: a refused resend is the receiver's to repair (its NACK tracker gives up and
        // sends PLI); keyframing per refused NACK made keyframe storms under loss.
        #expect(s.outbound.keyFramesEncoded == 1)
    }

    @Test func bitrateFrameRateAndResolutionChangeWhileRunning() throws {
        let config = sendTestVideoConfiguration()
        let sink = MemoryPacketSink()
        let stream = try VideoSendStream(configuration: config, sink: sink)
        stream.start()
        let small = sendTestFrame(0, width: 320, height: 240)
        for i in 0..<5 { sendTestCapture(stream.capturer, small, timeStampNs: Int64(i) * Self.frameNs) }
        // Let the worker take the first frames (polling counters: they are atomics).
        for _ in 0..<500 {
            let s = stream.statistics
            if s.outbound.framesEncoded + s.capture.droppedRingFull == 5 { break }
            usleep(10_000)
        }
        stream.setTargetBitrate(300_000)
        stream.setFrameRate(15)
        stream.setResolution(width: 160, height: 120)
        #expect(stream.capturer.targetDimensions == VideoDimensions(width: 160, height: 120))
        for i in 5..<10 { sendTestCapture(stream.capturer, small, timeStampNs: Int64(i) * Self.frameNs) }
        stream.stop()
        let s = stream.statistics
        #expect(s.outbound.targetBitrate == 300_000)
        #expect(s.outbound.frameWidth == 160 && s.outbound.frameHeight == 120)
        let rx = try sendTestReceive(sink.takePackets(), codec: .vp8, key: nil)
        #expect(rx.frames.last.map { ($0.width, $0.height) } ?? (0, 0) == (160, 120))
        #expect(rx.frames.first.map { ($0.width, $0.height) } ?? (0, 0) == (320, 240))
        #expect(UInt64(rx.frames.count) == s.outbound.framesEncoded)
        #expect(s.capture.captured == 10 && UInt64(rx.frames.count) + s.capture.droppedRingFull == 10)
    }

    @Test func rotatesBGRAUprightInOnePass() throws {
        // A landscape 320x240 picture stored as a 240x320 portrait buffer turned a quarter
        // counter-clockwise; captured with rotation 90 it must come out upright (bar code readable)
        // and match libyuv's own rotation of the buffer.
        let lw = 320, lh = 240, w = 240, h = 320
        var landscape = [UInt32](repeating: 0, count: lw * lh)
        var portrait = [UInt32](repeating: 0, count: w * h)
        let conv = ColorConverter()
        let sink = MemoryPacketSink()
        let stream = try VideoSendStream(configuration: sendTestVideoConfiguration(), sink: sink)
        stream.startWithoutWorker()
        var refs: [Int: VideoFrame] = [:]
        for i in 0..<5 {
            landscape.withUnsafeMutableBytes {
                SyntheticVideo.renderBGRA(frameIndex: i, width: lw, height: lh, into: $0.baseAddress!, stride: lw * 4)
            }
            for r in 0..<h { for c in 0..<w { portrait[r * w + c] = landscape[c * lw + (lw - 1 - r)] } }
            try portrait.withUnsafeBytes { raw in
                let view = try PixelBufferView.packed(format: .bgra, width: w, height: h, data: raw, stride: w * 4)
                stream.capturer.capture(view, timeStampNs: Int64(i) * Self.frameNs, rotation: .rotation90)
                let ref = VideoFrame(width: lw, height: lh)
                try conv.convert(view, into: ref, rotation: .rotation90)
                refs[i] = ref
            }
            stream.pump()
        }
        stream.stop()
        let rx = try sendTestReceive(sink.takePackets(), codec: .vp8, key: nil) { n, _, _, _ in refs[n] }
        #expect(rx.frames.map(\.barcode) == (0..<5).map { Optional($0) })
        for f in rx.frames {
            #expect(f.width == 320 && f.height == 240)
            #expect((f.psnr ?? 0) > 30, "PSNR \(f.psnr ?? 0)")
        }
    }

    @Test func scalesToTheTargetSize() throws {
        // 640x480 I420 in, 320x240 stream: scaled during capture (box filter).
        let sink = MemoryPacketSink()
        let stream = try VideoSendStream(configuration: sendTestVideoConfiguration(), sink: sink)
        stream.startWithoutWorker()
        for i in 0..<3 {
            sendTestCapture(stream.capturer, sendTestFrame(i, width: 640, height: 480), timeStampNs: Int64(i) * Self.frameNs)
            stream.pump()
        }
        stream.stop()
        let rx = try sendTestReceive(sink.takePackets(), codec: .vp8, key: nil)
        #expect(rx.frames.map(\.barcode) == [0, 1, 2])
        #expect(rx.frames.allSatisfy { $0.width == 320 && $0.height == 240 })
    }

    @Test func everyPixelFormatIsEncoded() throws {
        let w = 64, h = 48
        let sink = MemoryPacketSink()
        let stream = try VideoSendStream(configuration: sendTestVideoConfiguration(width: w, height: h), sink: sink)
        stream.startWithoutWorker()
        let storage = [UInt8](repeating: 128, count: w * h * 4)
        for (i, format) in PixelFormat.allCases.enumerated() {
            try storage.withUnsafeBytes { raw in
                let view = try PixelBufferView.contiguous(raw, format: format, width: w, height: h)
                stream.capturer.capture(view, timeStampNs: Int64(i) * Self.frameNs)
            }
            stream.pump()
        }
        stream.stop()
        let s = stream.statistics
        #expect(s.capture.captured == UInt64(PixelFormat.allCases.count))
        #expect(s.outbound.framesEncoded == UInt64(PixelFormat.allCases.count))
    }

    @Test func vp8TemporalLayersCarryTIDAndTL0PICIDX() throws {
        var config = sendTestVideoConfiguration()
        config.encoder.temporalLayers = 3
        let (_, packets) = try Self.sendFrames(config, count: 9)
        // First packet of each frame: RFC 7741 §4.2 TID follows the 0,2,1,2 pattern; TL0PICIDX
        // counts base-layer frames; PictureIDs are consecutive.
        var firsts: [VP8PayloadDescriptor] = []
        for bytes in packets {
            try bytes.withUnsafeBytes { raw in
                let p = try RTPPacket(parsing: raw.bytes)
                let (d, _) = try VP8PayloadDescriptor.parse(raw.bytes.extracting(p.payloadRange))
                if d.startsFrame { firsts.append(d) }
            }
        }
        #expect(firsts.map(\.temporalLayerID) == [0, 2, 1, 2, 0, 2, 1, 2, 0])
        let tl0 = firsts.compactMap(\.tl0PicIdx)
        #expect(tl0.count == 9)
        #expect(zip(tl0, firsts).allSatisfy { _, d in d.pictureID != nil })
        for k in 1..<9 { #expect(tl0[k] == tl0[k - 1] &+ (firsts[k].temporalLayerID == 0 ? 1 : 0)) }
        for k in 1..<9 { #expect(firsts[k].pictureID! == (firsts[k - 1].pictureID! + 1) & 0x7FFF) }
        let rx = try sendTestReceive(packets, codec: .vp8, key: nil)
        #expect(rx.frames.map(\.barcode) == (0..<9).map { Optional($0) })
    }

    @Test func rateControlDropsAreCountedNotErrors() throws {
        // 60 kbit/s for 320x240 moving pictures with a 30 % drop threshold: libvpx skips frames.
        var config = sendTestVideoConfiguration()
        config.encoder.bitrate = 60_000
        config.encoder.frameDropThreshold = 30
        let (stream, packets) = try Self.sendFrames(config, count: 40)
        let s = stream.statistics
        #expect(s.outbound.framesDroppedByEncoder > 0)
        #expect(s.outbound.framesEncoded + s.outbound.framesDroppedByEncoder == 40)
        let rx = try sendTestReceive(packets, codec: .vp8, key: nil)
        #expect(UInt64(rx.frames.count) == s.outbound.framesEncoded && rx.incomplete == 0)
    }

    @Test func framesAfterStopCountAsInactive() throws {
        let stream = try VideoSendStream(configuration: sendTestVideoConfiguration(), sink: MemoryPacketSink())
        let f = sendTestFrame(0, width: 320, height: 240)
        sendTestCapture(stream.capturer, f, timeStampNs: 0)
        stream.start()
        sendTestCapture(stream.capturer, f, timeStampNs: Self.frameNs)
        stream.stop()
        sendTestCapture(stream.capturer, f, timeStampNs: 2 * Self.frameNs)
        let s = stream.statistics
        #expect(s.capture.droppedInactive == 2 && s.capture.captured == 1 && s.outbound.framesEncoded == 1)
    }
}
