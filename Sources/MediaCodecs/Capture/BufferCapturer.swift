import MediaBase
import MediaFrames
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Takes your own video frames into a `VideoSendStream`: `capture` converts, rotates and scales
/// each buffer in one libyuv pass into a pooled I420 `VideoFrame` of the stream's target size and
/// queues it for the encode worker.
///
/// Accepted input: every `PixelFormat` (I420, NV12, NV21, BGRA, ARGB, RGBA, ABGR, RGB24, YUY2,
/// UYVY) with any strides and size, a capture timestamp in nanoseconds and a clockwise rotation.
///
/// Policy: the queue to the encoder is a bounded lock-free ring; when it is full the OLDEST waiting
/// frame is dropped (latency beats completeness). When every pooled frame is in use, or more
/// threads capture at once than there are converters, the new frame is dropped. Every drop is
/// counted by reason in `statistics`.
///
/// Thread rule: `capture` from any thread, several at once; it never blocks, never takes a lock
/// the pipeline holds, and never allocates once warm (each converter allocates scratch the first
/// time it rotates or scales; the first frame of a new size schedules a main-actor delegate
/// notification). One libyuv exception: its general filtered scalers (`.linear`, `.bilinear`,
/// `.box` at ratios other than 1/2, 1/4, 3/4, and upscaling) malloc a row per plane on every call;
/// `scaleFilter = .none`, or sizes needing no such scaling, avoid it (`SendPipelineAllocationTests`).
/// Delegates: add and remove on the main actor; they are called there.
/// Cost: one libyuv pass (BGRA 720p -> I420 ~0.2 ms) plus a few atomic operations.
/// Sendable: counters and gates are atomics, rings lock-free; `pools` slots are written under `control` and published
/// by releasing stores; `worker` is set once in the stream's init; the delegate list is main-actor only.
public final class BufferCapturer: @unchecked Sendable {
    /// Whether the capturer's stream accepts frames.
    public enum State: Sendable, Hashable {
        /// Frames are dropped (counted as `droppedInactive`).
        case stopped
        /// Frames are converted and encoded.
        case started
    }

    /// The most distinct target sizes one capturer can use over its life (each keeps its pool).
    public static let maxTargetSizes = 8

    /// Frames waiting for the encode worker (drop-oldest).
    package let ring: MPSCRing<VideoFrame>
    let counters: SendCounters
    package let poolSize: Int

    private let pools: UnsafeMutablePointer<FramePool?>
    private let poolCount = Atomic<Int>(0)
    private let currentPool = Atomic<Int>(0)
    private let converters: MPSCRing<ColorConverter>
    private let accepting = Atomic<Bool>(false)
    private let inFlight = Atomic<Int>(0)
    private let lastDimensions = Atomic<UInt64>(0)
    private let control = Mutex<Void>(())
    /// The worker to wake after a push; set once by the stream before it starts (the `accepting`
    /// flag's release/acquire orders that write before any capture reads it).
    // Safe: written once by the owning stream's init, before other threads can reach the capturer; only read after.
    package nonisolated(unsafe) var worker: WorkerThread?
    /// The clock captures are stamped on arrival with (a driven stream's; `CLOCK_MONOTONIC` by
    /// default). Set by the owning stream before it opens the capturer; only read after.
    // Safe: written before the capturer accepts frames (other threads reach it only after); only read after.
    package nonisolated(unsafe) var clock = EngineClock.monotonic
    /// Main-actor only: `add`/`remove` are `@MainActor` and notifications hop to the main actor,
    /// so no two threads touch it.
    // Safe: read and written only on the main actor (`@MainActor` add/remove and main-actor tasks).
    nonisolated(unsafe) private var delegateList: [WeakVideoCapturerDelegate] = []

    /// Makes a capturer producing `width` x `height` frames; `ringCapacity` (power of two) frames
    /// may wait for the encoder; up to `maxConcurrentCaptures` threads convert at once.
    package init(
        width: Int, height: Int, ringCapacity: Int, maxConcurrentCaptures: Int, counters: SendCounters,
        scaleFilter: ColorConverter.ScaleFilter
    ) {
        precondition(maxConcurrentCaptures >= 1 && maxConcurrentCaptures <= 64, "maxConcurrentCaptures out of 1...64")
        self.counters = counters
        ring = MPSCRing(capacity: ringCapacity)
        // Frames: the ring, one per converting thread, one being encoded, one evicted in flight.
        poolSize = ringCapacity + maxConcurrentCaptures + 2
        pools = .allocate(capacity: Self.maxTargetSizes)
        pools.initialize(repeating: nil, count: Self.maxTargetSizes)
        var capacity = 2
        while capacity < maxConcurrentCaptures { capacity <<= 1 }
        converters = MPSCRing(capacity: capacity)
        for _ in 0..<maxConcurrentCaptures {
            let c = ColorConverter()
            c.scaleFilter = scaleFilter
            _ = converters.tryPush(c)
        }
        pools[0] = FramePool(width: width, height: height, count: poolSize)
        poolCount.store(1, ordering: .releasing)
    }

    deinit {
        pools.deinitialize(count: Self.maxTargetSizes)
        pools.deallocate()
    }

    // MARK: Capture

    /// Captures a frame stamped with the current `CLOCK_MONOTONIC` time (the driving clock's, for
    /// a stream driven on another clock), unrotated.
    /// Any thread; see the type's rules.
    public func capture(_ buffer: PixelBufferView) {
        capture(buffer, timeStampNs: Int64(bitPattern: clock.now.nanoseconds), rotation: .rotation0)
    }

