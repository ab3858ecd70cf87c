import MediaBase
import MediaTransport
import MediaWire
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The packet end of a send stream, shared by video and audio: writes RTP packets (RFC 3550 §5.1)
/// of one SSRC into one preallocated buffer, stamps the RFC 8285 abs-send-time element, protects
/// each packet in place with SRTP (RFC 3711 §3.3, RFC 7714 §5), keeps it in the `SendHistory`,
/// hands it to the `PacketSink`, and answers NACKs from the history: by resending the protected
/// packet as it was, or, with `rtx`, as an RFC 4588 retransmission on its own SSRC and payload type
/// (the history then keeps the unprotected packet, and each retransmission is protected anew on
/// the RTX SSRC, whose sequence numbers and SRTP index are its own).
///
/// With a `pacer`, `send` only writes the unprotected packets into the pacer's queue; stamping
/// abs-send-time, protection, the history and the socket move to the pacer's thread
/// (`RTPPacerEgress`), which also answers the NACKs.
///
/// Thread rule: `send` runs on the stream's worker thread (the owner of the sequencer and
/// buffer); the egress (protect, history, sink, NACK answers) on the worker too, or on the
/// pacer's thread while a pacer runs; `enqueueNacks` is any thread (an MPSC ring).
/// Cost: per packet one header marshal, one payload copy, one SRTP protect, one history copy,
/// one sink write; no allocation of ours (Debian's NSS-backed libsrtp itself mallocs inside
/// `srtp_protect`: 5 times per GCM packet, 14 per AES-CM packet, measured by the allocation tests).
/// Sendable: `header`, the sequencers and `buffer` are used only by the worker (the egress reads the
/// fixed `headerSize`); `srtp`, `history` and the RTX
/// state are used only by the egress thread; NACKs arrive through an MPSC ring; the rest are `let`s.
package final class RTPSendCore: @unchecked Sendable {
    let ssrc: UInt32
    let mtu: Int
    /// Set at creation, or taken from `late` by the egress thread (and owned by it from then on).
    private(set) var srtp: SRTPContext?
    /// Keys and payload type that arrive after the stream started (a WebRTC connection).
    let late: LateSendProtection?
    /// The SRTP overhead packet sizes leave room for (known before a late context arrives).
    let reservedOverhead: Int
    let sink: PacketSink
    /// `sink` when it can resend to one receiver (looked up once).
    private let routed: RoutedPacketSink?
    let history: SendHistory
    let counters: SendCounters
    let maxRetransmissions: Int
    let absSendTimeID: UInt8?
    /// RFC 4588 retransmission payload type and SSRC; nil: NACKs resend the original packet.
    /// With `late`, the payload type is a placeholder: the peer's comes with the keys
    /// (`LateSendProtection.retransmissionPayloadType`), and without one the stream neither
    /// retransmits nor pads.
    let rtx: (payloadType: UInt8, ssrc: UInt32)?
    /// Whether retransmissions go out as RTX (and the history keeps unprotected packets): `rtx`
    /// set and, for a late stream, an RTX payload type accepted when the keys were adopted.
    /// Egress thread.
    private var rtxInUse: Bool
    /// Retransmissions of a paced stream may use at most the target bitrate (libwebrtc's
    /// retransmission rate limiter): bytes they may still send, refilled at the target rate up
    /// to `retransmissionWindowSeconds` of it, and when it was last refilled. Egress thread.
    private var retransmissionAllowance = 0.0
    private var retransmissionAllowanceNs: UInt64 = 0
    /// The window the retransmission allowance may save up (libwebrtc: 500 ms).
    static let retransmissionWindowSeconds = 0.5

    /// The header of the next packet; `sequenceNumber`, `timestamp`, `marker` change per packet.
    var header: RTPHeader
    /// `header.marshalSize`, fixed at init (the extensions are reserved there); the NACK path on
    /// the pacer's thread reads this instead of `header`, which the worker changes per packet.
    let headerSize: Int
    private var sequencer: RTPSequencer
    private let buffer: UnsafeMutableRawBufferPointer
    /// Queued NACKed sequence numbers, each packed with the route that asked (`route + 1` in the
    /// high bits; 0: no route, resend through `write`).
    private let nacks: MPSCRing<UInt64>
    /// RTX: the retransmission's sequence numbers and the buffer it is built in.
    private var rtxSequencer: RTPSequencer
    private let rtxBuffer: UnsafeMutableRawBufferPointer
    /// The header of a padding packet on the RTX SSRC (padding bit set, the media header's
    /// elements), marshalled once; empty without RTX.
    private let paddingTemplate: [UInt8]
    /// The RTP timestamp of the last packet that left (padding packets carry it), and its
    /// sequence number (probes resend it as padding). Egress thread.
    private var lastEgressTimestamp: UInt32 = 0
    private var lastEgressSequence: UInt16?
    /// Pacing: `send` queues here and the pacer's thread calls the egress.
    let pacer: RTPPacer?
    /// The clock resends read (the stream's). Set before the stream starts.
    var clock = EngineClock.monotonic
    /// Transport-wide sequence numbers: the element's ID and the transport's counter.
    let transportSequence: (id: UInt8, numbers: TransportSequenceNumbers?)?
    /// With `late`: the IDs the header extension elements are reserved under (0: none), which
    /// the egress replaces with the peer's negotiated IDs (`LateSendProtection.extensionIDs`)
    /// just before protection, or blanks. Found by ID in each packet: setting an element moves
    /// it to the end, so the order within the block changes from packet to packet.
    private let reservedIDs: (audioLevel: UInt8, absSendTime: UInt8, transportSequence: UInt8, mid: UInt8)
    /// Whether the egress maps extension IDs (a late stream with reserved elements).
    private let mapsExtensions: Bool

    init(
        ssrc: UInt32, payloadType: UInt8, mtu: Int, srtp material: SRTPKeyMaterial?, sink: PacketSink,
        historyCapacity: Int, maxRetransmissions: Int, absSendTimeID: UInt8?, audioLevelID: UInt8?,
        initialSequenceNumber: UInt16?, rtx: (payloadType: UInt8, ssrc: UInt32)? = nil, pacer: RTPPacer? = nil,
        transportSequence: (id: UInt8, numbers: TransportSequenceNumbers?)? = nil,
        late: LateSendProtection? = nil,
        counters: SendCounters
    ) throws(SendPipelineError) {
        precondition(mtu >= 200 && mtu <= 9000, "MTU \(mtu) out of 200...9000")
        precondition(payloadType < 128, "RTP payload type \(payloadType) is not 7 bits")
        self.ssrc = ssrc
        self.mtu = mtu
        self.sink = sink
        routed = sink as? RoutedPacketSink
        self.counters = counters
        self.maxRetransmissions = maxRetransmissions
        self.absSendTimeID = absSendTimeID
        if let rtx {
            precondition(
                rtx.payloadType < 128 && rtx.payloadType != payloadType,
                "RTX payload type \(rtx.payloadType) must be 7 bits and differ from \(payloadType)")
            precondition(rtx.ssrc != ssrc, "the RTX SSRC must differ from the media SSRC \(ssrc)")
        }
        self.rtx = rtx
        rtxInUse = rtx != nil && (material != nil || late == nil)
        if let material {
            do { srtp = try SRTPContext(material: material, direction: .outbound) } catch {
                throw SendPipelineError(.srtp, "SRTP context for SSRC \(ssrc) (\(material.suite)): \(error)")
            }
        } else {
            srtp = nil
        }
        self.late = material == nil ? late : nil
        // A late context is AES-GCM (16 bytes) or AES-CM-80 (10): room for the larger.
        reservedOverhead = srtp?.rtpOverhead ?? (self.late == nil ? 0 : 16)
        history = SendHistory(capacity: historyCapacity, maxPacketSize: mtu + 64)
        sequencer = RTPSequencer(initial: initialSequenceNumber ?? RandomBytes.initialSequenceNumber())
        header = RTPHeader(payloadType: payloadType, ssrc: ssrc)
        // Reserve the elements now so the header size is known and stays fixed per packet.
        if let id = audioLevelID { header.extensions.setAudioLevel(RTPAudioLevel(voiceActivity: false, level: 127), id: id) }
        if let id = absSendTimeID { header.extensions.setAbsSendTime(RTPAbsSendTime(rawValue: 0), id: id) }
        if let t = transportSequence { header.extensions.setTransportSequenceNumber(0, id: t.id) }
        let midID = self.late?.midReservedID
        if let midID { header.extensions.set(id: midID, [0, 0, 0, 0]) }
        headerSize = header.marshalSize
        self.transportSequence = transportSequence
        reservedIDs = (audioLevelID ?? 0, absSendTimeID ?? 0, transportSequence?.id ?? 0, midID ?? 0)
        mapsExtensions =
            self.late != nil && (audioLevelID != nil || absSendTimeID != nil || transportSequence != nil || midID != nil)
        buffer = .allocate(byteCount: mtu + 128, alignment: 16)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        nacks = MPSCRing<UInt64>(capacity: 1024)
        rtxSequencer = RTPSequencer(initial: RandomBytes.initialSequenceNumber())
        rtxBuffer = .allocate(byteCount: rtx == nil ? 0 : mtu + 128, alignment: 16)
        if let rtx {
            var h = header
            h.padding = true
            h.payloadType = rtx.payloadType
            h.ssrc = rtx.ssrc
            var template: [UInt8] = []
            template.append(capacity: headerSize) { h.marshal(into: &$0) }
            paddingTemplate = template
        } else {
            paddingTemplate = []
        }
        self.pacer = pacer
        pacer?.target = self
    }

    /// A core without pacer, RTX or header extensions, for measuring the egress on its own (the
    /// WebRTC path against the SDES path in revue-bench). Thread rule and cost as above.
    package convenience init(
        ssrc: UInt32, payloadType: UInt8, mtu: Int, srtp material: SRTPKeyMaterial?, late: LateSendProtection?,
        sink: PacketSink, historyCapacity: Int
    ) throws(SendPipelineError) {
        try self.init(
            ssrc: ssrc, payloadType: payloadType, mtu: mtu, srtp: material, sink: sink, historyCapacity: historyCapacity,
            maxRetransmissions: 3, absSendTimeID: nil, audioLevelID: nil, initialSequenceNumber: 0, late: late,
            counters: SendCounters())
    }

    deinit { buffer.deallocate(); rtxBuffer.deallocate() }

    /// The largest RTP payload (descriptor included) that keeps a protected packet within `mtu`
    /// (and, with RTX, its retransmission too: the OSN adds 2 bytes).
    var maxPayloadSize: Int {
        mtu - headerSize - reservedOverhead - (rtx == nil ? 0 : RTXPacket.overhead)
    }

    /// The sequence number the next packet gets.
    var nextSequenceNumber: UInt16 { sequencer.nextSequenceNumber }

    /// Stamps abs-send-time (once per frame: its packets leave together).
    @inline(__always) func stampSendTime(_ now: MonotonicTime) {
        if let id = absSendTimeID { header.extensions.setAbsSendTime(RTPAbsSendTime(nanoseconds: now.nanoseconds), id: id) }
    }

    /// Sends every packet of `payloads`, cut from `frame`, with RTP timestamp `timestamp`, then
    /// flushes the sink.
    /// `capturedAt` (`.zero` when unknown) is when the media was captured: sender
    /// reports map RTP time from it. `now` stamps abs-send-time, the history
    /// and the sender-report info: a
    /// caller that has just read the clock (the video worker, right after the encode) passes it
    /// rather than paying another read per frame. Returns (packets, payload bytes) sent. Worker
    /// thread only. `keyframe`: with a pacer, the frame's packets are paced at one interval's
    /// budget at a time; a delta frame's may leave at once on saved budget (`RTPPacer.write`).
    @discardableResult
    func send<P: RTPFramePayloads>(
        _ payloads: P, of frame: UnsafeRawBufferPointer, timestamp: UInt32, captureNs: Int64,
        capturedAt: MonotonicTime = .zero, now: MonotonicTime, keyframe: Bool = false
    ) -> (Int, Int) {
        stampSendTime(now)
        header.timestamp = timestamp
        var packets = 0, octets = 0
        for i in 0..<payloads.count {
            header.sequenceNumber = sequencer.next()
            let length = buffer.appending { payloads.writePacket(at: i, header: &header, of: frame.bytes, into: &$0) }
            if let pacer {
                pacer.write(UnsafeRawBufferPointer(rebasing: buffer[0..<length]), burstable: !keyframe)
            } else if store(buffer, length: length, now: now) == 0 {
                continue
            }
            packets += 1
            octets += length - headerSize
        }
        if let pacer { pacer.flush() } else { sink.flush() }
        counters.add(counters.packetsSent, UInt64(packets))
        counters.add(counters.bytesSent, UInt64(octets))
        counters.add(counters.headerBytesSent, UInt64(packets * headerSize))
        counters.publishSent(
            packets: UInt64(packets), payloadOctets: UInt64(octets), rtpTimestamp: timestamp,
            captureNs: captureNs, capturedAtNs: capturedAt.nanoseconds, sendNs: now.nanoseconds)
        return (packets, octets)
    }

    /// Protects the unprotected packet in `packet` in place, keeps it in the history (RTX: the
    /// unprotected bytes, before protection) and writes it to the sink. Returns the wire length,
    /// 0 when SRTP refused it (counted). Egress thread.
    private func store(_ packet: UnsafeMutableRawBufferPointer, length: Int, now: MonotonicTime, probeCluster: Int = 0) -> Int {
        if let late { adoptLate(late, packet) }
        let raw = UnsafeRawBufferPointer(packet)
        let seq = raw.u16(2)
        if rtxInUse {  // only padding (RTX) reads them
            lastEgressTimestamp = raw.u32(4)
            lastEgressSequence = seq
        }
        stampTransportSequence(packet, length: length, now: now, probeCluster: probeCluster)
        // RTX rebuilds retransmissions from the unprotected packet.
        if rtxInUse {
            history.store(seq: seq, packet: UnsafeRawBufferPointer(rebasing: packet[0..<length]), now: now)
        }
        if let late { mapNegotiatedExtensions(late, packet, length: length) }
        var wire = length
        if let srtp {
            var span = packet.mutableBytes
            do { wire = try srtp.protect(&span, length: length) } catch {
                counters.add(counters.protectFailures)
                return 0
            }
        }
        let bytes = UnsafeRawBufferPointer(start: packet.baseAddress, count: wire)
        if !rtxInUse { history.store(seq: seq, packet: bytes, now: now) }
        sink.write(bytes)
        return wire
    }

    /// A late context: taken with the first packet after it arrived (the history, which holds only
    /// unprotected packets the sink never sent, is emptied then, so a NACK cannot make us send
    /// one in the clear; and it keeps unprotected packets from then on when the peer accepted
    /// RTX); then every packet gets the negotiated payload type. Egress thread.
    @inline(__always) private func adoptLate(_ late: LateSendProtection, _ packet: UnsafeMutableRawBufferPointer) {
        if srtp == nil {
            guard let context = late.takeContext() else { return }
            srtp = context
            history.removeAll()
            rtxInUse = rtx != nil && late.retransmissionPayloadType != nil
            late.markAdopted()
        }
        packet[1] = (packet[1] & 0x80) | late.payloadType
    }

    /// A late stream (WebRTC): writes the peer's negotiated IDs into the reserved elements, or
    /// turns an element the peer did not accept into padding bytes (RFC 8285 §4.2: zero bytes
    /// between elements), so the packet keeps its size and nothing unnegotiated leaves. One
    /// atomic load, a walk over the block's few elements and a few byte stores. Egress thread.
    @inline(__always) private func mapNegotiatedExtensions(
        _ late: LateSendProtection, _ packet: UnsafeMutableRawBufferPointer, length: Int
    ) {
        guard mapsExtensions, length >= 12, packet[0] & 0x10 != 0 else { return }
        var at = 12 + 4 * Int(packet[0] & 0x0F)
        guard at + 4 <= length, packet[at] == 0xBE, packet[at + 1] == 0xDE else { return }
        let end = min(length, at + 4 + 4 * (Int(packet[at + 2]) << 8 | Int(packet[at + 3])))
        let ids = late.extensionIDs
        at += 4
        while at < end {
            let b = packet[at]
            if b == 0 {
                at += 1
                continue
            }
            let reserved = b >> 4, size = Int(b & 0x0F) + 1
            guard reserved != 15, at + 1 + size <= end else { return }
            if reserved == reservedIDs.mid {
                writeMid(late, ids.mid, packet, at: at, size: size)
                at += 1 + size
                continue
            }
            let id: UInt8
            switch reserved {
            case reservedIDs.audioLevel: id = ids.audioLevel
            case reservedIDs.absSendTime: id = ids.absSendTime
            case reservedIDs.transportSequence: id = ids.transportSequence
            default: id = reserved
            }
            if id >= 1 && id <= 14 {
                packet[at] = id << 4 | (b & 0x0F)
            } else {
                for i in at..<(at + 1 + size) { packet[i] = 0 }
            }
            at += 1 + size
        }
    }

    /// The mid element reserved at `at` (`size` data bytes): the negotiated ID and the stream's
    /// mid, its unused bytes zero (padding after the element, RFC 8285 §4.2); all zero (padding)
    /// when the mid extension or the mid is not there. Egress thread.
    @inline(__always) private func writeMid(
        _ late: LateSendProtection, _ id: UInt8, _ packet: UnsafeMutableRawBufferPointer, at: Int, size: Int
    ) {
        let mid = late.midBytes
        let length = mid == 0 ? 0 : (32 - mid.leadingZeroBitCount + 7) / 8
        guard id >= 1 && id <= 14, length >= 1, length <= size else {
            for i in at..<(at + 1 + size) { packet[i] = 0 }
            return
        }
        packet[at] = id << 4 | UInt8(length - 1)
        for i in 0..<size { packet[at + 1 + i] = i < length ? UInt8(truncatingIfNeeded: mid >> (8 * i)) : 0 }
    }

    /// Gives the packet the transport's next transport-wide sequence number, when configured, and
    /// logs its send time and wire size (SRTP tag included) for the delay-based estimate.
    @inline(__always) private func stampTransportSequence(
        _ packet: UnsafeMutableRawBufferPointer, length: Int, now: MonotonicTime, probeCluster: Int = 0
    ) {
        if let t = transportSequence, let numbers = t.numbers,
            let at = RTPHeaderExtensions.elementOffset(id: t.id, in: packet.bytes.extracting(..<length))
        {
            packet.put16(at, numbers.take(sendTime: now, size: length + (srtp?.rtpOverhead ?? 0), probeCluster: probeCluster))
        }
    }

    /// Whether the stream can send padding (`egressPadding`): it has RTX and, when its keys came
    /// late, they are in use and the peer accepted RTX. Any thread (atomics only).
    var canPad: Bool {
        guard rtx != nil else { return false }
        guard let late else { return true }
        return late.adopted && late.retransmissionPayloadType != nil
    }

    /// Any thread: queues NACKed sequence numbers for the worker (RFC 4585 §6.2.1) and counts one
    /// NACK. With a `route` (and a `RoutedPacketSink`), the packets are resent to that receiver
    /// only. Numbers that do not fit the ring are dropped and counted.
    func enqueueNacks<S: Sequence>(_ seqs: S, route: Int? = nil) where S.Element == UInt16 {
        precondition(route.map { (0..<Int(UInt32.max)).contains($0) } ?? true, "route \(route!) out of range")
        counters.add(counters.nackCount)
        let tag = UInt64(route.map { $0 + 1 } ?? 0) << 16
        for seq in seqs where !nacks.tryPush(tag | UInt64(seq)) {
            counters.add(counters.nackRequestsDropped)
        }
    }

    /// Worker thread: resends what the queued NACKs ask for from the history. Returns whether any
    /// request was handled and whether one could not be answered (missing, expired, or resent
    /// `maxRetransmissions` times already; counted as `retransmissionsRefused`). A refused resend
    /// does not ask for a keyframe: the receiver gives up on the packet and sends its own PLI
    /// (as libwebrtc's sender does; see `VideoSendStream`).
    func serviceNacks() -> (didWork: Bool, unrecoverable: Bool) {
        if let pacer, pacer.isRunning { return (false, false) }  // the pacer's thread answers them
        return answerNacks()
    }

    /// Refills the retransmission allowance of a paced stream at the pacer's target bitrate, up
    /// to `retransmissionWindowSeconds` of it, and says whether `bytes` more may be resent now
    /// (taking them). A stream without a running pacer (none, or driven by hand) is not limited.
    /// Egress thread.
    private func mayRetransmit(_ bytes: Int, now: MonotonicTime) -> Bool {
        guard let pacer, pacer.isRunning else { return true }
        let rate = Double(max(8_000, pacer.targetBitrateValue)) / 8
        let nowNs = now.nanoseconds
        if retransmissionAllowanceNs == 0 {
            retransmissionAllowance = rate * Self.retransmissionWindowSeconds
        } else {
            let elapsed = Double(nowNs &- min(nowNs, retransmissionAllowanceNs)) / 1e9
            retransmissionAllowance = min(rate * Self.retransmissionWindowSeconds, retransmissionAllowance + rate * elapsed)
        }
        retransmissionAllowanceNs = nowNs
        guard retransmissionAllowance >= Double(bytes) else { return false }
        retransmissionAllowance -= Double(bytes)
        return true
    }

    private func answerNacks() -> (didWork: Bool, unrecoverable: Bool) {
        var did = false, unrecoverable = false, resent = 0
        var now = MonotonicTime.zero  // read once, and only when a NACK is queued (this runs every step)
        while let entry = nacks.tryPop() {
            if !did { now = clock.now }
            did = true
            let seq = UInt16(truncatingIfNeeded: entry)
            let route = Int(entry >> 16) - 1
            var limited = false
            let result = history.retransmitStored(seq: seq, now: now, maxRetransmissions: maxRetransmissions) { stored in
                var bytes = stored
                var payload = stored.count - headerSize - (srtp?.rtpOverhead ?? 0)
                guard mayRetransmit(stored.count + (rtxInUse ? reservedOverhead + RTXPacket.overhead : 0), now: now) else {
                    limited = true
                    return false
                }
                if rtxInUse {
                    guard let n = wrapRTX(stored), let wire = finishRTX(length: n, now: now, stampsSendTime: false)
                    else { return true }
                    payload = stored.count - headerSize
                    bytes = UnsafeRawBufferPointer(rebasing: rtxBuffer[0..<wire])
                }
                if route >= 0, let routed { routed.write(bytes, route: route) } else { sink.write(bytes) }
                counters.add(counters.retransmittedBytesSent, UInt64(max(0, payload)))
                return true
            }
            if limited {
                unrecoverable = true
                counters.add(counters.retransmissionsRateLimited)
            } else if case .found = result {
                resent += 1
            } else {
                unrecoverable = true
                counters.add(counters.retransmissionsRefused)
            }
        }
        if resent > 0 {
            sink.flush()
            counters.add(counters.retransmittedPacketsSent, UInt64(resent))
            counters.add(counters.headerBytesSent, UInt64(resent * headerSize))  // webrtc-stats: resends too
        }
        return (did, unrecoverable)
    }
}

