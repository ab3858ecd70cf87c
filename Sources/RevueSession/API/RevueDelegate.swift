/// Receives the friend events of a `Revue` instance: friend requests,
/// invitations, each friend's connection, name and status, and whether you are discoverable.
/// Always called on the main actor; every method has an empty default, so implement only the
/// events you need. Add it with `revue.delegates.add(delegate:)`; the list holds it weakly.
@MainActor
public protocol RevueDelegate: AnyObject {
    /// Someone who has your current address asked to become your friend. Accept with
    /// `FriendManager.addFriendNorequest(friendId:)`; to decline, do nothing.
    func revue(_ revue: Revue, didReceiveFriendRequest friendId: String, message: String)
    /// A friend's name changed; also arrives once with your own `revueId` after `setSelfName(_:)`.
    func revue(_ revue: Revue, friend friendId: String, didUpdateName name: String)
    /// A friend's status message changed; also arrives with your own `revueId`.
    func revue(_ revue: Revue, friend friendId: String, didUpdateStatusMessage statusMessage: String)
    /// A friend's status changed; also arrives with your own `revueId`.
    func revue(_ revue: Revue, friend friendId: String, didUpdateStatus status: UserStatus)
    /// The paths to a friend changed (a friend came online, went away, or a route appeared).
    func revue(_ revue: Revue, friend friendId: String, didUpdatePaths paths: FriendConnectionPaths)
    /// A friend sent you a message with `FriendManager.sendMessage(friendId:message:timeout:)`.
    func revue(_ revue: Revue, friend friendId: String, didReceiveMessage message: String)
    /// Whether others can find you now (a rendezvous node has your endpoint, or LAN discovery runs).
    func revue(_ revue: Revue, didUpdateIsDiscoverable isDiscoverable: Bool)
    /// You invited a friend to a call (call layer).
    func revue(_ revue: Revue, friend friendId: String, didSendInvitation message: String?)
    /// A friend invited you to a call (call layer).
    func revue(_ revue: Revue, friend friendId: String, didReceiveInvitation message: String?)
    /// An invitation ended without a connection (call layer).
    func revue(_ revue: Revue, friend friendId: String, didEndInvitation reason: InvitationEndReason)
}

extension RevueDelegate {
    /// Does nothing unless the delegate implements it.
    public func revue(_ revue: Revue, didReceiveFriendRequest friendId: String, message: String) {}
    /// Does nothing unless the delegate implements it.
    public func revue(_ revue: Revue, friend friendId: String, didUpdateName name: String) {}
    /// Does nothing unless the delegate implements it.
    public func revue(_ revue: Revue, friend friendId: String, didUpdateStatusMessage statusMessage: String) {}
    /// Does nothing unless the delegate implements it.
    public func revue(_ revue: Revue, friend friendId: String, didUpdateStatus status: UserStatus) {}
    /// Does nothing unless the delegate implements it.
    public func revue(_ revue: Revue, friend friendId: String, didUpdatePaths paths: FriendConnectionPaths) {}
    /// Does nothing unless the delegate implements it.
    public func revue(_ revue: Revue, friend friendId: String, didReceiveMessage message: String) {}
    /// Does nothing unless the delegate implements it.
    public func revue(_ revue: Revue, didUpdateIsDiscoverable isDiscoverable: Bool) {}
    /// Does nothing unless the delegate implements it.
    public func revue(_ revue: Revue, friend friendId: String, didSendInvitation message: String?) {}
    /// Does nothing unless the delegate implements it.
    public func revue(_ revue: Revue, friend friendId: String, didReceiveInvitation message: String?) {}
    /// Does nothing unless the delegate implements it.
    public func revue(_ revue: Revue, friend friendId: String, didEndInvitation reason: InvitationEndReason) {}
}
