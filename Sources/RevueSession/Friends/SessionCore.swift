// The session engine behind one initialized `Revue`: identity, the UDP socket, Noise sessions with
// every friend, the reliable message stream, rendezvous registration and lookups. Runs entirely on
// the main actor (datagrams hop there from the socket's read queue); it is the control plane, so
// clarity wins over allocation-free code here. docs/session.md describes the protocol.
import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Monotonic seconds (CLOCK_MONOTONIC).
func monotonicNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

@MainActor
final class SessionCore {
    /// Largest friend message, in UTF-8 bytes (one datagram with headroom for headers).
    static let maxMessageLength = 1200
    /// Largest friend request message, in UTF-8 bytes.
    static let maxRequestMessageLength = 921
    /// Friend messages waiting for a receipt per friend before `sendQueueFull`.
    static let sendQueueCapacity = 64
    /// The LAN discovery multicast group, 239.255.77.77 (organization-local scope, RFC 2365).
    nonisolated static let lanGroup: UInt32 = 0xEFFF_4D4D
    /// Reliable items in flight per friend.
    static let sendWindow = 32

    unowned let revue: Revue
    let configuration: RevueConfiguration
    let timeouts: RevueTimeouts
    let store: ProfileStore
    let identity: KeyPair
    let ownId: String
    var profile: StoredProfile
    let socket: UDPSocket
    private var timer: DispatchSourceTimer?
    private let lanSocket: UDPSocket?

    var friends: [String: FriendState] = [:]
    var friendOrder: [String] = []
    /// Local session and handshake indices -> friend id.
    var indices: [UInt32: String] = [:]
    var counters = RevueCounters()
    /// Epoch of our outbound reliable streams for this run (a restart starts new streams).
    let streamEpoch: UInt32
    var nextMessageId: UInt32 = 1
    private var lastTimestamp: UInt64 = 0

    let rendezvousNodes: [SocketAddress]
    private var lastRegister: Double = -.infinity
    private var lastRegistered: [SocketAddress: Double] = [:]
    /// Each rendezvous node's static key (from its replies) and our MAC key with it.
    private var nodeMacKeys: [SocketAddress: (nodeKey: [UInt8], macKey: [UInt8])] = [:]
    private var lastAnnounce: Double = -.infinity
    private(set) var isDiscoverable = false

    /// Friend requests already shown this run, and where each came from.
    private var shownRequests: Set<String> = []
    private var requestRoutes: [String: Route] = [:]
    private var requestTimestamps: [String: UInt64] = [:]

    init(revue: Revue, configuration: RevueConfiguration) throws(RevueError) {
        guard Sodium.ready else { throw RevueError(.socket, "libsodium failed to initialize") }
        self.revue = revue
        self.configuration = configuration
        self.timeouts = configuration.timeouts
        var nodes: [SocketAddress] = []
        for text in configuration.rendezvousNodes {
            guard let a = SocketAddress.parse(text) else {
                throw RevueError(.invalidConfiguration, "rendezvous node '\(text)' is not host:port")
            }
            nodes.append(a)
        }
        rendezvousNodes = nodes
        store = try ProfileStore(directory: configuration.dataDirectory)
        let loaded: StoredProfile?
        do { loaded = try store.load() } catch { store.close(); throw error }
        if let loaded {
            profile = loaded
            identity = KeyPair(secret: Hex.decode(loaded.secretKey)!)
        } else {
            identity = KeyPair()
            profile = StoredProfile(secretKey: Hex.encode(identity.secret), nospam: Sodium.randomUInt32())
            guard store.save(profile) else {
                store.close()
                throw RevueError(.dataDirectory, "cannot write \(store.path)")
            }
        }
        ownId = Hex.encode(identity.publicKey)
        do {
            socket = try UDPSocket(host: configuration.bindHost, port: configuration.port)
        } catch {
            store.close()
            throw error
        }
        if configuration.lanDiscovery, let s = try? UDPSocket(host: "0.0.0.0", port: configuration.lanDiscoveryPort, reusePort: true),
           s.joinMulticast(group: SocketAddress(ip: Self.lanGroup, port: configuration.lanDiscoveryPort)) {
            lanSocket = s
        } else {
            lanSocket = nil
        }
        streamEpoch = max(1, Sodium.randomUInt32())
        for f in profile.friends {
            let key = RevueAddress.parseFriendId(f.id)!
            let state = FriendState(key: key, stored: f)
            if let e = f.endpoint, let a = SocketAddress.parse(e) { state.candidates[.direct(a)] = monotonicNow() }
            friends[state.id] = state
            friendOrder.append(state.id)
        }
    }

