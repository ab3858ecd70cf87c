// A TURN client (RFC 8656): one allocation on one server, over UDP (sharing the agent's socket),
// TCP or TLS (its own connection), with long-term credentials, permissions, channels, refreshes,
// IPv6 or dual relayed addresses, and a lost allocation found (a Refresh when peers go silent) and
// made again.
import Dispatch
import Glibc
import MediaBase
import MediaWire
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Counters of one `TURNClient`. Every datagram `handleDatagram` takes from the server's address,
/// and every frame of the TCP connection, adds one to `received` and one to exactly one of the
/// counters marked "(received)". Thread rule: a value type. Cost: none.
package struct TURNClientStatistics: Sendable, Equatable {
    /// Datagrams or frames from the server looked at.
    package var received = 0
    /// (received) Responses matched to a request of ours, verified and acted on.
    package var responsesAccepted = 0
    /// (received) Responses whose transaction ID is not one we are waiting for (late duplicates,
    /// another component's transactions on the same socket, guesses): left to the caller.
    package var unmatchedResponses = 0
    /// (received) Responses with one of our transaction IDs that failed MESSAGE-INTEGRITY or
    /// FINGERPRINT, were unsigned where a signature is due, or had the wrong method: dropped
    /// without any effect.
    package var forgedResponses = 0
    /// (received) Not STUN or ChannelData, unparsable, or missing what it must carry.
    package var malformed = 0
    /// (received) Requests and indications other than Data from the server: ignored.
    package var ignored = 0
    /// (received) Data indications and ChannelData handed to `onPeerData`.
    package var peerDataDelivered = 0
    /// (received) Peer data dropped: an unknown channel, a peer without a permission, a bad
    /// FINGERPRINT, or no allocation.
    package var peerDataDropped = 0

    /// Requests sent (first transmissions) and retransmitted.
    package var requestsSent = 0
    package var retransmissions = 0
    /// Transactions that got no answer.
    package var timeouts = 0
    /// Refreshes of the allocation the server confirmed (the deleting one aside).
    package var allocationRefreshes = 0
    /// Requests sent again with a new nonce after a 438 (or a 401 bringing a new nonce).
    package var staleNonceRetries = 0
    /// Send indications and ChannelData messages sent.
    package var sendIndicationsSent = 0
    package var channelDataSent = 0
    /// Sends refused (no allocation, unknown channel, socket error).
    package var sendFailures = 0
    /// Permissions, channels or requests refused by the caps of `TURNClient`.
    package var refusedForLimits = 0
    /// CreatePermission and ChannelBind transactions the server refused or never answered (each
    /// is tried again after `TURNClientTiming.retryAfterFailure`).
    package var permissionFailures = 0
    /// Why the last of those failed (the server's error code and reason, or no answer).
    package var lastPermissionFailure: String?
    /// Families of a dual allocation (`RelayFamilies.both`) the server refused (ADDRESS-ERROR-CODE,
    /// or a 440 to the dual request, after which IPv4 alone is asked for), and why the last was.
    package var addressFamiliesRefused = 0
    /// The family and the server's code and reason of the last of those.
    package var lastAddressFamilyRefusal: String?
    /// Refreshes sent at once because peers went silent while we sent to them (`TURNClientTiming
    /// .silenceBeforeProbe`), and how many of them the server confirmed.
    package var livenessProbes = 0
    /// Those the server confirmed (the allocation was there).
    package var livenessProbesConfirmed = 0
    /// Allocations found gone (a 437, no answer or another refusal to a Refresh, or the TCP/TLS
    /// connection lost) and made again, with permissions and channels reinstalled; and why the
    /// last was lost.
    package var allocationsLost = 0
    /// Why the last allocation was found lost.
    package var lastAllocationLoss: String?

    package init() {}

    /// The sum of the "(received)" counters; equals `received`.
    package var receivedByKind: Int {
        responsesAccepted + unmatchedResponses + forgedResponses + malformed + ignored + peerDataDelivered + peerDataDropped
    }
}

/// Timers of a `TURNClient`, adjustable before `allocate()`. Thread rule: a value type.
package struct TURNClientTiming: Sendable {
    /// First retransmission timeout over UDP (RFC 8489 §6.2.1), doubled per retransmission up to
    /// `maxRetransmissionTimeout`.
    package var retransmissionTimeout: Double = 0.25
    package var maxRetransmissionTimeout: Double = 2
    /// Transmissions of one request over UDP before it times out (RFC 8489 Rc).
    package var maxTransmissions = 7
    /// How long a request over TCP (sent once) waits for its answer.
    package var tcpTransactionTimeout: Double = 10
    /// The allocation is refreshed this long before it expires (and at least halfway through).
    package var refreshMargin: Double = 60
    /// Permissions last 300 s (RFC 8656 §9); refreshed after this long.
    package var permissionRefresh: Double = 240
    /// Channels last 600 s (RFC 8656 §12); refreshed after this long.
    package var channelRefresh: Double = 540
    /// A permission or channel request that failed is tried again after this long.
    package var retryAfterFailure: Double = 30
    /// LIFETIME asked for in Allocate and Refresh requests; nil lets the server choose (600 s).
    package var requestedLifetime: UInt32? = nil
    /// While we send to peers and no peer data has come through the relay for this long, a
    /// Refresh goes at once to check that the allocation still exists (0: never). While peers stay
    /// silent and the server confirms, the wait doubles up to 16 times this.
    package var silenceBeforeProbe: Double = 4
    /// How often the silence is looked at (seconds), while the allocation has permissions.
    package var livenessCheckInterval: Double = 1
    /// Transmissions of that Refresh over UDP before the allocation counts as lost (4: about
    /// 3.75 s with the default retransmission timeouts). Over TCP or TLS it waits
    /// `tcpTransactionTimeout`, but a server that went away closes the connection first.
    package var probeTransmissions = 4
    /// Over TCP or TLS, how long a lost connection is tried again (once a second) before the
    /// allocation fails: a server that restarts is given this long to listen again.
    package var reconnectWindow: Double = 10

    package init() {}
}

