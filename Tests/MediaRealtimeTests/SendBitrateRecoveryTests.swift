import Foundation
import Glibc
import Testing

@testable import MediaCore

/// The send pipeline's bitrate under loss and after it: VideoSendStream + AudioSendStream +
/// RTCPSenderEndpoint -> ImpairmentRelay -> ReceivePipeline (the receiver's RR, NACK, PLI, REMB back
/// through the relay). Phases switch the sender between relays: 5 % loss, 60 % loss, a clear path
/// (3 s, 3 s, 5 s).
@Suite(.serialized) struct SendBitrateRecoveryTests {
    /// Captures `frames` at 30 fps in real time, sampling the encoder's target every 8 frames.
    static func phase(_ call: EndToEndCall, frames: Range<Int>) -> [Int] {
        var samples: [Int] = []
        call.capture(frames: frames) { i in
            if (i - frames.lowerBound) % 8 == 7 { samples.append(Int(call.video.statistics.outbound.targetBitrate)) }
        }
        return samples
    }

    @Test func targetBitrateLowersUnderLossAndRecoversWhenThePathClears() throws {
        let configured = 600_000
        let call = try EndToEndCall(width: 320, height: 240, bitrate: configured)
        let to = try call.receiver.socket.localAddress()
        let moderate = ImpairmentModel.Settings(loss: 0.05, delayMilliseconds: 10)
        let heavy = ImpairmentModel.Settings(loss: 0.6, delayMilliseconds: 10)
        let clear = ImpairmentModel.Settings(delayMilliseconds: 10)
        let relays = try [moderate, heavy, clear].enumerated().map { k, media in
            try ImpairmentRelay(
                configuration: .init(
                    listen: .loopbackIPv4(port: 0), to: to, impairment: media,
                    reverse: clear, seed: 9 + UInt64(k)))
        }
        for r in relays { r.start() }
        call.start(sendingTo: relays[0].listenAddress)
        let underLoss = Self.phase(call, frames: 0..<90)
        let refused = call.video.statistics.retransmissionsRefused
        let keyframesUnderLoss = call.video.statistics.outbound.keyFramesEncoded
        call.sink.destination.withLock { $0 = relays[1].listenAddress }
        let heavyLoss = Self.phase(call, frames: 90..<180)
        call.sink.destination.withLock { $0 = relays[2].listenAddress }
        let afterLoss = Self.phase(call, frames: 180..<330)
        let out = call.video.statistics
        let ep = call.endpoint.statistics
        call.stop()
        for r in relays { r.stop() }
        print(
            "target at 5 % loss \(underLoss)\nat 60 % loss \(heavyLoss)\nclear \(afterLoss)\nkeyframes \(keyframesUnderLoss) at 5 %, \(out.outbound.keyFramesEncoded) in all, PLIs \(out.outbound.pliCount), refused \(refused), coalesced \(out.keyframeRequestsCoalesced), resent \(out.outbound.retransmittedPacketsSent), session \(ep.session)"
        )
        // 5 % random loss is repaired by NACK: the receiver reports little loss after repair and
        // GCC holds between 2 and 10 %, so the target stays near the configured rate (it used to
        // collapse to ~55 kbit/s when every refused NACK forced a keyframe) and keyframes stay rare.
        // Receiver reports come every 250-750 ms (RFC 3550 §6.3.1 randomization): a short interval
        // holds few packets, so one report's loss fraction may cross 10 % and cut the target once
        // by about 6 % (rate x (1 - loss / 2)); hence 85 %, not the configured rate itself.
        #expect(underLoss.min()! >= configured * 85 / 100, "\(underLoss)")
        #expect(keyframesUnderLoss <= 3, "no keyframe storm: \(keyframesUnderLoss)")
        #expect(out.outbound.retransmittedPacketsSent > 0)
        // 60 % loss outruns the repair: the reported loss is above 10 % and the target comes down
        // (GCC: rate x (1 - loss / 2), at most every 300 ms; the last cut may land just after the
        // switch, on reports about the lossy phase).
        let lowest = (heavyLoss + afterLoss).min()!
        #expect(lowest <= configured * 4 / 5, "\(heavyLoss) \(afterLoss)")
        // The path clears: the target climbs back toward the configured rate (GCC: +8 % per
        // second of feedback, so about x1.45 in 5 s), never above it, never cut again.
        let last = afterLoss.last!
        let fromLowest = afterLoss.drop { $0 > lowest }
        #expect(last >= lowest * 5 / 4 && last <= configured, "\(afterLoss)")
        #expect(zip(fromLowest, fromLowest.dropFirst()).allSatisfy { $0 <= $1 }, "climbs steadily: \(afterLoss)")
        // Keyframes the 60 % phase asked for (PLIs) are spaced by the stream's limiter: at most one
        // per 300 ms from the last forced one there (10), plus the first and the 5 % phase's (3).
        #expect(out.outbound.keyFramesEncoded <= 14, "\(out.outbound.keyFramesEncoded) keyframes in 10 s")
        // Every keyframe after the first answers a PLI (no periodic ones at this length, nothing
        // forced by refused NACKs); PLIs inside a window share one (coalesced). A PLI still waiting
        // at the end has none yet, hence <=.
        #expect(
            out.outbound.keyFramesEncoded - 1 + out.keyframeRequestsCoalesced <= out.outbound.pliCount,
            "\(out.outbound.keyFramesEncoded) keyframes, \(out.outbound.pliCount) PLIs, \(out.keyframeRequestsCoalesced) coalesced"
        )
    }
}
