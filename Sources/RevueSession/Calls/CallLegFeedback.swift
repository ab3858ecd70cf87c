// RTCP feedback of one call leg to our send streams: the participant's receive pipeline sends
// NACK, PLI, FIR, REMB and receiver reports about our media to the leg's socket, where our own
// ReceivePipeline reads them and hands them here.
internal import MediaCore
import Synchronization

/// The sender side of RTCP for one call leg: an `RTCPSenderSession` (RFC 3550 reports, RFC 4585
/// NACK/PLI, RFC 5104 FIR, REMB, the leg's loss-based bandwidth estimate) whose targets are this
/// leg's views of our local tracks' send streams (`LegVideoFeedback`, `LegAudioFeedback`).
/// Thread rule: `handle` on the leg's receive-pipeline thread; `setTargets` and `counters` from
/// any thread (the main actor); one lock, never held by the media path. Cost: parsing RTCP
/// allocates small arrays (a few per second).
/// Sendable: the session lives in its `Mutex`; `route` and `transportSequence` (atomic inside)
/// are `let`s.
final class CallLegFeedback: Sendable {
    /// The leg's id in every `TrackFanOut` (retransmissions to this leg only).
    let route: Int
    /// The leg's transport-wide sequence numbers: `TrackFanOut` numbers each packet to this leg
    /// and logs its send time; the participant's transport-cc feedback is matched against it.
    let transportSequence = TransportSequenceNumbers()
    /// The leg's RTCP sender session, used only inside the lock.
    private let session: Mutex<RTCPSenderSession>

    /// A leg whose estimate starts (and stays at most) at `videoBitrate`.
    init(route: Int, videoBitrate: Int) {
        self.route = route
        let session = RTCPSenderSession(
            targets: [], startBitrate: videoBitrate, minimumBitrate: 50_000,
            maximumBitrate: max(50_000, videoBitrate))
        session.transportSequenceNumbers = transportSequence
        self.session = Mutex(session)
    }

    /// One unprotected RTCP compound packet from the participant (receive-pipeline thread).
    func handle(_ rtcp: RawSpan, arrival: MonotonicTime) {
        session.withLock { $0.handle(rtcp, now: arrival) }
    }

    /// The streams this leg's feedback drives now (tracks published or unpublished).
    func setTargets(_ targets: [any RTPSendFeedbackTarget]) {
        session.withLock { session in
            if Set(targets.map(\.ssrc)) != Set(session.ssrcs) || targets.count != session.ssrcs.count {
                session.replaceTargets(targets)
            }
        }
    }

    /// What the leg's RTCP did so far, and its current estimate.
    var counters: RTCPSenderSession.Counters { session.withLock { $0.counters } }
    var targetBitrate: Int { session.withLock { $0.estimator.targetBitrate } }
    /// The leg's whole estimator (loss-based, delay-based from transport-cc, REMB).
    var estimator: SendSideBandwidthEstimator { session.withLock { $0.estimator } }
}

/// One leg's view of the shared video send stream: NACKs resend to this leg only, PLI/FIR ask the
/// shared encoder (whose one limiter spaces keyframes, whichever leg asks), and the leg's estimate
/// joins the others' in the fan-out, where the lowest wins.
/// Thread rule: any thread (the leg's pipeline thread). Cost: a ring push, an atomic or a lock.
final class LegVideoFeedback: RTPSendFeedbackTarget, Sendable {
    let stream: VideoSendStream
    let fanOut: TrackFanOut
    let route: Int
    init(stream: VideoSendStream, fanOut: TrackFanOut, route: Int) {
        self.stream = stream; self.fanOut = fanOut; self.route = route
    }
    var ssrc: UInt32 { stream.ssrc }
    var carriesVideo: Bool { true }
    var senderInfo: RTPSenderInfo { stream.senderInfo }
    func handleNack<S: Sequence>(_ sequenceNumbers: S) where S.Element == UInt16 {
        stream.handleNack(sequenceNumbers, route: route)
    }
    func handlePictureLossIndication() { stream.handlePictureLossIndication() }
    func handleFullIntraRequest() { stream.handleFullIntraRequest() }
    func handleEstimatedBitrate(_ bitsPerSecond: Int) {
        if let lowest = fanOut.noteEstimate(bitsPerSecond, route: route) { stream.handleEstimatedBitrate(lowest) }
    }
    func handleRoundTripTime(_ seconds: Double) { stream.handleRoundTripTime(seconds) }
}

/// One leg's view of the shared audio send stream: NACKs resend to this leg only.
final class LegAudioFeedback: RTPSendFeedbackTarget, Sendable {
    let stream: AudioSendStream
    let route: Int
    init(stream: AudioSendStream, route: Int) { self.stream = stream; self.route = route }
    var ssrc: UInt32 { stream.ssrc }
    var senderInfo: RTPSenderInfo { stream.senderInfo }
    func handleNack<S: Sequence>(_ sequenceNumbers: S) where S.Element == UInt16 {
        stream.handleNack(sequenceNumbers, route: route)
    }
    func handlePictureLossIndication() { stream.handlePictureLossIndication() }
    func handleFullIntraRequest() { stream.handleFullIntraRequest() }
    func handleEstimatedBitrate(_ bitsPerSecond: Int) {}
}
