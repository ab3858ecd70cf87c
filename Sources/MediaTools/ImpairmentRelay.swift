import Glibc
import MediaCore
import Synchronization

/// A bidirectional UDP relay that impairs traffic like a bad network (the kernel here has no
/// netem): datagrams arriving on `listen` go to `to`; replies from `to` (RTCP feedback, for
/// example) go back to the last address that sent on `listen`. Each direction has its own seeded
/// `ImpairmentModel`, so a run can be repeated. Delayed packets wait in a preallocated pool,
/// ordered by a min-heap on the relay's own thread (no timer per packet).
///
/// Thread rule: `start()`/`stop()` from one controlling thread; the relay works on its own thread;
/// `statistics` from any thread. Cost: one thread, two sockets, `2 x maxQueuedPackets x
/// maxPacketSize` bytes of pool; per packet a copy, a heap insertion and removal; no allocation.
/// Sendable: `thread` is touched only by `start`/`stop` (one controlling thread) and deinit; `engine` is a `let`;
/// `update` and `statistics` go through the engine's Mutexes.
package final class ImpairmentRelay: @unchecked Sendable {
    /// Counters of one direction.
    package struct DirectionStatistics: Sendable, Equatable {
        /// Datagrams received from this direction's source.
        package var received = 0
        /// Bytes in them.
        package var bytesReceived = 0
        /// Datagrams sent on (copies included).
        package var forwarded = 0
        /// Bytes in them.
        package var bytesForwarded = 0
        /// Dropped by random or burst loss.
        package var droppedByLoss = 0
        /// Dropped by the rate limiter's full queue.
        package var droppedByQueue = 0
        /// Dropped because `maxQueuedPackets` were already waiting.
        package var droppedByOverflow = 0
        /// Replies dropped because no sender has been seen yet to return them to.
        package var droppedWithoutPeer = 0
        /// Extra copies sent.
        package var duplicated = 0
        /// Packets held back so later ones overtake them.
        package var reordered = 0
        /// Datagrams longer than `maxPacketSize` (relayed truncated).
        package var truncated = 0
        /// Datagrams the kernel refused to send (dropped).
        package var sendErrors = 0
        /// Failed receive calls (for example `ECONNREFUSED` after an ICMP unreachable).
        package var receiveErrors = 0
        /// Datagrams waiting for their delivery time now.
        package var queued = 0
    }

    /// Most RTP streams per direction with their own loss model under
    /// `Configuration.lossPerStream`; later streams share the direction's model (a stranger
    /// sending many SSRCs cannot grow the relay's state).
    package static let maxLossStreams = 16

    /// Counters of both directions.
    package struct Statistics: Sendable, Equatable {
        /// From the listen side to `to`.
        package var forward = DirectionStatistics()
        /// From `to` back to the last sender.
        package var reverse = DirectionStatistics()
    }

    /// The configuration the relay was made with (`update(configuration:)` changes only the
    /// impairment settings in use, not this value).
    package let configuration: Configuration
    /// The bound listen address (with the real port when the configuration asked for port 0).
    package let listenAddress: SocketAddress
    /// The local address packets to `to` leave from: where `to` sees them come from and replies to.
    package let upstreamAddress: SocketAddress

    private let engine: Engine
    private var thread: TransportThread?

    /// Binds the listen socket and connects the upstream socket to `configuration.to`; traps on
    /// invalid impairment settings (check `Settings.problem` for user input).
    package init(configuration: Configuration) throws(SocketError) {
        self.configuration = configuration
        var options = UDPSocket.Options()
        options.receiveBufferSize = 1 << 20
        options.sendBufferSize = 1 << 20
        let listenSocket = try UDPSocket(bindingTo: configuration.listen, options: options)
        let upstream = try UDPSocket(family: configuration.to.family, options: options)
        try upstream.connect(to: configuration.to)
        listenAddress = try listenSocket.localAddress()
        upstreamAddress = try upstream.localAddress()
        let forward = Lane(
            receiveOn: listenSocket, sendOn: upstream, settings: configuration.forward,
            seed: configuration.seed, configuration: configuration)
        let reverse = Lane(
            receiveOn: upstream, sendOn: listenSocket, settings: configuration.reverse,
            seed: Self.reverseSeed(configuration.seed), configuration: configuration)
        engine = Engine(forward: forward, reverse: reverse)
    }

    /// The reverse direction's seed, derived from the configuration's.
    static func reverseSeed(_ seed: UInt64) -> UInt64 { seed ^ 0x5EED_0F_2E7E_25E0 }

    /// Releasing a running relay stops and joins its thread.
    deinit { stop() }

    /// Starts relaying on the relay's thread. Calling it twice traps.
    package func start() {
        precondition(thread == nil, "ImpairmentRelay.start() called twice")
        engine.stopping.store(false, ordering: .releasing)
        // The thread owns the engine, never the relay, so releasing the relay stops it.
        thread = TransportThread(name: "ImpairmentRelay") { [engine] in engine.run() }
    }

    /// Stops and joins the relay's thread (within about 20 ms plus one batch). Packets still
    /// waiting for their delivery time stay queued: a later `start()` sends them late, releasing the
    /// relay discards them. Idempotent.
    package func stop() {
        engine.stopping.store(true, ordering: .releasing)
        thread?.join()
        thread = nil
    }

    /// Replaces both directions' impairment settings while the relay runs (a soak run cycles from
    /// clean to lossy to jittery and back). `configuration.listen`, `to`, `maxQueuedPackets` and
    /// `maxPacketSize` must be those the relay was made with (programmer error otherwise: traps),
    /// so do the settings' `problem`s. Packets already waiting keep their delivery times; counters
    /// keep counting across the change; the new models are seeded from `configuration.seed`.
    ///
    /// Thread rule: any thread. Cost: a lock; the relay thread swaps the models on its next loop
    /// (within about 20 ms).
    package func update(configuration new: Configuration) {
        precondition(
            new.listen == configuration.listen && new.to == configuration.to
                && new.maxQueuedPackets == configuration.maxQueuedPackets && new.maxPacketSize == configuration.maxPacketSize,
            "ImpairmentRelay.update(configuration:) can change only the impairment settings and seed")
        precondition(new.forward.problem == nil && new.reverse.problem == nil, "invalid impairment settings")
        engine.pending.withLock { $0 = new }
    }

    /// A snapshot of the counters (refreshed by the relay thread every loop, at least every 20 ms).
    package var statistics: Statistics { engine.published.withLock { $0 } }

    /// What the relay's thread owns: both lanes and the last sender seen on the listen side.
    /// Sendable: the lanes and `lastSource` are used only on the relay's thread; other threads use only `stopping`
    /// (atomic), `published` and `pending` (Mutexes).
    private final class Engine: @unchecked Sendable {
        static let maxWaitMilliseconds: UInt64 = 20

        let forwardLane: Lane
        let reverseLane: Lane
        let stopping = Atomic<Bool>(false)
        let published = Mutex(Statistics())
        /// Settings from `update(configuration:)` not yet applied.
        let pending = Mutex<Configuration?>(nil)
        var lastSource: SocketAddress?

        init(forward: Lane, reverse: Lane) {
            forwardLane = forward
            reverseLane = reverse
        }

        func run() {
            var fds = [
                pollfd(fd: forwardLane.input.descriptor, events: Int16(POLLIN), revents: 0),
                pollfd(fd: reverseLane.input.descriptor, events: Int16(POLLIN), revents: 0),
            ]
            while !stopping.load(ordering: .acquiring) {
                if let new = pending.withLock({ c in
                    defer { c = nil }; return c
                }) {
                    forwardLane.replaceModels(settings: new.forward, seed: new.seed)
                    reverseLane.replaceModels(settings: new.reverse, seed: ImpairmentRelay.reverseSeed(new.seed))
                }
                let now = MonotonicTime.now.nanoseconds
                forwardLane.deliverDue(now: now)
                reverseLane.deliverDue(now: now)
                publish()
                var waitMs = Self.maxWaitMilliseconds
                let due = min(forwardLane.nextDue ?? .max, reverseLane.nextDue ?? .max)
                if due != .max {
                    waitMs = min(waitMs, due <= now ? 0 : (due - now + 999_999) / 1_000_000)
                }
                fds[0].revents = 0
                fds[1].revents = 0
                let rc = poll(&fds, 2, Int32(waitMs))
                if rc <= 0 { continue }
                if fds[0].revents != 0 {
                    forwardLane.receive { datagram in
                        lastSource = datagram.source
                        return .connectedPeer
                    }
                }
                if fds[1].revents != 0 {
                    let peer = lastSource
                    reverseLane.receive { _ in peer.map { .address($0) } ?? .noPeer }
                }
            }
            publish()
        }

        private func publish() {
            let forward = forwardLane.snapshot
            let reverse = reverseLane.snapshot
            published.withLock { $0 = Statistics(forward: forward, reverse: reverse) }
        }
    }

    /// One direction: its sockets, model, pool of packet slots and schedule. Used only on the
    /// relay's thread.
    private final class Lane {
        struct Entry {
            var due: UInt64
            var order: UInt64
            var slot: Int32
            var length: Int32
            var destination: SocketAddress?

            func isBefore(_ other: Entry) -> Bool { due != other.due ? due < other.due : order < other.order }
        }

        let input: UDPSocket
        let output: UDPSocket
        /// The direction's model: every stage for most packets; all but loss for the streams in
        /// `streamLoss`.
        var model: ImpairmentModel
        /// Under `lossPerStream`: the loss models of the first `maxLossStreams` RTP streams seen,
        /// by SSRC (a linear search of at most 16 entries; capacity reserved up front).
        let lossPerStream: Bool
        var streamLoss: [(ssrc: UInt32, model: ImpairmentModel)] = []
        /// The seed `model` was made with; the per-stream models' seeds derive from it.
        var seed: UInt64
        var counters = DirectionStatistics()
        let maxPacketSize: Int
        let receiveBatch: UDPReceiveBatch
        let sendBatch: UDPSendBatch
        let pool: UnsafeMutableRawPointer
        var freeSlots: [Int32]
        var sendingSlots: [Int32]
        var heap: [Entry]
        var order: UInt64 = 0

        init(
            receiveOn input: UDPSocket, sendOn output: UDPSocket, settings: ImpairmentModel.Settings, seed: UInt64,
            configuration: Configuration
        ) {
            precondition(
                configuration.maxQueuedPackets > 0 && configuration.maxPacketSize > 0,
                "the relay needs room for at least one packet")
            self.input = input
            self.output = output
            self.model = ImpairmentModel(settings: settings, seed: seed)
            self.seed = seed
            lossPerStream = configuration.lossPerStream
            streamLoss.reserveCapacity(lossPerStream ? ImpairmentRelay.maxLossStreams : 0)
            maxPacketSize = configuration.maxPacketSize
            receiveBatch = UDPReceiveBatch(capacity: 64, bufferSize: maxPacketSize)
            sendBatch = UDPSendBatch(capacity: 64)
            pool = .allocate(byteCount: configuration.maxQueuedPackets * maxPacketSize, alignment: 64)
            freeSlots = (0..<Int32(configuration.maxQueuedPackets)).reversed()
            sendingSlots = []
            sendingSlots.reserveCapacity(64)
            heap = []
            heap.reserveCapacity(configuration.maxQueuedPackets)
        }

        deinit { pool.deallocate() }

        var nextDue: UInt64? { heap.first?.due }

        /// Counters of the models replaced by `replaceModels`.
        var retired = ImpairmentModel.Counters()

        /// Uses new models made from `settings` and `seed` from now on (the per-stream ones are made
        /// again as streams show up), keeping the old models' counts in `retired`.
        func replaceModels(settings: ImpairmentModel.Settings, seed: UInt64) {
            retired.lost += model.counters.lost + streamLost
            retired.queueDropped += model.counters.queueDropped
            retired.duplicated += model.counters.duplicated
            retired.reordered += model.counters.reordered
            model = ImpairmentModel(settings: settings, seed: seed)
            streamLoss.removeAll(keepingCapacity: true)
            self.seed = seed
        }

        /// Packets the per-stream loss models dropped.
        var streamLost: Int { streamLoss.reduce(0) { $0 + $1.model.counters.lost } }

        /// Under `lossPerStream`, the index in `streamLoss` of the RTP stream `bytes` belongs to
        /// (added when new and there is room); nil for other datagrams and streams beyond the limit.
        private func lossStream(of bytes: UnsafeRawBufferPointer) -> Int? {
            guard lossPerStream, bytes.count >= 12 else { return nil }
            let span = bytes.bytes
            guard RTPDemultiplexer.classify(span) == .rtp else { return nil }
            let ssrc = span.u32(8)
            if let i = streamLoss.firstIndex(where: { $0.ssrc == ssrc }) { return i }
            guard streamLoss.count < ImpairmentRelay.maxLossStreams else { return nil }
            // Only the loss stage of these models is used; the golden-ratio multiple spreads the
            // SSRC's bits over the seed.
            let lossOnly = ImpairmentModel.Settings(loss: model.settings.loss, burst: model.settings.burst)
            streamLoss.append((ssrc, ImpairmentModel(settings: lossOnly, seed: seed ^ (UInt64(ssrc) &* 0x9E37_79B9_7F4A_7C15))))
            return streamLoss.count - 1
        }

        var snapshot: DirectionStatistics {
            var s = counters
            s.droppedByLoss = retired.lost + model.counters.lost + streamLost
            s.droppedByQueue = retired.queueDropped + model.counters.queueDropped
            s.duplicated = retired.duplicated + model.counters.duplicated
            s.reordered = retired.reordered + model.counters.reordered
            s.queued = heap.count
            return s
        }

        /// Where a received datagram goes.
        enum Route {
            /// To the output socket's connected peer.
            case connectedPeer
            /// To this address.
            case address(SocketAddress)
            /// Nowhere yet: no sender has been seen (dropped and counted).
            case noPeer
        }

        /// Receives one batch and schedules (or drops) each datagram; `route` says where it goes.
        func receive(route: (UDPDatagram) -> Route) {
            let count: Int
            do {
                count = try receiveBatch.receive(from: input, wait: false)
            } catch {
                counters.receiveErrors += 1
                return
            }
            for i in 0..<count {
                let datagram = receiveBatch[i]
                counters.received += 1
                counters.bytesReceived += datagram.bytes.count
                if datagram.isTruncated { counters.truncated += 1 }
                let destination: SocketAddress?
                switch route(datagram) {
                case .connectedPeer: destination = nil
                case .noPeer:
                    counters.droppedWithoutPeer += 1
                    continue
                case .address(let address): destination = address
                }
                var applyingLoss = true
                if let stream = lossStream(of: datagram.bytes) {
                    if streamLoss[stream].model.drawLoss() { continue }
                    applyingLoss = false
                }
                switch model.decide(
                    arrival: datagram.receivedAt.nanoseconds, size: datagram.bytes.count, applyingLoss: applyingLoss)
                {
                case .drop: break
                case .deliver(let at):
                    enqueue(datagram.bytes, at: at, to: destination)
                case .deliverTwice(let at, let duplicateAt):
                    enqueue(datagram.bytes, at: at, to: destination)
                    enqueue(datagram.bytes, at: duplicateAt, to: destination)
                }
            }
        }

        private func enqueue(_ bytes: UnsafeRawBufferPointer, at due: UInt64, to destination: SocketAddress?) {
            guard let slot = freeSlots.popLast() else {
                counters.droppedByOverflow += 1
                return
            }
            let length = min(bytes.count, maxPacketSize)
            if let base = bytes.baseAddress { (pool + Int(slot) * maxPacketSize).copyMemory(from: base, byteCount: length) }
            order += 1
            push(Entry(due: due, order: order, slot: slot, length: Int32(length), destination: destination))
        }

        /// Sends every packet whose time has come, in `sendmmsg` batches.
        func deliverDue(now: UInt64) {
            while let top = heap.first, top.due <= now {
                let entry = pop()
                let bytes = UnsafeRawBufferPointer(start: pool + Int(entry.slot) * maxPacketSize, count: Int(entry.length))
                sendBatch.append(bytes, to: entry.destination)
                sendingSlots.append(entry.slot)
                if sendBatch.isFull { flush() }
            }
            flush()
        }

        private func flush() {
            guard sendBatch.count > 0 else { return }
            let result = sendBatch.send(on: output)
            counters.forwarded += result.sent
            counters.bytesForwarded += result.bytesSent
            counters.sendErrors += result.dropped
            freeSlots.append(contentsOf: sendingSlots)
            sendingSlots.removeAll(keepingCapacity: true)
        }

        // Binary min-heap on (due, order) in a preallocated array.
        private func push(_ entry: Entry) {
            heap.append(entry)
            var child = heap.count - 1
            while child > 0 {
                let parent = (child - 1) / 2
                guard heap[child].isBefore(heap[parent]) else { break }
                heap.swapAt(child, parent)
                child = parent
            }
        }

        private func pop() -> Entry {
            let top = heap[0]
            let last = heap.removeLast()
            if !heap.isEmpty {
                heap[0] = last
                var parent = 0
                while true {
                    let left = 2 * parent + 1, right = left + 1
                    var smallest = parent
                    if left < heap.count && heap[left].isBefore(heap[smallest]) { smallest = left }
                    if right < heap.count && heap[right].isBefore(heap[smallest]) { smallest = right }
                    if smallest == parent { break }
                    heap.swapAt(parent, smallest)
                    parent = smallest
                }
            }
            return top
        }
    }
}
