// Datagrams: demultiplexing, the Noise IK handshake as initiator and responder, transport
// packets (AEAD, replay window), frames, routes and paths.
import Dispatch
package import MediaCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

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
        case .cookieReply: handleCookieReply(bytes, route: .direct(from))
        case .rendezvousRegistered: handleRegistered(bytes, from: from)
        case .rendezvousLookupReply: handleLookupReply(bytes, from: from)
        case .turnCredentials: handleCredentials(bytes, from: from)
        case .relayDeliver:
            var r = ByteReader(bytes, offset: 1)
            guard rendezvousNodes.contains(from), r.u8() == revueProtocolVersion, let source = r.take(16) else {
                counters.droppedMalformed += 1
                return
            }
            let inner = r.rest()
            switch inner.first.flatMap(PacketType.init(rawValue:)) {
            case .handshakeInitiation: handleInitiation(inner, route: .relay(from), relayedFrom: source)
            case .handshakeResponse: handleResponse(inner, route: .relay(from))
            case .transportData: handleData(inner, route: .relay(from))
            case .cookieReply: handleCookieReply(inner, route: .relay(from))
            default: counters.droppedMalformed += 1
            }
        case .lanAnnounce: handleLAN(bytes, from: from, onMulticastSocket: false)
        default:
            counters.droppedMalformed += 1
        }
    }

    func newIndex() -> UInt32 {
        if let index = environment.randomness.sessionIndex { return index() }
        while true {
            let i = RandomBytes.uint32()
            if i != 0 && indices[i] == nil { return i }
        }
    }

    func nextTimestamp() -> UInt64 {
        if let timestamp = environment.handshakeTimestamp { return timestamp() }
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let now = UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
        lastTimestamp = max(lastTimestamp + 1, now)
        return lastTimestamp
    }

    /// Sends a datagram on a route (wrapping it for the relay when needed). Through a relay the
    /// target is named by a tag (`relayTags`), or by `relayTarget` (a source tag we received).
    /// `link`: the friend's link when the caller holds the friend (a friend being deleted is no
    /// longer in `friends`, and its goodbye still goes on its link).
    func send(_ packet: [UInt8], route: Route, friendKey: [UInt8], relayTarget: [UInt8]? = nil, link: FriendLink? = nil) {
        environment.sendTap?(packet, route)
        switch route {
        case .direct(let a):
            if environment.faults.dropDirectSends { return }
            socket.send(packet, to: a)
        case .link:
            if environment.faults.dropDirectSends { return }
            (link ?? friends[Hex.encode(friendKey)]?.link)?.send(packet)
        case .relay(let node):
            // The node forwards only with the token it gave our registration, and only from a
            // source tag we registered.
            guard let state = nodeStates[node], let token = state.token else { return }
            let tags: (target: [UInt8], source: [UInt8])
            if let relayTarget {
                tags = (
                    relayTarget,
                    PrivacyTags.request(
                        publicKey: identity.publicKey, nospam: profile.nospam, epoch: PrivacyTags.epoch(wallNow()))
                )
            } else if let t = relayTags(for: friendKey) {
                tags = t
            } else {
                return
            }
            var w = ByteWriter(capacity: packet.count + RendezvousAuth.relaySendHeaderLength)
            w.u8(PacketType.relaySend.rawValue)
            w.u8(revueProtocolVersion)
            w.append(state.tokenKey ?? state.registrationKeys.publicKey)
            w.append(token)
            w.append(tags.target)
            w.append(tags.source)
            w.append(packet)
            socket.send(w.bytes, to: node)
        }
    }

    // Noise IK message 1 (both a friend reconnecting and a friend request arrive this way).
    func handleInitiation(_ bytes: [UInt8], route: Route, relayedFrom: [UInt8]?) {
        var r = ByteReader(bytes, offset: 1)
        guard r.u8() == revueProtocolVersion, let senderIndex = r.u32(),
            r.remaining >= NoiseIKHandshake.message1Overhead + 9 + HandshakeMACs.trailerLength
        else {
            counters.droppedMalformed += 1
            return
        }
        // mac1 first: a sender that does not know our public key costs one BLAKE2b, no X25519.
        let macStart = bytes.count - HandshakeMACs.trailerLength
        let mac1 = Array(bytes[macStart..<macStart + 16]), mac2 = Array(bytes[(macStart + 16)...])
        guard Sodium.equal(Sodium.keyedBlake2b(key: ownMac1Key, Array(bytes[0..<macStart])), mac1) else {
            counters.droppedForged += 1
            return
        }
        // Each initiation costs four X25519 operations. Every one that passes mac1 takes a token
        // of the load bucket (200/s, bursts of 400); with less than half of it left we are under
        // load, and only initiations whose mac2 proves the sender receives at its address (with a
        // cookie we sent there) get through, each source within its own small budget. The others
        // get a cookie reply, smaller than what they sent.
        let now = scheduler.now
        handshakeTokens = min(Self.handshakeBurst, handshakeTokens + (now - handshakeTokensAt).inSeconds * Self.handshakeRate)
        handshakeTokensAt = now
        handshakeTokens = max(0, handshakeTokens - 1)
        if handshakeTokens < Self.handshakeBurst / 2 {
            // Handshakes arrive on the session socket only, so the route has an endpoint.
            guard let source = route.endpoint else { return }
            let cookieInput = HandshakeMACs.endpointBytes(source) + (relayedFrom ?? [])
            let macInput = Array(bytes[0..<(macStart + 16)])
            let valid = gate.mac2Valid(mac2, macInput: macInput, cookieInput: cookieInput)
            guard valid else {
                counters.droppedRateLimited += 1
                sendCookieReply(
                    to: route, senderIndex: senderIndex, mac1: mac1, cookieInput: cookieInput, relayedFrom: relayedFrom)
                return
            }
            guard sourceTokens.count < Self.maxSources || sourceTokens[source] != nil else {
                counters.droppedRateLimited += 1
                return
            }
            var bucket = sourceTokens[source] ?? (Self.perSourceBurst, now)
            bucket.tokens = min(Self.perSourceBurst, bucket.tokens + (now - bucket.at).inSeconds * Self.perSourceRate)
            bucket.at = now
            guard bucket.tokens >= 1 else {
                sourceTokens[source] = bucket
                counters.droppedRateLimited += 1
                return
            }
            bucket.tokens -= 1
            sourceTokens[source] = bucket
        }
        let prologue = Array(bytes[0..<6])
        var hs = NoiseIKHandshake(
            initiator: false, prologue: prologue, localStatic: identity, remoteStatic: nil,
            ephemeral: environment.randomness.ephemeralKeys?())
        guard let payload = hs.readMessage1(Array(bytes[6..<macStart])), let rs = hs.remoteStatic else {
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
        if let relayedFrom, !isRelayTag(relayedFrom, of: rs) {
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
            if requestTimestamps[id] == nil, requestTimestamps.count >= Self.maxRequests {
                // Full: forget the requests not shown to the App (they are retried) first.
                let victim = requestTimestamps.keys.first { !shownRequests.contains($0) } ?? requestTimestamps.keys.first!
                requestTimestamps[victim] = nil
                requestRoutes[victim] = nil
                shownRequests.remove(victim)
                counters.requestsForgotten += 1
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
        // Durable before we answer: the profile holds a reservation at or above every timestamp
        // we answered, so after a crash (even right after this response left) the same initiation
        // is refused. One synchronous write covers `handshakeReservation` of the friend's clock,
        // so rekeys (every 2 minutes) rarely wait for the disk; a friend that makes us write more
        // than once a second is refused (`droppedRateLimited`), and a failed write answers nothing.
        if timestamp > f.stored.handshakeTimestamp ?? 0 {
            guard now.since(f.lastReservationWrite) >= Self.reservationWriteInterval else {
                counters.droppedRateLimited += 1
                return
            }
            let old = f.stored.handshakeTimestamp
            f.stored.handshakeTimestamp = timestamp &+ min(Self.handshakeReservation, UInt64.max - timestamp)
            f.lastReservationWrite = now
            guard save() else {
                f.stored.handshakeTimestamp = old
                return
            }
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
        if let older = f.previousNext { indices[older.localIndex] = nil }
        f.previousNext = f.next
        f.next = TransportSession(
            localIndex: localIndex, remoteIndex: senderIndex, keys: hs.transportSecrets(), isInitiator: false, created: now)
        indices[localIndex] = id
        addCandidate(f, route, now: now)
        send(w.bytes, route: route, friendKey: f.key)
    }

    // Noise IK message 2: our handshake completed.
    func handleResponse(_ bytes: [UInt8], route: Route) {
        var r = ByteReader(bytes, offset: 1)
        guard r.u8() == revueProtocolVersion, let senderIndex = r.u32(), let receiverIndex = r.u32(),
            r.remaining >= NoiseIKHandshake.message2Overhead
        else {
            counters.droppedMalformed += 1
            return
        }
        guard let id = indices[receiverIndex], let f = friends[id],
            var pending = [f.pending, f.previousPending].compactMap({ $0 }).first(where: { $0.localIndex == receiverIndex })
        else {
            counters.droppedUnknownSession += 1
            return
        }
        // An answer to the replaced handshake counts only while no session came up since.
        if pending.localIndex != f.pending?.localIndex, let c = f.current, c.created >= pending.started {
            counters.droppedUnknownSession += 1
            return
        }
        guard pending.handshake.readMessage2(r.rest()) != nil else {
            counters.droppedForged += 1
            return
        }
        for p in [f.pending, f.previousPending].compactMap({ $0 }) where p.localIndex != receiverIndex {
            indices[p.localIndex] = nil
        }
        f.pending = nil
        f.previousPending = nil
        let now = scheduler.now
        let session = TransportSession(
            localIndex: receiverIndex, remoteIndex: senderIndex,
            keys: pending.handshake.transportSecrets(), isInitiator: true, created: now)
        install(f, session, now: now)
        noteAuthenticated(f, route: route, now: now)
        sendPing(f, route: route, now: now)  // confirms the session to the responder
    }

    func install(_ f: FriendState, _ session: TransportSession, now: MonotonicTime) {
        counters.handshakesCompleted += 1
        let wasConnected = f.isConnected
        if let old = f.previous, old !== f.current { indices[old.localIndex] = nil }
        f.previous = f.current
        f.current = session
        f.initiationAttempts = 0
        if !wasConnected { connected(f, now: now) }
    }

    func connected(_ f: FriendState, now: MonotonicTime) {
        if f.stored.requestNospam != nil {
            f.stored.requestNospam = nil
            f.stored.requestMessage = nil
            saveSoon()
        }
        enqueueProfile(f)
        for i in f.outbound.indices { f.outbound[i].lastSent = nil }
        pumpOutbound(f, now: now)
        if let link = f.link {
            // A link kept from before an outage: tell the friend again, it may have a new one.
            link.peerKnows = nil
            announceLink(f, now: now)
        } else {
            _ = ensureLink(f)
        }
    }

    /// A datagram the friend's link received (first byte in the session's range, any sender):
    /// only transport data, and only of that friend's sessions, is taken.
    func handleLinkDatagram(_ bytes: [UInt8], friendId: String) {
        guard bytes.first == PacketType.transportData.rawValue else {
            counters.droppedMalformed += 1
            return
        }
        guard let f = friends[friendId], f.link != nil else { return }
        handleData(bytes, route: .link, on: f)
    }

    /// `on`: the friend whose link the packet came on; a packet of another friend's session is
    /// then dropped as forged (a link is that friend's path only).
    func handleData(_ bytes: [UInt8], route: Route, on linkFriend: FriendState? = nil) {
        var r = ByteReader(bytes, offset: 1)
        guard let receiverIndex = r.u32(), let counter = r.u64(), r.remaining >= 16 else {
            counters.droppedMalformed += 1
            return
        }
        guard let id = indices[receiverIndex], let f = friends[id], let session = f.session(index: receiverIndex) else {
            counters.droppedUnknownSession += 1
            return
        }
        if let linkFriend, linkFriend !== f {
            counters.droppedForged += 1
            return
        }
        guard session.replay.wouldAccept(counter) else {
            counters.droppedReplayed += 1
            return
        }
        guard !isExpired(session, now: scheduler.now), counter < environment.faults.sessionMessageLimit else {
            counters.droppedExpired += 1
            return
        }
        guard let plain = Sodium.open(key: session.receiveKey, nonce: counter, ad: Array(bytes[0..<13]), ciphertext: bytes[13...])
        else {
            counters.droppedForged += 1
            return
        }
        session.replay.record(counter)
        let now = scheduler.now
        if session === f.next || session === f.previousNext {
            // The initiator confirmed this one: the other answered session will never be used.
            let other = session === f.next ? f.previousNext : f.next
            if let other { indices[other.localIndex] = nil }
            f.next = nil
            f.previousNext = nil
            install(f, session, now: now)
        }
        noteAuthenticated(f, route: route, now: now)
        handleFrame(f, plain, route: route, now: now)
    }

    func handleFrame(_ f: FriendState, _ plain: [UInt8], route: Route, now: MonotonicTime) {
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
            // Our ping's send time, echoed.
            let rtt = now - MonotonicTime(nanoseconds: t)
            if rtt >= .zero && rtt < .seconds(10) {
                f.routes[route]?.rtt = rtt
                f.routes[route]?.confirmedAt = now
            }
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
        case .link:
            handleLinkFrame(f, &r, now: now)
        }
    }

    func noteAuthenticated(_ f: FriendState, route: Route, now: MonotonicTime) {
        f.lastReceived = now
        if f.routes[route] == nil, f.routes.count >= Self.maxRoutes,
            let oldest = f.routes.min(by: { $0.value.lastReceived < $1.value.lastReceived })
        {
            f.routes[oldest.key] = nil
        }
        f.routes[route, default: RouteState(lastReceived: now)].lastReceived = now
        if route != .link { addCandidate(f, route, now: now) }
        if case .direct(let a) = route, f.stored.endpoint != a.description {
            f.stored.endpoint = a.description
            f.storedRoute = route
            saveSoon()
        }
        updatePaths(f, now: now)
    }

    func updatePaths(_ f: FriendState, now: MonotonicTime) {
        let paths = f.paths(now: now, timeout: timeouts.connectionTimeout)
        guard paths != f.emittedPaths else { return }
        f.emittedPaths = paths
        let id = f.id
        emit { $1.revue($0, friend: id, didUpdatePaths: paths) }
        friendPathsChanged?(id, paths)
    }

    func dropSessions(_ f: FriendState) {
        for s in [f.current, f.previous, f.next, f.previousNext].compactMap({ $0 }) { indices[s.localIndex] = nil }
        if let p = f.pending { indices[p.localIndex] = nil }
        if let p = f.previousPending { indices[p.localIndex] = nil }
        f.current = nil
        f.previous = nil
        f.next = nil
        f.previousNext = nil
        f.pending = nil
        f.previousPending = nil
        f.routes = [:]
        f.lastInitiation = nil
    }

    /// Encrypts one frame on the current session and sends it on `route` (default: the best).
    func sendFrame(_ f: FriendState, _ frame: [UInt8], route: Route? = nil) {
        guard let s = f.current,
            let route = route
                ?? f.bestRoute(
                    now: scheduler.now, timeout: timeouts.connectionTimeout, useLink: !environment.faults.dropDirectSends)
        else {
            return
        }
        guard !isExpired(s, now: scheduler.now), s.sendCounter < environment.faults.sessionMessageLimit else {
            counters.droppedExpired += 1
            return
        }
        var w = ByteWriter(capacity: frame.count + 29)
        w.u8(PacketType.transportData.rawValue)
        w.u32(s.remoteIndex)
        w.u64(s.sendCounter)
        let sealed = Sodium.seal(key: s.sendKey, nonce: s.sendCounter, ad: w.bytes, plaintext: frame)
        s.sendCounter += 1
        w.append(sealed)
        send(w.bytes, route: route, friendKey: f.key, link: f.link)
    }

    func sendPing(_ f: FriendState, route: Route, now: MonotonicTime) {
        var w = ByteWriter()
        w.u8(FrameType.ping.rawValue)
        w.u64(now.nanoseconds)
        sendFrame(f, w.bytes, route: route)
    }

    /// Starts a handshake round because a new endpoint was claimed for a friend (a lookup answer
    /// or a LAN announcement): sent to that endpoint only, and at most once a
    /// `triggeredInitiationGap` per friend, so claims cannot make us send faster than they arrive.
    func initiateTriggered(_ f: FriendState, route: Route, now: MonotonicTime) {
        guard now.since(f.lastTriggered) >= Self.triggeredInitiationGap else {
            counters.initiationsThrottled += 1
            return
        }
        f.lastTriggered = now
        initiate(f, now: now, only: route)
    }

    /// Records a candidate route for a friend, forgetting the oldest when the table is full.
    func addCandidate(_ f: FriendState, _ route: Route, now: MonotonicTime) {
        if f.candidates[route] == nil, f.candidates.count >= Self.maxCandidates,
            let oldest = f.candidates.min(by: { $0.value < $1.value })
        {
            f.candidates[oldest.key] = nil
            counters.candidatesDropped += 1
        }
        f.candidates[route] = now
    }

    /// Starts an IK handshake with a friend, sent to the freshest candidate routes (and the stored
    /// endpoint), or to `only`.
    func initiate(_ f: FriendState, now: MonotonicTime, only: Route? = nil) {
        let localIndex = newIndex()
        var header = ByteWriter()
        header.u8(PacketType.handshakeInitiation.rawValue)
        header.u8(revueProtocolVersion)
        header.u32(localIndex)
        var hs = NoiseIKHandshake(
            initiator: true, prologue: header.bytes, localStatic: identity, remoteStatic: f.key,
            ephemeral: environment.randomness.ephemeralKeys?())
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
        var body = header.bytes
        body += message
        let mac1 = Sodium.keyedBlake2b(key: HandshakeMACs.mac1Key(f.key), body)
        if let old = f.previousPending { indices[old.localIndex] = nil }
        f.previousPending = f.pending
        f.pending = PendingHandshake(handshake: hs, localIndex: localIndex, started: now, body: body, mac1: mac1)
        indices[localIndex] = f.id
        f.lastInitiation = now
        f.initiationAttempts += 1
        var routes: [Route]
        if let only {
            routes = [only]
        } else {
            routes = f.candidates.filter { if case .direct = $0.key { return true } else { return false } }
                .sorted(by: Route.newestFirst).prefix(4).map(\.key)
            if let stored = f.storedRoute, !routes.contains(stored) { routes.append(stored) }
            if f.initiationAttempts >= 2 || routes.isEmpty {
                routes += rendezvousNodes.map { Route.relay($0) }
            }
        }
        for route in routes { sendInitiation(f, route: route, now: now) }
    }

    /// Sends the pending initiation on a route with its mac1, and a mac2 when we hold a fresh
    /// cookie from that route's endpoint.
    func sendInitiation(_ f: FriendState, route: Route, now: MonotonicTime) {
        guard let p = f.pending else { return }
        var packet = p.body + p.mac1
        if let c = f.cookie, c.endpoint == route.endpoint, now - c.received < Self.cookieSecretLifetime - .seconds(10) {
            packet += Sodium.keyedBlake2b(key: c.value, packet)
        } else {
            packet += [UInt8](repeating: 0, count: 16)
        }
        send(packet, route: route, friendKey: f.key)
    }

    /// Under load: tells the sender of an initiation the cookie for its address, encrypted so
    /// only a holder of our public key reads it. 46 bytes, a third of the initiation: no
    /// amplification toward a spoofed source.
    func sendCookieReply(to route: Route, senderIndex: UInt32, mac1: [UInt8], cookieInput: [UInt8], relayedFrom: [UInt8]?) {
        counters.cookieRepliesSent += 1
        send(
            gate.cookieReply(senderIndex: senderIndex, mac1: mac1, cookieInput: cookieInput), route: route, friendKey: [],
            relayTarget: relayedFrom)
    }

    /// A responder under load sent us a cookie for our pending initiation: keep it and send the
    /// initiation again with mac2, once.
    func handleCookieReply(_ bytes: [UInt8], route: Route) {
        var r = ByteReader(bytes, offset: 1)
        guard r.u8() == revueProtocolVersion, let index = r.u32(), let nonce = r.u64(), let sealed = r.take(32), r.remaining == 0
        else {
            counters.droppedMalformed += 1
            return
        }
        guard let id = indices[index], let f = friends[id], var p = f.pending, p.localIndex == index, !p.resentWithCookie else {
            counters.droppedUnknownSession += 1
            return
        }
        guard let cookie = Sodium.open(key: HandshakeMACs.cookieKey(f.key), nonce: nonce, ad: p.mac1, ciphertext: sealed) else {
            counters.droppedForged += 1
            return
        }
        guard let endpoint = route.endpoint else { return }
        let now = scheduler.now
        f.cookie = HandshakeCookie(value: cookie, endpoint: endpoint, received: now)
        p.resentWithCookie = true
        f.pending = p
        sendInitiation(f, route: route, now: now)
    }

    /// Whether a session passed its hard lifetime: past `rekeyInterval` plus a margin for the
    /// rekey to finish, its keys are never used again (WireGuard's REJECT_AFTER_TIME).
    func isExpired(_ s: TransportSession, now: MonotonicTime) -> Bool {
        now - s.created > hardSessionLifetime
    }

    /// `rekeyInterval` * 1.5, at least `rekeyInterval` + 30 s (tests may shorten it).
    var hardSessionLifetime: Duration {
        environment.faults.sessionLifetime ?? max(timeouts.rekeyInterval * 1.5, timeouts.rekeyInterval + .seconds(30))
    }

    /// Drops a friend's sessions that passed their hard lifetime or message limit; with none left
    /// the friend is offline until a new handshake completes.
    func expireSessions(_ f: FriendState, now: MonotonicTime) {
        func dead(_ s: TransportSession?) -> Bool {
            guard let s else { return false }
            let limit = environment.faults.sessionMessageLimit
            return isExpired(s, now: now) || s.sendCounter >= limit || s.replay.highest >= limit
        }
        if dead(f.previous) { indices[f.previous!.localIndex] = nil; f.previous = nil }
        if dead(f.next) { indices[f.next!.localIndex] = nil; f.next = nil }
        if dead(f.previousNext) { indices[f.previousNext!.localIndex] = nil; f.previousNext = nil }
        if dead(f.current) {
            let pending = f.pending, previousPending = f.previousPending
            let attempt = f.lastInitiation
            dropSessions(f)
            // A rekey in flight stays answerable.
            f.pending = pending
            f.previousPending = previousPending
            for p in [pending, previousPending].compactMap({ $0 }) { indices[p.localIndex] = f.id }
            f.lastInitiation = attempt
            updatePaths(f, now: now)
        }
    }
}
