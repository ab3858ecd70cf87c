// A simulated clock and timer queue for tests: time moves only when the test moves it, and then
// every piece of work runs in due-time order on the test's own thread. Code written against
// `TaskScheduler` runs on it unchanged, so a test of timeouts, retransmissions or handshakes gives
// the same events, in the same order, at the same simulated times, however busy the machine is,
// and runs much faster than real time (nothing waits).
import MediaCore
import Synchronization

/// The simulated time controller. Thread rule: `advance`, `run` and `runUntil` are called from
/// one thread (the test's; the main actor for session tests), and the work runs there.
/// `schedule` may be called from any thread. Cost: a `schedule` is one array insertion (the queue
/// is kept sorted; tests queue at most a few thousand items).
package final class SimulatedTime: TaskScheduler {
    private struct Item {
        let due: MonotonicTime
        let order: UInt64
        let work: @Sendable () -> Void
        let handle: ScheduledWork
    }

    private struct State {
        var now: MonotonicTime
        var queue: [Item] = []
        var nextOrder: UInt64 = 0
        var ran = 0
    }

    private let state: Mutex<State>

    /// Where a clock starts unless told: 1,000 s.
    package static let defaultStart = MonotonicTime(nanoseconds: 1_000_000_000_000)

    /// A clock that reads `start` (by default 1,000 s: well clear of zero, which the engine uses
    /// as "never").
    package init(start: MonotonicTime = SimulatedTime.defaultStart) {
        state = Mutex(State(now: start))
    }

    package var now: MonotonicTime { state.withLock { $0.now } }

    /// Pieces of work run so far.
    package var workRun: Int { state.withLock { $0.ran } }

    /// Work waiting to run (cancelled work still counts until its time comes).
    package var pending: Int { state.withLock { $0.queue.count } }

    @discardableResult
    package func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> ScheduledWork {
        let handle = ScheduledWork()
        state.withLock { s in
            let due = delay > .zero ? s.now + delay : s.now
            let item = Item(due: due, order: s.nextOrder, work: work, handle: handle)
            s.nextOrder += 1
            // After every item due at or before `due` (ties keep the order they were scheduled in).
            var lo = 0, hi = s.queue.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if s.queue[mid].due <= due { lo = mid + 1 } else { hi = mid }
            }
            s.queue.insert(item, at: lo)
        }
        return handle
    }

    package func scheduleRepeating(every interval: Duration, _ work: @escaping @Sendable () -> Void) -> ScheduledWork {
        let handle = ScheduledWork()
        arm(handle, every: max(interval, .nanoseconds(1)), after: .zero, work)
        return handle
    }

    /// One run of a repeating task; it schedules the next `interval` after its own due time, as a
    /// repeating dispatch timer does, so the runs do not drift.
    private func arm(
        _ handle: ScheduledWork, every interval: Duration, after delay: Duration, _ work: @escaping @Sendable () -> Void
    ) {
        schedule(after: delay) { [weak self] in
            guard !handle.isCancelled else { return }
            work()
            guard !handle.isCancelled else { return }
            self?.arm(handle, every: interval, after: interval, work)
        }
    }

    /// Runs every piece of work due at the current time, including work it schedules for now.
    package func runDue() { advance(by: .zero) }

    /// Moves the clock forward by `duration`, running each piece of work when its due time comes
    /// (the clock reads that time while it runs), then leaves the clock at the end.
    package func advance(by duration: Duration) {
        let end = now + max(duration, .zero)
        while let item = takeNext(notAfter: end) {
            if !item.handle.isCancelled { item.work() }
        }
        state.withLock { $0.now = max($0.now, end) }
    }

    /// Runs time forward in steps of `step` until `condition` holds (checked before the first
    /// step and after each) or `timeout` of simulated time has passed; whether it held.
    @discardableResult
    package func runUntil(timeout: Duration, step: Duration = .milliseconds(10), _ condition: () -> Bool) -> Bool {
        let end = now + timeout
        runDue()
        while !condition() {
            guard now < end else { return false }
            advance(by: min(step, end - now))
        }
        return true
    }

    private func takeNext(notAfter end: MonotonicTime) -> Item? {
        state.withLock { s in
            guard let first = s.queue.first, first.due <= end else { return nil }
            s.queue.removeFirst()
            s.now = max(s.now, first.due)
            s.ran += 1
            return first
        }
    }
}
