import Foundation
// The soak call: our send pipelines (VideoSendStream + AudioSendStream, RTCPSenderEndpoint on the
// send socket) -> ImpairmentRelay (both directions) -> our ReceivePipeline with an
// AudioPlayoutClock, all in this process over loopback UDP, the same wiring as `revue-media demo`.
import MediaCore
import MediaTools
import RevueSession
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Counts decoded pictures and identifies each by its bar code.
final class CountingRenderer: VideoRenderer, @unchecked Sendable {
    let decoded = Atomic<Int>(0)
    let identified = Atomic<Int>(0)
    func render(_ frame: DecodedVideoFrame) {
        decoded.add(1, ordering: .relaxed)
        if SyntheticVideo.frameIndex(in: frame.view) != nil { identified.add(1, ordering: .relaxed) }
    }
}

/// Counts played PCM samples.
final class CountingAudioSink: AudioSink, @unchecked Sendable {
    let samples = Atomic<Int>(0)
    func play(_ s: Span<Int16>, sampleRate: Int, channels: Int) {
        samples.add(s.count / max(1, channels), ordering: .relaxed)
    }
}

final class SoakCall {
    static let width = 320, height = 240
    let key = SRTPKeyMaterial.random(for: .aeadAES128GCM)
    let renderer = CountingRenderer()
    let audioSink = CountingAudioSink()
    let receiver: ReceivePipeline
    let clock: AudioPlayoutClock
    let video: VideoSendStream
    let audio: AudioSendStream
    let endpoint: RTCPSenderEndpoint
    let relay: ImpairmentRelay
    let sendSocket: UDPSocket
    private let picture = VideoFrame(width: SoakCall.width, height: SoakCall.height)
    private var source = SyntheticAudio(pattern: .speech, sampleRate: 48_000)
    private var start: UInt64 = 0
    private(set) var videoFrames = 0
    private var audioChunks = 0

