// An in-process datagram network on the simulated clock: endpoints bound to virtual addresses,
// links with the impairment relay's model (delay, jitter, reordering, Gilbert-Elliott loss, a rate
// limit behind a bounded queue, duplication), and NATs of the usual kinds. Nothing touches a real
// socket: a datagram is a scheduled call on the `SimulatedTime` that the network runs on.
import MediaCore
import MediaTools
import Synchronization

/// A simulated network. Hosts are addresses (the port is ignored); use loopback-range addresses
/// such as 127.77.0.1, so that nothing could ever leave the machine even by mistake. Thread rule:
/// one thread, the simulated clock's (the main actor for session tests); `send` also from inside a
/// `screen`. Cost: one impairment decision and one scheduled delivery per datagram.
package final class VirtualNetwork: @unchecked Sendable {
    /// How a NAT maps and filters, as RFC 4787 names it.
    package enum NATBehaviour: Sendable, Equatable {
        /// Endpoint-independent mapping that keeps the inside port when it can, and
        /// endpoint-independent filtering ("full cone").
        case portPreservingCone
        /// Endpoint-independent mapping; inbound only from addresses the inside host sent to.
        case addressRestricted
        /// Endpoint-independent mapping; inbound only from the exact address and port sent to.
        case portRestricted
        /// A new outside port for each destination address and port, filtered like
        /// `portRestricted`.
        case symmetric
    }

    /// What happened to datagrams so far.
    package struct Counters: Sendable, Equatable {
        package var sent = 0
        package var delivered = 0
        /// Dropped by a link's loss or its queue.
        package var lost = 0
        /// Dropped by a NAT's filter, or sent to a NAT port with no mapping.
        package var filtered = 0
        /// Delivered to an address no endpoint is bound to.
        package var noListener = 0
        /// Dropped by an endpoint's `screen`.
        package var screened = 0
    }

    private struct Mapping {
        let inside: SocketAddress
        let outside: SocketAddress
        /// Destinations the inside host sent to through this mapping (filters inbound traffic).
        var contacted: Set<SocketAddress> = []
    }

    private final class NAT {
        let publicHost: SocketAddress
        let behaviour: NATBehaviour
        var inside: Set<SocketAddress> = []
        var byKey: [String: SocketAddress] = [:]
        var byOutside: [SocketAddress: Mapping] = [:]
        var nextPort: UInt16 = 40_000
        init(publicHost: SocketAddress, behaviour: NATBehaviour) {
            self.publicHost = publicHost
            self.behaviour = behaviour
        }
    }

    /// The clock the network runs on.
    package let time: SimulatedTime
    private let seed: UInt64
    private var ports: [SocketAddress: VirtualDatagramPort] = [:]
    private var links: [String: ImpairmentModel] = [:]
    private var linkSettings: [String: ImpairmentModel.Settings] = [:]
    private var defaultSettings: ImpairmentModel.Settings
    private var nats: [NAT] = []
    private var nextEphemeral: [SocketAddress: UInt16] = [:]
    package private(set) var counters = Counters()

    /// A network on `time` whose links all have `defaultLink` unless `setLink` says otherwise
    /// (by default 1 ms one way, nothing else); `seed` seeds every link's random draws.
    package init(time: SimulatedTime, seed: UInt64 = 1, defaultLink: ImpairmentModel.Settings? = nil) {
        self.time = time
        self.seed = seed
        defaultSettings = defaultLink ?? ImpairmentModel.Settings(delayMilliseconds: 1)
    }

    /// The impairment of datagrams from host `from` to host `to` (one direction; call it twice for
    /// both). Hosts behind a NAT share the NAT's links with the outside.
    package func setLink(from: SocketAddress, to: SocketAddress, _ settings: ImpairmentModel.Settings) {
        let key = Self.linkKey(from, to)
        linkSettings[key] = settings
        links[key] = nil
    }

    /// Hosts whose cable is pulled: every datagram from or to them is lost (counted in `lost`).
    private var cutHosts: Set<SocketAddress> = []

    /// Pulls `host`'s cable (`true`) or plugs it back in (`false`).
    package func setCut(_ host: SocketAddress, _ cut: Bool) {
        if cut { cutHosts.insert(Self.host(host)) } else { cutHosts.remove(Self.host(host)) }
    }

    /// Whether a datagram reaches an address inside a NAT from outside that NAT (true, the
    /// default) or is dropped and counted in `filtered` (false: private addresses are not routed
    /// between networks, so a peer's host candidate behind another NAT cannot be reached).
    package var routesToPrivateAddresses = true

    /// Puts `insideHosts` behind a NAT whose outside address is `publicHost`.
    package func addNAT(publicHost: SocketAddress, behaviour: NATBehaviour, insideHosts: [SocketAddress]) {
        let nat = NAT(publicHost: Self.host(publicHost), behaviour: behaviour)
        nat.inside = Set(insideHosts.map(Self.host))
        nats.append(nat)
    }

    /// Binds an endpoint at `address` (port 0: the next free port from 50,000 on that host).
    package func bind(_ address: SocketAddress) -> VirtualDatagramPort {
        var a = address
        if a.port == 0 {
            let host = Self.host(address)
            var p = nextEphemeral[host] ?? 50_000
            while ports[SocketAddress(host, port: p)] != nil { p &+= 1 }
            nextEphemeral[host] = p &+ 1
            a.port = p
        }
        let port = VirtualDatagramPort(network: self, address: a)
        ports[a] = port
        return port
    }

    func unbind(_ port: VirtualDatagramPort) {
        if ports[port.address] === port { ports[port.address] = nil }
    }

    /// Sends a datagram from `source` (an endpoint's address) to `destination`, through the
    /// source's NAT (if any), the link, and the destination's NAT (if any).
    func send(_ bytes: [UInt8], from source: SocketAddress, to destination: SocketAddress) {
        counters.sent += 1
        if cutHosts.contains(Self.host(source)) || cutHosts.contains(Self.host(destination)) {
            counters.lost += 1
            return
        }
        var from = source
        let sourceNAT = nat(inside: source)
        let destinationNAT = nat(inside: destination)
        if !routesToPrivateAddresses, let d = destinationNAT, d !== sourceNAT {
            counters.filtered += 1
            return
        }
        if let n = sourceNAT, n !== destinationNAT {
            from = outbound(n, inside: source, to: destination)
        }
        let key = Self.linkKey(sourceNAT?.publicHost ?? source, destination)
        var model =
            links[key] ?? ImpairmentModel(settings: linkSettings[key] ?? defaultSettings, seed: seed &+ key.hashValueStable)
        let nowNs = time.now.nanoseconds
        let decision = model.decide(arrival: nowNs, size: bytes.count)
        links[key] = model
        let outsideSource = from
        let deliver: (UInt64) -> Void = { [weak self] at in
            self?.time.schedule(after: .nanoseconds(Int64(at &- nowNs))) { [weak self] in
                self?.arrive(bytes, from: outsideSource, to: destination)
            }
        }
        switch decision {
        case .drop: counters.lost += 1
        case .deliver(let at): deliver(at)
        case .deliverTwice(let at, let again):
            deliver(at)
            deliver(again)
        }
    }

    /// Sends a datagram whose source address is `source` whether or not anything is bound there:
    /// a spoofed source, as an off-path attacker sends it. It takes the link from `source`'s host
    /// like any other. Thread rule and cost as `send`.
    package func inject(_ bytes: [UInt8], from source: SocketAddress, to destination: SocketAddress) {
        send(bytes, from: source, to: destination)
    }

    private func arrive(_ bytes: [UInt8], from: SocketAddress, to: SocketAddress) {
        var destination = to
        if let n = nats.first(where: { $0.publicHost == Self.host(to) }) {
            guard let m = n.byOutside[to] else {
                counters.filtered += 1
                return
            }
            let allowed: Bool
            switch n.behaviour {
            case .portPreservingCone: allowed = true
            case .addressRestricted: allowed = m.contacted.contains { Self.host($0) == Self.host(from) }
            case .portRestricted, .symmetric: allowed = m.contacted.contains(from)
            }
            guard allowed else {
                counters.filtered += 1
                return
            }
            destination = m.inside
        }
        guard let port = ports[destination] else {
            counters.noListener += 1
            return
        }
        if port.receive(bytes, from: from) { counters.delivered += 1 } else { counters.screened += 1 }
    }

    private func nat(inside address: SocketAddress) -> NAT? {
        let h = Self.host(address)
        return nats.first { $0.inside.contains(h) }
    }

    /// The outside address of `inside` toward `destination`, made on first use.
    private func outbound(_ n: NAT, inside: SocketAddress, to destination: SocketAddress) -> SocketAddress {
        let key = n.behaviour == .symmetric ? "\(inside)>\(destination)" : "\(inside)"
        let outside: SocketAddress
        if let o = n.byKey[key] {
            outside = o
        } else {
            var port = inside.port
            if n.behaviour != .portPreservingCone || n.byOutside[SocketAddress(n.publicHost, port: port)] != nil {
                repeat {
                    port = n.nextPort
                    n.nextPort = n.nextPort == UInt16.max ? 40_000 : n.nextPort + 1
                } while n.byOutside[SocketAddress(n.publicHost, port: port)] != nil
            }
            outside = SocketAddress(n.publicHost, port: port)
            n.byKey[key] = outside
            n.byOutside[outside] = Mapping(inside: inside, outside: outside)
        }
        n.byOutside[outside]?.contacted.insert(destination)
        return outside
    }

    static func host(_ a: SocketAddress) -> SocketAddress { SocketAddress(a, port: 0) }

    private static func linkKey(_ from: SocketAddress, _ to: SocketAddress) -> String {
        "\(host(from).host)>\(host(to).host)"
    }
}

