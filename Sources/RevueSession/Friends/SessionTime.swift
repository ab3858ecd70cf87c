// The session's time: readings of `MonotonicTime`, intervals as `Duration`, and the app's
// timeouts (`RevueTimeouts`, seconds as `Double`) as durations.
internal import MediaCore

extension MonotonicTime {
    /// The time from `earlier` to this reading; with `earlier` nil (never), longer than any
    /// interval, so something that never happened is always due.
    func since(_ earlier: MonotonicTime?) -> Duration {
        guard let earlier else { return .seconds(Int64.max) }
        return self - earlier
    }
}

/// `RevueTimeouts` as durations, read once when the session starts.
struct SessionTimeouts {
    /// How often a connected friend is pinged.
    var keepaliveInterval: Duration
    /// A friend with no authenticated packet for this long is offline.
    var connectionTimeout: Duration
    /// How often a handshake is retried while a friend is offline.
    var handshakeRetryInterval: Duration
    /// Session keys are replaced by a new handshake after this long.
    var rekeyInterval: Duration
    /// An unacknowledged friend message is sent again after this long.
    var retransmitInterval: Duration
    /// How often rendezvous nodes are told where we are and asked where offline friends are.
    var rendezvousInterval: Duration
    /// How long an invitation to a call waits for an answer.
    var invitationTimeout: Duration
    /// How long a participant whose friend went offline stays in the call (0: not at all).
    var callLostTimeout: Duration

    /// The app's settings, each through `Duration.seconds(clamping:)`.
    init(_ t: RevueTimeouts) {
        keepaliveInterval = .seconds(clamping: t.keepaliveInterval)
        connectionTimeout = .seconds(clamping: t.connectionTimeout)
        handshakeRetryInterval = .seconds(clamping: t.handshakeRetryInterval)
        rekeyInterval = .seconds(clamping: t.rekeyInterval)
        retransmitInterval = .seconds(clamping: t.retransmitInterval)
        rendezvousInterval = .seconds(clamping: t.rendezvousInterval)
        invitationTimeout = .seconds(clamping: t.invitationTimeout)
        callLostTimeout = .seconds(clamping: t.callLostTimeout)
    }
}
