// The receiver's bandwidth estimate (REMB) and loss reports bringing our sender down to a
// bottleneck, and letting it climb again when the path clears, on simulated time: our send
// pipeline, a path with a 500 kbit/s rate limit and a 400 ms queue, our receive pipeline.
import MediaCore
import MediaTestSupport
import MediaTools
import Testing

@Suite struct SimulatedBandwidthEstimationTests {
    @Test func lowersTheVideoBitrateUnderACongestedPathAndRecoversWhenItClears() throws {
        var options = SimulatedReceiveCall.Options()
        options.forward = ImpairmentModel.Settings(delayMilliseconds: 10, rateBitsPerSecond: 500_000, queueLimitMilliseconds: 400)
        options.reverse = ImpairmentModel.Settings(delayMilliseconds: 10)
        options.width = 640
        options.height = 360
        options.bitrate = 1_500_000
        options.seed = 1
        let call = try SimulatedCall(sendPipeline: options)
        let sender = call.sender!
        var targets: [Int] = []
        sender.onFrame = { i in
            if i % 8 == 7 { targets.append(Int(sender.video.statistics.outbound.targetBitrate)) }
        }
        call.start(seconds: 20)
        call.advance(by: .milliseconds(3500))
        let congested = Int(sender.video.statistics.outbound.targetBitrate)
        let lowest = targets.min() ?? 1_500_000
        let dropped = call.forward.counters.lost
        call.forward.change(to: ImpairmentModel.Settings(delayMilliseconds: 10), seed: 2)
        // The estimate may rise by about 8 % a second, once the packets still queued at the
        // bottleneck (up to 400 ms of them) have drained and the detector has left its hold
        // state: the sender runs on, a second at a time, until its bitrate rose by 20 % or 15 s.
        var recoverySeconds = 0
        while recoverySeconds < 15 && Int(sender.video.statistics.outbound.targetBitrate) <= congested * 6 / 5 {
            call.advance(by: .seconds(1))
            recoverySeconds += 1
        }
        let recovered = Int(sender.video.statistics.outbound.targetBitrate)
        let session = sender.endpoint.statistics.session
        sender.stop()
        print(
            "simulated bandwidth estimate: start 1500000, congested \(congested), lowest \(lowest), recovered \(recovered) "
                + "after \(recoverySeconds) s; REMBs \(session.rembsReceived), bottleneck drops \(dropped), "
                + "keyframes \(sender.video.statistics.outbound.keyFramesEncoded), resent \(sender.video.statistics.outbound.retransmittedPacketsSent)"
        )
        #expect(congested < 800_000, "the estimate came down towards the 500 kbit/s bottleneck")
        #expect(lowest > 150_000, "without collapsing far below it")
        #expect(recovered > congested * 6 / 5, "and rose again once the path cleared")
        #expect(session.rembsReceived > 0)
    }
}
