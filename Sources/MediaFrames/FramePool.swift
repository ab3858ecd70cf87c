import MediaBase

/// A fixed set of preallocated `VideoFrame`s of one size, handed out to capture and returned by
/// the encoder, so the per-frame path never allocates.
///
/// The free list is an `MPSCRing` (compare-exchange on both ends), so `acquire` and `release` are
/// lock-free and allocation-free from any number of threads. When every frame is in use `acquire`
/// returns nil: the caller drops the frame and counts it, it never waits.
/// Thread rule: all methods from any thread. A frame belongs to whoever acquired it until it is
/// released; release each frame exactly once. Cost: `init` allocates `count` frames; `acquire`
/// and `release` are one ring operation each.
public final class FramePool: Sendable {
    /// Width of every frame in the pool.
    public let width: Int
    /// Height of every frame in the pool.
    public let height: Int
    /// Number of frames the pool owns.
    public let count: Int
    private let free: MPSCRing<VideoFrame>

    /// Allocates `count` (>= 1) frames of `width` x `height`.
    public init(width: Int, height: Int, count: Int) {
        precondition(count >= 1 && count <= 1 << 16, "FramePool count \(count) out of range")
        self.width = width
        self.height = height
        self.count = count
        var capacity = 2
        while capacity < count { capacity <<= 1 }
        free = MPSCRing(capacity: capacity)
        for _ in 0..<count {
            let pushed = free.tryPush(VideoFrame(width: width, height: height))
            assert(pushed)
        }
    }

    /// Takes a free frame, or returns nil when all `count` are in use (count a drop). The frame's
    /// pixels and timestamp are whatever its last user left. Lock-free; never allocates.
    public func acquire() -> VideoFrame? { free.tryPop() }

    /// Returns `frame` to the pool. It must have come from this pool's `acquire` and not have been
    /// released since (a programmer error otherwise, trapped when detectable). Lock-free.
    public func release(_ frame: VideoFrame) {
        precondition(
            frame.width == width && frame.height == height,
            "FramePool.release: \(frame.width)x\(frame.height) frame does not belong to a \(width)x\(height) pool")
        let pushed = free.pushRetryingTransientFull(frame)
        precondition(pushed, "FramePool.release: more frames returned than the pool owns (double release)")
    }

    /// Frames currently free (an estimate while other threads acquire or release).
    public var available: Int { free.count }
}