    /// Starts receiving and the 50 ms housekeeping timer.
    func start() {
        socket.start { [weak self] bytes, from in
            MainActor.assumeIsolated { self?.handle(bytes, from: from) }
        }
        lanSocket?.start { [weak self] bytes, from in
            MainActor.assumeIsolated { self?.handleLAN(bytes, from: from) }
        }
        let t = DispatchSource.makeTimerSource(queue: .main)
        t.schedule(deadline: .now(), repeating: .milliseconds(50))
        t.setEventHandler { [weak self] in MainActor.assumeIsolated { self?.tick() } }
        t.resume()
        timer = t
        updateDiscoverable()
        tick()
    }

    /// Says goodbye to connected friends, fails pending sends, closes the socket and the store.
    func shutdown() {
        for f in friends.values where f.isConnected { sendFrame(f, [FrameType.bye.rawValue]) }
        for f in friends.values { failWaiters(f) }
        timer?.cancel()
        timer = nil
        socket.close()
        lanSocket?.close()
        save()
        store.close()
    }

    /// Stops like a killed process: no goodbye, no final save (writes already queued finish),
    /// socket closed.
    func abandon() {
        for f in friends.values { failWaiters(f) }
        timer?.cancel()
        timer = nil
        socket.close()
        lanSocket?.close()
        store.close()
    }

    // MARK: - Identity and profile

    var address: String { RevueAddress(publicKey: identity.publicKey, nospam: profile.nospam).text }

    func setNospam(_ value: UInt32) {
        profile.nospam = value
        save()
    }

    func setSelfName(_ name: String) {
        guard name != profile.name else { return }
        profile.name = name
        profileChanged()
        let id = ownId
        emit { $1.revue($0, friend: id, didUpdateName: name) }
    }

    func setSelfStatusMessage(_ text: String) {
        guard text != profile.statusMessage else { return }
        profile.statusMessage = text
        profileChanged()
        let id = ownId
        emit { $1.revue($0, friend: id, didUpdateStatusMessage: text) }
    }

    func setSelfStatus(_ status: UserStatus) {
        guard status.rawValue != profile.status else { return }
        profile.status = status.rawValue
        profileChanged()
        lastRegister = -.infinity  // tell the presence service now
        let id = ownId
        emit { $1.revue($0, friend: id, didUpdateStatus: status) }
    }

    private func profileChanged() {
        saveSoon()
        for f in friends.values where f.isConnected { enqueueProfile(f) }
    }

    /// Writes the profile and friend list now; false when the data directory refused it.
    @discardableResult
    func save() -> Bool {
        profile.friends = friendOrder.compactMap { friends[$0]?.stored }
        return store.save(profile)
    }

    /// Queues a write of the profile and friend list off the main actor; `then` runs once it is on
    /// disk (with false if the write failed).
    func saveSoon(then: @escaping (Bool) -> Void = { _ in }) {
        profile.friends = friendOrder.compactMap { friends[$0]?.stored }
        store.saveSoon(profile, completion: then)
    }

    // MARK: - Events

    private enum Pending {
        case event((Revue, any RevueDelegate) -> Void)
        case action(() -> Void)
    }

    private var pending: [Pending] = []
    private var drainScheduled = false

    /// Queues a delegate event; events are delivered in order, after the current call returns.
    func emit(_ event: @escaping (Revue, any RevueDelegate) -> Void) {
        schedule(.event(event))
    }

    /// Queues work to run after every event queued before it has reached the delegates (used to
    /// acknowledge a message only once the App has it).
    func afterEvents(_ action: @escaping () -> Void) {
        schedule(.action(action))
    }

    private func schedule(_ item: Pending) {
        pending.append(item)
        guard !drainScheduled else { return }
        drainScheduled = true
        let revue = self.revue
        DispatchQueue.main.async { [weak self] in
            MainActor.assumeIsolated {
                guard let self else { return }
                self.drainScheduled = false
                let items = self.pending
                self.pending = []
                guard revue.core === self else { return }
                for item in items {
                    switch item {
                    case .event(let e): for d in revue.delegates.all { e(revue, d) }
                    case .action(let a): if revue.core === self { a() }
                    }
                }
            }
        }
    }