/// What the receive side feeds back into a send stream (RTCP from the remote receiver, RFC 4585
/// and RFC 5104) and reads from it for sender reports. `VideoSendStream` and `AudioSendStream`
/// conform; the receive pipeline finds the stream by `ssrc`.
/// Thread rule: every method may be called from any thread (the receive worker); none blocks the
/// pipeline: requests go through rings and atomics. Cost: a ring push or an atomic store.
public protocol RTPSendFeedbackTarget: AnyObject, Sendable {
    /// The SSRC of the stream's media packets.
    var ssrc: UInt32 { get }
    /// A generic NACK (RFC 4585 §6.2.1) listing lost sequence numbers: resent from the send
    /// history (at most `maxRetransmissions` times each); ones that cannot be resent are counted
    /// (`retransmissionsRefused`), not answered with a keyframe: the receiver's PLI asks for one.
    func handleNack<S: Sequence>(_ sequenceNumbers: S) where S.Element == UInt16
    /// A Picture Loss Indication (RFC 4585 §6.3.1): a keyframe soon (video: the next frame, or
    /// the first after the stream's minimum keyframe interval; see `VideoSendStream`).
    func handlePictureLossIndication()
    /// A Full Intra Request (RFC 5104 §4.3.1): a keyframe soon, as for PLI (video).
    func handleFullIntraRequest()
    /// A receiver's bandwidth estimate (REMB or transport-cc), bits per second: the encoder's
    /// target is clamped to it.
    func handleEstimatedBitrate(_ bitsPerSecond: Int)
    /// Packet and octet counts and the last RTP timestamp with its capture time.
    var senderInfo: RTPSenderInfo { get }
    /// The fraction of this stream's packets a receiver reported lost (RFC 3550 §6.4.1, 0...1).
    /// Default: ignored (audio protects for it with in-band FEC).
    func handleReceiverLoss(fractionLost: Double)
    /// Whether the stream carries video (90 kHz clock; follows the bandwidth estimate). Default false.
    var carriesVideo: Bool { get }
    /// The latest round-trip time to the receiver (RFC 3550 §6.4.1 LSR/DLSR), seconds: a video
    /// stream spaces forced keyframes at least this far apart. Default: ignored.
    func handleRoundTripTime(_ seconds: Double)
    /// Whether the stream can send probe clusters (it is paced, with RTX for padding). Default false.
    var canProbe: Bool { get }
    /// Sends probe `cluster` (`ProbeController`): the pacer sends at its rate, padding on the RTX
    /// SSRC when no media waits. Returns false when the stream cannot probe. Default: false.
    func handleProbe(_ cluster: ProbeCluster) -> Bool
}

