import MediaBase
import MediaFrames
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A borrowed buffer of interleaved PCM handed to `AudioBufferCapturer.capture(_:)`: Int16 (full
/// scale 32767) or Float32 (full scale 1.0) samples, 1 or 2 channels, 8-96 kHz, any length.
/// `withInt16` and `withFloat32` lend one over your samples to a closure: it is valid during that
/// call only.
/// Thread rule: a value type over memory the caller keeps alive during the call. Cost: none.
/// Sendable: `let` fields; the samples are only read, from memory the caller keeps alive and unchanged meanwhile.
public struct PCMBufferView: @unchecked Sendable {
    enum Samples {
        case int16(UnsafeBufferPointer<Int16>)
        case float32(UnsafeBufferPointer<Float>)
    }
    let samples: Samples
    /// Sample rate in Hz.
    public let sampleRate: Int
    /// Interleaved channels.
    public let channels: Int
    /// Capture time of the first sample, ns on the caller's monotonic clock.
    public let timeStampNs: Int64

    /// Int16 samples. Validated by `capture` (bad rates, channel counts or lengths are dropped and counted).
    package init(int16 samples: UnsafeBufferPointer<Int16>, sampleRate: Int, channels: Int, timeStampNs: Int64) {
        self.samples = .int16(samples); self.sampleRate = sampleRate; self.channels = channels
        self.timeStampNs = timeStampNs
    }

    /// Float32 samples. Validated by `capture`.
    package init(float32 samples: UnsafeBufferPointer<Float>, sampleRate: Int, channels: Int, timeStampNs: Int64) {
        self.samples = .float32(samples); self.sampleRate = sampleRate; self.channels = channels
        self.timeStampNs = timeStampNs
    }

    /// Interleaved samples (frames x channels).
    public var sampleCount: Int {
        switch samples {
        case .int16(let s): s.count
        case .float32(let s): s.count
        }
    }

    /// Frames (samples per channel).
    public var frameCount: Int { channels > 0 ? sampleCount / channels : 0 }
}

/// Takes your own audio into an `AudioSendStream`: `capture` copies each buffer (converted to
/// Float32 and mixed to the stream's channel count) into pooled `AudioFrame`s, at most 20 ms at
/// 96 kHz each (longer buffers are split), and queues them for the audio worker, which resamples
/// to 48 kHz and encodes.
///
/// Policy: when the ring to the worker is full the NEWEST buffer is dropped (audio keeps its
/// continuity); when every pooled frame is in use likewise. Malformed buffers (rate outside
/// 8-96 kHz, channels outside 1-2, a length not a whole number of frames) are dropped. Every drop
/// is counted by reason in `statistics.capture`.
///
/// Thread rule: `capture` from any thread, several at once (their buffers interleave in ring
/// order); never blocks, never takes a lock the pipeline holds, never allocates.
/// Cost: one pass over the samples plus a few atomic operations per 20 ms chunk.
/// Sendable: the gate and in-flight count are atomics, the ring and pool lock-free, the rest `let`s; `worker` is
/// written once, in the owning stream's init, before other threads can reach the capturer.
public final class AudioBufferCapturer: @unchecked Sendable {
    /// Frames (per channel) one pooled chunk holds: 20 ms at 96 kHz.
    public static let chunkFrames = 1920
    /// Accepted sample rates.
    public static let sampleRateRange = 8_000...96_000

    package let ring: MPSCRing<AudioFrame>
    package let pool: AudioFramePool
    let counters: SendCounters
    /// The stream's channel count (buffers are mixed to it).
    public let channels: Int
    private let accepting = Atomic<Bool>(false)
    private let inFlight = Atomic<Int>(0)
    /// The worker to wake after a push. Unchecked but safe: set once by the stream before it
    /// starts the capturer (the `accepting` flag's release/acquire orders it before any capture).
    // Safe: written once by the owning stream's init, before other threads can reach the capturer; only read after.
    package nonisolated(unsafe) var worker: WorkerThread?
    /// The clock captures are stamped on arrival with (a driven stream's; `CLOCK_MONOTONIC` by
    /// default). Set by the owning stream before it opens the capturer; only read after.
    // Safe: written before the capturer accepts frames (other threads reach it only after); only read after.
    package nonisolated(unsafe) var clock = EngineClock.monotonic

    package init(channels: Int, ringCapacity: Int, counters: SendCounters) {
        self.channels = channels
        self.counters = counters
        ring = MPSCRing(capacity: ringCapacity)
        pool = AudioFramePool(
            sampleFormat: .float32, sampleRate: 48_000, channels: channels,
            framesPerBuffer: Self.chunkFrames, count: ringCapacity + 8)
    }

    /// Captures interleaved PCM. Returns at once; see the type's rules. Any thread.
    public func capture(_ buffer: PCMBufferView) {
        let arrivalNs = clock.now.nanoseconds
        inFlight.add(1, ordering: .sequentiallyConsistent)
        defer { inFlight.subtract(1, ordering: .releasing) }
        guard accepting.load(ordering: .sequentiallyConsistent) else {
            counters.add(counters.droppedInactive)
            return
        }
        guard Self.sampleRateRange.contains(buffer.sampleRate), buffer.channels == 1 || buffer.channels == 2,
            buffer.sampleCount % buffer.channels == 0
        else {
            counters.add(counters.droppedInvalid)
            return
        }
        let frames = buffer.frameCount
        // A live source hands over a buffer once its last sample is in: its first sample was
        // captured one buffer duration before this call.
        let firstSampleNs = arrivalNs &- UInt64(frames) * 1_000_000_000 / UInt64(max(1, buffer.sampleRate))
        var offset = 0
        var queued = false
        while offset < frames {
            let n = min(Self.chunkFrames, frames - offset)
            let ts = buffer.timeStampNs &+ Int64(offset) * 1_000_000_000 / Int64(buffer.sampleRate)
            offset += n
            guard let frame = pool.acquire() else {
                counters.add(counters.droppedPoolExhausted)
                continue
            }
            frame.sampleRate = buffer.sampleRate
            frame.timestampNs = ts
            frame.capturedAt = MonotonicTime(
                nanoseconds: firstSampleNs &+ UInt64(offset - n) * 1_000_000_000 / UInt64(buffer.sampleRate))
            frame.frameCount = n
            let out = frame.float32Samples
            switch buffer.samples {
            case .int16(let s):
                Self.mix(s, from: offset - n, count: n, channels: buffer.channels, into: out, channels, scale: 1 / 32768)
            case .float32(let s):
                Self.mix(s, from: offset - n, count: n, channels: buffer.channels, into: out, channels, scale: 1)
            }
            if ring.tryPush(frame) {
                counters.add(counters.captured)
                queued = true
            } else {
                pool.release(frame)
                counters.add(counters.droppedRingFull)
            }
        }
        if queued { worker?.wake() }
    }

    /// Captures Int16 interleaved samples taken at `timeStampNs`.
    package func capture(_ samples: UnsafeBufferPointer<Int16>, sampleRate: Int, channels: Int, timeStampNs: Int64) {
        capture(PCMBufferView(int16: samples, sampleRate: sampleRate, channels: channels, timeStampNs: timeStampNs))
    }

    /// Captures Float32 interleaved samples taken at `timeStampNs`.
    package func capture(_ samples: UnsafeBufferPointer<Float>, sampleRate: Int, channels: Int, timeStampNs: Int64) {
        capture(PCMBufferView(float32: samples, sampleRate: sampleRate, channels: channels, timeStampNs: timeStampNs))
    }

    @inline(__always)
    private static func mix(
        _ s: UnsafeBufferPointer<Int16>, from: Int, count: Int, channels inC: Int,
        into out: UnsafeMutableBufferPointer<Float>, _ outC: Int, scale: Float
    ) {
        if inC == outC {  // the common case: one flat loop the compiler vectorizes
            let src = s.baseAddress! + from * inC, dst = out.baseAddress!
            for k in 0..<(count * inC) { dst[k] = Float(src[k]) * scale }
            return
        }
        mixGeneric(count: count, inC: inC, outC: outC, out: out) { Float(s[(from + $0) * inC + $1]) * scale }
    }

    @inline(__always)
    private static func mix(
        _ s: UnsafeBufferPointer<Float>, from: Int, count: Int, channels inC: Int,
        into out: UnsafeMutableBufferPointer<Float>, _ outC: Int, scale: Float
    ) {
        if inC == outC {  // the common case: a plain copy (the per-sample loop cost ~17 instructions a sample)
            out.baseAddress!.update(from: s.baseAddress! + from * inC, count: count * inC)
            return
        }
        mixGeneric(count: count, inC: inC, outC: outC, out: out) { s[(from + $0) * inC + $1] }
    }

    @inline(__always)
    private static func mixGeneric(
        count: Int, inC: Int, outC: Int, out: UnsafeMutableBufferPointer<Float>,
        _ sample: (Int, Int) -> Float
    ) {
        if inC == outC {
            for i in 0..<count { for c in 0..<inC { out[i * outC + c] = sample(i, c) } }
        } else if inC == 2 {  // stereo -> mono: average
            for i in 0..<count { out[i] = 0.5 * (sample(i, 0) + sample(i, 1)) }
        } else {  // mono -> stereo: duplicate
            for i in 0..<count { let v = sample(i, 0); out[2 * i] = v; out[2 * i + 1] = v }
        }
    }

    /// Opens or closes the gate; closing waits until calls in progress have queued their chunks.
    package func setAccepting(_ on: Bool) {
        accepting.store(on, ordering: .sequentiallyConsistent)
        if !on { while inFlight.load(ordering: .sequentiallyConsistent) != 0 { sched_yield() } }
    }
}

// MARK: Spans

extension PCMBufferView {
    /// Lends `body` a view of interleaved Int16 `samples` taken at `timeStampNs`. The capturer
    /// validates it (bad rates, channel counts or lengths are dropped and counted).
    public static func withInt16<R, E: Error>(
        _ samples: Span<Int16>, sampleRate: Int, channels: Int, timeStampNs: Int64, _ body: (PCMBufferView) throws(E) -> R
    ) throws(E) -> R {
        try samples.withUnsafeBufferPointer { (p) throws(E) in
            try body(PCMBufferView(int16: p, sampleRate: sampleRate, channels: channels, timeStampNs: timeStampNs))
        }
    }

    /// Lends `body` a view of interleaved Float32 `samples` taken at `timeStampNs`.
    public static func withFloat32<R, E: Error>(
        _ samples: Span<Float>, sampleRate: Int, channels: Int, timeStampNs: Int64, _ body: (PCMBufferView) throws(E) -> R
    ) throws(E) -> R {
        try samples.withUnsafeBufferPointer { (p) throws(E) in
            try body(PCMBufferView(float32: p, sampleRate: sampleRate, channels: channels, timeStampNs: timeStampNs))
        }
    }
}

extension AudioBufferCapturer {
    /// Captures interleaved Int16 samples taken at `timeStampNs`. Same rules and cost as
    /// `capture(_:)`; any thread, never blocks.
    public func capture(_ samples: Span<Int16>, sampleRate: Int, channels: Int, timeStampNs: Int64) {
        samples.withUnsafeBufferPointer { capture($0, sampleRate: sampleRate, channels: channels, timeStampNs: timeStampNs) }
    }

    /// Captures interleaved Float32 samples taken at `timeStampNs`.
    public func capture(_ samples: Span<Float>, sampleRate: Int, channels: Int, timeStampNs: Int64) {
        samples.withUnsafeBufferPointer { capture($0, sampleRate: sampleRate, channels: channels, timeStampNs: timeStampNs) }
    }
}
