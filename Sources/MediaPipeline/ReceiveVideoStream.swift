import MediaBase
import MediaCodecs
import MediaFrames
import MediaTransport
import MediaWire

/// How a `VideoReceiveStream` repairs loss and plays out.
/// Thread rule: a value type. Cost: none.
public struct VideoReceiveSettings: Sendable {
    /// VP8 or VP9.
    public var codec: VPXCodec
    /// RTP payload type of the stream.
    public var payloadType: UInt8
    /// Jitter buffer memory and delay range.
    public var jitterBuffer = JitterBufferSettings(
        capacity: 1024, maxPacketSize: 1500,
        minimumDelayMilliseconds: 0, maximumDelayMilliseconds: 500)
    /// Ask for retransmission of missing packets (RFC 4585 generic NACK).
    public var nackEnabled = true
    /// The RFC 4588 retransmission payload type the sender resends on (its own SSRC, `apt=` this
    /// stream's payload type): such packets are unwrapped into this stream. Plain resends on the
    /// media SSRC are taken with or without it. nil: RTX packets are dropped as unknown.
    public var rtxPayloadType: UInt8? = nil
    /// Requests per missing packet before giving up (then a keyframe is requested).
    public var nackMaxTries = 10
    /// Round-trip time assumed until one is measured, in milliseconds: a hole is waited for about
    /// `target delay + 1.5 x RTT` with NACK, `target delay` without.
    public var assumedRoundTripMilliseconds: Double = 100
    /// Shortest time between two keyframe requests (PLI), in milliseconds.
    public var keyframeRequestIntervalMilliseconds: Double = 200
    /// When set, every decoded frame is also converted to this packed RGB format for the renderer
    /// (`.bgra` = libyuv ARGB).
    public var renderFormat: PixelFormat? = nil
    /// The RFC 8285 ID of abs-send-time in the sender's packets (3, as our send streams and
    /// libwebrtc use it by default; nil: not read). When the stream's first packet carries it, the
    /// delay-based estimate (REMB) measures send times from it rather than from RTP timestamps, so
    /// a paced sender's queue is not taken for the path's.
    public var absSendTimeExtensionID: UInt8? = 3
    /// Largest encoded frame accepted, in bytes.
    public var maxFrameSize = 2 << 20
    /// Decoder threads.
    public var decoderThreads = 1
    /// Render scheduling, as libwebrtc's frame timing does it: a complete frame leaves the jitter
    /// buffer for the decoder at its playout time, so frames reach the renderer spaced as they
    /// were captured even when the network bunches them, each with the `renderTime` at which it
    /// should be shown. The playout time aims at the arrival time the frame's RTP timestamp maps to
    /// on the least-delayed path (`RTPJitterBuffer.baselineArrival`) plus the adaptive target
    /// delay, and moves toward that aim by at most 100 ms per second of media (libwebrtc's limit):
    /// a change of delay or of the path's baseline stretches or shrinks frame intervals by at most
    /// 10 % instead of making a jump. False: every frame is decoded and rendered as soon as it is
    /// complete (recording to a file, lowest latency).
    public var schedulesRendering = true
    /// How long the renderer takes to show a frame, in milliseconds: `renderTime` is the
    /// decode-time estimate plus this after the frame left the buffer (libwebrtc's default is 10).
    public var renderDelayMilliseconds: Double = 10
    /// SFrame end-to-end decryption (RFC 9605) of every assembled frame before the decoder, with
    /// the keys of the sending side; nil (default) decodes frames as they arrive. A frame that
    /// fails to decrypt is dropped (`framesDropped`, `framesDecryptionFailed`) and a keyframe is
    /// requested as for a lost frame.
    public var frameDecryption: SFrameReceiver? = nil

    /// Settings for a stream of `codec` on `payloadType`.
    public init(codec: VPXCodec, payloadType: UInt8) {
        self.codec = codec
        self.payloadType = payloadType
    }
}