    init(bitrate: Int = 500_000, receiveBufferSize: Int = 1 << 21) throws {
        var ro = UDPSocket.Options()
        ro.receiveBufferSize = receiveBufferSize
        let rsock = try UDPSocket(bindingTo: .loopbackIPv4(port: 0), options: ro)
        var conf = ReceivePipelineConfiguration(remoteKey: key, localKey: key)
        conf.video = [VideoReceiveSettings(codec: .vp8, payloadType: 96)]
        var a = AudioReceiveSettings(payloadType: 111)
        a.channels = 1
        conf.audio = a
        conf.reportIntervalMilliseconds = 250
        receiver = try ReceivePipeline(socket: rsock, configuration: conf, renderer: renderer)
        clock = AudioPlayoutClock(stream: receiver.audio!, sink: audioSink)
        relay = try ImpairmentRelay(configuration: .init(listen: .loopbackIPv4(port: 0), to: try rsock.localAddress(), seed: 9))

        var so = UDPSocket.Options()
        so.receiveBufferSize = 1 << 20
        so.sendBufferSize = 4 << 20
        sendSocket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0), options: so)
        var vc = VideoSendStream.Configuration(codec: .vp8, width: Self.width, height: Self.height)
        vc.encoder.bitrate = bitrate
        vc.srtp = key
        vc.payloadType = 96
        vc.historyCapacity = 2048
        vc.ringCapacity = 4
        video = try VideoSendStream(configuration: vc, sink: UDPPacketSink(socket: sendSocket, destination: relay.listenAddress))
        var ac = AudioSendStream.Configuration()
        ac.srtp = key
        ac.payloadType = 111
        ac.inbandFEC = true
        ac.expectedPacketLossPercent = 10
        audio = try AudioSendStream(configuration: ac, sink: UDPPacketSink(socket: sendSocket, destination: relay.listenAddress))
        var ec = RTCPSenderEndpoint.Configuration(remoteKey: key, localKey: key)
        ec.reportIntervalMilliseconds = 250
        ec.startBitrate = bitrate
        ec.maximumBitrate = bitrate
        endpoint = try RTCPSenderEndpoint(socket: sendSocket, configuration: ec, targets: [video, audio])
    }

    var receiveAddress: SocketAddress { (try? receiver.socket.localAddress()) ?? .loopbackIPv4(port: 0) }

    func startAll() {
        relay.start(); receiver.start(); clock.start(); video.start(); audio.start(); endpoint.start()
        start = MonotonicTime.now.nanoseconds
    }

    func stopAll() {
        video.stop(); audio.stop(flushPartialFrame: false); endpoint.stop(); clock.stop(); receiver.stop(); relay.stop()
    }

    /// Sets both directions of the relay.
    func impair(_ s: ImpairmentModel.Settings) {
        var c = relay.configuration
        c.forward = s
        c.reverse = s
        relay.update(configuration: c)
    }

    /// Captures in real time (30 fps video, 20 ms audio chunks) for `seconds`, calling `tick`
    /// about every 100 ms with the seconds since the call started.
    func capture(seconds: Double, tick: (Double) -> Void = { _ in }) {
        let until = MonotonicTime.now.nanoseconds + UInt64(seconds * 1e9)
        var nextTick = MonotonicTime.now.nanoseconds
        while true {
            let now = MonotonicTime.now.nanoseconds
            if now >= until { break }
            let elapsed = now - start
            while UInt64(audioChunks) * 20_000_000 <= elapsed {
                let pcm = source.int16s(frames: 960)
                pcm.withUnsafeBufferPointer {
                    audio.capturer.capture(
                        $0, sampleRate: 48_000, channels: 1, timeStampNs: Int64(start) + Int64(audioChunks) * 20_000_000)
                }
                audioChunks += 1
            }
            if UInt64(videoFrames) * 33_333_333 <= elapsed { captureVideo() }
            if now >= nextTick { tick(Double(elapsed) / 1e9); nextTick = now + 100_000_000 }
            usleep(1000)
        }
    }

    /// Captures one video frame now (the next index).
    func captureVideo() {
        SyntheticVideo.render(frameIndex: videoFrames, into: picture)
        video.capturer.capture(PixelBufferView(picture.view), timeStampNs: Int64(start) + Int64(videoFrames) * 33_333_333)
        videoFrames += 1
    }

    /// Captures `count` frames back to back, as fast as the capture call returns (a camera far
    /// faster than the encoder): the ring must drop the oldest and count it, never block.
    /// Returns the seconds the burst took.
    func captureBurst(_ count: Int) -> Double {
        let t0 = Probe.now()
        for _ in 0..<count { captureVideo() }
        // Keep the real-time schedule: the next frames are due later than the burst's indices.
        start = MonotonicTime.now.nanoseconds - UInt64(videoFrames) * 33_333_333
        audioChunks = videoFrames * 33_333_333 / 20_000_000
        return Probe.now() - t0
    }

    /// One stream's accounting. `sent` is first transmissions only: W3C's `packetsSent` includes
    /// retransmissions, which `retransmittedPacketsSent` also counts separately, so `sent` is
    /// `packetsSent - retransmittedPacketsSent` (NACK resends keep their sequence number). It equals
    /// the receiver's RFC 3550 "expected" (first to highest sequence number),
    /// which is by definition `packetsReceived + packetsLost`: received counts every arrival
    /// (retransmissions and duplicates included), lost is expected minus received (negative when
    /// duplicates outnumber losses). Late packets (arrived after their frame was played or
    /// skipped) are counted in received and, separately, in `packetsDiscarded`.
    struct Consistency {
        var kind: String
        var sent: Int64, retransmitted: Int64, received: Int64, lost: Int64, late: Int64, remoteLost: Int64
        /// sent - (received + lost): packets the receiver does not account for.
        var difference: Int64 { sent - (received + lost) }
        var line: String {
            "\(kind): sent \(sent) = received \(received) + lost \(lost) -> difference \(difference) "
                + "[retransmissions sent \(retransmitted), arrivals counted in received; late/discarded \(late), also in received; "
                + "loss the sender last saw in RTCP receiver reports \(remoteLost)]"
        }
    }

    func consistency() -> [Consistency] {
        let inbound = receiver.inboundStats
        let remote = endpoint.remoteInbound
        return [("video", video.statistics.outbound, video.ssrc), ("audio", audio.statistics.outbound, audio.ssrc)].map {
            kind, o, ssrc in
            let i = inbound.first { $0.ssrc == ssrc } ?? InboundRTPStreamStats()
            return Consistency(
                kind: kind, sent: Int64(o.packetsSent - o.retransmittedPacketsSent),
                retransmitted: Int64(o.retransmittedPacketsSent),
                received: Int64(i.packetsReceived), lost: i.packetsLost, late: Int64(i.packetsDiscarded),
                remoteLost: remote[ssrc]?.packetsLost ?? -1)
        }
    }

    var framesDecoded: Int { renderer.decoded.load(ordering: .relaxed) }
}
