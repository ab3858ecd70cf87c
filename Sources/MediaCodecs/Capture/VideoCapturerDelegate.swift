/// A video size in pixels, as a capturer reports it.
/// Thread rule: a value type. Cost: none.
public struct VideoDimensions: Hashable, Sendable, CustomStringConvertible {
    /// Width in pixels.
    public var width: Int
    /// Height in pixels.
    public var height: Int
    /// Makes dimensions.
    public init(width: Int, height: Int) { self.width = width; self.height = height }
    /// A readable description, for logs and error messages.
    public var description: String { "\(width)x\(height)" }
}

/// Hears about a `BufferCapturer`'s size and state: the size of the frames it is given (after
/// rotation) each time it changes, and whether its stream started or stopped. Methods have empty
/// defaults; implement the ones you need.
/// Thread rule: called on the main actor, never on the capturing thread (the capture call only
/// schedules the notification and returns). The capturer's delegate list holds weak references.
@MainActor
public protocol VideoCapturerDelegate: AnyObject {
    /// The frames given to `capture` now have `dimensions` (after rotation); nil when stopped.
    func capturer(_ capturer: BufferCapturer, didUpdate dimensions: VideoDimensions?)
    /// The capturer started (its stream accepts frames) or stopped.
    func capturer(_ capturer: BufferCapturer, didUpdate state: BufferCapturer.State)
}

extension VideoCapturerDelegate {
    /// Does nothing unless the delegate implements it.
    public func capturer(_ capturer: BufferCapturer, didUpdate dimensions: VideoDimensions?) {}
    /// Does nothing unless the delegate implements it.
    public func capturer(_ capturer: BufferCapturer, didUpdate state: BufferCapturer.State) {}
}

/// A weak reference to a delegate, for delegate lists.
struct WeakVideoCapturerDelegate {
    weak var delegate: (any VideoCapturerDelegate)?
}
