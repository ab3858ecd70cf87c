/// Statistics records shaped and named as the W3C "Identifiers for WebRTC's Statistics API"
/// (webrtc-stats) names them, so numbers read the same as in a browser's `getStats()`.
/// Each record is an immutable snapshot taken without stopping the pipeline (counters are atomics).
/// Thread rule: value types, free to share. Cost: a snapshot copies a few dozen numbers.

/// webrtc-stats §5.4 `RTCOutboundRtpStreamStats` (with the `RTCSentRtpStreamStats` and
/// `RTCRtpStreamStats` fields it inherits).
public struct OutboundRTPStreamStats: Sendable, Codable, Equatable {
    /// SSRC of the RTP stream (`ssrc`).
    public var ssrc: UInt32 = 0
    /// "audio" or "video".
    public var kind: String = "video"
    /// Codec name as in SDP, e.g. "VP8", "VP9", "opus".
    public var codec: String = ""
    /// RTP packets sent, retransmissions included (webrtc-stats `RTCSentRtpStreamStats`); first
    /// transmissions are `packetsSent - retransmittedPacketsSent`.
    public var packetsSent: UInt64 = 0
    /// Payload bytes sent, retransmissions included (RFC 3550 §6.4.1 octets, webrtc-stats).
    public var bytesSent: UInt64 = 0
    /// RTP header bytes sent, retransmissions included (webrtc-stats: with `bytesSent`, the bytes
    /// sent as RTP over the transport, SRTP tags excluded).
    public var headerBytesSent: UInt64 = 0
    /// NACK resends (same SSRC and sequence number, no RTX), also counted in `packetsSent`.
    public var retransmittedPacketsSent: UInt64 = 0
    /// Payload bytes of the resends, also counted in `bytesSent`.
    public var retransmittedBytesSent: UInt64 = 0
    /// Frames the encoder produced (`framesEncoded`).
    public var framesEncoded: UInt64 = 0
    /// Of those, keyframes (`keyFramesEncoded`).
    public var keyFramesEncoded: UInt64 = 0
    /// Seconds spent encoding, summed over frames.
    public var totalEncodeTime: Double = 0
    /// Encoded frames per second (`framesPerSecond`).
    public var framesPerSecond: Double = 0
    /// Width the encoder encodes at, pixels (`frameWidth`).
    public var frameWidth: Int = 0
    /// Height the encoder encodes at, pixels (`frameHeight`).
    public var frameHeight: Int = 0
    /// Bits per second the encoder is currently configured for.
    public var targetBitrate: Double = 0
    /// Sum of the encoder's quantizer over encoded frames (VP8/VP9 0-127 scale).
    public var qpSum: UInt64 = 0
    /// Generic NACK packets received from the receiver (`nackCount`).
    public var nackCount: UInt64 = 0
    /// Picture loss indications received from the receiver (`pliCount`).
    public var pliCount: UInt64 = 0
    /// Full intra requests received from the receiver (`firCount`).
    public var firCount: UInt64 = 0
    /// Frames the encoder skipped for rate control (not an error).
    public var framesDroppedByEncoder: UInt64 = 0
    /// An empty record: every counter 0.
    public init() {}
}

/// webrtc-stats §5.10 `RTCAudioSourceStats`.
public struct AudioSourceStats: Sendable, Codable, Equatable {
    /// Linear 0...1 level of the most recent audio (RMS relative to full scale).
    public var audioLevel: Double = 0
    /// Sum over samples of level² × duration (the W3C definition), for average level computations.
    public var totalAudioEnergy: Double = 0
    /// Seconds of audio seen by the source.
    public var totalSamplesDuration: Double = 0
    /// An empty record: every value 0.
    public init() {}
}

/// What a capturer did with the buffers it was given: captured, or dropped and why.
public struct CaptureStats: Sendable, Codable, Equatable {
    /// Buffers accepted and queued for encoding.
    public var captured: UInt64 = 0
    /// Video frames replaced in a full ring by a newer frame (drop-oldest policy).
    public var droppedRingFull: UInt64 = 0
    /// Buffers dropped because every pooled frame was in use.
    public var droppedPoolExhausted: UInt64 = 0
    /// Buffers rejected as malformed (bad size, stride or format).
    public var droppedInvalid: UInt64 = 0
    /// Buffers dropped because the pipeline was stopped or the track muted.
    public var droppedInactive: UInt64 = 0
    /// Video frames skipped because they came faster than the target frame rate (only when the
    /// stream limits its frame rate).
    public var droppedFrameRate: UInt64 = 0
    /// An empty record: every counter 0.
    public init() {}
    /// Total dropped, all reasons together.
    public var dropped: UInt64 { droppedRingFull + droppedPoolExhausted + droppedInvalid + droppedInactive + droppedFrameRate }
}