/// One incoming video stream: jitter buffer -> NACK -> depacketizer (RFC 7741 / RFC 9628) ->
/// VPX decoder -> renderer, with keyframe requests after loss that cannot be repaired and the
/// W3C inbound-rtp statistics of the stream.
///
/// The receive engine calls `insert` for each unprotected RTP packet of the stream and `process`
/// after each batch and on its timer: packets play in sequence order as soon as they are there; a
/// hole is waited for up to the adaptive delay (plus a retransmission's round trip with NACK), then
/// skipped, which makes the frame incomplete, tells the decoder (`frameLost`) and requests a
/// keyframe -- unless nothing depends on what was lost: a frame marked non-reference, or, in a
/// temporally layered stream (TL0PICIDX), frames above the base layer, which the next base-layer
/// frame whose TL0PICIDX follows the last one decoded does not need (frames of upper layers before
/// it are dropped without a keyframe request). Frames decoded are given to the renderer on the
/// engine's thread.
/// Thread rule: one owner thread (the engine). Cost: one packet copy into the jitter buffer, one
/// into the frame buffer, the decode; no allocation in steady state.
public final class VideoReceiveStream {
    /// SSRC of the stream.
    public let ssrc: UInt32
    /// The settings.
    public let settings: VideoReceiveSettings
    /// The jitter buffer (for inspection).
    public let jitterBuffer: RTPJitterBuffer
    /// NACK bookkeeping.
    public let nack: NackTracker
    /// RFC 3550 reception statistics for RTCP reports and the W3C packet counters.
    public var receiveStatistics: RTPReceptionStatistics
    /// W3C inbound-rtp statistics (packet counters filled by `statsSnapshot`).
    public private(set) var stats = InboundRTPStreamStats()
    /// Receiver-side delay-based bandwidth estimate (for REMB).
    public var bandwidth = ReceiveSideBandwidthEstimator(clockRate: 90_000)
    /// The round trip assumed for NACK timing until one is measured.
    public var roundTrip: Duration {
        get { .nanoseconds(Int64(roundTripNs)) }
        set { roundTripNs = UInt64(max(0, newValue.inNanoseconds)) }
    }
    private var roundTripNs: UInt64

    private let renderer: VideoRenderer?
    private let decoder: VPXDecoder
    private let vp8: VP8Depacketizer?
    private let vp9: VP9Depacketizer?
    private let converter = ColorConverter()
    private var packed: UnsafeMutableRawBufferPointer?
    /// The decrypted frame (with `frameDecryption`): `maxFrameSize` bytes, allocated once.
    private let decrypted: UnsafeMutableRawBufferPointer
    private var keyframeRequested = false
    private var lastKeyframeRequestNs: UInt64 = 0
    private var frameTimestamp: UInt32 = 0
    private var frameFirstArrivalNs: UInt64 = 0
    /// Arrival of the latest packet of the frame being played, and the frame's bytes so far.
    private var frameLastArrivalNs: UInt64 = 0
    private var frameBytes = 0
    /// RTP timestamps of the last frames a packet arrived behind the highest sequence number
    /// for (a retransmission or reordering): their completion time is not the path's.
    private var repairedTimestamps = [UInt32](repeating: 0, count: 8)
    private var repairedCount = 0
    /// The frame-size-aware jitter estimate the playout delay comes from.
    package private(set) var jitterEstimator = VideoJitterEstimator()
    private var inFrame = false
    private var lastRenderNs: UInt64 = 0
    private var meanFrameIntervalNs: Double = 0
    private var hasOutput = false
    private var nackScratch: [UInt16] = []
    /// TL0PICIDX of the last base-layer (TID 0) frame decoded, in a temporally layered stream.
    private var lastBaseTL0PicIdx: UInt8?
    /// Packets were lost in a layered stream: the next frame's TL0PICIDX tells whether a
    /// base-layer frame was among them.
    private var baseLayerCheckPending = false
    /// Bit k: layer k may reference a lost frame, so its frames are skipped until one of them is
    /// a layer-sync frame (it references the base layer only).
    private var brokenUpperLayers: UInt8 = 0
    /// With `schedulesRendering`: when the frame at the head of the jitter buffer is due to leave
    /// it (nil: none is waiting). The engine sleeps no longer than this.
    public var nextRelease: MonotonicTime? { nextReleaseNs == 0 ? nil : MonotonicTime(nanoseconds: nextReleaseNs) }
    private var nextReleaseNs: UInt64 = 0
    /// When the frame being played left the buffer: its scheduled time, or the time it was taken
    /// when it was late or unscheduled.
    private var frameReleaseNs: UInt64 = 0
    /// Extra playout delay lip sync asks of this stream (set by the receive engine from
    /// `AudioVideoSync`); added to the aim of `schedulesRendering`.
    public var synchronizationDelay: Duration {
        get { .nanoseconds(Int64(synchronizationDelayNs)) }
        set { synchronizationDelayNs = Double(newValue.inNanoseconds) }
    }
    /// `synchronizationDelay` in nanoseconds.
    var synchronizationDelayNs: Double = 0
    /// The render time and RTP timestamp of the last frame handed to the renderer (or decoded,
    /// without one), for lip sync.
    public private(set) var lastRendered: (renderTime: MonotonicTime, rtpTimestamp: UInt32)?
    /// The RTP timestamp and playout time of the last frame scheduled.
    private var lastScheduled: (timestamp: UInt32, playoutNs: Double)?
    /// Decode time estimate: follows a longer decode quickly (1/4 of the difference
    /// per frame) and a shorter one slowly (1/32), so `renderTime` is rarely earlier than a frame
    /// can be ready and one slow decode does not move the render times of the frames after it.
    public var decodeTimeEstimate: Duration { .nanoseconds(Int64(decodeTimeEstimateNs)) }
    private var decodeTimeEstimateNs: UInt64 = 0
    /// When true, the stream never reads the clock: a decode starts and ends at the `now` given
    /// to `process` (a receive pipeline driven on a simulated clock, where decoding takes no
    /// time). False (default): decode times are measured on `MonotonicTime.now`. Set before the
    /// first packet. Thread rule: the owner thread. Cost: one branch per decoded frame.
    package var takesTimeFromCaller = false

