import Foundation
import MediaCore
import MediaTestSupport
import Testing

extension SendPipelineAllocationTests {
    /// A stream made as a WebRTC connection makes it (keys, payload type and header extension IDs
    /// given after it started; transport-wide numbers from a shared counter with its send log)
    /// allocates nothing of ours per packet either: writing the negotiated IDs, blanking the
    /// dropped element and numbering each packet happen in place. Counted with SRTP AES-GCM, so
    /// the expected count is exactly libsrtp's own per packet.
    @Test func webRTCAudioWithNegotiatedExtensionsAllocatesNothingOnceWarm() throws {
        let (sink, receiver) = try Self.udpSink()
        let late = LateSendProtection()
        var c = sendTestAudioConfiguration()
        c.lateProtection = late
        let reserved = PeerConnectionHeaderExtensions.reserved
        c.audioLevelExtensionID = reserved.audioLevel
        c.absSendTimeExtensionID = reserved.absSendTime
        c.transportSequence = (reserved.transportSequence, TransportSequenceNumbers())
        let stream = try AudioSendStream(configuration: c, sink: sink)
        stream.startWithoutWorker()
        late.provide(context: try SRTPContext(material: .random(for: .aeadAES128GCM), direction: .outbound), payloadType: 109)
        var gen = SyntheticAudio(pattern: .tone(frequency: 440), sampleRate: 48_000, channels: 1, amplitude: 0.3)
        let pcm = gen.int16s(frames: 480 * 100)
        var k = 0
        func oneBuffer() {
            pcm.withUnsafeBufferPointer { all in
                let b = k % 100
                stream.capturer.capture(
                    UnsafeBufferPointer(rebasing: all[(b * 480)..<((b + 1) * 480)]), sampleRate: 48_000,
                    channels: 1, timeStampNs: Int64(k) * 10_000_000)
            }
            stream.pump()
            k += 1
        }
        late.setExtensionIDs(NegotiatedHeaderExtensionIDs(audioLevel: 1, absSendTime: 2, transportSequence: 3))
        for _ in 0..<400 { oneBuffer() }
        // A renegotiation drops abs-send-time and moves transport-cc while the stream runs.
        late.setExtensionIDs(NegotiatedHeaderExtensionIDs(audioLevel: 6, absSendTime: 0, transportSequence: 9))
        let before = stream.statistics.outbound
        let allocations = AllocationCounter.count { for _ in 0..<200 { oneBuffer() } }
        let after = stream.statistics.outbound
        #expect(after.framesEncoded >= before.framesEncoded + 99)
        let expected = try Self.libsrtpAllocationsPerPacket(.aeadAES128GCM) * Int(after.packetsSent - before.packetsSent)
        #expect(allocations == expected, "\(allocations) allocations in 2 s of audio, libsrtp alone: \(expected)")
        stream.stop()
        withExtendedLifetime(receiver) {}
    }
}
