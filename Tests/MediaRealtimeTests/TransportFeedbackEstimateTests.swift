import Foundation
import Glibc
import Testing
@testable import MediaCore

/// The send path on transport-wide feedback: VideoSendStream numbering its packets ->
/// ImpairmentRelay (600 kbit/s, 100 ms queue) -> ReceivePipeline sending transport-cc feedback and
/// receiver reports, no REMB -> RTCPSenderEndpoint with the transport's send log. The endpoint's
/// delay-based estimate takes part and the encoder's target follows the combined estimate down
/// from 1.5 Mbit/s.
@Suite(.serialized) struct TransportFeedbackEstimateTests {
    @Test func theEncoderTargetFollowsTheEstimateFromTransportFeedback() throws {
        let rxSocket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        var conf = ReceivePipelineConfiguration(remoteKey: nil)
        conf.video = [VideoReceiveSettings(codec: .vp8, payloadType: 96)]
        conf.transportSequenceNumberExtensionID = 5
        conf.sendREMB = false
        conf.reportIntervalMilliseconds = 250
        let receiver = try ReceivePipeline(socket: rxSocket, configuration: conf, renderer: nil)
        let bottleneck = ImpairmentModel.Settings(delayMilliseconds: 10, rateBitsPerSecond: 600_000, queueLimitMilliseconds: 100)
        var relayConf = ImpairmentRelay.Configuration(listen: .loopbackIPv4(port: 0), to: try rxSocket.localAddress(),
                                                      impairment: bottleneck, seed: 3)
        relayConf.reverse = ImpairmentModel.Settings(delayMilliseconds: 10)
        let relay = try ImpairmentRelay(configuration: relayConf)
        let txSocket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let numbers = TransportSequenceNumbers()
        var vc = sendTestVideoConfiguration(width: 640, height: 360)
        vc.encoder.bitrate = 1_500_000
        vc.transportSequence = (id: 5, numbers: numbers)
        let video = try VideoSendStream(configuration: vc, sink: UDPPacketSink(socket: txSocket, destination: relay.listenAddress))
        var ec = RTCPSenderEndpoint.Configuration(remoteKey: nil, localKey: nil)
        ec.startBitrate = 1_500_000
        ec.maximumBitrate = 1_500_000
        ec.transportSequenceNumbers = numbers
        let endpoint = try RTCPSenderEndpoint(socket: txSocket, configuration: ec, targets: [video])
        relay.start(); receiver.start(); video.start(); endpoint.start()
        let picture = VideoFrame(width: 640, height: 360)
        let start = UDPSocket.monotonicNanoseconds()
        var targets: [Int] = []
        for i in 0..<150 {
            while UDPSocket.monotonicNanoseconds() < start + UInt64(i) * 33_333_333 { usleep(1000) }
            SyntheticVideo.render(frameIndex: i, into: picture)
            sendTestCapture(video.capturer, picture, timeStampNs: Int64(i) * 33_333_333)
            if i % 15 == 14 { targets.append(Int(video.statistics.outbound.targetBitrate)) }
        }
        let stats = endpoint.statistics
        video.stop(); endpoint.stop(); receiver.stop(); relay.stop()
        print("transport-cc estimate: targets \(targets), delay-based \(stats.delayBasedBitrate ?? -1), acknowledged \(stats.acknowledgedBitrate), "
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
