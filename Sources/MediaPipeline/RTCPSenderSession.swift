import Glibc
import MediaBase
import MediaTransport
import MediaWire

/// What a send pipeline does when its receiver asks: resend, refresh, or change bitrate. The send
/// pipeline adopts it (or wraps its `SendHistory` and encoder in one) and hands it to an
/// `RTCPSenderSession`.
/// Thread rule: called on the thread that calls `RTCPSenderSession.handle`, which is normally the
/// send pipeline's own network thread.
public protocol RTCPFeedbackHandler: AnyObject {
    /// Resends packet `sequenceNumber` of `ssrc` from the send history (RFC 4585 §6.2.1) and
    /// returns what the history found (`SendHistory.retransmit`).
    func retransmit(ssrc: UInt32, sequenceNumber: UInt16) -> SendHistory.Lookup
    /// The receiver lost the picture (PLI, RFC 4585 §6.3.1) or asked for a refresh (FIR, RFC 5104
    /// §4.3.1): encode a keyframe soon. (A NACKed packet that can no longer be resent does not
    /// come here: the receiver gives up on it and sends PLI.)
    func requestKeyframe(ssrc: UInt32)
    /// The bandwidth estimate changed: encode video at `bitsPerSecond` from now on.
    func setTargetBitrate(_ bitsPerSecond: Int)
}

/// The sender's side of RTCP: counts what was sent for sender reports (RFC 3550 §6.4.1), and turns
/// the receiver's RTCP into actions and statistics: receiver report blocks into round-trip time and
/// loss (W3C remote-inbound-rtp) and the loss-based bandwidth estimate; generic NACK into
/// retransmissions (a packet that is gone or was resent too often is counted, not keyframed: the
/// receiver gives up on it and sends PLI, as with libwebrtc's sender); PLI and FIR into keyframe
/// requests (a repeated FIR sequence number is ignored, RFC 5104 §4.3.1.2). Send-stream targets
/// rate-limit keyframes themselves (one limiter per stream, shared by every session feeding it);
/// with a `RTCPFeedbackHandler` the session passes at most one request per
/// `minimumKeyframeInterval`. REMB into the estimate's cap; transport-cc feedback (with `transportSequenceNumbers`) into the
/// delay-based estimate; round-trip times to the targets and the estimate.
/// Thread rule: one owner thread. Cost: parsing RTCP allocates small arrays (a few per second).
public final class RTCPSenderSession {
    /// Counters since creation.
    public struct Counters: Sendable, Equatable {
        /// Report blocks about our SSRCs received in sender or receiver reports.
        public var reportsReceived = 0
        /// Generic NACK packets received for our SSRCs.
        public var nacksReceived = 0
        /// Sequence numbers those NACKs asked to have resent.
        public var packetsRequested = 0
        /// Requested packets resent from the retransmission history.
        public var packetsRetransmitted = 0
        /// Requested packets not resent (missing, expired, or the resend budget exhausted).
        public var packetsNotResent = 0
        /// Picture loss indications received for our SSRCs.
        public var plisReceived = 0
        /// Full intra requests received for our SSRCs (repeats of a request number not counted).
        public var firsReceived = 0
        /// REMB (receiver estimated maximum bitrate) messages received.
        public var rembsReceived = 0
        /// Transport-cc feedback packets received (used only with a send log).
        public var transportFeedbackReceived = 0
        /// Keyframes requested from the encoder for PLIs and FIRs.
        public var keyframesRequested = 0
        /// PLIs and FIRs not passed on because a keyframe was requested too recently.
        public var keyframeRequestsThrottled = 0
        /// RTCP compound packets that failed to parse.
        public var malformed = 0
        /// Probe clusters a target stream took (`ProbeController`).
        public var probeClustersSent = 0
    }

    /// Our media SSRCs (RTCP about others is ignored).
    public private(set) var ssrcs: [UInt32]
    /// The bandwidth estimator fed by reports and REMB.
    public private(set) var estimator: SendSideBandwidthEstimator
    /// Counters.
    public private(set) var counters = Counters()
    /// W3C remote-inbound-rtp statistics per SSRC (RTT from LSR/DLSR, RFC 3550 §6.4.1).
    public private(set) var remoteInbound: [UInt32: RemoteInboundRTPStreamStats] = [:]
    /// Gives up resending a packet after this many retransmissions (then asks for a keyframe).
    public var maxRetransmissions = 3
    /// Keyframe requests closer than this to the previous one (per SSRC) are not passed on to the
    /// handler (targets limit themselves).
    public var minimumKeyframeInterval: Duration = .milliseconds(300)

