// Rendezvous nodes (authenticated registration, lookups, presence) and LAN discovery.
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif
internal import MediaCore

extension SessionCore {
    /// Tells a rendezvous node where we are and our status, with the node's cookie for our
    /// endpoint and a MAC once its key is known (the node answers the first one with both).
    func sendRegistration(to node: SocketAddress) {
        let state = nodeStates[node] ?? NodeState()
        var w = ByteWriter(capacity: RendezvousAuth.registerLength)
        w.u8(PacketType.rendezvousRegister.rawValue)
        w.u8(revueProtocolVersion)
        w.append(identity.publicKey)
        w.u8(profile.status)
        w.u64(nextTimestamp())
        w.append(state.cookie)
        if let k = state.macKey {
            w.append(Sodium.keyedBlake2b(key: k, w.bytes))
        } else {
            w.append([UInt8](repeating: 0, count: 16))
        }
        sendTap?(w.bytes, .direct(node))
        socket.send(w.bytes, to: node)
    }

    /// A node's answer to a registration: its key, a cookie for our endpoint, and when accepted
    /// the token that lets us use its relay.
    func handleRegistered(_ bytes: [UInt8], from: SocketAddress) {
        var r = ByteReader(bytes, offset: 1)
        guard rendezvousNodes.contains(from), bytes.count == RendezvousAuth.registeredLength, r.u8() == revueProtocolVersion,
              let accepted = r.u8(), r.u32() != nil, r.u16() != nil, let nodeKey = r.take(32), let cookie = r.take(16),
              let token = r.take(16) else {
            counters.droppedMalformed += 1
            return
        }
        var state = nodeStates[from] ?? NodeState()
        var again = false
        // A different node key while the node accepts us under the one we know is a spoofed
        // answer (a restarted node stops accepting first): it does not make us switch.
        if let known = state.nodeKey, known != nodeKey, let last = lastRegistered[from],
           monotonicNow() - last <= timeouts.rendezvousInterval * 3 + 0.5 {
            counters.droppedForged += 1
            return
        }
        if state.nodeKey != nodeKey {
            // First contact, or the node restarted with a new key: register again now.
            guard let k = RendezvousAuth.key(secret: identity.secret, peerPublic: nodeKey) else {
                counters.droppedForged += 1
                return
            }
            state.nodeKey = nodeKey
            state.macKey = k
            state.token = nil
            again = true
        }
        if state.cookie != cookie {
            state.cookie = cookie
            again = true
        }
        if accepted == 1 {
            state.token = token
            lastRegistered[from] = monotonicNow()
        }
        nodeStates[from] = state
        if accepted != 1 && again { sendRegistration(to: from) }
        updateDiscoverable()
    }

    /// Asks a node where a friend is. The friend's key travels encrypted under our registration
    /// key (nonce: our handshake timestamp clock, never reused), so only the node learns whom we
    /// look for, and only the node can answer.
    func sendLookup(_ key: [UInt8], to node: SocketAddress) {
        guard var state = nodeStates[node], let macKey = state.macKey, state.token != nil else { return }
        let nonce = nextTimestamp() & ~(1 << 63)
        var w = ByteWriter(capacity: RendezvousAuth.lookupLength)
        w.u8(PacketType.rendezvousLookup.rawValue)
        w.u8(revueProtocolVersion)
        w.append(identity.publicKey)
        w.u64(nonce)
        w.append(Sodium.seal(key: macKey, nonce: nonce, ad: w.bytes, plaintext: key))
        state.pendingLookups.append(nonce)
        if state.pendingLookups.count > 64 { state.pendingLookups.removeFirst() }
        nodeStates[node] = state
        socket.send(w.bytes, to: node)
    }

    func handleLookupReply(_ bytes: [UInt8], from: SocketAddress) {
        var r = ByteReader(bytes, offset: 1)
        guard rendezvousNodes.contains(from), bytes.count == RendezvousAuth.lookupReplyLength, r.u8() == revueProtocolVersion,
              let nonce = r.u64() else {
            counters.droppedMalformed += 1
            return
        }
        // Only the node (holder of our registration key) can answer, and only our open lookups.
        guard var state = nodeStates[from], let macKey = state.macKey, nonce >> 63 == 1,
              let open = state.pendingLookups.firstIndex(of: nonce & ~(1 << 63)),
              let plain = Sodium.open(key: macKey, nonce: nonce, ad: Array(bytes[0..<10]), ciphertext: bytes[10...]) else {
            counters.droppedLookupReplies += 1
            return
        }
        state.pendingLookups.remove(at: open)
        nodeStates[from] = state
        var p = ByteReader(plain)
        guard let key = p.take(32), let found = p.u8(), let ip = p.u32(), let port = p.u16(), let status = p.u8(), let age = p.u16() else {
            counters.droppedMalformed += 1
            return
        }
        guard let f = friends[Hex.encode(key)] else { return }
        let fresh = found == 1 && Double(age) <= timeouts.rendezvousInterval * 4 + 1
        f.presence = fresh ? PresenceStatus(UserStatus(rawValue: status) ?? .none) : .offline
        guard found == 1 else { return }
        let endpoint = SocketAddress(ip: ip, port: port)
        if endpoint.isPrivateOrLoopback, !from.isPrivateOrLoopback, !configuration.acceptPrivateEndpointsFromPublicNodes {
            counters.droppedLookupReplies += 1
            return
        }
        let route = Route.direct(endpoint)
        let now = monotonicNow()
        let isNew = f.candidates[route] == nil
        addCandidate(f, route, now: now)
        if isNew, !f.isConnected { initiateTriggered(f, route: route, now: now) }
    }

    /// A LAN announcement: believed only on the multicast socket, with LAN discovery on, from a
    /// source on one of our subnets; a new endpoint starts at most one handshake round a second.
    func handleLAN(_ bytes: [UInt8], from: SocketAddress, onMulticastSocket: Bool) {
        guard onMulticastSocket, lanSocket != nil, from.isOnLocalSubnet else {
            counters.droppedAnnounces += 1
            return
        }
        var r = ByteReader(bytes, offset: 1)
        guard bytes.first == PacketType.lanAnnounce.rawValue, r.u8() == revueProtocolVersion, let key = r.take(32), let port = r.u16(),
              r.remaining == 0 else {
            counters.droppedMalformed += 1
            return
        }
        guard key != identity.publicKey, let f = friends[Hex.encode(key)] else { return }
        let route = Route.direct(SocketAddress(ip: from.ip, port: port))
        let now = monotonicNow()
        let isNew = f.candidates[route] == nil
        addCandidate(f, route, now: now)
        if isNew, !f.isConnected { initiateTriggered(f, route: route, now: now) }
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
