import Foundation
import Glibc
import Synchronization
import Testing

@testable import MediaCore

/// What one run through the impairment relay produced.
struct LossRunResult: CustomStringConvertible {
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
    var decodedShare: Double { Double(framesShown) / Double(max(1, framesSent)) }
    var description: String {
        "shown \(framesShown)/\(framesSent) (\(Int(decodedShare * 100)) %), longest freeze \(longestFreeze) s, "
            + "concealed \(String(format: "%.3f", concealedShare)), FEC samples \(fecSamples), NACKs \(nacksSent), "
            + "resent \(retransmissions), PLIs \(plis), peak buffered \(peakBuffered)/\(capacity), min PSNR \(minimumPSNR)"
    }
}

/// Sends `seconds` of video and audio through an `ImpairmentRelay` with `impairment` on the media
/// direction and `reverse` (default: the same) on the RTCP direction, and reports what the
/// receiver made of it.
func runThroughRelay(
    _ impairment: ImpairmentModel.Settings, reverse: ImpairmentModel.Settings? = nil,
    seed: UInt64, recovery: Bool, seconds: Double = 3
) throws -> LossRunResult {
    let key = SRTPKeyMaterial.random(for: .aeadAES128GCM)
    let renderer = IndexingRenderer(width: 320, height: 240)
    let receiver = try makeReceiver(key: key, nack: recovery, fec: recovery, renderer: renderer)
    var relayConf = ImpairmentRelay.Configuration(
        listen: .loopbackIPv4(port: 0), to: try receiver.socket.localAddress(),
        impairment: impairment, seed: seed)
    relayConf.reverse = reverse ?? impairment
    // The runs with and without recovery must lose the same packets of each stream; with one
    // loss model for the link, which audio packets are lost would depend on how they interleave
    // with video and retransmissions.
    relayConf.lossPerStream = true
    let relay = try ImpairmentRelay(configuration: relayConf)
    let sink = CollectingAudioSink()
    let clock = AudioPlayoutClock(stream: receiver.audio!, sink: sink)
    relay.start()
    receiver.start()
    clock.start()
    let sender = try ReceiveTestSender(to: relay.listenAddress, key: key, audioFEC: true)
    try sender.run(seconds: seconds, video: true, audio: true)
    usleep(20_000)
    let playing = receiver.inboundStats
    usleep(400_000)
    clock.stop()
    receiver.stop()
    relay.stop()

    var r = LossRunResult()
    r.framesSent = sender.videoFramesSent
    // The last frames may still wait in the relay or the jitter buffer: count what was shown of
    // all but the last 10.
    r.framesSent -= 10
    r.framesShown = renderer.indices.filter { $0 < r.framesSent }.count
    r.longestFreeze = receiver.longestFreezeSeconds
    if let a = playing.first(where: { $0.kind == "audio" }) {
        r.concealedShare = Double(a.concealedSamples) / Double(max(1, a.totalSamplesReceived))
    }
    r.fecSamples = receiver.audio!.fecRecoveredSamples
    r.nacksSent = receiver.statistics.nacksSent
    r.plis = receiver.statistics.plisSent
    r.retransmissions = sender.retransmissions
    r.peakBuffered = receiver.peakBufferedPackets
    r.capacity = VideoReceiveSettings(codec: .vp8, payloadType: 96).jitterBuffer.capacity
    r.minimumPSNR = renderer.minimumPSNR
    if ProcessInfo.processInfo.environment["RECV_DEBUG"] != nil {
        print("sender", sender.session.counters, "keyframes", sender.keyframesSent, "relay", relay.statistics)
        print("missing frames", Set(0..<r.framesSent).subtracting(renderer.indices).sorted())
        print(receiver.inboundStats)
    }
    return r
}

@Suite(.serialized) struct ReceiveLossRecoveryTests {
    @Test func fivePercentRandomLossIsRepairedByNackAndFEC() throws {
        let loss = ImpairmentModel.Settings(loss: 0.05, delayMilliseconds: 10)
        let with = try runThroughRelay(loss, seed: 5, recovery: true)
        let without = try runThroughRelay(loss, seed: 5, recovery: false)
        print("5 % loss with recovery: \(with)\n5 % loss without: \(without)")
        #expect(with.decodedShare >= 0.9, "\(with)")
        #expect(with.longestFreeze < 0.7, "\(with)")
        #expect(with.concealedShare < 0.03, "\(with)")
        #expect(with.retransmissions > 0 && with.fecSamples > 0)
        #expect(with.minimumPSNR > 28)
        #expect(with.peakBuffered <= with.capacity)
        #expect(without.decodedShare < with.decodedShare - 0.1, "without NACK: \(without)")
        #expect(without.concealedShare > with.concealedShare, "without FEC: \(without)")
    }

    @Test func twoPercentLossInBurstsOfThreeIsRepaired() throws {
        let loss = ImpairmentModel.Settings(loss: 0.02, burst: 3, delayMilliseconds: 10)
        // Bursts on the media; the feedback path loses 2 % at random. (The RTCP direction carries
        // a handful of packets a second, so a Gilbert burst there lasts about a second.)
        let rtcpLoss = ImpairmentModel.Settings(loss: 0.02, delayMilliseconds: 10)
        // Seed 31 loses audio packets 7-8 and 95 (two bursts: in-band FEC can rebuild the last
        // packet of each) and video in bursts of up to six packets.
        let with = try runThroughRelay(loss, reverse: rtcpLoss, seed: 31, recovery: true)
        let without = try runThroughRelay(loss, reverse: rtcpLoss, seed: 31, recovery: false)
        print("2 % burst-3 loss with recovery: \(with)\n2 % burst-3 loss without: \(without)")
        #expect(with.decodedShare >= 0.9, "\(with)")
        #expect(with.longestFreeze < 0.7, "\(with)")
        #expect(with.concealedShare < 0.03, "\(with)")
        #expect(with.peakBuffered <= with.capacity)
        #expect(with.fecSamples > 0, "\(with)")
        #expect(without.decodedShare < with.decodedShare, "without NACK: \(without)")
        #expect(without.concealedShare > with.concealedShare, "without FEC: \(without)")
    }

    @Test func sixtyMillisecondJitterWithReorderingPlaysSmoothly() throws {
        let jitter = ImpairmentModel.Settings(
            delayMilliseconds: 20, jitterMilliseconds: 60, reorder: 0.05,
            reorderDelayMilliseconds: 30)
        let with = try runThroughRelay(jitter, seed: 11, recovery: true)
        print("60 ms jitter + reordering: \(with)")
        #expect(with.decodedShare >= 0.95, "\(with)")
        #expect(with.longestFreeze < 0.5, "\(with)")
        #expect(with.concealedShare < 0.03, "\(with)")
        #expect(with.peakBuffered <= with.capacity)
    }
}
