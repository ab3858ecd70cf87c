import MediaCore

/// Non-generic entry points to the capture hand-off rings with `Int` elements, compiled (and so
/// specialised) inside MediaCore, for benchmarks in other modules: calling the generic
/// `MPSCRing`/`SPSCRing` from another module runs unspecialised generic code, which measures the
/// generic dispatch, not the ring the pipeline uses (`MPSCRing<VideoFrame>` inside MediaCore).
/// Thread rule: as the wrapped ring (`mpsc*`: any threads; `spsc*`: one producer, one consumer).
/// Cost: one ring operation plus a call.
package final class HandOffRingProbe: Sendable {
    private let mpsc: MPSCRing<Int>
    private let spsc: SPSCRing<Int>

    /// Makes empty rings of `capacity` (a power of two).
    package init(capacity: Int) {
        mpsc = MPSCRing(capacity: capacity)
        spsc = SPSCRing(capacity: capacity)
    }

    /// `MPSCRing.tryPush`.
    package func mpscPush(_ value: Int) -> Bool { mpsc.tryPush(value) }
    /// `MPSCRing.tryPop`.
    package func mpscPop() -> Int? { mpsc.tryPop() }
    /// `SPSCRing.tryPush` (one producer thread).
    package func spscPush(_ value: Int) -> Bool { spsc.tryPush(value) }
    /// `SPSCRing.tryPop` (one consumer thread).
    package func spscPop() -> Int? { spsc.tryPop() }
}