    /// The transport's sequence numbers and send log: with it, transport-cc feedback drives the
    /// delay-based estimate (`SendSideBandwidthEstimator.transportFeedback`); nil ignores it.
    public var transportSequenceNumbers: TransportSequenceNumbers?

    /// Decides when to probe the path above the estimate; it acts once transport feedback
    /// arrives and a video target takes probes (a paced `VideoSendStream` with RTX). Set to nil
    /// to never probe.
    public var probeController: ProbeController?

    private weak var handler: RTCPFeedbackHandler?
    private var targets: [UInt32: any RTPSendFeedbackTarget] = [:]
    private var sent: [UInt32: (packets: UInt32, octets: UInt32)] = [:]
    private var lastFIR: [UInt32: UInt8] = [:]
    private var lastTarget = 0
    private var lastKeyframeRequestNs: [UInt32: UInt64] = [:]

    /// A session for `ssrcs` starting its estimate at `startBitrate`.
    public init(
        ssrcs: [UInt32], handler: RTCPFeedbackHandler?, startBitrate: Int,
        minimumBitrate: Int = 50_000, maximumBitrate: Int = 5_000_000
    ) {
        self.ssrcs = ssrcs
        self.handler = handler
        estimator = SendSideBandwidthEstimator(
            startBitrate: startBitrate, minimumBitrate: minimumBitrate,
            maximumBitrate: maximumBitrate)
        lastTarget = estimator.targetBitrate
        probeController = ProbeController(maximumBitrate: maximumBitrate)
        for s in ssrcs { remoteInbound[s] = RemoteInboundRTPStreamStats(); remoteInbound[s]!.ssrc = s }
    }

    /// A session feeding the send pipeline's streams (`VideoSendStream`, `AudioSendStream`): NACKs
    /// go to the stream (which resends from its history and asks its encoder for a keyframe when it
    /// cannot), PLI/FIR become keyframe requests, and the bandwidth estimate caps the video
    /// streams' bitrate (`handleEstimatedBitrate`, from the start estimate on). Sender reports come from `senderReports`.
    public convenience init(
        targets: [any RTPSendFeedbackTarget], startBitrate: Int,
        minimumBitrate: Int = 50_000, maximumBitrate: Int = 5_000_000
    ) {
        self.init(
            ssrcs: targets.map(\.ssrc), handler: nil, startBitrate: startBitrate,
            minimumBitrate: minimumBitrate, maximumBitrate: maximumBitrate)
        for t in targets { self.targets[t.ssrc] = t }
        // From the first frame: an encoder left at its configured rate until the first RTCP
        // would send its first keyframe far above the start estimate.
        for t in targets where t.carriesVideo { t.handleEstimatedBitrate(estimator.targetBitrate) }
    }

    /// Replaces the target streams (tracks published or unpublished); the estimate, counters and
    /// statistics of SSRCs that stay are kept.
    public func replaceTargets(_ newTargets: [any RTPSendFeedbackTarget]) {
        targets = [:]
        for t in newTargets { targets[t.ssrc] = t }
        ssrcs = newTargets.map(\.ssrc)
        for s in ssrcs where remoteInbound[s] == nil {
            remoteInbound[s] = RemoteInboundRTPStreamStats(); remoteInbound[s]!.ssrc = s
        }
        for target in targets.values where target.carriesVideo { target.handleEstimatedBitrate(estimator.targetBitrate) }
    }

    /// Sender reports (RFC 3550 §6.4.1) for every target stream at `ntpTime`, whose RTP timestamp
    /// is the stream's last one advanced by the time from its media's capture to `now`
    /// (`RTPSenderInfo.rtpTimestamp(at:clockRate:)`).
    public func senderReports(ntpTime: NTPTime, now: MonotonicTime) -> [RTCPSenderReport] {
        Self.senderReports(for: targets.values.sorted { $0.ssrc < $1.ssrc }, ntpTime: ntpTime, now: now)
    }

    /// Sender reports for `targets`, in their order, as `senderReports(ntpTime:now:)` makes them:
    /// for a sender that has no session (a plain RTP sender with its own RTCP timer). Thread
    /// rule: any thread (reads each target's counters). Cost: one small array.
    package static func senderReports(
        for targets: [any RTPSendFeedbackTarget], ntpTime: NTPTime, now: MonotonicTime
    ) -> [RTCPSenderReport] {
        targets.map { t in
            let info = t.senderInfo
            let clock: UInt64 = t.carriesVideo ? 90_000 : 48_000
            let rtp = info.rtpTimestamp(at: now, clockRate: clock)
            return RTCPSenderReport(
                ssrc: t.ssrc, ntpTime: ntpTime, rtpTime: rtp,
                packetCount: UInt32(truncatingIfNeeded: info.packetCount),
                octetCount: UInt32(truncatingIfNeeded: info.octetCount))
        }
    }

