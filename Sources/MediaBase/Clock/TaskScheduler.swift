// Time as a dependency: one protocol for "what time is it" and "run this later", so that the same
// code runs on the real clock and queues in production and on a simulated clock in tests.
import Dispatch
import Synchronization

/// A clock and a timer queue for the work of one serial context (the session layer's is the main
/// actor). Code that reads `now` and schedules through a `TaskScheduler` instead of reading
/// `MonotonicTime.now` and calling Dispatch directly runs unchanged on `DispatchTaskScheduler`
/// (the real clock and a dispatch queue) and on a simulated clock, where time moves only when the
/// test moves it, so a test's figures do not depend on how busy the machine is.
///
/// Thread rule: `now` may be read from any thread; `schedule` may be called from any thread, and
/// the work runs on the scheduler's own serial context, in due-time order (work due at the same
/// time runs in the order it was scheduled).
package protocol TaskScheduler: AnyObject, Sendable {
    /// The current reading of this scheduler's clock.
    var now: MonotonicTime { get }

    /// Runs `work` once, `delay` from now (zero or negative: as soon as the context is free,
    /// after work already due). The returned handle cancels it.
    @discardableResult
    func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> ScheduledWork

    /// Runs `work` every `interval`, the first time at once (as `schedule(after: .zero)`), until
    /// the returned handle is cancelled.
    func scheduleRepeating(every interval: Duration, _ work: @escaping @Sendable () -> Void) -> ScheduledWork
}

/// A handle on scheduled work: `cancel()` stops it from running (again). Thread rule: any
/// thread. Cost: one atomic load per run.
package final class ScheduledWork: Sendable {
    private let cancelled = Atomic<Bool>(false)
    private let onCancel: Mutex<(@Sendable () -> Void)?>

    package init(onCancel: (@Sendable () -> Void)? = nil) { self.onCancel = Mutex(onCancel) }

    /// Whether `cancel()` ran.
    package var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    /// Stops the work from running again; idempotent.
    package func cancel() {
        guard !cancelled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let hook = onCancel.withLock { h -> (@Sendable () -> Void)? in
            defer { h = nil }
            return h
        }
        hook?()
    }
}

/// The production scheduler: `MonotonicTime.now` and a dispatch queue (the main queue for the
/// session layer). Cost: `schedule` is one `DispatchQueue.async`/`asyncAfter`; a repeating task
/// is one `DispatchSourceTimer`.
package final class DispatchTaskScheduler: TaskScheduler {
    /// The main queue's scheduler.
    package static let main = DispatchTaskScheduler(queue: .main)

    private let queue: DispatchQueue

    package init(queue: DispatchQueue) { self.queue = queue }

    package var now: MonotonicTime { MonotonicTime.now }

    @discardableResult
    package func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> ScheduledWork {
        let handle = ScheduledWork()
        let run: @Sendable () -> Void = { if !handle.isCancelled { work() } }
        if delay <= .zero {
            queue.async(execute: run)
        } else {
            queue.asyncAfter(deadline: .now() + .nanoseconds(Int(delay.inNanoseconds)), execute: run)
        }
        return handle
    }

    package func scheduleRepeating(every interval: Duration, _ work: @escaping @Sendable () -> Void) -> ScheduledWork {
        let timer = TimerBox(DispatchSource.makeTimerSource(queue: queue))
        timer.source.schedule(deadline: .now(), repeating: .nanoseconds(Int(interval.inNanoseconds)))
        let handle = ScheduledWork(onCancel: { timer.source.cancel() })
        timer.source.setEventHandler { if !handle.isCancelled { work() } }
        timer.source.resume()
        return handle
    }
}

/// A dispatch timer source held by a `Sendable` cancel hook. Sendable: `DispatchSource` methods
/// (`cancel` among them) may be called from any thread.
private final class TimerBox: @unchecked Sendable {
    let source: any DispatchSourceTimer
    init(_ source: any DispatchSourceTimer) { self.source = source }
}
