/// Settings for `Revue.initialize(_:)`. A value type; copy and change what you need.
public struct RevueConfiguration: Sendable {
    /// Where the identity, profile and friend list live (created with mode 0700 if missing).
    public var dataDirectory: String
    /// Local address the UDP sockets (the friend session's and each call leg's) bind to:
    /// "0.0.0.0" for every IPv4 interface (IPv4 only); "::" for every interface of both families,
    /// on one dual-stack socket that reaches IPv4 and IPv6 rendezvous nodes and friends; a
    /// specific address for that address alone (a specific IPv6 address: IPv6 only, and no LAN
    /// discovery, which is IPv4 multicast). Answers leave from the local address they were asked at.
    public var bindHost: String = "0.0.0.0"
    /// Local UDP port; 0 lets the system choose (read it back from `Revue.port`).
    public var port: UInt16 = 0
    /// Announce yourself to the local network and find friends there (UDP multicast to
    /// 239.255.77.77 on `lanDiscoveryPort`, TTL 1), only while you are discoverable.
    /// `Revue.isDiscoveringOnLAN` tells whether it could start.
    public var lanDiscovery: Bool = false
    /// The UDP port LAN announcements go to.
    public var lanDiscoveryPort: UInt16 = 33_440
    /// Rendezvous nodes ("host:port"): `revue-node --rendezvous` processes that let friends find
    /// each other's endpoints, report presence, and relay encrypted traffic.
    public var rendezvousNodes: [String] = []
    /// STUN and TURN servers call media may use to find a path through NATs (a TURN server
    /// relays media when no direct path works). Rendezvous nodes also answer STUN Binding
    /// requests, so they serve as STUN servers too without being listed here. Empty by default:
    /// media then has only its own addresses and those the rendezvous nodes report, and no relay.
    public var iceServers: [RevueICEServer] = []
    /// Timers of the friend connection and of requests.
    public var timeouts = RevueTimeouts()
    /// For test labs where a rendezvous node on a public address serves peers on private
    /// networks: accept loopback and private endpoints (127/8, 10/8, 172.16/12, 192.168/16,
    /// 169.254/16) in lookup answers from a node whose own address is public. Off by default, as
    /// such an answer from a public node is either a mistake or an attempt to aim our handshakes at
    /// machines on our own network. Nodes on private or loopback addresses are always believed.
    public var acceptPrivateEndpointsFromPublicNodes: Bool = false
    /// Seals the secret key in `profile.json` with this passphrase (Argon2id via libsodium's
    /// `crypto_pwhash`, then `crypto_secretbox`); nil, the default, stores it in clear in an
    /// owner-only file. A clear profile opened with a passphrase is sealed at once; a sealed one
    /// needs the same passphrase (else `initialize` fails with `.corruptProfile` and the file is
    /// left as is). Deriving the key costs about a second and 256 MiB at `initialize`. The rest of
    /// the profile (friends, names) stays readable.
    public var profilePassphrase: String? = nil

    /// A configuration with defaults for everything but the data directory.
    public init(dataDirectory: String) { self.dataDirectory = dataDirectory }
}

/// Timers of the friend connection, in seconds. The defaults detect a friend coming or going on a
/// LAN within 2 s.
public struct RevueTimeouts: Sendable {
    /// How often a connected friend is pinged (each ping measures RTT).
    public var keepaliveInterval: Double = 0.5
    /// A friend with no authenticated packet for this long is offline.
    public var connectionTimeout: Double = 1.6
    /// How often a handshake is retried while a friend is offline.
    public var handshakeRetryInterval: Double = 1.0
    /// Session keys are replaced by a new handshake after this long.
    public var rekeyInterval: Double = 120
    /// An unacknowledged friend message is sent again after this long.
    public var retransmitInterval: Double = 0.4
    /// How often rendezvous nodes are told where you are and asked where offline friends are.
    public var rendezvousInterval: Double = 1.0
    /// How long an invitation to a call waits for an answer (call layer).
    public var invitationTimeout: Double = 30
    /// Grace period of the call layer: how long a participant whose friend connection went offline
    /// (no authenticated packet for `connectionTimeout`, or a goodbye without a hang-up) stays in
    /// the call before it leaves with `.connectionLost`.
    ///
    /// 0, the default: the participant leaves the moment the friend goes offline, right after
    /// `didUpdatePaths` reports it, so a crashed or unplugged peer is out of the call within
    /// `connectionTimeout` (plus one 50 ms timer tick). A positive value is an opt-in for apps that
    /// would rather ride out short outages (a Wi-Fi handover): the participant stays, with offline
    /// paths, and leaves only if the friend is still offline this many seconds later; a friend back
    /// online in time keeps its place.
    public var callLostTimeout: Double = 0

