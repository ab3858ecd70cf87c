#if canImport(Glibc)
    import Glibc
#endif

/// Runs `body(index)` on `count` new OS threads at once and returns when all have finished.
/// Real threads, not a pool, so producers and consumers truly run concurrently (a
/// `concurrentPerform` on 2 cores may serialise them).
func runOnThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    final class Context: @unchecked Sendable {
        let index: Int
        let body: @Sendable (Int) -> Void
        init(_ index: Int, _ body: @escaping @Sendable (Int) -> Void) { self.index = index; self.body = body }
    }
    var threads: [pthread_t] = []
    for i in 0..<count {
        var handle = pthread_t()
        let context = Unmanaged.passRetained(Context(i, body)).toOpaque()
        let rc = pthread_create(
            &handle, nil,
            { raw in
                let context = Unmanaged<Context>.fromOpaque(raw!).takeRetainedValue()
                context.body(context.index)
                return nil
            }, context)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        threads.append(handle)
    }
    for t in threads { pthread_join(t, nil) }
}
