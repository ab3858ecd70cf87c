// The session's UDP socket (IPv4 or IPv6): MediaCore's `UDPSocket`, nonblocking, read on a private
// dispatch queue; datagrams hop to the main actor in arrival order.
import Dispatch
internal import MediaCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One bound UDP socket (IPv4, or IPv6 only) of a Revue instance (or of a rendezvous node, or the LAN discovery
/// socket). `send` and `close` are called on the main actor; received datagrams are read on a
/// private queue and handed to `onReceive` on the main queue. `close()` (or deinit) cancels the read
/// source, whose cancel handler closes the descriptor, so no read ever runs on a closed one.
/// Sendable: `source` and `closed` are used only on the main actor (and in deinit); the read queue uses only the
/// `let` socket and the atomic backlog, and closes the descriptor itself, in the cancel handler.
final class SessionSocket: @unchecked Sendable {
    private let socket: UDPSocket
    /// The bound port.
    let localPort: UInt16
    /// The family of the bound address: an instance speaks IPv4 or IPv6, not both.
    let family: SocketAddress.Family
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
        family = bindAddress.family
        var options = UDPSocket.Options()
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
    /// and drops those it returns false for.
    func start(
        screen: (@Sendable (UnsafeRawBufferPointer, SocketAddress) -> Bool)? = nil,
        onReceive: @escaping @Sendable ([UInt8], SocketAddress) -> Void
    ) {
        let socket = self.socket
        let backlog = self.backlog
        let source = DispatchSource.makeReadSource(fileDescriptor: socket.descriptor, queue: queue)
        source.setEventHandler {
            var buffer = [UInt8](repeating: 0, count: 2048)
            // Up to 64 datagrams hop to the main queue together (one block, not one each).
            var batch: [([UInt8], SocketAddress)] = []
            func flush() {
                guard !batch.isEmpty else { return }
                let items = batch
                batch = []
                DispatchQueue.main.async {
                    backlog.queued.subtract(items.count, ordering: .relaxed)
                    for (data, address) in items { onReceive(data, address) }
                }
            }
            while true {
                let received = buffer.withUnsafeMutableBytes { b in
                    Result { () throws(SocketError) in try socket.receive(into: b) }
                }
                guard case .success(let r) = received else { break }  // wouldBlock: drained
                guard let address = r.source else { continue }
                if let screen, !buffer.withUnsafeBytes({ screen(UnsafeRawBufferPointer(rebasing: $0[0..<r.count]), address) }) {
                    continue
                }
                guard backlog.queued.add(1, ordering: .relaxed).newValue <= Self.maxQueued else {
                    backlog.queued.subtract(1, ordering: .relaxed)
                    backlog.drops.add(1, ordering: .relaxed)
                    continue
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

    /// Sends one datagram; failures (no route, buffer full, closed, another address family) are
    /// ignored like a lost packet.
    @discardableResult
    func send(_ bytes: [UInt8], to address: SocketAddress) -> Bool {
        guard !closed, address.family == family else { return false }
        return bytes.withUnsafeBytes { b in (try? socket.send(b, to: address)) == bytes.count }
    }

    /// Sends from the read queue (a `screen` answering); ignored failures as `send`. The read
    /// handler never runs after `close`, so no closed check is needed.
    func sendFromReadQueue(_ bytes: [UInt8], to address: SocketAddress) {
        guard address.family == family else { return }
        _ = bytes.withUnsafeBytes { b in try? socket.send(b, to: address) }
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
