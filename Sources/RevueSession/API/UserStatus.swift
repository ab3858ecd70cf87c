/// The status you set with `Revue.setSelfStatus(_:)` and your friends receive with
/// `RevueDelegate.revue(_:friend:didUpdateStatus:)`.
public enum UserStatus: UInt8, Sendable, Hashable, Codable, CaseIterable {
    /// Available: no particular status (`none`).
    case none = 0
    /// Away from the device.
    case away = 1
    /// Busy: do not disturb.
    case busy = 2
}

/// What the presence service (the rendezvous nodes) last heard from a friend; it can differ from
/// the friend connection (`FriendConnectionPaths`). Read with `FriendManager.getFriendPresenceStatus`.
public enum PresenceStatus: Sendable, Hashable {
    /// No rendezvous node has heard from the friend recently, or none is configured.
    case offline
    /// Registered and available (`UserStatus.none`).
    case online
    /// Registered with `UserStatus.away`.
    case away
    /// Registered with `UserStatus.busy`.
    case busy

    init(_ status: UserStatus) {
        switch status {
        case .none: self = .online
        case .away: self = .away
        case .busy: self = .busy
        }
    }
}

/// Why an invitation to a call ended, always from your own side. Declared here for `RevueDelegate`; invitations themselves arrive with the call layer.
public enum InvitationEndReason: Sendable, Hashable {
    /// You cancelled the invitation you sent.
    case cancelled
    /// You rejected the invitation you received.
    case rejected
    /// Your side stopped waiting.
    case timeout
    /// The other side ended it.
    case finished
}
