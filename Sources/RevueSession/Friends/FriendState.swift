// Per-friend connection and stream state, owned by SessionCore on the main actor.
internal import MediaCore

/// Where packets for a friend go: straight to an endpoint from the session socket, through a
/// rendezvous node's relay, or on the selected ICE pair of the friend's link (`FriendLink`).
enum Route: Hashable, Sendable {
    case direct(SocketAddress)
    case relay(SocketAddress)
    case link

    /// The endpoint of a session-socket route (nil for the link, whose pair can change).
    var endpoint: SocketAddress? {
        switch self {
        case .direct(let a), .relay(let a): return a
        case .link: return nil
        }
    }

    /// A key that orders routes the same way in every run (a dictionary's order changes from
    /// process to process), for sends that go out at the same instant.
    var orderKey: String {
        switch self {
        case .direct(let a): return "d" + a.description
        case .relay(let a): return "r" + a.description
        case .link: return "l"
        }
    }

    /// Candidates heard of most recently first; ties in a fixed order (`orderKey`).
    static func newestFirst(_ a: (key: Route, value: MonotonicTime), _ b: (key: Route, value: MonotonicTime)) -> Bool {
        a.value != b.value ? a.value > b.value : a.key.orderKey < b.key.orderKey
    }
}

/// One established Noise transport session (a pair of keys after the IK handshake, zeroed when
/// the session is released).
final class TransportSession {
    let localIndex: UInt32
    let remoteIndex: UInt32
    let sendKey: SecretKeyBytes
    let receiveKey: SecretKeyBytes
    let isInitiator: Bool
    let created: MonotonicTime
    var sendCounter: UInt64 = 0
    var replay = ReplayWindow()

    init(
        localIndex: UInt32, remoteIndex: UInt32, keys: (send: SecretKeyBytes, receive: SecretKeyBytes), isInitiator: Bool,
        created: MonotonicTime
    ) {
        self.localIndex = localIndex
        self.remoteIndex = remoteIndex
        self.sendKey = keys.send
        self.receiveKey = keys.receive
        self.isInitiator = isInitiator
        self.created = created
    }
}

/// A handshake we started and whose response we wait for.
struct PendingHandshake {
    var handshake: NoiseIKHandshake
    let localIndex: UInt32
    let started: MonotonicTime
    /// The initiation as sent, without its two MACs, and its mac1 (the cookie reply's AD).
    let body: [UInt8]
    let mac1: [UInt8]
    /// Whether a cookie reply already made us send this initiation again (once per handshake).
    var resentWithCookie = false
}

/// A cookie a friend's responder gave us under load (WireGuard section 5.4.7): valid for two
/// minutes, for initiations sent to the endpoint it came from.
struct HandshakeCookie {
    let value: [UInt8]
    let endpoint: SocketAddress
    let received: MonotonicTime
}

/// One queued reliable item of the outbound stream.
struct OutboundItem {
    let seq: UInt32
    let kind: ReliableKind
    var body: [UInt8]
    let messageId: UInt32?
    /// When it was last sent (nil: not sent yet on this connection).
    var lastSent: MonotonicTime? = nil
    /// For an SDK message that only means something while its sender's state lasts (an
    /// invitation): checked before each retransmission; once false, the item keeps its place in
    /// the stream but carries `SessionCore.withdrawnReserved` instead.
    var stillWanted: (() -> Bool)? = nil
}

/// A `sendMessage` call waiting for its receipt.
struct MessageWaiter {
    let continuation: CheckedContinuation<Result<UInt32, FriendMessageError>, Never>
    let deadline: MonotonicTime
}

/// State of a route that carried authenticated traffic.
struct RouteState {
    var lastReceived: MonotonicTime
    var rtt: Duration?
    /// When a pong last came back on this route for a ping we sent on it: proof that the friend
    /// hears us there too, not only we them (nil: never).
    var confirmedAt: MonotonicTime?
}

/// Everything about one friend.
final class FriendState {
    let key: [UInt8]
    let id: String
    var stored: StoredProfile.Friend

