// The servers ICE gathers from, on a `VirtualNetwork`: a STUN server answering Binding requests
// (RFC 8489) and a small UDP TURN server (RFC 8656: Allocate behind a 401 challenge, Refresh,
// CreatePermission, ChannelBind, Send and Data indications, ChannelData), so agents on simulated
// time find server-reflexive and relayed candidates as they would on the internet. Both speak
// through MediaCore's `STUNMessage` and `TURNChannelData`; what they do not model (TCP, IPv6
// relays, quotas, nonce expiry) the real-time tests against coturn cover.
import MediaCore

/// A STUN server on a virtual network: each Binding request is answered with the address it came
/// from (XOR-MAPPED-ADDRESS) and a FINGERPRINT. Thread rule: the network's thread. Cost: one parse
/// and one answer per request.
package final class SimulatedSTUNServer: @unchecked Sendable {
    /// The server's address.
    package let address: SocketAddress
    private let port: VirtualDatagramPort
    /// Binding requests answered, and datagrams that were not one (dropped).
    package private(set) var answered = 0
    package private(set) var dropped = 0

    /// A server bound at `address` (a public host of `network`).
    package init(network: VirtualNetwork, address: SocketAddress) {
        self.address = address
        port = network.bind(address)
        port.start(screen: nil) { [weak self] bytes, from in self?.handle(bytes, from: from) }
    }

    /// An ICE server entry naming it.
    package var server: ICEServer { ICEServer(kind: .stun, address: address) }

    private func handle(_ bytes: [UInt8], from: SocketAddress) {
        guard let m = try? STUNMessage(parsing: bytes), m.method == .binding, m.messageClass == .request else {
            dropped += 1
            return
        }
        var r = STUNMessage(method: .binding, class: .successResponse, transactionID: m.transactionID)
        r.appendXORAddress(STUNMessage.AttributeType.xorMappedAddress, from)
        answered += 1
        port.send(r.encode(fingerprint: true), to: from)
    }

    /// Stops answering.
    package func close() { port.close() }
}

