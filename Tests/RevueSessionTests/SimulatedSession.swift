// Whole sessions on simulated time: Revue instances and a rendezvous node on one `SimulatedTime`,
// talking over a `VirtualNetwork`. Every timer, timeout, retransmission and handshake runs on the
// simulated clock, datagrams take the time the network's links say, and profile writes complete
// when the simulated disk says; so a scenario gives the same events at the same simulated times
// in every run, beside any load, and seconds of session time pass in milliseconds.
import Foundation
import MediaCore
import MediaTestSupport
import MediaTools
import Testing

@testable import RevueSession

/// A simulated world: a clock, a network, a rendezvous node at 127.77.0.100:33400 and peers at
/// 127.77.0.1, .2, ... (virtual addresses: nothing is sent on a real socket). Main actor.
@MainActor
final class SimulatedWorld {
    let time = SimulatedTime()
    let network: VirtualNetwork
    /// The seed of the network's draws and of the peers' identities.
    let seed: UInt64
    let node: RendezvousNode
    static let nodeAddress = SocketAddress(ipv4: 127, 77, 0, 100, port: 33_400)
    private(set) var peers: [SimulatedPeer] = []
    /// The peers' data directories: in memory (/dev/shm) where there is one, as the simulated disk
    /// writes at once and an fsync there costs nothing.
    let directory =
        (FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : FileManager.default.temporaryDirectory.path)
        + "/revue-sim-\(UUID().uuidString)"

    /// A world whose links all have `link` (1 ms one way by default), drawn from `seed`.
    init(seed: UInt64 = 1, link: ImpairmentModel.Settings = ImpairmentModel.Settings(delayMilliseconds: 1)) {
        self.seed = seed
        network = VirtualNetwork(time: time, seed: seed, defaultLink: link)
        node = RendezvousNode(socket: network.bind(Self.nodeAddress), scheduler: time)
    }

    /// The wall clock the peers' tag epochs read (seconds since 1970): half past an hour when the
    /// world starts, moving with simulated time. Pinned so that a run never straddles the
    /// ten minutes before an epoch boundary, when a peer registers two epochs' tags and the
    /// figures would depend on the hour the test ran.
    var wallClock: @Sendable () -> Double {
        let time = self.time, start = SimulatedTime.defaultStart
        return { 1_800_001_800 + (time.now - start).inSeconds }
    }

    /// The address of the `n`th peer's host (n from 0).
    static func host(_ n: Int) -> SocketAddress { SocketAddress(ipv4: 127, 77, 0, UInt8(1 + n), port: 0) }

    /// Whether peers added from now on make friend links (on by default, as in production).
    var makesLinks = true
    /// The friend links' seeds handed out so far (each link's agent draws its tie-breaker and
    /// keepalive jitter from the next one, so runs repeat).
    private let linkSeeds = LinkSeeds()

    /// The session environment of a peer on `host`: the world's clock, a port of its network, a
    /// simulated disk, friend links on ports of the network with their ICE agents on the world's
    /// clock (`linkEndpoint`), and no LAN discovery.
    func environment(host: SocketAddress) -> SessionEnvironment {
        let network = self.network
        return SessionEnvironment(
            scheduler: time,
            bindSocket: { _, port throws(RevueError) in
                MainActor.assumeIsolated { network.bind(SocketAddress(host, port: port)) }
            },
            makesLinks: makesLinks, lanDiscovery: false, simulatedDisk: true, wallClock: wallClock,
            makeLinkEndpoint: linkEndpoint(host: host))
    }

    /// How a peer on `host` makes a friend link: a port of the world's network on its host (the
    /// next free port from 50,000) and an ICE agent on that port, run by the world's clock with a
    /// seed of its own; the agent's reports reach the session at the clock's next turn; closing
    /// the link unbinds the port. No call leg can borrow such a link (it has no UDP socket).
    func linkEndpoint(host: SocketAddress) -> (String, ICEAgentConfiguration) throws -> FriendLinkEndpoint {
        let network = self.network, time = self.time, seeds = linkSeeds
        return { _, ice in
            let port = network.bind(SocketAddress(host, port: 0))
            let agent = ICEAgent(transport: port, configuration: ice, scheduler: time, seed: seeds.next())
            return FriendLinkEndpoint(
                carrier: .transport(port), agent: agent, toMainActor: { work in time.schedule(after: .zero, work) },
                release: { port.close() })
        }
    }

