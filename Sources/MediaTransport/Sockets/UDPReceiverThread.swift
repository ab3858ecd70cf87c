import Glibc

/// A POSIX thread running one closure: the engine-owned threads of `UDPReceiver` and
/// `ImpairmentRelay` (Dispatch queues cannot be joined and may hop threads), and detached threads
/// (the TURN-over-TCP reader, the tools' input readers): a thread never joined is detached when
/// its `TransportThread` goes, so `_ = TransportThread(name:) { ... }` starts a detached one.
/// Thread rule: `join()` once, from another thread. Cost: one thread.
package final class TransportThread {
    private final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    private var thread: pthread_t
    private var joined = false

    /// Starts a thread that runs `body`; traps when the system cannot create one.
    package init(name: String, _ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(
            &thread, nil,
            { argument in
                let box = Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue()
                box.body()
                return nil
            }, box)
        precondition(rc == 0, "pthread_create for \(name) failed: errno \(rc)")
        self.thread = thread
    }

    /// Waits for the body to return.
    package func join() {
        guard !joined else { return }
        joined = true
        pthread_join(thread, nil)
    }

    deinit { if !joined { pthread_detach(thread) } }
}
