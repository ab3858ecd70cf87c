import MediaBase

/// A preallocated block of interleaved PCM: what `AudioBufferCapturer` copies a caller's buffer
/// into and the audio worker reads, recycled through an `AudioFramePool`.
///
/// Storage holds up to `capacity` frames (a frame is one sample per channel) of `sampleFormat`;
/// `frameCount` says how many are valid. Thread rule: not synchronised; one thread uses it at a
/// time, and handing it over through a ring publishes its contents. Cost: `init` allocates
/// `capacity * channels * sampleFormat.bytesPerSample` bytes; nothing else allocates.
/// Sendable: no lock inside; safe because one thread at a time uses a frame, handed over through a ring or pool.
public final class AudioFrame: @unchecked Sendable {
    /// How a sample is stored.
    public enum SampleFormat: Sendable, Hashable, CaseIterable {
        /// Signed 16-bit integer, full scale +-32767.
        case int16
        /// 32-bit float, full scale +-1.0.
        case float32

        /// Bytes per sample.
        public var bytesPerSample: Int { self == .int16 ? 2 : 4 }
    }

    /// Sample storage format.
    public let sampleFormat: SampleFormat
    /// Sample rate in Hz.
    public var sampleRate: Int
    /// Channels, interleaved (1 or 2 in the capture path; up to 8 allowed).
    public let channels: Int
    /// Maximum frames the storage holds.
    public let capacity: Int
    /// Valid frames (0...capacity).
    public var frameCount: Int = 0 {
        didSet {
            precondition(frameCount >= 0 && frameCount <= capacity, "AudioFrame.frameCount \(frameCount) > capacity \(capacity)")
        }
    }
    /// Capture time of the first frame, in nanoseconds on the caller's clock.
    public var timestampNs: Int64 = 0
    /// When the first frame was captured, as the capturer estimates it (its arrival minus the
    /// buffer's duration); `.zero` when it did not come through a capturer. Sender reports map RTP
    /// time to wall time from it.
    public var capturedAt = MonotonicTime.zero
    /// Start of the interleaved sample storage (`capacity * channels` samples).
    package let data: UnsafeMutableRawPointer

    /// Allocates zeroed storage for `capacity` frames.
    public init(sampleFormat: SampleFormat, sampleRate: Int, channels: Int, capacity: Int) {
        precondition(channels >= 1 && channels <= 8, "AudioFrame channels \(channels) out of 1...8")
        precondition(capacity >= 1 && sampleRate > 0, "AudioFrame capacity and sample rate must be positive")
        self.sampleFormat = sampleFormat
        self.sampleRate = sampleRate
        self.channels = channels
        self.capacity = capacity
        let bytes = capacity * channels * sampleFormat.bytesPerSample
        data = .allocate(byteCount: bytes, alignment: 64)
        data.initializeMemory(as: UInt8.self, repeating: 0, count: bytes)
        if sampleFormat == .int16 {
            data.bindMemory(to: Int16.self, capacity: capacity * channels)
        } else {
            data.bindMemory(to: Float.self, capacity: capacity * channels)
        }
    }

    deinit { data.deallocate() }

    /// Valid interleaved Int16 samples (`frameCount * channels`). Traps for Float32 storage.
    package var int16Samples: UnsafeMutableBufferPointer<Int16> {
        precondition(sampleFormat == .int16, "AudioFrame holds Float32, not Int16")
        return UnsafeMutableBufferPointer(start: data.assumingMemoryBound(to: Int16.self), count: frameCount * channels)
    }

    /// Valid interleaved Float32 samples (`frameCount * channels`). Traps for Int16 storage.
    package var float32Samples: UnsafeMutableBufferPointer<Float> {
        precondition(sampleFormat == .float32, "AudioFrame holds Int16, not Float32")
        return UnsafeMutableBufferPointer(start: data.assumingMemoryBound(to: Float.self), count: frameCount * channels)
    }

    /// Lends the valid interleaved Int16 samples (`frameCount * channels`) for reading and writing,
    /// during the call only. Traps for Float32 storage. Thread rule: the frame's owner. Cost: none.
    public func withInt16Samples<R, E: Error>(_ body: (inout MutableSpan<Int16>) throws(E) -> R) throws(E) -> R {
        try withExtendedLifetime(self) { () throws(E) -> R in
            var span = int16Samples.mutableSpan
            return try body(&span)
        }
    }

    /// Lends the valid interleaved Float32 samples like `withInt16Samples`. Traps for Int16 storage.
    public func withFloat32Samples<R, E: Error>(_ body: (inout MutableSpan<Float>) throws(E) -> R) throws(E) -> R {
        try withExtendedLifetime(self) { () throws(E) -> R in
            var span = float32Samples.mutableSpan
            return try body(&span)
        }
    }

    /// Duration of the valid frames in nanoseconds.
    public var durationNs: Int64 { Int64(frameCount) * 1_000_000_000 / Int64(sampleRate) }
}

/// A fixed set of preallocated `AudioFrame`s of one shape, lock-free like `FramePool`.
/// Thread rule: any thread; release each frame once. Cost: `init` allocates `count` frames;
/// `acquire`/`release` are one ring operation each, no allocation.
public final class AudioFramePool: Sendable {
    /// Storage format of every frame.
    public let sampleFormat: AudioFrame.SampleFormat
    /// Channels of every frame.
    public let channels: Int
    /// Frame capacity of every frame.
    public let framesPerBuffer: Int
    /// Number of frames the pool owns.
    public let count: Int
    private let free: MPSCRing<AudioFrame>

    /// Allocates `count` (>= 1) frames.
    public init(
        sampleFormat: AudioFrame.SampleFormat, sampleRate: Int, channels: Int,
        framesPerBuffer: Int, count: Int
    ) {
        precondition(count >= 1 && count <= 1 << 16, "AudioFramePool count \(count) out of range")
        self.sampleFormat = sampleFormat
        self.channels = channels
        self.framesPerBuffer = framesPerBuffer
        self.count = count
        var capacity = 2
        while capacity < count { capacity <<= 1 }
        free = MPSCRing(capacity: capacity)
        for _ in 0..<count {
            let pushed = free.tryPush(
                AudioFrame(
                    sampleFormat: sampleFormat, sampleRate: sampleRate,
                    channels: channels, capacity: framesPerBuffer))
            assert(pushed)
        }
    }

    /// Takes a free frame (its `frameCount` reset to 0), or nil when all are in use.
    public func acquire() -> AudioFrame? {
        guard let frame = free.tryPop() else { return nil }
        frame.frameCount = 0
        return frame
    }

    /// Returns `frame` to the pool; it must have come from this pool (trapped when detectable).
    public func release(_ frame: AudioFrame) {
        precondition(
            frame.sampleFormat == sampleFormat && frame.channels == channels && frame.capacity == framesPerBuffer,
            "AudioFramePool.release: frame does not belong to this pool")
        let pushed = free.pushRetryingTransientFull(frame)
        precondition(pushed, "AudioFramePool.release: more frames returned than the pool owns (double release)")
    }

    /// Frames currently free (an estimate under concurrency).
    public var available: Int { free.count }
}
