// Gathering (RFC 8445 §5.1) of an ICE agent, as a state machine with no I/O: the local
// candidates with their foundations, the Binding transactions to STUN servers and their
// retransmissions, which TURN allocations are still pending, and the deadline after which
// gathering is complete whatever the servers do. The agent sends the requests it returns, runs
// the TURN clients and pairs the candidates; this type decides what the candidates are.
import MediaBase
import MediaWire

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The gathering state of one agent (see the file comment). Thread rule: a value on the agent's
/// context. Cost: a pass over the candidates per new one; one STUN encoding per server.
package struct ICEGathering {
    /// A Binding request to a STUN server, to send from the socket's own address. Thread rule: a
    /// value type.
    package struct Request {
        /// The request (unsigned, with FINGERPRINT).
        package var bytes: [UInt8]
        /// The server's address.
        package var destination: SocketAddress
    }

    /// Binding requests to STUN servers carry a SOFTWARE attribute this long, so the answer (an
    /// XOR-MAPPED-ADDRESS and a few more attributes) is never larger than the request: servers
    /// that refuse to amplify answer it, and nothing we send can be amplified.
    package static let serverRequestSoftwareLength = 120
    /// Most local candidates kept.
    package static let maxLocalCandidates = 64
    /// How long gathering waits for servers.
    package static let deadline = Duration.seconds(8)

    /// Our candidates with their bases, in the order they were gathered.
    package private(set) var locals: [ICELocalCandidate] = []
    /// Binding transactions to STUN servers.
    private(set) var serverTransactions: [ICEServerTransaction] = []
    /// Per TURN allocation (by the agent's index): whether it gave its candidates or failed.
    private var relaysDone: [Bool] = []
    /// Whether gathering completed (announced once).
    package private(set) var complete = false
    /// When gathering stops waiting for servers (nil: not started).
    package private(set) var completesBy: MonotonicTime?
    /// Foundations by type, base and server (RFC 8445 §5.1.1.3).
    private var foundations: [String: String] = [:]

    /// Nothing gathered yet.
    package init() {}

    /// Starts at `now`: the deadline, and a Binding request to each of `stunServers` (returned,
    /// to send at once; retransmitted by `retransmit`).
    package mutating func start(stunServers: [ICEServer], now: MonotonicTime) -> [Request] {
        completesBy = now + Self.deadline
        var out: [Request] = []
        for server in stunServers {
            var m = STUNMessage(method: .binding, class: .request)
            let name = "Revue ICE"
            m.appendText(
                STUNMessage.AttributeType.software,
                name + String(repeating: " ", count: Self.serverRequestSoftwareLength - name.count))
            let bytes = m.encode(fingerprint: true)
            serverTransactions.append(
                ICEServerTransaction(
                    server: server, transactionID: m.transactionID, bytes: bytes,
                    nextAt: now + .milliseconds(250), rto: .milliseconds(250)))
            out.append(Request(bytes: bytes, destination: server.address))
        }
        return out
    }

    /// Whether STUN transactions are still waiting or gathering is not complete (the agent keeps
    /// its fast tick then).
    package var hasWork: Bool { !complete || serverTransactions.contains { !$0.done } }

    /// The foundation of a candidate of `type` on `base` learned from `server` (the same inputs,
    /// the same foundation).
    package mutating func foundation(_ type: ICECandidateType, base: SocketAddress, server: SocketAddress?) -> String {
        let key = "\(type.rawValue)|\(base.host)|\(server?.description ?? "")"
        if let f = foundations[key] { return f }
        let f = String(foundations.count + 1)
        foundations[key] = f
        return f
    }

    /// RFC 8445 §5.1.2.1 local preference: IPv6 above IPv4 (RFC 8421), then the order of the
    /// addresses (each interface address its own value).
    package static func hostLocalPreference(_ address: SocketAddress, index: Int) -> UInt32 {
        (address.family == .ipv6 ? 0xFFFF : 0x7FFF) - UInt32(min(index, 0x3FFF))
    }

    /// The host candidates of `addresses` (duplicates dropped), in order.
    package mutating func hostCandidates(_ addresses: [SocketAddress]) -> [ICELocalCandidate] {
        var seen = Set<SocketAddress>()
        return addresses.filter { seen.insert($0).inserted }.enumerated().map { i, a in
            let c = ICECandidate(
                foundation: foundation(.host, base: a, server: nil),
                priority: ICECandidate.priority(type: .host, localPreference: Self.hostLocalPreference(a, index: i)),
                address: a, type: .host)
            return ICELocalCandidate(candidate: c, base: a, relay: nil)
        }
    }

    /// Keeps `l` unless there are `maxLocalCandidates` already or one with its address on its
    /// path; true when kept.
    package mutating func add(_ l: ICELocalCandidate) -> Bool {
        guard locals.count < Self.maxLocalCandidates,
            !locals.contains(where: { $0.candidate.address == l.candidate.address && $0.relay == l.relay })
        else { return false }
        locals.append(l)
        return true
    }

    /// A server-reflexive candidate for `mapped` as `server` saw us, on the first host
    /// candidate's base (nil: the address is a candidate already, or there is no host candidate).
    package mutating func serverReflexive(_ mapped: SocketAddress, server: SocketAddress) -> ICELocalCandidate? {
        guard !locals.contains(where: { $0.candidate.address == mapped }),
            let base = locals.first(where: { $0.candidate.type == .host })
        else { return nil }
        let lp = (base.candidate.priority >> 8) & 0xFFFF
        let c = ICECandidate(
            foundation: foundation(.srflx, base: base.base, server: server),
            priority: ICECandidate.priority(type: .srflx, localPreference: lp),
            address: mapped, type: .srflx, relatedAddress: base.base)
        return ICELocalCandidate(candidate: c, base: base.base, relay: nil)
    }

    /// The relayed candidates of allocation `index` for `addresses` (`mapped`: the server-reflexive
    /// address the server reported), IPv6 above IPv4 among them (RFC 8421).
    package mutating func relayedCandidates(
        of index: Int, server: SocketAddress, addresses: [SocketAddress], mapped: SocketAddress
    ) -> [ICELocalCandidate] {
        addresses.enumerated().map { i, a in
            let lp = (a.family == .ipv6 ? 0xFFFF : 0xFF00) - UInt32(min(index, 0x7F) * 2 + i)
            let c = ICECandidate(
                foundation: foundation(.relay, base: a, server: server),
                priority: ICECandidate.priority(type: .relay, localPreference: lp),
                address: a, type: .relay, relatedAddress: mapped)
            return ICELocalCandidate(candidate: c, base: a, relay: index)
        }
    }

    /// Removes the relayed candidates of allocation `index` whose address is not in `addresses`;
    /// returns them.
    package mutating func removeRelayed(of index: Int, keeping addresses: [SocketAddress]) -> [ICELocalCandidate] {
        let gone = locals.filter { $0.relay == index && $0.candidate.type == .relay && !addresses.contains($0.candidate.address) }
        guard !gone.isEmpty else { return [] }
        let goneAddresses = Set(gone.map(\.candidate.address))
        locals.removeAll { $0.relay == index && goneAddresses.contains($0.candidate.address) }
        return gone
    }

    /// A TURN allocation started: its index (the agent's relay index), pending until `relayDone`.
    package mutating func addRelay() -> Int {
        relaysDone.append(false)
        return relaysDone.count - 1
    }

    /// Allocation `index` gave its candidates or failed.
    package mutating func relayDone(_ index: Int) { relaysDone[index] = true }

    /// The STUN server transaction `id` answered from `from`: the server, once (nil: no such
    /// transaction, answered already, or from another address; `wrongSource` then says the
    /// transaction exists but the answer came from elsewhere).
    package mutating func serverAnswered(_ id: [UInt8], from: SocketAddress) -> (server: ICEServer?, wrongSource: Bool)? {
        guard let i = serverTransactions.firstIndex(where: { $0.transactionID == id }) else { return nil }
        guard serverTransactions[i].server.address == from else { return (nil, true) }
        guard !serverTransactions[i].done else { return (nil, false) }
        serverTransactions[i].done = true
        return (serverTransactions[i].server, false)
    }

    /// Requests to STUN servers due again at `now` (250 ms, doubled per send; given up after four
    /// sends).
    package mutating func retransmit(now: MonotonicTime) -> [Request] {
        var out: [Request] = []
        for i in serverTransactions.indices where !serverTransactions[i].done && serverTransactions[i].nextAt <= now {
            if serverTransactions[i].sends >= 4 {
                serverTransactions[i].done = true
                continue
            }
            serverTransactions[i].sends += 1
            serverTransactions[i].rto *= 2
            serverTransactions[i].nextAt = now + serverTransactions[i].rto
            out.append(Request(bytes: serverTransactions[i].bytes, destination: serverTransactions[i].server.address))
        }
        return out
    }

    /// Whether gathering completes now: every server done, or (given the time) the deadline
    /// passed. True once; the agent announces it then.
    package mutating func completes(now: MonotonicTime? = nil) -> Bool {
        guard !complete, completesBy != nil else { return false }
        let serversDone = serverTransactions.allSatisfy(\.done) && relaysDone.allSatisfy { $0 }
        if !serversDone {
            guard let now, let deadline = completesBy, now >= deadline else { return false }
        }
        complete = true
        return true
    }
}