    // MARK: - Friends

    func addFriend(key: [UInt8], requestNospam: UInt32?, message: String?) throws(FriendAddError) -> String {
        let id = Hex.encode(key)
        guard id != ownId else { throw .ownAddress }
        guard friends[id] == nil else { throw .alreadyExists }
        var stored = StoredProfile.Friend(id: id)
        stored.requestNospam = requestNospam
        stored.requestMessage = message
        let f = FriendState(key: key, stored: stored)
        if let r = requestRoutes[id] { f.candidates[r] = monotonicNow() }
        friends[id] = f
        friendOrder.append(id)
        guard save() else {
            friends[id] = nil
            friendOrder.removeLast()
            throw .storageFailed
        }
        f.lastInitiation = -.infinity
        f.lastLookup = -.infinity
        tickFriend(f, now: monotonicNow())
        return id
    }

    func deleteFriend(id: String) throws(FriendDeleteError) {
        guard let f = friends[id] else { throw .notFound }
        friends[id] = nil
        let position = friendOrder.firstIndex(of: id)!
        friendOrder.remove(at: position)
        guard save() else {
            friends[id] = f
            friendOrder.insert(id, at: position)
            throw .failed(code: -1)
        }
        if f.isConnected { sendFrame(f, [FrameType.bye.rawValue]) }
        dropSessions(f)
        failWaiters(f)
    }

    private func failWaiters(_ f: FriendState) {
        let waiters = f.waiters
        f.waiters = [:]
        for (id, w) in waiters { w.continuation.resume(returning: .failure(.timeout(messageId: id))) }
    }

    // MARK: - Messages

    func sendMessage(friendId: String, message: String, timeout: Double) async -> Result<UInt32, FriendMessageError> {
        let body = Array(message.utf8)
        guard let f = friends[friendId] else { return .failure(.friendNotFound) }
        guard body.count <= Self.maxMessageLength else { return .failure(.messageTooLong) }
        guard f.isConnected else { return .failure(.friendNotReachable) }
        guard f.queuedMessages < Self.sendQueueCapacity else { return .failure(.sendQueueFull) }
        let messageId = nextMessageId
        nextMessageId = nextMessageId == UInt32.max ? 1 : nextMessageId + 1
        enqueue(f, kind: .message, body: body, messageId: messageId)
        let deadline = monotonicNow() + min(30, max(5, timeout))
        return await withCheckedContinuation { c in
            f.waiters[messageId] = MessageWaiter(continuation: c, deadline: deadline)
        }
    }

    private func enqueue(_ f: FriendState, kind: ReliableKind, body: [UInt8], messageId: UInt32?) {
        f.outbound.append(OutboundItem(seq: f.nextSeq, kind: kind, body: body, messageId: messageId))
        f.nextSeq &+= 1
        pumpOutbound(f, now: monotonicNow())
    }

    private func enqueueProfile(_ f: FriendState) {
        var w = ByteWriter()
        w.u8(profile.status)
        let name = Array(profile.name.utf8.prefix(512))
        w.u16(UInt16(name.count))
        w.append(name)
        w.append(profile.statusMessage.utf8.prefix(512))
        enqueue(f, kind: .profile, body: w.bytes, messageId: nil)
    }

    /// Sends items of the window that were never sent or whose retransmission time came.
    private func pumpOutbound(_ f: FriendState, now: Double) {
        guard f.isConnected else { return }
        for i in f.outbound.indices.prefix(Self.sendWindow) where now - f.outbound[i].lastSent >= timeouts.retransmitInterval {
            let item = f.outbound[i]
            var w = ByteWriter(capacity: item.body.count + 16)
            w.u8(FrameType.reliable.rawValue)
            w.u32(streamEpoch)
            w.u32(item.seq)
            w.u8(item.kind.rawValue)
            w.append(item.body)
            sendFrame(f, w.bytes)
            f.outbound[i].lastSent = now
        }
    }