/// One TURN allocation. Thread rule: every method from any thread; `onStateChange` runs on
/// `queue`; `onPeerData` runs synchronously on the thread that calls `handleDatagram` (UDP) or on
/// the connection's reader thread (TCP, TLS), and must not call back into the client's control
/// methods for long. Cost: control traffic allocates; `sendChannelData` does not (one `sendmsg`
/// under the client's lock over UDP, one framed write over TCP; over TLS OpenSSL's record
/// encryption allocates); receiving ChannelData does not. While it holds permissions, one timer
/// wakeup a second looks for silence (`TURNClientTiming.silenceBeforeProbe`).
///
/// Every response is trusted only after its transaction ID matches a request of ours and its
/// MESSAGE-INTEGRITY (long-term key) and FINGERPRINT check out; what a stranger can make it keep is
/// bounded by `maxPendingTransactions`, `maxPermissions` and `maxChannels`.
/// Sendable: the state, the scratch bytes and the work on them are a `TURNClientCore` in a `Locked`
/// box, reached only under its lock; the rest are `let`s set in init.
package final class TURNClient: TURNChannelSender, @unchecked Sendable {
    /// Where the allocation stands.
    package enum State: Sendable, Equatable {
        /// Before `allocate()`; `allocating` until the server's answer.
        case idle, allocating
        /// The relayed address peers reach us at, and our address as the server sees it.
        case allocated(relayed: SocketAddress, mapped: SocketAddress)
        /// The allocation could not be made or kept (the reason, with the server's error). A lost
        /// allocation is made again first (`allocating` once more, counted in
        /// `TURNClientStatistics.allocationsLost`); this state is final.
        case failed(String)
        /// After `close()`.
        case closed
    }

    /// Requests waiting for an answer at most; more are refused and counted.
    package static let maxPendingTransactions = 64
    /// Peer IP addresses with a permission at most.
    package static let maxPermissions = 128
    /// Channels bound at most.
    package static let maxChannels = 128

    /// Which families of relayed address an Allocate asks for (RFC 8656 §7.1): IPv4 (the
    /// default, nothing sent), IPv6 (REQUESTED-ADDRESS-FAMILY; a server without IPv6 relays
    /// answers 440 and the allocation fails with that reason), or both (ADDITIONAL-ADDRESS-FAMILY:
    /// an IPv4 and an IPv6 relayed address in one allocation; when the server refuses IPv6 the
    /// allocation goes on with IPv4 alone, counted in `addressFamiliesRefused`).
    /// Thread rule: a value type.
    package enum RelayFamilies: Sendable, Equatable {
        /// An IPv4 relayed address (nothing is added to the Allocate).
        case ipv4
        /// An IPv6 relayed address (REQUESTED-ADDRESS-FAMILY).
        case ipv6
        /// One of each (ADDITIONAL-ADDRESS-FAMILY), IPv4 alone when the server refuses IPv6.
        case both
    }

    /// The TURN server and credentials of the allocation.
    package let server: ICEServer

    /// The state and the work on it, reached only under the box's lock.
    private let core: Locked<TURNClientCore>
    /// Whether the server's datagrams come through `handleDatagram` (UDP, or a socketless client).
    private let takesDatagrams: Bool

    /// `socket`: for a UDP server, the socket the allocation is made from (the caller passes every
    /// datagram from `server.address` to `handleDatagram`); for TCP, unused (the client connects).
    /// `scheduler`: the clock and timers (nil: the real clock and a dispatch queue of its own).
    package init(server: ICEServer, socket: UDPSocket, queue: DispatchQueue, scheduler: (any TaskScheduler)? = nil) {
        self.server = server
        takesDatagrams = server.transport == .udp
        core = Locked(TURNClientCore(server: server, socket: socket, queue: queue, scheduler: scheduler))
        core.withLock { $0.owner = self }
    }

    /// A client without a socket, for the STUN fuzzer and tests on simulated time: everything it
    /// would send goes to `sendTap` (called under the client's lock: it must not call back into
    /// the client), datagrams come in through `handleDatagram`. Without `scheduler` nothing
    /// happens with time; with one, every timer and `onStateChange` runs on it (a `SimulatedTime`
    /// in tests).
    package init(
        socketlessServer server: ICEServer, scheduler: (any TaskScheduler)? = nil, sendTap: @escaping @Sendable ([UInt8]) -> Void
    ) {
        self.server = server
        takesDatagrams = true
        core = Locked(TURNClientCore(socketlessServer: server, scheduler: scheduler, sendTap: sendTap))
        core.withLock { $0.owner = self }
    }

    /// Called on `queue` (on the scheduler for a socketless client given one) when `state` changes.
    package var onStateChange: (@Sendable (State) -> Void)? {
        get { core.withLock { $0.onStateChange } }
        set { core.withLock { $0.onStateChange = newValue } }
    }
    /// A peer's data relayed to us (Data indication or ChannelData), with the peer's address.
    package var onPeerData: (@Sendable (_ peer: SocketAddress, _ payload: UnsafeRawBufferPointer) -> Void)? {
        get { core.withLock { $0.onPeerData } }
        set { core.withLock { $0.onPeerData = newValue } }
    }

    /// Where the allocation stands.
    package var state: State { core.withLock { $0.state } }

    /// The counters so far.
    package var statistics: TURNClientStatistics { core.withLock { $0.statistics } }

    /// The families of relayed address asked for; set before `allocate()` (kept when a lost
    /// allocation is made again).
    package var relayFamilies: RelayFamilies {
        get { core.withLock { $0.relayFamilies } }
        set { core.withLock { $0.relayFamilies = newValue } }
    }

    /// Every relayed address of the allocation: the one of `state` first, then (dual allocation)
    /// the other family's. Empty when not allocated.
    package var relayedAddresses: [SocketAddress] { core.withLock { $0.relayedAddresses } }

    /// Requests sent and not yet answered or timed out.
    package var pendingTransactions: Int { core.withLock { $0.pendingTransactions } }

    /// The timers; set before `allocate()` (later changes apply to the next timer set).
    package var timing: TURNClientTiming {
        get { core.withLock { $0.timing } }
        set { core.withLock { $0.timing = newValue } }
    }

    /// The channel bound to `peer`, and whether the server confirmed it.
    package func channel(for peer: SocketAddress) -> (number: UInt16, confirmed: Bool)? {
        core.withLock { $0.channel(for: peer) }
    }

    /// Whether a permission for `peer`'s IP address is installed (confirmed by the server).
    package func hasPermission(for peer: SocketAddress) -> Bool { core.withLock { $0.hasPermission(for: peer) } }

    /// Starts the Allocate transaction (401 → long-term credentials → allocation; refreshed
    /// before it expires). Only from `idle`; otherwise nothing happens.
    package func allocate() { core.withLock { $0.allocate() } }

    /// Installs (and keeps refreshing) a permission for the peer's IP. Before the allocation it
    /// is installed as soon as the allocation is made.
    package func createPermission(_ peer: SocketAddress) { core.withLock { $0.createPermission(peer) } }

    /// Binds a channel to the peer (also installs the permission) and returns its number at once
    /// (0x4000...0x4FFF); nil when all are used. Data for it goes as Send indications until the
    /// server confirms the binding.
    package func bindChannel(_ peer: SocketAddress) -> UInt16? { core.withLock { $0.bindChannel(peer) } }

    /// Sends a peer a datagram: ChannelData when its channel is confirmed, else a Send indication
    /// (installing a permission for the peer first if it has none). False without an allocation.
    @discardableResult
    package func send(_ payload: [UInt8], to peer: SocketAddress) -> Bool { core.withLock { $0.send(payload, to: peer) } }

    /// Sends `payload` to the peer bound to `channel`: ChannelData once the server confirmed the
    /// binding, a Send indication before. No heap allocation. False without an allocation or for
    /// an unknown channel.
    package func sendChannelData(_ payload: UnsafeRawBufferPointer, channel: UInt16) -> Bool {
        core.withLock { $0.sendChannelData(payload, channel: channel) }
    }

    /// A datagram that arrived on the shared UDP socket; true when it was this server's and is
    /// consumed (responses, Data indications, ChannelData: peer data goes to `onPeerData`). False
    /// for other sources, and for the server's datagrams that are not this allocation's (responses
    /// to other transactions, anything neither STUN nor ChannelData), which the caller may handle.
    package func handleDatagram(_ bytes: UnsafeRawBufferPointer, from: SocketAddress) -> Bool {
        guard from == server.address, takesDatagrams else { return false }
        return process(bytes)
    }

    /// Deletes the allocation (Refresh with lifetime 0, retransmitted over UDP until answered)
    /// and stops every other timer. Idempotent.
    package func close() { core.withLock { $0.close() } }

    /// One datagram or TCP frame from the server; true when consumed. Peer data goes to its
    /// handler after the lock is released.
    fileprivate func process(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let (consumed, delivery) = core.withLock { $0.process(bytes) }
        switch delivery {
        case .channel(let handler, let peer, let data): handler(peer, data)
        case .indication(let handler, let peer, let data): data.withUnsafeBytes { handler(peer, $0) }
        case nil: break
        }
        return consumed
    }

    /// The TCP or TLS connection is up.
    fileprivate func connected() { core.withLock { $0.connected() } }

    /// The TCP or TLS connection failed or was closed by the server.
    fileprivate func connectionClosed(_ reason: String) { core.withLock { $0.connectionClosed(reason) } }

    /// A connection made again after a loss.
    fileprivate func reconnect() { core.withLock { $0.reconnect() } }

    /// The timer.
    fileprivate func tick() { core.withLock { $0.tick() } }
}

