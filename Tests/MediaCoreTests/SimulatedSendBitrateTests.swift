// The send pipeline's bitrate control on simulated time: our VideoSendStream, AudioSendStream and
// RTCPSenderEndpoint, driven from the test's clock, send through an impaired path to our
// ReceivePipeline, whose receiver reports, NACKs, PLIs and REMB come back over the reverse path.
// Everything runs in due-time order on the test's thread, so the figures are the same in every
// run and on a busy machine.
import MediaCore
import MediaTestSupport
import MediaTools
import Testing

@Suite struct SimulatedSendBitrateTests {
    /// Phases switch the media path: 5 % loss for 3 s, 60 % loss for 3 s, then a clear path for
    /// 5 s (10 ms each way throughout; the reverse path stays clear).
    @Test func targetBitrateLowersUnderLossAndRecoversWhenThePathClears() throws {
        let configured = 600_000
        var options = SimulatedReceiveCall.Options()
        options.forward = ImpairmentModel.Settings(loss: 0.05, delayMilliseconds: 10)
        options.reverse = ImpairmentModel.Settings(delayMilliseconds: 10)
        options.bitrate = configured
        options.seed = 9
        let call = try SimulatedCall(sendPipeline: options)
        let sender = call.sender!
        var samples: [(frame: Int, target: Int)] = []
        sender.onFrame = { i in
            if i % 8 == 7 { samples.append((i, Int(sender.video.statistics.outbound.targetBitrate))) }
        }
        call.start(seconds: 11)
        call.advance(by: .seconds(3))
        let refused = sender.video.statistics.retransmissionsRefused
        let keyframesUnderLoss = sender.video.statistics.outbound.keyFramesEncoded
        call.forward.change(to: ImpairmentModel.Settings(loss: 0.6, delayMilliseconds: 10), seed: 10)
        call.advance(by: .seconds(3))
        call.forward.change(to: ImpairmentModel.Settings(delayMilliseconds: 10), seed: 11)
        call.advance(by: .seconds(5) + .milliseconds(100))
        let out = sender.video.statistics
        let ep = sender.endpoint.statistics
        sender.stop()
        let underLoss = samples.filter { $0.frame < 90 }.map(\.target)
        let heavyLoss = samples.filter { (90..<180).contains($0.frame) }.map(\.target)
        let afterLoss = samples.filter { $0.frame >= 180 }.map(\.target)
        print(
            "simulated send bitrate: target at 5 % loss \(underLoss)\nat 60 % loss \(heavyLoss)\nclear \(afterLoss)\n"
                + "keyframes \(keyframesUnderLoss) at 5 %, \(out.outbound.keyFramesEncoded) in all, PLIs \(out.outbound.pliCount), "
                + "refused \(refused), coalesced \(out.keyframeRequestsCoalesced), resent \(out.outbound.retransmittedPacketsSent), "
                + "SRs \(ep.senderReportsSent), RTCP in \(ep.rtcpReceived), shown \(call.frames.indices.count)"
        )
        #expect(underLoss.count == 11 && heavyLoss.count == 11 && afterLoss.count == 19)
        // 5 % random loss is repaired by NACK: the receiver reports little loss after repair and
        // GCC holds between 2 and 10 %, so the target stays near the configured rate and
        // keyframes stay rare. A short report interval holds few packets, so one report's loss
        // fraction may cross 10 % and cut the target once by about 6 % (rate x (1 - loss / 2)).
        #expect(underLoss.min()! >= configured * 85 / 100, "\(underLoss)")
        #expect(keyframesUnderLoss <= 3, "no keyframe storm: \(keyframesUnderLoss)")
        #expect(out.outbound.retransmittedPacketsSent > 0)
        // 60 % loss outruns the repair: the reported loss is above 10 % and the target comes down
        // (GCC: rate x (1 - loss / 2), at most every 300 ms).
        let lowest = (heavyLoss + afterLoss).min()!
        #expect(lowest <= configured * 4 / 5, "\(heavyLoss) \(afterLoss)")
        // The path clears: the target climbs back toward the configured rate (GCC: +8 % per
        // second of feedback), never above it, never cut again.
        let last = afterLoss.last!
        let fromLowest = afterLoss.drop { $0 > lowest }
        #expect(last >= lowest * 5 / 4 && last <= configured, "\(afterLoss)")
        #expect(zip(fromLowest, fromLowest.dropFirst()).allSatisfy { $0 <= $1 }, "climbs steadily: \(afterLoss)")
        // Keyframes the 60 % phase asked for (PLIs) are spaced by the stream's limiter: at most one
        // per 300 ms there (10), plus the first and the 5 % phase's (3).
        #expect(out.outbound.keyFramesEncoded <= 14, "\(out.outbound.keyFramesEncoded) keyframes in 11 s")
        // Every keyframe after the first answers a PLI; PLIs inside a window share one.
        #expect(
            out.outbound.keyFramesEncoded - 1 + out.keyframeRequestsCoalesced <= out.outbound.pliCount,
            "\(out.outbound.keyFramesEncoded) keyframes, \(out.outbound.pliCount) PLIs, \(out.keyframeRequestsCoalesced) coalesced"
        )
        // The clear phase's frames are shown.
        #expect(call.frames.indices.filter { $0 >= 200 }.count >= 120)
    }
}
