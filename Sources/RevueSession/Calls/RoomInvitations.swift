// The invitations a room has in progress, one per friend, and the invitation each participant
// connected through. `Room+Invitations.swift` decides, sends and raises the events; this type
// holds the states and their transitions, so each invitation ends exactly once: every transition
// that ends one takes its state out first.
internal import MediaCore

/// Invitations in progress by friend ID, and the invitation each participant connected through
/// (to match a late cancel or reject). A value owned by `Room`; it sends nothing and raises no
/// events. Thread rule: main actor (the room's). Cost: dictionary updates; `inProgress` sorts.
struct RoomInvitations {
    /// Where one invitation stands.
    enum State {
        /// You invited; waiting for an answer until `deadline`. `sent` once it reached the stream.
        case outgoing(inv: String, message: String, deadline: MonotonicTime, sent: Bool)
        /// You were invited; waiting for your answer until `deadline`.
        case incoming(inv: String, deadline: MonotonicTime)
        /// You accepted; waiting for the inviter's `connect` until `deadline`.
        case accepting(inv: String, deadline: MonotonicTime)

        /// The invitation's token.
        var inv: String {
            switch self {
            case .outgoing(let i, _, _, _), .incoming(let i, _), .accepting(let i, _): return i
            }
        }
    }

    /// Invitations in progress, by friend ID.
    private(set) var byFriend: [String: State] = [:]
    /// The invitation each participant connected through (none for one who joined through an
    /// introduction).
    private var connectedThrough: [String: String] = [:]

    /// The invitation in progress with a friend.
    subscript(friendId: String) -> State? { byFriend[friendId] }

    /// Whether no invitation is in progress.
    var isEmpty: Bool { byFriend.isEmpty }

    /// How many invitations are in progress.
    var count: Int { byFriend.count }

    /// Invitations in progress in friend ID order (the order the timer handles them in).
    var inProgress: [(id: String, state: State)] { byFriend.sorted(by: { $0.key < $1.key }).map { ($0.key, $0.value) } }

    /// You invited `id` with `inv`.
    mutating func invite(_ id: String, inv: String, message: String, deadline: MonotonicTime, sent: Bool) {
        byFriend[id] = .outgoing(inv: inv, message: message, deadline: deadline, sent: sent)
    }

    /// Your invitation to `id`, once held back, reached its stream.
    mutating func markSent(_ id: String) {
        guard case .outgoing(let inv, let message, let deadline, false) = byFriend[id] else { return }
        byFriend[id] = .outgoing(inv: inv, message: message, deadline: deadline, sent: true)
    }

    /// Whether your invitation to `id` with `inv` is still waiting for its answer.
    func isOutgoing(_ id: String, inv: String?) -> Bool {
        guard case .outgoing(let current, _, _, _) = byFriend[id] else { return false }
        return current == inv
    }

    /// `id` invited you with `inv`.
    mutating func invited(by id: String, inv: String, deadline: MonotonicTime) {
        byFriend[id] = .incoming(inv: inv, deadline: deadline)
    }

    /// You accepted `id`'s invitation `inv`; waiting for its `connect` until `deadline`.
    mutating func accepted(_ id: String, inv: String, deadline: MonotonicTime) {
        byFriend[id] = .accepting(inv: inv, deadline: deadline)
    }

    /// Ends the invitation with `id`: takes its state out (nil: none was in progress).
    @discardableResult
    mutating func end(_ id: String) -> State? { byFriend.removeValue(forKey: id) }

    /// `id` became a participant, through `inv` (nil: an introduction); an invitation with them
    /// still in progress ends here.
    mutating func connected(_ id: String, through inv: String?) {
        connectedThrough[id] = inv
        byFriend[id] = nil
    }

    /// The invitation participant `id` connected through.
    func connection(of id: String) -> String? { connectedThrough[id] }

    /// Participant `id` left.
    mutating func participantLeft(_ id: String) { connectedThrough[id] = nil }

    /// Forgets every invitation and connection.
    mutating func removeAll() { self = RoomInvitations() }
}
