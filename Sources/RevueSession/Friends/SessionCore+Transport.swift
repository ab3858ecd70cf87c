// Datagrams: demultiplexing, the Noise IK handshake as initiator and responder, transport
// packets (AEAD, replay window), frames, routes and paths.
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif
package import MediaCore

extension SessionCore {
    /// Entry point for every datagram on the session socket (and of the session fuzzer).
    package func handle(_ bytes: [UInt8], from: SocketAddress) {
        guard let first = bytes.first, let type = PacketType(rawValue: first) else {
            counters.droppedMalformed += 1
            return
        }
        switch type {
        case .handshakeInitiation: handleInitiation(bytes, route: .direct(from), relayedFrom: nil)
        case .handshakeResponse: handleResponse(bytes, route: .direct(from))
        case .transportData: handleData(bytes, route: .direct(from))
        case .rendezvousRegistered:
            var r = ByteReader(bytes, offset: 1)
            guard rendezvousNodes.contains(from), r.u8() == revueProtocolVersion, let accepted = r.u8(),
                  r.u32() != nil, r.u16() != nil, let nodeKey = r.take(32) else {
                counters.droppedMalformed += 1
                return
            }
            if nodeMacKeys[from]?.nodeKey != nodeKey {
                // First contact, or the node restarted with a new key: register again now.
                if let k = RendezvousAuth.key(secret: identity.secret, peerPublic: nodeKey) { nodeMacKeys[from] = (nodeKey, k) }
                if accepted == 0 { sendRegistration(to: from) }
            }
            if accepted == 1 { lastRegistered[from] = monotonicNow() }
            updateDiscoverable()
        case .rendezvousLookupReply: handleLookupReply(bytes, from: from)
        case .relayDeliver:
            var r = ByteReader(bytes, offset: 1)
            guard rendezvousNodes.contains(from), r.u8() == revueProtocolVersion, let source = r.take(32) else {
                counters.droppedMalformed += 1
                return
            }
            let inner = r.rest()
            switch inner.first.flatMap(PacketType.init(rawValue:)) {
            case .handshakeInitiation: handleInitiation(inner, route: .relay(from), relayedFrom: source)
            case .handshakeResponse: handleResponse(inner, route: .relay(from))
            case .transportData: handleData(inner, route: .relay(from))
            default: counters.droppedMalformed += 1
            }
        case .lanAnnounce: handleLAN(bytes, from: from)
        default:
            counters.droppedMalformed += 1
        }
    }

    func newIndex() -> UInt32 {
        if let indexSeam { return indexSeam() }
        while true {
            let i = Sodium.randomUInt32()
            if i != 0 && indices[i] == nil { return i }
        }
    }

    func nextTimestamp() -> UInt64 {
        if let timestampSeam { return timestampSeam() }
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let now = UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
        lastTimestamp = max(lastTimestamp + 1, now)
        return lastTimestamp
    }

    /// Sends a datagram on a route (wrapping it for the relay when needed).
    func send(_ packet: [UInt8], route: Route, friendKey: [UInt8]) {
        sendTap?(packet, route)
        switch route {
        case .direct(let a):
            if dropDirectSends { return }
            socket.send(packet, to: a)
        case .relay(let node):
            var w = ByteWriter(capacity: packet.count + 34)
            w.u8(PacketType.relaySend.rawValue)
            w.u8(revueProtocolVersion)
            w.append(friendKey)
            w.append(packet)
            socket.send(w.bytes, to: node)
        }
    }

