/// Why an invitation call of `FriendManager` failed. An enum so
/// that `catch FriendCallError.invalidState` works.
public enum FriendCallError: Error, Sendable, Hashable {
    /// No invitation in the state the call needs: `cancelInvitation` with no invitation of yours
    /// waiting, `rejectInvitation`/`acceptInvitation` with no invitation from that friend waiting,
    /// or `sendInvitation` while an invitation with that friend is in progress or you are already
    /// in a call with them. Harmless after the other side ended it: `didEndInvitation` has arrived.
    case invalidState
    /// The friend ID is not in your friend list (or the SDK is not initialized).
    case friendNotFound
    /// `acceptInvitation`: the inviting friend has no working path now; the invitation stays, so
    /// the user can retry.
    case friendNotReachable
    /// The invitation message is longer than `FriendManager.maxInvitationMessageLength` bytes.
    case messageTooLong
}
