// Rendezvous nodes (authenticated registration, lookups, presence) and LAN discovery.
import Dispatch
internal import MediaCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

extension SessionCore {
    /// Tells a rendezvous node where we are, our status and the tags we are found by (see
    /// `registrationTags`), with the node's cookie for our endpoint, encrypted to the node once
    /// its key is known (the node answers the first one with key and cookie). Several datagrams
    /// when there are more than `RendezvousAuth.maxTagsPerRegistration` tags.
    func sendRegistration(to node: SocketAddress) {
        if nodeStates[node] == nil { nodeStates[node] = NodeState() }
        var state = nodeStates[node]!
        let epoch = PrivacyTags.epoch(wallNow())
        if state.registrationEpoch != epoch {
            // A new epoch, a new registration key: with the node's key known, the MAC key is
            // ours at once; the relay token of the previous key serves until the new is accepted.
            if state.registrationEpoch != nil, let nodeKey = state.nodeKey {
                let keys = KeyPair()
                state.macKey = RendezvousAuth.heldKey(secret: keys.secret, peerPublic: nodeKey)
                state.registrationKeys = keys
                state.pendingLookups = []
            }
            state.registrationEpoch = epoch
            nodeStates[node] = state
        }
        let tags = state.macKey == nil ? [] : registrationTags()
        var chunks: [ArraySlice<[UInt8]>] = stride(from: 0, to: tags.count, by: RendezvousAuth.maxTagsPerRegistration).map {
            tags[$0..<min(tags.count, $0 + RendezvousAuth.maxTagsPerRegistration)]
        }
        if chunks.isEmpty { chunks = [[]] }
        for chunk in chunks {
            let timestamp = nextTimestamp()
            var w = ByteWriter(capacity: RendezvousAuth.registerLength + 16 * chunk.count)
            w.u8(PacketType.rendezvousRegister.rawValue)
            w.u8(revueProtocolVersion)
            w.append(state.registrationKeys.publicKey)
            w.u64(timestamp)
            w.append(state.cookie)
            if let k = state.macKey {
                var plain = [profile.status]
                for tag in chunk { plain += tag }
                w.append(Sodium.seal(key: k, nonce: timestamp, ad: w.bytes, plaintext: plain))
                state.pendingRegistrations.append(
                    PendingRegistration(timestamp: timestamp, macKey: k, registrationKey: state.registrationKeys.publicKey))
                if state.pendingRegistrations.count > 64 { state.pendingRegistrations.removeFirst() }
            } else {
                w.append([UInt8](repeating: 0, count: 17))
            }
            environment.sendTap?(w.bytes, .direct(node))
            socket.send(w.bytes, to: node)
        }
        nodeStates[node] = state
    }

    /// The tags we register: for each friend the one it looks us up by, and our own request tag
    /// (for strangers holding our address), for the current epoch and, near a boundary, the
    /// neighbouring one. O(friends) BLAKE2b.
    func registrationTags() -> [[UInt8]] {
        var tags: [[UInt8]] = []
        for e in PrivacyTags.epochs(wallNow()) {
            tags.append(PrivacyTags.request(publicKey: identity.publicKey, nospam: profile.nospam, epoch: e))
            for id in friendOrder {
                guard let f = friends[id], let k = pairKey(f) else { continue }
                tags.append(PrivacyTags.rendezvous(pairKey: k, owner: identity.publicKey, epoch: e))
            }
        }
        return tags
    }

    /// The pair key with a friend, cached; nil for an invalid key.
    func pairKey(_ f: FriendState) -> SecretKeyBytes? {
        if let k = f.pairKey { return k }
        f.pairKey = PrivacyTags.pairKey(secret: identity.secret, peerPublic: f.key)
        return f.pairKey
    }

    /// The tags a relayed datagram to a friend names: the target (the tag the friend registered
    /// for us, or its request tag while our request is pending) and the source (the tag we
    /// registered for it, which the friend recognises). Nil for a key that is not a friend.
    func relayTags(for key: [UInt8]) -> (target: [UInt8], source: [UInt8])? {
        guard let f = friends[Hex.encode(key)], let k = pairKey(f) else { return nil }
        let e = PrivacyTags.epoch(wallNow())
        let pending = f.stored.requestNospam != nil
        if let c = f.relayTagCache, c.epoch == e, c.pending == pending { return (c.target, c.source) }
        let target =
            f.stored.requestNospam.map { PrivacyTags.request(publicKey: f.key, nospam: $0, epoch: e) }
            ?? PrivacyTags.rendezvous(pairKey: k, owner: f.key, epoch: e)
        let source = PrivacyTags.rendezvous(pairKey: k, owner: identity.publicKey, epoch: e)
        f.relayTagCache = (e, pending, target, source)
        return (target, source)
    }

