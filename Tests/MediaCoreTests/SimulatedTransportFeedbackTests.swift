// Send-side congestion control on transport-wide feedback, on simulated time: our 640x360 VP8 send
// stream numbering its packets (element ID 5) and the RTCP endpoint matching the feedback to its
// send log, through a simulated path, to our receive pipeline sending transport-cc feedback and
// receiver reports (no REMB).
import MediaCore
import MediaTestSupport
import MediaTools
import Testing

@Suite struct SimulatedTransportFeedbackTests {
    /// A video-only call on transport-cc through `forward` (10 ms back), `seconds` long.
    static func run(
        forward: ImpairmentModel.Settings, seed: UInt64, rtx: Bool, encoderBitrate: Int, start: Int,
        maximum: Int, probes: Bool, seconds: Double, sample: ((SimulatedSendPipeline, Int) -> Void)? = nil
    ) throws -> SimulatedCall<SimulatedSendPipeline> {
        var options = SimulatedReceiveCall.Options()
        options.forward = forward
        options.reverse = ImpairmentModel.Settings(delayMilliseconds: 10)
        options.seed = seed
        options.width = 640
        options.height = 360
        options.bitrate = encoderBitrate
        options.transportFeedback = true
        options.rtxPayloadType = rtx ? 97 : nil
        let numbers = TransportSequenceNumbers()
        let call = try SimulatedCall(sendPipeline: options) { s in
            s.video.transportSequence = (id: 5, numbers: numbers)
            if rtx { s.video.rtxPayloadType = 97 }
            s.endpoint.startBitrate = start
            s.endpoint.maximumBitrate = maximum
            s.endpoint.transportSequenceNumbers = numbers
            s.endpoint.probes = probes
        }
        if let sample { call.sender.onFrame = { [unowned call] i in sample(call.sender, i) } }
        call.start(seconds: seconds, audio: false)
        call.advance(by: .seconds(seconds) + .milliseconds(100))
        return call
    }

    /// Through a 600 kbit/s bottleneck with a 100 ms queue, the endpoint's delay-based estimate
    /// takes part and the encoder's target follows the combined estimate down from 1.5 Mbit/s.
    @Test func theEncoderTargetFollowsTheEstimateFromTransportFeedback() throws {
        var targets: [Int] = []
        let call = try Self.run(
            forward: ImpairmentModel.Settings(delayMilliseconds: 10, rateBitsPerSecond: 600_000, queueLimitMilliseconds: 100),
            seed: 3, rtx: false, encoderBitrate: 1_500_000, start: 1_500_000, maximum: 1_500_000, probes: true,
            seconds: 5
        ) { sender, i in if i % 15 == 14 { targets.append(Int(sender.video.statistics.outbound.targetBitrate)) } }
        let stats = call.sender.endpoint.statistics
        call.sender.stop()
        print(
            "simulated transport-cc estimate: targets \(targets), delay-based \(stats.delayBasedBitrate ?? -1), "
                + "acknowledged \(stats.acknowledgedBitrate), feedback \(stats.session.transportFeedbackReceived), "
                + "REMB \(stats.session.rembsReceived), path drops \(call.forward.counters.lost)")
        #expect(stats.session.transportFeedbackReceived > 20, "feedback every 100 ms for 5 s")
        #expect(stats.session.rembsReceived == 0)
        let delayBased = try #require(stats.delayBasedBitrate)
        #expect(stats.acknowledgedBitrate > 0 && stats.acknowledgedBitrate < 800_000, "the path carries at most 600 kbit/s")
        #expect(targets.min()! < 1_000_000, "the target came down from 1.5 Mbit/s: \(targets)")
        #expect(delayBased < 1_500_000)
    }

    /// Probing through the public path: paced video with RTX and SRTP, SRTCP, a 2.5 Mbit/s path.
    /// From a 300 kbit/s start the probes' padding (protected on the RTX SSRC, unprotected and
    /// recorded by the receiver) lifts the target past 1.5 Mbit/s within 2 s; the same run without
    /// probes stays near its start.
    @Test func probesLiftTheTargetThroughSRTPAndTheEndpoint() throws {
        func run(probing: Bool) throws -> (target: Int, padding: Int, clusters: Int) {
            let call = try Self.run(
                forward: ImpairmentModel.Settings(
                    delayMilliseconds: 10, rateBitsPerSecond: 2_500_000, queueLimitMilliseconds: 50),
                seed: 5, rtx: true, encoderBitrate: 3_000_000, start: 300_000, maximum: 3_000_000, probes: probing,
                seconds: 2)
            let stats = call.sender.endpoint.statistics
            let rx = call.pipeline.statistics
            call.sender.stop()
            print(
                "simulated probing \(probing): target \(stats.targetBitrate) after 2 s, clusters \(stats.session.probeClustersSent), "
                    + "padding received \(rx.rtxPadding), receiver auth failures \(rx.authFailures)")
            #expect(rx.authFailures == 0)
            // Probe padding arrives as padding-only RTX or as the last media packet again (an RTX
            // packet unwrapped and dropped as a duplicate): there is no loss here to repair.
            return (stats.targetBitrate, rx.rtxPadding + rx.rtxUnwrapped, stats.session.probeClustersSent)
        }
        let probed = try run(probing: true)
        #expect(probed.target > 1_500_000, "the probes found the 2.5 Mbit/s path")
        #expect(probed.clusters >= 2 && probed.padding > 0, "padding went through SRTP and the receiver recorded it")
        let plain = try run(probing: false)
        #expect(plain.target < 600_000 && plain.clusters == 0 && plain.padding == 0)
    }
}