extension RTPSendFeedbackTarget {
    /// False: an audio stream by default.
    public var carriesVideo: Bool { false }
    /// Ignores the round-trip time by default.
    public func handleRoundTripTime(_ seconds: Double) {}
    /// Ignores reported loss by default.
    public func handleReceiverLoss(fractionLost: Double) {}
    /// False by default.
    public var canProbe: Bool { false }
    /// Takes no probes by default.
    public func handleProbe(_ cluster: ProbeCluster) -> Bool { false }
}

extension RTPSendCore: RTPPacerEgress {
    /// Stamps abs-send-time with the moment the packet leaves (what the receiver's delay estimate
    /// needs), then protects, keeps and writes it. Pacer's thread.
    package func egress(_ packet: UnsafeMutableRawBufferPointer, length: Int, now: MonotonicTime, probeCluster: Int) -> Int {
        if let id = absSendTimeID, let at = RTPHeaderExtensions.elementOffset(id: id, in: packet.bytes.extracting(..<length)) {
            packet.put24(at, RTPAbsSendTime(nanoseconds: now.nanoseconds).rawValue)
        }
        return store(packet, length: length, now: now, probeCluster: probeCluster)
    }

    /// A padding-only packet on the RTX SSRC (RFC 3550 §5.1 padding, RFC 4588's stream, as
    /// libwebrtc pads): the media header's elements, stamped like media, then up to 255 bytes
    /// of padding, about `bytes` on the wire in all. Receivers drop it after recording its
    /// transport-wide number. Returns the wire size, 0 without RTX (or with keys still to come).
    /// Pacer's thread.
    package func egressPadding(bytes: Int, now: MonotonicTime, probeCluster: Int) -> Int {
        guard rtxInUse, canPad else { return 0 }
        // Payload padding first, as libwebrtc pads: the last media packet again, as an RTX
        // packet, so a probe's bytes can still repair a loss (and some servers, Janus 1.1 among
        // them, fail on a stream of padding-only RTX packets).
        if let seq = lastEgressSequence {
            var wire = 0
            _ = history.peek(seq: seq) { stored in wire = egressRTX(stored, now: now, probeCluster: probeCluster) }
            if wire > 0 { return wire }
        }
        let overhead = srtp?.rtpOverhead ?? 0
        let pad = min(255, max(1, bytes - headerSize - overhead))
        paddingTemplate.withUnsafeBytes { rtxBuffer.copyMemory(from: $0) }
        if let pt = late?.retransmissionPayloadType { rtxBuffer[1] = (rtxBuffer[1] & 0x80) | pt }
        rtxBuffer.put16(2, rtxSequencer.next())
        rtxBuffer.put32(4, lastEgressTimestamp)
        let length = headerSize + pad
        UnsafeMutableRawBufferPointer(rebasing: rtxBuffer[headerSize..<(length - 1)]).initializeMemory(
            as: UInt8.self, repeating: 0)
        rtxBuffer[length - 1] = UInt8(pad)
        guard let wire = finishRTX(length: length, now: now, probeCluster: probeCluster) else { return 0 }
        sink.write(UnsafeRawBufferPointer(rebasing: rtxBuffer[0..<wire]))
        return wire
    }