    // Noise IK message 1 (both a friend reconnecting and a friend request arrive this way).
    func handleInitiation(_ bytes: [UInt8], route: Route, relayedFrom: [UInt8]?) {
        var r = ByteReader(bytes, offset: 1)
        guard r.u8() == revueProtocolVersion, let senderIndex = r.u32(),
              r.remaining >= NoiseIKHandshake.message1Overhead + 9 else {
            counters.droppedMalformed += 1
            return
        }
        // Each initiation costs four X25519 operations: a flood is cut off by a token bucket.
        let now = monotonicNow()
        handshakeTokens = min(Self.handshakeBurst, handshakeTokens + (now - handshakeTokensAt) * Self.handshakeRate)
        handshakeTokensAt = now
        guard handshakeTokens >= 1 else {
            counters.droppedRateLimited += 1
            return
        }
        handshakeTokens -= 1
        let prologue = Array(bytes[0..<6])
        var hs = NoiseIKHandshake(initiator: false, prologue: prologue, localStatic: identity, remoteStatic: nil, ephemeral: ephemeralSeam?())
        guard let payload = hs.readMessage1(r.rest()), let rs = hs.remoteStatic else {
            counters.droppedForged += 1
            return
        }
        var p = ByteReader(payload)
        guard let kindByte = p.u8(), let kind = HandshakeKind(rawValue: kindByte), let timestamp = p.u64() else {
            counters.droppedMalformed += 1
            return
        }
        let id = Hex.encode(rs)
        if id == ownId {
            counters.droppedNonFriend += 1
            return
        }
        if let relayedFrom, relayedFrom != rs {
            counters.droppedForged += 1
            return
        }
        guard let f = friends[id] else {
            guard kind == .friendRequest, let nospam = p.u32() else {
                counters.droppedNonFriend += 1
                return
            }
            guard nospam == profile.nospam else {
                counters.droppedWrongNospam += 1
                return
            }
            guard timestamp > requestTimestamps[id, default: 0] else {
                counters.droppedReplayed += 1
                return
            }
            requestTimestamps[id] = timestamp
            requestRoutes[id] = route
            let message = String(decoding: p.rest(), as: UTF8.self)
            if shownRequests.insert(id).inserted {
                counters.friendRequestsReceived += 1
                emit { $1.revue($0, didReceiveFriendRequest: id, message: message) }
            }
            return
        }
        guard timestamp > f.lastHandshakeTimestamp else {
            counters.droppedReplayed += 1
            return
        }
        f.lastHandshakeTimestamp = timestamp
        let localIndex = newIndex()
        guard let message2 = hs.writeMessage2(payload: []) else {
            counters.droppedForged += 1
            return
        }
        var w = ByteWriter(capacity: 10 + message2.count)
        w.u8(PacketType.handshakeResponse.rawValue)
        w.u8(revueProtocolVersion)
        w.u32(localIndex)
        w.u32(senderIndex)
        w.append(message2)
        if let old = f.next { indices[old.localIndex] = nil }
        f.next = TransportSession(localIndex: localIndex, remoteIndex: senderIndex, keys: hs.transportKeys(), isInitiator: false, created: now)
        indices[localIndex] = id
        f.candidates[route] = now
        send(w.bytes, route: route, friendKey: f.key)
    }

    // Noise IK message 2: our handshake completed.
    func handleResponse(_ bytes: [UInt8], route: Route) {
        var r = ByteReader(bytes, offset: 1)
        guard r.u8() == revueProtocolVersion, let senderIndex = r.u32(), let receiverIndex = r.u32(),
              r.remaining >= NoiseIKHandshake.message2Overhead else {
            counters.droppedMalformed += 1
            return
        }
        guard let id = indices[receiverIndex], let f = friends[id], var pending = f.pending, pending.localIndex == receiverIndex else {
            counters.droppedUnknownSession += 1
            return
        }
        guard pending.handshake.readMessage2(r.rest()) != nil else {
            counters.droppedForged += 1
            return
        }
        f.pending = nil
        let now = monotonicNow()
        let session = TransportSession(localIndex: receiverIndex, remoteIndex: senderIndex,
                                       keys: pending.handshake.transportKeys(), isInitiator: true, created: now)
        install(f, session, now: now)
        noteAuthenticated(f, route: route, now: now)
        sendPing(f, route: route, now: now)  // confirms the session to the responder
    }

    func install(_ f: FriendState, _ session: TransportSession, now: Double) {
        counters.handshakesCompleted += 1
        let wasConnected = f.isConnected
        if let old = f.previous, old !== f.current { indices[old.localIndex] = nil }
        f.previous = f.current
        f.current = session
        f.initiationAttempts = 0
        if !wasConnected { connected(f, now: now) }
    }

    func connected(_ f: FriendState, now: Double) {
        if f.stored.requestNospam != nil {
            f.stored.requestNospam = nil
            f.stored.requestMessage = nil
            saveSoon()
        }
        enqueueProfile(f)
        for i in f.outbound.indices { f.outbound[i].lastSent = -.infinity }
        pumpOutbound(f, now: now)
    }

    func handleData(_ bytes: [UInt8], route: Route) {
        var r = ByteReader(bytes, offset: 1)
        guard let receiverIndex = r.u32(), let counter = r.u64(), r.remaining >= 16 else {
            counters.droppedMalformed += 1
            return
        }
        guard let id = indices[receiverIndex], let f = friends[id], let session = f.session(index: receiverIndex) else {
            counters.droppedUnknownSession += 1
            return
        }
        guard session.replay.wouldAccept(counter) else {
            counters.droppedReplayed += 1
            return
        }
        guard let plain = Sodium.open(key: session.receiveKey, nonce: counter, ad: Array(bytes[0..<13]), ciphertext: bytes[13...]) else {
            counters.droppedForged += 1
            return
        }
        session.replay.record(counter)
        let now = monotonicNow()
        if session === f.next {
            f.next = nil
            install(f, session, now: now)
        }
        noteAuthenticated(f, route: route, now: now)
        handleFrame(f, plain, route: route, now: now)
    }

