import Foundation
import Glibc
import Testing

@testable import MediaCore

@Suite(.serialized) struct ReceiveBandwidthEstimationTests {
    /// Our sender starts at 1.5 Mbit/s into a 500 kbit/s bottleneck (ImpairmentRelay rate limit with
    /// a 400 ms queue): REMB and receiver-report loss bring the encoder's bitrate down; when the
    /// path clears (the sender moves to an unconstrained relay) the bitrate climbs again.
    @Test func lowersTheVideoBitrateUnderACongestedPathAndRecoversWhenItClears() throws {
        let key = SRTPKeyMaterial.random(for: .aeadAES128GCM)
        let renderer = IndexingRenderer(width: 640, height: 360)
        // Rendered at each frame's playout time (the default). The lowest estimate does not
        // depend on it: eight runs each way gave 216-313 kbit/s scheduled and 191-422 kbit/s as
        // decoded (an earlier 4 of 16 below 150 kbit/s came from a machine busy with builds).
        let receiver = try makeReceiver(key: key, renderer: renderer)
        let to = try receiver.socket.localAddress()
        let bottleneck = ImpairmentModel.Settings(delayMilliseconds: 10, rateBitsPerSecond: 500_000, queueLimitMilliseconds: 400)
        var narrowConf = ImpairmentRelay.Configuration(listen: .loopbackIPv4(port: 0), to: to, impairment: bottleneck, seed: 1)
        narrowConf.reverse = ImpairmentModel.Settings(delayMilliseconds: 10)
        let narrow = try ImpairmentRelay(configuration: narrowConf)
        let clear = try ImpairmentRelay(
            configuration: .init(
                listen: .loopbackIPv4(port: 0), to: to,
                impairment: .init(delayMilliseconds: 10), seed: 2))
        narrow.start(); clear.start(); receiver.start()
        defer { receiver.stop(); narrow.stop(); clear.stop() }
        let sender = try ReceiveTestSender(to: narrow.listenAddress, key: key, width: 640, height: 360, bitrate: 1_500_000)
        try sender.run(seconds: 3.5)
        let congested = sender.encoder.bitrate
        let lowest = sender.bitrateChanges.min() ?? 1_500_000
        sender.destination = clear.listenAddress
        // The estimate may rise by about 8 % a second, and only once the packets still queued at
        // the bottleneck (up to 400 ms of them) have drained and the detector has left its hold
        // state. That start varies: most runs pass 1.2x within 3 s, but runs on a busy machine
        // started late enough that a fixed 8 s gave 1.14x. So the sender runs on, a second at a
        // time, until the bitrate has risen by 20 % or 15 s have passed.
        var recoverySeconds = 0
        while recoverySeconds < 15 && sender.encoder.bitrate <= congested * 6 / 5 {
            try sender.run(seconds: 1, startFrame: 105 + 30 * recoverySeconds)
            recoverySeconds += 1
        }
        let recovered = sender.encoder.bitrate
        print(
            "bitrate: start 1500000, congested \(congested), lowest \(lowest), recovered \(recovered) after \(recoverySeconds) s; "
                + "REMBs \(sender.session.counters.rembsReceived), loss \(sender.session.estimator.lastFractionLost), "
                + "bottleneck drops \(narrow.statistics.forward.droppedByQueue), keyframes \(sender.keyframesSent), "
                + "resent \(sender.retransmissions)")
        #expect(congested < 800_000, "the estimate came down towards the 500 kbit/s bottleneck")
        #expect(lowest > 150_000, "without collapsing far below it")
        #expect(recovered > congested * 6 / 5, "and rose again once the path cleared")
        #expect(sender.session.counters.rembsReceived > 0)
    }
}