/// Peer data `TURNClientCore.process` found, handed to `onPeerData` after the lock is released:
/// ChannelData (its bytes in the caller's buffer) or a Data indication's payload.
private enum TURNPeerDelivery {
    case channel(
        @Sendable (_ peer: SocketAddress, _ payload: UnsafeRawBufferPointer) -> Void, SocketAddress, UnsafeRawBufferPointer)
    case indication(@Sendable (_ peer: SocketAddress, _ payload: UnsafeRawBufferPointer) -> Void, SocketAddress, [UInt8])
}

/// Everything of a `TURNClient` that changes, and the work on it: the client keeps it in a
/// `Locked` box and calls it only under that lock. Thread rule: one thread at a time (the box's
/// lock). Cost: see `TURNClient`.
private final class TURNClientCore {
    typealias State = TURNClient.State
    typealias RelayFamilies = TURNClient.RelayFamilies
    static var maxPendingTransactions: Int { TURNClient.maxPendingTransactions }
    static var maxPermissions: Int { TURNClient.maxPermissions }
    static var maxChannels: Int { TURNClient.maxChannels }

    /// The TURN server and credentials of the allocation.
    let server: ICEServer
    /// The client, for the callbacks of timers and of the TCP connection (which take its lock).
    weak var owner: TURNClient?

    private enum Purpose: Equatable {
        case allocate
        case refresh(lifetime: UInt32?)
        /// A Refresh sent at once because peers went silent (`TURNClientTiming.silenceBeforeProbe`).
        case probe
        case permission(SocketAddress)
        case channel(UInt16)
    }

    private struct Transaction {
        var purpose: Purpose
        var method: STUNMessage.Method
        var bytes: [UInt8]
        /// The key the request was signed with (nil: sent without credentials).
        var key: [UInt8]?
        var transmissions = 1
        var nextAt: MonotonicTime
        /// The wait before the next transmission (or, after the last, the timeout).
        var timeout: Duration
        /// Stale-nonce retries behind this request.
        var retries: Int
    }

    private struct Permission {
        var confirmed = false
        var pending = false
        /// When it is (re)requested (`.zero`: as soon as the allocation is made).
        var refreshAt = MonotonicTime.zero
    }

    private struct Channel {
        let peer: SocketAddress
        var confirmed = false
        var pending = false
        /// When it is (re)bound (`.zero`: as soon as the allocation is made).
        var refreshAt = MonotonicTime.zero
        /// A Send indication to `peer` up to the DATA attribute's header (its length last). Its
        /// transaction ID stays the same for the channel: indications are never matched.
        let indicationHeader: [UInt8]
    }

    /// A transaction ID as a dictionary key, read without allocating.
    private struct TransactionKey: Hashable {
        var high: UInt64, low: UInt32
        init(_ message: UnsafeRawBufferPointer) {
            high = message.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
            low = message.loadUnaligned(fromByteOffset: 16, as: UInt32.self)
        }
        init(_ id: [UInt8]) {
            var h: UInt64 = 0, l: UInt32 = 0
            id.withUnsafeBytes { b in
                h = b.loadUnaligned(fromByteOffset: 0, as: UInt64.self)
                l = b.loadUnaligned(fromByteOffset: 8, as: UInt32.self)
            }
            high = h; low = l
        }
    }