    /// Whether a relayed datagram's source tag is the one `key` registers for us (this epoch or a
    /// neighbouring one). At most one X25519 for a key that is not a friend.
    func isRelayTag(_ tag: [UInt8], of key: [UInt8]) -> Bool {
        let k = friends[Hex.encode(key)].flatMap { pairKey($0) } ?? PrivacyTags.pairKey(secret: identity.secret, peerPublic: key)
        guard let k else { return false }
        let e = PrivacyTags.epoch(wallNow())
        return [e &- 1, e, e &+ 1].contains { Sodium.equal(PrivacyTags.rendezvous(pairKey: k, owner: key, epoch: $0), tag) }
    }

    /// A node's answer to a registration (docs/session.md, 0x59). A sealed one (accepted or not,
    /// a cookie for our endpoint, the relay token) is believed only when it names one of our
    /// open registrations and opens under that registration's MAC key; an unsealed one (the
    /// node's key and a cookie: first contact, or the node lost us) only while the node has not
    /// accepted us lately (three registration intervals), as anyone can send it. Everything else
    /// is dropped and counted as forged. Main actor; at most one AEAD open, and one X25519 for a
    /// new node key.
    func handleRegistered(_ bytes: [UInt8], from: SocketAddress) {
        var r = ByteReader(bytes, offset: 1)
        guard rendezvousNodes.contains(from), r.u8() == revueProtocolVersion, let form = r.u8(),
            (form == RendezvousAuth.registeredSealed && bytes.count == RendezvousAuth.registeredLength)
                || (form == RendezvousAuth.registeredUnsealed && bytes.count == RendezvousAuth.registeredUnsealedLength)
        else {
            counters.droppedMalformed += 1
            return
        }
        var state = nodeStates[from] ?? NodeState()
        if form == RendezvousAuth.registeredSealed {
            let bits = RendezvousAuth.registeredNonceBits
            guard let nonce = r.u64(), nonce & bits == bits,
                let open = state.pendingRegistrations.firstIndex(where: { $0.timestamp == nonce & ~bits }),
                let plain = Sodium.open(
                    key: state.pendingRegistrations[open].macKey, nonce: nonce, ad: Array(bytes[0..<11]),
                    ciphertext: bytes[11...]),
                plain.count == 33, plain[0] <= 1
            else {
                counters.droppedForged += 1
                return
            }
            let pending = state.pendingRegistrations.remove(at: open)
            let accepted = plain[0] == 1, cookie = Array(plain[1..<17]), token = Array(plain[17..<33])
            let again = !accepted && state.cookie != cookie
            state.cookie = cookie
            if accepted {
                // The token of the current registration key, or of the previous one until the
                // current one is accepted (a late answer to the previous key changes nothing then).
                let current = state.registrationKeys.publicKey
                if pending.registrationKey == current || state.tokenKey != current {
                    state.token = token
                    state.tokenKey = pending.registrationKey
                }
                lastRegistered[from] = scheduler.now
            }
            nodeStates[from] = state
            if again { sendRegistration(to: from) }
            if accepted { requestCredentialsIfDue(from: from, now: scheduler.now) }
            updateDiscoverable()
            return
        }
        guard let nodeKey = r.take(32), let cookie = r.take(16) else {
            counters.droppedMalformed += 1
            return
        }
        // While the node accepts us, its answers are sealed: an unsealed one is someone else's
        // (a restarted node stops accepting us first, and is believed after that).
        if let last = lastRegistered[from], scheduler.now - last <= timeouts.rendezvousInterval * 3 + .milliseconds(500) {
            counters.droppedForged += 1
            return
        }
        var again = false
        if state.nodeKey != nodeKey {
            // First contact, or the node restarted with a new key: register again now.
            guard let k = RendezvousAuth.heldKey(secret: state.registrationKeys.secret, peerPublic: nodeKey) else {
                counters.droppedForged += 1
                return
            }
            state.nodeKey = nodeKey
            state.macKey = k
            state.token = nil
            state.tokenKey = nil
            state.pendingRegistrations = []
            again = true
        }
        if state.cookie != cookie {
            state.cookie = cookie
            again = true
        }
        nodeStates[from] = state
        if again { sendRegistration(to: from) }
        updateDiscoverable()
    }