    /// The defaults.
    public init() {}
}

/// Counters of what the session layer dropped or handled, for tests and operators. Read from
/// `Revue.counters` on the main actor.
public struct RevueCounters: Sendable, Equatable {
    /// Datagrams too short, of unknown type or version, or otherwise unparsable.
    public var droppedMalformed = 0
    /// Datagrams whose authentication (Noise handshake or AEAD tag) failed.
    public var droppedForged = 0
    /// Transport packets or handshakes seen before (nonce window, handshake timestamp).
    public var droppedReplayed = 0
    /// Transport packets for a session index we do not have.
    public var droppedUnknownSession = 0
    /// Valid handshakes from someone who is not a friend and not asking to be one.
    public var droppedNonFriend = 0
    /// Handshake initiations beyond the rate limit (200/s, bursts of 400), dropped unread.
    public var droppedRateLimited = 0
    /// Friend requests carrying a nospam that is not the current one.
    public var droppedWrongNospam = 0
    /// Friend requests passed to the App (each sender once per run).
    public var friendRequestsReceived = 0
    /// Retransmitted friend messages recognised and not delivered again.
    public var duplicatesSuppressed = 0
    /// Messages in the SDK's reserved JSON format, kept from the App.
    public var reservedMessagesSwallowed = 0
    /// Completed Noise handshakes (either side).
    public var handshakesCompleted = 0
    /// LAN announcements refused: arriving on the session socket, while LAN discovery is off, or
    /// from outside the local subnets.
    public var droppedAnnounces = 0
    /// Handshake rounds not started because the friend's per-friend rate limit (one round a
    /// second, however many new endpoints are claimed) was reached.
    public var initiationsThrottled = 0
    /// Candidate endpoints forgotten because a friend's table was full or they expired unheard.
    public var candidatesDropped = 0
    /// Cookie replies sent instead of answering a handshake initiation while under load.
    public var cookieRepliesSent = 0
    /// Transport packets or sends refused on a session past its hard lifetime (time or messages).
    public var droppedExpired = 0
    /// Lookup answers that were unauthenticated, stale, or named a private or loopback endpoint
    /// while coming from a public node.
    public var droppedLookupReplies = 0
    /// TURN credentials requests sent to rendezvous nodes (docs/turn.md, Deployment).
    public var turnCredentialsRequested = 0
    /// TURN credentials answers from rendezvous nodes that opened and parsed (each with the
    /// node's TURN servers, or none when it offers none).
    public var turnCredentialsReceived = 0
    /// Datagrams dropped at the socket because the main actor was too far behind (a flood).
    public var droppedOverload = 0
    /// Friend links (a friend's own socket and ICE agent) that could not be made: that friend's
    /// session stays on the session socket, and a call to it cannot carry media.
    public var linkFailures = 0
    /// Friend requests from strangers forgotten because the table of pending requests was full.
    public var requestsForgotten = 0
    /// Call signalling from a friend refused: a `join` without a valid, unused introduction for
    /// that friend, an introduction from someone not in the call, an unasked-for `joined`, a track
    /// publication past a participant's 16 or with an over-long track ID (64 bytes) or name (128).
    public var callSignalsRefused = 0
}
