import MediaBase
import MediaCodecs
import MediaTransport
import MediaWire
import Synchronization

/// How an `AudioReceiveStream` plays out. Thread rule: a value type. Cost: none.
public struct AudioReceiveSettings: Sendable {
    /// RTP payload type of the Opus stream.
    public var payloadType: UInt8
    /// Output channels (1 or 2).
    public var channels: Int = 1
    /// Output sample rate of `pullAudio`: 48 000 (Opus native) or any rate the resampler takes.
    public var outputSampleRate: Int = 48_000
    /// Jitter buffer memory and delay range (the prebuffer and the level kept).
    public var jitterBuffer = JitterBufferSettings(
        capacity: 256, maxPacketSize: 1500,
        minimumDelayMilliseconds: 40, maximumDelayMilliseconds: 300)
    /// Recover a lost packet from the in-band FEC of the packet after it (RFC 7587 §3.3, Opus LBRR).
    public var fecEnabled = true
    /// Packets that may wait between the network thread and the next pull.
    public var handoffCapacity = 256
    /// How the buffer level is brought back to the jitter buffer's target delay.
    public var playoutAdjustment = PlayoutAdjustment.timeStretch
    /// With `.timeStretch`: buffered audio beyond the target plus this much drops a whole packet
    /// (the hard cap that keeps the delay bounded when stretching cannot keep up).
    public var hardCapMilliseconds: Double = 200
    /// SFrame end-to-end decryption (RFC 9605) of every Opus packet before the decoder, with the
    /// keys of the sending side; nil (default) decodes packets as they arrive. A packet that fails
    /// to decrypt is discarded (`packetsDiscarded`, `framesDecryptionFailed`) and concealed.
    public var frameDecryption: SFrameReceiver? = nil
    /// The RFC 8285 ID under which the sender carries its RFC 6464 audio level: the stream's
    /// `audioLevel` statistic reports the latest one. nil (default): not read.
    public var audioLevelExtensionID: UInt8? = nil

    /// How an `AudioReceiveStream` keeps its buffer level at the target delay.
    /// Thread rule: a value type. Cost: none.
    public enum PlayoutAdjustment: Sendable, Equatable {
        /// Drop one whole packet when more than the target plus 60 ms is buffered; nothing when
        /// below (the policy before time stretching; kept for comparison).
        case dropPackets
        /// Remove (accelerate) or repeat (preemptive expand) one pitch period of decoded audio
        /// when the smoothed level is above or below the target band (`AudioTimeStretch`); drop a
        /// packet only beyond `hardCapMilliseconds` above the target.
        case timeStretch
    }

    /// Settings for an Opus stream on `payloadType`.
    public init(payloadType: UInt8) { self.payloadType = payloadType }
}

/// One incoming Opus stream played at a steady cadence like NetEq's `GetAudio`: the network
/// thread `insert`s packets, an audio thread `pullAudio`s 10 ms at a time.
///
/// Playout: the stream prebuffers up to the jitter buffer's adaptive target delay, then decodes one
/// packet whenever its 10 ms output runs dry. A packet missing at its turn is recovered from the
/// next packet's in-band FEC when that one is already here (`OpusDecoder.decodeFEC`), or concealed
/// (`concealLoss`, counted in `concealedSamples`/`concealmentEvents`). A timestamp jump without a
/// sequence gap is DTX (RFC 7587 §3.4): the silence is filled by the decoder's comfort noise and not
/// counted as concealment. Packets whose turn has passed are dropped.
///
/// Buffer level (`settings.playoutAdjustment`): with `.timeStretch` (the default) the level after
/// each decoded packet (decoded audio not yet played plus the buffered packets' span) is smoothed
/// and, when it is more than 20 ms above the adaptive target, one pitch period of the block just
/// decoded is removed (`AudioTimeStretch.accelerate`, counted in `removedSamplesForAcceleration`);
/// when it is more than a quarter of the target less 10 ms (at least 5 ms) below, one is repeated
/// (`preemptiveExpand`, counted in `insertedSamplesForDeceleration`). Blocks that are neither periodic nor quiet are left alone.
/// So a sender whose clock runs fast or slow, and a target that moves, are followed without
/// dropping audio; only when more than the target plus `hardCapMilliseconds` is buffered is a
/// whole packet dropped. With `.dropPackets` one packet is dropped whenever more than the target
/// plus 60 ms is buffered, and nothing compensates a slow sender.
///
/// Thread rule: `insert` from one network thread, `pullAudio` from one audio thread; `stats` from
/// any thread. Packets cross from one to the other through an SPSC ring of preallocated slots.
/// Cost: one packet copy to the ring and one into the jitter buffer; the decode; no allocation after
/// `init`.
/// Sendable: network-side state belongs to the network thread, playout state to the audio thread; packets cross
/// in preallocated slots through two SPSC rings, and `stats` is published through a Mutex.
public final class AudioReceiveStream: @unchecked Sendable {
    /// SSRC of the stream.
    public let ssrc: UInt32
    /// The SSRC whose packets the stream plays: `ssrc`, or the one a receive pipeline gave a
    /// stream made before its first packet (`adoptSSRC`). Frame decryption checks it against its
    /// sender's binding (`SFrameReceiver.bind(ssrc:keyIDs:)`).
    private let mediaSSRC: Atomic<UInt32>
    /// The settings.
    public let settings: AudioReceiveSettings
    /// Samples per channel one pull returns (10 ms at the output rate).
    public var samplesPerPull: Int { settings.outputSampleRate / 100 }