    /// Writes `reports` and an SDES CNAME chunk for the first one as a compound packet at the
    /// start of `buffer`, SRTCP-protected when `srtcp` is given, and returns its length: nil when
    /// there is no report, the packet does not fit, or protection failed. Thread rule: `srtcp`'s
    /// (one sender at a time). Cost: marshals in place; one small array for the packet list.
    package static func writeSenderReportCompound(
        _ reports: [RTCPSenderReport], cname: String, protectedBy srtcp: SRTPContext?,
        into buffer: UnsafeMutableRawBufferPointer
    ) -> Int? {
        guard let first = reports.first else { return nil }
        var packets: [RTCPPacket] = reports.map { .senderReport($0) }
        packets.append(.sourceDescription(RTCPSourceDescription(ssrc: first.ssrc, cname: cname)))
        var size = RTCPCompound.marshalSize(packets)
        guard size + (srtcp?.rtcpOverhead ?? 0) <= buffer.count else { return nil }
        buffer.appending { RTCPCompound.marshal(packets, into: &$0) }
        if let srtcp {
            var span = buffer.mutableBytes
            guard let n = try? srtcp.protectRTCP(&span, length: size) else { return nil }
            size = n
        }
        return size
    }

    /// Counts a sent RTP packet for the next sender report.
    public func packetSent(ssrc: UInt32, payloadBytes: Int) {
        var s = sent[ssrc] ?? (0, 0)
        s.packets &+= 1
        s.octets &+= UInt32(truncatingIfNeeded: payloadBytes)
        sent[ssrc] = s
    }

    /// The wall clock as NTP time (`CLOCK_REALTIME`).
    public static func wallClock() -> NTPTime { NTPTime.wallClock() }

    /// A sender report for `ssrc` (RFC 3550 §6.4.1): `rtpTimestamp` must be the media clock at the
    /// same instant as `ntpTime`.
    public func senderReport(ssrc: UInt32, rtpTimestamp: UInt32, ntpTime: NTPTime = RTCPSenderSession.wallClock())
        -> RTCPSenderReport
    {
        let s = sent[ssrc] ?? (0, 0)
        return RTCPSenderReport(ssrc: ssrc, ntpTime: ntpTime, rtpTime: rtpTimestamp, packetCount: s.packets, octetCount: s.octets)
    }

    /// Handles one unprotected RTCP compound packet from the receiver, received at `now`.
    /// Malformed input is counted.
    package func handle(_ rtcp: UnsafeRawBufferPointer, now: MonotonicTime, arrival: NTPTime = RTCPSenderSession.wallClock()) {
        let nowNs = now.nanoseconds
        guard let packets = try? RTCPCompound.parse(rtcp.bytes) else { counters.malformed += 1; return }
        for p in packets {
            switch p {
            case .receiverReport(let rr): reports(rr.reports, nowNs: nowNs, arrival: arrival)
            case .senderReport(let sr): reports(sr.reports, nowNs: nowNs, arrival: arrival)
            case .genericNack(let nack) where ssrcs.contains(nack.mediaSSRC):
                counters.nacksReceived += 1
                if let target = targets[nack.mediaSSRC] {
                    let lost = nack.lostSequenceNumbers
                    counters.packetsRequested += lost.count
                    target.handleNack(lost)
                    continue
                }
                for seq in nack.lostSequenceNumbers {
                    counters.packetsRequested += 1
                    switch handler?.retransmit(ssrc: nack.mediaSSRC, sequenceNumber: seq) ?? .missing {
                    case .found: counters.packetsRetransmitted += 1
                    case .missing, .expired, .exhausted: counters.packetsNotResent += 1
                    }
                }
            case .pictureLossIndication(let pli) where ssrcs.contains(pli.mediaSSRC):
                counters.plisReceived += 1
                askKeyframe(pli.mediaSSRC, nowNs: nowNs, fullIntra: false)
            case .fullIntraRequest(let fir):
                for e in fir.entries where ssrcs.contains(e.ssrc) {
                    guard lastFIR[e.ssrc] != e.sequenceNumber else { continue }
                    lastFIR[e.ssrc] = e.sequenceNumber
                    counters.firsReceived += 1
                    askKeyframe(e.ssrc, nowNs: nowNs, fullIntra: true)
                }
            case .transportFeedback(let feedback):
                guard let numbers = transportSequenceNumbers else { break }
                counters.transportFeedbackReceived += 1
                estimator.transportFeedback(feedback, sendLog: numbers, now: now)
                probe(now: now)
                publishTarget()
            case .receiverEstimatedMaxBitrate(let remb):
                counters.rembsReceived += 1
                estimator.receiverEstimatedMaxBitrate(remb.bitrate)
                publishTarget()
            default:
                break
            }
        }
    }

