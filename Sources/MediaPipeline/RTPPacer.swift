import MediaBase
import MediaTransport
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// How a video send stream's packets are spread in time (in the manner of libwebrtc's
/// `PacingController`). Thread rule: a value type. Cost: none.
public struct PacerSettings: Sendable, Equatable {
    /// Pacing rate as a multiple of the encoder's target bitrate (libwebrtc: 2.5): an average
    /// frame leaves in well under a frame interval, a keyframe is spread over several.
    public var pacingFactor: Double = 2.5
    /// Length of one pacing interval in milliseconds: each interval may send the rate's share of
    /// it (5 ms, libwebrtc's process interval), so a keyframe leaves in bursts of about
    /// rate x 5 ms. For a keyframe's packets unused budget does not build up beyond one interval.
    public var intervalMilliseconds: Double = 5
    /// How much unused budget a delta frame may spend at once, in milliseconds of the pacing rate
    /// (40 ms: about 2.5 average frames at 30 fps, since the rate is 2.5x the target; 0 paces
    /// delta frames like keyframes). The pacer saves what it did not send, up to this, while it
    /// waits for the next frame, so a delta frame that fits leaves in one burst instead of over
    /// several intervals, as libwebrtc's pacer lets small frames out in bursts: a frame cannot be
    /// decoded before its last packet is in, so every millisecond of its spread is latency. A
    /// keyframe's packets never spend more than one interval's budget.
    public var deltaFrameBurstMilliseconds: Double = 40
    /// Packets the queue holds (a power of two); a packet that does not fit is dropped and counted
    /// (`PacerStatistics.overflows`): NACK repairs it like a packet lost on the path.
    public var capacity: Int = 1024
    /// The queue-time limit (libwebrtc's 2 s): when the queued bytes would not leave, at the
    /// pacing rate, before the packets queued have waited this long on average, the rate rises to
    /// send them in the time they have left.
    public var maxQueueTimeMilliseconds: Double = 2000

    /// libwebrtc's defaults.
    public init() {}
}

/// What a pacer did. Thread rule: a value type. Cost: none.
public struct PacerStatistics: Sendable, Equatable {
    /// Packets that went through the queue (and left).
    public var packetsPaced: UInt64 = 0
    /// Packets dropped because the queue was full.
    public var overflows: UInt64 = 0
    /// The longest time a packet waited in the queue.
    public var maxQueueDelay: Duration { .nanoseconds(Int64(maxQueueDelayNs)) }
    /// Sum over all packets of the time each waited in the queue.
    public var totalQueueDelay: Duration { .nanoseconds(Int64(totalQueueDelayNs)) }
    package var maxQueueDelayNs: UInt64 = 0
    package var totalQueueDelayNs: UInt64 = 0
    /// The pacing rate last used, bits per second.
    public var pacingRate: Int = 0
    /// Probe clusters sent (`ProbeCluster`).
    public var probeClusters: UInt64 = 0
    /// Padding packets the probes needed beyond the media that was waiting.
    public var paddingPackets: UInt64 = 0
    /// Wire bytes of those padding packets.
    public var paddingBytes: UInt64 = 0
}

/// Where a pacer's packets go when they leave: the send stream's egress stamps the send time,
/// protects, keeps the packet for NACK and writes it to the socket (`RTPSendCore`). Called only
/// on the pacer's thread (or the thread driving a pacer without one).
package protocol RTPPacerEgress: AnyObject {
    /// Sends one unprotected packet held in `packet` (with room for the SRTP tag after `length`)
    /// at `now`, logged as part of probe cluster `probeCluster` (0: none); returns the bytes
    /// that went on the wire (0: dropped).
    func egress(_ packet: UnsafeMutableRawBufferPointer, length: Int, now: MonotonicTime, probeCluster: Int) -> Int
    /// Sends one padding packet of about `bytes` bytes for probe cluster `probeCluster` at
    /// `now`; returns the bytes that went on the wire (0: the stream cannot pad).
    func egressPadding(bytes: Int, now: MonotonicTime, probeCluster: Int) -> Int
    /// Flushes the socket after a batch of egresses.
    func egressFlush()
    /// Answers queued NACKs (retransmissions leave before queued media, limited to the target
    /// bitrate by the egress, not taken from the pacing budget: after an outage a burst of
    /// repairs would hold back the keyframe that ends it).
    func egressServiceNacks()
}

