import MediaBase
import Synchronization

/// A `PacketSink` that sends packets over a `UDPSocket` in `sendmmsg` batches: `write` copies the
/// packet into a preallocated slot; a full batch or `flush()` (once per frame) sends it in one
/// system call. Errors (`ENOBUFS`, `EAGAIN` on a non-blocking socket, `ECONNREFUSED` after an ICMP
/// unreachable, ...) drop the packet and are counted; nothing throws or traps.
///
/// Thread rule: `write`/`flush` from one pipeline thread; `statistics` from any thread.
/// Cost: a memcpy per packet and one system call per batch; no allocation after `init`.
/// Sendable: the batch and slots are used only by the one sending thread (hand-overs ordered by thread join);
/// `counters` is a Mutex; the rest are `let`s.
public final class UDPPacketSink: PacketSink, @unchecked Sendable {
    /// Counters since creation.
    public struct Statistics: Sendable, Equatable {
        /// Datagrams the kernel accepted.
        public var packetsSent = 0
        /// Bytes in those datagrams.
        public var bytesSent = 0
        /// Datagrams dropped because a send failed.
        public var packetsDropped = 0
        /// Datagrams dropped because they were larger than `maxPacketSize`.
        public var oversizePackets = 0
        /// `sendmmsg` calls made.
        public var batchesSent = 0
        /// The `errno` of the last failed send, if any.
        public var lastError: SocketErrno? = nil
    }

    /// The socket packets leave through.
    public let socket: UDPSocket
    /// Where they go; nil when the socket is connected.
    public let destination: SocketAddress?
    /// Largest packet accepted.
    public let maxPacketSize: Int

    private let batch: UDPSendBatch
    private let slots: UnsafeMutableRawPointer
    private let counters = Mutex(Statistics())

    /// Sends through `socket` to `destination` (nil when connected) in batches of up to
    /// `batchCapacity` packets of at most `maxPacketSize` bytes.
    public init(socket: UDPSocket, destination: SocketAddress? = nil, batchCapacity: Int = 64, maxPacketSize: Int = 2048) {
        precondition(
            destination != nil || socket.connectedAddress != nil,
            "a UDP sink needs a destination or a connected socket")
        precondition(maxPacketSize > 0, "packets have at least one byte")
        self.socket = socket
        self.destination = destination
        self.maxPacketSize = maxPacketSize
        batch = UDPSendBatch(capacity: batchCapacity)
        slots = .allocate(byteCount: batchCapacity * maxPacketSize, alignment: 64)
    }

    deinit { slots.deallocate() }

    /// Copies the packet into the batch; sends the batch when it is full.
    public func write(_ packet: RawSpan) {
        packet.withUnsafeBytes { packet in
            guard packet.count <= maxPacketSize else {
                counters.withLock { $0.oversizePackets += 1 }
                return
            }
            let slot = slots + batch.count * maxPacketSize
            if let base = packet.baseAddress { slot.copyMemory(from: base, byteCount: packet.count) }
            batch.append(UnsafeRawBufferPointer(start: slot, count: packet.count), to: destination)
            if batch.isFull { flush() }
        }
    }

    /// Sends the pending packets in one `sendmmsg` (nothing when empty).
    public func flush() {
        guard batch.count > 0 else { return }
        let result = batch.send(on: socket)
        counters.withLock { s in
            s.batchesSent += 1
            s.packetsSent += result.sent
            s.bytesSent += result.bytesSent
            s.packetsDropped += result.dropped
            if let error = result.lastError { s.lastError = error.code }
        }
    }

    /// A snapshot of the counters.
    public var statistics: Statistics { counters.withLock { $0 } }
}
