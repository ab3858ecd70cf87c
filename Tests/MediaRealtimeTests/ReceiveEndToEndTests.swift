import Foundation
import Glibc
import Synchronization
import Testing

@testable import MediaCore

/// A UDP sink whose destination can change (or be nil: packets dropped), for tests that cut a
/// sender off from its receiver and reconnect it.
final class ReceiveSwitchableSink: PacketSink, @unchecked Sendable {
    let socket: UDPSocket
    let destination = Mutex<SocketAddress?>(nil)
    init(socket: UDPSocket) { self.socket = socket }
    func write(_ packet: RawSpan) {
        guard let d = destination.withLock({ $0 }) else { return }
        _ = try? socket.send(packet, to: d)
    }
    func flush() {}
}

/// Our send pipeline (VideoSendStream + AudioSendStream + RTCPSenderEndpoint on one socket) ->
/// optional relay -> our ReceivePipeline.
struct EndToEndCall {
    let key = SRTPKeyMaterial.random(for: .aeadAES128GCM)
    let renderer: IndexingRenderer
    let receiver: ReceivePipeline
    let sink: ReceiveSwitchableSink
    let video: VideoSendStream
    let audio: AudioSendStream
    let endpoint: RTCPSenderEndpoint
    let width: Int, height: Int

    init(width: Int = 320, height: Int = 240, bitrate: Int = 500_000, lipSync: Bool = true) throws {
        self.width = width; self.height = height
        renderer = IndexingRenderer(width: width, height: height)
        receiver = try makeReceiver(key: key, renderer: renderer, lipSync: lipSync)
        var o = UDPSocket.Options()
        o.receiveBufferSize = 1 << 20
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0), options: o)
        sink = ReceiveSwitchableSink(socket: socket)
        var vc = VideoSendStream.Configuration(codec: .vp8, width: width, height: height)
        // Fixed SSRCs: a relay that draws losses per stream seeds each stream's draws from its
        // SSRC, so the same packets of each stream are lost in every run.
        vc.ssrc = 0x5EED_0001
        vc.encoder.bitrate = bitrate
        vc.srtp = key
        vc.payloadType = 96
        vc.historyCapacity = 2048
        video = try VideoSendStream(configuration: vc, sink: sink)
        var ac = AudioSendStream.Configuration()
        ac.ssrc = 0x5EED_0002
        ac.srtp = key
        ac.payloadType = 111
        ac.inbandFEC = true
        ac.expectedPacketLossPercent = 10
        audio = try AudioSendStream(configuration: ac, sink: sink)
        var ec = RTCPSenderEndpoint.Configuration(remoteKey: key, localKey: key)
        ec.reportIntervalMilliseconds = 250
        ec.startBitrate = bitrate
        ec.maximumBitrate = bitrate
        endpoint = try RTCPSenderEndpoint(socket: socket, configuration: ec, targets: [video, audio])
    }

    func start(sendingTo destination: SocketAddress?) {
        sink.destination.withLock { $0 = destination }
        receiver.start(); video.start(); audio.start(); endpoint.start()
    }

    func stop() { video.stop(); audio.stop(); endpoint.stop(); receiver.stop() }

    /// Captures `frames` frames at 30 fps (and 20 ms of audio per 20 ms) in real time, starting at
    /// frame `first`; `onFrame` runs before each capture.
    func capture(frames: Range<Int>, onFrame: (Int) -> Void = { _ in }) {
        let picture = VideoFrame(width: width, height: height)
        var source = SyntheticAudio(pattern: .speech, sampleRate: 48_000)
        let start = MonotonicTime.now.nanoseconds
        var audioSent = 0
        for (k, i) in frames.enumerated() {
            let due = start + UInt64(k) * 33_333_333
            while MonotonicTime.now.nanoseconds < due {
                let elapsed = MonotonicTime.now.nanoseconds - start
                while UInt64(audioSent) * 20_000_000 <= elapsed {
                    let pcm = source.int16s(frames: 960)
                    pcm.withUnsafeBufferPointer {
                        audio.capturer.capture($0, sampleRate: 48_000, channels: 1, timeStampNs: Int64(audioSent) * 20_000_000)
                    }
                    audioSent += 1
                }
                usleep(1000)
            }
            onFrame(i)
            SyntheticVideo.render(frameIndex: i, into: picture)
            sendTestCapture(video.capturer, picture, timeStampNs: Int64(i) * 33_333_333)
        }
    }
}

