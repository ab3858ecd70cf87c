// One path per friend: a UDP socket and an ICE agent for each connected friend. The friend
// session's packets and, during a call, every media stream to that friend travel on the agent's
// selected pair, demultiplexed on the one socket by first byte (RFC 7983 ranges, session packets
// in 80-95). The two sides exchange ICE credentials and candidates in `link` frames inside the
// encrypted friend channel. docs/session.md "One path per friend".
import Dispatch
package import MediaCore

/// What a friend link runs on: its ICE agent and the datagram endpoint under it, made by
/// `SessionEnvironment.makeLinkEndpoint` (a UDP socket and a queue-run agent in production; a port
/// of a simulated network and an agent on the simulated clock in tests). Thread rule: made and
/// held on the main actor; a value. Cost: nothing beyond what it holds.
package struct FriendLinkEndpoint {
    /// Where the session's packets go out on a direct pair.
    package enum Carrier {
        /// A UDP socket: sent with `ICESendPath.send(_:on:)`, and a call leg may borrow it.
        case socket(MediaCore.UDPSocket)
        /// Another datagram endpoint (a simulated network's): the agent's own transport, called
        /// on the agent's context; no call leg can read it.
        case transport(any ICEDatagramTransport)
    }
    /// The endpoint the session's packets leave from.
    package let carrier: Carrier
    /// The agent checking, keeping and failing over the pairs of this endpoint, not started.
    package let agent: ICEAgent
    /// Hands `work` to the main actor after the work now running: the main queue in production,
    /// the simulated clock's next turn in tests (the agent reports from its own context).
    package let toMainActor: @Sendable (@escaping @Sendable () -> Void) -> Void
    /// Releases the endpoint when the link closes (nil: it goes with its last reference).
    package let release: (() -> Void)?

    /// An endpoint from its parts.
    package init(
        carrier: Carrier, agent: ICEAgent, toMainActor: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void,
        release: (() -> Void)? = nil
    ) {
        self.carrier = carrier
        self.agent = agent
        self.toMainActor = toMainActor
        self.release = release
    }

    /// The production endpoint: a UDP socket bound on `bindHost` (port 0) as the session's socket
    /// is bound (dual-stack on "::", told where each datagram arrived on a wildcard address) and
    /// `ICEAgent(socket:configuration:)` on its own queue, reporting through the main queue.
    package static func udp(bindHost: String, ice: ICEAgentConfiguration) throws -> FriendLinkEndpoint {
        let host = (try? SocketAddress(parsing: bindHost, defaultPort: 0)) ?? .anyIPv4(port: 0)
        var options = MediaCore.UDPSocket.Options()
        options.dualStack = host.family == .ipv6 && host.isUnspecified
        options.receiveDestinations = host.isUnspecified
        let socket = try MediaCore.UDPSocket(bindingTo: host, options: options)
        return FriendLinkEndpoint(
            carrier: .socket(socket), agent: ICEAgent(socket: socket, configuration: ice),
            toMainActor: { work in DispatchQueue.main.async(execute: work) })
    }
}

/// The path to one friend (see the file comment). Created once the friend channel exists, kept
/// while the friend is online (and a while after, so a short outage does not cost the path), and
/// lent to the call leg to that friend, whose receive pipeline then reads the socket instead of
/// the agent. Thread rule: main actor, except `demux` and `send`, which any thread may call (on a
/// simulated endpoint, `send` only on the agent's context, which is the main actor's there).
/// Cost: one socket, one agent queue and its timer (checks, then a consent check every 250 ms on
/// the selected pair); a TURN allocation per TURN server.
final class FriendLink {
    /// The link's UDP socket, which a call leg borrows (nil on a simulated network: no call leg
    /// can run on the link, and a call to the friend fails its media setup as without a link).
    let socket: MediaCore.UDPSocket?
    let agent: ICEAgent
    /// What the session's packets leave from.
    let carrier: FriendLinkEndpoint.Carrier
    /// Hands the agent's reports to the main actor.
    private let toMainActor: @Sendable (@escaping @Sendable () -> Void) -> Void
    private let release: (() -> Void)?
    /// The call leg's receive pipeline, for media a TURN relay hands the agent outside UDP
    /// ChannelData (TCP, Data indications).
    let running = PipelineSlot()
    /// Sorts one datagram of the socket that is not RTP/RTCP: STUN and TURN to the agent, the
    /// session's packets to the friend session (on the main actor, in arrival order), the rest
    /// dropped. Any thread.
    let demux: @Sendable (UnsafeRawBufferPointer, SocketAddress, SocketAddress?) -> Void
    /// A call leg uses the path now (its pipeline reads the socket while it runs).
    private(set) var isLent = false

    /// What the friend's last `link` frame told us: its credentials and the candidates taken.
    var remoteUfrag: String?
    var remoteCandidates: Set<String> = []
    /// What the friend's last `link` frame says it knows of ours (our ufrag, how many candidates).
    var peerKnows: (ufrag: String, count: Int)?
    /// When we last sent a `link` frame (nil: not yet).
    var lastAnnounce: MonotonicTime?
    /// Since when the friend is offline (nil: online); the link closes after `idleLifetime`.
    var offlineSince: MonotonicTime?

    /// How long a link outlives its friend's connection when no call uses it.
    static let idleLifetime = Duration.seconds(30)
    /// Most candidates a `link` frame carries, and most taken from one.
    static let maxCandidates = 16
    /// The first bytes of the session's own packets (docs/session.md).
    static let sessionRange = PacketType.firstByteRange