    private func handleReliable(_ f: FriendState, epoch: UInt32, seq: UInt32, kind: ReliableKind, body: [UInt8]) {
        if epoch != f.stored.inboundEpoch {
            f.stored.inboundEpoch = epoch
            f.stored.inboundDelivered = 0
            f.inboundReceived = 0
            f.inboundAckable = 0
            f.inboundBuffer = [:]
            f.deliveryQueue = []
            f.delivering = false
            f.deliveryGeneration += 1
        }
        let received = f.inboundReceived
        if seq <= received {
            counters.duplicatesSuppressed += 1
        } else if seq - received <= 1024 {
            if f.inboundBuffer[seq] != nil { counters.duplicatesSuppressed += 1 }
            f.inboundBuffer[seq] = (kind, body)
            while let (k, b) = f.inboundBuffer.removeValue(forKey: f.inboundReceived + 1) {
                f.inboundReceived += 1
                f.deliveryQueue.append((f.inboundReceived, k, b))
            }
            pumpDelivery(f)
        }
        sendAck(f, epoch: epoch, seq: f.inboundAckable)
    }

    /// Hands the next received item to the App, then saves the stream position, then sends the
    /// receipt, then goes on with the next item. So a receipt means the App had the message and
    /// the position is on disk; a crash can at most deliver the one message in that window again
    /// after the restart, and never loses one.
    private func pumpDelivery(_ f: FriendState) {
        guard !f.delivering, !f.deliveryQueue.isEmpty else { return }
        let item = f.deliveryQueue.removeFirst()
        f.delivering = true
        let epoch = f.stored.inboundEpoch, generation = f.deliveryGeneration
        if item.kind == .profile { applyProfile(f, item.body) } else { deliverMessage(f, item.body) }
        afterEvents { [weak self, weak f] in
            guard let self, let f, self.friends[f.id] === f, f.deliveryGeneration == generation else { return }
            f.stored.inboundDelivered = max(f.stored.inboundDelivered, item.seq)
            self.saveSoon { [weak self, weak f] ok in
                guard let self, let f, self.revue.core === self, f.deliveryGeneration == generation else { return }
                f.delivering = false
                if ok {
                    f.inboundAckable = max(f.inboundAckable, item.seq)
                    self.sendAck(f, epoch: epoch, seq: f.inboundAckable)
                }
                self.pumpDelivery(f)
            }
        }
    }

    private func sendAck(_ f: FriendState, epoch: UInt32, seq: UInt32) {
        var w = ByteWriter()
        w.u8(FrameType.ack.rawValue)
        w.u32(epoch)
        w.u32(seq)
        sendFrame(f, w.bytes)
    }

    private func deliverMessage(_ f: FriendState, _ body: [UInt8]) {
        let text = String(decoding: body, as: UTF8.self)
        if Self.isReserved(body) {
            counters.reservedMessagesSwallowed += 1
            return
        }
        let id = f.id
        emit { $1.revue($0, friend: id, didReceiveMessage: text) }
    }

