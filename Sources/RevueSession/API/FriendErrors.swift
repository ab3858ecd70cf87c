/// Why `FriendManager.addFriend(address:message:)` or `addFriendNorequest(friendId:)` failed.
/// An enum so that `catch FriendAddError.alreadyExists` works.
public enum FriendAddError: Error, Sendable, Hashable {
    /// The two of you are already friends (or you already sent them a request).
    case alreadyExists
    /// The address is not 76 hexadecimal digits (a friend ID is 64).
    case invalidAddress
    /// The address's checksum does not match: it was mistyped or cut.
    case badChecksum
    /// The address or friend ID is your own.
    case ownAddress
    /// The request message is longer than `FriendManager.maxRequestMessageLength` UTF-8 bytes.
    case messageTooLong
    /// `Revue.initialize(_:)` has not run, or `destroy()` has.
    case notInitialized
    /// The friend list could not be written to the data directory; nothing changed.
    case storageFailed
}

/// Why `FriendManager.deleteFriend(friendId:)` failed.
public enum FriendDeleteError: Error, Sendable, Hashable {
    /// The friend ID is not in your friend list.
    case notFound
    /// The deletion failed; `code` is always -1 and says nothing about the cause. The friend is
    /// still in your friend list.
    case failed(code: Int)
}

/// Why `FriendManager.sendMessage(friendId:message:timeout:)` failed.
public enum FriendMessageError: Error, Sendable, Hashable {
    /// The friend has no working path now; the message did not leave your device.
    case friendNotReachable
    /// Too many messages to this friend are waiting for confirmation; the message did not leave
    /// your device.
    case sendQueueFull
    /// No confirmation arrived in time. The message may still arrive (the SDK keeps retrying it in
    /// order), so sending it again can deliver it twice.
    case timeout(messageId: UInt32)
    /// The message is longer than `FriendManager.maxMessageLength` UTF-8 bytes; nothing was sent.
    case messageTooLong
    /// The friend ID is not in your friend list (or the SDK is not initialized).
    case friendNotFound
    /// The message is in the SDK's reserved format (a JSON object whose "type" is msg, adr or
    /// track, the call layer's signalling); nothing was sent. Use a key of your own, not "type".
    case reservedFormat
}
