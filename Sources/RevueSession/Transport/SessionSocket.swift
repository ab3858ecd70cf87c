// The session's UDP socket (IPv4, IPv6, or both): MediaCore's `UDPSocket`, nonblocking, read on a
// private dispatch queue; datagrams hop to the main actor in arrival order. Answers leave from the
// local address their peer last reached us at.
import Dispatch
internal import MediaCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One bound UDP socket of a Revue instance (or of a rendezvous node, or the LAN discovery socket):
/// IPv4, IPv6 only, or both (bound to "::"). `send` and `close` are called on the main actor;
/// received datagrams are read on a private queue and handed to `onReceive` on the main queue.
/// `close()` (or deinit) cancels the read source, whose cancel handler closes the descriptor, so no
/// read ever runs on a closed one.
///
/// On a host with several addresses, a datagram to a peer leaves from the local address that
/// peer's last datagram arrived at (`IP_PKTINFO`/`IPV6_PKTINFO`), not from whichever address the
/// kernel's route picks: a peer, NAT or firewall that sent to one of our addresses expects the
/// answer from it. Those local addresses are kept for at most `maxReplySources` peers.
///
/// Sendable: `source` and `closed` are used only on the main actor (and in deinit); the read queue
/// uses the `let` socket, the atomic backlog and its own `ReadContext`, and closes the descriptor
/// itself, in the cancel handler; `replySources` is a `Mutex`.
final class SessionSocket: DatagramPort, @unchecked Sendable {
    private let socket: UDPSocket
    /// The bound port.
    let localPort: UInt16
    /// Whether datagrams to and from addresses of `family` travel on this socket: its own family,
    /// and IPv4 too on a dual-stack socket (bound to "::").
    func carries(_ family: SocketAddress.Family) -> Bool { socket.carries(family) }
    /// Bound to "::": IPv6 and IPv4 on one socket.
    var isDualStack: Bool { socket.isDualStack }
    /// Per peer, the local address its last datagram arrived at (see the type's comment).
    private let replySources = ReplySources()
    /// Peers whose local address is kept at most; past it the oldest entry goes (a flood of
    /// spoofed sources costs the real peers their entry, which only means their answers take the
    /// kernel's route until their next datagram).
    static let maxReplySources = 1024
    /// The datagram the read queue is handling, so a `screen` answers from its local address.
    private let readContext = ReadContext()

    /// The local addresses answers leave from, per peer, in insertion order for eviction. Any
    /// thread; one uncontended lock per call.
    final class ReplySources: Sendable {
        private struct Table {
            var byPeer: [SocketAddress: SocketAddress] = [:]
            var order: [SocketAddress] = []
            var orderStart = 0
        }
        private let table = Mutex(Table())

        func record(_ local: SocketAddress, for peer: SocketAddress) {
            table.withLock { t in
                if t.byPeer.updateValue(local, forKey: peer) == nil { t.order.append(peer) }
                while t.byPeer.count > SessionSocket.maxReplySources, t.orderStart < t.order.count {
                    t.byPeer.removeValue(forKey: t.order[t.orderStart])
                    t.orderStart += 1
                }
                if t.orderStart >= SessionSocket.maxReplySources {
                    t.order.removeFirst(t.orderStart)
                    t.orderStart = 0
                }
            }
        }

        func local(for peer: SocketAddress) -> SocketAddress? { table.withLock { $0.byPeer[peer] } }

        var count: Int { table.withLock { $0.byPeer.count } }
    }

    /// What the read queue knows of the datagram in hand. Used only on the read queue.
    private final class ReadContext: @unchecked Sendable {
        // Safe: read and written only on the socket's read queue (its event handler and the
        // `screen` it calls synchronously).
        var destination: SocketAddress?
    }
    private let queue = DispatchQueue(label: "revue.udp")
    private var source: DispatchSourceRead?
    private var closed = false
    /// Datagrams handed to the main queue and not yet handled there; past `maxQueued` more are
    /// dropped at the read, so a flood cannot grow the main queue without bound.
    private let backlog = Backlog()
    /// Most datagrams waiting for the main actor at once (about 8 MB at the 2048-byte read size).
    static let maxQueued = 4096
    /// Datagrams dropped so far because `maxQueued` were waiting. Any thread.
    var droppedOverload: Int { backlog.drops.load(ordering: .relaxed) }

    /// The counters shared with the read handler.
    private final class Backlog: Sendable {
        let queued = Atomic<Int>(0)
        let drops = Atomic<Int>(0)
    }

