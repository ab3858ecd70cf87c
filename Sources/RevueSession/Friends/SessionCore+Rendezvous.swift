// Rendezvous nodes (authenticated registration, lookups, presence) and LAN discovery.
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif
internal import MediaCore

extension SessionCore {
    /// Tells a rendezvous node where we are and our status, authenticated once its key is known.
    func sendRegistration(to node: SocketAddress) {
        var w = ByteWriter(capacity: RendezvousAuth.registerLength)
        w.u8(PacketType.rendezvousRegister.rawValue)
        w.u8(revueProtocolVersion)
        w.append(identity.publicKey)
        w.u8(profile.status)
        w.u64(nextTimestamp())
        if let k = nodeMacKeys[node]?.macKey {
            w.append(Sodium.keyedBlake2b(key: k, w.bytes))
        } else {
            w.append([UInt8](repeating: 0, count: 16))
        }
        sendTap?(w.bytes, .direct(node))
        socket.send(w.bytes, to: node)
    }

    func handleLookupReply(_ bytes: [UInt8], from: SocketAddress) {
        var r = ByteReader(bytes, offset: 1)
        guard rendezvousNodes.contains(from), r.u8() == revueProtocolVersion, let key = r.take(32), let found = r.u8(),
              let ip = r.u32(), let port = r.u16(), let status = r.u8(), let age = r.u16() else {
            counters.droppedMalformed += 1
            return
        }
        guard let f = friends[Hex.encode(key)] else { return }
        let fresh = found == 1 && Double(age) <= timeouts.rendezvousInterval * 4 + 1
        f.presence = fresh ? PresenceStatus(UserStatus(rawValue: status) ?? .none) : .offline
        guard found == 1 else { return }
        let route = Route.direct(SocketAddress(ip: ip, port: port))
        let isNew = f.candidates[route] == nil
        f.candidates[route] = monotonicNow()
        if f.candidates.count > 8, let oldest = f.candidates.min(by: { $0.value < $1.value }) { f.candidates[oldest.key] = nil }
        if isNew, !f.isConnected { initiate(f, now: monotonicNow()) }
    }

    func handleLAN(_ bytes: [UInt8], from: SocketAddress) {
        var r = ByteReader(bytes, offset: 1)
        guard bytes.first == PacketType.lanAnnounce.rawValue, r.u8() == revueProtocolVersion, let key = r.take(32), let port = r.u16() else {
            counters.droppedMalformed += 1
            return
        }
        guard key != identity.publicKey, let f = friends[Hex.encode(key)] else { return }
        let route = Route.direct(SocketAddress(ip: from.ip, port: port))
        let isNew = f.candidates[route] == nil
        f.candidates[route] = monotonicNow()
        if isNew, !f.isConnected { initiate(f, now: monotonicNow()) }
    }

    func updateDiscoverable() {
        let now = monotonicNow()
        let registered = lastRegistered.values.contains { now - $0 <= timeouts.rendezvousInterval * 3 + 0.5 }
        let value = registered || lanSocket != nil
        guard value != isDiscoverable else { return }
        isDiscoverable = value
        emit { $1.revue($0, didUpdateIsDiscoverable: value) }
    }
}