    /// A link on `endpoint` (its agent not started yet). `inbox` receives the session's packets
    /// (on the agent's context or a reading thread).
    init(endpoint: FriendLinkEndpoint, inbox: @escaping @Sendable ([UInt8]) -> Void) {
        if case .socket(let s) = endpoint.carrier { socket = s } else { socket = nil }
        carrier = endpoint.carrier
        toMainActor = endpoint.toMainActor
        release = endpoint.release
        let agent = endpoint.agent
        // Quiet until a call takes the path: a link carries only the session's few packets, so
        // it checks consent every few seconds rather than four times a second.
        agent.setQuiet(true)
        self.agent = agent
        demux = { bytes, from, to in
            guard let first = bytes.first else { return }
            if first < 4 || (64...79).contains(first) {
                agent.handleDatagram(bytes, from: from, to: to)
            } else if Self.sessionRange.contains(first) {
                inbox(Array(bytes))
            }
        }
        let running = running
        agent.onRelayedMedia = { bytes in running.pipeline?.inject(bytes) }
        agent.onRelayedOther = { bytes, _ in
            if let first = bytes.first, Self.sessionRange.contains(first) { inbox(bytes) }
        }
    }

    /// Starts gathering and reading. `onCandidate` and `onPathChange` run on the main actor.
    func start(onCandidate: @escaping @MainActor () -> Void, onPathChange: @escaping @MainActor () -> Void) {
        let toMainActor = toMainActor
        agent.onCandidate = { _ in toMainActor { MainActor.assumeIsolated { onCandidate() } } }
        agent.onSelectedPairChange = { _, _ in toMainActor { MainActor.assumeIsolated { onPathChange() } } }
        readByAgent()
        agent.start()
    }

    /// The route the session's packets and a call's media take now (nil: no working pair).
    var route: ICESendPath.Route? { agent.path.route }

    /// Sends one session datagram on the selected pair; false without one. Any thread (see the
    /// type's thread rule for a simulated endpoint).
    @discardableResult
    func send(_ packet: [UInt8]) -> Bool {
        switch carrier {
        case .socket(let socket):
            return packet.withUnsafeBytes { agent.path.send($0, on: socket) }
        case .transport(let transport):
            switch agent.path.route {
            case .direct(let a, let local)?: return packet.withUnsafeBytes { transport.send($0, to: a, from: local) }
            case .relay(let sender, let channel, _)?:
                return packet.withUnsafeBytes { sender.sendChannelData($0, channel: channel) }
            case nil: return false
            }
        }
    }

    /// Runs `work` on the main actor after the work now running, as the agent's reports do.
    func onMainActor(_ work: @escaping @Sendable () -> Void) { toMainActor(work) }

    /// Lends the path to a call leg; false when another leg has it, or the link has no socket a
    /// leg could read (a simulated endpoint).
    func lend() -> Bool {
        guard !isLent, socket != nil else { return false }
        isLent = true
        agent.setQuiet(false)
        return true
    }

    /// The leg gave the path back (its pipeline stopped): the agent reads the socket again.
    func giveBack() {
        isLent = false
        running.pipeline = nil
        agent.setQuiet(true)
        readByAgent()
    }

    /// The agent reads the socket (no pipeline runs on it).
    func readByAgent() {
        let demux = demux
        agent.startReading(otherDatagram: { bytes, from in demux(bytes, from, nil) })
    }

    /// A receive pipeline reads the socket from now on.
    func readByPipeline() { agent.stopReading() }

    /// Stops the agent (and its TURN allocations); the socket closes with the last reference, a
    /// simulated endpoint at once.
    func close() {
        agent.close()
        release?()
    }

    /// Our part of a `link` frame, with what we know of the friend's: our ufrag and password, the
    /// friend's ufrag as we know it and how many of its candidates we took, and our candidates
    /// (at most `maxCandidates`). Frame layout in docs/session.md.
    func announcement() -> [UInt8] {
        var w = ByteWriter(capacity: 512)
        w.u8(FrameType.link.rawValue)
        w.shortString(agent.localUfrag)
        w.shortString(agent.localPassword)
        w.shortString(remoteUfrag ?? "")
        w.u8(UInt8(min(remoteCandidates.count, 255)))
        let candidates = agent.localCandidates.prefix(Self.maxCandidates)
        w.u8(UInt8(candidates.count))
        for c in candidates { w.shortString(c.sdpValue) }
        return w.bytes
    }

    /// Whether the friend still lacks some of what we announce.
    var peerIsBehind: Bool {
        guard let k = peerKnows else { return true }
        return k.ufrag != agent.localUfrag || k.count < min(agent.localCandidates.count, Self.maxCandidates)
    }
}

extension ByteWriter {
    /// A string of at most 255 UTF-8 bytes, after a one-byte length (longer ones are cut).
    mutating func shortString(_ s: String) {
        let b = Array(s.utf8.prefix(255))
        u8(UInt8(b.count))
        append(b)
    }
}

extension ByteReader {
    /// A string written by `ByteWriter.shortString`; nil when truncated or not UTF-8.
    mutating func shortString() -> String? {
        guard let n = u8(), let b = take(Int(n)) else { return nil }
        return String(validating: b, as: UTF8.self)
    }
}
