// The media sender of the receive-side tests, on simulated time: the streams the real-time test
// sender makes (VP8 video at 30 fps, Opus with in-band FEC at 50 packets a second, SRTP, sender
// reports, plain resends for NACK, keyframes for PLI, the encoder's bitrate from the RTCP
// estimate), sent at exact simulated times and handed to a simulated network instead of a socket.
import MediaCore

/// A VP8 + Opus sender driven by a `SimulatedTime`: SyntheticVideo -> VPXEncoder -> VP8Packetizer
/// -> SRTP, and SyntheticAudio (speech) -> Opus (in-band FEC) -> RTP -> SRTP, each packet given to
/// `output` at the simulated time it is sent. Video packets are kept in a `SendHistory` and
/// resent unchanged (same SSRC, sequence number and SRTP index) when a NACK asks for them; an
/// `RTCPSenderSession` turns the receiver's RTCP into resends, keyframes and the encoder's
/// bitrate. Every time it reads (send history ages, RTCP arrival, sender report NTP time) is the
/// simulated clock's, so a run repeats exactly.
///
/// Thread rule: the simulated clock's thread only (`start`, `receiveRTCP` and the work they
/// schedule). Cost: a real VP8 encode per video frame and an Opus encode per 20 ms; one packet
/// copy into the history per video packet.
/// Sendable: all state is touched on the simulated clock's one thread, from work it runs.
package final class SimulatedMediaSender: RTCPFeedbackHandler, @unchecked Sendable {
    /// SSRC of the video stream.
    package let videoSSRC: UInt32 = 0x1111_2222
    /// SSRC of the audio stream.
    package let audioSSRC: UInt32 = 0x3333_4444
    /// RTP payload type of the video (VP8).
    package let videoPayloadType: UInt8 = 96
    /// RTP payload type of the audio (Opus).
    package let audioPayloadType: UInt8 = 111
    /// The RTCP side: resends, keyframe requests, the bandwidth estimate, remote-inbound statistics.
    package private(set) var session: RTCPSenderSession!
    /// Keyframes encoded (the first one and every one asked for).
    package private(set) var keyframesSent = 0
    /// RTP packets sent, resends not counted.
    package private(set) var packetsSent = 0
    /// Packets resent for NACKs.
    package private(set) var retransmissions = 0
    /// Video frames the last `start` sent.
    package private(set) var videoFramesSent = 0
    /// Audio packets the last `start` sent.
    package private(set) var audioFramesSent = 0
    /// Every bitrate the estimate gave the encoder, in order.
    package private(set) var bitrateChanges: [Int] = []

    /// Unowned: the clock's queue holds the sender's scheduled sends, which hold the sender.
    private unowned let time: SimulatedTime
    private let output: (UnsafeRawBufferPointer) -> Void
    private let protect: SRTPContext?
    private let rtcpIn: SRTPContext?
    private let encoder: VPXEncoder
    private let opus: OpusEncoder
    private var packetizer = VP8Packetizer(pictureID: 100)
    private let history = SendHistory(capacity: 2048, maxPacketSize: 1500)
    private var videoSequence: UInt16 = 1000
    private var audioSequence: UInt16 = 5000
    private var keyframePending = false
    /// When, since the start of the run, the last sender report went (nil: none yet).
    private var lastReportNs: UInt64?
    private let frame: VideoFrame
    private var audioSource = SyntheticAudio(pattern: .speech, sampleRate: 48_000)
    private var pcm = [Int16](repeating: 0, count: 960)
    private var opusPacket = [UInt8](repeating: 0, count: 1500)
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 16)

    /// The NTP time of simulated time zero: sender reports and RTCP arrivals are stamped with
    /// this plus the simulated clock, so round trips measured from LSR/DLSR are simulated ones.
    private static let ntpEpochNanoseconds: UInt64 = 1_700_000_000_000_000_000

    /// A sender of `width` x `height` video at `bitrate` (the estimate's start) encrypted with
    /// `key` (nil: plain RTP), whose packets go to `output` (lent for the call, at `time.now`).
    /// `time` must outlive the sender.
    package init(
        time: SimulatedTime, key: SRTPKeyMaterial?, width: Int = 320, height: Int = 240, bitrate: Int = 400_000,
        audioFEC: Bool = true, output: @escaping (UnsafeRawBufferPointer) -> Void
    ) throws {
        self.time = time
        self.output = output
        if let key {
            protect = try SRTPContext(material: key, direction: .outbound)
            rtcpIn = try SRTPContext(material: key, direction: .inbound)
        } else {
            protect = nil
            rtcpIn = nil
        }
        var conf = VPXEncoderConfiguration(codec: .vp8, width: width, height: height)
        conf.bitrate = bitrate
        conf.keyframeInterval = 100_000
        encoder = try VPXEncoder(conf)
        opus = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .voip)
        opus.isInbandFECEnabled = audioFEC
        opus.expectedPacketLossPercent = audioFEC ? 10 : 0
        frame = VideoFrame(width: width, height: height)
        session = RTCPSenderSession(
            ssrcs: [videoSSRC, audioSSRC], handler: self, startBitrate: bitrate,
            minimumBitrate: 50_000, maximumBitrate: 2_000_000)
    }

    deinit { buffer.deallocate() }

    /// The simulated clock as NTP time.
    private var ntpNow: NTPTime { NTPTime(unixNanoseconds: Self.ntpEpochNanoseconds &+ time.now.nanoseconds) }

    // MARK: RTCPFeedbackHandler

    package func retransmit(ssrc: UInt32, sequenceNumber: UInt16) -> SendHistory.Lookup {
        let found = history.retransmit(seq: sequenceNumber, now: time.now, maxRetransmissions: 3) { bytes in
            bytes.withUnsafeBytes { output($0) }
        }
        if case .found = found { retransmissions += 1 }
        return found
    }

    package func requestKeyframe(ssrc: UInt32) {
        if ssrc == videoSSRC { keyframePending = true }
    }

    package func setTargetBitrate(_ bitsPerSecond: Int) {
        bitrateChanges.append(bitsPerSecond)
        encoder.bitrate = max(50_000, bitsPerSecond)
    }

    // MARK: Sending

    /// Sends `seconds` of 30 fps video (frame k at k x 33.3 ms) and, when `audio`, 20 ms Opus
    /// packets (packet k at k x 20 ms), and a sender report every 250 ms, from now on: the work
    /// is scheduled on the clock, which must then be advanced past the end.
    package func start(seconds: Double, video: Bool = true, audio: Bool = true) {
        let start = time.now
        let endNs = UInt64(seconds * 1e9)
        videoFramesSent = 0
        audioFramesSent = 0
        lastReportNs = nil
        @Sendable func step() {
            let elapsed = time.now.nanoseconds - start.nanoseconds
            guard elapsed < endNs else { return }
            let v = videoFramesSent, a = audioFramesSent
            if video && elapsed >= UInt64(v) * 33_333_333 {
                sendVideoFrame(v)
                videoFramesSent += 1
            }
            if audio && elapsed >= UInt64(a) * 20_000_000 {
                sendAudioPacket(a)
                audioFramesSent += 1
            }
            if lastReportNs.map({ elapsed >= $0 + 250_000_000 }) ?? true {
                lastReportNs = elapsed
                sendSenderReport(rtpTimestamp: UInt32(truncatingIfNeeded: videoFramesSent * 3000))
            }
            var next = (lastReportNs ?? 0) + 250_000_000
            if video { next = min(next, UInt64(videoFramesSent) * 33_333_333) }
            if audio { next = min(next, UInt64(audioFramesSent) * 20_000_000) }
            time.schedule(after: .nanoseconds(Int64(next - elapsed))) { step() }
        }
        time.schedule(after: .zero) { step() }
    }

    /// Protects the packet in `buffer` (when keyed), keeps it for resends when `store`, and sends it.
    private func send(_ length: Int, sequenceNumber: UInt16, store: Bool) {
        var n = length
        var bufferSpan = buffer.mutableBytes
        if let protect { n = (try? protect.protect(&bufferSpan, length: length)) ?? 0 }
        guard n > 0 else { return }
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
        if store { _ = history.store(seq: sequenceNumber, packet: bytes, now: time.now) }
        output(bytes)
        packetsSent += 1
    }

    private func sendVideoFrame(_ index: Int) {
        SyntheticVideo.render(frameIndex: index, into: frame)
        let pts = Int64(index) * 3000
        let force = keyframePending
        keyframePending = false
        _ = try? encoder.encode(frame.view, pts: pts, forceKeyframe: force) { encoded in
            if encoded.isKeyframe { keyframesSent += 1 }
            var header = RTPHeader(
                payloadType: videoPayloadType, timestamp: UInt32(truncatingIfNeeded: pts), ssrc: videoSSRC)
            let packets = packetizer.packetize(
                frameSize: encoded.byteCount, maxPayloadSize: header.maxPayloadSize(mtu: 1200))
            for i in 0..<packets.count {
                header.sequenceNumber = videoSequence
                let n = buffer.appending { packets.writePacket(at: i, header: &header, of: encoded.data.bytes, into: &$0) }
                session.packetSent(ssrc: videoSSRC, payloadBytes: n - 12)
                send(n, sequenceNumber: videoSequence, store: true)
                videoSequence &+= 1
            }
        }
    }

    private func sendAudioPacket(_ index: Int) {
        let samples = audioSource.int16s(frames: 960)
        for i in 0..<960 { pcm[i] = samples[i] }
        let size =
            (try? pcm.withUnsafeBufferPointer { p in
                try opusPacket.withUnsafeMutableBytes { try opus.encode(p, into: $0) }
            }) ?? 0
        guard size > 0 else { return }
        let header = RTPHeader(
            marker: index == 0, payloadType: audioPayloadType, sequenceNumber: audioSequence,
            timestamp: UInt32(truncatingIfNeeded: index * 960), ssrc: audioSSRC)
        let packet = opusPacket
        let n = buffer.appending {
            RTPPacket.marshal(header: header, payload: packet.span.bytes.extracting(0..<size), into: &$0)
        }
        send(n, sequenceNumber: audioSequence, store: false)
        audioSequence &+= 1
    }

    private func sendSenderReport(rtpTimestamp: UInt32) {
        let report = session.senderReport(ssrc: videoSSRC, rtpTimestamp: rtpTimestamp, ntpTime: ntpNow)
        var n = buffer.appending { report.marshal(into: &$0) }
        var bufferSpan = buffer.mutableBytes
        if let protect { n = (try? protect.protectRTCP(&bufferSpan, length: n)) ?? 0 }
        if n > 0 { output(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) }
    }

    /// Handles one RTCP datagram from the receiver that reached the sender now; the bytes are
    /// unprotected in place. Datagrams that fail SRTCP are dropped.
    package func receiveRTCP(_ bytes: UnsafeMutableRawBufferPointer) {
        var n = bytes.count
        if let rtcpIn {
            var bytesSpan = bytes.mutableBytes
            guard let m = try? rtcpIn.unprotectRTCP(&bytesSpan, length: n) else { return }
            n = m
        }
        session.handle(UnsafeRawBufferPointer(rebasing: bytes[0..<n]), now: time.now, arrival: ntpNow)
    }
}
