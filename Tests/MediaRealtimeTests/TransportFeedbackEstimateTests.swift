import Foundation
import Glibc
import MediaTestSupport
import Testing

@testable import MediaCore

/// One sender and one receiver on transport-wide feedback, on loopback: a 640x360 VP8 send
/// stream numbering its packets (element ID 5; RTX on 97 with `rtx`) and the
/// `RTCPSenderEndpoint` matching the feedback to its send log, through an `ImpairmentRelay`
/// shaped by `forward` (10 ms back), to a receiver that sends transport-cc and receiver reports
/// every 250 ms but no REMB.
struct TransportFeedbackRig {
    let receiver: ReceivePipeline
    let relay: ImpairmentRelay
    let video: VideoSendStream
    let endpoint: RTCPSenderEndpoint

    init(
        key: SRTPKeyMaterial?, rtx: Bool, forward: ImpairmentModel.Settings, seed: UInt64, encoderBitrate: Int,
        start: Int, maximum: Int, probes: Bool
    ) throws {
        let rxSocket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        var conf = ReceivePipelineConfiguration(remoteKey: key)
        var settings = VideoReceiveSettings(codec: .vp8, payloadType: 96)
        if rtx { settings.rtxPayloadType = 97 }
        conf.video = [settings]
        conf.transportSequenceNumberExtensionID = 5
        conf.sendREMB = false
        conf.reportIntervalMilliseconds = 250
        receiver = try ReceivePipeline(socket: rxSocket, configuration: conf, renderer: nil)
        var relayConf = ImpairmentRelay.Configuration(
            listen: .loopbackIPv4(port: 0), to: try rxSocket.localAddress(), impairment: forward, seed: seed)
        relayConf.reverse = ImpairmentModel.Settings(delayMilliseconds: 10)
        relay = try ImpairmentRelay(configuration: relayConf)
        let txSocket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let numbers = TransportSequenceNumbers()
        var vc = sendTestVideoConfiguration(width: 640, height: 360, srtp: key)
        vc.encoder.bitrate = encoderBitrate
        vc.transportSequence = (id: 5, numbers: numbers)
        if rtx { vc.rtxPayloadType = 97 }
        video = try VideoSendStream(configuration: vc, sink: UDPPacketSink(socket: txSocket, destination: relay.listenAddress))
        var ec = RTCPSenderEndpoint.Configuration(remoteKey: key, localKey: key)
        ec.startBitrate = start
        ec.maximumBitrate = maximum
        ec.transportSequenceNumbers = numbers
        ec.probes = probes
        endpoint = try RTCPSenderEndpoint(socket: txSocket, configuration: ec, targets: [video])
    }

    func start() { relay.start(); receiver.start(); video.start(); endpoint.start() }
    func stop() { video.stop(); endpoint.stop(); receiver.stop(); relay.stop() }
}

/// Captures `frames` 640x360 synthetic frames into `video` at 30 fps in real time, calling
/// `after` with each frame's index once it is captured.
func feedRealTime(_ video: VideoSendStream, frames: Int, after: (Int) -> Void = { _ in }) {
    let picture = VideoFrame(width: 640, height: 360)
    let start = MonotonicTime.now.nanoseconds
    for i in 0..<frames {
        while MonotonicTime.now.nanoseconds < start + UInt64(i) * 33_333_333 { usleep(1000) }
        SyntheticVideo.render(frameIndex: i, into: picture)
        sendTestCapture(video.capturer, picture, timeStampNs: Int64(i) * 33_333_333)
        after(i)
    }
}

/// The send path on transport-wide feedback: VideoSendStream numbering its packets ->
/// ImpairmentRelay (600 kbit/s, 100 ms queue) -> ReceivePipeline sending transport-cc feedback and
/// receiver reports, no REMB -> RTCPSenderEndpoint with the transport's send log. The endpoint's
/// delay-based estimate takes part and the encoder's target follows the combined estimate down
/// from 1.5 Mbit/s.
@Suite(.serialized) struct TransportFeedbackEstimateTests {
    @Test func theEncoderTargetFollowsTheEstimateFromTransportFeedback() throws {
        let bottleneck = ImpairmentModel.Settings(delayMilliseconds: 10, rateBitsPerSecond: 600_000, queueLimitMilliseconds: 100)
        let rig = try TransportFeedbackRig(
            key: nil, rtx: false, forward: bottleneck, seed: 3, encoderBitrate: 1_500_000, start: 1_500_000,
            maximum: 1_500_000, probes: true)
        let (relay, video, endpoint) = (rig.relay, rig.video, rig.endpoint)
        rig.start()
        var targets: [Int] = []
        feedRealTime(video, frames: 150) { i in
            if i % 15 == 14 { targets.append(Int(video.statistics.outbound.targetBitrate)) }
        }
        let stats = endpoint.statistics
        rig.stop()
        print(
            "transport-cc estimate: targets \(targets), delay-based \(stats.delayBasedBitrate ?? -1), acknowledged \(stats.acknowledgedBitrate), "
                + "feedback \(stats.session.transportFeedbackReceived), REMB \(stats.session.rembsReceived), "
                + "relay drops \(relay.statistics.forward.droppedByQueue)")
        #expect(stats.session.transportFeedbackReceived > 20, "feedback every 100 ms for 5 s")
        #expect(stats.session.rembsReceived == 0)
        let delayBased = try #require(stats.delayBasedBitrate)
        #expect(stats.acknowledgedBitrate > 0 && stats.acknowledgedBitrate < 800_000, "the relay carries at most 600 kbit/s")
        #expect(targets.min()! < 1_000_000, "the target came down from 1.5 Mbit/s: \(targets)")
        #expect(delayBased < 1_500_000)
    }
}

