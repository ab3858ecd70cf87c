// How a Janus session comes back after its connection to the server broke: the decisions (wait
// how long, try again or give up) as a value fed with what happened and when, so that they can be
// checked without a clock; `JanusSession` carries them out. docs/sfu.md "A lost connection".
import MediaBase

/// What a session's link to Janus went through, in the order it happened.
/// Thread rule: a value type. Cost: none.
package enum JanusLinkEvent: Sendable, Hashable {
    /// The connection broke (a WebSocket that ended, a long poll that failed); the session is
    /// being reclaimed. Requests wait for the outcome.
    case interrupted(String)
    /// The session is ours again: over a WebSocket a new connection claimed it (`claim`); over
    /// HTTP the server answered again and still knew it. Its handles and their WebRTC connections
    /// are the same as before. Events the server sent while the link was down may be missing.
    case reclaimed
    /// The session is gone: the server no longer knows it (458), refused us, or every attempt
    /// within the reclaim window failed. The session is closed; its handles are gone.
    case lost(String)
}

/// The reconnection decisions of one session: bounded attempts with a doubling delay, for as long
/// as the server keeps a session whose connection broke (`window`).
///
/// Fed with `failed(at:)` each time the connection, or an attempt to reclaim it, fails;
/// `reclaimed()` when an attempt succeeds; `gone()` when the server says the session no longer
/// exists. Thread rule: a value type, one owner. Cost: constant per call.
package struct JanusReconnectPlan: Sendable, Hashable {
    /// Where the link is.
    package enum State: Sendable, Hashable {
        /// The connection works.
        case connected
        /// Reclaiming since `since`; `attempts` attempts have failed so far.
        case reconnecting(since: MonotonicTime, attempts: Int)
        /// Given up, or the server dropped the session: nothing more is tried.
        case lost
    }

    /// What to do after a failure.
    package enum Decision: Sendable, Hashable {
        /// Try again after this delay.
        case retry(after: Duration)
        /// Stop: the session is lost.
        case giveUp
    }

    /// The delay before the first attempt; each later one doubles it, up to `maxDelay`.
    package let firstDelay: Duration
    /// The longest delay between two attempts.
    package let maxDelay: Duration
    /// How long after the connection broke attempts are still made.
    package let window: Duration
    /// The state after the last event.
    package private(set) var state: State = .connected
    /// How many times the session came back (`reclaimed()` after a failure).
    package private(set) var reclaims = 0

    /// A plan trying for `window` after a break, the first attempt after `firstDelay`, the delay
    /// doubling up to `maxDelay`. Cost: none.
    package init(window: Duration, firstDelay: Duration = .milliseconds(250), maxDelay: Duration = .seconds(4)) {
        self.window = max(window, .zero)
        self.firstDelay = max(firstDelay, .milliseconds(1))
        self.maxDelay = max(maxDelay, self.firstDelay)
    }

    /// The window a server gives a broken session: over a WebSocket its `reclaim-session-timeout`
    /// (the session is destroyed that long after its connection ended; 0: at once), over HTTP its
    /// `session-timeout` (no request for that long ends it). Nil or negative values count as
    /// Janus's defaults (0 and 60 s). A few seconds are added so the last attempt can still land
    /// (the server checks its sessions every 2 s), and the window never exceeds 10 minutes.
    /// Cost: none.
    package static func window(webSocket: Bool, sessionTimeout: Int?, reclaimTimeout: Int?) -> Duration {
        let seconds = webSocket ? max(reclaimTimeout ?? 0, 0) : max(sessionTimeout ?? 60, 0)
        return .seconds(min(seconds, 600) + 5)
    }

    /// The connection, or an attempt to reclaim the session, failed at `now`: wait and try again,
    /// or give up when the next attempt would start after the window (or the session is lost).
    package mutating func failed(at now: MonotonicTime) -> Decision {
        let since: MonotonicTime, attempts: Int
        switch state {
        case .lost: return .giveUp
        case .connected: (since, attempts) = (now, 0)
        case .reconnecting(let s, let a): (since, attempts) = (s, a + 1)
        }
        var delay = firstDelay
        for _ in 0..<min(attempts, 30) where delay < maxDelay { delay = min(delay * 2, maxDelay) }
        if now + delay - since > window {
            state = .lost
            return .giveUp
        }
        state = .reconnecting(since: since, attempts: attempts)
        return .retry(after: delay)
    }

    /// An attempt worked: the session is ours again (nothing changes when the link never broke).
    package mutating func reclaimed() {
        guard case .reconnecting = state else { return }
        state = .connected
        reclaims += 1
    }

    /// The server no longer knows the session: nothing more is tried.
    package mutating func gone() { state = .lost }

    /// Whether a break is being repaired now.
    package var isReconnecting: Bool {
        if case .reconnecting = state { return true }
        return false
    }
}