    /// Asks a node where a friend is, by the tag the friend registers for us (and its request
    /// tag while our request is pending). The tag travels encrypted under our registration key
    /// (nonce: our handshake timestamp clock, never reused), so only the node sees it, and it
    /// cannot tell whose it is; only the node can answer.
    func sendLookups(_ f: FriendState, to node: SocketAddress) {
        guard var state = nodeStates[node], let macKey = state.macKey, state.token != nil, let k = pairKey(f) else { return }
        let e = PrivacyTags.epoch(wallNow())
        var tags = [PrivacyTags.rendezvous(pairKey: k, owner: f.key, epoch: e)]
        if let nospam = f.stored.requestNospam { tags.append(PrivacyTags.request(publicKey: f.key, nospam: nospam, epoch: e)) }
        for tag in tags {
            let nonce = nextTimestamp() & ~RendezvousAuth.registeredNonceBits
            var w = ByteWriter(capacity: RendezvousAuth.lookupLength)
            w.u8(PacketType.rendezvousLookup.rawValue)
            w.u8(revueProtocolVersion)
            w.append(state.registrationKeys.publicKey)
            w.u64(nonce)
            w.append(Sodium.seal(key: macKey, nonce: nonce, ad: w.bytes, plaintext: tag))
            state.pendingLookups.append(PendingLookup(nonce: nonce, tag: tag, friendId: f.id))
            if state.pendingLookups.count > 64 { state.pendingLookups.removeFirst() }
            environment.sendTap?(w.bytes, .direct(node))
            socket.send(w.bytes, to: node)
        }
        nodeStates[node] = state
    }

    func handleLookupReply(_ bytes: [UInt8], from: SocketAddress) {
        var r = ByteReader(bytes, offset: 1)
        guard rendezvousNodes.contains(from),
            [nil, .ipv4, .ipv6].contains(where: { bytes.count == RendezvousAuth.lookupReplyLength($0) }),
            r.u8() == revueProtocolVersion,
            let nonce = r.u64()
        else {
            counters.droppedMalformed += 1
            return
        }
        // Only the node (holder of our registration key) can answer, and only our open lookups.
        guard var state = nodeStates[from], let macKey = state.macKey, nonce >> 63 == 1,
            let open = state.pendingLookups.firstIndex(where: { $0.nonce == nonce & ~(1 << 63) }),
            let plain = Sodium.open(key: macKey, nonce: nonce, ad: Array(bytes[0..<10]), ciphertext: bytes[10...])
        else {
            counters.droppedLookupReplies += 1
            return
        }
        let pending = state.pendingLookups.remove(at: open)
        nodeStates[from] = state
        var p = ByteReader(plain)
        // Found is 0 (not registered) or 1 (registered: its endpoint follows).
        guard let tag = p.take(16), let found = p.u8(), found <= 1, let status = p.u8(), let age = p.u16() else {
            counters.droppedMalformed += 1
            return
        }
        let registered = found == 1 ? p.endpoint() : nil
        guard p.remaining == 0, (found == 1) == (registered != nil) else {
            counters.droppedMalformed += 1
            return
        }
        guard tag == pending.tag, let f = friends[pending.friendId] else { return }
        let fresh = found != 0 && .seconds(Int(age)) <= timeouts.rendezvousInterval * 4 + .seconds(1)
        // A pending request's two lookups: the request tag's "not found" does not hide the other.
        if fresh || f.stored.requestNospam == nil {
            f.presence = fresh ? PresenceStatus(UserStatus(rawValue: status) ?? .none) : .offline
        }
        // An endpoint of a family our socket does not carry could never answer.
        guard let endpoint = registered, socket.carries(endpoint.family) else { return }
        if endpoint.isPrivateOrLoopback, !from.isPrivateOrLoopback, !configuration.acceptPrivateEndpointsFromPublicNodes {
            counters.droppedLookupReplies += 1
            return
        }
        let route = Route.direct(endpoint)
        let now = scheduler.now
        let isNew = f.candidates[route] == nil
        addCandidate(f, route, now: now)
        if isNew, !f.isConnected { initiateTriggered(f, route: route, now: now) }
    }

