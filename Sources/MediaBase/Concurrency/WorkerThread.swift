import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A dedicated OS thread that runs one pipeline stage: it calls `body` while `body` reports work
/// done, sleeps on a POSIX semaphore when idle, and is woken by `wake()` after a producer pushes
/// into the stage's ring.
///
/// Wake-up is an event-count handshake, so a push is never missed and `wake()` costs one atomic
/// exchange when the worker is busy: the worker announces `sleeping`, runs `body` once more, and
/// only then waits; `wake()` swaps the state to `awake` and posts the semaphore only if it found
/// `sleeping`. Nothing allocates after `start()`.
///
/// Thread rule: `wake()` from any thread at any time (also before `start` and after `stop`);
/// `start()` and `stop()` from one controlling thread (not from `body`). `body` runs only on the
/// worker thread. A started worker keeps itself alive until `stop()`, so always stop it.
/// Cost: one thread (default stack) while running; `wake()` is one atomic exchange, plus a
/// `sem_post` system call when the worker sleeps.
/// Sendable: `state` and `running` are atomics, the semaphore sits behind a `let` pointer, `body` runs only on the
/// worker thread; `thread` is touched only by `start`/`stop` on the controlling thread.
package final class WorkerThread: @unchecked Sendable {
    /// A name for diagnostics and precondition messages.
    package let name: String
    private let body: () -> Bool
    private let state = Atomic<Int>(WorkerThread.awake)
    private let running = Atomic<Bool>(false)
    private let semaphore: UnsafeMutablePointer<sem_t>
    private var thread: pthread_t?

    private static let awake = 0
    private static let sleeping = 1

    /// Creates a stopped worker. `body` does a bounded amount of work (for example: drain the
    /// ring) and returns whether it did any; it is called again at once when it did.
    package init(name: String, body: @escaping () -> Bool) {
        self.name = name
        self.body = body
        semaphore = .allocate(capacity: 1)
        sem_init(semaphore, 0, 0)
    }

    deinit {
        precondition(!running.load(ordering: .acquiring), "WorkerThread \(name) deallocated while running")
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    /// Whether the thread has been started and not yet stopped.
    package var isRunning: Bool { running.load(ordering: .acquiring) }

    /// Starts the thread. Traps if it is already running or the system refuses a thread.
    package func start() {
        precondition(!running.load(ordering: .relaxed), "WorkerThread \(name) started twice")
        running.store(true, ordering: .releasing)
        let context = Unmanaged.passRetained(self).toOpaque()
        var handle = pthread_t()
        let rc = pthread_create(
            &handle, nil,
            { raw in
                let worker = Unmanaged<WorkerThread>.fromOpaque(raw!).takeRetainedValue()
                worker.run()
                return nil
            }, context)
        precondition(rc == 0, "pthread_create for \(name) failed: \(rc)")
        thread = handle
    }

    /// Wakes the worker if it sleeps, so it calls `body` again. Never blocks, never allocates.
    @inline(__always)
    package func wake() {
        atomicMemoryFence(ordering: .sequentiallyConsistent)  // order the caller's push first
        if state.exchange(Self.awake, ordering: .sequentiallyConsistent) == Self.sleeping {
            sem_post(semaphore)
        }
    }

    /// Asks the worker to finish (after its current `body` call and one final pass) and joins it.
    /// Blocks the caller until the thread has exited. Does nothing if not running.
    package func stop() {
        if let handle = thread {
            precondition(pthread_equal(handle, pthread_self()) == 0, "WorkerThread \(name) cannot stop itself from its body")
        }
        guard running.exchange(false, ordering: .acquiringAndReleasing), let handle = thread else { return }
        state.store(Self.awake, ordering: .sequentiallyConsistent)
        sem_post(semaphore)
        pthread_join(handle, nil)
        thread = nil
    }

    private func run() {
        while running.load(ordering: .acquiring) {
            if body() { continue }
            state.store(Self.sleeping, ordering: .sequentiallyConsistent)
            atomicMemoryFence(ordering: .sequentiallyConsistent)  // announce before re-checking
            if body() {
                state.store(Self.awake, ordering: .relaxed)
                continue
            }
            if !running.load(ordering: .acquiring) { break }
            while sem_wait(semaphore) != 0 && errno == EINTR {}
            state.store(Self.awake, ordering: .relaxed)
        }
        _ = body()  // a last pass so work pushed before `stop` is not stranded
    }
}