    final class Slot {
        let buffer: UnsafeMutableRawBufferPointer
        var length = 0
        var sequence: UInt16 = 0
        var timestamp: UInt32 = 0
        var arrival = MonotonicTime.zero
        init(size: Int) { buffer = .allocate(byteCount: size, alignment: 16) }
        deinit { buffer.deallocate() }
    }

    // Network side.
    private let filled: SPSCRing<Slot>
    private let free: SPSCRing<Slot>
    /// RFC 3550 reception statistics (network thread).
    public var receiveStatistics: RTPReceptionStatistics
    private var networkDiscarded = 0
    /// The sender's RFC 6464 level (-dBov) in its latest packet; -1: none seen. Network thread.
    private var lastSenderLevel = -1

    // Audio side.
    private let jitterBuffer: RTPJitterBuffer
    private let decoder: OpusDecoder
    private let resampler: Resampler?
    private let pcm: UnsafeMutableBufferPointer<Int16>  // decoded 48 kHz FIFO
    private var pcmCount = 0
    private let resampled: UnsafeMutableBufferPointer<Int16>  // output-rate FIFO
    private var resampledCount = 0
    private let scratch: UnsafeMutableBufferPointer<Int16>
    private var playing = false
    private var expectedTimestamp: UInt32 = 0
    private var lastWasConcealed = false
    private var underrunSamples = 0
    private var audioStats = InboundRTPStreamStats()
    /// The decrypted packet (with `frameDecryption`), allocated once.
    private let decrypted: UnsafeMutableRawBufferPointer
    private let stretch: AudioTimeStretch
    private var filteredLevel: Double = -1
    private var lastPlayDecoded = false
    private let published = Mutex(InboundRTPStreamStats())
    /// Where playout is: the RTP timestamp (48 kHz) of the next sample to play and when it plays,
    /// published after every pull for lip sync (`AudioVideoSync`). Nil until playout started.
    private let position = Mutex<(playTime: MonotonicTime, rtpTimestamp: UInt32)?>(nil)
    /// Extra delay for lip sync, added to the jitter buffer's target (set by the receive engine).
    private let synchronizationDelayNs = Atomic<Int64>(0)
    /// Samples recovered from FEC (audio thread).
    public private(set) var fecRecoveredSamples = 0
    /// The jitter buffer's counters (late, duplicate, restarts...). Thread rule: the audio thread,
    /// like `pullAudio`, which moves packets into the buffer. Cost: a copy of a few integers.
    public var jitterBufferCounters: RTPJitterBuffer.Counters { jitterBuffer.counters }