    private let socket: UDPSocket?
    private let queue: DispatchQueue
    private let sendTap: (@Sendable ([UInt8]) -> Void)?
    /// The clock and timer queue of every deadline (retransmissions, refreshes, the liveness
    /// check, reconnecting): a dispatch queue of the client's own on the real clock unless
    /// injected; `timersOn` once `allocate()` armed them.
    private let scheduler: any TaskScheduler
    private let timersOn: Bool
    /// `onStateChange` runs as work on `scheduler` (a socketless client given one: on a simulated
    /// clock it then runs at the simulated time the state changed) instead of on `queue`.
    private let announcesOnScheduler: Bool
    /// The tick scheduled next and when it is due (it may come early: a later deadline leaves an
    /// earlier tick in place, which finds nothing due and schedules the next).
    private var pendingTick: ScheduledWork?
    private var tickAt: MonotonicTime?
    private var timersActive = false
    private var tcp: TURNTCPConnection?
    private var current: State = .idle
    private var stateHandler: (@Sendable (State) -> Void)?
    private var peerHandler: (@Sendable (_ peer: SocketAddress, _ payload: UnsafeRawBufferPointer) -> Void)?
    private var settings = TURNClientTiming()
    private var realm: String?
    private var nonce: String?
    private var key: [UInt8]?
    private var transactions: [TransactionKey: Transaction] = [:]
    /// When the allocation is refreshed next (nil: no refresh due).
    private var refreshAt: MonotonicTime?
    private var permissions: [SocketAddress: Permission] = [:]
    private var channels: [UInt16: Channel] = [:]
    private var channelOf: [SocketAddress: UInt16] = [:]
    private var nextChannel = TURNChannelData.channelRange.lowerBound
    private var stats = TURNClientStatistics()
    private var families = RelayFamilies.ipv4
    /// Every relayed address of the allocation (two for a dual allocation); empty without one.
    private var relayedAll: [SocketAddress] = []
    /// The liveness check: when it runs next, the counters it saw last, when peer data last came
    /// (or the allocation was made) and when we last sent, the probe in flight, and how many probes
    /// the server confirmed while peers stayed silent.
    private var nextLivenessCheck: MonotonicTime?
    private var seenDelivered = 0, seenSent = 0
    private var heardAt = MonotonicTime.zero, sentAt = MonotonicTime.zero, lastProbeAt = MonotonicTime.zero
    private var probing = false
    private var quietProbes = 0
    /// Why the TCP or TLS connection was lost while allocated (set while it is made again), and
    /// until when it is tried again.
    private var reconnectingAfter: String?
    private var reconnectUntil = MonotonicTime.zero
    /// The server's address as a kernel sockaddr, and scratch room for a Send indication's header
    /// (bytes 0..<64) followed by four zero bytes of padding: the hot path's only memory.
    private let serverName = UnsafeMutablePointer<sockaddr_storage>.allocate(capacity: 1)
    private let serverNameLength: socklen_t
    private let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 72, alignment: 8)

    /// `socket`: for a UDP server, the socket the allocation is made from (the caller passes every
    /// datagram from `server.address` to `handleDatagram`); for TCP, unused (the client connects).
    /// `scheduler`: the clock and timers (nil: the real clock and a dispatch queue of its own).
    package init(server: ICEServer, socket: UDPSocket, queue: DispatchQueue, scheduler: (any TaskScheduler)? = nil) {
        self.server = server
        self.socket = socket
        self.queue = queue
        sendTap = nil
        self.scheduler = scheduler ?? DispatchTaskScheduler(queue: DispatchQueue(label: "revue.turn.timer"))
        timersOn = true
        announcesOnScheduler = false
        serverName.initialize(to: sockaddr_storage())
        serverNameLength = server.address.write(into: serverName, socketFamily: socket.family)
        scratch.initializeMemory(as: UInt8.self, repeating: 0)
    }

    /// A client without a socket, for the STUN fuzzer and tests on simulated time: everything it
    /// would send goes to `sendTap` (called under the client's lock: it must not call back into
    /// the client), datagrams come in through `handleDatagram`. Without `scheduler` nothing
    /// happens with time; with one, every timer and `onStateChange` runs on it (a `SimulatedTime`
    /// in tests).
    package init(
        socketlessServer server: ICEServer, scheduler: (any TaskScheduler)? = nil, sendTap: @escaping @Sendable ([UInt8]) -> Void
    ) {
        self.server = server
        socket = nil
        queue = DispatchQueue(label: "revue.turn.socketless")
        self.sendTap = sendTap
        self.scheduler = scheduler ?? DispatchTaskScheduler(queue: DispatchQueue(label: "revue.turn.timer"))
        timersOn = scheduler != nil || server.transport.isStream
        announcesOnScheduler = scheduler != nil
        serverName.initialize(to: sockaddr_storage())
        serverNameLength = server.address.write(into: serverName)
        scratch.initializeMemory(as: UInt8.self, repeating: 0)
    }

    deinit {
        pendingTick?.cancel()
        tcp?.close()
        serverName.deallocate()
        scratch.deallocate()
    }

    /// Called on `queue` (on the scheduler for a socketless client given one) when `state` changes.
    package var onStateChange: (@Sendable (State) -> Void)? {
        get { locked { stateHandler } }
        set { locked { stateHandler = newValue } }
    }
    /// A peer's data relayed to us (Data indication or ChannelData), with the peer's address.
    package var onPeerData: (@Sendable (_ peer: SocketAddress, _ payload: UnsafeRawBufferPointer) -> Void)? {
        get { locked { peerHandler } }
        set { locked { peerHandler = newValue } }
    }

    package var state: State { locked { current } }

    /// The counters so far.
    package var statistics: TURNClientStatistics { locked { stats } }

    /// The families of relayed address asked for; set before `allocate()` (kept when a lost
    /// allocation is made again).
    package var relayFamilies: RelayFamilies {
        get { locked { families } }
        set { locked { families = newValue } }
    }

    /// Every relayed address of the allocation: the one of `state` first, then (dual allocation)
    /// the other family's. Empty when not allocated.
    package var relayedAddresses: [SocketAddress] { locked { relayedAll } }

    /// Requests sent and not yet answered or timed out.
    package var pendingTransactions: Int { locked { transactions.count } }

    /// The timers; set before `allocate()` (later changes apply to the next timer set).
    package var timing: TURNClientTiming {
        get { locked { settings } }
        set { locked { settings = newValue } }
    }

    /// The channel bound to `peer`, and whether the server confirmed it.
    package func channel(for peer: SocketAddress) -> (number: UInt16, confirmed: Bool)? {
        locked { channelOf[peer].map { ($0, channels[$0]?.confirmed ?? false) } }
    }

    /// Whether a permission for `peer`'s IP address is installed (confirmed by the server).
    package func hasPermission(for peer: SocketAddress) -> Bool {
        locked { permissions[Self.permissionKey(peer)]?.confirmed ?? false }
    }

    /// Starts the Allocate transaction (401 → long-term credentials → allocation; refreshed
    /// before it expires). Only from `idle`; otherwise nothing happens.
    package func allocate() {
        guard current == .idle else { return }
        setState(.allocating)
        timersActive = timersOn
        if server.transport.isStream && sendTap == nil {
            connect()
        } else {
            start(.allocate, retries: 0)
        }
    }

    /// Under the lock: a new TCP or TLS connection; the Allocate goes once it is up.
    private func connect() {
        let connection = TURNTCPConnection(
            server: server.address, tls: server.transport == .tls ? server.tls : nil,
            onConnected: { [weak owner] in owner?.connected() },
            onFrame: { [weak owner] frame in _ = owner?.process(frame) },
            onClosed: { [weak owner] reason in owner?.connectionClosed(reason) })
        tcp = connection
        connection.start()
    }

    /// Installs (and keeps refreshing) a permission for the peer's IP. Before the allocation it
    /// is installed as soon as the allocation is made.
    package func createPermission(_ peer: SocketAddress) {
        _ = ensurePermission(peer)
    }

    /// Binds a channel to the peer (also installs the permission) and returns its number at once
    /// (0x4000...0x4FFF); nil when all are used. Data for it goes as Send indications until the
    /// server confirms the binding.
    package func bindChannel(_ peer: SocketAddress) -> UInt16? {
        if let n = channelOf[peer] { return n }
        guard channels.count < Self.maxChannels else {
            stats.refusedForLimits += 1
            return nil
        }
        guard ensurePermission(peer) else { return nil }
        while channels[nextChannel] != nil {
            nextChannel =
                nextChannel == TURNChannelData.channelRange.upperBound ? TURNChannelData.channelRange.lowerBound : nextChannel + 1
        }
        let n = nextChannel
        var indication = STUNMessage(method: .send, class: .indication)
        indication.appendXORAddress(STUNMessage.AttributeType.xorPeerAddress, peer)
        indication.attributes.append(.init(type: STUNMessage.AttributeType.data, value: []))
        channels[n] = Channel(peer: peer, indicationHeader: indication.encode())
        channelOf[peer] = n
        if case .allocated = current { sendChannelBind(n) }
        return n
    }

    /// Sends a peer a datagram: ChannelData when its channel is confirmed, else a Send indication
    /// (installing a permission for the peer first if it has none). False without an allocation.
    @discardableResult
    package func send(_ payload: [UInt8], to peer: SocketAddress) -> Bool {
        guard case .allocated = current, payload.count <= 65_000 else { stats.sendFailures += 1; return false }
        if let n = channelOf[peer], let c = channels[n] {
            return payload.withUnsafeBytes { sendLocked($0, channel: n, c) }
        }
        guard ensurePermission(peer) else { stats.sendFailures += 1; return false }
        var m = STUNMessage(method: .send, class: .indication)
        m.appendXORAddress(STUNMessage.AttributeType.xorPeerAddress, peer)
        m.attributes.append(.init(type: STUNMessage.AttributeType.data, value: payload))
        stats.sendIndicationsSent += 1
        return transmit(m.encode())
    }

    /// Sends `payload` to the peer bound to `channel`: ChannelData once the server confirmed the
    /// binding, a Send indication before. No heap allocation. False without an allocation or for
    /// an unknown channel.
    package func sendChannelData(_ payload: UnsafeRawBufferPointer, channel: UInt16) -> Bool {
        guard case .allocated = current, payload.count <= 65_000, let c = channels[channel] else {
            stats.sendFailures += 1
            return false
        }
        return sendLocked(payload, channel: channel, c)
    }

    /// Deletes the allocation (Refresh with lifetime 0, retransmitted over UDP until answered)
    /// and stops every other timer. Idempotent.
    package func close() {
        if current == .closed { return }
        let wasAllocated: Bool
        if case .allocated = current { wasAllocated = true } else { wasAllocated = false }
        transactions.removeAll()
        refreshAt = nil
        nextLivenessCheck = nil
        relayedAll = []
        permissions.removeAll()
        channels.removeAll()
        channelOf.removeAll()
        if wasAllocated { start(.refresh(lifetime: 0), retries: 0) }
        setState(.closed)
        if let tcp {
            tcp.close()
            self.tcp = nil
            transactions.removeAll()
        }
        if transactions.isEmpty { stopTimer() } else { reschedule() }
    }

    // MARK: Sending

    @inline(__always)
    private func locked<T>(_ body: () -> T) -> T { body() }

    private static func permissionKey(_ peer: SocketAddress) -> SocketAddress {
        var k = peer
        k.port = 0
        return k
    }

    /// A reason phrase as text, without the NUL padding some servers (coturn) leave in it.
    private static func phrase(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    }

    /// A `TURNClientTiming` value in seconds as a duration (whole nanoseconds, not negative).
    private static func duration(_ seconds: Double) -> Duration { .nanoseconds(Int64(max(0, seconds) * 1e9)) }

    /// Under the lock: ChannelData or a Send indication for channel `n`, without allocating.
    private func sendLocked(_ payload: UnsafeRawBufferPointer, channel n: UInt16, _ c: Channel) -> Bool {
        let ok: Bool
        if c.confirmed {
            scratch[0] = UInt8(n >> 8); scratch[1] = UInt8(n & 0xFF)
            scratch[2] = UInt8(payload.count >> 8); scratch[3] = UInt8(payload.count & 0xFF)
            let pad = tcp != nil ? (4 - payload.count % 4) % 4 : 0
            ok = deliver(
                UnsafeRawBufferPointer(rebasing: scratch[0..<4]), payload,
                UnsafeRawBufferPointer(rebasing: scratch[64..<(64 + pad)]))
            if ok { stats.channelDataSent += 1 }
        } else {
            let h = c.indicationHeader.count
            c.indicationHeader.withUnsafeBytes { scratch.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: h) }
            let pad = (4 - payload.count % 4) % 4
            let length = h - 20 + payload.count + pad
            scratch[2] = UInt8(length >> 8); scratch[3] = UInt8(length & 0xFF)
            scratch[h - 2] = UInt8(payload.count >> 8); scratch[h - 1] = UInt8(payload.count & 0xFF)
            ok = deliver(
                UnsafeRawBufferPointer(rebasing: scratch[0..<h]), payload,
                UnsafeRawBufferPointer(rebasing: scratch[64..<(64 + pad)]))
            if ok { stats.sendIndicationsSent += 1 }
        }
        if !ok { stats.sendFailures += 1 }
        return ok
    }

    /// Under the lock: one message in up to three parts to the server.
    private func deliver(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer, _ c: UnsafeRawBufferPointer) -> Bool {
        if let tcp { return tcp.write(a, b, c) }
        if let socket {
            return TURNGatheredSend.datagram(socket.descriptor, to: serverName, length: serverNameLength, a, b, c) >= 0
        }
        if let sendTap { sendTap(Array(a) + Array(b) + Array(c)) }
        return sendTap != nil
    }

    /// Under the lock: a whole control message to the server.
    @discardableResult
    private func transmit(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes {
            deliver($0, UnsafeRawBufferPointer(start: nil, count: 0), UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }

    /// Under the lock: the permission for `peer`'s IP, added (and requested when allocated) if new.
    private func ensurePermission(_ peer: SocketAddress) -> Bool {
        let k = Self.permissionKey(peer)
        if permissions[k] != nil { return true }
        guard permissions.count < Self.maxPermissions else {
            stats.refusedForLimits += 1
            return false
        }
        permissions[k] = Permission()
        if case .allocated = current { sendPermission(k) }
        return true
    }

    /// Under the lock: a CreatePermission for `k` (tried again in a second when too many
    /// requests are pending).
    private func sendPermission(_ k: SocketAddress) {
        guard start(.permission(k), retries: 0) else {
            permissions[k]?.refreshAt = scheduler.now + .seconds(1)
            return
        }
        permissions[k]?.pending = true
    }

    /// Under the lock: a ChannelBind for channel `n` (tried again in a second when too many
    /// requests are pending).
    private func sendChannelBind(_ n: UInt16) {
        guard start(.channel(n), retries: 0) else {
            channels[n]?.refreshAt = scheduler.now + .seconds(1)
            return
        }
        channels[n]?.pending = true
    }

    /// Under the lock: builds, signs (once the realm and nonce are known), sends and remembers a
    /// request. False when too many are pending.
    @discardableResult
    private func start(_ purpose: Purpose, retries: Int) -> Bool {
        guard transactions.count < Self.maxPendingTransactions else {
            stats.refusedForLimits += 1
            return false
        }
        var m: STUNMessage
        switch purpose {
        case .allocate:
            m = STUNMessage(method: .allocate, class: .request)
            m.appendUInt32(STUNMessage.AttributeType.requestedTransport, 17 << 24)  // UDP (RFC 8656 §18.7)
            if let l = settings.requestedLifetime { m.appendUInt32(STUNMessage.AttributeType.lifetime, l) }
            // The family byte, then three reserved (RFC 8656 §18.8, §18.11): 0x02 is IPv6.
            switch families {
            case .ipv4: break
            case .ipv6: m.appendUInt32(STUNMessage.AttributeType.requestedAddressFamily, 0x02 << 24)
            case .both:
                // The RFC 8656 code point and coturn's draft one: each server ignores the other.
                m.appendUInt32(STUNMessage.AttributeType.additionalAddressFamily, 0x02 << 24)
                m.appendUInt32(STUNMessage.AttributeType.additionalAddressFamilyDraft, 0x02 << 24)
            }
        case .probe:
            m = STUNMessage(method: .refresh, class: .request)
            if let l = settings.requestedLifetime { m.appendUInt32(STUNMessage.AttributeType.lifetime, l) }
        case .refresh(let lifetime):
            m = STUNMessage(method: .refresh, class: .request)
            if let lifetime { m.appendUInt32(STUNMessage.AttributeType.lifetime, lifetime) }
        case .permission(let k):
            m = STUNMessage(method: .createPermission, class: .request)
            m.appendXORAddress(STUNMessage.AttributeType.xorPeerAddress, k)
        case .channel(let n):
            guard let c = channels[n] else { return false }
            m = STUNMessage(method: .channelBind, class: .request)
            m.appendUInt32(STUNMessage.AttributeType.channelNumber, UInt32(n) << 16)
            m.appendXORAddress(STUNMessage.AttributeType.xorPeerAddress, c.peer)
        }
        var signing: [UInt8]?
        if let realm, let nonce, let key {
            m.appendText(STUNMessage.AttributeType.username, server.username)
            m.appendText(STUNMessage.AttributeType.realm, realm)
            m.appendText(STUNMessage.AttributeType.nonce, nonce)
            signing = key
        }
        let bytes = m.encode(integrity: signing, fingerprint: true)
        let now = scheduler.now
        let first = Self.duration(tcp != nil ? settings.tcpTransactionTimeout : settings.retransmissionTimeout)
        transactions[TransactionKey(m.transactionID)] = Transaction(
            purpose: purpose, method: m.method, bytes: bytes, key: signing, nextAt: now + first, timeout: first, retries: retries)
        stats.requestsSent += 1
        transmit(bytes)
        reschedule()
        return true
    }

    // MARK: Receiving

    /// One datagram or TCP frame from the server: whether it was consumed, and the peer data to
    /// hand to `onPeerData` once the lock is released.
    func process(_ bytes: UnsafeRawBufferPointer) -> (consumed: Bool, delivery: TURNPeerDelivery?) {
        stats.received += 1
        // Indexing, not `first`: the generic `first` allocates in a debug build.
        guard bytes.count > 0 else {
            stats.malformed += 1
            return (false, nil)
        }
        let first = bytes[0]
        if TURNChannelData.mayBeChannelData(firstByte: first) {
            guard let (n, range) = TURNChannelData.parse(bytes.bytes) else {
                stats.malformed += 1
                return (true, nil)
            }
            let data = UnsafeRawBufferPointer(rebasing: bytes[range])
            guard case .allocated = current, let c = channels[n], let handler = peerHandler else {
                stats.peerDataDropped += 1
                return (true, nil)
            }
            stats.peerDataDelivered += 1
            return (true, .channel(handler, c.peer, data))
        }
        guard STUNMessage.mayBeSTUN(firstByte: first) else {
            stats.malformed += 1
            return (false, nil)
        }
        guard let message = try? STUNMessage(parsing: unsafe RawSpan(_unsafeBytes: bytes)) else {
            stats.malformed += 1
            return (true, nil)
        }
        switch message.messageClass {
        case .successResponse, .errorResponse:
            let consumed = handleResponse(message, bytes)
            return (consumed, nil)
        case .indication where message.method == .data:
            let raw = Array(bytes)
            let hasFingerprint = message.attributes.contains { $0.type == STUNMessage.AttributeType.fingerprint }
            guard !hasFingerprint || STUNMessage.hasValidFingerprint(raw) else {
                stats.peerDataDropped += 1
                return (true, nil)
            }
            guard let peer = try? message.xorAddress(STUNMessage.AttributeType.xorPeerAddress),
                let data = message.value(STUNMessage.AttributeType.data)
            else {
                stats.malformed += 1
                return (true, nil)
            }
            guard case .allocated = current, permissions[Self.permissionKey(peer)] != nil, let handler = peerHandler else {
                stats.peerDataDropped += 1
                return (true, nil)
            }
            stats.peerDataDelivered += 1
            return (true, .indication(handler, peer, data))
        default:
            stats.ignored += 1
            return (true, nil)
        }
    }

    /// Under the lock: a response. Nothing in it is used before its transaction ID matched and its
    /// FINGERPRINT and MESSAGE-INTEGRITY checked out (RFC 8489 §9.2.5).
    private func handleResponse(_ m: STUNMessage, _ bytes: UnsafeRawBufferPointer) -> Bool {
        let k = TransactionKey(bytes)
        guard let t = transactions[k] else {
            stats.unmatchedResponses += 1
            return false
        }
        let raw = Array(bytes)
        let hasFingerprint = m.attributes.contains { $0.type == STUNMessage.AttributeType.fingerprint }
        let hasIntegrity = m.attributes.contains { $0.type == STUNMessage.AttributeType.messageIntegrity }
        var trusted = m.method == t.method && (!hasFingerprint || STUNMessage.hasValidFingerprint(raw))
        if trusted {
            if hasIntegrity {
                trusted = t.key.map { STUNMessage.hasValidIntegrity(raw, key: $0) } ?? false
            } else if m.messageClass == .successResponse {
                trusted = false
            } else if t.key != nil {
                // Unsigned errors to a signed request: only the challenges, which cannot be signed.
                let code = m.errorCode?.code
                trusted = code == 401 || code == 438
            }
        }
        guard trusted else {
            stats.forgedResponses += 1
            return true
        }
        transactions[k] = nil
        stats.responsesAccepted += 1
        if m.messageClass == .successResponse {
            succeeded(t, m)
        } else {
            errored(t, m)
        }
        reschedule()
        return true
    }

    private func succeeded(_ t: Transaction, _ m: STUNMessage) {
        let now = scheduler.now
        switch t.purpose {
        case .allocate:
            guard current == .allocating else { return }
            guard let all = try? m.xorAddresses(STUNMessage.AttributeType.xorRelayedAddress), let relayed = all.first,
                let mapped = try? m.xorAddress(STUNMessage.AttributeType.xorMappedAddress)
            else {
                return fail("the allocation answer lacks XOR-RELAYED-ADDRESS or XOR-MAPPED-ADDRESS")
            }
            if let v = m.value(STUNMessage.AttributeType.addressErrorCode)
                ?? m.value(STUNMessage.AttributeType.addressErrorCodeDraft), v.count >= 4
            {
                // One family of a dual allocation refused (RFC 8656 §18.12): family, reserved, class, number.
                let family = v[0] == 0x02 ? "IPv6" : "IPv4"
                stats.addressFamiliesRefused += 1
                stats.lastAddressFamilyRefusal =
                    "\(family): \(Int(v[2] & 0x07) * 100 + Int(v[3])) \(Self.phrase(v[4...]))"
            }
            // coturn names the refused family's relayed address too (the wildcard): left out.
            relayedAll = all.filter { $0.port != 0 && !ICEHostAddresses.isWildcard($0) }
            if relayedAll.isEmpty { relayedAll = [relayed] }
            reconnectingAfter = nil
            scheduleRefresh(lifetime: m.uint32(STUNMessage.AttributeType.lifetime) ?? 600, now: now)
            startLivenessTracking(now)
            setState(.allocated(relayed: relayed, mapped: mapped))
            for p in permissions.keys { sendPermission(p) }
            for n in channels.keys.sorted() { sendChannelBind(n) }
        case .probe:
            guard case .allocated = current else { return }
            probing = false
            quietProbes += 1
            lastProbeAt = now
            stats.livenessProbesConfirmed += 1
            scheduleRefresh(lifetime: m.uint32(STUNMessage.AttributeType.lifetime) ?? 600, now: now)
        case .refresh(let lifetime):
            guard lifetime != 0, case .allocated = current else { return }
            stats.allocationRefreshes += 1
            scheduleRefresh(lifetime: m.uint32(STUNMessage.AttributeType.lifetime) ?? 600, now: now)
        case .permission(let p):
            permissions[p]?.confirmed = true
            permissions[p]?.pending = false
            permissions[p]?.refreshAt = now + Self.duration(settings.permissionRefresh)
        case .channel(let n):
            guard let c = channels[n] else { return }
            channels[n]?.confirmed = true
            channels[n]?.pending = false
            channels[n]?.refreshAt = now + Self.duration(settings.channelRefresh)
            // A ChannelBind installs or refreshes the peer's permission too (RFC 8656 §12.2).
            let p = Self.permissionKey(c.peer)
            if permissions[p]?.pending == false {
                permissions[p]?.confirmed = true
                permissions[p]?.refreshAt = now + Self.duration(settings.permissionRefresh)
            }
        }
    }

    private func errored(_ t: Transaction, _ m: STUNMessage) {
        let code = m.errorCode?.code ?? 0
        let reason = Self.phrase(Array((m.errorCode?.reason ?? "").utf8)[...])
        let newNonce = m.text(STUNMessage.AttributeType.nonce)
        if code == 401 && t.key == nil {
            // The challenge (RFC 8489 §9.2.3): the realm and nonce make the long-term key.
            guard let r = m.text(STUNMessage.AttributeType.realm), let n = newNonce, !r.isEmpty, !n.isEmpty,
                r.utf8.count <= 763, n.utf8.count <= 763
            else {
                return failed(t.purpose, "a 401 challenge without a usable REALM and NONCE")
            }
            realm = r
            nonce = n
            key = STUNMessage.longTermKey(username: server.username, realm: r, password: server.password)
            start(t.purpose, retries: t.retries)
            return
        }
        if (code == 438 || (code == 401 && newNonce != nil && newNonce != nonce)) && t.retries < 3,
            let n = newNonce, !n.isEmpty, n.utf8.count <= 763
        {
            // A stale nonce (RFC 8489 §9.2.5): the same request with the new one.
            nonce = n
            stats.staleNonceRetries += 1
            start(t.purpose, retries: t.retries + 1)
            return
        }
        if code == 440, t.purpose == .allocate, families == .both {
            // A server that will not make a dual allocation: IPv4 alone.
            stats.addressFamiliesRefused += 1
            stats.lastAddressFamilyRefusal = "IPv6 in addition: 440 \(reason)"
            families = .ipv4
            start(.allocate, retries: t.retries)
            return
        }
        let text: String
        switch code {
        case 401: text = "401 \(reason): the server refused the username or password"
        case 440 where t.purpose == .allocate:
            text = "440 \(reason): the server does not relay \(families == .ipv6 ? "IPv6" : "this address family")"
        default: text = "\(code) \(reason)"
        }
        failed(t.purpose, text)
    }

    /// Under the lock: a transaction of `purpose` ended without success.
    private func failed(_ purpose: Purpose, _ reason: String) {
        let later = scheduler.now + Self.duration(settings.retryAfterFailure)
        switch purpose {
        case .allocate:
            if current == .allocating { fail(reason) }
        case .refresh(let lifetime):
            if lifetime != 0, case .allocated = current { allocationLost("refresh failed: \(reason)") }
        case .probe:
            probing = false
            if case .allocated = current { allocationLost("the check after peers went silent failed: \(reason)") }
        case .permission(let p):
            permissions[p]?.pending = false
            permissions[p]?.refreshAt = later
            stats.permissionFailures += 1
            stats.lastPermissionFailure = "CreatePermission for \(p.host): \(reason)"
        case .channel(let n):
            channels[n]?.pending = false
            channels[n]?.refreshAt = later
            stats.permissionFailures += 1
            stats.lastPermissionFailure = "ChannelBind for \(channels[n]?.peer.description ?? "?"): \(reason)"
        }
    }

    private func scheduleRefresh(lifetime: UInt32, now: MonotonicTime) {
        let l = Double(lifetime)
        refreshAt = now + Self.duration(max(l / 2, l - settings.refreshMargin))
    }

    // MARK: State and timers

    /// Under the lock: a new state, announced on `queue`.
    private func setState(_ s: State) {
        guard s != current else { return }
        current = s
        if let h = stateHandler {
            if announcesOnScheduler { scheduler.schedule(after: .zero) { h(s) } } else { queue.async { h(s) } }
        }
    }

    /// Under the lock: the allocation failed; everything stops.
    private func fail(_ reason: String) {
        setState(.failed(reason))
        transactions.removeAll()
        refreshAt = nil
        nextLivenessCheck = nil
        relayedAll = []
        tcp?.close()
        tcp = nil
        stopTimer()
    }

    /// Under the lock: the server no longer has our allocation (or the connection it lived on is
    /// gone). A new one is asked for at once (over a new connection for TCP and TLS); every
    /// permission and channel is kept and installed again once it is made, under the same channel
    /// numbers, so `sendChannelData` callers need not change anything.
    private func allocationLost(_ reason: String) {
        stats.allocationsLost += 1
        stats.lastAllocationLoss = reason
        transactions.removeAll()
        refreshAt = nil
        nextLivenessCheck = nil
        probing = false
        relayedAll = []
        for k in permissions.keys { permissions[k] = Permission() }
        for n in channels.keys {
            channels[n]?.confirmed = false
            channels[n]?.pending = false
            channels[n]?.refreshAt = .zero
        }
        setState(.allocating)
        if server.transport.isStream && sendTap == nil {
            tcp?.close()
            reconnectingAfter = reason
            reconnectUntil = scheduler.now + Self.duration(settings.reconnectWindow)
            connect()
        } else {
            start(.allocate, retries: 0)
        }
    }

    /// Under the lock: a new allocation; the silence is measured from now.
    private func startLivenessTracking(_ now: MonotonicTime) {
        probing = false
        quietProbes = 0
        seenDelivered = stats.peerDataDelivered
        seenSent = stats.channelDataSent + stats.sendIndicationsSent
        heardAt = now
        sentAt = .zero
        lastProbeAt = .zero
        nextLivenessCheck = settings.silenceBeforeProbe > 0 ? now + Self.duration(settings.livenessCheckInterval) : nil
    }

    /// Under the lock, allocated: notes whether peer data came and whether we sent since the last
    /// look, and sends a Refresh at once when we have been sending into silence for
    /// `silenceBeforeProbe` (doubling, up to 16 times, while the server confirms and peers stay
    /// silent). Costs nothing on the data path: it compares the statistics' counters.
    private func checkLiveness(_ now: MonotonicTime) {
        nextLivenessCheck = now + Self.duration(settings.livenessCheckInterval)
        let sent = stats.channelDataSent + stats.sendIndicationsSent
        if stats.peerDataDelivered != seenDelivered {
            seenDelivered = stats.peerDataDelivered
            heardAt = now
            quietProbes = 0
        }
        if sent != seenSent {
            seenSent = sent
            sentAt = now
        }
        guard !probing, !permissions.isEmpty, sentAt > heardAt else { return }
        let wait = Self.duration(settings.silenceBeforeProbe * Double(1 << min(quietProbes, 4)))
        guard now - max(heardAt, lastProbeAt) >= wait else { return }
        if start(.probe, retries: 0) {
            probing = true
            stats.livenessProbes += 1
        }
    }

    private func stopTimer() {
        timersActive = false
        pendingTick?.cancel()
        pendingTick = nil
        tickAt = nil
    }

    func connected() {
        if current == .allocating { start(.allocate, retries: 0) }
    }

    func connectionClosed(_ reason: String) {
        switch current {
        case .allocated: allocationLost(reason)
        case .allocating:
            // A connection made again after a loss: tried once a second within the window, then
            // the reason names both.
            guard let lost = reconnectingAfter else { return fail(reason) }
            guard scheduler.now + .seconds(1) < reconnectUntil else { return fail("\(lost); connecting again: \(reason)") }
            tcp = nil
            scheduler.schedule(after: .seconds(1)) { [weak owner] in owner?.reconnect() }
        default: break
        }
    }

    /// Under the lock: sets the timer to the next retransmission or refresh.
    private func reschedule() {
        guard timersActive else { return }
        var next = refreshAt
        for t in transactions.values { next = min(next ?? t.nextAt, t.nextAt) }
        if case .allocated = current {
            for p in permissions.values where !p.pending { next = min(next ?? p.refreshAt, p.refreshAt) }
            for c in channels.values where !c.pending { next = min(next ?? c.refreshAt, c.refreshAt) }
            if let l = nextLivenessCheck, !permissions.isEmpty { next = min(next ?? l, l) }
        }
        guard let next else { return }
        if let at = tickAt, at <= next { return }
        pendingTick?.cancel()
        let now = scheduler.now
        tickAt = next
        pendingTick = scheduler.schedule(after: next > now ? min(next - now, .nanoseconds(1 << 50)) : .zero) { [weak owner] in
            owner?.tick()
        }
    }

    /// A connection made again after a loss, a second later.
    func reconnect() {
        if current == .allocating && tcp == nil { connect() }
    }

    /// The timer: retransmissions, timeouts and refreshes that are due.
    func tick() {
        guard timersActive else { return }
        pendingTick = nil
        tickAt = nil
        let now = scheduler.now
        for (k, t) in transactions where t.nextAt <= now {
            let limit = tcp != nil ? 1 : t.purpose == .probe ? settings.probeTransmissions : settings.maxTransmissions
            if t.transmissions >= limit {
                transactions[k] = nil
                stats.timeouts += 1
                let lost = stats.allocationsLost
                failed(t.purpose, "no answer from the TURN server \(server.address)")
                if !timersActive { return }
                // A lost allocation dropped every transaction: none of this pass's is left.
                if stats.allocationsLost != lost { break }
            } else {
                var u = t
                u.transmissions += 1
                u.timeout = min(u.timeout * 2, Self.duration(settings.maxRetransmissionTimeout))
                u.nextAt = now + u.timeout
                transactions[k] = u
                stats.retransmissions += 1
                transmit(u.bytes)
            }
        }
        if case .allocated = current {
            if let due = refreshAt, now >= due {
                refreshAt = nil
                if !start(.refresh(lifetime: settings.requestedLifetime), retries: 0) {
                    refreshAt = now + .seconds(1)
                }
            }
            for (p, v) in permissions where !v.pending && now >= v.refreshAt { sendPermission(p) }
            for (n, c) in channels where !c.pending && now >= c.refreshAt { sendChannelBind(n) }
            if let l = nextLivenessCheck, now >= l { checkLiveness(now) }
        }
        if current == .closed && transactions.isEmpty { return stopTimer() }
        reschedule()
    }
}
