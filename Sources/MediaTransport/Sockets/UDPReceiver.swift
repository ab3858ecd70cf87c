import Glibc
import Synchronization

/// Receives datagrams on its own thread with `recvmmsg` batches and hands each one (bytes, source,
/// receive time) to a handler, synchronously on that thread. The thread waits in `poll` with a short
/// timeout, so `stop()` returns promptly; `stop()` joins the thread.
///
/// Thread rule: `start()`/`stop()` from one controlling thread; the handler runs on the receiver's
/// thread and must not block for long; `statistics` from any thread.
/// Cost: one `recvmmsg` per batch of up to `batchCapacity` datagrams; no allocation per datagram.
/// Sendable: `thread` is touched only by `start`/`stop`/`isRunning` (one controlling thread) and deinit; `worker`
/// is a `let` whose counters are a Mutex.
public final class UDPReceiver: @unchecked Sendable {
    /// Counters since creation.
    public struct Statistics: Sendable, Equatable {
        /// Datagrams handed to the handler.
        public var datagrams = 0
        /// Bytes in them (truncated datagrams count what was kept).
        public var bytes = 0
        /// Datagrams longer than the buffer size (`MSG_TRUNC`); they are still handed over, flagged.
        public var truncated = 0
        /// `recvmmsg` calls that returned data.
        public var batches = 0
        /// Failed receive or poll calls (for example `ECONNREFUSED` after an ICMP unreachable).
        public var errors = 0
        /// The last failure.
        public var lastError: SocketError? = nil
    }

    /// The socket datagrams come from.
    public var socket: UDPSocket { worker.socket }
    /// How long the thread waits in `poll` before checking for `stop()`.
    public var pollIntervalMilliseconds: Int { worker.pollIntervalMilliseconds }

    private let worker: Worker
    private var thread: TransportThread?

    /// Prepares a receiver on `socket` with a ring of `batchCapacity` buffers of `bufferSize` bytes.
    /// `handler` is called on the receiver's thread for every datagram; the datagram's bytes are
    /// valid only during the call.
    public init(
        socket: UDPSocket, batchCapacity: Int = 64, bufferSize: Int = 2048,
        pollIntervalMilliseconds: Int = 50, handler: @escaping @Sendable (UDPDatagram) -> Void
    ) {
        precondition(pollIntervalMilliseconds > 0, "the poll interval must be positive")
        worker = Worker(
            socket: socket, batch: UDPReceiveBatch(capacity: batchCapacity, bufferSize: bufferSize),
            pollIntervalMilliseconds: pollIntervalMilliseconds, handler: handler)
    }

    /// Releasing a running receiver stops and joins its thread.
    deinit { stop() }

    /// True between `start()` and `stop()`.
    public var isRunning: Bool { thread != nil }

    /// Starts the receiving thread. Calling it twice traps.
    public func start() {
        precondition(thread == nil, "UDPReceiver.start() called twice")
        worker.stopping.store(false, ordering: .releasing)
        // The thread owns the worker, never the receiver, so releasing the receiver stops it.
        thread = TransportThread(name: "UDPReceiver") { [worker] in worker.run() }
    }

    /// Asks the thread to stop and joins it; returns within about one poll interval plus the
    /// handler's time for the current batch. Idempotent.
    public func stop() {
        worker.stopping.store(true, ordering: .releasing)
        thread?.join()
        thread = nil
    }

    /// A snapshot of the counters.
    public var statistics: Statistics { worker.counters.withLock { $0 } }

    /// What the receiving thread owns.
    /// Sendable: all `let`s; the batch and handler are used only on the receiving thread; `stopping` is atomic and
    /// `counters` a Mutex.
    private final class Worker: @unchecked Sendable {
        let socket: UDPSocket
        let batch: UDPReceiveBatch
        let pollIntervalMilliseconds: Int
        let handler: (UDPDatagram) -> Void
        let stopping = Atomic<Bool>(false)
        let counters = Mutex(Statistics())

        init(
            socket: UDPSocket, batch: UDPReceiveBatch, pollIntervalMilliseconds: Int,
            handler: @escaping @Sendable (UDPDatagram) -> Void
        ) {
            self.socket = socket
            self.batch = batch
            self.pollIntervalMilliseconds = pollIntervalMilliseconds
            self.handler = handler
        }

        func run() {
            while !stopping.load(ordering: .acquiring) {
                let ready: Bool
                do {
                    ready = try socket.waitUntilReadable(timeoutMilliseconds: pollIntervalMilliseconds)
                } catch {
                    record(error)
                    usleep(UInt32(pollIntervalMilliseconds * 1000))
                    continue
                }
                guard ready else { continue }
                let count: Int
                do {
                    count = try batch.receive(from: socket, wait: false)
                } catch {
                    record(error)
                    continue
                }
                guard count > 0 else { continue }
                var bytes = 0, truncated = 0
                for i in 0..<count {
                    let datagram = batch[i]
                    bytes += datagram.bytes.count
                    if datagram.isTruncated { truncated += 1 }
                    handler(datagram)
                }
                counters.withLock { s in
                    s.batches += 1
                    s.datagrams += count
                    s.bytes += bytes
                    s.truncated += truncated
                }
            }
        }

        private func record(_ error: SocketError) {
            counters.withLock { s in
                s.errors += 1
                s.lastError = error
            }
        }
    }
}
