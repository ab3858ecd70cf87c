import Synchronization

/// The live counters of one send stream: written by its capture callers and its worker with
/// relaxed atomic adds, read by `snapshot` functions into the W3C records (`OutboundRTPStreamStats`,
/// `AudioSourceStats`, `CaptureStats`) without stopping anything.
///
/// Each counter is individually exact; a snapshot is not one instant across counters (one may
/// include a packet another does not yet), as in browsers. Doubles are stored as bit patterns.
/// Thread rule: any thread. Cost: one relaxed atomic add per update; a snapshot is ~30 loads.
package final class SendCounters: Sendable {
    // Capture side (any producer thread).
    package let captured = Atomic<UInt64>(0)
    package let droppedRingFull = Atomic<UInt64>(0)
    package let droppedPoolExhausted = Atomic<UInt64>(0)
    package let droppedInvalid = Atomic<UInt64>(0)
    package let droppedInactive = Atomic<UInt64>(0)
    package let droppedFrameRate = Atomic<UInt64>(0)

    // Worker side (one writer). `packetsSent`/`bytesSent` count first transmissions; the snapshot
    // adds the retransmissions to them, as webrtc-stats defines them. `headerBytesSent` counts
    // every transmission (the worker adds the resent headers).
    package let packetsSent = Atomic<UInt64>(0)
    package let bytesSent = Atomic<UInt64>(0)
    package let headerBytesSent = Atomic<UInt64>(0)
    package let retransmittedPacketsSent = Atomic<UInt64>(0)
    package let retransmittedBytesSent = Atomic<UInt64>(0)
    package let framesEncoded = Atomic<UInt64>(0)
    package let keyFramesEncoded = Atomic<UInt64>(0)
    package let encodeTimeNs = Atomic<UInt64>(0)
    package let qpSum = Atomic<UInt64>(0)
    package let framesDroppedByEncoder = Atomic<UInt64>(0)
    package let frameWidth = Atomic<Int>(0)
    package let frameHeight = Atomic<Int>(0)
    package let targetBitrate = Atomic<Int>(0)
    package let framesPerSecondBits = Atomic<UInt64>(0)
    package let protectFailures = Atomic<UInt64>(0)
    /// Encoded-size changes the quality scaler made (worker).
    package let resolutionChanges = Atomic<UInt64>(0)

    // Feedback (receive thread or API).
    package let nackCount = Atomic<UInt64>(0)
    package let pliCount = Atomic<UInt64>(0)
    package let firCount = Atomic<UInt64>(0)
    package let nackRequestsDropped = Atomic<UInt64>(0)
    package let retransmissionsRefused = Atomic<UInt64>(0)
    /// NACKed packets not resent because retransmissions had used the target bitrate (pacer's thread).
    package let retransmissionsRateLimited = Atomic<UInt64>(0)

    // Audio source (worker).
    package let audioLevelBits = Atomic<UInt64>(0)
    package let totalAudioEnergyBits = Atomic<UInt64>(0)
    package let totalSamplesDurationBits = Atomic<UInt64>(0)

    // RTCP sender-report info, published as a seqlock of atomics so a reader sees a matching pair.
    package let srVersion = Atomic<UInt64>(0)
    package let srPacketCount = Atomic<UInt64>(0)
    package let srOctetCount = Atomic<UInt64>(0)
    package let srLastRTPTimestamp = Atomic<UInt32>(0)
    package let srLastCaptureNs = Atomic<Int64>(0)
    package let srLastSendNs = Atomic<UInt64>(0)
    package let srLastCapturedAtNs = Atomic<UInt64>(0)

    package init() {}

    @inline(__always) package func add(_ counter: borrowing Atomic<UInt64>, _ n: UInt64 = 1) {
        counter.add(n, ordering: .relaxed)
    }

    @inline(__always) package static func load(_ a: borrowing Atomic<UInt64>) -> UInt64 { a.load(ordering: .relaxed) }
    @inline(__always) package static func double(_ a: borrowing Atomic<UInt64>) -> Double {
        Double(bitPattern: a.load(ordering: .relaxed))
    }
    @inline(__always) package static func store(_ a: borrowing Atomic<UInt64>, _ v: Double) {
        a.store(v.bitPattern, ordering: .relaxed)
    }

    /// Worker only: records a frame's (or audio packet's) media packets for sender reports.
    package func publishSent(
        packets: UInt64, payloadOctets: UInt64, rtpTimestamp: UInt32, captureNs: Int64,
        capturedAtNs: UInt64, sendNs: UInt64
    ) {
        let v = srVersion.load(ordering: .relaxed)
        srVersion.store(v &+ 1, ordering: .relaxed)  // odd: writing
        atomicMemoryFence(ordering: .releasing)
        srPacketCount.add(packets, ordering: .relaxed)
        srOctetCount.add(payloadOctets, ordering: .relaxed)
        srLastRTPTimestamp.store(rtpTimestamp, ordering: .relaxed)
        srLastCaptureNs.store(captureNs, ordering: .relaxed)
        srLastSendNs.store(sendNs, ordering: .relaxed)
        srLastCapturedAtNs.store(capturedAtNs, ordering: .relaxed)
        srVersion.store(v &+ 2, ordering: .releasing)  // even: stable
    }

    /// Any thread: a consistent copy of the sender-report fields (retries while the worker writes).
    package func senderInfo(ssrc: UInt32) -> RTPSenderInfo {
        while true {
            let v0 = srVersion.load(ordering: .acquiring)
            if v0 & 1 == 1 { continue }
            let info = RTPSenderInfo(
                ssrc: ssrc,
                packetCount: srPacketCount.load(ordering: .relaxed),
                octetCount: srOctetCount.load(ordering: .relaxed),
                lastRTPTimestamp: srLastRTPTimestamp.load(ordering: .relaxed),
                lastCaptureNs: srLastCaptureNs.load(ordering: .relaxed),
                lastSendTime: MonotonicTime(nanoseconds: srLastSendNs.load(ordering: .relaxed)),
                lastCapturedAt: MonotonicTime(nanoseconds: srLastCapturedAtNs.load(ordering: .relaxed)))
            atomicMemoryFence(ordering: .acquiring)
            if srVersion.load(ordering: .relaxed) == v0 { return info }
        }
    }

    /// The capture counters as a `CaptureStats` record.
    package var captureStats: CaptureStats {
        var s = CaptureStats()
        s.captured = Self.load(captured)
        s.droppedRingFull = Self.load(droppedRingFull)
        s.droppedPoolExhausted = Self.load(droppedPoolExhausted)
        s.droppedInvalid = Self.load(droppedInvalid)
        s.droppedInactive = Self.load(droppedInactive)
        s.droppedFrameRate = Self.load(droppedFrameRate)
        return s
    }

    /// The send counters as an `OutboundRTPStreamStats` record.
    package func outboundStats(ssrc: UInt32, kind: String, codec: String) -> OutboundRTPStreamStats {
        var s = OutboundRTPStreamStats()
        s.ssrc = ssrc
        s.kind = kind
        s.codec = codec
        // webrtc-stats RTCSentRtpStreamStats: packetsSent and bytesSent include retransmissions,
        // which retransmittedPacketsSent/retransmittedBytesSent count again on their own. (Loaded
        // retransmissions first: a resend is counted after its original, so the sum never shows
        // a resend without the first transmission.)
        s.retransmittedPacketsSent = Self.load(retransmittedPacketsSent)
        s.retransmittedBytesSent = Self.load(retransmittedBytesSent)
        s.packetsSent = Self.load(packetsSent) + s.retransmittedPacketsSent
        s.bytesSent = Self.load(bytesSent) + s.retransmittedBytesSent
        s.headerBytesSent = Self.load(headerBytesSent)
        s.framesEncoded = Self.load(framesEncoded)
        s.keyFramesEncoded = Self.load(keyFramesEncoded)
        s.totalEncodeTime = Double(Self.load(encodeTimeNs)) / 1e9
        s.framesPerSecond = Self.double(framesPerSecondBits)
        s.frameWidth = frameWidth.load(ordering: .relaxed)
        s.frameHeight = frameHeight.load(ordering: .relaxed)
        s.targetBitrate = Double(targetBitrate.load(ordering: .relaxed))
        s.qpSum = Self.load(qpSum)
        s.nackCount = Self.load(nackCount)
        s.pliCount = Self.load(pliCount)
        s.firCount = Self.load(firCount)
        s.framesDroppedByEncoder = Self.load(framesDroppedByEncoder)
        return s
    }

    /// The audio source counters as an `AudioSourceStats` record.
    package var audioSourceStats: AudioSourceStats {
        var s = AudioSourceStats()
        s.audioLevel = Self.double(audioLevelBits)
        s.totalAudioEnergy = Self.double(totalAudioEnergyBits)
        s.totalSamplesDuration = Self.double(totalSamplesDurationBits)
        return s
    }
}