    /// Creates the stream's decoder and buffers. Throws when libvpx cannot create a decoder.
    public init(ssrc: UInt32, settings: VideoReceiveSettings, renderer: VideoRenderer?) throws(VPXError) {
        self.ssrc = ssrc
        self.settings = settings
        self.renderer = renderer
        jitterBuffer = RTPJitterBuffer(settings: settings.jitterBuffer, clockRate: 90_000)
        nack = NackTracker(capacity: settings.jitterBuffer.capacity, maxTries: settings.nackMaxTries)
        // Resends keep their sequence numbers (no RTX): anything the NACK window can ask for is late,
        // not a restarted sender.
        receiveStatistics = RTPReceptionStatistics(
            ssrc: ssrc, clockRate: 90_000,
            lateWindow: UInt16(min(settings.jitterBuffer.capacity, Int(RTPReceptionStatistics.maxDropout))))
        decoder = try VPXDecoder(codec: settings.codec, threads: settings.decoderThreads)
        vp8 = settings.codec == .vp8 ? VP8Depacketizer(maxFrameSize: settings.maxFrameSize) : nil
        vp9 = settings.codec == .vp9 ? VP9Depacketizer(maxFrameSize: settings.maxFrameSize) : nil
        roundTripNs = UInt64(settings.assumedRoundTripMilliseconds * 1e6)
        stats.ssrc = ssrc
        stats.kind = "video"
        stats.codec = settings.codec == .vp8 ? "VP8" : "VP9"
        nackScratch.reserveCapacity(256)
        decrypted = .allocate(byteCount: settings.frameDecryption == nil ? 0 : settings.maxFrameSize, alignment: 16)
    }

    deinit {
        packed?.deallocate()
        decrypted.deallocate()
    }

    /// Takes one unprotected RTP packet of this stream, parsed as `packet` from `bytes`, that
    /// arrived at `arrival`.
    public func insert(_ packet: RTPPacket, in bytes: RawSpan, arrival: MonotonicTime) {
        bytes.withUnsafeBytes { insert(packet, in: $0, arrival: arrival) }
    }

