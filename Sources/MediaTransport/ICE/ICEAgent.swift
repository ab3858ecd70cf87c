// A full ICE agent (RFC 8445) for one UDP socket and one component: gathering (host, server
// reflexive, relayed), paced connectivity checks, nomination, consent freshness (RFC 7675) and
// failover, speaking standard STUN on the wire so browsers and servers can be its peers.
//
// How it differs from the letter of RFC 8445, on purpose:
// - One socket serves every host candidate, so the kernel picks the source address of a check;
//   the XOR-MAPPED-ADDRESS of the answer then names the local side of the valid pair. On a host
//   with several addresses and a wildcard-bound socket, only paths whose kernel-chosen source is
//   the address the peer expects pass the symmetric-address check.
// - No frozen state per foundation: every pair waits, and one new check goes out per Ta, highest
//   priority first, triggered checks before the others.
// - Nomination: the controlling agent nominates the best working pair (direct before relayed)
//   and nominates again when a better one starts to work (renomination, as libwebrtc does);
//   its consent checks on the selected pair carry USE-CANDIDATE. The controlled agent follows
//   the pair nominated most recently, and switches on its own when the selected pair goes silent.
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

/// Settings of an `ICEAgent`. Thread rule: a value type.
package struct ICEAgentConfiguration: Sendable {
    /// STUN and TURN servers to gather from.
    package var servers: [ICEServer] = []
    /// The controlling agent nominates (RFC 8445 §6.1.1); the other is controlled.
    package var controlling: Bool
    /// Host addresses to offer; nil: every up, non-loopback interface address of the socket's
    /// family (loopback too when the socket is bound to loopback).
    package var hostAddresses: [SocketAddress]? = nil
    /// Ta, the pacing of new checks (RFC 8445 §14.2), milliseconds.
    package var checkIntervalMilliseconds = 50
    /// How often every valid pair is checked again (liveness and consent, RFC 7675 §5.1),
    /// milliseconds; each interval is drawn from 0.8...1.2 times it.
    package var keepaliveIntervalMilliseconds = 250
    /// A selected pair with no answer for this long fails over to the next working pair.
    package var failoverAfterMilliseconds = 1000
    /// Pairs through a TURN relay (ours or the peer's) are checked only when no direct pair works:
    /// not before this long after the first check unless every direct pair failed, and not at
    /// all (nor kept alive) while a direct pair answers. So a call that finds a direct path sends
    /// nothing through the relay; one that loses it checks the relay pairs then (one round trip).
    package var relayCheckDelayMilliseconds = 500
    /// RFC 7675 §5.1: with no consent on any pair for this long, media stops.
    package var consentExpirySeconds: Double = 30
    /// While quiet (`ICEAgent.setQuiet`): the keepalive interval, the silence that fails a pair
    /// over, and the agent's tick once no check is waiting. RFC 7675 §5.1 asks for a consent
    /// check about every 5 s; 2.5 s keeps two in each failover window.
    package var quietKeepaliveIntervalMilliseconds = 2500
    package var quietFailoverAfterMilliseconds = 6000
    package var quietTickMilliseconds = 500
    /// Most remote candidates kept (more are dropped and counted).
    package var maxRemoteCandidates = 32
    /// Most candidate pairs kept (RFC 8445 §6.1.2.5 suggests 100).
    package var maxPairs = 100
    /// Binding requests answered per second (bursts of twice this); the rest are dropped and counted.
    package var bindingRequestsPerSecond = 200
    /// Datagrams (checks and their retransmissions together) sent toward one remote address, per
    /// path (our socket, each TURN relay), before the address answered a check: then none until
    /// it answers or sends an authenticated check itself (`ICEProbeBudget`).
    package var unansweredSendsPerAddress = 12
    /// Most distinct remote addresses checked before any answer from them (per generation of
    /// the peer's candidates); the others are not checked until they send a check themselves.
    package var maxUnansweredAddresses = 16
    /// Most of those in one IPv4 /24 or IPv6 /64.
    package var maxUnansweredAddressesPerSubnet = 8
    /// Datagrams per second toward addresses that never answered, for the whole agent (bursts of
    /// twice this); beyond it, checks and retransmissions wait.
    package var unansweredChecksPerSecond = 20
    /// Bytes per second of those datagrams (bursts of twice this).
    package var unansweredBytesPerSecond = 4000
    /// Offer and use only relayed candidates (a TURN allocation each): the peer never learns our
    /// addresses, at the cost of every packet going through the relay (WebRTC's "relay" policy).
    package var relayOnly = false

    package init(controlling: Bool) { self.controlling = controlling }
}