    /// Sends the unprotected `stored` packet as an RTX packet (RFC 4588: OSN first) on the RTX
    /// SSRC, stamped like media and logged with `probeCluster`; the wire size, 0 when it could
    /// not be built or protected. Not counted as a retransmission. Egress thread.
    private func egressRTX(_ stored: UnsafeRawBufferPointer, now: MonotonicTime, probeCluster: Int) -> Int {
        guard let n = wrapRTX(stored), let wire = finishRTX(length: n, now: now, probeCluster: probeCluster) else { return 0 }
        sink.write(UnsafeRawBufferPointer(rebasing: rtxBuffer[0..<wire]))
        return wire
    }

    /// Builds the RTX packet of the unprotected `stored` packet in `rtxBuffer` (RFC 4588: the
    /// RTX payload type, SSRC and next sequence number, then the OSN and the payload); its
    /// length, nil without an RTX payload type or when it does not fit. Egress thread.
    private func wrapRTX(_ stored: UnsafeRawBufferPointer) -> Int? {
        guard let rtx else { return nil }
        let payloadType: UInt8? = if let late { late.retransmissionPayloadType } else { rtx.payloadType }
        guard let payloadType else { return nil }
        return RTXPacket.wrap(
            stored, payloadType: payloadType, sequenceNumber: rtxSequencer.next(), ssrc: rtx.ssrc, into: rtxBuffer)
    }