    /// `insert(_:in:arrival:)` on the raw buffer the packet was parsed from.
    package func insert(_ packet: RTPPacket, in bytes: UnsafeRawBufferPointer, arrival: MonotonicTime) {
        let h = packet.header
        receiveStatistics.update(
            sequenceNumber: h.sequenceNumber, timestamp: h.timestamp,
            arrival: arrival, size: bytes.count,
            headerSize: packet.headerSize)
        if sendTimeSource == .undecided {
            if let id = settings.absSendTimeExtensionID, h.extensions.absSendTime(id: id) != nil {
                sendTimeSource = .absSendTime
                bandwidth = ReceiveSideBandwidthEstimator(clockRate: 1 << 26)
                bandwidth.groupSpanTicks = 5 << 26 / 1000  // 5 ms
            } else {
                sendTimeSource = .rtpTimestamp
            }
        }
        if sendTimeSource == .absSendTime {
            // 6.18 fixed-point seconds shifted to 32 bits: wraps every 64 s like a 2^26 Hz clock.
            if let id = settings.absSendTimeExtensionID, let t = h.extensions.absSendTime(id: id) {
                _ = bandwidth.packetArrived(timestamp: t.rawValue << 8, arrival: arrival, size: bytes.count)
            }
        } else {
            _ = bandwidth.packetArrived(timestamp: h.timestamp, arrival: arrival, size: bytes.count)
        }
        if jitterBuffer.next != nil && jitterBuffer.extend(h.sequenceNumber) < jitterBuffer.highest {
            repairedTimestamps[repairedCount & 7] = h.timestamp
            repairedCount &+= 1
        }
        let result = jitterBuffer.insert(
            bytes, sequenceNumber: h.sequenceNumber, timestamp: h.timestamp,
            arrival: arrival)
        switch result {
        case .stored, .reset:
            if result == .reset {
                nack.clear()
                jitterEstimator.reset()
            }
            if settings.nackEnabled { nack.packetArrived(jitterBuffer.extend(h.sequenceNumber), now: arrival) }
        case .duplicate, .late, .tooLarge:
            stats.packetsDiscarded += 1
        }
        if searchingStreamStart { findStreamStart() }
    }

    /// Which send time feeds the delay-based estimate, decided by the first packet.
    private enum SendTimeSource { case undecided, rtpTimestamp, absSendTime }
    private var sendTimeSource = SendTimeSource.undecided

    /// True until the packet the stream starts playing at is known to begin a frame.
    private var searchingStreamStart = true
    /// Packets looked for before the first one received, at most `maxStartSearch`.
    private var startSearchSteps = 0
    /// How far back the stream start is looked for (a keyframe's leading packets lost in a row).
    private let maxStartSearch = 16

    /// The first packets of a stream have nothing before them to reveal their loss: when the
    /// first packet held does not begin a frame (VP8 S=1 and PID=0, RFC 7741 §4.2; VP9 B=1, RFC
    /// 9628 §4.2), the one before it is made a hole, NACKed and waited for like any other, and so
    /// on back to the frame's start. Without this a lost first packet costs the stream's first
    /// keyframe and a PLI (libwebrtc's NackRequester, which starts at the first packet, has the
    /// same blind spot). Stops once anything played or a hole was given up on.
    private func findStreamStart() {
        guard jitterBuffer.counters.played == 0, jitterBuffer.counters.skipped == 0 else {
            searchingStreamStart = false
            return
        }
        guard let head = jitterBuffer.peekNext else { return }  // already waiting for an earlier one
        if !startIsWorthSearching(head.bytes) || startSearchSteps >= maxStartSearch || !settings.nackEnabled {
            searchingStreamStart = false
            return
        }
        guard let ext = jitterBuffer.extendStartBack() else { searchingStreamStart = false; return }
        startSearchSteps += 1
        nack.expectBefore(ext)
    }

    /// Whether the packets before the RTP packet `bytes` are worth asking for: it does not begin
    /// a frame, and (VP9, whose every packet carries the P bit, RFC 9628 §4.2) its frame is a key
    /// frame; the start of a predicted frame is useless without the key frame before it, so a
    /// stream joined mid-way asks for a key frame at once instead. False when it cannot be parsed.
    private func startIsWorthSearching(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let packet = try? RTPPacket(parsing: bytes.bytes) else { return false }
        if settings.codec == .vp8 {
            guard let (d, _) = try? VP8PayloadDescriptor.parse(bytes.bytes.extracting(packet.payloadRange)) else { return false }
            return !d.startsFrame
        }
        guard let (d, _) = try? VP9PayloadDescriptor.parse(bytes.bytes.extracting(packet.payloadRange)) else { return false }
        return !d.startOfFrame && !d.interPicturePredicted
    }

