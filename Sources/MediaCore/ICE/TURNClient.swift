// A TURN client (RFC 8656): one allocation on one server, over UDP (sharing the agent's socket)
// or TCP (its own connection), with long-term credentials, permissions, channels and refreshes.
import Dispatch
import Foundation
import Synchronization

/// One TURN allocation. Thread rule: every method from any thread; callbacks run on `queue`
/// (`onPeerData` for TCP runs on the connection's reader thread). Cost: control traffic allocates;
/// `sendChannelData` does not.
package final class TURNClient: TURNChannelSender, @unchecked Sendable {
    /// Where the allocation stands.
    package enum State: Sendable, Equatable {
        case idle, allocating
        case allocated(relayed: SocketAddress, mapped: SocketAddress)
        case failed(String)
        case closed
    }

    package let server: ICEServer

    /// `socket`: for a UDP server, the socket the allocation is made from (the caller passes every
    /// datagram from `server.address` to `handleDatagram`); for TCP, unused (the client connects).
    package init(server: ICEServer, socket: UDPSocket, queue: DispatchQueue) {
        self.server = server
    }

    /// Called on `queue` when `state` changes.
    package var onStateChange: (@Sendable (State) -> Void)?
    /// A peer's data relayed to us (Data indication or ChannelData), with the peer's address.
    package var onPeerData: (@Sendable (_ peer: SocketAddress, _ payload: UnsafeRawBufferPointer) -> Void)?

    package var state: State { .idle }

    /// Starts the Allocate transaction (401 → long-term credentials → allocation; refreshed
    /// before it expires).
    package func allocate() {}

    /// Installs (and keeps refreshing) a permission for the peer's IP.
    package func createPermission(_ peer: SocketAddress) {}

    /// Binds a channel to the peer (also installs the permission) and returns its number at once
    /// (0x4000...0x4FFF); nil when all are used. Data for it goes as Send indications until the
    /// server confirms the binding.
    package func bindChannel(_ peer: SocketAddress) -> UInt16? { nil }

    /// Sends a peer a datagram: ChannelData when its channel is confirmed, else a Send indication.
    @discardableResult
    package func send(_ payload: [UInt8], to peer: SocketAddress) -> Bool { false }

    package func sendChannelData(_ payload: UnsafeRawBufferPointer, channel: UInt16) -> Bool { false }

    /// A datagram that arrived on the shared UDP socket; true when it was this server's and is
    /// consumed (responses, Data indications, ChannelData: peer data goes to `onPeerData`).
    package func handleDatagram(_ bytes: UnsafeRawBufferPointer, from: SocketAddress) -> Bool { false }

    /// Deletes the allocation (Refresh with lifetime 0) and stops every timer. Idempotent.
    package func close() {}
}