/// webrtc-stats §5.3 `RTCInboundRtpStreamStats`.
public struct InboundRTPStreamStats: Sendable, Codable, Equatable {
    /// SSRC of the remote RTP stream (`ssrc`).
    public var ssrc: UInt32 = 0
    /// "audio" or "video".
    public var kind: String = "video"
    /// Codec name as in SDP, e.g. "VP8", "VP9", "opus".
    public var codec: String = ""
    /// RTP packets received (`packetsReceived`).
    public var packetsReceived: UInt64 = 0
    /// Expected minus received (RFC 3550 §6.4.1); may be negative with duplicates.
    public var packetsLost: Int64 = 0
    /// Interarrival jitter in seconds (RFC 3550 §6.4.1).
    public var jitter: Double = 0
    /// Bytes received after the RTP headers (`bytesReceived`).
    public var bytesReceived: UInt64 = 0
    /// RTP header bytes received (`headerBytesReceived`).
    public var headerBytesReceived: UInt64 = 0
    /// Packets dropped as late, duplicate or unusable by the jitter buffer (`packetsDiscarded`).
    public var packetsDiscarded: UInt64 = 0
    /// Complete frames assembled from packets (`framesReceived`).
    public var framesReceived: UInt64 = 0
    /// Frames the decoder decoded (`framesDecoded`).
    public var framesDecoded: UInt64 = 0
    /// Of those, keyframes (`keyFramesDecoded`).
    public var keyFramesDecoded: UInt64 = 0
    /// Frames dropped instead of decoded, incomplete ones included (`framesDropped`).
    public var framesDropped: UInt64 = 0
    /// Width of the last decoded frame in pixels (`frameWidth`).
    public var frameWidth: Int = 0
    /// Height of the last decoded frame in pixels (`frameHeight`).
    public var frameHeight: Int = 0
    /// Video freezes by the webrtc-stats rule: a gap between rendered frames above max(3 x mean, mean + 150 ms).
    public var freezeCount: UInt64 = 0
    /// Seconds.
    public var totalFreezesDuration: Double = 0
    /// Audio samples received, concealed ones included (`totalSamplesReceived`).
    public var totalSamplesReceived: UInt64 = 0
    /// Audio: the level the sender measured for its latest packet, from the RFC 6464 audio level
    /// header extension, linear 0...1 relative to full scale (`audioLevel`); 0 when the stream
    /// carries no such extension.
    public var audioLevel: Double = 0
    /// Audio samples synthesized to hide lost or late packets (`concealedSamples`).
    public var concealedSamples: UInt64 = 0
    /// Runs of concealed samples: a concealed sample after a received one starts one (`concealmentEvents`).
    public var concealmentEvents: UInt64 = 0
    /// Seconds, summed over emitted frames/samples.
    public var jitterBufferDelay: Double = 0
    /// Frames or samples that left the jitter buffer; divides `jitterBufferDelay` (`jitterBufferEmittedCount`).
    public var jitterBufferEmittedCount: UInt64 = 0
    /// Generic NACK packets sent for this stream (`nackCount`).
    public var nackCount: UInt64 = 0
    /// Picture loss indications sent for this stream (`pliCount`).
    public var pliCount: UInt64 = 0
    /// Full intra requests sent for this stream (`firCount`).
    public var firCount: UInt64 = 0
    /// FEC packets received (`fecPacketsReceived`); this engine negotiates no FEC, so it stays 0.
    public var fecPacketsReceived: UInt64 = 0
    /// Audio: samples removed by time stretching to bring the buffer down to its target.
    public var removedSamplesForAcceleration: UInt64 = 0
    /// Audio: samples inserted by time stretching to bring the buffer up to its target.
    public var insertedSamplesForDeceleration: UInt64 = 0
    /// Frames (video) or packets (audio) whose SFrame end-to-end decryption failed: unknown key,
    /// altered or wrongly keyed, replayed or malformed (not a W3C field). Video counts them in
    /// `framesDropped` too, audio in `packetsDiscarded`.
    public var framesDecryptionFailed: UInt64 = 0

    /// An empty record: every counter 0.
    public init() {}
}

/// webrtc-stats §5.5 `RTCRemoteInboundRtpStreamStats`: what the receiver said about our stream.
public struct RemoteInboundRTPStreamStats: Sendable, Codable, Equatable {
    /// SSRC of our stream the report is about (`ssrc`).
    public var ssrc: UInt32 = 0
    /// Seconds, from the last receiver report's LSR/DLSR (RFC 3550 §6.4.1).
    public var roundTripTime: Double = 0
    /// Sum of every round-trip time measured, seconds (`totalRoundTripTime`).
    public var totalRoundTripTime: Double = 0
    /// Round-trip times measured, the divisor of `totalRoundTripTime` (`roundTripTimeMeasurements`).
    public var roundTripTimeMeasurements: UInt64 = 0
    /// Fraction of packets lost in the last report interval, 0...1.
    public var fractionLost: Double = 0
    /// Packets lost as the receiver reported it, cumulative (RFC 3550 §6.4.1 `packetsLost`); may be negative.
    public var packetsLost: Int64 = 0
    /// Interarrival jitter the receiver reported, seconds (RFC 3550 §6.4.1 `jitter`).
    public var jitter: Double = 0
    /// An empty record: every counter 0.
    public init() {}
}