    /// Starts a peer on the next host, registered with the world's rendezvous node.
    func addPeer(_ name: String, tweak: (inout RevueConfiguration) -> Void = { _ in }) throws -> SimulatedPeer {
        let host = Self.host(peers.count)
        var c = RevueConfiguration(dataDirectory: directory + "/" + name)
        c.bindHost = host.host
        c.port = 40_000
        c.lanDiscovery = false
        c.rendezvousNodes = [Self.nodeAddress.description]
        c.timeouts.rendezvousInterval = 0.2
        c.timeouts.handshakeRetryInterval = 0.2
        tweak(&c)
        var environment = environment(host: host)
        // A fixed identity per world seed and peer: the friend IDs, and so which side of each link
        // controls, are the same in every run.
        let identitySeed = seed &* 1_000 &+ UInt64(peers.count)
        environment.randomness.identityKeys = {
            var g = SeededGenerator(seed: identitySeed)
            return KeyPair(secret: (0..<4).flatMap { _ in withUnsafeBytes(of: g.next() as UInt64) { Array($0) } })
        }
        let peer = try SimulatedPeer(name: name, configuration: c, environment: environment)
        peers.append(peer)
        for p in peers {
            p.recorder.names[peer.id] = name
            peer.recorder.names[p.id] = p.name
        }
        return peer
    }

    /// Makes `a` and `b` friends (a requests, b accepts once the request arrived) and runs until
    /// both see each other online; whether that happened within `timeout` of simulated time.
    func befriend(_ a: SimulatedPeer, _ b: SimulatedPeer, timeout: Duration = .seconds(10)) throws -> Bool {
        try a.friends.addFriend(address: b.revue.revueAddress, message: "hi")
        guard time.runUntil(timeout: timeout, { b.requests.contains(a.id) }) else { return false }
        try b.friends.addFriendNorequest(friendId: a.id)
        return time.runUntil(timeout: timeout) { a.isOnline(with: b) && b.isOnline(with: a) }
    }

    /// Runs simulated time until `condition` holds or `timeout` passes; whether it held.
    @discardableResult
    func run(until timeout: Duration, _ condition: () -> Bool) -> Bool { time.runUntil(timeout: timeout, condition) }

    /// Runs simulated time for `duration`.
    func run(for duration: Duration) { time.advance(by: duration) }

    /// `run(until:_:)` for tests with tasks of their own on the main actor (a `sendMessage`
    /// waiting for its receipt): after each 10 ms step it yields, so those tasks run too.
    @discardableResult
    func runYielding(until timeout: Duration, _ condition: () -> Bool) async -> Bool {
        let end = time.now + timeout
        for _ in 0..<4 { await Task.yield() }
        time.runDue()
        while !condition() {
            guard time.now < end else { return false }
            time.advance(by: min(.milliseconds(10), end - time.now))
            for _ in 0..<4 { await Task.yield() }
        }
        return true
    }