    /// The playout delay after a frame's baseline arrival (`RTPJitterBuffer.baselineArrival`)
    /// that frames are scheduled with: what a large delta frame needs to complete, from the
    /// frame-size-aware estimate (`VideoJitterEstimator`), within the jitter buffer's minimum and
    /// maximum; the minimum until the first frame was measured. A keyframe's extra transmission
    /// time is not in it: a paced keyframe completes late once. Thread rule: the owner thread.
    /// Cost: a few operations.
    public var targetDelay: Duration { .nanoseconds(Int64(targetDelayNs)) }

    /// `targetDelay` in nanoseconds.
    var targetDelayNs: UInt64 {
        let minNs = settings.jitterBuffer.minimumDelayMilliseconds * 1e6
        let maxNs = settings.jitterBuffer.maximumDelayMilliseconds * 1e6
        guard let ms = jitterEstimator.targetMilliseconds else { return UInt64(minNs) }
        return UInt64(min(maxNs, max(minNs, ms * 1e6)))
    }

    /// How long a hole is waited for before it is skipped.
    public var holeWait: Duration { .nanoseconds(Int64(holeWaitNs)) }

    /// `holeWait` in nanoseconds.
    var holeWaitNs: UInt64 {
        let target = targetDelayNs
        guard settings.nackEnabled else { return max(target, 5_000_000) }
        let maxNs = UInt64(settings.jitterBuffer.maximumDelayMilliseconds * 1e6)
        // Room for about three requests: the first and two retries a round trip apart.
        return min(maxNs, target + currentRoundTripNs * 3 + 20_000_000)
    }

    /// The round trip used for NACK timing: measured from NACK to retransmission when known,
    /// otherwise `roundTrip` (the configured assumption, or what the engine set).
    public var currentRoundTrip: Duration { .nanoseconds(Int64(currentRoundTripNs)) }

    /// `currentRoundTrip` in nanoseconds.
    var currentRoundTripNs: UInt64 {
        nack.roundTripEstimateNs > 0 ? UInt64(nack.roundTripEstimateNs) : roundTripNs
    }

    /// Plays out what is ready at `now`: decodes complete frames, skips holes waited for long
    /// enough. Returns the number of frames decoded.
    @discardableResult
    public func process(now: MonotonicTime) -> Int {
        let nowNs = now.nanoseconds
        var decoded = 0
        nextReleaseNs = 0
        while true {
            if let head = jitterBuffer.peekNext, !inFrame || head.timestamp != frameTimestamp {
                // The head starts a new frame: with scheduling, it waits for its playout time
                // (to the engine's timer granularity, 1 ms).
                var release = nowNs
                if settings.schedulesRendering, let due = playoutTimeNs(forTimestamp: head.timestamp) {
                    guard nowNs + 1_000_000 >= due else {
                        nextReleaseNs = due
                        break
                    }
                    release = due
                }
                frameReleaseNs = release
            }
            if let p = jitterBuffer.popNext() {
                nack.forget(below: p.extendedSequence + 1)
                decoded += play(p, nowNs: nowNs)
                continue
            }
            guard jitterBuffer.hasHole, let first = jitterBuffer.firstPresent() else { break }
            guard nowNs >= first.arrival.nanoseconds + holeWaitNs else { break }
            jitterBuffer.skipToNextPresent()
            if let n = jitterBuffer.next { nack.forget(below: n) }
        }
        updateFreeze(nowNs: nowNs, rendered: false)
        return decoded
    }