    /// Asks the controller for probes after a transport feedback (the first starts it) and hands
    /// them to the first video target that takes them.
    private func probe(now: MonotonicTime) {
        // The probing target with the lowest SSRC (a stable choice), found without sorting.
        var target: (any RTPSendFeedbackTarget)?
        for t in targets.values where t.carriesVideo && t.canProbe {
            if let best = target, best.ssrc <= t.ssrc { continue }
            target = t
        }
        guard var controller = probeController, let target else { return }
        controller.maximumBitrate = estimator.maximumBitrate
        let clusters =
            controller.hasStarted
            ? controller.update(
                estimate: estimator.targetBitrate, probeResult: estimator.probeResult, now: now,
                acknowledgedBitrate: estimator.delayBased.acknowledgedBitrate)
            : controller.start(estimate: estimator.targetBitrate, now: now)
        probeController = controller
        for c in clusters where target.handleProbe(c) {
            estimator.probeSent(c, now: now)
            counters.probeClustersSent += 1
        }
    }

    private func askKeyframe(_ ssrc: UInt32, nowNs: UInt64, fullIntra: Bool) {
        if let target = targets[ssrc] {
            // The stream's own limiter (shared by every receiver of a fanned-out stream) decides.
            counters.keyframesRequested += 1
            if fullIntra { target.handleFullIntraRequest() } else { target.handlePictureLossIndication() }
            return
        }
        // Requests within `minimumKeyframeInterval` of the last one are served by that keyframe:
        // on a congested path a keyframe per PLI would only add to the congestion that lost it.
        if let last = lastKeyframeRequestNs[ssrc], nowNs < last + UInt64(max(0, minimumKeyframeInterval.inNanoseconds)) {
            counters.keyframeRequestsThrottled += 1
            return
        }
        lastKeyframeRequestNs[ssrc] = nowNs
        counters.keyframesRequested += 1
        handler?.requestKeyframe(ssrc: ssrc)
    }

    private func reports(_ blocks: [RTCPReportBlock], nowNs: UInt64, arrival: NTPTime) {
        var lossSeen = false
        for b in blocks where ssrcs.contains(b.ssrc) {
            counters.reportsReceived += 1
            var s = remoteInbound[b.ssrc] ?? RemoteInboundRTPStreamStats()
            s.ssrc = b.ssrc
            s.fractionLost = Double(b.fractionLost) / 256
            targets[b.ssrc]?.handleReceiverLoss(fractionLost: s.fractionLost)
            s.packetsLost = Int64(b.cumulativeLost)
            if let rtt = NTPTime.roundTripTime(
                arrival: arrival, lastSenderReport: b.lastSenderReport,
                delaySinceLastSenderReport: b.delaySinceLastSenderReport)
            {
                s.roundTripTime = rtt
                s.totalRoundTripTime += rtt
                s.roundTripTimeMeasurements += 1
                estimator.roundTripTime(seconds: rtt)
                targets[b.ssrc]?.handleRoundTripTime(rtt)
            }
            remoteInbound[b.ssrc] = s
            if !lossSeen {
                lossSeen = true
                estimator.receiverReport(fractionLost: b.fractionLost, now: MonotonicTime(nanoseconds: nowNs))
            }
        }
        publishTarget()
    }

    private func publishTarget() {
        let t = estimator.targetBitrate
        if t != lastTarget {
            lastTarget = t
            handler?.setTargetBitrate(t)
            for target in targets.values where target.carriesVideo { target.handleEstimatedBitrate(t) }
        }
    }
}

extension RTCPSenderSession {
    /// Handles one unprotected RTCP compound packet from the receiver, received at `now`.
    /// Malformed input is counted.
    public func handle(_ rtcp: RawSpan, now: MonotonicTime, arrival: NTPTime = RTCPSenderSession.wallClock()) {
        rtcp.withUnsafeBytes { handle($0, now: now, arrival: arrival) }
    }
}
