import Foundation
import MediaCore
import MediaTestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Once warm, the whole send path allocates nothing per frame: capture (convert into a pooled
/// frame, ring push), encode, packetize, SRTP protect, send history, UDP sink (sendmmsg). Counted
/// exactly with `AllocationCounter` (GOT-patched malloc family, this thread only): the test thread
/// plays both the capturing thread and the worker (`pump()` runs the worker's own step function).
///
/// SRTP: Debian's libsrtp2 is built against NSS, whose AES-GCM and AES-CM set up a PKCS#11
/// context per packet: `srtp_protect` itself mallocs (5 times per GCM packet, 14 per AES-CM packet,
/// measured here by `libsrtpAllocationsPerPacket`). So the pipeline is asserted at exactly 0 with
/// plain RTP, and with SRTP at exactly libsrtp's own count times the packets sent: nothing of ours.
///
/// Video sizes are chosen so capture needs no libyuv *filtered* scaling: libyuv's general filtered
/// scalers malloc a row buffer per plane on every call (see `ColorConverter`); conversion,
/// rotation, point scaling and exact 1/2, 1/4, 3/4 box downscales do not.
@Suite(.serialized) struct SendPipelineAllocationTests {
    /// A loopback UDP sink whose receiving socket is never read (the kernel drops the overflow).
    static func udpSink() throws -> (UDPPacketSink, UDPSocket) {
        let receiver = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let port = try receiver.localAddress().port
        let sender = try UDPSocket(family: .ipv4)
        return (UDPPacketSink(socket: sender, destination: .loopbackIPv4(port: port)), receiver)
    }

    /// Allocations one `SRTPContext.protect` of a 1000-byte packet makes inside libsrtp (NSS), warm.
    static func libsrtpAllocationsPerPacket(_ suite: SRTPSuite) throws -> Int {
        let ctx = try SRTPContext(material: .random(for: suite), direction: .outbound)
        let buf = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)
        defer { buf.deallocate() }
        var h = RTPHeader(payloadType: 96, ssrc: 5)
        func one() {
            h.sequenceNumber &+= 1
            let n = buf.appending { h.marshal(into: &$0) }
            var span = buf.mutableBytes
            _ = try? ctx.protect(&span, length: n + 1000)
        }
        for _ in 0..<5 { one() }
        let n = AllocationCounter.count { for _ in 0..<10 { one() } }
        return n / 10
    }

    enum VideoInput: CaseIterable { case i420, bgra, bgraRotated90, i420Halved }

    @Test(arguments: VideoInput.allCases, [SRTPSuite?.none, .aeadAES128GCM])
    func videoFramesAllocateNothingOnceWarm(_ input: VideoInput, _ suite: SRTPSuite?) throws {
        let (sink, receiver) = try Self.udpSink()
        var config = sendTestVideoConfiguration(width: 320, height: 240, srtp: suite.map { .random(for: $0) })
        config.encoder.bitrate = 800_000
        let stream = try VideoSendStream(configuration: config, sink: sink)
        stream.startWithoutWorker()
        // Inputs: 320x240 I420 and BGRA, a 240x320 BGRA rotated 90, a 640x480 I420 halved by the box filter.
        let i420 = (0..<8).map {
            sendTestFrame($0, width: input == .i420Halved ? 640 : 320, height: input == .i420Halved ? 480 : 240)
        }
        let (bw, bh) = input == .bgraRotated90 ? (240, 320) : (320, 240)
        var bgra = (0..<8).map { i -> [UInt8] in
            var b = [UInt8](repeating: 0, count: bw * bh * 4)
            b.withUnsafeMutableBytes {
                SyntheticVideo.renderBGRA(frameIndex: i, width: bw, height: bh, into: $0.baseAddress!, stride: bw * 4)
            }
            return b
        }
        let views: [PixelBufferView] = try (0..<8).map { i in
            switch input {
            case .i420, .i420Halved: return sendTestView(i420[i])
            case .bgra, .bgraRotated90:
                return try bgra[i].withUnsafeBytes {
                    try PixelBufferView.packed(format: .bgra, width: bw, height: bh, data: $0, stride: bw * 4)
                }
            }
        }
        let rotation: VideoRotation = input == .bgraRotated90 ? .rotation90 : .rotation0
        var n = 0
        func oneFrame() {
            stream.capturer.capture(views[n % 8], timeStampNs: Int64(n) * 33_333_333, rotation: rotation)
            stream.pump()
            n += 1
        }
        for _ in 0..<15 { oneFrame() }  // warm: encoder buffers, SRTP stream clone, converter scratch
        let before = stream.statistics.outbound
        let allocations = AllocationCounter.count { for _ in 0..<30 { oneFrame() } }
        let after = stream.statistics.outbound
        #expect(after.framesEncoded == before.framesEncoded + 30)
        let libsrtp = try suite.map { try Self.libsrtpAllocationsPerPacket($0) } ?? 0
        let expected = libsrtp * Int(after.packetsSent - before.packetsSent)
        #expect(
            allocations == expected,
            "\(allocations) allocations in 30 frames (\(input), \(suite.map(\.rawValue) ?? "RTP")), libsrtp alone: \(expected)")
        stream.stop()
        withExtendedLifetime((i420, bgra, receiver)) {}
        bgra.removeAll()
    }

    @Test(arguments: [SRTPSuite?.none, .aeadAES128GCM])
    func audioFramesAllocateNothingOnceWarm(_ suite: SRTPSuite?) throws {
        let (sink, receiver) = try Self.udpSink()
        let stream = try AudioSendStream(
            configuration: sendTestAudioConfiguration(srtp: suite.map { .random(for: $0) }), sink: sink)
        stream.startWithoutWorker()
        // 44.1 kHz stereo Int16 in 10 ms buffers into a mono 48 kHz stream: mix, resample, level,
        // speaking detector, Opus, RTP with both extensions, SRTP, UDP.
        var gen = SyntheticAudio(pattern: .tone(frequency: 440), sampleRate: 44_100, channels: 2, amplitude: 0.3)
        let pcm = gen.int16s(frames: 441 * 100)
        var k = 0
        func oneBuffer() {
            pcm.withUnsafeBufferPointer { all in
                let b = k % 100
                stream.capturer.capture(
                    UnsafeBufferPointer(rebasing: all[(b * 882)..<((b + 1) * 882)]), sampleRate: 44_100,
                    channels: 2, timeStampNs: Int64(k) * 10_000_000)
            }
            stream.pump()
            k += 1
        }
        // Warm for 4 s of audio: the speaking detector's start/stop events (which allocate in the
        // AsyncStream buffer) happen while its noise floor adapts to the steady tone.
        for _ in 0..<400 { oneBuffer() }
        let before = stream.statistics.outbound
        let allocations = AllocationCounter.count { for _ in 0..<200 { oneBuffer() } }
        let after = stream.statistics.outbound
        #expect(after.framesEncoded >= before.framesEncoded + 99)
        let libsrtp = try suite.map { try Self.libsrtpAllocationsPerPacket($0) } ?? 0
        let expected = libsrtp * Int(after.packetsSent - before.packetsSent)
        #expect(allocations == expected, "\(allocations) allocations in 2 s of audio, libsrtp alone: \(expected)")
        stream.stop()
        withExtendedLifetime(receiver) {}
    }
}