    private func play(_ p: JitterBufferPacket, nowNs: UInt64) -> Int {
        guard let packet = try? RTPPacket(parsing: p.bytes.bytes) else { return 0 }
        if !inFrame || p.timestamp != frameTimestamp {
            inFrame = true
            frameTimestamp = p.timestamp
            frameFirstArrivalNs = p.arrival.nanoseconds
            frameLastArrivalNs = p.arrival.nanoseconds
            frameBytes = 0
        } else if p.arrival.nanoseconds < frameFirstArrivalNs {
            frameFirstArrivalNs = p.arrival.nanoseconds
        }
        frameLastArrivalNs = max(frameLastArrivalNs, p.arrival.nanoseconds)
        frameBytes += p.bytes.count
        let result: RTPDepacketizeResult
        do {
            if let vp8 {
                result = try vp8.push(packet, in: p.bytes.bytes)
            } else {
                result = try vp9!.push(packet, in: p.bytes.bytes)
            }
        } catch {
            stats.packetsDiscarded += 1
            return 0
        }
        if result.incompleteFrames > 0 || result.lostPackets > 0 {
            stats.framesDropped += UInt64(result.incompleteFrames)
            if result.lossWasOnlyNonReference {
                // Only a frame nothing references was cut short: the decoder never sees it.
            } else if lastBaseTL0PicIdx != nil && !decoder.awaitingKeyframe {
                // A layered stream: whether the base layer is whole is told by the next frame's
                // TL0PICIDX; upper layers wait for a layer-sync frame.
                baseLayerCheckPending = true
                brokenUpperLayers = 0xFE
            } else {
                decoder.frameLost()
                requestKeyframe(nowNs: nowNs)
            }
        }
        guard let frame = result.frame else { return 0 }
        if frame.timestamp == frameTimestamp && result.lostPackets == 0 && result.incompleteFrames == 0 {
            measureFrame(frame)
        }
        stats.framesReceived += 1
        var data = frame.data
        if let sframe = settings.frameDecryption {
            // Every frame is checked as it arrives, before the loss rules below: a frame that
            // fails is counted even while the decoder waits for a keyframe. The depacketizer read
            // the keyframe flag from the clear prefix; the rest needs the sender's key.
            let format: SFrameMediaFormat = settings.codec == .vp8 ? .vp8 : .vp9
            guard
                let n = try? sframe.decryptFrame(
                    data, clearPrefix: format.clearPrefixLength(of: data), into: decrypted, recordingCounter: true, ssrc: ssrc)
            else {
                stats.framesDropped += 1
                stats.framesDecryptionFailed += 1
                decoder.frameLost()
                requestKeyframe(nowNs: nowNs)
                return 0
            }
            data = UnsafeRawBufferPointer(rebasing: decrypted[0..<n])
        }
        if frame.isKeyframe {
            baseLayerCheckPending = false
            brokenUpperLayers = 0
        } else if baseLayerCheckPending || brokenUpperLayers != 0 {
            guard decodableAfterLoss(frame, nowNs: nowNs) else {
                stats.framesDropped += 1
                return 0
            }
        }
        if decoder.awaitingKeyframe && !frame.isKeyframe {
            stats.framesDropped += 1
            requestKeyframe(nowNs: nowNs)
            return 0
        }
        let firstArrival = frameFirstArrivalNs
        var shown = false
        let decodeStartNs = takesTimeFromCaller ? nowNs : MonotonicTime.now.nanoseconds
        do {
            let r: Bool? = try decoder.decode(data) { view in
                let decodedNs = self.takesTimeFromCaller ? nowNs : MonotonicTime.now.nanoseconds
                self.updateDecodeTimeEstimate(decodedNs &- decodeStartNs)
                let renderNs =
                    self.settings.schedulesRendering
                    ? max(
                        decodedNs, nowNs,
                        self.frameReleaseNs + self.decodeTimeEstimateNs
                            + UInt64(self.settings.renderDelayMilliseconds * 1e6)) : decodedNs
                self.deliver(view, frame: frame, firstArrival: firstArrival, decodedNs: decodedNs, renderNs: renderNs)
                return true
            }
            shown = r ?? false
        } catch {
            stats.framesDropped += 1
            requestKeyframe(nowNs: nowNs)
            return 0
        }
        stats.framesDecoded += 1
        if (frame.temporalLayerID ?? 0) == 0, let tl0 = frame.tl0PicIdx { lastBaseTL0PicIdx = tl0 }
        if frame.isKeyframe {
            stats.keyFramesDecoded += 1
            keyframeRequested = false
        }
        stats.jitterBufferDelay += Double(nowNs &- firstArrival) / 1e9
        stats.jitterBufferEmittedCount += 1
        if shown { updateFreeze(nowNs: nowNs, rendered: true) }
        return 1
    }

