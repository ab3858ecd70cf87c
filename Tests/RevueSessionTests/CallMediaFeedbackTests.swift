import Foundation
import MediaCore
import MediaTools
import Testing

@testable import RevueSession

/// The participant's RTCP feedback reaches our send streams in a call: a's video to b passes an
/// ImpairmentRelay at 5 % loss each way (b's NACK/PLI/REMB/RR return through it), b's media goes to
/// a directly.
@MainActor
@Suite(.serialized) struct CallMediaFeedbackTests {
    /// Holds the relay the test puts into a's leg to b.
    final class RelayBox { var relay: ImpairmentRelay? }

    /// Captures `frames` synthetic 320x180 frames at 50/3 fps in real time on a thread of its own
    /// (a sleeping feeder on the cooperative pool would starve other suites' feeders on 2 cores).
    nonisolated static func feedVideo(_ capturer: BufferCapturer, frames: Int) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                let (w, h) = (320, 180)
                let frame = VideoFrame(width: w, height: h)
                let start = DispatchTime.now().uptimeNanoseconds
                for i in 0..<frames {
                    SyntheticVideo.render(frameIndex: i, into: frame)
                    let view = PixelBufferView(frame.view)
                    withExtendedLifetime(frame) { capturer.capture(view, timeStampNs: Int64(i) * 60_000_000) }
                    let due = start + UInt64(i + 1) * 60_000_000
                    let now = DispatchTime.now().uptimeNanoseconds
                    if due > now { usleep(UInt32((due - now) / 1000)) }
                }
                done.resume()
            }
        }
    }

    /// Two new friends in a call in which a's media to b, and b's RTCP back, cross an
    /// ImpairmentRelay (`forward` and `reverse`); returns once b renders a's video into
    /// `renderer` and a sends both tracks to b. The caller stops the relay (`box`), the peers and
    /// the node.
    func relayedCall(
        _ node: RendezvousNode, forward: ImpairmentModel.Settings, reverse: ImpairmentModel.Settings, seed: UInt64,
        renderer: CheckingRenderer
    ) async throws -> (a: CallPeer, b: CallPeer, box: RelayBox) {
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        try await makeFriends([a, b])
        for p in [a, b] { p.room.options.videoWidth = 320; p.room.options.videoHeight = 180 }
        let box = RelayBox()
        a.room.environment.mediaPath = { _, direct in
            if let r = box.relay { return r.listenAddress }
            guard
                let r = try? ImpairmentRelay(
                    configuration: .init(
                        listen: .loopbackIPv4(port: 0), to: direct, impairment: forward,
                        reverse: reverse, seed: seed))
            else { return direct }
            r.start()
            box.relay = r
            return r.listenAddress
        }
        try a.friends.sendInvitation(friendId: b.id, message: "relayed")
        await b.wait("invited") { b.room.invitations[a.id] != nil }
        try b.friends.acceptInvitation(friendId: a.id)
        await b.wait("subscribed") { b.room.remoteParticipants[a.id]?.remoteTrackPublications.filter(\.isSubscribed).count == 2 }
        await b.wait("pipeline") { b.room.legs[a.id]?.pipeline != nil && a.room.legs[b.id]?.destination != nil }
        b.room.remoteParticipants[a.id]!.remoteTrackPublications.first { $0.kind == .video }!.renderer = renderer
        await a.wait("a sends to b") { a.room.legs[b.id]?.wants.count == 2 }
        return (a, b, box)
    }

    @Test func lostVideoInACallIsRetransmittedToTheLegThatAskedAndDecodes() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let loss = ImpairmentModel.Settings(loss: 0.05, delayMilliseconds: 10)
        let renderer = CheckingRenderer()
        let (a, b, box) = try await relayedCall(node, forward: loss, reverse: loss, seed: 17, renderer: renderer)
        defer { box.relay?.stop(); a.peer.remove(); b.peer.remove() }
        #expect(box.relay != nil, "a's media to b passes the relay")

        // 8 s of a's video at 1/3 of 50 chunks a second: 134 frames.
        await Self.feedVideo(
            try #require(a.room.localParticipant.localTrackPublications.first { $0.kind == .video }?.videoCapturer),
            frames: 134)
        try await Task.sleep(for: .milliseconds(500))

        let video = try #require(a.room.localMedia[.video]?.video)
        let fanOut = try #require(a.room.localMedia[.video]?.fanOut)
        let sent = video.statistics.outbound
        let feedback = try #require(a.room.legs[b.id]?.feedback.counters)
        let inbound = try #require(b.room.legs[a.id]?.pipeline?.inboundStats.first { $0.kind == "video" })
        let relay = box.relay!.statistics
        let r = renderer.result.withLock { $0 }
        print(
            "call, 5 % loss on a's leg to b: decoded \(r.frames)/134 (\(r.unreadable) unreadable, min PSNR \(r.minPSNR)), "
                + "b NACKs \(inbound.nackCount) PLIs \(inbound.pliCount), a resent \(sent.retransmittedPacketsSent) "
                + "(to b's leg \(fanOut.packetsResent.load(ordering: .relaxed))), keyframes \(sent.keyFramesEncoded), "
                + "a's leg feedback \(feedback), relay dropped \(relay.forward.droppedByLoss)/\(relay.forward.received) + \(relay.reverse.droppedByLoss)/\(relay.reverse.received)"
        )
        #expect(relay.forward.droppedByLoss > 0, "the path lost media")
        #expect(inbound.nackCount > 0, "b asked for lost packets")
        #expect(feedback.nacksReceived > 0 && feedback.reportsReceived > 0, "b's RTCP reached a's send side")
        #expect(sent.retransmittedPacketsSent > 0, "a resent them")
        #expect(
            fanOut.packetsResent.load(ordering: .relaxed) == UInt64(sent.retransmittedPacketsSent),
            "each resend went to the one leg that asked")
        // Repaired: nearly every frame decodes (without retransmission a lost packet froze the
        // picture until the next keyframe), and every decoded frame is right.
        #expect(r.frames >= 120, "\(r.frames) of 134 frames decoded")
        #expect(r.unreadable == 0 && r.minPSNR >= 28, "min PSNR \(r.minPSNR) dB")
        // Keyframes: the first, the ones new receivers or b's PLIs asked for; never a storm.
        #expect(sent.keyFramesEncoded <= 6, "\(sent.keyFramesEncoded) keyframes")
        a.room.disconnectAll()
        await b.wait("ended") { b.room.remoteParticipants.isEmpty }
    }

    /// a's video to b crosses a 300 kbit/s bottleneck with a 400 ms queue (an ImpairmentRelay):
    /// b's transport-cc feedback reaches a's leg, whose estimate sees the queue grow (or, once it
    /// is full, its drops) and brings the encoder down from its 1 Mbit/s start to what the link carries, and b keeps
    /// decoding.
    @Test func aBottleneckInACallIsFoundByTransportFeedback() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        var bottleneck = ImpairmentModel.Settings(delayMilliseconds: 10)
        bottleneck.rateBitsPerSecond = 300_000
        bottleneck.queueLimitMilliseconds = 400
        let renderer = CheckingRenderer()
        let (a, b, box) = try await relayedCall(
            node, forward: bottleneck, reverse: .init(delayMilliseconds: 10), seed: 5, renderer: renderer)
        defer { box.relay?.stop(); a.peer.remove(); b.peer.remove() }
        #expect(box.relay != nil, "a's media to b passes the bottleneck")

        // 10 s of a's video.
        await Self.feedVideo(
            try #require(a.room.localParticipant.localTrackPublications.first { $0.kind == .video }?.videoCapturer),
            frames: 167)
        let leg = try #require(a.room.legs[b.id])
        let counters = leg.feedback.counters, estimator = leg.feedback.estimator
        let sentFeedback = b.room.legs[a.id]?.pipeline?.statistics.transportFeedbackSent ?? 0
        let relay = box.relay!.statistics
        let r = renderer.result.withLock { $0 }
        print(
            "call through a 300 kbit/s bottleneck: target \(estimator.targetBitrate) b/s (delay-based \(estimator.delayBasedBitrate ?? -1), "
                + "loss-based \(Int(estimator.lossBasedBitrate)), REMB \(estimator.remb ?? -1)), overuse \(estimator.delayBased.overuseCount), "
                + "decreases \(estimator.delayBased.decreaseCount) (\(estimator.delayBased.lossDecreaseCount) on loss), transport feedback sent \(sentFeedback) received \(counters.transportFeedbackReceived), "
                + "relay dropped \(relay.forward.droppedByLoss + relay.forward.droppedByQueue)/\(relay.forward.received), decoded \(r.frames)/167"
        )
        #expect(sentFeedback > 0 && counters.transportFeedbackReceived > 0, "b's transport-cc feedback reached a's leg")
        // The transport-feedback estimator decreases on whichever sign comes first: the queue's
        // growing delay, or, once the 400 ms queue is full and drops, the loss its feedback
        // reports (then the delay no longer grows). Which one depends on how the first
        // second's frames fell; both are the bottleneck seen through transport-cc.
        #expect(
            estimator.delayBasedBitrate != nil && estimator.delayBased.decreaseCount > 0,
            "no decrease from transport feedback (over-use \(estimator.delayBased.overuseCount), loss decreases \(estimator.delayBased.lossDecreaseCount))"
        )
        #expect(estimator.targetBitrate <= 400_000, "a's leg still allows \(estimator.targetBitrate) b/s through 300 kbit/s")
        // The first seconds at the 1 Mbit/s start overflow the queue (libwebrtc starts lower), so
        // only part of the 167 frames decode; what decodes is right.
        #expect(r.frames >= 40 && r.unreadable == 0, "\(r.frames) of 167 frames decoded, \(r.unreadable) unreadable")
        a.room.disconnectAll()
        await b.wait("ended") { b.room.remoteParticipants.isEmpty }
    }
}
