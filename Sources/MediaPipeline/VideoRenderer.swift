import MediaBase
import MediaFrames
import Synchronization

/// One decoded picture handed to a `VideoRenderer`: borrowed planes plus timing.
/// Thread rule: valid only during the `render` call, on the receive engine's thread.
/// Cost: none (views into the decoder's and the stream's buffers).
public struct DecodedVideoFrame {
    /// The I420 picture (libvpx's buffer; copy it to keep it).
    package let view: I420View
    /// The picture in the stream's `renderFormat` (packed RGB), when one was requested.
    package let packed: UnsafeRawBufferPointer?
    /// Bytes per row of `packed`.
    public let packedStride: Int
    /// RTP timestamp of the frame (90 kHz).
    public let rtpTimestamp: UInt32
    /// SSRC of the stream.
    public let ssrc: UInt32
    /// True for a keyframe.
    public let isKeyframe: Bool
    /// When the frame's first packet arrived.
    public let firstPacketArrival: MonotonicTime
    /// When decoding finished.
    public let decodedAt: MonotonicTime
    /// When the frame should be on screen: with render scheduling
    /// (`VideoReceiveSettings.schedulesRendering`, the default), frames are handed over at their
    /// playout time, a render delay ahead of this, so consecutive frames' render times are spaced
    /// as the sender captured them; without it, `decodedAt`.
    public let renderTime: MonotonicTime

    /// Width of the picture in pixels.
    public var width: Int { view.width }
    /// Height of the picture in pixels.
    public var height: Int { view.height }

    /// Lends the I420 picture to `body` (read its pixels with `I420View.withPlanes`, or copy it
    /// with `VideoFrame.copy(from:)`). Thread rule: during `render` only. Cost: none.
    public func withView<R, E: Error>(_ body: (I420View) throws(E) -> R) throws(E) -> R { try body(view) }

    /// Lends the picture in the stream's `renderFormat` (`packedStride` bytes per row) to `body`,
    /// nil when no packed format was requested. Thread rule: during `render` only. Cost: none.
    public func withPacked<R, E: Error>(_ body: (RawSpan?) throws(E) -> R) throws(E) -> R {
        if let packed { return try body(packed.bytes) }
        return try body(nil)
    }
}

/// Where a receive pipeline puts decoded video (like libwebrtc's `VideoSinkInterface`).
/// Thread rule: `render` is called on the receive engine's thread, one frame at a time; it should
/// copy what it needs and return quickly (it delays the next packet's processing).
public protocol VideoRenderer: AnyObject {
    /// Receives one decoded frame; its buffers are valid only during the call.
    func render(_ frame: DecodedVideoFrame)
}

/// A renderer that keeps a copy of the latest frame and counts frames; for tests, tools and a UI
/// that polls. Thread rule: `render` from the engine thread, the rest from any thread.
/// Cost: one I420 copy per frame into a reused buffer (reallocated when the size changes).
public final class LatestFrameRenderer: VideoRenderer, Sendable {
    private let lock = Mutex<State>(State())
    private struct State {
        var frame: VideoFrame?
        var count = 0
        var keyframes = 0
        var rtpTimestamp: UInt32 = 0
    }

    /// Makes an empty renderer.
    public init() {}

    /// Counts `frame` and keeps its size and timestamp. Decode thread; cheap (one lock).
    public func render(_ frame: DecodedVideoFrame) {
        lock.withLock { s in
            if s.frame == nil || s.frame!.width != frame.view.width || s.frame!.height != frame.view.height {
                s.frame = VideoFrame(width: frame.view.width, height: frame.view.height)
            }
            s.frame!.copy(from: frame.view)
            s.count += 1
            if frame.isKeyframe { s.keyframes += 1 }
            s.rtpTimestamp = frame.rtpTimestamp
        }
    }

    /// Frames rendered so far.
    public var frameCount: Int { lock.withLock { $0.count } }

    /// Calls `body` with the latest frame (nil before the first), under the renderer's lock.
    public func withLatestFrame<R>(_ body: (VideoFrame?) -> R) -> R {
        lock.withLock { s in body(s.frame) }
    }
}