    /// Finishes the `length`-byte packet in `rtxBuffer` for the wire: abs-send-time stamped now
    /// (unless `stampsSendTime` is false: a repair keeps its original's), the next transport-wide
    /// number logged with `probeCluster`, the negotiated extension IDs, SRTP. The wire length,
    /// nil when SRTP refused it (counted). Egress thread.
    private func finishRTX(length: Int, now: MonotonicTime, probeCluster: Int = 0, stampsSendTime: Bool = true) -> Int? {
        if stampsSendTime, let id = absSendTimeID,
            let at = RTPHeaderExtensions.elementOffset(id: id, in: rtxBuffer.bytes.extracting(..<length))
        {
            rtxBuffer.put24(at, RTPAbsSendTime(nanoseconds: now.nanoseconds).rawValue)
        }
        stampTransportSequence(rtxBuffer, length: length, now: now, probeCluster: probeCluster)
        if let late { mapNegotiatedExtensions(late, rtxBuffer, length: length) }
        guard let srtp else { return length }
        var span = rtxBuffer.mutableBytes
        do { return try srtp.protect(&span, length: length) } catch {
            counters.add(counters.protectFailures)
            return nil
        }
    }

    /// Flushes the sink. Pacer's thread.
    package func egressFlush() { sink.flush() }

    /// Answers queued NACKs from the history. Pacer's thread.
    package func egressServiceNacks() { _ = answerNacks() }
}
