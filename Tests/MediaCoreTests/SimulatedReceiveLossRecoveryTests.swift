// ReceiveLossRecoveryTests on simulated time: the same sender, impairments, seeds and bounds, with
// the sender, the impaired paths, the receive pipeline and the audio playout all run in due-time
// order on one thread (`SimulatedReceiveCall`), so the figures are the same on every run and under
// any load.
import Foundation
import MediaCore
import MediaTestSupport
import MediaTools
import Testing

/// What one simulated run through an impaired path produced.
struct SimulatedLossResult: CustomStringConvertible, Equatable {
    var framesSent = 0
    var framesShown = 0
    var longestFreeze = 0.0
    var concealedShare = 0.0
    var fecSamples = 0
    var nacksSent = 0
    var retransmissions = 0
    var plis = 0
    var peakBuffered = 0
    var capacity = 0
    var minimumPSNR = 0.0
    var packetsLost = 0
    /// Digests of the video shown (index, render time, PSNR) and of the audio played.
    var videoDigest: UInt64 = 0
    var audioDigest: UInt64 = 0
    var decodedShare: Double { Double(framesShown) / Double(max(1, framesSent)) }
    var description: String {
        "shown \(framesShown)/\(framesSent) (\(Int(decodedShare * 100)) %), longest freeze \(longestFreeze) s, "
            + "concealed \(String(format: "%.3f", concealedShare)), FEC samples \(fecSamples), NACKs \(nacksSent), "
            + "resent \(retransmissions), PLIs \(plis), peak buffered \(peakBuffered)/\(capacity), "
            + "min PSNR \(String(format: "%.2f", minimumPSNR)), path lost \(packetsLost), "
            + "video digest \(String(videoDigest, radix: 16)), audio digest \(String(audioDigest, radix: 16))"
    }
}

/// Sends `seconds` of video and audio over a path with `impairment` on the media direction and
/// `reverse` (default: the same) on the RTCP direction, loss drawn per stream, and reports what
/// the receiver made of it, as `runThroughRelay` does in real time.
func runSimulated(
    _ impairment: ImpairmentModel.Settings, reverse: ImpairmentModel.Settings? = nil,
    seed: UInt64, recovery: Bool, seconds: Double = 3
) throws -> SimulatedLossResult {
    var options = SimulatedReceiveCall.Options()
    options.forward = impairment
    options.reverse = reverse
    options.seed = seed
    options.nack = recovery
    options.fec = recovery
    let call = try SimulatedReceiveCall(options)
    call.start(seconds: seconds)
    call.advance(by: .nanoseconds(Int64(seconds * 1e9)) + .milliseconds(20))
    let playing = call.pipeline.inboundStats
    call.advance(by: .milliseconds(400))

    var r = SimulatedLossResult()
    // The last frames may still be on the path or in the jitter buffer: count what was shown of
    // all but the last 10.
    r.framesSent = call.sender.videoFramesSent - 10
    r.framesShown = call.frames.indices.filter { $0 < r.framesSent }.count
    r.longestFreeze = call.pipeline.longestFreezeSeconds
    if let a = playing.first(where: { $0.kind == "audio" }) {
        r.concealedShare = Double(a.concealedSamples) / Double(max(1, a.totalSamplesReceived))
    }
    r.fecSamples = call.pipeline.audio!.fecRecoveredSamples
    r.nacksSent = call.pipeline.statistics.nacksSent
    r.plis = call.pipeline.statistics.plisSent
    r.retransmissions = call.sender.retransmissions
    r.peakBuffered = call.pipeline.peakBufferedPackets
    r.capacity = VideoReceiveSettings(codec: .vp8, payloadType: 96).jitterBuffer.capacity
    r.minimumPSNR = call.frames.minimumPSNR
    r.packetsLost = call.forward.counters.lost
    r.videoDigest = call.frames.digest
    r.audioDigest = call.audio.digest
    return r
}

@Suite struct SimulatedReceiveLossRecoveryTests {
    @Test func fivePercentRandomLossIsRepairedByNackAndFEC() throws {
        let loss = ImpairmentModel.Settings(loss: 0.05, delayMilliseconds: 10)
        let with = try runSimulated(loss, seed: 5, recovery: true)
        let without = try runSimulated(loss, seed: 5, recovery: false)
        print("simulated 5 % loss with recovery: \(with)\nsimulated 5 % loss without: \(without)")
        #expect(with.decodedShare >= 0.9, "\(with)")
        #expect(with.longestFreeze < 0.7, "\(with)")
        #expect(with.concealedShare < 0.03, "\(with)")
        #expect(with.nacksSent > 0, "\(with)")
        #expect(with.retransmissions > 0 && with.fecSamples > 0, "\(with)")
        #expect(with.minimumPSNR > 28, "\(with)")
        #expect(with.peakBuffered <= with.capacity)
        #expect(without.nacksSent == 0 && without.fecSamples == 0, "without recovery: \(without)")
        #expect(without.decodedShare < with.decodedShare - 0.1, "without NACK: \(without)")
        #expect(without.concealedShare > with.concealedShare, "without FEC: \(without)")
    }

    @Test func twoPercentLossInBurstsOfThreeIsRepaired() throws {
        let loss = ImpairmentModel.Settings(loss: 0.02, burst: 3, delayMilliseconds: 10)
        // Bursts on the media; the feedback path loses 2 % at random.
        let rtcpLoss = ImpairmentModel.Settings(loss: 0.02, delayMilliseconds: 10)
        let with = try runSimulated(loss, reverse: rtcpLoss, seed: 31, recovery: true)
        let without = try runSimulated(loss, reverse: rtcpLoss, seed: 31, recovery: false)
        print("simulated 2 % burst-3 loss with recovery: \(with)\nsimulated 2 % burst-3 loss without: \(without)")
        #expect(with.decodedShare >= 0.9, "\(with)")
        #expect(with.longestFreeze < 0.7, "\(with)")
        #expect(with.concealedShare < 0.03, "\(with)")
        #expect(with.peakBuffered <= with.capacity)
        #expect(with.fecSamples > 0, "\(with)")
        #expect(with.nacksSent > 0, "\(with)")
        #expect(without.decodedShare < with.decodedShare, "without NACK: \(without)")
        #expect(without.concealedShare > with.concealedShare, "without FEC: \(without)")
    }

    @Test func sixtyMillisecondJitterWithReorderingPlaysSmoothly() throws {
        let jitter = ImpairmentModel.Settings(
            delayMilliseconds: 20, jitterMilliseconds: 60, reorder: 0.05,
            reorderDelayMilliseconds: 30)
        let with = try runSimulated(jitter, seed: 11, recovery: true)
        print("simulated 60 ms jitter + reordering: \(with)")
        #expect(with.decodedShare >= 0.95, "\(with)")
        #expect(with.longestFreeze < 0.5, "\(with)")
        #expect(with.concealedShare < 0.03, "\(with)")
        #expect(with.peakBuffered <= with.capacity)
        #expect(with.minimumPSNR > 28, "\(with)")
    }

    /// The same run twice in one process gives the same figures (the determinism the other tests
    /// rely on, checked where a difference would show at once).
    @Test func aRunRepeatsExactly() throws {
        let loss = ImpairmentModel.Settings(loss: 0.05, delayMilliseconds: 10, jitterMilliseconds: 5)
        let first = try runSimulated(loss, seed: 7, recovery: true, seconds: 1.5)
        let second = try runSimulated(loss, seed: 7, recovery: true, seconds: 1.5)
        print("simulated repeat: \(first)")
        #expect(first == second, "\(first)\n\(second)")
    }
}
