// What the session layer needs of a UDP socket, so that the same code runs on a real socket and
// on an endpoint of an in-process simulated network.
import MediaBase

/// A bound datagram endpoint. Thread rule: `send`, `start` and `close` are called from the
/// owner's context; `sendFromReceiveContext` only from inside `screen`. Received datagrams reach
/// `onReceive` on the owner's context (the main queue for a real session socket, the simulated
/// clock's loop for a virtual one), in arrival order.
package protocol DatagramPort: AnyObject, Sendable {
    /// The bound port.
    var localPort: UInt16 { get }
    /// Whether datagrams to and from addresses of `family` travel on this endpoint.
    func carries(_ family: SocketAddress.Family) -> Bool
    /// Sends one datagram; false when it could not leave (a failure counts like a lost packet).
    @discardableResult
    func send(_ bytes: [UInt8], to address: SocketAddress) -> Bool
    /// Sends an answer from inside `screen`, for the datagram being screened.
    func sendFromReceiveContext(_ bytes: [UInt8], to address: SocketAddress)
    /// Starts receiving. `screen`, when given, sees every datagram first and drops those it
    /// returns false for, before they reach the owner's context.
    func start(
        screen: (@Sendable (UnsafeRawBufferPointer, SocketAddress) -> Bool)?,
        onReceive: @escaping @Sendable ([UInt8], SocketAddress) -> Void)
    /// Datagrams dropped because the owner's context fell too far behind.
    var droppedOverload: Int { get }
    /// Stops receiving and releases the endpoint; idempotent.
    func close()
}