/// What an RTCP sender report (RFC 3550 §6.4.1) needs from a send stream: the sender's packet and
/// payload-octet counts and an RTP timestamp paired with the capture time it stands for (and when
/// that packet left), so the report's RTP timestamp can be extrapolated to the report's NTP time.
/// Retransmissions are not counted (they repeat packets already counted).
/// Thread rule: a value snapshot. Cost: none.
public struct RTPSenderInfo: Sendable, Equatable {
    /// The stream's SSRC.
    public var ssrc: UInt32
    /// RTP data packets sent (originals; wraps to 32 bits in the report).
    public var packetCount: UInt64
    /// Payload octets in them (headers and padding excluded).
    public var octetCount: UInt64
    /// RTP timestamp of the last media packet sent (0 before the first).
    public var lastRTPTimestamp: UInt32
    /// Capture time (caller's clock, ns) that `lastRTPTimestamp` stands for.
    public var lastCaptureNs: Int64
    /// When that packet was handed to the sink (`.zero` before the first).
    public var lastSendTime: MonotonicTime
    /// When the media that `lastRTPTimestamp` stands for was captured (`.zero` when its frames did
    /// not come through a capturer).
    public var lastCapturedAt: MonotonicTime = .zero

    /// A snapshot of the given fields.
    public init(
        ssrc: UInt32, packetCount: UInt64, octetCount: UInt64, lastRTPTimestamp: UInt32,
        lastCaptureNs: Int64, lastSendTime: MonotonicTime, lastCapturedAt: MonotonicTime = .zero
    ) {
        self.ssrc = ssrc
        self.packetCount = packetCount
        self.octetCount = octetCount
        self.lastRTPTimestamp = lastRTPTimestamp
        self.lastCaptureNs = lastCaptureNs
        self.lastSendTime = lastSendTime
        self.lastCapturedAt = lastCapturedAt
    }

    /// The stream's RTP timestamp at `now` for a sender report (RFC 3550 §6.4.1): the last
    /// timestamp advanced by the time since its media was captured, or, for media that did not
    /// come through a capturer, since its packet left.
    public func rtpTimestamp(at now: MonotonicTime, clockRate: UInt64) -> UInt32 {
        let nowNs = now.nanoseconds
        let reference = lastCapturedAt > .zero ? lastCapturedAt.nanoseconds : lastSendTime.nanoseconds
        guard reference > 0 && nowNs > reference else { return lastRTPTimestamp }
        return lastRTPTimestamp &+ UInt32(truncatingIfNeeded: (nowNs - reference) * clockRate / 1_000_000_000)
    }
}