    /// Whether a message is one of the SDK's own: a JSON object whose "type" is msg, adr or track.
    static func isReserved(_ body: [UInt8]) -> Bool {
        guard let first = body.first(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }), first == UInt8(ascii: "{"),
              let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
              let type = object["type"] as? String else { return false }
        return type == "msg" || type == "adr" || type == "track"
    }

    private func applyProfile(_ f: FriendState, _ body: [UInt8]) {
        var r = ByteReader(body)
        guard let status = r.u8(), let n = r.u16(), let nameBytes = r.take(Int(n)) else { return }
        let name = String(decoding: nameBytes, as: UTF8.self)
        let statusMessage = String(decoding: r.rest(), as: UTF8.self)
        let id = f.id
        if name != f.stored.name {
            f.stored.name = name
            emit { $1.revue($0, friend: id, didUpdateName: name) }
        }
        if statusMessage != f.stored.statusMessage {
            f.stored.statusMessage = statusMessage
            emit { $1.revue($0, friend: id, didUpdateStatusMessage: statusMessage) }
        }
        if status != f.stored.status, let s = UserStatus(rawValue: status) {
            f.stored.status = status
            emit { $1.revue($0, friend: id, didUpdateStatus: s) }
        }
    }

    private func handleAck(_ f: FriendState, epoch: UInt32, seq: UInt32) {
        guard epoch == streamEpoch else { return }
        while let first = f.outbound.first, first.seq <= seq {
            f.outbound.removeFirst()
            if let mid = first.messageId, let w = f.waiters.removeValue(forKey: mid) {
                w.continuation.resume(returning: .success(mid))
            }
        }
    }

    // MARK: - Datagrams

    /// Entry point for every datagram on the session socket.
    func handle(_ bytes: [UInt8], from: SocketAddress) {
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

    private func newIndex() -> UInt32 {
        while true {
            let i = Sodium.randomUInt32()
            if i != 0 && indices[i] == nil { return i }
        }
    }

    private func nextTimestamp() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let now = UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
        lastTimestamp = max(lastTimestamp + 1, now)
        return lastTimestamp
    }

    // Test seams: observe every session datagram sent, and drop direct sends (to force the relay).
    var sendTap: (([UInt8], Route) -> Void)?
    var dropDirectSends = false

    /// Sends a datagram on a route (wrapping it for the relay when needed).
    private func send(_ packet: [UInt8], route: Route, friendKey: [UInt8]) {
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
    private func handleInitiation(_ bytes: [UInt8], route: Route, relayedFrom: [UInt8]?) {
        var r = ByteReader(bytes, offset: 1)
        guard r.u8() == revueProtocolVersion, let senderIndex = r.u32(),
              r.remaining >= NoiseIKHandshake.message1Overhead + 9 else {
            counters.droppedMalformed += 1
            return
        }
        let prologue = Array(bytes[0..<6])
        var hs = NoiseIKHandshake(initiator: false, prologue: prologue, localStatic: identity, remoteStatic: nil)
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
        let now = monotonicNow()
        if let old = f.next { indices[old.localIndex] = nil }
        f.next = TransportSession(localIndex: localIndex, remoteIndex: senderIndex, keys: hs.transportKeys(), isInitiator: false, created: now)
        indices[localIndex] = id
        f.candidates[route] = now
        send(w.bytes, route: route, friendKey: f.key)
    }

    // Noise IK message 2: our handshake completed.
    private func handleResponse(_ bytes: [UInt8], route: Route) {
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

    private func install(_ f: FriendState, _ session: TransportSession, now: Double) {
        counters.handshakesCompleted += 1
        let wasConnected = f.isConnected
        if let old = f.previous, old !== f.current { indices[old.localIndex] = nil }
        f.previous = f.current
        f.current = session
        f.initiationAttempts = 0
        if !wasConnected { connected(f, now: now) }
    }

    private func connected(_ f: FriendState, now: Double) {
        if f.stored.requestNospam != nil {
            f.stored.requestNospam = nil
            f.stored.requestMessage = nil
            saveSoon()
        }
        enqueueProfile(f)
        for i in f.outbound.indices { f.outbound[i].lastSent = -.infinity }
        pumpOutbound(f, now: now)
    }

    private func handleData(_ bytes: [UInt8], route: Route) {
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

    private func handleFrame(_ f: FriendState, _ plain: [UInt8], route: Route, now: Double) {
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

    private func noteAuthenticated(_ f: FriendState, route: Route, now: Double) {
        f.lastReceived = now
        f.routes[route, default: RouteState(lastReceived: now)].lastReceived = now
        f.candidates[route] = now
        if case .direct(let a) = route, f.stored.endpoint != a.description {
            f.stored.endpoint = a.description
            saveSoon()
        }
        updatePaths(f, now: now)
    }

    private func updatePaths(_ f: FriendState, now: Double) {
        let paths = f.paths(now: now, timeout: timeouts.connectionTimeout)
        guard paths != f.emittedPaths else { return }
        f.emittedPaths = paths
        let id = f.id
        emit { $1.revue($0, friend: id, didUpdatePaths: paths) }
    }

    private func dropSessions(_ f: FriendState) {
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
    private func sendFrame(_ f: FriendState, _ frame: [UInt8], route: Route? = nil) {
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

    private func sendPing(_ f: FriendState, route: Route, now: Double) {
        var w = ByteWriter()
        w.u8(FrameType.ping.rawValue)
        w.u64(now.bitPattern)
        sendFrame(f, w.bytes, route: route)
    }

    /// Starts an IK handshake with a friend, sent to every candidate route.
    private func initiate(_ f: FriendState, now: Double) {
        let localIndex = newIndex()
        var header = ByteWriter()
        header.u8(PacketType.handshakeInitiation.rawValue)
        header.u8(revueProtocolVersion)
        header.u32(localIndex)
        var hs = NoiseIKHandshake(initiator: true, prologue: header.bytes, localStatic: identity, remoteStatic: f.key)
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

    // MARK: - Timers

    private var lastTick = monotonicNow()
    /// After the main actor was held up (a stall, a suspended process), friends get time to be
    /// heard again before any is declared offline.
    private var timeoutGraceUntil = -Double.infinity

    private func tick() {
        let now = monotonicNow()
        if now - lastTick > timeouts.connectionTimeout / 2 { timeoutGraceUntil = now + 2 * timeouts.keepaliveInterval }
        lastTick = now
        for id in friendOrder {
            if let f = friends[id] { tickFriend(f, now: now) }
        }
        if !rendezvousNodes.isEmpty, now - lastRegister >= timeouts.rendezvousInterval {
            lastRegister = now
            for node in rendezvousNodes { sendRegistration(to: node) }
            updateDiscoverable()
        }
        if let lanSocket, isDiscoverable, now - lastAnnounce >= 1 {
            lastAnnounce = now
            var w = ByteWriter()
            w.u8(PacketType.lanAnnounce.rawValue)
            w.u8(revueProtocolVersion)
            w.append(identity.publicKey)
            w.u16(socket.localPort)
            lanSocket.send(w.bytes, to: SocketAddress(ip: Self.lanGroup, port: configuration.lanDiscoveryPort))
        }
    }

    private func tickFriend(_ f: FriendState, now: Double) {
        if f.isConnected, now - f.lastReceived > timeouts.connectionTimeout, now >= timeoutGraceUntil {
            dropSessions(f)
        }
        updatePaths(f, now: now)
        if let c = f.current {
            if now - f.lastPing >= timeouts.keepaliveInterval {
                f.lastPing = now
                for (route, state) in f.routes where now - state.lastReceived <= timeouts.connectionTimeout {
                    sendPing(f, route: route, now: now)
                }
            }
            // Only relayed: keep probing the direct candidates so a direct path is found again.
            let hasDirect = f.routes.contains { if case .direct = $0.key { now - $0.value.lastReceived <= timeouts.connectionTimeout } else { false } }
            if !hasDirect, now - f.lastProbe >= timeouts.handshakeRetryInterval {
                f.lastProbe = now
                let direct = f.candidates.filter { if case .direct = $0.key { true } else { false } }
                for (route, _) in direct.sorted(by: { $0.value > $1.value }).prefix(4) { sendPing(f, route: route, now: now) }
            }
            let age = now - c.created
            if f.pending == nil, age > timeouts.rekeyInterval * (c.isInitiator ? 1 : 1.1),
               now - f.lastInitiation >= timeouts.handshakeRetryInterval {
                initiate(f, now: now)
            }
            pumpOutbound(f, now: now)
        } else if now - f.lastInitiation >= timeouts.handshakeRetryInterval {
            initiate(f, now: now)
        }
        let lookupEvery = f.isConnected ? timeouts.rendezvousInterval * 3 : timeouts.rendezvousInterval
        if !rendezvousNodes.isEmpty, now - f.lastLookup >= lookupEvery {
            f.lastLookup = now
            var w = ByteWriter()
            w.u8(PacketType.rendezvousLookup.rawValue)
            w.u8(revueProtocolVersion)
            w.append(f.key)
            for node in rendezvousNodes { socket.send(w.bytes, to: node) }
        }
        if !f.waiters.isEmpty {
            for (mid, w) in f.waiters where now >= w.deadline {
                f.waiters[mid] = nil
                w.continuation.resume(returning: .failure(.timeout(messageId: mid)))
            }
        }
    }

    // MARK: - Rendezvous and LAN

    /// Tells a rendezvous node where we are and our status, authenticated once its key is known.
    private func sendRegistration(to node: SocketAddress) {
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

    private func handleLookupReply(_ bytes: [UInt8], from: SocketAddress) {
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

    private func handleLAN(_ bytes: [UInt8], from: SocketAddress) {
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

    private func updateDiscoverable() {
        let now = monotonicNow()
        let registered = lastRegistered.values.contains { now - $0 <= timeouts.rendezvousInterval * 3 + 0.5 }
        let value = registered || lanSocket != nil
        guard value != isDiscoverable else { return }
        isDiscoverable = value
        emit { $1.revue($0, didUpdateIsDiscoverable: value) }
    }
}
