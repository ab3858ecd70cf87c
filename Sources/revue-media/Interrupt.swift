// Ctrl-C (SIGINT) and SIGTERM handling: the first signal sets a flag that every command's loop
// checks, so files are finished cleanly (trailer written, renamed into place); a second signal
// kills the process the default way.
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Set by the signal handler, read by the command loops.
/// Thread rule: any thread; an atomic store is async-signal-safe. Cost: one atomic load per check.
let interruptRequested = Atomic<Bool>(false)

enum Interrupt {
    /// Installs the handlers for SIGINT and SIGTERM. The handler only stores the flag and restores
    /// the default action, so a second Ctrl-C ends the process at once.
    static func install() {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { signal in
            interruptRequested.store(true, ordering: .relaxed)
            var reset = sigaction()
            reset.__sigaction_handler.sa_handler = SIG_DFL
            sigaction(signal, &reset, nil)
        }
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0  // no SA_RESTART: a blocking read/recv returns EINTR and the loop looks at the flag
        sigaction(SIGINT, &action, nil)
        sigaction(SIGTERM, &action, nil)
        // A parent (a test runner, a supervisor) may have left them blocked in the inherited mask.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        sigprocmask(SIG_UNBLOCK, &set, nil)
    }

    /// Whether the user asked to stop.
    static var requested: Bool { interruptRequested.load(ordering: .relaxed) }
}
