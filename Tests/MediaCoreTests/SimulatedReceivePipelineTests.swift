// The timing and quality part of ReceivePipelineTests.decodesEveryFrameAndPlaysAudioFromOurSender-
// OverLoopback on simulated time: our sender straight into a receive pipeline (no impairment, as
// over loopback), every frame decoded at full quality, audio played without concealment, and the
// sender's RTT measured from our receiver reports.
import Foundation
import MediaCore
import MediaTestSupport
import Testing

@Suite struct SimulatedReceivePipelineTests {
    @Test(arguments: [SRTPSuite.aeadAES128GCM, .aesCM128HMACSHA1_80])
    func decodesEveryFrameAndPlaysAudioFromOurSender(suite: SRTPSuite) throws {
        var options = SimulatedReceiveCall.Options()
        options.suite = suite
        let call = try SimulatedReceiveCall(options)
        call.start(seconds: 2)
        call.advance(by: .seconds(2) + .milliseconds(30))
        let whilePlaying = call.pipeline.inboundStats
        call.advance(by: .milliseconds(300))

        let sender = call.sender!
        let frames = sender.videoFramesSent
        let seen = call.frames.indices
        let stats = call.pipeline.statistics
        let inbound = call.pipeline.inboundStats
        let video = try #require(inbound.first { $0.kind == "video" })
        let audio = try #require(whilePlaying.first { $0.kind == "audio" })
        let pcm = call.audio.samples
        let energy = pcm.suffix(48_000).reduce(0.0) { $0 + Double($1) * Double($1) } / 48_000
        let remote = try #require(sender.session.remoteInbound[sender.videoSSRC])
        print(
            "simulated loopback \(suite): shown \(seen.count)/\(frames), min PSNR \(String(format: "%.2f", call.frames.minimumPSNR)), "
                + "decoded \(video.framesDecoded), keyframes \(video.keyFramesDecoded), freezes \(video.freezeCount), "
                + "audio packets \(audio.packetsReceived)/\(sender.audioFramesSent), concealed \(audio.concealedSamples)"
                + "/\(audio.totalSamplesReceived), RMS \(String(format: "%.1f", sqrt(energy))), RTCP sent \(stats.rtcpSent), "
                + "RTT \(String(format: "%.4f", remote.roundTripTime)) s (\(remote.roundTripTimeMeasurements) measurements), "
                + "video digest \(String(call.frames.digest, radix: 16)), audio digest \(String(call.audio.digest, radix: 16))")

        #expect(frames >= 30, "the sender sent its frames")
        #expect(seen.isSuperset(of: Set(0..<(frames - 1))), "missing frames \(Set(0..<(frames - 1)).subtracting(seen).sorted())")
        #expect(call.frames.minimumPSNR > 30, "PSNR \(call.frames.minimumPSNR) dB")
        #expect(call.frames.packedFrames == seen.count, "every frame converted to BGRA on request")
        #expect(call.frames.unreadable == 0)
        #expect(stats.authFailures == 0 && stats.replays == 0 && stats.malformed == 0)
        #expect(stats.rtcpSent > 0)
        #expect(video.framesDecoded >= UInt64(frames - 1))
        #expect(video.keyFramesDecoded >= 1)
        #expect(video.packetsLost == 0)
        #expect(video.freezeCount == 0)
        #expect(video.jitterBufferEmittedCount == video.framesDecoded)
        #expect(audio.packetsReceived >= UInt64(sender.audioFramesSent - 5))
        // Playout started after the prebuffer; from then on nothing was lost, so no concealment.
        #expect(
            Double(audio.concealedSamples) < 0.02 * Double(audio.totalSamplesReceived),
            "concealed \(audio.concealedSamples) of \(audio.totalSamplesReceived)")
        // The audio is the sender's speech-like signal, not silence.
        #expect(sqrt(energy) > 500, "RMS \(sqrt(energy))")
        // The sender saw our receiver reports: RTT measured from LSR/DLSR, no loss.
        #expect(remote.roundTripTimeMeasurements > 0)
        #expect(remote.roundTripTime < 0.5)
        #expect(remote.fractionLost == 0)
    }
}
