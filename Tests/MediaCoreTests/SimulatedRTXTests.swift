// Retransmission as RTX (RFC 4588) on simulated time: our video send stream with RTX, driven from
// the test's clock, through a lossy path to our receive pipeline, which unwraps the repairs into
// the stream (or, not having negotiated RTX, counts them as an unknown stream).
import MediaCore
import MediaTestSupport
import MediaTools
import Testing

@Suite struct SimulatedRTXTests {
    /// A video-only call with RTX on the sender (payload type 97) and, when `receiverRTX`, on
    /// the receiver, through `forward` (media) and `reverse` (RTCP), for three seconds of video.
    static func run(
        receiverRTX: Bool, forward: ImpairmentModel.Settings, reverse: ImpairmentModel.Settings, seed: UInt64,
        seconds: Double
    ) throws -> SimulatedCall<SimulatedSendPipeline> {
        var options = SimulatedReceiveCall.Options()
        options.forward = forward
        options.reverse = reverse
        options.seed = seed
        options.bitrate = 500_000
        options.rtxPayloadType = receiverRTX ? 97 : nil
        let call = try SimulatedCall(sendPipeline: options) { s in
            s.video.rtxPayloadType = 97
            s.endpoint.startBitrate = 500_000
            s.endpoint.maximumBitrate = 500_000
        }
        call.start(seconds: seconds, audio: false)
        call.advance(by: .seconds(seconds) + .milliseconds(400))
        call.sender.stop()
        return call
    }

    /// 5 % loss both ways: repairs arrive as RTX, are unwrapped into the stream and decode.
    @Test func lossIsRepairedByRTXAndTheFramesDecode() throws {
        let loss = ImpairmentModel.Settings(loss: 0.05, delayMilliseconds: 10)
        let call = try Self.run(receiverRTX: true, forward: loss, reverse: loss, seed: 21, seconds: 3)
        let rx = call.pipeline.statistics
        let out = call.sender.video.statistics.outbound
        let shown = call.frames.indices.filter { $0 < 80 }.count
        print(
            "simulated RTX, 5 % loss: shown \(shown)/80, resent \(out.retransmittedPacketsSent), unwrapped \(rx.rtxUnwrapped), "
                + "dropped \(rx.rtxDropped), NACKs \(rx.nacksSent), PLIs \(rx.plisSent), lost \(call.forward.counters.lost), "
                + "min PSNR \(call.frames.minimumPSNR)")
        #expect(out.retransmittedPacketsSent > 0)
        #expect(rx.rtxUnwrapped > 0 && rx.rtxUnwrapped <= Int(out.retransmittedPacketsSent))
        #expect(rx.rtxDropped == 0 && rx.unknownStream == 0 && rx.malformed == 0)
        #expect(shown >= 78, "decoded share \(shown)/80")
        #expect(call.frames.minimumPSNR > 28)
        let inbound = try #require(call.pipeline.inboundStats.first { $0.kind == "video" })
        #expect(inbound.ssrc == call.sender.video.ssrc, "RTX started no stream of its own")
    }

    /// A receiver that did not negotiate RTX drops the RTX packets (counted), never crashes, and
    /// still plays what arrived.
    @Test func aReceiverWithoutRTXCountsRTXPacketsAsUnknown() throws {
        let call = try Self.run(
            receiverRTX: false, forward: ImpairmentModel.Settings(loss: 0.05, delayMilliseconds: 5),
            reverse: ImpairmentModel.Settings(delayMilliseconds: 5), seed: 3, seconds: 1.5)
        let rx = call.pipeline.statistics
        print(
            "simulated RTX, receiver without: resent \(call.sender.video.statistics.outbound.retransmittedPacketsSent), "
                + "unknown \(rx.unknownStream), shown \(call.frames.indices.count)/45")
        #expect(call.sender.video.statistics.outbound.retransmittedPacketsSent > 0)
        #expect(rx.unknownStream > 0 && rx.rtxUnwrapped == 0)
        #expect(!call.frames.indices.isEmpty)
    }
}