    /// Gives the jitter estimate a complete frame: when its last packet arrived, its size, how late
    /// that was after its baseline arrival, and whether a packet of it was repaired.
    private func measureFrame(_ frame: RTPAssembledFrame) {
        var offset: Double? = nil
        if let baseline = jitterBuffer.baselineArrival(forTimestamp: frame.timestamp) {
            offset = Double(frameLastArrivalNs) - Double(baseline.nanoseconds)
        }
        var repaired = false
        for i in 0..<repairedTimestamps.count where repairedTimestamps[i] == frame.timestamp { repaired = true }
        jitterEstimator.frameCompleted(
            timestamp: frame.timestamp, completedNs: frameLastArrivalNs, bytes: frameBytes, offsetNs: offset,
            isKeyframe: frame.isKeyframe, repaired: repaired && repairedCount > 0)
    }

    /// After a loss in a temporally layered stream: whether `frame` decodes without the lost
    /// frames. A lost base-layer frame means nothing does until a keyframe (the decoder then
    /// awaits one and one is requested); a frame of a layer that may reference a lost frame is
    /// skipped until that layer's next sync frame, and a keyframe is requested so the full frame
    /// rate comes back sooner, while the base layer keeps playing.
    private func decodableAfterLoss(_ frame: RTPAssembledFrame, nowNs: UInt64) -> Bool {
        guard let tl0 = frame.tl0PicIdx, let last = lastBaseTL0PicIdx else {
            baseLayerCheckPending = false
            brokenUpperLayers = 0
            decoder.frameLost()
            requestKeyframe(nowNs: nowNs)
            return false
        }
        let layer = frame.temporalLayerID ?? 0
        if baseLayerCheckPending {
            // The base frame this one belongs to (upper layers) or follows (base layer).
            let intact = layer == 0 ? tl0 == last &+ 1 : tl0 == last
            guard intact else {
                baseLayerCheckPending = false
                brokenUpperLayers = 0
                decoder.frameLost()
                requestKeyframe(nowNs: nowNs)
                return false
            }
            baseLayerCheckPending = false
        }
        guard layer > 0, layer < 8, brokenUpperLayers & (1 << layer) != 0 else { return true }
        if frame.isLayerSync {
            brokenUpperLayers &= ~(1 << layer)
            return true
        }
        requestKeyframe(nowNs: nowNs)
        return false
    }

    /// The playout time of the frame with RTP `timestamp`, fixed when the frame is first asked
    /// about: the aim (baseline arrival plus target delay), kept within 10 % of the media time
    /// since the last frame scheduled from that frame's playout time. A jump of more than a second
    /// (a restarted sender, a long pause) takes the aim at once.
    private func playoutTimeNs(forTimestamp timestamp: UInt32) -> UInt64? {
        if let last = lastScheduled, last.timestamp == timestamp { return UInt64(max(0, last.playoutNs)) }
        guard let baseline = jitterBuffer.baselineArrival(forTimestamp: timestamp)?.nanoseconds else { return nil }
        let aim = Double(baseline) + Double(targetDelayNs) + synchronizationDelayNs
        var playout = aim
        if let last = lastScheduled {
            let mediaNs = Double(Int32(bitPattern: timestamp &- last.timestamp)) * 1e9 / 90_000
            let predicted = last.playoutNs + mediaNs
            if mediaNs >= 0 && abs(aim - predicted) < 1e9 {
                let step = mediaNs * 0.1  // 100 ms per second of media
                playout = max(predicted - step, min(predicted + step, aim))
            }
        }
        lastScheduled = (timestamp, playout)
        return UInt64(max(0, playout))
    }

    private func updateDecodeTimeEstimate(_ ns: UInt64) {
        if decodeTimeEstimateNs == 0 {
            decodeTimeEstimateNs = ns
        } else if ns > decodeTimeEstimateNs {
            decodeTimeEstimateNs += (ns - decodeTimeEstimateNs) / 4
        } else {
            decodeTimeEstimateNs -= (decodeTimeEstimateNs - ns) / 32
        }
    }