/// A UDP TURN server on a virtual network, one allocation per client address (as the server sees
/// it, after the client's NAT), relayed addresses on the server's own host. Requests must carry
/// the long-term credentials (`username`, `password`, `realm`); the first unsigned request gets
/// the 401 challenge. Peers reach a client only from an IP it has a permission for.
/// Thread rule: the network's thread. Cost: a dictionary look-up per datagram.
package final class SimulatedTURNServer: @unchecked Sendable {
    package static let realm = "simulated.test", nonce = "0123456789abcdef"
    /// The server's address and the credentials it accepts.
    package let address: SocketAddress
    package let username: String, password: String
    private let network: VirtualNetwork
    private let port: VirtualDatagramPort
    private let key: [UInt8]

    /// Sendable: used only on the network's thread, like the server.
    private final class Allocation: @unchecked Sendable {
        let relay: VirtualDatagramPort
        var permissions: Set<SocketAddress> = []
        var channels: [UInt16: SocketAddress] = [:]
        init(relay: VirtualDatagramPort) { self.relay = relay }
        func channel(for peer: SocketAddress) -> UInt16? { channels.first { $0.value == peer }?.key }
    }
    private var allocations: [SocketAddress: Allocation] = [:]

    /// What the server did. Thread rule: a value type.
    package struct Counters: Sendable, Equatable {
        package var allocations = 0
        package var refreshes = 0
        package var permissions = 0
        package var channelBinds = 0
        /// Datagrams relayed from clients to peers and from peers to clients.
        package var toPeers = 0
        package var toClients = 0
        /// Requests refused (401, 437) and datagrams dropped (no allocation, no permission, garbage).
        package var refused = 0
        package var dropped = 0
    }
    package private(set) var counters = Counters()

    /// A server bound at `address` (a public host of `network`).
    package init(network: VirtualNetwork, address: SocketAddress, username: String = "u", password: String = "p") {
        self.network = network
        self.address = address
        self.username = username
        self.password = password
        key = STUNMessage.longTermKey(username: username, realm: Self.realm, password: password)
        port = network.bind(address)
        port.start(screen: nil) { [weak self] bytes, from in self?.fromClient(bytes, from: from) }
    }

    /// An ICE server entry naming it with its credentials.
    package var server: ICEServer { ICEServer(kind: .turn, address: address, username: username, password: password) }

    /// The relayed addresses handed out now.
    package var relayedAddresses: [SocketAddress] { allocations.values.map(\.relay.address) }

    private func fromClient(_ bytes: [UInt8], from client: SocketAddress) {
        guard let first = bytes.first else { return }
        if TURNChannelData.mayBeChannelData(firstByte: first) {
            let parsed = TURNChannelData.parse(bytes.span.bytes).map { (channel: $0.channel, data: Array(bytes[$0.data])) }
            guard let parsed, let a = allocations[client], let peer = a.channels[parsed.channel] else {
                counters.dropped += 1
                return
            }
            relay(parsed.data, from: a, to: peer)
            return
        }
        guard let m = try? STUNMessage(parsing: bytes) else {
            counters.dropped += 1
            return
        }
        if m.messageClass == .indication && m.method == .send {
            guard let a = allocations[client], let peer = try? m.xorAddress(STUNMessage.AttributeType.xorPeerAddress),
                let data = m.value(STUNMessage.AttributeType.data)
            else {
                counters.dropped += 1
                return
            }
            relay(data, from: a, to: peer)
            return
        }
        guard m.messageClass == .request else {
            counters.dropped += 1
            return
        }
        guard m.value(STUNMessage.AttributeType.messageIntegrity) != nil, STUNMessage.hasValidIntegrity(bytes, key: key) else {
            var r = STUNMessage(method: m.method, class: .errorResponse, transactionID: m.transactionID)
            r.appendErrorCode(401, reason: "Unauthorized")
            r.appendText(STUNMessage.AttributeType.realm, Self.realm)
            r.appendText(STUNMessage.AttributeType.nonce, Self.nonce)
            counters.refused += 1
            port.send(r.encode(fingerprint: true), to: client)
            return
        }
        var r = STUNMessage(method: m.method, class: .successResponse, transactionID: m.transactionID)
        switch m.method {
        case .allocate:
            let a: Allocation
            if let existing = allocations[client] {
                a = existing
            } else {
                a = Allocation(relay: network.bind(SocketAddress(address, port: 0)))
                allocations[client] = a
                counters.allocations += 1
                a.relay.start(screen: nil) { [weak self, weak a] bytes, from in
                    guard let self, let a else { return }
                    self.fromPeer(bytes, from: from, allocation: a, client: client)
                }
            }
            r.appendXORAddress(STUNMessage.AttributeType.xorRelayedAddress, a.relay.address)
            r.appendXORAddress(STUNMessage.AttributeType.xorMappedAddress, client)
            r.appendUInt32(STUNMessage.AttributeType.lifetime, 600)
        case .refresh:
            guard let a = allocations[client] else { return mismatch(m, client) }
            counters.refreshes += 1
            let lifetime = m.uint32(STUNMessage.AttributeType.lifetime) ?? 600
            if lifetime == 0 {
                a.relay.close()
                allocations[client] = nil
            }
            r.appendUInt32(STUNMessage.AttributeType.lifetime, lifetime)
        case .createPermission:
            guard let a = allocations[client] else { return mismatch(m, client) }
            for peer in (try? m.xorAddresses(STUNMessage.AttributeType.xorPeerAddress)) ?? [] {
                a.permissions.insert(SocketAddress(peer, port: 0))
            }
            counters.permissions += 1
        case .channelBind:
            guard let a = allocations[client], let n = m.value(STUNMessage.AttributeType.channelNumber), n.count >= 2,
                let peer = try? m.xorAddress(STUNMessage.AttributeType.xorPeerAddress)
            else { return mismatch(m, client) }
            a.channels[UInt16(n[0]) << 8 | UInt16(n[1])] = peer
            a.permissions.insert(SocketAddress(peer, port: 0))
            counters.channelBinds += 1
        default:
            return mismatch(m, client)
        }
        port.send(r.encode(integrity: key, fingerprint: true), to: client)
    }

    /// A 437 (no allocation) or 400 answer, signed.
    private func mismatch(_ m: STUNMessage, _ client: SocketAddress) {
        var r = STUNMessage(method: m.method, class: .errorResponse, transactionID: m.transactionID)
        r.appendErrorCode(allocations[client] == nil ? 437 : 400, reason: "Refused")
        counters.refused += 1
        port.send(r.encode(integrity: key, fingerprint: true), to: client)
    }

    private func relay(_ data: [UInt8], from a: Allocation, to peer: SocketAddress) {
        guard a.permissions.contains(SocketAddress(peer, port: 0)) else {
            counters.dropped += 1
            return
        }
        counters.toPeers += 1
        a.relay.send(data, to: peer)
    }

    private func fromPeer(_ bytes: [UInt8], from peer: SocketAddress, allocation a: Allocation, client: SocketAddress) {
        guard a.permissions.contains(SocketAddress(peer, port: 0)) else {
            counters.dropped += 1
            return
        }
        counters.toClients += 1
        if let n = a.channel(for: peer) {
            port.send(TURNChannelData.encode(channel: n, data: bytes, padded: false), to: client)
        } else {
            var m = STUNMessage(method: .data, class: .indication)
            m.appendXORAddress(STUNMessage.AttributeType.xorPeerAddress, peer)
            m.attributes.append(.init(type: STUNMessage.AttributeType.data, value: bytes))
            port.send(m.encode(), to: client)
        }
    }

    /// Stops serving and releases every relayed address.
    package func close() {
        for a in allocations.values { a.relay.close() }
        allocations.removeAll()
        port.close()
    }
}

extension VirtualDatagramPort: ICEDatagramTransport {
    package var boundAddress: SocketAddress? { address }
    package var family: SocketAddress.Family { address.family }
    package var isDualStack: Bool { false }

    /// Sends from the port's one address (`source` names no other on a virtual host).
    @discardableResult
    package func send(_ bytes: UnsafeRawBufferPointer, to destination: SocketAddress, from source: SocketAddress?) -> Bool {
        send(Array(bytes), to: destination)
    }

    package func routeSource(toward destination: SocketAddress) -> SocketAddress? { address }

    package func startReceiving(
        _ receive: @escaping @Sendable (_ bytes: UnsafeRawBufferPointer, _ from: SocketAddress, _ to: SocketAddress?) -> Void
    ) {
        let local = address
        start(screen: nil) { bytes, from in bytes.withUnsafeBytes { receive($0, from, local) } }
    }

    package func stopReceiving() { start(screen: nil) { _, _ in } }
}