extension ICEAgentConfiguration {
    /// `checkIntervalMilliseconds` (at least 1 ms).
    var checkInterval: Duration { .milliseconds(max(1, checkIntervalMilliseconds)) }
    /// `keepaliveIntervalMilliseconds` (at least 10 ms), before the jitter.
    var keepaliveInterval: Duration { .milliseconds(max(10, keepaliveIntervalMilliseconds)) }
    /// `failoverAfterMilliseconds` (at least 1 ms).
    var failoverAfter: Duration { .milliseconds(max(1, failoverAfterMilliseconds)) }
    /// `relayCheckDelayMilliseconds` (not negative).
    var relayCheckDelay: Duration { .milliseconds(max(0, relayCheckDelayMilliseconds)) }
}

/// Counters of an agent. Thread rule: a value type.
package struct ICEAgentStatistics: Sendable, Equatable {
    package var checksSent = 0
    /// Checks sent again after no answer within their RTO (the same transaction: when both copies
    /// are answered, the second answer finds no transaction and counts in `droppedResponses`).
    package var checksRetransmitted = 0
    package var checksAnswered = 0
    package var responsesReceived = 0
    /// Responses with no matching transaction, a bad MESSAGE-INTEGRITY or FINGERPRINT, or from
    /// the wrong address: dropped, never changing any pair.
    package var droppedResponses = 0
    /// Requests with a bad username, MESSAGE-INTEGRITY or FINGERPRINT: dropped.
    package var droppedRequests = 0
    /// Requests over the rate limit, or whose answer would be larger than them: dropped.
    package var rateLimitedRequests = 0
    package var droppedRemoteCandidates = 0
    /// Times the selected pair changed.
    package var selectedPairChanges = 0
    /// Datagrams handed to `handleDatagram` while too many were already waiting for the queue: dropped.
    package var droppedBacklog = 0
    /// Role switches after a conflict (RFC 8445 §7.3.1.1).
    package var roleSwitches = 0
    /// Relayed candidates removed because their TURN allocation was lost and made again with
    /// another relayed address (`TURNClientStatistics.allocationsLost`); the new ones were added
    /// and signalled.
    package var relayedCandidatesReplaced = 0
    /// Checks and retransmissions not sent toward an address that never answered, because its
    /// budget (`unansweredSendsPerAddress`) was spent or the address caps were reached: each
    /// pair or transaction given up counts once.
    package var checksWithheld = 0
    /// Times a check or retransmission toward an address that never answered waited for the
    /// rate (`unansweredChecksPerSecond`, `unansweredBytesPerSecond`): once per tick it waits.
    package var checksDelayed = 0
}

