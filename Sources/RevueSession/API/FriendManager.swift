internal import MediaCore

/// Friend requests, the friend list and friend messages of one `Revue` instance.
/// Main actor only. Every call is O(1) or O(friends) in memory; adding and deleting
/// also write the friend list to the data directory.
@MainActor
public final class FriendManager {
    /// Largest message `sendMessage` accepts, in UTF-8 bytes.
    public static let maxMessageLength = SessionCore.maxMessageLength
    /// Largest friend request message, in UTF-8 bytes.
    public static let maxRequestMessageLength = SessionCore.maxRequestMessageLength
    /// How many messages to one friend may wait for their receipt at once.
    public static let sendQueueCapacity = SessionCore.sendQueueCapacity

    unowned let revue: Revue

    init(revue: Revue) { self.revue = revue }

    /// Sends a friend request to an address (from the other side's `Revue.revueAddress`) and adds
    /// them to your friend list; they become reachable once they accept. Returns their friend ID.
    /// Throws `.invalidAddress`, `.badChecksum`, `.ownAddress`, `.alreadyExists`, `.messageTooLong`.
    @discardableResult
    public func addFriend(address: String, message: String) throws(FriendAddError) -> String {
        guard let core = revue.core else { throw .notInitialized }
        let parsed = try RevueAddress.parse(address)
        guard message.utf8.count <= Self.maxRequestMessageLength else { throw .messageTooLong }
        return try core.addFriend(key: parsed.publicKey, requestNospam: parsed.nospam, message: message)
    }

    /// Adds a friend without sending a request: how you accept a request received with
    /// `didReceiveFriendRequest`. Throws `.alreadyExists` when you are already friends.
    @discardableResult
    public func addFriendNorequest(friendId: String) throws(FriendAddError) -> String {
        guard let core = revue.core else { throw .notInitialized }
        guard let key = RevueAddress.parseFriendId(friendId) else { throw .invalidAddress }
        return try core.addFriend(key: key, requestNospam: nil, message: nil)
    }

    /// The friend IDs in the order they were added.
    public func getFriendList() -> [String] { revue.core?.friendOrder ?? [] }

    /// A friend's name ("" when unknown or not a friend).
    public func getFriendName(friendId: String) -> String { friend(friendId)?.stored.name ?? "" }

    /// A friend's status message ("" when unknown or not a friend).
    public func getFriendStatusMessage(friendId: String) -> String { friend(friendId)?.stored.statusMessage ?? "" }

    /// A friend's status as they set it (`.none` when unknown).
    public func getFriendStatus(friendId: String) -> UserStatus {
        friend(friendId).flatMap { UserStatus(rawValue: $0.stored.status) } ?? .none
    }

    /// The paths to a friend now (`.offline` when not connected or not a friend).
    public func getFriendPaths(friendId: String) -> FriendConnectionPaths {
        guard let f = friend(friendId), let core = revue.core else { return .offline }
        return f.paths(now: core.scheduler.now, timeout: core.timeouts.connectionTimeout)
    }

    /// What the presence service last heard from a friend (`.offline` without rendezvous nodes).
    public func getFriendPresenceStatus(friendId: String) -> PresenceStatus { friend(friendId)?.presence ?? .offline }

    /// Deletes a friend. Throws `.notFound` when the ID is not in your list, `.failed(code: -1)`
    /// when the friend list cannot be written (the friend stays).
    public func deleteFriend(friendId: String) throws(FriendDeleteError) {
        guard let core = revue.core else { throw .notFound }
        try core.deleteFriend(id: normalize(friendId))
    }

    /// Sends a text message and waits until the friend's device confirms it; returns its message
    /// ID. `timeout` is clamped to 5...30 s. Throws `.friendNotReachable` or `.sendQueueFull` when
    /// nothing left your device, `.timeout(messageId:)` when no receipt came in time (the SDK keeps
    /// retrying in order, so it may still arrive), `.messageTooLong`, `.friendNotFound`, and
    /// `.reservedFormat` for a message the friend's SDK would take as call signalling.
    public func sendMessage(friendId: String, message: String, timeout: Double = 10) async throws(FriendMessageError) -> UInt32 {
        guard let core = revue.core else { throw .friendNotFound }
        guard !SessionCore.isReserved(Array(message.utf8)) else { throw .reservedFormat }
        return try await core.sendMessage(friendId: normalize(friendId), message: message, timeout: Revue.clampTimeout(timeout))
            .get()
    }

    private func normalize(_ id: String) -> String { id.trimmingWhitespace().uppercased() }

    private func friend(_ id: String) -> FriendState? { revue.core?.friends[normalize(id)] }
}
