// The ICE agent's bookkeeping: local candidates with their base, candidate pairs (RFC 8445 §6.1.2)
// and outstanding STUN transactions. Everything here lives on the agent's queue.
import MediaBase
import MediaWire

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A local candidate and where it sends from. Thread rule: a value on the agent's queue.
package struct ICELocalCandidate {
    package var candidate: ICECandidate
    /// The base (RFC 8445 §5.1.1.1): the host address for host/srflx/prflx, the relayed address
    /// for a relayed candidate.
    package var base: SocketAddress
    /// The TURN client (index in the agent's list) a relayed candidate sends through; nil: the socket.
    package var relay: Int?

    /// A local candidate on `base`, sent through TURN client `relay` when relayed.
    package init(candidate: ICECandidate, base: SocketAddress, relay: Int?) {
        self.candidate = candidate
        self.base = base
        self.relay = relay
    }
    /// Host and relayed candidates form pairs; server- and peer-reflexive ones are redundant with
    /// their base (RFC 8445 §6.1.2.4) and only appear as the local side of valid pairs.
    var pairs: Bool { candidate.type == .host || candidate.type == .relay }
}

/// One candidate pair and its check state. Thread rule: the agent's queue only. Cost: a few words.
package final class ICECandidatePair {
    /// Where the pair's checks stand (RFC 8445 §6.1.2.6, without the frozen state).
    package enum State { case waiting, inProgress, succeeded, failed }

    package let local: ICELocalCandidate
    package private(set) var remote: ICECandidate
    /// RFC 8445 §6.1.2.3, recomputed when the role changes.
    package var priority: UInt64 = 0
    package var state: State = .waiting
    /// In the valid list (a check on it, or on a pair that mapped to it, succeeded).
    package var valid = false
    /// Waiting in the triggered-check queue.
    package var triggered = false
    /// When the last authenticated success response came (`.zero`: never): liveness and consent.
    package var lastResponseAt = MonotonicTime.zero
    /// When the next keepalive / consent check goes out (valid pairs; `.zero` until the first answer).
    package var nextKeepaliveAt = MonotonicTime.zero
    /// Controlled side: when the peer last sent USE-CANDIDATE on this pair (`.zero`: never).
    package var peerNominatedAt = MonotonicTime.zero
    /// When the pair was last selected (`.zero`: never).
    package var selectedAt = MonotonicTime.zero
    /// Marked failed by failover (no answer for too long); cleared by the next answer.
    package var failedOver = false
    /// When the pair last became usable (valid and answering after being neither; `.zero`: never).
    package var usableSince = MonotonicTime.zero
    /// Error answers after which the check is tried again (401, 420, 500) this pair has had:
    /// past `maxRetryableErrors` the pair fails.
    package var retryableErrors = 0
    /// Error answers a pair may get that leave it waiting for another check: a peer that
    /// restarted ICE answers 401 until our new credentials reach it (one signalling round trip).
    package static let maxRetryableErrors = 8

    /// An error answer that may pass (RFC 8445 §7.2.5.2.4 leaves 401, 420 and 500 to the agent;
    /// a peer that restarted ICE answers 401 until our new credentials reach it): a pair not yet
    /// valid waits for another check, at most `maxRetryableErrors` times. Returns false when the
    /// pair has had its share (the caller fails it) or is valid already (nothing changes).
    /// Thread rule: the agent's. Cost: none.
    package func passRetryableError() -> Bool {
        guard !valid, retryableErrors < Self.maxRetryableErrors else { return false }
        retryableErrors += 1
        state = .waiting
        return true
    }

    /// A waiting pair of `local` and `remote` (priority 0 until set).
    package init(local: ICELocalCandidate, remote: ICECandidate) {
        self.local = local
        self.remote = remote
    }

    /// Replaces the remote candidate (a peer-reflexive one later signalled with its real type).
    func updateRemote(_ c: ICECandidate) { remote = c }

    package var isRelayed: Bool { local.relay != nil }
    /// Goes through a TURN server: our relayed candidate, or the peer's.
    package var usesRelay: Bool { local.relay != nil || remote.type == .relay }

    /// RFC 8445 §6.1.2.3: 2^32·min(G,D) + 2·max(G,D) + (G>D ? 1 : 0), G the controlling agent's
    /// candidate priority.
    package static func priority(local: UInt32, remote: UInt32, controlling: Bool) -> UInt64 {
        let g = UInt64(controlling ? local : remote), d = UInt64(controlling ? remote : local)
        return (min(g, d) << 32) + 2 * max(g, d) + (g > d ? 1 : 0)
    }

    /// Orders pairs for selection: direct before relayed, then by priority.
    package func isBetter(than other: ICECandidatePair) -> Bool {
        if isRelayed != other.isRelayed { return !isRelayed }
        return priority > other.priority
    }
}

/// An outstanding connectivity check (Binding request) on a pair. Thread rule: the agent's queue.
package struct ICECheckTransaction {
    /// A connectivity check (retransmitted) or a consent check (sent once).
    package enum Kind { case check, keepalive }
    package let pair: ICECandidatePair
    package let bytes: [UInt8]
    package let destination: SocketAddress
    package let relay: Int?
    package let kind: Kind
    package let nominate: Bool
    package let sentControlling: Bool
    package let prflxPriority: UInt32
    /// Datagrams sent so far (the first and the retransmissions).
    package var sends = 1
    /// The retransmission timeout, doubled per retransmission up to 1.6 s.
    package var rto: Duration
    /// When it is retransmitted or given up.
    package var nextAt: MonotonicTime
    package let startedAt: MonotonicTime
    /// Transactions started so far by the agent when this one started: orders those started at
    /// the same instant (a dictionary's order differs between processes).
    var serial: UInt64 = 0

    /// Whether it started before `other`.
    package func startedBefore(_ other: ICECheckTransaction) -> Bool {
        (startedAt, serial) < (other.startedAt, other.serial)
    }
}

/// A Binding transaction to a STUN server for a server-reflexive candidate. Thread rule: the agent's queue.
struct ICEServerTransaction {
    let server: ICEServer
    let transactionID: [UInt8]
    let bytes: [UInt8]
    var sends = 1
    var nextAt: MonotonicTime
    /// The retransmission timeout, doubled per retransmission.
    var rto: Duration
    var done = false
}

/// A token bucket for answering Binding requests. Thread rule: the agent's queue. Cost: arithmetic.
struct ICETokenBucket {
    let rate: Double
    let capacity: Double
    var tokens: Double
    var at: MonotonicTime

    init(perSecond: Int, now: MonotonicTime) {
        rate = Double(max(1, perSecond))
        capacity = 2 * rate
        tokens = capacity
        at = now
    }

    /// Takes one token; false when none is left.
    mutating func take(now: MonotonicTime) -> Bool {
        refill(now: now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// The tokens there are now (refilled up to `capacity`).
    mutating func available(now: MonotonicTime) -> Double {
        refill(now: now)
        return tokens
    }

    /// Takes `amount` tokens (callers check `available` first; never below zero).
    mutating func take(_ amount: Double, now: MonotonicTime) {
        refill(now: now)
        tokens = max(0, tokens - amount)
    }

    private mutating func refill(now: MonotonicTime) {
        if now > at {
            tokens = min(capacity, tokens + Double(now.nanoseconds(since: at)) / 1e9 * rate)
            at = now
        }
    }
}

extension STUNMessage {
    /// A 64-bit attribute's value (ICE-CONTROLLING / ICE-CONTROLLED).
    func uint64(_ type: UInt16) -> UInt64? {
        guard let v = value(type), v.count == 8 else { return nil }
        return v.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }
}
