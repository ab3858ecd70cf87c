// Sends one local track's RTP to every participant subscribed to it, each with its own SRTP key.
internal import MediaCore
import Synchronization

/// The `PacketSink` of a local track's send stream (which itself sends plain RTP): each packet is
/// copied into a preallocated buffer, protected with the SRTP context of each subscribed call leg
/// (a key per leg and direction, RFC 3711 §3.3) and sent on that leg's socket (the friends' link)
/// along its selected ICE pair (straight to the participant, or through a TURN relay). One encode
/// serves every participant of a mesh. A retransmission (a NACK from one leg, RFC 4585 §6.2.1)
/// goes to that leg only (`RoutedPacketSink`); each leg's bandwidth estimate is kept here and the
/// encoder follows the lowest of the legs the track goes to (one encode must fit every path).
/// Each leg is its own transport, so the transport-wide sequence number the stream reserved
/// (`transportSequenceExtensionID`) is written here, per leg (`TransportNumbering`), from the
/// leg's counter, which logs the send time for the leg's delay-based estimate. A resend carries
/// the number its first transmission to that leg had, so it is the same bytes under the same
/// SRTP index: AES-GCM must never protect different bytes (header included) under one index.
/// Thread rule: `write` on the stream's sending thread only (its pacer or worker); `setTargets`/
/// `isMuted`/estimates any thread. Cost: per packet and leg one copy, one header-extension walk,
/// one SRTP protect, one `sendto`; no allocation.
/// Sendable: `targets` and `estimates` are Mutexes, the counters atomics; `scratch` is used only by the writes,
/// on the stream's one sending thread.
final class TrackFanOut: RoutedPacketSink, @unchecked Sendable {
    struct Target: Sendable {
        let participant: String
        /// The leg's id, as the leg's feedback passes it with NACKs (`MediaLeg.route`).
        let route: Int
        let context: SRTPContext
        let socket: MediaCore.UDPSocket
        /// The leg's selected path (direct or through TURN), read per packet.
        let path: ICESendPath
        /// The transport-wide numbers of this track's packets on the leg.
        let numbering: TransportNumbering
    }

    /// The RFC 8285 one-byte ID of the transport-wide sequence number in call media (both ends
    /// are Revue, so the ID is fixed rather than negotiated).
    static let transportSequenceExtensionID: UInt8 = 5

    private let targets = Mutex<[Target]>([])
    /// The latest bandwidth estimate of each leg (by route), bits per second.
    private let estimates = Mutex<[Int: Int]>([:])
    /// While true nothing is sent (a muted track).
    let muted = Atomic<Bool>(false)
    /// Packets sent (summed over legs), and dropped while muted.
    let packetsSent = Atomic<UInt64>(0)
    let bytesSent = Atomic<UInt64>(0)
    let packetsMuted = Atomic<UInt64>(0)
    /// Retransmissions sent to one leg.
    let packetsResent = Atomic<UInt64>(0)
    private let scratch: UnsafeMutableRawBufferPointer

    init() {
        scratch = .allocate(byteCount: 2048, alignment: 16)
    }

    deinit { scratch.deallocate() }

    /// Replaces the legs the track goes to.
    func setTargets(_ t: [Target]) { targets.withLock { $0 = t } }

    /// Records leg `route`'s estimate and returns the lowest estimate over the legs the track goes
    /// to now (nil when none of them sent one).
    func noteEstimate(_ bitsPerSecond: Int, route: Int) -> Int? {
        estimates.withLock { $0[route] = bitsPerSecond }
        return lowestEstimate()
    }

    /// The lowest estimate over the legs the track goes to now (nil: none known); forgets legs
    /// that left.
    func lowestEstimate() -> Int? {
        let routes = Set(targets.withLock { $0.map(\.route) })
        return estimates.withLock { e in
            e = e.filter { routes.contains($0.key) }
            return e.values.min()
        }
    }