/// Probing through the public path: a paced VideoSendStream with RTX and SRTP, an
/// `RTCPSenderEndpoint` (SRTCP) with the transport's send log, an `ImpairmentRelay` carrying
/// 2.5 Mbit/s, and a ReceivePipeline sending transport-cc. From a 300 kbit/s start the probes'
/// padding (protected on the RTX SSRC, unprotected and recorded by the receiver) lifts the target
/// past 1.5 Mbit/s within 2 s; the same run without probes stays near its start.
@Suite(.serialized) struct ProbingEndToEndTests {
    static func run(probing: Bool) throws -> (target: Int, padding: Int, clusters: Int) {
        let key = SRTPKeyMaterial.random(for: .aeadAES128GCM)
        let path = ImpairmentModel.Settings(delayMilliseconds: 10, rateBitsPerSecond: 2_500_000, queueLimitMilliseconds: 50)
        let rig = try TransportFeedbackRig(
            key: key, rtx: true, forward: path, seed: 5, encoderBitrate: 3_000_000, start: 300_000, maximum: 3_000_000,
            probes: probing)
        let receiver = rig.receiver
        rig.start()
        feedRealTime(rig.video, frames: 60)
        let stats = rig.endpoint.statistics
        let padding = receiver.statistics.rtxPadding
        rig.stop()
        print(
            "probing \(probing): target \(stats.targetBitrate) after 2 s, clusters \(stats.session.probeClustersSent), "
                + "padding received \(padding), receiver auth failures \(receiver.statistics.authFailures)")
        #expect(receiver.statistics.authFailures == 0)
        return (stats.targetBitrate, padding, stats.session.probeClustersSent)
    }

    @Test func probesLiftTheTargetThroughSRTPAndTheEndpoint() throws {
        let probed = try Self.run(probing: true)
        #expect(probed.target > 1_500_000, "the probes found the 2.5 Mbit/s path")
        #expect(probed.clusters >= 2 && probed.padding > 0, "padding went through SRTP and the receiver recorded it")
        let plain = try Self.run(probing: false)
        #expect(plain.target < 600_000 && plain.clusters == 0 && plain.padding == 0)
    }
}

/// The sender's transport-cc bookkeeping allocates nothing once warm: logging sends, looking them
/// up, and matching a parsed feedback to the log (parsing the RTCP itself allocates its arrays).
/// Nor does the estimator, once each of its paths has run.
@Suite struct TransportFeedbackAllocationTests {
    @Test func sendLogAdapterAndEstimatorAllocateNothingOnceWarm() throws {
        let numbers = TransportSequenceNumbers(initial: 100)
        var builder = TransportFeedbackBuilder()
        var adapter = TransportFeedbackAdapter()
        var estimator = DelayBasedBandwidthEstimator(startBitrate: 1_000_000)
        var now: UInt64 = 1_000_000_000
        // One round: 30 packets 3 ms apart arriving 20 ms later.
        func round() throws -> RTCPTransportFeedback {
            for _ in 0..<30 {
                let seq = numbers.take(sendTime: MonotonicTime(nanoseconds: now), size: 1200)
                builder.packetArrived(sequenceNumber: seq, arrival: MonotonicTime(nanoseconds: now + 20_000_000))
                now += 3_000_000
            }
            let made = builder.makeFeedback(senderSSRC: 1, mediaSSRC: 2)
            return try #require(made)
        }
        for _ in 0..<20 {  // warm: the result array reaches its size
            let fb = try round()
            adapter.adapt(fb, sendLog: numbers)
            estimator.update(adapter.results, now: MonotonicTime(nanoseconds: now))
        }
        var feedbacks: [RTCPTransportFeedback] = []
        for _ in 0..<10 { feedbacks.append(try round()) }
        var sends = [UInt64](repeating: 0, count: 300)
        var found = 0
        let logging = AllocationCounter.count {
            for i in 0..<300 {
                sends[i] = UInt64(numbers.take(sendTime: MonotonicTime(nanoseconds: now + UInt64(i)), size: 1000))
            }
            for i in 0..<300 where numbers.sent(UInt16(truncatingIfNeeded: sends[i])) != nil { found += 1 }
        }
        var matched = 0
        let adapting = AllocationCounter.count {
            for k in 0..<feedbacks.count {
                adapter.adapt(feedbacks[k], sendLog: numbers)
                matched += adapter.results.count
            }
        }
        // The estimator's first pass over paths the warm-up did not take (its first decrease, the
        // link capacity) allocates once (runtime metadata); the second pass is the steady state.
        let estimatingFirst = AllocationCounter.count {
            for k in 0..<feedbacks.count {
                estimator.update(adapter.results, now: MonotonicTime(nanoseconds: UInt64(Int64(now) + Int64(k) * 100_000_000)))
            }
        }
        let estimating = AllocationCounter.count {
            for k in 0..<feedbacks.count {
                estimator.update(
                    adapter.results, now: MonotonicTime(nanoseconds: UInt64(Int64(now) + Int64(k + 10) * 100_000_000)))
            }
        }
        print(
            "transport-cc allocations: send log \(logging) for 300 packets, adapter \(adapting) for 10 feedbacks, "
                + "estimator \(estimatingFirst) then \(estimating) for 10 feedbacks")
        #expect(estimating == 0)
        #expect(logging == 0 && found == 300)
        #expect(adapting == 0 && adapter.unmatched == 0)
        #expect(matched == 300, "10 feedbacks of 30 packets, all in the log")
    }
}
