// A rendezvous node: friends register where they are (the endpoint the node sees) and their
// status, look up each other's endpoints, and relay Noise packets when no direct path works.
// The node sees public keys and endpoints, never a session key: relayed packets stay encrypted
// end to end. Run it with `revue-node --rendezvous`, or in process for tests.
internal import MediaCore

/// A rendezvous node on one UDP socket. Main actor (datagrams hop there); O(1) per datagram.
@MainActor
public final class RendezvousNode {
    private struct Entry {
        var endpoint: SocketAddress
        var status: UInt8
        var lastSeen: Double
        var timestamp: UInt64
    }

    private let socket: SessionSocket
    private let identity = KeyPair()
    private var macKeys: [[UInt8]: [UInt8]] = [:]
    private var entries: [[UInt8]: Entry] = [:]
    private var byEndpoint: [SocketAddress: [UInt8]] = [:]

    /// Datagrams forwarded by the relay so far.
    public private(set) var relayedPackets = 0
    /// Datagrams dropped as malformed or from unregistered senders.
    public private(set) var droppedPackets = 0
    /// Registrations refused (unknown node key, bad MAC, replayed timestamp).
    public private(set) var refusedRegistrations = 0
    /// Registrations older than this are forgotten (seconds).
    public var expiry: Double = 10

    /// The UDP port the node listens on.
    public var port: UInt16 { socket.localPort }

    /// Binds the node's socket (`port` 0 picks one) and starts serving.
    public init(host: String = "0.0.0.0", port: UInt16 = 0) throws(RevueError) {
        socket = try SessionSocket(host: host, port: port)
        socket.start { [weak self] bytes, from in
            MainActor.assumeIsolated { self?.handle(bytes, from: from) }
        }
    }

    /// Closes the socket.
    public func stop() { socket.close() }

    private func handle(_ bytes: [UInt8], from: SocketAddress) {
        var r = ByteReader(bytes, offset: 1)
        guard let first = bytes.first, let type = PacketType(rawValue: first), r.u8() == revueProtocolVersion else {
            droppedPackets += 1
            return
        }
        let now = monotonicNow()
        switch type {
        case .rendezvousRegister:
            guard bytes.count == RendezvousAuth.registerLength, let key = r.take(32), let status = r.u8(),
                  let timestamp = r.u64(), let mac = r.take(16) else { droppedPackets += 1; return }
            if macKeys[key] == nil {
                if macKeys.count > 100_000 { macKeys.removeAll() }
                macKeys[key] = RendezvousAuth.key(secret: identity.secret, peerPublic: key)
            }
            var accepted: UInt8 = 0
            if let k = macKeys[key], Sodium.equal(Sodium.keyedBlake2b(key: k, Array(bytes[0..<43])), mac),
               timestamp > entries[key]?.timestamp ?? 0 {
                if let old = entries[key], old.endpoint != from { byEndpoint[old.endpoint] = nil }
                entries[key] = Entry(endpoint: from, status: status, lastSeen: now, timestamp: timestamp)
                byEndpoint[from] = key
                accepted = 1
            } else {
                refusedRegistrations += 1
            }
            var w = ByteWriter()
            w.u8(PacketType.rendezvousRegistered.rawValue)
            w.u8(revueProtocolVersion)
            w.u8(accepted)
            w.u32(from.ip)
            w.u16(from.port)
            w.append(identity.publicKey)
            socket.send(w.bytes, to: from)
        case .rendezvousLookup:
            guard let key = r.take(32) else { droppedPackets += 1; return }
            var w = ByteWriter()
            w.u8(PacketType.rendezvousLookupReply.rawValue)
            w.u8(revueProtocolVersion)
            w.append(key)
            if let e = entries[key], now - e.lastSeen <= expiry {
                w.u8(1)
                w.u32(e.endpoint.ip)
                w.u16(e.endpoint.port)
                w.u8(e.status)
                w.u16(UInt16(min(65_535, now - e.lastSeen)))
            } else {
                w.u8(0); w.u32(0); w.u16(0); w.u8(0); w.u16(0)
            }
            socket.send(w.bytes, to: from)
        case .relaySend:
            guard let target = r.take(32), let source = byEndpoint[from], let e = entries[target],
                  now - e.lastSeen <= expiry, r.remaining > 0 else { droppedPackets += 1; return }
            var w = ByteWriter(capacity: bytes.count)
            w.u8(PacketType.relayDeliver.rawValue)
            w.u8(revueProtocolVersion)
            w.append(source)
            w.append(r.rest())
            socket.send(w.bytes, to: e.endpoint)
            relayedPackets += 1
        default:
            droppedPackets += 1
        }
    }
}