    func handleFrame(_ f: FriendState, _ plain: [UInt8], route: Route, now: Double) {
        var r = ByteReader(plain)
        guard let typeByte = r.u8(), let type = FrameType(rawValue: typeByte) else {
            counters.droppedMalformed += 1
            return
        }
        switch type {
        case .ping:
            guard let t = r.u64() else { return }
            var w = ByteWriter()
            w.u8(FrameType.pong.rawValue)
            w.u64(t)
            sendFrame(f, w.bytes, route: route)
        case .pong:
            guard let t = r.u64() else { return }
            let rtt = now - Double(bitPattern: t)
            if rtt >= 0 && rtt < 10 { f.routes[route]?.rtt = rtt }
        case .reliable:
            guard let epoch = r.u32(), let seq = r.u32(), let k = r.u8(), let kind = ReliableKind(rawValue: k) else {
                counters.droppedMalformed += 1
                return
            }
            handleReliable(f, epoch: epoch, seq: seq, kind: kind, body: r.rest())
        case .ack:
            guard let epoch = r.u32(), let seq = r.u32() else { return }
            handleAck(f, epoch: epoch, seq: seq)
        case .bye:
            dropSessions(f)
            updatePaths(f, now: now)
        }
    }

    func noteAuthenticated(_ f: FriendState, route: Route, now: Double) {
        f.lastReceived = now
        f.routes[route, default: RouteState(lastReceived: now)].lastReceived = now
        f.candidates[route] = now
        if case .direct(let a) = route, f.stored.endpoint != a.description {
            f.stored.endpoint = a.description
            saveSoon()
        }
        updatePaths(f, now: now)
    }

    func updatePaths(_ f: FriendState, now: Double) {
        let paths = f.paths(now: now, timeout: timeouts.connectionTimeout)
        guard paths != f.emittedPaths else { return }
        f.emittedPaths = paths
        let id = f.id
        emit { $1.revue($0, friend: id, didUpdatePaths: paths) }
        friendPathsChanged?(id, paths)
    }

    func dropSessions(_ f: FriendState) {
        for s in [f.current, f.previous, f.next].compactMap({ $0 }) { indices[s.localIndex] = nil }
        if let p = f.pending { indices[p.localIndex] = nil }
        f.current = nil
        f.previous = nil
        f.next = nil
        f.pending = nil
        f.routes = [:]
        f.lastInitiation = -.infinity
    }

    /// Encrypts one frame on the current session and sends it on `route` (default: the best).
    func sendFrame(_ f: FriendState, _ frame: [UInt8], route: Route? = nil) {
        guard let s = f.current, let route = route ?? f.bestRoute(now: monotonicNow(), timeout: timeouts.connectionTimeout) else { return }
        var w = ByteWriter(capacity: frame.count + 29)
        w.u8(PacketType.transportData.rawValue)
        w.u32(s.remoteIndex)
        w.u64(s.sendCounter)
        let sealed = Sodium.seal(key: s.sendKey, nonce: s.sendCounter, ad: w.bytes, plaintext: frame)
        s.sendCounter += 1
        w.append(sealed)
        send(w.bytes, route: route, friendKey: f.key)
    }

    func sendPing(_ f: FriendState, route: Route, now: Double) {
        var w = ByteWriter()
        w.u8(FrameType.ping.rawValue)
        w.u64(now.bitPattern)
        sendFrame(f, w.bytes, route: route)
    }

    /// Starts an IK handshake with a friend, sent to every candidate route.
    func initiate(_ f: FriendState, now: Double) {
        let localIndex = newIndex()
        var header = ByteWriter()
        header.u8(PacketType.handshakeInitiation.rawValue)
        header.u8(revueProtocolVersion)
        header.u32(localIndex)
        var hs = NoiseIKHandshake(initiator: true, prologue: header.bytes, localStatic: identity, remoteStatic: f.key, ephemeral: ephemeralSeam?())
        var payload = ByteWriter()
        if let nospam = f.stored.requestNospam {
            payload.u8(HandshakeKind.friendRequest.rawValue)
            payload.u64(nextTimestamp())
            payload.u32(nospam)
            payload.append((f.stored.requestMessage ?? "").utf8)
        } else {
            payload.u8(HandshakeKind.connect.rawValue)
            payload.u64(nextTimestamp())
        }
        guard let message = hs.writeMessage1(payload: payload.bytes) else { return }
        if let old = f.pending { indices[old.localIndex] = nil }
        f.pending = PendingHandshake(handshake: hs, localIndex: localIndex, started: now)
        indices[localIndex] = f.id
        f.lastInitiation = now
        f.initiationAttempts += 1
        var packet = header.bytes
        packet += message
        var routes = f.candidates.filter { if case .direct = $0.key { return true } else { return false } }
            .sorted { $0.value > $1.value }.prefix(4).map(\.key)
        if f.initiationAttempts >= 2 || routes.isEmpty {
            routes += rendezvousNodes.map { Route.relay($0) }
        }
        for route in routes { send(packet, route: route, friendKey: f.key) }
    }
}
