// One path per friend: a UDP socket and an ICE agent for each connected friend. The friend
// session's packets and, during a call, every media stream to that friend travel on the agent's
// selected pair, demultiplexed on the one socket by first byte (RFC 7983 ranges, session packets
// in 80-95). The two sides exchange ICE credentials and candidates in `link` frames inside the
// encrypted friend channel. docs/session.md "One path per friend".
import Dispatch
internal import MediaCore

/// The path to one friend (see the file comment). Created once the friend channel exists, kept
/// while the friend is online (and a while after, so a short outage does not cost the path), and
/// lent to the call leg to that friend, whose receive pipeline then reads the socket instead of
/// the agent. Thread rule: main actor, except `demux` and `send`, which any thread may call.
/// Cost: one socket, one agent queue and its timer (checks, then a consent check every 250 ms on
/// the selected pair); a TURN allocation per TURN server.
final class FriendLink {
    let socket: MediaCore.UDPSocket
    let agent: ICEAgent
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

    /// Binds the socket on `bindHost` (port 0) as the session's socket is bound: dual-stack on
    /// "::", told where each datagram arrived on a wildcard address. `inbox` receives the
    /// session's packets (any thread).
    init(bindHost: String, ice: ICEAgentConfiguration, inbox: @escaping @Sendable ([UInt8]) -> Void) throws {
        let host = (try? SocketAddress(parsing: bindHost, defaultPort: 0)) ?? .anyIPv4(port: 0)
        var options = MediaCore.UDPSocket.Options()
        options.dualStack = host.family == .ipv6 && host.isUnspecified
        options.receiveDestinations = host.isUnspecified
        socket = try MediaCore.UDPSocket(bindingTo: host, options: options)
        let agent = ICEAgent(socket: socket, configuration: ice)
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
        agent.onCandidate = { _ in DispatchQueue.main.async { MainActor.assumeIsolated { onCandidate() } } }
        agent.onSelectedPairChange = { _, _ in DispatchQueue.main.async { MainActor.assumeIsolated { onPathChange() } } }
        readByAgent()
        agent.start()
    }

    /// The route the session's packets and a call's media take now (nil: no working pair).
    var route: ICESendPath.Route? { agent.path.route }

    /// Sends one session datagram on the selected pair; false without one. Any thread.
    @discardableResult
    func send(_ packet: [UInt8]) -> Bool {
        packet.withUnsafeBytes { agent.path.send($0, on: socket) }
    }

    /// Lends the path to a call leg; false when another leg has it.
    func lend() -> Bool {
        guard !isLent else { return false }
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

    /// Stops the agent (and its TURN allocations); the socket closes with the last reference.
    func close() { agent.close() }

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