/// One ICE agent (see the file comment). Thread rule: every method from any thread; callbacks
/// run on the agent's private queue, one at a time. An agent made with `init(transport:configuration:scheduler:)`
/// has no queue: its scheduler's serial context is its queue, and every method is called there
/// (the test's thread on a simulated clock). Cost: a few STUN transactions per pair per second;
/// nothing on the media path but `path`.
/// Sendable: the agent state (`var`s, TURN clients, timers) is used only on its context (`queue`,
/// or the scheduler's thread; and in deinit); what other threads read or set lives in the
/// `shared` Mutex; `backlog` is atomic; the rest are `let`s.
package final class ICEAgent: @unchecked Sendable {
    package let configuration: ICEAgentConfiguration
    /// Our ufrag (4+ characters) and password (22+ characters), random (RFC 8445 §5.3); new
    /// ones after `restartLocalCredentials`. Thread rule: any thread. Cost: a lock.
    package var localUfrag: String { shared.withLock { $0.localUfrag } }
    package var localPassword: String { shared.withLock { $0.localPassword } }
    /// The route media takes now; the agent updates it as pairs are selected or fail.
    package let path = ICESendPath()

    // MARK: Shared with other threads (under `shared`)

    /// What other threads read or set: callbacks, counters and snapshots.
    struct Shared {
        var localUfrag = ""
        var localPassword = ""
        var stats = ICEAgentStatistics()
        var localCandidates: [ICECandidate] = []
        var selected: (local: ICECandidate, remote: ICECandidate)?
        var controlling = false
        var onCandidate: (@Sendable (ICECandidate) -> Void)?
        var onGatheringComplete: (@Sendable () -> Void)?
        var onSelectedPairChange: (@Sendable (ICECandidate?, ICECandidate?) -> Void)?
        var onRelayedMedia: (@Sendable (UnsafeRawBufferPointer) -> Void)?
        var onRelayedDTLS: (@Sendable ([UInt8], SocketAddress) -> Void)?
        var onRelayedOther: (@Sendable ([UInt8], SocketAddress) -> Void)?
        var dropFilter: (@Sendable (SocketAddress) -> Bool)?
    }
    let shared = Mutex<Shared>(Shared())
    /// Datagrams copied by `handleDatagram` and not yet handled on the queue.
    let backlog = Atomic<Int>(0)
    static let maxBacklog = 512

    // MARK: Queue state (only on `queue`)

    /// The UDP socket of an agent made with `init(socket:configuration:)` (its TURN clients over
    /// UDP send on it); nil for an agent on another transport.
    let socket: UDPSocket?
    /// Where checks, answers and server requests go and datagrams come from (the socket's
    /// `ICESocketTransport` in production).
    let transport: any ICEDatagramTransport
    /// The clock of every deadline (checks, RTOs, Ta, keepalives, consent, failover, the relay
    /// check delay, gathering, the probe budget and rate limits): `MonotonicTime.now` on `queue`
    /// in production, or the injected one.
    let scheduler: any TaskScheduler
    /// The socket is bound to a wildcard address: each check, answer and media packet then names
    /// its local address (the pair's base, or where a request arrived) instead of leaving from
    /// the kernel's route, so every host candidate of a host with several addresses answers as
    /// itself (RFC 8445 §7.2.5.2.1 fails a check answered from another address).
    let sendsFromBase: Bool
    /// The agent's own serial queue (nil when its scheduler is its context).
    let queue: DispatchQueue?
    let queueKey = DispatchSpecificKey<UInt8>()
    /// Our 64-bit tie-breaker (RFC 8445 §7.1.1).
    let tieBreaker: UInt64
    /// Our credentials now, and (after `restartLocalCredentials`, until the peer checks under
    /// the new ones) the ones before, still answered under.
    var local: ICELocalCredentials
    var previousLocal: ICELocalCredentials?
    var controlling: Bool
    var started = false
    var closed = false
    var remoteUfrag: String?
    var remotePassword: String?
    var remoteKey: [UInt8] = []
    var remotes: [ICECandidate] = []
    /// The check list, the checks in flight and the nomination (`ICEChecks`).
    var checks: ICEChecks
    var turns: [TURNClient] = []
    /// Our candidates, the STUN server transactions and the gathering deadline (`ICEGathering`).
    var gathering = ICEGathering()
    /// Consent freshness and the selected pair (`ICEConsent`).
    var consent: ICEConsent
    /// The selected pair (nil: none yet, or consent lost). On the agent's context.
    package var selected: ICECandidatePair? { consent.selected }
    /// Controlling side: the pair whose nominating check last succeeded (`selected` may run
    /// ahead of it: media starts on the first valid pair, before nomination). On the agent's context.
    package var nominated: ICECandidatePair? { checks.nominated }
    var bucket: ICETokenBucket
    /// Authenticated requests that came before the remote credentials under which they were
    /// sent (bounded), with the sender's ufrag, for triggered checks once those credentials are set.
    var earlyRequests:
        [(from: SocketAddress, to: SocketAddress?, relay: Int?, priority: UInt32, useCandidate: Bool, ufrag: String)] = []
    static let maxEarlyRequests = 16
    var channels: [String: UInt16] = [:]
    var timer: DispatchSourceTimer?
    /// The next tick of an agent without a queue (on its scheduler).
    var scheduledTick: ScheduledWork?
    /// The tick's period now (`retime`). On the queue.
    var tickPeriodMilliseconds = 0
    var reading = false
    var prflxCount = 0

    /// `socket`: the bound UDP socket every check and all media use; its datagrams that are not
    /// RTP/RTCP must reach `handleDatagram`.
    package convenience init(socket: UDPSocket, configuration: ICEAgentConfiguration) {
        let queue = DispatchQueue(label: "revue.ice-agent")
        self.init(
            socket: socket, transport: ICESocketTransport(socket: socket, queue: queue), queue: queue,
            scheduler: DispatchTaskScheduler(queue: queue), configuration: configuration)
    }

    /// An agent on another transport (an endpoint of a simulated network in tests), whose timers
    /// and clock are `scheduler`'s and whose context is the scheduler's serial context: every
    /// method is called there, and datagrams arrive there through `transport`. Its TURN clients
    /// (UDP servers only: a transport other than a socket carries no TURN over TCP or TLS) send
    /// through `transport` and run on `scheduler` too. `seed`, when given, draws the tie-breaker
    /// and the keepalive jitter from a generator seeded with it (not for production: the
    /// tie-breaker is then guessable), so that a simulated run repeats exactly.
    package convenience init(
        transport: any ICEDatagramTransport, configuration: ICEAgentConfiguration, scheduler: any TaskScheduler,
        seed: UInt64? = nil
    ) {
        self.init(
            socket: nil, transport: transport, queue: nil, scheduler: scheduler, configuration: configuration,
            seed: seed)
    }

    private init(
        socket: UDPSocket?, transport: any ICEDatagramTransport, queue: DispatchQueue?, scheduler: any TaskScheduler,
        configuration: ICEAgentConfiguration, seed: UInt64? = nil
    ) {
        self.configuration = configuration
        self.socket = socket
        self.transport = transport
        self.scheduler = scheduler
        self.queue = queue
        sendsFromBase = transport.boundAddress?.isUnspecified ?? false
        local = ICELocalCredentials.random()
        var t: UInt64 = 0
        var jitter: SeededGenerator?
        if let seed {
            var g = SeededGenerator(seed: seed)
            t = g.next()
            jitter = g
        } else {
            withUnsafeMutableBytes(of: &t) { RandomBytes.fill($0) }
        }
        tieBreaker = t
        consent = ICEConsent(configuration: configuration, jitter: jitter)
        controlling = configuration.controlling
        let now = scheduler.now
        bucket = ICETokenBucket(perSecond: configuration.bindingRequestsPerSecond, now: now)
        checks = ICEChecks(configuration: configuration, now: now)
        queue?.setSpecific(key: queueKey, value: 1)
        shared.withLock { [local] in
            $0.controlling = configuration.controlling
            $0.localUfrag = local.ufrag
            $0.localPassword = local.password
        }
    }

    deinit {
        timer?.cancel()
        scheduledTick?.cancel()
        if reading { transport.stopReceiving() }
        for t in turns { t.close() }
    }

    /// Each local candidate as it is gathered (trickle, RFC 8838).
    package var onCandidate: (@Sendable (ICECandidate) -> Void)? {
        get { shared.withLock { $0.onCandidate } }
        set { shared.withLock { $0.onCandidate = newValue } }
    }
    /// Gathering finished (every server answered or timed out).
    package var onGatheringComplete: (@Sendable () -> Void)? {
        get { shared.withLock { $0.onGatheringComplete } }
        set { shared.withLock { $0.onGatheringComplete = newValue } }
    }
    /// The selected pair changed (nil: no working pair).
    package var onSelectedPairChange: (@Sendable (_ local: ICECandidate?, _ remote: ICECandidate?) -> Void)? {
        get { shared.withLock { $0.onSelectedPairChange } }
        set { shared.withLock { $0.onSelectedPairChange = newValue } }
    }
    /// RTP/RTCP that arrived through a TURN relay other than as UDP ChannelData (TCP, or Data
    /// indications), unwrapped, for the receive pipeline.
    package var onRelayedMedia: (@Sendable (UnsafeRawBufferPointer) -> Void)? {
        get { shared.withLock { $0.onRelayedMedia } }
        set { shared.withLock { $0.onRelayedMedia = newValue } }
    }
    /// DTLS records (RFC 7983: first byte 20-63) that arrived through a TURN relay by any way
    /// (ChannelData, Data indication, TCP), unwrapped, with the peer's address as the relay saw
    /// it: a WebRTC connection whose selected pair is relayed runs its handshake on these.
    /// Called on the agent's queue. Without it they are dropped.
    package var onRelayedDTLS: (@Sendable ([UInt8], _ peer: SocketAddress) -> Void)? {
        get { shared.withLock { $0.onRelayedDTLS } }
        set { shared.withLock { $0.onRelayedDTLS = newValue } }
    }

    /// Anything else that arrived through a TURN relay (neither STUN, RTP/RTCP nor DTLS: another
    /// protocol sharing the socket, such as a session's own packets), unwrapped, with the peer's
    /// address as the relay saw it. Called on the agent's queue. Without it they are dropped.
    package var onRelayedOther: (@Sendable ([UInt8], _ peer: SocketAddress) -> Void)? {
        get { shared.withLock { $0.onRelayedOther } }
        set { shared.withLock { $0.onRelayedOther = newValue } }
    }

    /// Tests only: datagrams whose source this returns true for are dropped on arrival, as if the
    /// network lost them (a path dying). Thread rule: any thread.
    package var dropFilterForTests: (@Sendable (SocketAddress) -> Bool)? {
        get { shared.withLock { $0.dropFilter } }
        set { shared.withLock { $0.dropFilter = newValue } }
    }

    /// Whether the agent is controlling now (it may change after a role conflict, RFC 8445 §7.3.1.1).
    /// Thread rule: any thread. Cost: a lock.
    package var isControlling: Bool { shared.withLock { $0.controlling } }

    /// Starts gathering (host candidates at once) and, once remote credentials are set, checks.
    package func start() {
        later { self.startOnQueue() }
    }

    /// The peer's ufrag and password (from its offer or answer); checks start once they are known.
    /// Requests that arrived before (answered when their MESSAGE-INTEGRITY was ours) are checked
    /// back then. New values are an ICE restart of the peer's: its old candidates and pairs go,
    /// and media stops until a new pair works, or (`keepingRoute`) goes on over the selected pair
    /// while that still answers under the new credentials.
    package func setRemoteCredentials(ufrag: String, password: String, keepingRoute: Bool = false) {
        later { self.setRemoteCredentialsOnQueue(ufrag: ufrag, password: password, keepingRoute: keepingRoute) }
    }

    /// An ICE restart on our side (RFC 8445 §9): new local credentials, for the next offer or
    /// answer, from when this returns. Checks already going on continue; the peer's checks under
    /// the old credentials are still answered until it checks under the new ones (it learns
    /// them from that description), and ours name the old ones until then too, so consent on the
    /// pair media uses holds meanwhile. Call it before setting the peer's new credentials when
    /// answering a restart. Our
    /// candidates stay (one socket). Thread rule: any thread (waits for the agent's context).
    /// Cost: a random draw and a key derivation.
    package func restartLocalCredentials() {
        onQueue {
            guard !self.closed else { return }
            self.previousLocal = self.local
            self.local = ICELocalCredentials.random()
            self.shared.withLock { [local = self.local] in
                $0.localUfrag = local.ufrag
                $0.localPassword = local.password
            }
        }
    }

    /// A candidate of the peer (trickled, any order, before or after `start`). Beyond
    /// `maxRemoteCandidates`, dropped and counted.
    package func addRemoteCandidate(_ candidate: ICECandidate) {
        later { self.addRemoteCandidateOnQueue(candidate) }
    }

    /// A datagram from the socket that is not RTP/RTCP (STUN, TURN ChannelData/control), with
    /// the local address it arrived at when known (`UDPDatagram.destination`).
    /// Copies it and handles it on the agent's queue (a bounded backlog; beyond it, dropped and counted).
    package func handleDatagram(_ bytes: UnsafeRawBufferPointer, from: SocketAddress, to local: SocketAddress? = nil) {
        if isOnContext {
            process(Array(bytes), from: from, to: local)
            return
        }
        guard backlog.add(1, ordering: .relaxed).newValue <= Self.maxBacklog else {
            backlog.subtract(1, ordering: .relaxed)
            shared.withLock { $0.stats.droppedBacklog += 1 }
            return
        }
        let copy = Array(bytes)
        later {
            self.backlog.subtract(1, ordering: .relaxed)
            self.process(copy, from: from, to: local)
        }
    }

    /// Our candidates gathered so far (host, server-reflexive, relayed).
    package var localCandidates: [ICECandidate] { shared.withLock { $0.localCandidates } }
    /// The selected pair now (nil: none yet, or consent expired).
    package var selectedPair: (local: ICECandidate, remote: ICECandidate)? { shared.withLock { $0.selected } }
    /// The counters now.
    package var statistics: ICEAgentStatistics { shared.withLock { $0.stats } }

    /// One candidate pair as the agent sees it. Thread rule: a value type.
    package struct PairSnapshot: Sendable, CustomStringConvertible {
        package var local: ICECandidate
        package var remote: ICECandidate
        /// RFC 8445 §6.1.2.3 pair priority for the current role.
        package var priority: UInt64
        /// In the valid list (a check succeeded).
        package var valid: Bool
        /// Failed over (silent too long) and not answered since.
        package var failed: Bool
        package var selected: Bool
        package var description: String {
            "\(local) -> \(remote) prio \(priority)\(valid ? " valid" : "")\(failed ? " failed" : "")\(selected ? " selected" : "")"
        }
    }

    /// Each TURN allocation's counters (diagnostics). Thread rule: any thread (waits for the
    /// agent's queue).
    package var turnStatistics: [TURNClientStatistics] {
        var out: [TURNClientStatistics] = []
        onQueue { out = self.turns.map(\.statistics) }
        return out
    }

    /// Why no pair works, in words, for a caller that stops waiting for one: each TURN
    /// allocation that failed (the server's refusal or the lack of an answer), permissions or
    /// channels a server refused, and the checks (pairs, checks sent, answers received, the
    /// peer's checks answered), or that the peer offered no candidate. Thread rule: any thread
    /// (waits for the agent's queue). Cost: a pass over the pairs and the TURN clients.
    package var noPathReason: String {
        var parts: [String] = []
        onQueue {
            for t in self.turns {
                if case .failed(let reason) = t.state {
                    parts.append("TURN refused: \(t.server.address) (\(t.server.transport)): \(reason)")
                }
                let st = t.statistics
                if st.permissionFailures > 0 {
                    parts.append(
                        "TURN permission failed: \(t.server.address): \(st.permissionFailures) refused or unanswered, last "
                            + (st.lastPermissionFailure ?? "?"))
                }
            }
            let st = self.shared.withLock { $0.stats }
            if self.remotes.isEmpty {
                parts.append("no candidate pair succeeded: the peer offered no candidate")
            } else {
                let relayed = self.checks.pairs.filter(\.usesRelay).count
                parts.append(
                    "no candidate pair succeeded: \(self.checks.pairs.count) pairs (\(relayed) through a relay) with "
                        + "\(self.remotes.count) remote candidates, \(st.checksSent) checks sent, "
                        + "\(st.responsesReceived) answers received, \(st.checksAnswered) of the peer's checks answered")
            }
        }
        return parts.joined(separator: "; ")
    }

    /// The candidate pairs now, for diagnostics and tests. Thread rule: any thread (waits for the
    /// agent's queue). Cost: one copy of the check list.
    package var pairSnapshots: [PairSnapshot] {
        var out: [PairSnapshot] = []
        onQueue {
            out = self.checks.pairs.map {
                PairSnapshot(
                    local: $0.local.candidate, remote: $0.remote, priority: $0.priority, valid: $0.valid,
                    failed: $0.failedOver || $0.state == .failed, selected: $0 === self.selected)
            }
        }
        return out
    }

    /// Stops checks and timers and releases TURN allocations. Idempotent.
    package func close() {
        onQueue {
            guard !self.closed else { return }
            self.closed = true
            self.timer?.cancel()
            self.timer = nil
            self.scheduledTick?.cancel()
            self.scheduledTick = nil
            if self.reading { self.transport.stopReceiving() }
            self.reading = false
            for t in self.turns { t.close() }
            self.checks.stop()
        }
    }

    /// Reads the transport (the socket) on the agent's context until `stopReading`: STUN and TURN
    /// datagrams (first byte 0-3 or 64-79, RFC 7983) go to the agent, the others to
    /// `otherDatagram` (called on the agent's context). For before a media receive pipeline owns
    /// the socket, and for tests. Call `stopReading` (or `close`) before the socket is closed.
    /// Thread rule: any thread (waits for the agent's queue). Cost: one read source; a `recvfrom`
    /// and a copy per datagram.
    package func startReading(otherDatagram: (@Sendable (UnsafeRawBufferPointer, SocketAddress) -> Void)? = nil) {
        onQueue {
            guard !self.closed, !self.reading else { return }
            self.reading = true
            self.transport.startReceiving { [weak self] bytes, from, to in
                self?.received(bytes, from: from, to: to, otherDatagram)
            }
        }
    }

    /// Stops the reader of `startReading`; when it returns, the agent reads the socket no more.
    /// Thread rule: any thread (waits for the agent's queue). Cost: none.
    package func stopReading() {
        onQueue {
            if self.reading { self.transport.stopReceiving() }
            self.reading = false
        }
    }

    // MARK: Plumbing

    /// Whether the caller runs on the agent's context: on its queue, or (an agent without one)
    /// anywhere, since its scheduler's context is the only thread that calls it.
    var isOnContext: Bool { queue == nil || DispatchQueue.getSpecific(key: queueKey) != nil }

    /// Runs `body` on the agent's context now: directly when already on it, else with `sync`.
    func onQueue(_ body: () -> Void) {
        if isOnContext { body() } else { queue!.sync(execute: body) }
    }

    /// Runs `body` on the agent's context after the current work: `queue.async`, or work due now
    /// on the scheduler.
    func later(_ body: @escaping @Sendable () -> Void) {
        if let queue { queue.async(execute: body) } else { scheduler.schedule(after: .zero, body) }
    }

    /// A datagram from `startReading`'s transport.
    private func received(
        _ bytes: UnsafeRawBufferPointer, from: SocketAddress, to: SocketAddress?,
        _ other: (@Sendable (UnsafeRawBufferPointer, SocketAddress) -> Void)?
    ) {
        guard reading, let first = bytes.first else { return }
        if let drop = shared.withLock({ $0.dropFilter }), drop(from) { return }
        if first < 4 || (64...79).contains(first) {
            process(Array(bytes), from: from, to: to)
        } else if let other {
            other(bytes, from)
        }
    }

    /// A random ICE string of `count` characters from the ice-char set (RFC 8445 §5.3).
    package static func randomICEString(_ count: Int) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        return String(RandomBytes.bytes(count).map { alphabet[Int($0 & 63)] })
    }

    func bump(_ counter: WritableKeyPath<ICEAgentStatistics, Int>) {
        shared.withLock { $0.stats[keyPath: counter] += 1 }
    }
}

/// One set of our ICE credentials and the key MESSAGE-INTEGRITY is computed with. Thread rule: a
/// value type.
struct ICELocalCredentials: Sendable {
    var ufrag: String
    var password: String
    var key: [UInt8]

    /// Fresh random ones: an 8-character ufrag and a 24-character password.
    static func random() -> ICELocalCredentials {
        let password = ICEAgent.randomICEString(24)
        return ICELocalCredentials(
            ufrag: ICEAgent.randomICEString(8), password: password, key: STUNMessage.shortTermKey(password: password))
    }
}
