// What the ICE agent needs of its datagram endpoint: send (naming the source address when the
// endpoint has several), say which families it carries, and hand over what arrives. Production
// uses the call's UDP socket through `ICESocketTransport`; tests hand the agent an endpoint of a
// simulated network and drive it on a simulated clock.
import Dispatch
import MediaBase

/// A datagram endpoint an `ICEAgent` checks, answers and gathers through. Thread rule: every
/// method is called on the agent's context (its queue, or its scheduler's thread); `receive`
/// handlers run there too. Cost: one call per control datagram (checks, answers, server
/// requests), never per media packet.
package protocol ICEDatagramTransport: AnyObject, Sendable {
    /// The address the endpoint is bound to (a wildcard address when bound to every interface;
    /// nil when unknown).
    var boundAddress: SocketAddress? { get }
    /// The endpoint's own address family.
    var family: SocketAddress.Family { get }
    /// An IPv6 endpoint that carries IPv4 too.
    var isDualStack: Bool { get }
    /// Whether datagrams to and from addresses of `family` travel on this endpoint.
    func carries(_ family: SocketAddress.Family) -> Bool
    /// Sends one datagram to `destination`, from `source` when given (a wildcard-bound endpoint
    /// on a host with several addresses); false when it could not leave (counted like a loss).
    @discardableResult
    func send(_ bytes: UnsafeRawBufferPointer, to destination: SocketAddress, from source: SocketAddress?) -> Bool
    /// The local address the host would send from toward `destination` (nil: unknown).
    func routeSource(toward destination: SocketAddress) -> SocketAddress?
    /// Starts handing each arriving datagram to `receive` (bytes valid for the call only, the
    /// sender, and the local address it arrived at when known), on the agent's context, until
    /// `stopReceiving`.
    func startReceiving(
        _ receive: @escaping @Sendable (_ bytes: UnsafeRawBufferPointer, _ from: SocketAddress, _ to: SocketAddress?) -> Void)
    /// Stops the receiving of `startReceiving`; when it returns, no handler call follows.
    func stopReceiving()
}

/// The production transport: a bound `UDPSocket`, read by a dispatch read source on the agent's
/// queue (`recvmsg` with the destination address, up to 64 datagrams per wake-up). Thread rule:
/// the agent's queue only. Cost: as the socket calls it wraps, plus one existential call.
/// Sendable: `readSource` and `readBuffer` are used only on `queue`; the rest are `let`s.
package final class ICESocketTransport: ICEDatagramTransport, @unchecked Sendable {
    /// The socket every check and all media use.
    package let socket: UDPSocket
    private let queue: DispatchQueue
    private var readSource: DispatchSourceRead?
    private var readBuffer = [UInt8](repeating: 0, count: 65536)

    /// `socket` read and written on `queue` (the agent's).
    package init(socket: UDPSocket, queue: DispatchQueue) {
        self.socket = socket
        self.queue = queue
    }

    deinit { readSource?.cancel() }

    package var boundAddress: SocketAddress? { try? socket.localAddress() }
    package var family: SocketAddress.Family { socket.family }
    package var isDualStack: Bool { socket.isDualStack }
    package func carries(_ family: SocketAddress.Family) -> Bool { socket.carries(family) }

    @discardableResult
    package func send(_ bytes: UnsafeRawBufferPointer, to destination: SocketAddress, from source: SocketAddress?) -> Bool {
        (try? socket.send(bytes, to: destination, from: source)) != nil
    }

    package func routeSource(toward destination: SocketAddress) -> SocketAddress? {
        socket.routeSource(toward: destination)
    }

    package func startReceiving(
        _ receive: @escaping @Sendable (_ bytes: UnsafeRawBufferPointer, _ from: SocketAddress, _ to: SocketAddress?) -> Void
    ) {
        guard readSource == nil else { return }
        let source = DispatchSource.makeReadSource(fileDescriptor: socket.descriptor, queue: queue)
        source.setEventHandler { [weak self] in self?.readAvailable(receive) }
        readSource = source
        source.resume()
    }

    package func stopReceiving() {
        readSource?.cancel()
        readSource = nil
    }

    private func readAvailable(_ receive: (UnsafeRawBufferPointer, SocketAddress, SocketAddress?) -> Void) {
        guard readSource != nil, socket.descriptor >= 0 else { return }
        for _ in 0..<64 {
            guard let r = try? readBuffer.withUnsafeMutableBytes({ try socket.receiveWithDestination(into: $0, wait: false) }),
                r.count > 0
            else { return }
            guard let from = r.source else { continue }
            readBuffer.withUnsafeBytes { receive(UnsafeRawBufferPointer(rebasing: $0[0..<r.count]), from, r.destination) }
            guard readSource != nil else { return }
        }
    }
}
