// The session engine behind one initialized `Revue`: identity, the UDP socket, Noise sessions with
// every friend, the reliable message stream, rendezvous registration and lookups. Runs entirely on
// the main actor (datagrams hop there from the socket's read queue); it is the control plane, so
// clarity wins over allocation-free code here. docs/session.md describes the protocol.
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

@MainActor
package final class SessionCore {
    /// Largest friend message, in UTF-8 bytes (one datagram with headroom for headers).
    static let maxMessageLength = 1200
    /// Largest friend request message, in UTF-8 bytes.
    static let maxRequestMessageLength = 921
    /// Friend messages waiting for a receipt per friend before `sendQueueFull`.
    static let sendQueueCapacity = 64
    /// The LAN discovery multicast group, 239.255.77.77 (organization-local scope, RFC 2365).
    nonisolated static let lanGroup: UInt32 = 0xEFFF_4D4D
    /// Handshake initiations processed per second at most (and in one burst). Past half the
    /// burst the responder is under load: initiations then need a valid mac2 (a cookie) and pass a
    /// per-source limit.
    static let handshakeRate = 200.0
    package static let handshakeBurst = 400.0
    /// Initiations per second (and burst) one source with a valid cookie gets under load.
    static let perSourceRate = 4.0
    static let perSourceBurst = 8.0
    /// Sources tracked for the per-source limit at once.
    static let maxSources = 4096
    /// Candidate endpoints per friend.
    static let maxCandidates = 8
    /// Authenticated routes kept per friend.
    static let maxRoutes = 8
    /// Candidates not heard of again for this long are forgotten.
    static let candidateLifetime = Duration.seconds(30)
    /// A new candidate starts a handshake round at most this often per friend.
    static let triggeredInitiationGap = Duration.seconds(1)
    /// Friend requests from strangers remembered at once (for replay checks and accepting).
    static let maxRequests = 256
    /// Items of the SDK's own messages (call signalling) queued per friend beyond the App's.
    static let reservedQueueCapacity = 64
    /// Received items waiting for delivery to the App (or reordering) per friend.
    static let inboundWindow: UInt32 = 256
    /// Cookies given under load are MACs with a secret replaced this often.
    static let cookieSecretLifetime = Duration.seconds(120)
    /// How far past an accepted handshake timestamp the stored reservation reaches (10 minutes of
    /// the friend's clock, in nanoseconds): one synchronous profile write answers every handshake
    /// of that friend for that long. After a crash the friend's own initiations are refused until
    /// its clock passes the reservation (ours to it still connect at once).
    static let handshakeReservation: UInt64 = 600 * 1_000_000_000
    /// Least time between two reservation writes for one friend.
    static let reservationWriteInterval = Duration.seconds(1)
    /// Reliable items in flight per friend.
    static let sendWindow = 32

    unowned let revue: Revue
    /// Set by `shutdown()` and `abandon()`: work queued before (a save completing, an event) then
    /// finds a stopped core without touching `revue`, which may be gone by then.
    private(set) var isStopped = false
    /// Whether this core is still the running one of its `Revue`.
    var isCurrent: Bool { !isStopped && revue.core === self }
    let configuration: RevueConfiguration
    let timeouts: SessionTimeouts
    let store: ProfileStore
    let identity: KeyPair
    let ownId: String
    var profile: StoredProfile
    /// The clock, socket, randomness, send tap and faults the session runs with (set at
    /// construction; tests and the session fuzzer change the parts read as it runs).
    package var environment: SessionEnvironment
    /// The clock and timer queue of everything the session does (`SessionEnvironment.scheduler`).
    var scheduler: any TaskScheduler { environment.scheduler }
    let socket: any DatagramPort
    var timer: ScheduledWork?
    let lanSocket: SessionSocket?

    var friends: [String: FriendState] = [:]
    var friendOrder: [String] = []
    /// Local session and handshake indices -> friend id.
    var indices: [UInt32: String] = [:]
    package var counters = RevueCounters()
    /// Epoch of our outbound reliable streams for this run (a restart starts new streams).
    let streamEpoch: UInt32
    var nextMessageId: UInt32 = 1
    var lastTimestamp: UInt64 = 0

    let rendezvousNodes: [SocketAddress]
    /// When we last registered at the rendezvous nodes (nil: not yet, or due now).
    var lastRegister: MonotonicTime?
    var lastRegistered: [SocketAddress: MonotonicTime] = [:]
    /// What we know of each rendezvous node: its static key (from its replies), our MAC key with
    /// it, the cookie it gave our endpoint, our relay token, and the nonces of our open lookups.
    var nodeStates: [SocketAddress: NodeState] = [:]
    /// When we last announced on the LAN (nil: not yet).
    var lastAnnounce: MonotonicTime?
    /// Announce every 5-10 s until then, and while a friend is offline (see `announceInterval`).
    var lanEagerUntil = MonotonicTime.zero
    /// How long after start or a new friend announcements stay eager.
    package var lanEagerWindow = Duration.seconds(60)
    /// Announcements left at one a second (after start or a new friend).
    var lanFastLeft = 0
    /// Announcements at one a second after start or a new friend.
    static let lanFastCount = 3
    /// The eager gap until the next announcement, drawn in `lanEagerGap` after each one (jitter).
    var lanEagerGapNow = Duration.seconds(5)
    /// Range of the eager gap between announcements.
    static let lanEagerGap = Duration.seconds(5)...Duration.seconds(10)
    /// Announcement interval when every friend is connected and the eager window passed.
    static let lanQuietInterval = Duration.seconds(15)
    /// LAN tags of friends (previous, current and next epoch) -> friend id, for the epoch it was
    /// built in; nil after the friend list changed.
    var lanTable: (epoch: UInt32, tags: [[UInt8]: String])?
    /// Our last announcement datagrams (multicast loops them back to us: they are ignored).
    var lanSent: [[UInt8]] = []
    var isDiscoverable = false
    package var handshakeTokens = SessionCore.handshakeBurst
    var handshakeTokensAt: MonotonicTime
    /// Per-source token buckets used under load, keyed by endpoint.
    var sourceTokens: [SocketAddress: (tokens: Double, at: MonotonicTime)] = [:]
    /// The read-queue screen of initiations; it also holds the cookie secrets (made when).
    let gate: HandshakeGate
    var cookieSecretAt: MonotonicTime
    /// Our own mac1 key (responder side), computed once.
    lazy var ownMac1Key = HandshakeMACs.mac1Key(identity.publicKey)

    // Hooks for the call layer: every message a friend sends is offered to it first (friend id,
    // bytes; it answers whether the message was the SDK's own, so it parses it once), and a
    // friend about to be deleted (to end a call or an invitation first).
    var reservedMessageHandler: ((String, [UInt8]) -> Bool)?
    var friendWillBeDeleted: ((String) -> Void)?
    /// Call layer: every housekeeping tick (monotonic now), a friend's paths changed, a friend's
    /// (or, with your own id, your) name, status message or status changed.
    var tickHook: ((MonotonicTime) -> Void)?
    var friendPathsChanged: ((String, FriendConnectionPaths) -> Void)?
    /// Call layer: a friend link's selected pair changed (the call's media follows it).
    var linkRouteChanged: ((String) -> Void)?
    /// How often a `link` frame is repeated while the friend lacks part of ours, and the least
    /// gap between two answered at once.
    static let linkAnnounceInterval = Duration.milliseconds(500)
    static let linkAnswerGap = Duration.milliseconds(100)
    var profileObserver: ((String, ProfileField) -> Void)?

    enum ProfileField { case name, statusMessage, status }

    /// Our view of one rendezvous node.
    struct NodeState {
        /// Our registration key pair at this node: random per node and epoch, so the node never
        /// sees our long-term key, two nodes cannot link our registrations by key, and one node
        /// cannot link them across epochs by key (the address may still link them).
        var registrationKeys = KeyPair()
        /// The epoch `registrationKeys` was made for (nil: not used yet).
        var registrationEpoch: UInt32? = nil
        /// The registration key the relay token belongs to (the previous one for a moment after
        /// a new epoch's key, until the node accepts the new one).
        var tokenKey: [UInt8]? = nil
        var nodeKey: [UInt8]? = nil
        var macKey: SecretKeyBytes? = nil
        var cookie = [UInt8](repeating: 0, count: 16)
        var token: [UInt8]? = nil
        /// Our last 64 lookups: nonce (answers carry it with the top bit set), tag and friend id.
        var pendingLookups: [PendingLookup] = []
        /// Our last 64 sealed registrations not answered yet: a sealed answer must name one of
        /// them (so a captured answer cannot be replayed) and open under its MAC key.
        var pendingRegistrations: [PendingRegistration] = []
        /// The TURN credentials this node handed us (its servers with them), and when.
        var turnGrant: TURNGrant? = nil
        /// Our open TURN credentials requests (at most 8): an answer must name one of them and
        /// open under the MAC key it was sealed with.
        var pendingCredentials: [(nonce: UInt64, macKey: SecretKeyBytes)] = []
        /// No credentials request before this (nil: any time), and the wait after the next one,
        /// doubled per unanswered request up to `SessionCore.credentialsMaxBackoff` (from
        /// `SessionCore.credentialsMinBackoff`, 2 s).
        var nextCredentialsRequest: MonotonicTime? = nil
        var credentialsBackoff = Duration.seconds(2)
    }

    /// TURN servers with credentials from a rendezvous node: usable until `expiresAt`, asked for
    /// again from `renewAt` (half their life).
    struct TURNGrant {
        var servers: [ICEServer]
        var expiresAt: MonotonicTime
        var renewAt: MonotonicTime
    }

    /// One sealed registration at a node waiting for its answer.
    struct PendingRegistration {
        let timestamp: UInt64
        let macKey: SecretKeyBytes
        /// The registration key it was sent under (the relay token of its answer belongs to it).
        let registrationKey: [UInt8]
    }

    /// One open lookup at a node.
    struct PendingLookup {
        let nonce: UInt64
        let tag: [UInt8]
        let friendId: String
    }

    /// Friend requests already shown this run, and where each came from.
    var shownRequests: Set<String> = []
    var requestRoutes: [String: Route] = [:]
    var requestTimestamps: [String: UInt64] = [:]

    init(revue: Revue, configuration: RevueConfiguration, environment: SessionEnvironment = .live) throws(RevueError) {
        guard Sodium.ready else { throw RevueError(.socket, "libsodium failed to initialize") }
        self.revue = revue
        self.environment = environment
        let start = environment.scheduler.now
        handshakeTokensAt = start
        cookieSecretAt = start
        lastTick = start
        self.configuration = configuration
        self.timeouts = SessionTimeouts(configuration.timeouts)
        var nodes: [SocketAddress] = []
        for text in configuration.rendezvousNodes {
            guard let a = SocketAddress.parse(text) else {
                throw RevueError(.invalidConfiguration, "rendezvous node '\(text)' is not host:port")
            }
            nodes.append(a)
        }
        rendezvousNodes = nodes
        store = try ProfileStore(directory: configuration.dataDirectory, passphrase: configuration.profilePassphrase)
        let loaded: StoredProfile?
        do { loaded = try store.load() } catch { store.close(); throw error }
        if var loaded {
            var secret = Hex.decode(loaded.secretKey)!
            identity = KeyPair(secret: SecretKeyBytes(wiping: &secret))
            // The store writes the secret from `identity`; no hex copy stays in the profile.
            loaded.secretKey = ""
            profile = loaded
            store.secret = identity.secret
        } else {
            identity = environment.randomness.identityKeys?() ?? KeyPair()
            store.secret = identity.secret
            profile = StoredProfile(secretKey: "", nospam: RandomBytes.uint32())
            guard store.save(profile) else {
                store.close()
                throw RevueError(.dataDirectory, "cannot write \(store.path)")
            }
        }
        ownId = Hex.encode(identity.publicKey)
        gate = HandshakeGate(
            publicKey: identity.publicKey, rate: Self.handshakeRate, burst: Self.handshakeBurst, scheduler: environment.scheduler)
        store.scheduler = environment.scheduler
        store.simulatedDisk = environment.simulatedDisk
        do {
            socket = try environment.bindSocket(configuration.bindHost, configuration.port)
        } catch {
            store.close()
            throw error
        }
        // LAN discovery is IPv4 multicast and announces our port for the announcer's IPv4
        // address, so an instance bound to IPv6 only does not announce (a dual-stack one does).
        if configuration.lanDiscovery, environment.lanDiscovery, socket.carries(.ipv4),
            let s = try? SessionSocket(host: "0.0.0.0", port: configuration.lanDiscoveryPort, reusePort: true),
            s.joinMulticast(group: SocketAddress(ip: Self.lanGroup, port: configuration.lanDiscoveryPort))
        {
            lanSocket = s
        } else {
            lanSocket = nil
        }
        streamEpoch = max(1, RandomBytes.uint32())
        for f in profile.friends {
            let key = RevueAddress.parseFriendId(f.id)!
            let state = FriendState(key: key, stored: f)
            if let e = f.endpoint, let a = SocketAddress.parse(e) { state.storedRoute = .direct(a) }
            friends[state.id] = state
            friendOrder.append(state.id)
        }
    }

    /// LAN announcements show that we run (and how many friends we have, to a multiple of 8), so
    /// they go out once a second only for `lanFastCount` announcements after start or after
    /// adding a friend; then every 5-10 s (jittered) while someone may be looking (during
    /// `lanEagerWindow`, or while a friend is offline); else every `lanQuietInterval`.
    func announceInterval(now: MonotonicTime) -> Duration {
        if lanFastLeft > 0 { return .seconds(1) }
        return now < lanEagerUntil || friends.values.contains(where: { !$0.isConnected }) ? lanEagerGapNow : Self.lanQuietInterval
    }

    /// Seconds since 1970 for the tag epochs.
    func wallNow() -> Double { environment.wallClock() }

    /// Starts receiving and the 50 ms housekeeping timer.
    func start() {
        lanEagerUntil = scheduler.now + lanEagerWindow
        lanFastLeft = Self.lanFastCount
        gate.socket = socket
        let gate = self.gate
        socket.start(
            screen: { gate.screen($0, from: $1) },
            onReceive: { [weak self] bytes, from in
                MainActor.assumeIsolated { self?.handle(bytes, from: from) }
            })
        lanSocket?.start { [weak self] bytes, from in
            MainActor.assumeIsolated { self?.handleLAN(bytes, from: from, onMulticastSocket: true) }
        }
        timer = scheduler.scheduleRepeating(every: .milliseconds(50)) { [weak self] in
            MainActor.assumeIsolated { self?.tick() }
        }
        updateDiscoverable()
        tick()
    }

    /// Says goodbye to connected friends, fails pending sends, closes the socket and the store.
    func shutdown() {
        defer { isStopped = true }
        for f in friends.values where f.isConnected { sendFrame(f, [FrameType.bye.rawValue]) }
        for f in friends.values {
            failWaiters(f)
            closeLink(f)
        }
        timer?.cancel()
        timer = nil
        socket.close()
        lanSocket?.close()
        // Nothing more is answered: the reservations come down to what was accepted, so after a
        // clean restart friends' next initiations are accepted at once.
        for f in friends.values where f.lastHandshakeTimestamp > 0 { f.stored.handshakeTimestamp = f.lastHandshakeTimestamp }
        save()
        store.close()
    }

    /// Stops like a killed process: no goodbye, no final save (writes already queued finish),
    /// socket closed.
    func abandon() {
        isStopped = true
        for f in friends.values {
            failWaiters(f)
            closeLink(f)
        }
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
        lanTable = nil
        save()
    }

    func setSelfName(_ name: String) {
        guard name != profile.name else { return }
        profile.name = name
        profileChanged()
        let id = ownId
        emit { $1.revue($0, friend: id, didUpdateName: name) }
        profileObserver?(id, .name)
    }

    func setSelfStatusMessage(_ text: String) {
        guard text != profile.statusMessage else { return }
        profile.statusMessage = text
        profileChanged()
        let id = ownId
        emit { $1.revue($0, friend: id, didUpdateStatusMessage: text) }
        profileObserver?(id, .statusMessage)
    }

    func setSelfStatus(_ status: UserStatus) {
        guard status.rawValue != profile.status else { return }
        profile.status = status.rawValue
        profileChanged()
        lastRegister = nil  // tell the presence service now
        let id = ownId
        emit { $1.revue($0, friend: id, didUpdateStatus: status) }
        profileObserver?(id, .status)
    }

    func profileChanged() {
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

    enum Pending {
        case event((Revue, any RevueDelegate) -> Void)
        case action(() -> Void)
    }

    var pending: [Pending] = []
    var drainScheduled = false

    /// Queues a delegate event; events are delivered in order, after the current call returns.
    func emit(_ event: @escaping (Revue, any RevueDelegate) -> Void) {
        schedule(.event(event))
    }

    /// Queues work to run after every event queued before it has reached the delegates (used to
    /// acknowledge a message only once the App has it).
    func afterEvents(_ action: @escaping () -> Void) {
        schedule(.action(action))
    }

    func schedule(_ item: Pending) {
        pending.append(item)
        guard !drainScheduled else { return }
        drainScheduled = true
        scheduler.schedule(after: .zero) { [weak self] in
            MainActor.assumeIsolated { self?.drainEvents() }
        }
    }

    /// Delivers the queued events and actions now, in order (normally run by the main queue after
    /// `schedule`; the session fuzzer calls it after each datagram, as libFuzzer never returns to
    /// the main queue).
    package func drainEvents() {
        drainScheduled = false
        let items = pending
        pending = []
        guard isCurrent else { return }
        for item in items {
            switch item {
            case .event(let e): for d in revue.delegates.all { e(revue, d) }
            case .action(let a): if isCurrent { a() }
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
        if let r = requestRoutes[id] { f.candidates[r] = scheduler.now }
        requestRoutes[id] = nil
        requestTimestamps[id] = nil
        friends[id] = f
        friendOrder.append(id)
        guard save() else {
            friends[id] = nil
            friendOrder.removeLast()
            throw .storageFailed
        }
        f.lastInitiation = nil
        f.lastLookup = nil
        lanEagerUntil = max(lanEagerUntil, scheduler.now + lanEagerWindow)
        lanFastLeft = Self.lanFastCount
        lanTable = nil
        tickFriend(f, now: scheduler.now)
        return id
    }

    func deleteFriend(id: String) throws(FriendDeleteError) {
        guard let f = friends[id] else { throw .notFound }
        friendWillBeDeleted?(id)
        friends[id] = nil
        lanTable = nil
        let position = friendOrder.firstIndex(of: id)!
        friendOrder.remove(at: position)
        guard save() else {
            friends[id] = f
            friendOrder.insert(id, at: position)
            throw .failed(code: -1)
        }
        if f.isConnected { sendFrame(f, [FrameType.bye.rawValue]) }
        dropSessions(f)
        closeLink(f)
        failWaiters(f)
    }

    func failWaiters(_ f: FriendState) {
        let waiters = f.waiters
        f.waiters = [:]
        for (id, w) in waiters { w.continuation.resume(returning: .failure(.timeout(messageId: id))) }
    }

    // MARK: - Timers

    var lastTick: MonotonicTime
    /// After the main actor was held up (a stall, a suspended process), friends get time to be
    /// heard again before any is declared offline.
    var timeoutGraceUntil = MonotonicTime.zero

    func tick() {
        let now = scheduler.now
        if now - cookieSecretAt >= Self.cookieSecretLifetime {
            gate.rotate()
            cookieSecretAt = now
        }
        let screened = gate.cookieReplies.exchange(0, ordering: .relaxed)
        counters.cookieRepliesSent += screened
        counters.droppedRateLimited += screened
        counters.droppedForged += gate.badMac1.exchange(0, ordering: .relaxed)
        if sourceTokens.count > Self.maxSources / 2 {
            sourceTokens = sourceTokens.filter { now - $0.value.at < .seconds(2) }
        }
        counters.droppedOverload = socket.droppedOverload + (lanSocket?.droppedOverload ?? 0)
        if now - lastTick > timeouts.connectionTimeout / 2 { timeoutGraceUntil = now + timeouts.keepaliveInterval * 2 }
        lastTick = now
        for id in friendOrder {
            if let f = friends[id] { tickFriend(f, now: now) }
        }
        tickHook?(now)
        if !rendezvousNodes.isEmpty, now.since(lastRegister) >= timeouts.rendezvousInterval {
            lastRegister = now
            for node in rendezvousNodes { sendRegistration(to: node) }
            updateDiscoverable()
        }
        for node in rendezvousNodes { requestCredentialsIfDue(from: node, now: now) }
        if let lanSocket, isDiscoverable, now.since(lastAnnounce) >= announceInterval(now: now) {
            lastAnnounce = now
            lanFastLeft = max(0, lanFastLeft - 1)
            lanEagerGapNow = .seconds(
                Double.random(in: Self.lanEagerGap.lowerBound.inSeconds...Self.lanEagerGap.upperBound.inSeconds))
            let group = SocketAddress(ip: Self.lanGroup, port: configuration.lanDiscoveryPort)
            lanSent = lanAnnouncements()
            for datagram in lanSent { lanSocket.send(datagram, to: group) }
        }
    }

    /// How long to wait before the next handshake round with an offline friend: the retry interval
    /// (4x after 10 attempts), but at most 0.25 s while its responder is under load (it sent us a
    /// cookie in the last 10 s), as each round then has to get through a flood.
    func retryInterval(_ f: FriendState, now: MonotonicTime) -> Duration {
        let base = timeouts.handshakeRetryInterval * (f.initiationAttempts > 10 ? 4 : 1)
        if let c = f.cookie, now - c.received < .seconds(10) { return min(base, .milliseconds(250)) }
        return base
    }

    func tickFriend(_ f: FriendState, now: MonotonicTime) {
        if f.isConnected, now.since(f.lastReceived) > timeouts.connectionTimeout, now >= timeoutGraceUntil {
            dropSessions(f)
        }
        expireSessions(f, now: now)
        let stale = f.candidates.filter { now - $0.value > Self.candidateLifetime }
        if !stale.isEmpty {
            for (route, _) in stale { f.candidates[route] = nil }
            counters.candidatesDropped += stale.count
        }
        updatePaths(f, now: now)
        tickLink(f, now: now)
        if let c = f.current {
            if now.since(f.lastPing) >= timeouts.keepaliveInterval {
                f.lastPing = now
                // In a fixed order (Route.orderKey), so runs on a simulated clock repeat exactly.
                for (route, state) in f.routes.sorted(by: { $0.key.orderKey < $1.key.orderKey })
                where now - state.lastReceived <= timeouts.connectionTimeout {
                    sendPing(f, route: route, now: now)
                }
                // A link with a pair the session was not heard on lately: its pong makes it live.
                if !environment.faults.dropDirectSends, f.link?.route != nil,
                    !f.linkIsLive(now: now, timeout: timeouts.connectionTimeout)
                {
                    sendPing(f, route: .link, now: now)
                }
            }
            // Only relayed: keep probing the direct candidates so a direct path is found again.
            let hasDirect = f.routes.contains {
                if case .direct = $0.key { now - $0.value.lastReceived <= timeouts.connectionTimeout } else { false }
            }
            if !hasDirect, now.since(f.lastProbe) >= timeouts.handshakeRetryInterval {
                f.lastProbe = now
                let direct = f.candidates.filter { if case .direct = $0.key { true } else { false } }
                for (route, _) in direct.sorted(by: Route.newestFirst).prefix(4) { sendPing(f, route: route, now: now) }
            }
            let age = now - c.created
            let limit = environment.faults.sessionMessageLimit
            let worn = c.sendCounter >= limit / 2 || c.replay.highest >= limit / 2
            if f.pending == nil, age > (c.isInitiator ? timeouts.rekeyInterval : timeouts.rekeyInterval * 1.1) || worn,
                now.since(f.lastInitiation) >= timeouts.handshakeRetryInterval
            {
                initiate(f, now: now)
            }
            pumpOutbound(f, now: now)
        } else if now.since(f.lastInitiation) >= retryInterval(f, now: now) {
            // A friend long unreachable is tried less often; one that comes back initiates itself,
            // and a new endpoint from a lookup or announcement triggers an attempt at once.
            initiate(f, now: now)
        }
        let lookupEvery = f.isConnected ? timeouts.rendezvousInterval * 3 : timeouts.rendezvousInterval
        if !rendezvousNodes.isEmpty, now.since(f.lastLookup) >= lookupEvery {
            f.lastLookup = now
            for node in rendezvousNodes { sendLookups(f, to: node) }
        }
        if !f.waiters.isEmpty {
            for (mid, w) in f.waiters where now >= w.deadline {
                f.waiters[mid] = nil
                w.continuation.resume(returning: .failure(.timeout(messageId: mid)))
            }
        }
    }

}