    /// Creates and binds the socket (4 MiB receive buffer, broadcast allowed); `reusePort` lets
    /// several instances on one host share the LAN discovery port. An IPv6 host ("::" for every
    /// interface) makes an IPv6-only socket. Throws `.invalidConfiguration` for a host that is not
    /// an address or resolvable name, `.socket` with the kernel's reason otherwise.
    init(host: String, port: UInt16, reusePort: Bool = false) throws(RevueError) {
        guard let bindAddress = SocketAddress.sessionAddress(host: host, port: port) else {
            throw RevueError(.invalidConfiguration, "bind host '\(host)' is not an IPv4 or IPv6 address or resolvable name")
        }
        var options = UDPSocket.Options()
        options.dualStack = bindAddress.family == .ipv6 && bindAddress.isUnspecified
        options.receiveDestinations = true
        options.nonBlocking = true
        // Room for about 160 ms of a 50,000/s handshake flood (the kernel doubles the request up
        // to net.core.rmem_max): a reader descheduled that long loses nothing.
        options.receiveBufferSize = 4 << 20
        options.reuseAddress = reusePort
        do {
            let s = try UDPSocket(family: bindAddress.family, options: options)
            if bindAddress.family == .ipv4 { try s.setBroadcast(true) }
            if reusePort { try s.setReusePort(true) }
            try s.bind(to: bindAddress)
            socket = s
            localPort = try s.localAddress().port
        } catch {
            throw RevueError(.socket, "\(error)")
        }
    }

    /// Joins an IPv4 multicast group on the default interface, with loopback of our own sends so
    /// peers on this host hear each other, TTL 1. False when the host cannot.
    @discardableResult
    func joinMulticast(group: SocketAddress) -> Bool {
        (try? socket.joinMulticastGroup(group, loopback: true, timeToLive: 1)) != nil
    }

    /// Starts reading; `onReceive` runs on the main queue for each datagram, in arrival order
    /// (datagrams longer than 2048 bytes arrive cut to 2048: none of the session's are), up to 64
    /// per main-queue block. `screen`, when given, runs first on the read queue for every datagram
    /// and drops those it returns false for. A datagram that passed waits for at most 64 more
    /// reads before it hops: under a flood the screen drops, the socket never runs dry, and the
    /// few that pass (a friend's handshake) would otherwise wait for the flood to end.
    func start(
        screen: (@Sendable (UnsafeRawBufferPointer, SocketAddress) -> Bool)? = nil,
        onReceive: @escaping @Sendable ([UInt8], SocketAddress) -> Void
    ) {
        let socket = self.socket
        let backlog = self.backlog
        let replySources = self.replySources
        let context = readContext
        let source = DispatchSource.makeReadSource(fileDescriptor: socket.descriptor, queue: queue)
        source.setEventHandler {
            var buffer = [UInt8](repeating: 0, count: 2048)
            // Up to 64 datagrams hop to the main queue together (one block, not one each).
            var batch: [([UInt8], SocketAddress)] = []
            // Datagrams read since the oldest one in `batch`.
            var heldFor = 0
            func flush() {
                guard !batch.isEmpty else { return }
                let items = batch
                batch = []
                heldFor = 0
                DispatchQueue.main.async {
                    backlog.queued.subtract(items.count, ordering: .relaxed)
                    for (data, address) in items { onReceive(data, address) }
                }
            }
            while true {
                let received = buffer.withUnsafeMutableBytes { b in
                    Result { () throws(SocketError) in try socket.receiveWithDestination(into: b) }
                }
                guard case .success(let r) = received else { break }  // wouldBlock: drained
                if !batch.isEmpty {
                    heldFor += 1
                    if heldFor >= 64 { flush() }
                }
                guard let address = r.source else { continue }
                context.destination = r.destination
                if let screen, !buffer.withUnsafeBytes({ screen(UnsafeRawBufferPointer(rebasing: $0[0..<r.count]), address) }) {
                    continue
                }
                guard backlog.queued.add(1, ordering: .relaxed).newValue <= Self.maxQueued else {
                    backlog.queued.subtract(1, ordering: .relaxed)
                    backlog.drops.add(1, ordering: .relaxed)
                    continue
                }
                if let local = r.destination, !local.isMulticastOrBroadcast {
                    replySources.record(local, for: address)
                }
                batch.append((Array(buffer[0..<r.count]), address))
                if batch.count == 64 { flush() }
            }
            flush()
        }
        source.setCancelHandler { socket.close() }
        self.source = source
        source.resume()
    }

    /// Sends one datagram, from the local address `address` last reached us at; failures (no
    /// route, buffer full, closed, another address family) are ignored like a lost packet.
    @discardableResult
    func send(_ bytes: [UInt8], to address: SocketAddress) -> Bool {
        guard !closed, socket.carries(address.family) else { return false }
        let local = replySources.local(for: address)
        return send(bytes, to: address, from: local) == bytes.count
    }

    /// Sends from the read queue (a `screen` answering the datagram in hand, from the local
    /// address it arrived at); ignored failures as `send`. The read handler never runs after
    /// `close`, so no closed check is needed.
    func sendFromReceiveContext(_ bytes: [UInt8], to address: SocketAddress) {
        guard socket.carries(address.family) else { return }
        let local = readContext.destination.flatMap { $0.isMulticastOrBroadcast ? nil : $0 }
        send(bytes, to: address, from: local)
    }

    /// One datagram from `local` (nil, or no longer ours: the kernel's choice).
    @discardableResult
    private func send(_ bytes: [UInt8], to address: SocketAddress, from local: SocketAddress?) -> Int? {
        bytes.withUnsafeBytes { b in try? socket.send(b, to: address, from: local) }
    }

    /// Stops reading and closes the descriptor (asynchronously, on the read queue).
    func close() {
        guard !closed else { return }
        closed = true
        if let source {
            source.cancel()
            self.source = nil
        } else {
            socket.close()
        }
    }

    deinit { close() }
}