@Suite(.serialized) struct ReceiveEndToEndTests {
    @Test func sendPipelineThroughFivePercentLossIsRepairedByNackAndFEC() throws {
        let call = try EndToEndCall()
        let loss = ImpairmentModel.Settings(loss: 0.05, delayMilliseconds: 10)
        var relayConfiguration = ImpairmentRelay.Configuration(
            listen: .loopbackIPv4(port: 0), to: try call.receiver.socket.localAddress(),
            impairment: loss, reverse: loss, seed: 21)
        // Each stream draws its own losses: with one draw for the link, which audio packets were
        // lost depended on how audio, video and retransmissions interleaved in time, so the audio
        // lost more in some runs than FEC can repair (8,640 of 144,000 samples concealed once).
        relayConfiguration.lossPerStream = true
        let relay = try ImpairmentRelay(configuration: relayConfiguration)
        relay.start()
        let sink = CollectingAudioSink()
        let clock = AudioPlayoutClock(stream: call.receiver.audio!, sink: sink)
        clock.start()
        call.start(sendingTo: relay.listenAddress)
        call.capture(frames: 0..<90)
        usleep(20_000)
        let playing = call.receiver.inboundStats
        usleep(400_000)
        clock.stop()
        call.stop()
        relay.stop()

        let shown = call.renderer.indices.filter { $0 < 80 }.count
        let out = call.video.statistics.outbound
        let ep = call.endpoint.statistics
        print(
            "send pipeline, 5 % loss: shown \(shown)/80, resent \(out.retransmittedPacketsSent), NACKs \(out.nackCount), "
                + "PLIs \(out.pliCount), keyframes \(out.keyFramesEncoded), SRs \(ep.senderReportsSent), RTCP in \(ep.rtcpReceived)"
        )
        // 90 %: NACK repairs each loss (retried every RTT, up to 10 times, within the hole wait),
        // including a lost first packet of the stream, which is NACKed back from the first packet
        // received (VideoReceiveStream.findStreamStart); 80/80 over seeds 1-21.
        #expect(shown >= 72, "decoded share \(shown)/80")
        #expect(out.nackCount > 0 && out.retransmittedPacketsSent > 0, "NACKs were answered from the SendHistory")
        #expect(call.receiver.longestFreezeSeconds < 0.7)
        #expect(call.renderer.minimumPSNR > 28)
        let audio = try #require(playing.first { $0.kind == "audio" })
        print(
            "send pipeline, 5 % loss: audio concealed \(audio.concealedSamples) of \(audio.totalSamplesReceived), "
                + "FEC \(call.receiver.audio!.fecRecoveredSamples)")
        #expect(Double(audio.concealedSamples) < 0.03 * Double(audio.totalSamplesReceived), "\(audio.concealedSamples)")
        #expect(call.receiver.audio!.fecRecoveredSamples > 0, "in-band FEC recovered lost audio")
        let remote = try #require(call.endpoint.remoteInbound[call.video.ssrc])
        #expect(
            remote.roundTripTimeMeasurements > 0 && remote.roundTripTime > 0.015 && remote.roundTripTime < 0.5,
            "RTT \(remote.roundTripTime) s over a 2 x 10 ms relay")
    }

    @Test func aReceiverThatMissedTheKeyframeGetsOneThroughPLI() throws {
        let call = try EndToEndCall()
        let to = try call.receiver.socket.localAddress()
        call.start(sendingTo: nil)  // the first keyframe goes nowhere
        call.capture(frames: 0..<45) { i in
            if i == 10 { call.sink.destination.withLock { $0 = to } }
        }
        usleep(300_000)
        call.stop()
        let out = call.video.statistics.outbound
        #expect(out.pliCount >= 1, "the receiver asked for a keyframe")
        #expect(out.keyFramesEncoded >= 2)
        let seen = call.renderer.indices
        #expect(!seen.isEmpty && seen.min()! > 10 && seen.max()! >= 40, "\(seen.sorted())")
        #expect(call.renderer.unreadable == 0, "nothing decoded from a missing reference")
    }

    @Test func bandwidthEstimateLowersTheSendPipelinesBitrateOnACongestedPath() throws {
        let call = try EndToEndCall(width: 640, height: 360, bitrate: 1_500_000)
        let bottleneck = ImpairmentModel.Settings(delayMilliseconds: 10, rateBitsPerSecond: 500_000, queueLimitMilliseconds: 400)
        let relay = try ImpairmentRelay(
            configuration: .init(
                listen: .loopbackIPv4(port: 0), to: try call.receiver.socket.localAddress(),
                impairment: bottleneck, reverse: .init(delayMilliseconds: 10), seed: 3))
        relay.start()
        call.start(sendingTo: relay.listenAddress)
        call.capture(frames: 0..<105)
        let target = call.video.statistics.outbound.targetBitrate
        let estimate = call.endpoint.statistics.targetBitrate
        call.stop()
        relay.stop()
        print("send pipeline under a 500 kbit/s bottleneck: encoder target \(target), estimate \(estimate)")
        #expect(estimate < 800_000)
        #expect(target < 800_000, "the encoder follows the estimate")
    }
}