    /// Creates the decoder, buffers and (for an output rate other than 48 kHz) the resampler.
    public init(ssrc: UInt32, settings: AudioReceiveSettings) throws(OpusError) {
        precondition(settings.channels == 1 || settings.channels == 2)
        self.ssrc = ssrc
        mediaSSRC = Atomic(ssrc)
        self.settings = settings
        filled = SPSCRing(capacity: settings.handoffCapacity)
        free = SPSCRing(capacity: settings.handoffCapacity)
        for _ in 0..<(settings.handoffCapacity - 1) {
            _ = free.tryPush(Slot(size: settings.jitterBuffer.maxPacketSize))
        }
        receiveStatistics = RTPReceptionStatistics(ssrc: ssrc, clockRate: 48_000)
        jitterBuffer = RTPJitterBuffer(settings: settings.jitterBuffer, clockRate: 48_000)
        decoder = try OpusDecoder(sampleRate: .hz48000, channels: settings.channels)
        if settings.outputSampleRate != 48_000 {
            do {
                resampler = try Resampler(
                    channels: settings.channels, inputRate: 48_000,
                    outputRate: settings.outputSampleRate, quality: .voip)
            } catch {
                throw OpusError(.badArgument, "resampler 48000 -> \(settings.outputSampleRate) Hz: \(error)")
            }
        } else {
            resampler = nil
        }
        let ch = settings.channels
        pcm = .allocate(capacity: 5760 * 2 * ch)
        pcm.initialize(repeating: 0)
        resampled = .allocate(capacity: (settings.outputSampleRate / 100) * 4 * ch + 64)
        resampled.initialize(repeating: 0)
        scratch = .allocate(capacity: 5760 * ch)
        scratch.initialize(repeating: 0)
        stretch = AudioTimeStretch(sampleRate: 48_000, channels: ch)
        audioStats.ssrc = ssrc
        audioStats.kind = "audio"
        audioStats.codec = "opus"
        decrypted = .allocate(
            byteCount: settings.frameDecryption == nil ? 0 : settings.jitterBuffer.maxPacketSize, alignment: 16)
    }

    deinit {
        while filled.tryPop() != nil {}
        pcm.deallocate(); resampled.deallocate(); scratch.deallocate()
        decrypted.deallocate()
    }

    // MARK: Network thread