    /// The LAN announcement datagrams: our port and our LAN tags (see `PrivacyTags.lan`), for the
    /// current epoch and near a boundary the neighbouring one, at most `PrivacyTags.maxLANTags`
    /// per datagram, each padded with random tags to a multiple of 8. O(friends) BLAKE2b.
    func lanAnnouncements() -> [[UInt8]] {
        var tags: [[UInt8]] = []
        for e in PrivacyTags.epochs(wallNow()) {
            tags.append(PrivacyTags.lanRequest(publicKey: identity.publicKey, nospam: profile.nospam, epoch: e))
            for id in friendOrder {
                guard let f = friends[id], let k = pairKey(f) else { continue }
                tags.append(PrivacyTags.lan(pairKey: k, owner: identity.publicKey, epoch: e))
                // A pending request: its request tag asks the peer to announce itself now.
                if let nospam = f.stored.requestNospam, !f.isConnected {
                    tags.append(PrivacyTags.lanRequest(publicKey: f.key, nospam: nospam, epoch: e))
                }
            }
        }
        var out: [[UInt8]] = []
        for start in stride(from: 0, to: tags.count, by: PrivacyTags.maxLANTags) {
            var chunk = Array(tags[start..<min(tags.count, start + PrivacyTags.maxLANTags)])
            while chunk.count % 8 != 0 { chunk.append(RandomBytes.bytes(16)) }
            var w = ByteWriter(capacity: 5 + 16 * chunk.count)
            w.u8(PacketType.lanAnnounce.rawValue)
            w.u8(revueProtocolVersion)
            w.u16(socket.localPort)
            w.u8(UInt8(chunk.count))
            for tag in chunk { w.append(tag) }
            out.append(w.bytes)
        }
        return out
    }

    /// The friends' LAN tags we recognise (previous, current and next epoch; a pending request's
    /// request tag too), and our own request tags (under our own id: someone with our address is
    /// looking for us), rebuilt when the epoch or the friend list changes. O(friends) BLAKE2b.
    func lanTags() -> [[UInt8]: String] {
        let e = PrivacyTags.epoch(wallNow())
        if let t = lanTable, t.epoch == e { return t.tags }
        var tags: [[UInt8]: String] = [:]
        for epoch in [e &- 1, e, e &+ 1] {
            tags[PrivacyTags.lanRequest(publicKey: identity.publicKey, nospam: profile.nospam, epoch: epoch)] = ownId
        }
        for f in friends.values {
            guard let k = pairKey(f) else { continue }
            for epoch in [e &- 1, e, e &+ 1] {
                tags[PrivacyTags.lan(pairKey: k, owner: f.key, epoch: epoch)] = f.id
                if let nospam = f.stored.requestNospam {
                    tags[PrivacyTags.lanRequest(publicKey: f.key, nospam: nospam, epoch: epoch)] = f.id
                }
            }
        }
        lanTable = (e, tags)
        return tags
    }

    /// A LAN announcement: believed only on the multicast socket, with LAN discovery on, from a
    /// source on one of our subnets; each tag we recognise names a friend at the sender's
    /// address and the announced port; a new endpoint starts at most one handshake round a second.
    func handleLAN(_ bytes: [UInt8], from: SocketAddress, onMulticastSocket: Bool) {
        guard onMulticastSocket, lanSocket != nil, from.isOnLocalSubnet else {
            counters.droppedAnnounces += 1
            return
        }
        var r = ByteReader(bytes, offset: 1)
        guard bytes.first == PacketType.lanAnnounce.rawValue, r.u8() == revueProtocolVersion, let port = r.u16(),
            let count = r.u8(),
            Int(count) <= PrivacyTags.maxLANTags, r.remaining == 16 * Int(count)
        else {
            counters.droppedMalformed += 1
            return
        }
        if lanSent.contains(bytes) { return }
        let known = lanTags()
        var seen = Set<String>()
        for _ in 0..<Int(count) {
            guard let tag = r.take(16), let id = known[tag], seen.insert(id).inserted else { continue }
            guard let f = friends[id] else {
                // Our own request tag from someone else: a holder of our address looks for us, so
                // the next announcement goes at most a second after the last one.
                if id == ownId { lanFastLeft = max(lanFastLeft, 1) }
                continue
            }
            let route = Route.direct(SocketAddress(ip: from.ip, port: port))
            let now = scheduler.now
            let isNew = f.candidates[route] == nil
            addCandidate(f, route, now: now)
            if isNew, !f.isConnected { initiateTriggered(f, route: route, now: now) }
        }
    }

    func updateDiscoverable() {
        let now = scheduler.now
        let registered = lastRegistered.values.contains { now - $0 <= timeouts.rendezvousInterval * 3 + .milliseconds(500) }
        let value = registered || lanSocket != nil
        guard value != isDiscoverable else { return }
        isDiscoverable = value
        emit { $1.revue($0, didUpdateIsDiscoverable: value) }
    }
}