    private func deliver(
        _ view: I420View, frame: RTPAssembledFrame, firstArrival: UInt64, decodedNs: UInt64, renderNs: UInt64
    ) {
        lastRendered = (MonotonicTime(nanoseconds: renderNs), frame.timestamp)
        stats.frameWidth = view.width
        stats.frameHeight = view.height
        guard let renderer else { return }
        var packedView: UnsafeRawBufferPointer? = nil
        var stride = 0
        if let format = settings.renderFormat {
            stride = view.width * format.bytesPerPixel
            let need = stride * view.height
            if packed == nil || packed!.count != need {
                packed?.deallocate()
                packed = .allocate(byteCount: need, alignment: 64)
            }
            if (try? converter.convert(view, to: format, into: packed!, stride: stride)) != nil {
                packedView = UnsafeRawBufferPointer(packed!)
            }
        }
        renderer.render(
            DecodedVideoFrame(
                view: view, packed: packedView, packedStride: stride,
                rtpTimestamp: frame.timestamp, ssrc: ssrc, isKeyframe: frame.isKeyframe,
                firstPacketArrival: MonotonicTime(nanoseconds: firstArrival), decodedAt: MonotonicTime(nanoseconds: decodedNs),
                renderTime: MonotonicTime(nanoseconds: renderNs)))
    }

    /// W3C webrtc-stats freeze rule: an interval between rendered frames longer than
    /// max(3 x mean interval, mean interval + 150 ms) is a freeze.
    private func updateFreeze(nowNs: UInt64, rendered: Bool) {
        guard rendered else { return }
        defer { lastRenderNs = nowNs; hasOutput = true }
        guard hasOutput, nowNs > lastRenderNs else { return }
        let interval = Double(nowNs - lastRenderNs)
        if meanFrameIntervalNs > 0 {
            let limit = max(3 * meanFrameIntervalNs, meanFrameIntervalNs + 150_000_000)
            if interval > limit {
                stats.freezeCount += 1
                stats.totalFreezesDuration += interval / 1e9
                longestFreezeNs = max(longestFreezeNs, UInt64(interval))
                return  // a freeze does not move the mean
            }
            meanFrameIntervalNs = 0.9 * meanFrameIntervalNs + 0.1 * interval
        } else {
            meanFrameIntervalNs = interval
        }
    }

    /// The longest freeze so far.
    public var longestFreeze: Duration { .nanoseconds(Int64(longestFreezeNs)) }
    private var longestFreezeNs: UInt64 = 0

    /// The path from the sender changed (a failover): what was in flight on the old one is lost.
    /// Asks for a keyframe with the next feedback (`takeKeyframeRequest`) and does not ask for
    /// the lost packets again: NACK tracking restarts at the next packet, so the sender's pacer
    /// does not queue a burst of stale resends ahead of the keyframe. Thread rule: the
    /// pipeline's thread.
    public func pathChanged() {
        keyframeRequested = true
        nack.clear()
        jitterEstimator.reset()
    }

    private func requestKeyframe(nowNs: UInt64) {
        keyframeRequested = true
        _ = nowNs
    }

    /// True when a keyframe request (PLI) is due now; marks it sent. The engine calls this when
    /// building feedback.
    public func takeKeyframeRequest(now: MonotonicTime) -> Bool {
        let nowNs = now.nanoseconds
        guard keyframeRequested || nackGaveUp else { return false }
        let interval = UInt64(settings.keyframeRequestIntervalMilliseconds * 1e6)
        guard lastKeyframeRequestNs == 0 || nowNs >= lastKeyframeRequestNs + interval else { return false }
        lastKeyframeRequestNs = nowNs
        nackGaveUp = false
        stats.pliCount += 1
        return true
    }

    private var nackGaveUp = false

    /// Sequence numbers to NACK now (empty when NACK is off); valid until the next call.
    public func takeNackList(now: MonotonicTime) -> [UInt16] {
        nackScratch.removeAll(keepingCapacity: true)
        guard settings.nackEnabled else { return nackScratch }
        if nack.collect(now: now, roundTrip: currentRoundTrip, into: &nackScratch) > 0 { nackGaveUp = true }
        if !nackScratch.isEmpty { stats.nackCount += 1 }
        return nackScratch
    }

    /// Counts a FIR sent for this stream.
    public func noteFullIntraRequestSent() { stats.firCount += 1 }

    /// The stream's W3C statistics with packet counters and jitter filled in.
    public func statsSnapshot() -> InboundRTPStreamStats {
        var s = stats
        receiveStatistics.fill(&s)
        return s
    }
}