/// Spreads one send stream's packets in time: the stream's worker writes its packets (not yet
/// protected) into a fixed queue instead of the socket, and the pacer's own thread releases them
/// interval by interval, each interval sending while its byte budget (pacing rate x elapsed time)
/// is positive, then flushing once. A keyframe's packets spend at most one interval's budget at a
/// time, so a keyframe leaves in bursts of about rate x 5 ms instead of all at once; a delta
/// frame's may spend what was saved while the pacer waited for it, up to
/// `PacerSettings.deltaFrameBurstMilliseconds`, so a delta frame usually leaves in one burst the
/// moment it is queued (the producer wakes the thread). Packets are stamped (abs-send-time), protected
/// and kept for NACK when they leave (`RTPPacerEgress`), so the receiver's delay estimate sees
/// when they really left; retransmissions leave from the same thread, before queued media. Audio
/// streams are not paced: their packets never wait behind video.
///
/// Thread rule: `write`/`flush` from the one producer (the stream's worker); the pacer's thread is
/// the only one sending while it runs; `setTargetBitrate`, `wake` and `statistics` from any
/// thread. Without `start()` (tests driving the stream by hand) `flush` sends everything at once;
/// after `startDriven(wake:)` the caller runs the thread's loop one turn at a time on its own
/// clock (`clock`, `runDriven(now:)`).
/// Cost: one copy per packet into a preallocated slot; no allocation after `init`; one thread
/// waking every interval while packets wait, sleeping otherwise.
/// Sendable: slots pass from producer to consumer through the `head`/`tail` atomics; consumer state is the pacer
/// thread's (or the draining caller's); `stats` is a Mutex; `target` is set before `start`, `thread` in start/stop.
package final class RTPPacer: @unchecked Sendable {
    package let settings: PacerSettings
    /// Without an egress target (tests), packets are written to `sink` as they are.
    private let sink: PacketSink?
    /// Set once by the owner before `start`; it outlives the pacer's thread (see `stop`).
    unowned(unsafe) var target: RTPPacerEgress?
    private let slotSize: Int
    private let mask: UInt64
    private let storage: UnsafeMutableRawPointer
    private let storageBytes: Int
    /// Per slot: length, enqueue time, whether it may spend saved budget (a delta frame's packet).
    private let lengths: UnsafeMutablePointer<Int>
    private let enqueuedAt: UnsafeMutablePointer<UInt64>
    private let burstable: UnsafeMutablePointer<Bool>
    /// Next slot to send (consumer) and next slot to fill (producer).
    private let head = Atomic<UInt64>(0)
    private let tail = Atomic<UInt64>(0)
    /// Bytes in the queue (producer adds, consumer subtracts).
    private let queuedBytes = Atomic<Int>(0)
    /// Sum of the queued packets' enqueue times (producer adds, consumer subtracts, wrapping):
    /// their average wait for the queue-time limit.
    private let enqueuedSumNs = Atomic<UInt64>(0)
    private let targetBitrate = Atomic<Int>(0)
    private let running = Atomic<Bool>(false)
    private let stats = Mutex(PacerStatistics())
    /// On the heap: threads share it through a stable pointer, not an inout access to a stored var.
    private let semaphore: UnsafeMutablePointer<sem_t> = .allocate(capacity: 1)
    private var thread: TransportThread?
    /// Driven by a caller instead of a thread (`startDriven`): what a wake-up calls instead of
    /// posting the semaphore. Set before the pacer runs, cleared by `stop`.
    private var drivenWake: (@Sendable () -> Void)?
    /// The clock the pacer stamps and paces by. Set before `start`/`startDriven`.
    package var clock = EngineClock.monotonic
    /// Consumer state.
    private var budget = 0
    private var lastProcessNs: UInt64 = 0
    private var sentSinceFlush = 0
    private var local = PacerStatistics()
    /// Probe clusters requested and not yet started (any thread), and the one being sent
    /// (consumer).
    private let probeRequests = Mutex<[ProbeCluster]>([])
    private let probesPending = Atomic<Bool>(false)
    private var probe: ActiveProbe?

    /// The probe cluster the pacer's thread is sending, and what it has sent of it.
    private struct ActiveProbe {
        let cluster: ProbeCluster
        let startNs: UInt64
        var bytes = 0, packets = 0
        /// The largest packet it has sent, bytes.
        var largestPacket = 0
        /// Whether it has sent the cluster's bytes and packets.
        var isComplete: Bool { bytes >= cluster.minimumBytes && packets >= cluster.minimumPackets }

        /// How long it may take, nanoseconds: 50 ms, or longer when its minimum packets at the
        /// size of its largest one need more at its rate (full-size media packets in a cluster
        /// at a few hundred kbit/s: 5 of 1200 bytes at 370 kbit/s take 130 ms), at most 250 ms.
        func timeLimitNs(rate: Int) -> UInt64 {
            let needed = Double(cluster.minimumPackets * largestPacket) * 8e9 / Double(max(1, rate))
            return UInt64(min(250e6, max(50e6, needed)))
        }
    }

    /// A pacer in front of `sink` for packets of at most `maxPacketSize` bytes, pacing at
    /// `settings.pacingFactor` x `targetBitrate`. Allocates the queue once.
    package init(sink: PacketSink?, maxPacketSize: Int, targetBitrate: Int, settings: PacerSettings = PacerSettings()) {
        precondition(
            settings.capacity > 0 && settings.capacity & (settings.capacity - 1) == 0,
            "pacer capacity \(settings.capacity) is not a power of two")
        precondition(settings.pacingFactor > 0 && settings.intervalMilliseconds > 0, "pacer rate and interval must be positive")
        self.settings = settings
        self.sink = sink
        slotSize = maxPacketSize
        mask = UInt64(settings.capacity - 1)
        // The slots come straight from mmap: pages become resident only when a burst reaches
        // them, and munmap gives them back to the system when the stream goes. (From malloc, a
        // block this size, 1.5 MB by default, stays in the allocator's arenas after a call ends,
        // so each call left RSS behind.)
        storageBytes = settings.capacity * maxPacketSize
        guard let mapped = mmap(nil, storageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
            mapped != MAP_FAILED
        else {
            fatalError("RTPPacer: cannot map \(storageBytes) bytes for its queue (errno \(errno))")
        }
        storage = mapped
        lengths = .allocate(capacity: settings.capacity)
        lengths.initialize(repeating: 0, count: settings.capacity)
        enqueuedAt = .allocate(capacity: settings.capacity)
        enqueuedAt.initialize(repeating: 0, count: settings.capacity)
        burstable = .allocate(capacity: settings.capacity)
        burstable.initialize(repeating: false, count: settings.capacity)
        self.targetBitrate.store(targetBitrate, ordering: .relaxed)
        sem_init(semaphore, 0, 0)
    }

    deinit {
        // The owner stops the pacer before it goes (a running thread holds no reference to it).
        sem_destroy(semaphore)
        semaphore.deallocate()
        munmap(storage, storageBytes); lengths.deallocate(); enqueuedAt.deallocate(); burstable.deallocate()
    }

    /// Starts the pacer's thread. From the controlling thread.
    package func start() {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        lastProcessNs = clock.now.nanoseconds
        thread = TransportThread(name: "revue.pacer") { [unowned self] in self.run() }
    }

    /// Runs the pacer from its caller instead of a thread: the caller calls `runDriven(now:)`
    /// when `wake` asks (a frame or a NACK is queued, a probe requested: `wake` is called on the
    /// producer's thread, inside `flush`) and when the previous run said. Everything else is as
    /// with the thread. From the controlling thread, before the producer writes.
    package func startDriven(wake: @escaping @Sendable () -> Void) {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        drivenWake = wake
        lastProcessNs = clock.now.nanoseconds
    }

    /// One turn of the pacer's loop at `now` (driven): answers NACKs, sends what the budget or the
    /// probe allows, and returns when the thread would next wake if nothing woke it (one interval
    /// while packets wait, a millisecond while probing, 100 ms when idle). Thread rule: the one
    /// driving thread, which is also the producer's. Cost: one pacing interval's work.
    package func runDriven(now: MonotonicTime) -> MonotonicTime {
        precondition(drivenWake != nil, "RTPPacer.runDriven(now:) before startDriven")
        return MonotonicTime(nanoseconds: turn(nowNs: now.nanoseconds))
    }

    /// Wakes the consumer: posts the thread's semaphore, or asks the driving caller to run.
    private func signal() {
        if let drivenWake { drivenWake() } else { sem_post(semaphore) }
    }

    /// Stops the thread after it has sent what was queued. From the controlling thread.
    package func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        if drivenWake == nil { sem_post(semaphore) }
        drivenWake = nil
        thread?.join()
        thread = nil
        drain()
    }

    /// The encoder's target bitrate: the pacing rate follows it. Any thread.
    package func setTargetBitrate(_ bitsPerSecond: Int) { targetBitrate.store(bitsPerSecond, ordering: .relaxed) }

    /// The target bitrate last set, bits per second. Any thread. Cost: one atomic load.
    package var targetBitrateValue: Int { targetBitrate.load(ordering: .relaxed) }

    /// Counters (updated by the pacer's thread once per interval). Any thread.
    package var statistics: PacerStatistics { stats.withLock { $0 } }

    /// Whether the pacer's thread runs (it then owns the egress).
    package var isRunning: Bool { running.load(ordering: .acquiring) }

    /// Wakes the thread (NACKs are queued). Any thread.
    package func wake() { if running.load(ordering: .acquiring) { signal() } }

    /// Queues probe `cluster`: the pacer's thread sends it next, at its rate (at least the
    /// pacing rate), media first and padding (`RTPPacerEgress.egressPadding`) when none waits,
    /// waking every millisecond, until it has sent the cluster's bytes and packets (or its time
    /// passed: 50 ms, up to 250 ms when full-size packets make up a slow cluster). At most 4
    /// wait; returns false when the thread does not run or 4 wait already. Any thread.
    package func requestProbe(_ cluster: ProbeCluster) -> Bool {
        guard running.load(ordering: .acquiring) else { return false }
        let queued = probeRequests.withLock { q -> Bool in
            guard q.count < 4 else { return false }
            q.append(cluster)
            return true
        }
        guard queued else { return false }
        probesPending.store(true, ordering: .releasing)
        signal()
        return true
    }

    /// Packets waiting.
    package var queuedPackets: Int {
        Int(tail.load(ordering: .acquiring) &- head.load(ordering: .acquiring))
    }

    // MARK: Producer

    /// Queues one packet (copied); a full queue or an oversized packet drops it (counted).
    /// `burstable`: the packet belongs to a delta frame, which may leave at once on budget saved
    /// while the pacer waited (`PacerSettings.deltaFrameBurstMilliseconds`); false (a keyframe's
    /// packet, or a packet of unknown kind) paces it at one interval's budget at a time.
    package func write(_ packet: UnsafeRawBufferPointer, burstable: Bool = false) { enqueue(packet, burstable: burstable) }

    /// Wakes the pacer's thread (a frame is queued); without a thread, sends everything queued now.
    package func flush() {
        if running.load(ordering: .acquiring) { signal() } else { drain() }
    }

    private func enqueue(_ packet: UnsafeRawBufferPointer, burstable isBurstable: Bool) {
        let t = tail.load(ordering: .relaxed)
        guard packet.count <= slotSize, let base = packet.baseAddress,
            t &- head.load(ordering: .acquiring) < UInt64(settings.capacity)
        else {
            stats.withLock { $0.overflows += 1 }  // rare: a full queue or an oversized packet
            return
        }
        let slot = Int(t & mask)
        (storage + slot * slotSize).copyMemory(from: base, byteCount: packet.count)
        lengths[slot] = packet.count
        let nowNs = clock.now.nanoseconds
        enqueuedAt[slot] = nowNs
        burstable[slot] = isBurstable
        enqueuedSumNs.wrappingAdd(nowNs, ordering: .relaxed)
        queuedBytes.add(packet.count, ordering: .relaxed)
        tail.store(t &+ 1, ordering: .releasing)
    }

    // MARK: Consumer

    private func run() {
        while running.load(ordering: .acquiring) {
            wait(untilNs: turn(nowNs: clock.now.nanoseconds))
        }
    }

    /// One turn of the loop at `nowNs`; returns when to run the next one.
    private func turn(nowNs: UInt64) -> UInt64 {
        target?.egressServiceNacks()
        process(nowNs: nowNs)
        if probe != nil || probesPending.load(ordering: .acquiring) { return nowNs + 1_000_000 }
        // Nothing waits: sleep until the producer flushes (or 100 ms pass).
        if queuedPackets == 0 { return nowNs + 100_000_000 }
        return nowNs + UInt64(settings.intervalMilliseconds * 1e6)
    }

    private func wait(untilNs: UInt64) {
        var realtime = timespec()
        clock_gettime(CLOCK_REALTIME, &realtime)
        let delta = untilNs &- min(untilNs, clock.now.nanoseconds)
        let total = UInt64(realtime.tv_nsec) + delta
        var deadline = timespec(tv_sec: realtime.tv_sec + Int(total / 1_000_000_000), tv_nsec: Int(total % 1_000_000_000))
        _ = sem_timedwait(semaphore, &deadline)
    }

    /// The pacing rate at `nowNs`: the factor times the target, raised when the queued bytes
    /// would not leave before the queued packets' average wait reaches
    /// `maxQueueTimeMilliseconds` (at least a millisecond is left: the queue then leaves at once).
    /// Called on the consumer's side only (it reads the head's slots).
    private func pacingRate(nowNs: UInt64) -> Int {
        let base = Int(Double(max(8_000, targetBitrate.load(ordering: .relaxed))) * settings.pacingFactor)
        let h = head.load(ordering: .relaxed), t = tail.load(ordering: .acquiring)
        let count = t &- h
        guard count > 0 else { return base }
        let bytes = queuedBytes.load(ordering: .relaxed)
        let averageEnqueueNs = enqueuedSumNs.load(ordering: .relaxed) / count
        let waitedMs = Double(nowNs &- min(nowNs, averageEnqueueNs)) / 1e6
        let leftSeconds = max(1, settings.maxQueueTimeMilliseconds - waitedMs) / 1000
        return max(base, Int(Double(bytes * 8) / leftSeconds))
    }

    /// One interval: adds the budget earned since the last one (saved up to a delta frame's
    /// burst, to one interval's worth for a keyframe's packets), sends while it is positive,
    /// flushes once.
    private func process(nowNs: UInt64) {
        if probe == nil, probesPending.load(ordering: .acquiring) {
            let next = probeRequests.withLock { q -> ProbeCluster? in
                let c = q.first
                if c != nil { q.removeFirst() }
                probesPending.store(!q.isEmpty, ordering: .releasing)
                return c
            }
            if let next { probe = ActiveProbe(cluster: next, startNs: nowNs) }
        }
        if probe != nil {
            processProbe(nowNs: nowNs)
            return
        }
        let rate = pacingRate(nowNs: nowNs)
        let intervalBytes = Int(Double(rate) * settings.intervalMilliseconds / 8000)
        let burstBytes = max(intervalBytes, Int(Double(rate) * settings.deltaFrameBurstMilliseconds / 8000))
        let elapsed = nowNs &- min(nowNs, lastProcessNs)
        lastProcessNs = nowNs
        var h = head.load(ordering: .relaxed)
        let t = tail.load(ordering: .acquiring)
        // Saved budget goes up to a delta frame's burst while one waits (or none does: the next
        // may be one), one interval's otherwise.
        let cap = h == t || burstable[Int(h & mask)] ? burstBytes : intervalBytes
        budget = min(cap, budget + Int(Double(rate) * Double(elapsed) / 8e9))
        while h != t && budget > 0 {
            let slot = Int(h & mask)
            if !burstable[slot] { budget = min(budget, intervalBytes) }  // a keyframe stays paced
            budget -= send(slot: slot, nowNs: nowNs)
            h &+= 1
            head.store(h, ordering: .releasing)
        }
        finishInterval(rate: rate)
    }

    /// One step of a probe cluster: what the cluster's rate allows since it started (plus one
    /// millisecond's worth), less what it sent, goes to queued media first, then to padding, so
    /// a late wake-up catches up instead of lowering the rate the cluster is measured at. The
    /// cluster ends when it has sent its bytes and packets.
    private func processProbe(nowNs: UInt64) {
        guard var p = probe else { return }
        let cluster = p.cluster
        let rate = max(cluster.bitrate, pacingRate(nowNs: nowNs))
        lastProcessNs = nowNs
        let elapsed = Double(nowNs &- min(nowNs, p.startNs) + 1_000_000)
        var allowance = Int(Double(rate) * elapsed / 8e9) - p.bytes
        var h = head.load(ordering: .relaxed)
        let t = tail.load(ordering: .acquiring)
        while allowance > 0 && !p.isComplete {
            var wire: Int
            if h != t {
                wire = send(slot: Int(h & mask), nowNs: nowNs, probeCluster: cluster.id)
                h &+= 1
                head.store(h, ordering: .releasing)
            } else {
                wire =
                    target?.egressPadding(
                        bytes: min(allowance, rate / 8000), now: MonotonicTime(nanoseconds: nowNs), probeCluster: cluster.id) ?? 0
                guard wire > 0 else { break }
                local.paddingPackets += 1
                local.paddingBytes += UInt64(wire)
                sentSinceFlush += 1
            }
            allowance -= wire
            p.bytes += wire
            p.packets += 1
            p.largestPacket = max(p.largestPacket, wire)
        }
        probe = p
        if p.isComplete || nowNs &- p.startNs > p.timeLimitNs(rate: rate) {
            probe = nil
            local.probeClusters += 1
            budget = 0
        }
        finishInterval(rate: rate)
    }

    /// Sends everything queued at once (no thread, or stopping).
    private func drain() {
        target?.egressServiceNacks()
        var h = head.load(ordering: .relaxed)
        let t = tail.load(ordering: .acquiring)
        let now = clock.now.nanoseconds
        while h != t {
            _ = send(slot: Int(h & mask), nowNs: now)
            h &+= 1
            head.store(h, ordering: .releasing)
        }
        finishInterval(rate: pacingRate(nowNs: now))
    }

    private func send(slot: Int, nowNs: UInt64, probeCluster: Int = 0) -> Int {
        let n = lengths[slot]
        var wire = n
        if let target {
            wire = target.egress(
                UnsafeMutableRawBufferPointer(start: storage + slot * slotSize, count: slotSize),
                length: n, now: MonotonicTime(nanoseconds: nowNs), probeCluster: probeCluster)
        } else {
            sink?.write(UnsafeRawBufferPointer(start: storage + slot * slotSize, count: n))
        }
        queuedBytes.subtract(n, ordering: .relaxed)
        enqueuedSumNs.wrappingSubtract(enqueuedAt[slot], ordering: .relaxed)
        let delay = nowNs &- min(nowNs, enqueuedAt[slot])
        local.packetsPaced += 1
        local.totalQueueDelayNs &+= delay
        local.maxQueueDelayNs = max(local.maxQueueDelayNs, delay)
        sentSinceFlush += 1
        return wire
    }

    private func finishInterval(rate: Int) {
        if sentSinceFlush > 0 {
            if let target { target.egressFlush() } else { sink?.flush() }
            sentSinceFlush = 0
        }
        local.pacingRate = rate
        let snapshot = local
        stats.withLock { s in
            let overflows = s.overflows
            s = snapshot
            s.overflows = overflows
        }
    }
}
