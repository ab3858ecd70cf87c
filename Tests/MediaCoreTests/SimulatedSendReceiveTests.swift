// Our send pipeline into our receive pipeline on simulated time: loss repaired by NACK and
// in-band FEC, and a receiver that missed the first keyframe asking for one. (The estimate under
// a congested path is SimulatedBandwidthEstimationTests'.)
import MediaCore
import MediaTestSupport
import MediaTools
import Testing

@Suite struct SimulatedSendReceiveTests {
    /// 5 % loss each way (drawn per stream), 10 ms each way, 3 s of 320x240 video and speech.
    @Test func sendPipelineThroughFivePercentLossIsRepairedByNackAndFEC() throws {
        var options = SimulatedReceiveCall.Options()
        options.forward = ImpairmentModel.Settings(loss: 0.05, delayMilliseconds: 10)
        options.seed = 21
        options.bitrate = 500_000
        let call = try SimulatedCall(sendPipeline: options)
        call.start(seconds: 3)
        call.advance(by: .milliseconds(3020))
        let playing = call.pipeline.inboundStats
        call.advance(by: .milliseconds(400))
        let sender = call.sender!
        sender.stop()
        let shown = call.frames.indices.filter { $0 < 80 }.count
        let out = sender.video.statistics.outbound
        let ep = sender.endpoint.statistics
        let audio = try #require(playing.first { $0.kind == "audio" })
        let fec = call.pipeline.audio!.fecRecoveredSamples
        print(
            "simulated send pipeline, 5 % loss: shown \(shown)/80, resent \(out.retransmittedPacketsSent), NACKs \(out.nackCount), "
                + "PLIs \(out.pliCount), keyframes \(out.keyFramesEncoded), SRs \(ep.senderReportsSent), RTCP in \(ep.rtcpReceived), "
                + "audio concealed \(audio.concealedSamples) of \(audio.totalSamplesReceived), FEC \(fec), lost \(call.forward.counters.lost)"
        )
        // NACK repairs each loss (retried every RTT within the hole wait), including a lost first
        // packet of the stream, NACKed back from the first packet received.
        #expect(shown == 80, "decoded share \(shown)/80")
        #expect(out.nackCount > 0 && out.retransmittedPacketsSent > 0, "NACKs were answered from the SendHistory")
        #expect(call.pipeline.longestFreezeSeconds < 0.2)
        #expect(call.frames.minimumPSNR > 28)
        #expect(Double(audio.concealedSamples) < 0.03 * Double(audio.totalSamplesReceived), "\(audio.concealedSamples)")
        #expect(fec > 0, "in-band FEC recovered lost audio")
        let remote = try #require(sender.endpoint.remoteInbound[sender.video.ssrc])
        #expect(
            remote.roundTripTimeMeasurements > 0 && remote.roundTripTime >= 0.02 && remote.roundTripTime < 0.05,
            "RTT \(remote.roundTripTime) s over 2 x 10 ms")
    }

    /// The first keyframe goes nowhere (everything is lost until frame 10): the receiver asks
    /// for a keyframe with PLI and shows frames from then on, none decoded from a missing
    /// reference.
    @Test func aReceiverThatMissedTheKeyframeGetsOneThroughPLI() throws {
        var options = SimulatedReceiveCall.Options()
        options.forward = ImpairmentModel.Settings(loss: 1)
        options.reverse = ImpairmentModel.Settings()
        let call = try SimulatedCall(sendPipeline: options)
        call.start(seconds: 1.5)
        call.advance(by: .milliseconds(320))  // frames 0-9 are lost
        call.forward.change(to: ImpairmentModel.Settings(), seed: 2)
        call.advance(by: .milliseconds(1500))
        call.sender.stop()
        let out = call.sender.video.statistics.outbound
        let seen = call.frames.indices
        print(
            "simulated missed keyframe: PLIs \(out.pliCount), keyframes \(out.keyFramesEncoded), shown \(seen.count), first \(seen.min() ?? -1), last \(seen.max() ?? -1)"
        )
        #expect(out.pliCount >= 1, "the receiver asked for a keyframe")
        #expect(out.keyFramesEncoded >= 2)
        #expect(!seen.isEmpty && seen.min()! > 10 && seen.min()! <= 14 && seen.max()! >= 40, "\(seen.sorted())")
        #expect(call.frames.unreadable == 0, "nothing decoded from a missing reference")
    }
}
