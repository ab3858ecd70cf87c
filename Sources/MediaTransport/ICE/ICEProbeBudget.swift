// What the ICE agent may send toward remote addresses that never answered a check of ours.
//
// The peer's description names the addresses we check, so without a bound anyone who can hand
// us an offer could aim our Binding requests (and their retransmissions) at a third party or an
// internal host: up to `maxRemoteCandidates` destinations, each checked from every local
// candidate, re-checked as often as the peer triggers it. An address is answered once an
// authenticated response to one of our checks came from it (it holds our transaction ID and the
// peer's password, so it is where the peer's agent is: RFC 7675 consent); until then:
// - each destination (a remote address, per path: our socket or each TURN relay) gets
//   `unansweredSendsPerAddress` datagrams, checks and retransmissions together, and then none;
// - at most `maxUnansweredAddresses` distinct remote addresses are probed, and at most
//   `maxUnansweredAddressesPerSubnet` of them in one IPv4 /24 or IPv6 /64;
// - every datagram toward them takes from one token bucket in datagrams and one in bytes
//   (`unansweredChecksPerSecond`, `unansweredBytesPerSecond`, bursts of twice the rate), so the
//   whole agent's unanswered traffic has a rate whatever the peer does.
// An authenticated request from an address (the peer's own check) lifts the address caps for it
// and tops its budget up to `sendsPerRequest` (one transaction), so the triggered check goes
// out; the buckets still apply, because such a request may carry a forged source address.
import MediaBase

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The bound on checks toward unanswered addresses (see the file comment). Thread rule: a value
/// on the agent's queue. Cost: a dictionary look-up and a little arithmetic per datagram.
package struct ICEProbeBudget {
    /// One destination of checks: a remote address and the path to it (nil: our socket; else the
    /// TURN relay's index).
    package struct Destination: Hashable {
        var address: SocketAddress
        var relay: Int?
    }

    /// Why a datagram may not go.
    package enum Verdict: Equatable {
        /// It may go (the buckets were charged).
        case send
        /// Not now: the buckets are empty; try again later.
        case later
        /// Not until the address answers or sends a request: its budget is spent, or the
        /// address caps are reached.
        case never
    }

    package let sendsPerAddress: Int
    package let maxAddresses: Int
    package let maxAddressesPerSubnet: Int
    /// Datagrams a request from an unanswered address tops its budget up to: one transaction.
    package static let sendsPerRequest = 6

    /// Addresses an authenticated response came from.
    private(set) var answered = Set<SocketAddress>()
    /// Datagrams left per destination (absent: the full budget).
    private var left: [Destination: Int] = [:]
    /// Unanswered addresses probed (this generation of the peer's candidates).
    private var probed = Set<SocketAddress>()
    /// How many of `probed` each subnet holds.
    private var perSubnet: [[UInt8]: Int] = [:]
    /// Addresses that sent an authenticated request: the address caps do not apply to them.
    private var requested = Set<SocketAddress>()
    private var datagrams: ICETokenBucket
    private var bytes: ICETokenBucket
    /// Most answered addresses remembered (the oldest are not evicted: beyond this, new ones
    /// are simply not remembered and stay under the budget).
    package static let maxAnswered = 256

    package init(configuration c: ICEAgentConfiguration, now: MonotonicTime) {
        sendsPerAddress = max(1, c.unansweredSendsPerAddress)
        maxAddresses = max(1, c.maxUnansweredAddresses)
        maxAddressesPerSubnet = max(1, c.maxUnansweredAddressesPerSubnet)
        datagrams = ICETokenBucket(perSecond: c.unansweredChecksPerSecond, now: now)
        bytes = ICETokenBucket(perSecond: c.unansweredBytesPerSecond, now: now)
    }

    /// The subnet an address counts in: its /24 (IPv4) or /64 (IPv6).
    package static func subnet(_ a: SocketAddress) -> [UInt8] {
        let b = a.addressBytes
        return a.family == .ipv4 ? [4] + b.prefix(3) : [6] + b.prefix(8)
    }

    /// Whether `address` answered a check of ours.
    package func isAnswered(_ address: SocketAddress) -> Bool { answered.contains(address) }

    /// An authenticated response to our check came from `address`: no bound applies to it any more.
    package mutating func noteAnswer(from address: SocketAddress) {
        guard !answered.contains(address), answered.count < Self.maxAnswered else { return }
        answered.insert(address)
    }

    /// An authenticated request came from `address` (on `relay`): it may be checked back
    /// (at least `sendsPerRequest` datagrams left, the address caps lifted), under the buckets.
    package mutating func noteRequest(from address: SocketAddress, relay: Int?) {
        guard !answered.contains(address) else { return }
        let d = Destination(address: address, relay: relay)
        left[d] = max(left[d] ?? sendsPerAddress, Self.sendsPerRequest)
        if requested.count < 4 * Self.maxAnswered { requested.insert(address) }
    }

    /// Asks to send one datagram of `size` bytes to `address` on `relay`; `.send` charges it.
    package mutating func admit(_ address: SocketAddress, relay: Int?, size: Int, now: MonotonicTime) -> Verdict {
        if answered.contains(address) { return .send }
        let d = Destination(address: address, relay: relay)
        let budget = left[d] ?? sendsPerAddress
        guard budget > 0 else { return .never }
        if !probed.contains(address) && !requested.contains(address) {
            guard probed.count < maxAddresses, perSubnet[Self.subnet(address), default: 0] < maxAddressesPerSubnet else {
                return .never
            }
        }
        // A datagram larger than the byte bucket holds (a very long ufrag) waits for a full bucket.
        let cost = min(Double(size), bytes.capacity)
        guard datagrams.available(now: now) >= 1, bytes.available(now: now) >= cost else { return .later }
        _ = datagrams.take(now: now)
        bytes.take(cost, now: now)
        left[d] = budget - 1
        if probed.insert(address).inserted { perSubnet[Self.subnet(address), default: 0] += 1 }
        return .send
    }

    /// The peer restarted (new credentials, RFC 8445 §9): budgets and address caps start again
    /// for its new candidates; answered addresses and the buckets carry on.
    package mutating func newGeneration() {
        left.removeAll()
        probed.removeAll()
        perSubnet.removeAll()
        requested.removeAll()
    }
}