    /// Destroys every peer, runs the goodbyes out, and removes the data directories.
    func close() {
        for p in peers { p.revue.destroy() }
        time.advance(by: .milliseconds(100))
        node.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// The seeds of a world's friend-link agents, handed out in order. Main actor.
final class LinkSeeds {
    private var last: UInt64 = 1000
    func next() -> UInt64 {
        last += 1
        return last
    }
}

/// One Revue instance of a `SimulatedWorld`, with a recorder of its invitation and room events
/// and of the friend requests it received. Main actor.
@MainActor
final class SimulatedPeer: RevueDelegate {
    let name: String
    let revue = Revue()
    let recorder = CallRecorder()
    private(set) var requests: [String] = []
    let id: String
    var friends: FriendManager { revue.friends }
    var room: Room { revue.room }
    var core: SessionCore { revue.core! }
    var calls: [String] { recorder.calls }

    init(name: String, configuration: RevueConfiguration, environment: SessionEnvironment) throws {
        self.name = name
        self.configuration = configuration
        self.environment = environment
        try revue.initialize(configuration, environment: environment)
        id = revue.revueId
        revue.delegates.add(delegate: self)
        revue.delegates.add(delegate: recorder)
        revue.room.delegates.add(delegate: recorder)
    }

    /// The configuration and environment it was started with (a restart uses them again).
    let configuration: RevueConfiguration
    let environment: SessionEnvironment
    /// Online/offline changes per friend id, with the simulated time they came at.
    private(set) var onlineChanges: [(friend: String, online: Bool, at: MonotonicTime)] = []
    /// Friend messages received, in order.
    private(set) var messages: [(friend: String, text: String)] = []
    /// Every friend-layer event, in order (as `TestPeer` records them).
    private(set) var events: [Event] = []
    /// The events other than discoverable ones, for order checks.
    var friendEvents: [Event] { events.filter { if case .discoverable = $0 { false } else { true } } }
    /// Forgets the events recorded so far (before a restart, say).
    func clearEvents() {
        events = []
        messages = []
    }

    func isOnline(with other: SimulatedPeer) -> Bool { friends.getFriendPaths(friendId: other.id).isOnline }

    /// Starts the instance again after `destroy()` or a simulated crash, on the same data
    /// directory, address and clock.
    func restart() throws {
        try revue.initialize(configuration, environment: environment)
        revue.delegates.add(delegate: self)
        revue.delegates.add(delegate: recorder)
        revue.room.delegates.add(delegate: recorder)
    }

    /// Sends a friend message; the result (message id or error) lands in the returned box once the
    /// receipt arrives or the send fails, as simulated time runs.
    func send(_ text: String, to friend: SimulatedPeer, timeout: Double = 10) -> MessageOutcome {
        let outcome = MessageOutcome()
        // The instance itself, not its FriendManager, which holds it unowned.
        let revue = self.revue, id = friend.id
        Task { @MainActor in
            do throws(FriendMessageError) {
                outcome.result = .success(try await revue.friends.sendMessage(friendId: id, message: text, timeout: timeout))
            } catch {
                outcome.result = .failure(error)
            }
        }
        return outcome
    }

    func revue(_ revue: Revue, didReceiveFriendRequest friendId: String, message: String) {
        requests.append(friendId)
        events.append(.request(friendId, message))
    }
    func revue(_ revue: Revue, friend friendId: String, didUpdateName name: String) { events.append(.name(friendId, name)) }
    func revue(_ revue: Revue, friend friendId: String, didUpdateStatusMessage statusMessage: String) {
        events.append(.statusMessage(friendId, statusMessage))
    }
    func revue(_ revue: Revue, friend friendId: String, didUpdateStatus status: UserStatus) {
        events.append(.status(friendId, status))
    }
    func revue(_ revue: Revue, didUpdateIsDiscoverable isDiscoverable: Bool) { events.append(.discoverable(isDiscoverable)) }

    func revue(_ revue: Revue, friend friendId: String, didUpdatePaths paths: FriendConnectionPaths) {
        events.append(.paths(friendId, paths.isOnline))
        let now = revue.core?.scheduler.now ?? .zero
        if onlineChanges.last(where: { $0.friend == friendId })?.online != paths.isOnline {
            onlineChanges.append((friendId, paths.isOnline, now))
        }
    }

    func revue(_ revue: Revue, friend friendId: String, didReceiveMessage message: String) {
        messages.append((friendId, message))
        events.append(.message(friendId, message))
    }
}

/// Where a `SimulatedPeer.send` result lands. Main actor.
@MainActor
final class MessageOutcome {
    var result: Result<UInt32, FriendMessageError>?
}

extension SimulatedWorld {
    /// Makes every pair of `peers` friends at once (every request sent, then every one accepted)
    /// and runs until each sees every other online; whether that happened within `timeout`.
    func befriendAll(_ peers: [SimulatedPeer], timeout: Duration = .seconds(30)) throws -> Bool {
        for (i, a) in peers.enumerated() {
            for b in peers[(i + 1)...] { try a.friends.addFriend(address: b.revue.revueAddress, message: "hi") }
        }
        for (i, b) in peers.enumerated() {
            let requesters = peers[..<i]
            guard run(until: timeout, { requesters.allSatisfy { b.requests.contains($0.id) } }) else { return false }
            for a in requesters { try b.friends.addFriendNorequest(friendId: a.id) }
        }
        return run(until: timeout) { peers.allSatisfy { p in peers.allSatisfy { $0 === p || p.isOnline(with: $0) } } }
    }
}

extension SimulatedWorld {
    /// Adds one peer per name for call tests: the invitation timeout given (30 s by default, as
    /// `CallPeer`'s), any further `tweak`, and the room's media legs off (signalling only).
    func addCallPeers(
        _ names: [String], invitationTimeout: Double = 30, tweak: (inout RevueConfiguration) -> Void = { _ in }
    ) throws -> [SimulatedPeer] {
        try names.map { name in
            let p = try addPeer(name) {
                $0.timeouts.invitationTimeout = invitationTimeout
                tweak(&$0)
            }
            p.room.environment.mediaLegs = false
            return p
        }
    }

    /// Runs until `peer` has recorded the invitation or room event `event` among its calls, or
    /// `timeout` passes; whether it did.
    func run(until timeout: Duration = .seconds(10), _ peer: SimulatedPeer, recorded event: String) -> Bool {
        run(until: timeout) { peer.calls.contains(event) }
    }

    /// Runs until `peer` has recorded the room event `event`, or `timeout` passes; whether it did.
    func run(until timeout: Duration = .seconds(10), _ peer: SimulatedPeer, roomEvent event: String) -> Bool {
        run(until: timeout) { peer.recorder.room.contains(event) }
    }

    /// Invites `b` from `a`; `b` accepts once the invitation arrived; runs until each sees the
    /// other in its room. Whether all that happened within `timeout`.
    func startCall(_ a: SimulatedPeer, _ b: SimulatedPeer, message: String = "join us", timeout: Duration = .seconds(10)) throws
        -> Bool
    {
        try a.friends.sendInvitation(friendId: b.id, message: message)
        guard run(until: timeout, { b.room.invitations[a.id] != nil }) else { return false }
        try b.friends.acceptInvitation(friendId: a.id)
        return run(until: timeout) { a.room.remoteParticipants[b.id] != nil && b.room.remoteParticipants[a.id] != nil }
    }
}