    /// Routes to try for handshakes, with when we last heard of each. At most
    /// `SessionCore.maxCandidates`; unauthenticated ones expire after `SessionCore.candidateLifetime`.
    var candidates: [Route: MonotonicTime] = [:]
    /// The endpoint saved in the profile (the last one that carried authenticated traffic): tried
    /// on every handshake round, never expired.
    var storedRoute: Route?
    var pending: PendingHandshake?
    /// The handshake `pending` replaced, still answerable, so a new round does not void a
    /// response already on its way.
    var previousPending: PendingHandshake?
    var cookie: HandshakeCookie?
    /// When the last handshake round started (nil: none yet, or one is due now).
    var lastInitiation: MonotonicTime?
    /// When a claimed new endpoint last started a handshake round (at most one a second).
    var lastTriggered: MonotonicTime?
    var initiationAttempts = 0
    /// Highest handshake timestamp accepted from this friend in this run; after a restart, the
    /// stored reservation (`StoredProfile.Friend.handshakeTimestamp`), so replays are refused too.
    var lastHandshakeTimestamp: UInt64
    /// When a handshake reservation was last written for this friend (at most one write a second).
    var lastReservationWrite: MonotonicTime?

    var current: TransportSession?
    var previous: TransportSession?
    /// A session we answered, unconfirmed until its first transport packet arrives.
    var next: TransportSession?
    /// The answered session `next` replaced, still unconfirmed and still installable: the
    /// initiator accepts the answer to either of its last two initiations (`previousPending`), so
    /// the responder keeps the sessions of its last two answers. Without it, when a round trip
    /// takes longer than the handshake retry interval, the initiator installs the session of its
    /// older initiation while the responder has already replaced it, and each side drops the
    /// other's packets (both retry at the same pace, so the next rounds cross the same way).
    var previousNext: TransportSession?

    /// Routes that carried authenticated traffic; at most `SessionCore.maxRoutes`.
    var routes: [Route: RouteState] = [:]
    /// When the last authenticated packet arrived, and the last ping went out (nil: never).
    var lastReceived: MonotonicTime?
    var lastPing: MonotonicTime?
    /// When direct candidates were last probed while only the relay worked.
    var lastProbe: MonotonicTime?
    /// The friend's link: its own socket and ICE agent (nil: not made yet, or closed).
    var link: FriendLink?
    var emittedPaths = FriendConnectionPaths.offline
    var presence = PresenceStatus.offline
    /// When the friend was last looked up at the rendezvous nodes (nil: not yet, or due now).
    var lastLookup: MonotonicTime?
    /// The key of our `PrivacyTags` with this friend (one X25519, computed on first use).
    var pairKey: SecretKeyBytes?
    /// The relay tags of one epoch (`SessionCore.relayTags`), so a relayed packet costs no hashing.
    var relayTagCache: (epoch: UInt32, pending: Bool, target: [UInt8], source: [UInt8])?

    /// Reliable items waiting for a receipt: at most `sendQueueCapacity` App messages,
    /// `reservedQueueCapacity` SDK messages and two profiles.
    var outbound: [OutboundItem] = []
    /// A newer profile waits for room in `outbound`.
    var profileDirty = false
    var nextSeq: UInt32 = 1
    var waiters: [UInt32: MessageWaiter] = [:]
    var inboundBuffer: [UInt32: (ReliableKind, [UInt8])] = [:]
    /// Highest contiguous inbound sequence received and queued for the App (in memory only; the
    /// stored `inboundDelivered` follows once the App has it).
    var inboundReceived: UInt32 = 0
    /// Highest inbound sequence both delivered to the App and saved: the most a receipt may claim.
    var inboundAckable: UInt32 = 0
    /// Received in order, waiting to be handed to the App one at a time (each after the previous
    /// one's position is on disk).
    var deliveryQueue: [(seq: UInt32, kind: ReliableKind, body: [UInt8])] = []
    var delivering = false
    /// Bumped when the inbound stream restarts, so late completions of the old one do nothing.
    var deliveryGeneration = 0

    var isConnected: Bool { current != nil }
    /// The App's messages waiting for a receipt (the SDK's own reserved messages, which have no
    /// message ID, do not take the App's places).
    var queuedMessages: Int { outbound.count { $0.kind == .message && $0.messageId != nil } }

    init(key: [UInt8], stored: StoredProfile.Friend) {
        self.key = key
        self.id = Hex.encode(key)
        self.stored = stored
        self.lastHandshakeTimestamp = stored.handshakeTimestamp ?? 0
        self.inboundAckable = stored.inboundDelivered
        self.inboundReceived = stored.inboundDelivered
    }

    func session(index: UInt32) -> TransportSession? {
        if current?.localIndex == index { return current }
        if next?.localIndex == index { return next }
        if previousNext?.localIndex == index { return previousNext }
        if previous?.localIndex == index { return previous }
        return nil
    }

