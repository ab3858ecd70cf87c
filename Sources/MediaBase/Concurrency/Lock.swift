#if canImport(Glibc)
    import Glibc
#endif

/// A mutual-exclusion lock over a POSIX mutex, for state guarded by hand where a `Mutex<State>`
/// does not fit: a locked region that hands a value to a callback after unlocking on several
/// exits (the TURN client's receive path), or state that region checking will not let into a
/// `Mutex` (closures over non-Sendable values). Everything else uses `Mutex<State>`.
///
/// It replaces Foundation's `NSLock` so that the engine and its tools do not load Foundation
/// (about 6 MiB of resident memory per process; see docs/performance.md).
/// Thread rule: any thread; not recursive: `lock()` twice on one thread deadlocks.
/// Cost: one heap-allocated `pthread_mutex_t`; an uncontended lock and unlock is two atomic
/// operations, no system call.
/// Sendable: the mutex lives behind a `let` pointer and POSIX mutexes are made for sharing.
package final class Lock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    /// Makes an unlocked lock. Cost: one small allocation.
    package init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let rc = pthread_mutex_init(mutex, nil)
        precondition(rc == 0, "pthread_mutex_init failed: \(rc)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Takes the lock, waiting while another thread holds it.
    package func lock() {
        let rc = pthread_mutex_lock(mutex)
        precondition(rc == 0, "pthread_mutex_lock failed: \(rc)")
    }

    /// Releases the lock; only the thread that took it may release it.
    package func unlock() {
        let rc = pthread_mutex_unlock(mutex)
        precondition(rc == 0, "pthread_mutex_unlock failed: \(rc)")
    }

    /// Runs `body` with the lock held and returns its result.
    package func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        lock()
        defer { unlock() }
        return try body()
    }
}