extension SocketAddress {
    /// `address` with another port.
    package init(_ address: SocketAddress, port: UInt16) {
        self = address
        self.port = port
    }
}

extension String {
    /// A hash that is the same in every run (Swift's `hashValue` is seeded per process): FNV-1a.
    var hashValueStable: UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in utf8 {
            h ^= UInt64(b)
            h = h &* 0x100_0000_01b3
        }
        return h
    }
}

/// One bound endpoint of a `VirtualNetwork`: a `DatagramPort`, so session code runs on it as on a
/// real UDP socket. Thread rule: the network's thread.
package final class VirtualDatagramPort: DatagramPort, @unchecked Sendable {
    private weak var network: VirtualNetwork?
    /// The bound address.
    package let address: SocketAddress
    private var screen: (@Sendable (UnsafeRawBufferPointer, SocketAddress) -> Bool)?
    private var onReceive: (@Sendable ([UInt8], SocketAddress) -> Void)?
    private var closed = false
    /// Datagrams this endpoint sent and received.
    package private(set) var sent = 0
    package private(set) var received = 0
    /// A datagram on its way out is offered here first; false drops it (a test's cut cable).
    package var outboundFilter: ((_ bytes: [UInt8], _ to: SocketAddress) -> Bool)?

    init(network: VirtualNetwork, address: SocketAddress) {
        self.network = network
        self.address = address
    }

    package var localPort: UInt16 { address.port }
    package func carries(_ family: SocketAddress.Family) -> Bool { family == address.family }
    package var droppedOverload: Int { 0 }

    @discardableResult
    package func send(_ bytes: [UInt8], to destination: SocketAddress) -> Bool {
        guard !closed, let network, destination.family == address.family else { return false }
        if let outboundFilter, !outboundFilter(bytes, destination) { return true }
        sent += 1
        network.send(bytes, from: address, to: destination)
        return true
    }

    package func sendFromReceiveContext(_ bytes: [UInt8], to destination: SocketAddress) {
        send(bytes, to: destination)
    }

    package func start(
        screen: (@Sendable (UnsafeRawBufferPointer, SocketAddress) -> Bool)?,
        onReceive: @escaping @Sendable ([UInt8], SocketAddress) -> Void
    ) {
        self.screen = screen
        self.onReceive = onReceive
    }

    /// Hands an arriving datagram to the owner; false when `screen` dropped it.
    func receive(_ bytes: [UInt8], from: SocketAddress) -> Bool {
        guard !closed, let onReceive else { return true }
        if let screen, !bytes.withUnsafeBytes({ screen($0, from) }) { return false }
        received += 1
        onReceive(bytes, from)
        return true
    }

    package func close() {
        guard !closed else { return }
        closed = true
        network?.unbind(self)
    }
}