    /// Takes one unprotected RTP packet of this stream, parsed as `packet` from `bytes`, arrived at
    /// `arrival`. Network thread only; never blocks. Cost: one copy of the packet.
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
        guard bytes.count <= settings.jitterBuffer.maxPacketSize, let slot = free.tryPop() else {
            networkDiscarded += 1
            return
        }
        if let id = settings.audioLevelExtensionID, let level = h.extensions.audioLevel(id: id) {
            lastSenderLevel = Int(level.level & 0x7F)
        }
        slot.buffer.copyMemory(from: bytes)
        slot.length = bytes.count
        slot.sequence = h.sequenceNumber
        slot.timestamp = h.timestamp
        slot.arrival = arrival
        _ = filled.tryPush(slot)
    }

    // MARK: Audio thread

    /// Writes the next 10 ms (`samplesPerPull` x channels interleaved samples at the output rate)
    /// into `output` and returns the samples per channel written (always `samplesPerPull`): decoded
    /// audio, FEC-recovered or concealed audio, or silence before playout starts. `now` is when the
    /// block starts to play. Audio thread only.
    @discardableResult
    package func pullAudio(into output: UnsafeMutableBufferPointer<Int16>, now: MonotonicTime = .now) -> Int {
        let nowNs = now.nanoseconds
        let ch = settings.channels
        let need = samplesPerPull
        precondition(output.count >= need * ch, "pullAudio needs room for \(need) x \(ch) samples")
        drainHandoff()
        if let resampler {
            while resampledCount < need {
                produce48k(frames: 480, nowNs: nowNs)
                let input = UnsafeBufferPointer(rebasing: pcm[0..<(480 * ch)])
                let room = UnsafeMutableBufferPointer(rebasing: resampled[(resampledCount * ch)...])
                let r = resampler.process(input, into: room)
                consume48k(frames: r.consumed)
                resampledCount += r.produced
                if r.produced == 0 && r.consumed == 0 { break }
            }
            let n = min(need, resampledCount)
            output.baseAddress!.update(from: resampled.baseAddress!, count: n * ch)
            if n < need { output.baseAddress!.advanced(by: n * ch).update(repeating: 0, count: (need - n) * ch) }
            let rest = resampledCount - n
            if rest > 0 { resampled.baseAddress!.update(from: resampled.baseAddress!.advanced(by: n * ch), count: rest * ch) }
            resampledCount = rest
        } else {
            produce48k(frames: need, nowNs: nowNs)
            output.baseAddress!.update(from: pcm.baseAddress!, count: need * ch)
            consume48k(frames: need)
        }
        audioStats.totalSamplesReceived += UInt64(need)
        published.withLock { $0 = audioStats }
        // The block just pulled plays from now; the sample after it 10 ms later.
        let queued = pcmCount + resampledCount * 48_000 / settings.outputSampleRate
        let next: (playTime: MonotonicTime, rtpTimestamp: UInt32)? =
            playing ? (now + .milliseconds(10), expectedTimestamp &- UInt32(truncatingIfNeeded: queued)) : nil
        position.withLock { $0 = next }
        return need
    }

    /// The RTP timestamp of the next sample to play and the time it plays at, as of the last pull
    /// (nil before playout started). Thread rule: any thread. Cost: one lock.
    public var playoutPosition: (playTime: MonotonicTime, rtpTimestamp: UInt32)? { position.withLock { $0 } }

    /// Sets the extra playout delay lip sync asks of this stream (added to the adaptive target;
    /// the buffer grows to it by time-stretching). Thread rule: any thread. Cost: one atomic store.
    package func setSynchronizationDelay(nanoseconds: Int64) {
        synchronizationDelayNs.store(max(0, nanoseconds), ordering: .relaxed)
    }

    /// The jitter buffer's adaptive target plus the lip-sync delay, in nanoseconds.
    private var playoutTargetNs: UInt64 {
        jitterBuffer.targetDelayNs + UInt64(synchronizationDelayNs.load(ordering: .relaxed))
    }

    private func drainHandoff() {
        while let slot = filled.tryPop() {
            let r = jitterBuffer.insert(
                UnsafeRawBufferPointer(rebasing: slot.buffer[0..<slot.length]),
                sequenceNumber: slot.sequence, timestamp: slot.timestamp, arrival: slot.arrival)
            if r == .late || r == .duplicate || r == .tooLarge { audioStats.packetsDiscarded += 1 }
            // The buffer restarted (a jump, or a sender that restarted behind): its timestamps
            // start anywhere, so playout prebuffers again and takes its timing from the new run
            // instead of filling the distance to the new timestamps with comfort noise.
            if r == .reset { playing = false }
            _ = free.tryPush(slot)
        }
    }

    private func consume48k(frames: Int) {
        let ch = settings.channels
        let rest = pcmCount - frames
        if rest > 0 { pcm.baseAddress!.update(from: pcm.baseAddress!.advanced(by: frames * ch), count: rest * ch) }
        pcmCount = max(0, rest)
    }

    /// Fills the 48 kHz FIFO to at least `frames` frames.
    private func produce48k(frames: Int, nowNs: UInt64) {
        let ch = settings.channels
        while pcmCount < frames {
            let room = UnsafeMutableBufferPointer(rebasing: pcm[(pcmCount * ch)...])
            if !playing {
                // Prebuffer to the target delay before the first packet plays.
                let target = playoutTargetNs * 48_000 / 1_000_000_000
                if jitterBuffer.count > 0 && UInt64(jitterBuffer.bufferedTimestampSpan) + 960 >= target {
                    playing = true
                    filteredLevel = -1  // a new run: the level is measured afresh
                    if jitterBuffer.peekNext == nil { jitterBuffer.skipToNextPresent() }
                    expectedTimestamp = jitterBuffer.peekNext?.timestamp ?? 0
                } else {
                    room.baseAddress!.update(repeating: 0, count: (frames - pcmCount) * ch)
                    pcmCount = frames
                    return
                }
            }
            // Keep the delay bounded: drop a packet when far more than the target is buffered.
            let span = UInt64(jitterBuffer.bufferedTimestampSpan) * 1_000_000_000 / 48_000
            let cap: UInt64 =
                settings.playoutAdjustment == .dropPackets
                ? 60_000_000 : UInt64(max(0, settings.hardCapMilliseconds) * 1e6)
            if span > playoutTargetNs + cap && jitterBuffer.count > 2 {
                if let p = jitterBuffer.popNext() {
                    audioStats.packetsDiscarded += 1
                    expectedTimestamp = p.timestamp &+ UInt32((try? OpusPayload.sampleCount(packet: payloadOf(p).bytes)) ?? 960)
                    continue
                }
            }
            lastPlayDecoded = false
            let n = playOne(into: room, nowNs: nowNs)
            pcmCount += n
            if n == 0 { break }
            if lastPlayDecoded && settings.playoutAdjustment == .timeStretch { adjustLevel() }
        }
    }

    /// Samples (per channel, 48 kHz) ahead of the playout point: decoded and not yet played, plus
    /// the buffered packets (from the next to the end of the highest).
    private var levelSamples: Int {
        let held =
            jitterBuffer.count > 0
            ? Int(jitterBuffer.bufferedTimestampSpan) + max(480, decoder.lastPacketDuration) : 0
        return held + pcmCount
    }

    /// After a decoded packet: smooths the buffer level and stretches the decoded block towards the
    /// target (see the type's documentation).
    private func adjustLevel() {
        let level = Double(levelSamples)
        // NetEq-like smoothing: about 32 packets' memory, so one late or early packet does not
        // trigger a stretch, a sustained offset (drift, a new target) does.
        filteredLevel = filteredLevel < 0 ? level : filteredLevel + (level - filteredLevel) / 32
        let target = Double(playoutTargetNs) * 48_000 / 1e9
        let block = UnsafeMutableBufferPointer(rebasing: pcm[0...])
        // Above by 20 ms: accelerate. Below: expand beyond a quarter of the target less 10 ms (at
        // least 5 ms, which a low target keeps, so a live stream with little jitter never runs
        // dry). Under large jitter the level swings around a high target, and a 5 ms band below
        // it expanded and then accelerated speech over and over (SimulatedSpeechPlayoutTests,
        // ±60 ms jitter and no loss: wideband PESQ 2.45 with a 5 ms band, 2.93 with this one).
        if filteredLevel > target + 960 {
            let removed = stretch.accelerate(block, frames: pcmCount)
            if removed > 0 {
                pcmCount -= removed
                filteredLevel -= Double(removed)
                audioStats.removedSamplesForAcceleration += UInt64(removed)
            }
        } else if filteredLevel < target - max(240, target / 4 - 480) && pcmCount + stretch.maxLag <= 5760 * 2 {
            let inserted = stretch.preemptiveExpand(block, frames: pcmCount)
            if inserted > 0 {
                pcmCount += inserted
                filteredLevel += Double(inserted)
                audioStats.insertedSamplesForDeceleration += UInt64(inserted)
            }
        }
    }

    /// Milliseconds of audio ahead of the playout point: decoded and not yet played plus the
    /// buffered packets. Thread rule: the audio thread (between pulls). Cost: O(1) unless the next
    /// packet is missing (then a walk to the first held one).
    public var bufferLevelMilliseconds: Double { Double(levelSamples) / 48 }

    /// The playout target delay in milliseconds: the jitter buffer's adaptive target plus any
    /// lip-sync delay. Thread rule: the audio thread. Cost: O(1).
    public var targetDelayMilliseconds: Double { Double(playoutTargetNs) / 1e6 }

    private func payloadOf(_ p: JitterBufferPacket) -> UnsafeRawBufferPointer {
        (try? RTPPacket(parsing: p.bytes.bytes)).map { UnsafeRawBufferPointer(rebasing: p.bytes[$0.payloadRange]) }
            ?? UnsafeRawBufferPointer(start: nil, count: 0)
    }

    /// Names the SSRC this stream plays, for a stream made before its first packet arrived.
    /// Thread rule: any thread (the receive pipeline's, before the packets of `ssrc` go in). Cost:
    /// one atomic store.
    package func adoptSSRC(_ ssrc: UInt32) { mediaSSRC.store(ssrc, ordering: .relaxed) }

    /// The Opus packet of `p`: as received, or decrypted into `decrypted` with `frameDecryption`
    /// (nil when that fails). `readAhead`: the packet is read for the FEC of the one before it and
    /// decoded again at its own turn, so its counter is not recorded yet.
    private func opusPacketOf(_ p: JitterBufferPacket, readAhead: Bool = false) -> UnsafeRawBufferPointer? {
        let payload = payloadOf(p)
        guard let sframe = settings.frameDecryption else { return payload }
        guard
            let n = try? sframe.decryptFrame(
                payload, clearPrefix: SFrameMediaFormat.opus.clearPrefixLength(of: payload), into: decrypted,
                recordingCounter: !readAhead, ssrc: mediaSSRC.load(ordering: .relaxed))
        else { return nil }
        return UnsafeRawBufferPointer(rebasing: decrypted[0..<n])
    }

    /// Produces the audio of one packet's turn: decoded, FEC-recovered, concealed or comfort noise.
    private func playOne(into room: UnsafeMutableBufferPointer<Int16>, nowNs: UInt64) -> Int {
        let last = max(480, min(5760, decoder.lastPacketDuration == 0 ? 960 : decoder.lastPacketDuration))
        if let p = jitterBuffer.peekNext {
            let gap = Int32(bitPattern: p.timestamp &- expectedTimestamp)
            if gap >= 480 {
                // A timestamp jump in sequence: DTX silence (RFC 7587 §3.4) -- comfort noise.
                let n = min(Int(gap) / 480 * 480, 5760)
                var out = room.mutableSpan
                let done = (try? decoder.concealLoss(into: &out, frameSize: min(n, last))) ?? 0
                expectedTimestamp = expectedTimestamp &+ UInt32(done)
                if done > 0 { return done }
            }
            _ = jitterBuffer.popNext()
            guard let payload = opusPacketOf(p) else {
                audioStats.packetsDiscarded += 1
                audioStats.framesDecryptionFailed += 1
                return conceal(room, last)
            }
            let n: Int
            do {
                var out = room.mutableSpan
                n = try decoder.decode(payload.bytes, into: &out)
            } catch {
                audioStats.packetsDiscarded += 1
                return conceal(room, last)
            }
            expectedTimestamp = p.timestamp &+ UInt32(n)
            lastWasConcealed = false
            lastPlayDecoded = true
            underrunSamples = 0
            audioStats.jitterBufferDelay += Double(n) * Double(nowNs &- p.arrival.nanoseconds) / 1e9
            audioStats.jitterBufferEmittedCount += UInt64(n)
            return n
        }
        // The next packet is missing.
        if jitterBuffer.count > 0, let next = jitterBuffer.next {
            // Try in-band FEC from the packet right after the missing one.
            if settings.fecEnabled, let following = jitterBuffer.packet(at: next + 1) {
                var out = room.mutableSpan
                if let payload = opusPacketOf(following, readAhead: true), !payload.isEmpty,
                    OpusPacket.isDTXSilence(byteCount: payload.count) == false,
                    let n = try? decoder.decodeFEC(nextPacket: payload.bytes, into: &out, frameSize: last)
                {
                    jitterBuffer.skipOne()
                    expectedTimestamp = expectedTimestamp &+ UInt32(n)
                    fecRecoveredSamples += n
                    lastWasConcealed = false
                    return n
                }
            }
            jitterBuffer.skipOne()
            let n = conceal(room, last)
            expectedTimestamp = expectedTimestamp &+ UInt32(n)
            return n
        }
        // Underrun: nothing buffered. After `mutedAfterNs` of it the stream is treated as paused:
        // silence, not concealment (NetEq's muted state).
        underrunSamples += last
        if underrunSamples > 48_000 / 5 {
            room.baseAddress!.update(repeating: 0, count: last * settings.channels)
            lastWasConcealed = false
            playing = false  // prebuffer again when packets come back
            return last
        }
        return conceal(room, last)
    }

    private func conceal(_ room: UnsafeMutableBufferPointer<Int16>, _ frameSize: Int) -> Int {
        var out = room.mutableSpan
        let n = (try? decoder.concealLoss(into: &out, frameSize: frameSize)) ?? 0
        guard n > 0 else {
            room.baseAddress!.update(repeating: 0, count: frameSize * settings.channels)
            return frameSize
        }
        audioStats.concealedSamples += UInt64(n)
        if !lastWasConcealed { audioStats.concealmentEvents += 1 }
        lastWasConcealed = true
        return n
    }

    /// The W3C inbound-rtp statistics of the stream (any thread): playout counters as of the last
    /// pull, packet counters as of the last `statsSnapshot(receive:)` from the engine.
    public var stats: InboundRTPStreamStats { published.withLock { $0 } }

    /// Merges the network-side counters (engine thread) into a snapshot.
    public func statsSnapshot() -> InboundRTPStreamStats {
        var s = stats
        receiveStatistics.fill(&s)
        s.packetsDiscarded += UInt64(networkDiscarded)
        // RFC 6464: the level is -dBov, 0 (loudest) to 127.
        if lastSenderLevel >= 0 {
            // 10^(-level/20): one factor of 10^(-1/20) per dB, at most 127 (a few times a second).
            var linear = 1.0
            for _ in 0..<lastSenderLevel { linear *= 0.891_250_938_133_745_6 }
            s.audioLevel = linear
        }
        return s
    }
}

extension AudioReceiveStream {
    /// Writes the next 10 ms (`samplesPerPull` x channels interleaved samples at the output rate)
    /// to the front of `output` and returns the samples per channel written: decoded audio,
    /// FEC-recovered or concealed audio, or silence before playout starts. `now` is when the
    /// block starts to play. Audio thread only.
    @discardableResult
    public func pullAudio(into output: inout MutableSpan<Int16>, now: MonotonicTime = .now) -> Int {
        output.withUnsafeMutableBufferPointer { pullAudio(into: $0, now: now) }
    }
}
