// Sends one local track's RTP to every participant subscribed to it, each with its own SRTP key.
internal import MediaCore
import Synchronization

/// The `PacketSink` of a local track's send stream (which itself sends plain RTP): each packet is
/// copied into a preallocated buffer, protected with the SRTP context of each subscribed call leg
/// (a key per leg and direction, RFC 3711 §3.3) and sent on that leg's media socket. One encode
/// serves every participant of a mesh.
/// Thread rule: `write` on the stream's worker thread only; `setTargets`/`isMuted` any thread.
/// Cost: per packet and leg one copy, one SRTP protect, one `sendto`; no allocation.
final class TrackFanOut: PacketSink, @unchecked Sendable {
    struct Target: Sendable {
        let participant: String
        let context: SRTPContext
        let socket: MediaCore.UDPSocket
        let destination: MediaCore.SocketAddress
    }

    private let targets = Mutex<[Target]>([])
    /// While true nothing is sent (a muted track).
    let muted = Atomic<Bool>(false)
    /// Packets sent (summed over legs), and dropped while muted.
    let packetsSent = Atomic<UInt64>(0)
    let bytesSent = Atomic<UInt64>(0)
    let packetsMuted = Atomic<UInt64>(0)
    private let scratch: UnsafeMutableRawBufferPointer

    init() {
        scratch = .allocate(byteCount: 2048, alignment: 16)
    }

    deinit { scratch.deallocate() }

    /// Replaces the legs the track goes to.
    func setTargets(_ t: [Target]) { targets.withLock { $0 = t } }

    func write(_ packet: UnsafeRawBufferPointer) {
        if muted.load(ordering: .relaxed) {
            packetsMuted.add(1, ordering: .relaxed)
            return
        }
        let current = targets.withLock { $0 }
        for t in current {
            guard packet.count + t.context.rtpOverhead <= scratch.count else { continue }
            scratch.copyMemory(from: packet)
            guard let n = try? t.context.protect(scratch, length: packet.count),
                  let sent = try? t.socket.send(UnsafeRawBufferPointer(rebasing: scratch[0..<n]), to: t.destination), sent > 0 else { continue }
            packetsSent.add(1, ordering: .relaxed)
            bytesSent.add(UInt64(packet.count), ordering: .relaxed)
        }
    }

    func flush() {}
}