    /// Captures a frame taken at `timeStampNs` (monotonic nanoseconds on your clock; the RTP
    /// timestamp follows it) that must be rotated clockwise by `rotation` to be upright.
    /// Returns at once: the frame is queued, or dropped and counted. Any thread; see the type's rules.
    public func capture(_ buffer: PixelBufferView, timeStampNs: Int64, rotation: VideoRotation = .rotation0) {
        let arrivalNs = clock.now.nanoseconds
        inFlight.add(1, ordering: .sequentiallyConsistent)
        defer { inFlight.subtract(1, ordering: .releasing) }
        guard accepting.load(ordering: .sequentiallyConsistent) else {
            counters.add(counters.droppedInactive)
            return
        }
        noteDimensions(rotation.swapsDimensions ? (buffer.height, buffer.width) : (buffer.width, buffer.height))
        let pool = pools[currentPool.load(ordering: .acquiring)]!
        guard let frame = pool.acquire() else {
            counters.add(counters.droppedPoolExhausted)
            return
        }
        guard let converter = converters.tryPop() else {
            pool.release(frame)
            counters.add(counters.droppedPoolExhausted)
            return
        }
        var converted = true
        do { try converter.convert(buffer, into: frame, rotation: rotation) } catch { converted = false }
        _ = converters.pushRetryingTransientFull(converter)
        guard converted else {
            pool.release(frame)
            counters.add(counters.droppedInvalid)
            return
        }
        frame.timestampNs = timeStampNs
        frame.capturedAt = MonotonicTime(nanoseconds: arrivalNs)
        counters.add(counters.captured)
        ring.pushDroppingOldest(frame) { old in
            self.recycle(old)
            self.counters.add(self.counters.droppedRingFull)
        }
        worker?.wake()
    }

    // MARK: Control (stream)

    /// The size frames are converted to.
    public var targetDimensions: VideoDimensions {
        let p = pools[currentPool.load(ordering: .acquiring)]!
        return VideoDimensions(width: p.width, height: p.height)
    }

    /// Changes the size frames are scaled to from the next capture on (the encoder follows when
    /// those frames reach it, with a keyframe). The first use of a size allocates its frame pool;
    /// at most `maxTargetSizes` distinct sizes per capturer (a programmer error beyond).
    /// Control plane: any thread, does not stop capture.
    package func setTargetDimensions(width: Int, height: Int) {
        control.withLock { _ in
            let n = poolCount.load(ordering: .acquiring)
            for i in 0..<n where pools[i]!.width == width && pools[i]!.height == height {
                currentPool.store(i, ordering: .releasing)
                return
            }
            precondition(n < Self.maxTargetSizes, "BufferCapturer supports at most \(Self.maxTargetSizes) target sizes")
            pools[n] = FramePool(width: width, height: height, count: poolSize)
            poolCount.store(n + 1, ordering: .releasing)
            currentPool.store(n, ordering: .releasing)
        }
    }

    /// Returns a frame to the pool of its size. Any thread. No allocation.
    package func recycle(_ frame: VideoFrame) {
        let n = poolCount.load(ordering: .acquiring)
        for i in 0..<n {
            let p = pools[i]!
            if p.width == frame.width && p.height == frame.height { p.release(frame); return }
        }
        preconditionFailure("BufferCapturer.recycle: \(frame.width)x\(frame.height) frame from no pool of this capturer")
    }

    /// Opens or closes the gate. Closing waits (spinning, control plane) until every capture call
    /// that passed the gate has queued its frame, so the caller can then drain the ring.
    package func setAccepting(_ on: Bool) {
        accepting.store(on, ordering: .sequentiallyConsistent)
        if !on {
            while inFlight.load(ordering: .sequentiallyConsistent) != 0 { sched_yield() }
            lastDimensions.store(0, ordering: .relaxed)
        }
        let state: State = on ? .started : .stopped
        Task { @MainActor [weak self] in
            guard let self else { return }
            for entry in self.delegateList { entry.delegate?.capturer(self, didUpdate: state) }
            if !on { for entry in self.delegateList { entry.delegate?.capturer(self, didUpdate: nil as VideoDimensions?) } }
        }
    }

    /// Whether capture calls are accepted.
    public var state: State { accepting.load(ordering: .acquiring) ? .started : .stopped }

    /// Frames free in the current pool (an estimate).
    package var availableFrames: Int { pools[currentPool.load(ordering: .acquiring)]!.available }

    // MARK: Delegates

    /// Adds a delegate (held weakly). Main actor.
    @MainActor public func add(delegate: any VideoCapturerDelegate) {
        delegateList.removeAll { $0.delegate == nil || $0.delegate === delegate }
        delegateList.append(WeakVideoCapturerDelegate(delegate: delegate))
    }

    /// Removes a delegate. Main actor.
    @MainActor public func remove(delegate: any VideoCapturerDelegate) {
        delegateList.removeAll { $0.delegate == nil || $0.delegate === delegate }
    }

    private func noteDimensions(_ size: (Int, Int)) {
        let packed = UInt64(size.0) << 32 | UInt64(size.1)
        guard lastDimensions.load(ordering: .relaxed) != packed else { return }
        guard lastDimensions.exchange(packed, ordering: .relaxed) != packed else { return }
        let dimensions = VideoDimensions(width: size.0, height: size.1)
        Task { @MainActor [weak self] in
            guard let self else { return }
            for entry in self.delegateList { entry.delegate?.capturer(self, didUpdate: dimensions) }
        }
    }
}