    /// Whether the link has a selected pair and the friend's session was heard on it within `timeout`.
    func linkIsLive(now: MonotonicTime, timeout: Duration) -> Bool {
        guard link?.route != nil, let heard = routes[.link]?.lastReceived else { return false }
        return now - heard <= timeout
    }

    /// What a route is, as the App sees it: its kind and endpoint (the link's from its selected
    /// pair: relayed when either side's candidate is a TURN relay). nil for the link without a pair.
    func describe(_ route: Route) -> (kind: FriendConnectionPath.Kind, endpoint: SocketAddress)? {
        switch route {
        case .direct(let a): return (a.isLocal ? .directLAN : .directUDP, a)
        case .relay(let a): return (.relayed, a)
        case .link:
            guard let r = link?.route, let pair = link?.agent.selectedPair else { return nil }
            let relayed = r.isRelayed || pair.remote.type == .relay
            return (relayed ? .relayed : r.peer.isLocal ? .directLAN : .directUDP, r.peer)
        }
    }

    /// Live paths, best first: LAN, then public UDP, then relayed; within a kind the link first
    /// (the session sends on it), then lower RTT first. (Ordering same-kind routes by RTT alone
    /// would reorder them, and so report a change, whenever two RTTs cross.)
    func paths(now: MonotonicTime, timeout: Duration) -> FriendConnectionPaths {
        guard isConnected else { return .offline }
        func rank(_ k: FriendConnectionPath.Kind) -> Int { k == .directLAN ? 0 : k == .directUDP ? 1 : 2 }
        var live = routes.filter { now - $0.value.lastReceived <= timeout && describe($0.key) != nil }
        if live.isEmpty,
            let last = routes.filter({ describe($0.key) != nil }).max(by: { $0.value.lastReceived < $1.value.lastReceived })
        {
            // Still connected (e.g. during the grace after a stall): show the last route heard.
            live = [last.key: last.value]
        }
        let result =
            live
            .compactMap { route, state in
                describe(route).map {
                    (
                        path: FriendConnectionPath(
                            kind: $0.kind, endpoint: $0.endpoint.description, roundTripTime: state.rtt?.inSeconds),
                        linkFirst: route == .link ? 0 : 1
                    )
                }
            }
            .sorted {
                (rank($0.path.kind), $0.linkFirst, $0.path.roundTripTime ?? 9, $0.path.endpoint)
                    < (rank($1.path.kind), $1.linkFirst, $1.path.roundTripTime ?? 9, $1.path.endpoint)
            }
            .map(\.path)
        return FriendConnectionPaths(paths: result)
    }

    /// The route to send on: the link's selected ICE pair when it has one and the friend's session
    /// was heard on it within `timeout` (a pair ICE still holds can be dead: the friend restarted
    /// with a new link); else the best live route of the session socket, else the most recently
    /// heard candidate. A live route whose pongs come back (confirmed within `timeout`) beats one
    /// we only hear from: a friend's datagrams can reach us on a path ours cannot take back (its
    /// firewall lets only its own flows out), and sending there would lose everything.
    /// `useLink` false: the session socket's routes only.
    func bestRoute(now: MonotonicTime, timeout: Duration, useLink: Bool = true) -> Route? {
        if useLink, linkIsLive(now: now, timeout: timeout) { return .link }
        func rank(_ r: Route) -> Int {
            switch r {
            case .direct(let a): return a.isLocal ? 0 : 1
            case .relay, .link: return 2
            }
        }
        func unconfirmed(_ s: RouteState) -> Int { s.confirmedAt.map { now - $0 <= timeout } == true ? 0 : 1 }
        let live = routes.filter { now - $0.value.lastReceived <= timeout && $0.key != .link }
        let unmeasured = Duration.seconds(9)
        // Ties are broken by `Route.orderKey`, not by the dictionaries' order (which changes from
        // process to process), so that runs on a simulated clock repeat exactly.
        if let best = live.min(by: {
            (unconfirmed($0.value), rank($0.key), $0.value.rtt ?? unmeasured, $0.key.orderKey)
                < (unconfirmed($1.value), rank($1.key), $1.value.rtt ?? unmeasured, $1.key.orderKey)
        }) {
            return best.key
        }
        return routes.filter { $0.key != .link }.map { (key: $0.key, value: $0.value.lastReceived) }
            .min(by: Route.newestFirst)?.key
            ?? candidates.min(by: Route.newestFirst)?.key
    }
}