    /// Sends `packet` to every target under its own SRTP context; counts it as muted instead while
    /// the track is muted.
    func write(_ packet: RawSpan) {
        packet.withUnsafeBytes { packet in
            if muted.load(ordering: .relaxed) {
                packetsMuted.add(1, ordering: .relaxed)
                return
            }
            let current = targets.withLock { $0 }
            for t in current where send(packet, to: t) {
                packetsSent.add(1, ordering: .relaxed)
                bytesSent.add(UInt64(packet.count), ordering: .relaxed)
            }
        }
    }

    /// Resends `packet` to the one target with `route` (a NACK's sender); nothing while muted.
    func write(_ packet: RawSpan, route: Int) {
        packet.withUnsafeBytes { packet in
            guard !muted.load(ordering: .relaxed),
                let t = targets.withLock({ $0.first { $0.route == route } })
            else { return }
            if send(packet, to: t) { packetsResent.add(1, ordering: .relaxed) }
        }
    }

    private func send(_ packet: UnsafeRawBufferPointer, to t: Target) -> Bool {
        guard packet.count + t.context.rtpOverhead <= scratch.count else { return false }
        scratch.copyMemory(from: packet)
        if let at = RTPHeaderExtensions.elementOffset(id: Self.transportSequenceExtensionID, in: packet.bytes),
            at + 2 <= packet.count
        {
            let rtpSeq = UInt16(scratch[2]) << 8 | UInt16(scratch[3])
            let seq = t.numbering.number(
                rtpSequence: rtpSeq, sendTime: .now,
                size: packet.count + t.context.rtpOverhead)
            scratch[at] = UInt8(truncatingIfNeeded: seq >> 8)
            scratch[at + 1] = UInt8(truncatingIfNeeded: seq)
        }
        var span = scratch.mutableBytes
        guard let n = try? t.context.protect(&span, length: packet.count),
            t.path.send(UnsafeRawBufferPointer(rebasing: scratch[0..<n]), on: t.socket)
        else { return false }
        return true
    }

    func flush() {}
}

/// The transport-wide sequence numbers one leg gave one track's packets. A packet sent for the
/// first time takes the leg's next number (logged with its send time for the delay-based
/// estimate); a resend of an RTP sequence number this leg already got takes the number it had,
/// so its bytes, and so its SRTP ciphertext and tag, are the first transmission's. The table
/// holds the last `slots` RTP sequence numbers, more than a send history keeps.
/// Thread rule: `number` on the track's sending thread only (the fan-out's `write`). Cost: one
/// table read and write per packet; no allocation after `init`.
/// Sendable: `table` is used only by `number`, on the track's one sending thread; `counter` is atomic inside.
final class TransportNumbering: @unchecked Sendable {
    /// The leg's counter, shared by all its tracks.
    let counter: TransportSequenceNumbers
    /// Entries: bit 32 set when used, the RTP sequence number in bits 16-31, the transport one
    /// in bits 0-15.
    private let table: UnsafeMutablePointer<UInt64>
    /// Table size (a power of two above every send history's capacity).
    static let slots = 2048

    init(counter: TransportSequenceNumbers) {
        self.counter = counter
        table = .allocate(capacity: Self.slots)
        table.initialize(repeating: 0, count: Self.slots)
    }

    deinit { table.deallocate() }

    /// The transport-wide number for RTP packet `rtpSequence` of `size` wire bytes leaving at
    /// `sendTime`: the one it had on this leg before, or the next one.
    func number(rtpSequence: UInt16, sendTime: MonotonicTime, size: Int) -> UInt16 {
        let slot = Int(rtpSequence) & (Self.slots - 1)
        let entry = table[slot]
        if entry >> 32 == 1, UInt16(truncatingIfNeeded: entry >> 16) == rtpSequence { return UInt16(truncatingIfNeeded: entry) }
        let n = counter.take(sendTime: sendTime, size: size)
        table[slot] = 1 << 32 | UInt64(rtpSequence) << 16 | UInt64(n)
        return n
    }
}
