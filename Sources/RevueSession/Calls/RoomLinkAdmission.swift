// The host's decisions in a link room: which links are live, which were revoked, who was let in
// by which link, who was removed. The host feeds it what the SFU shows (each participant's feed
// and display text) and performs what it answers (seal the next epoch's key to the members,
// kick a removed participant at the server). Pure: no clock, no I/O, every list bounded.
internal import MediaCore

/// Who the host of a link room lets in. A value owned by the host; it sends nothing.
///
/// Thread rule: the owner's (the room's main actor). Cost: `consider` tries each live link's
/// proof (one keyed BLAKE2b each, at most `maxLinks`) and, for revoked ones, at most
/// `maxRevoked` more; everything else is a dictionary or set operation.
package struct RoomLinkAdmission: Sendable {
    /// Why a request was refused. Each is counted in `refusals`.
    package enum Refusal: Sendable, Hashable, CaseIterable {
        /// Not a join request, or not made under any link this host made (a guess, a tampered
        /// link, another room's link).
        case unknownLink
        /// Made under a link the host revoked.
        case revoked
        /// From a participant the host removed (its public key).
        case removed
        /// A public key already let in under another feed (a copied request).
        case duplicate
        /// The room has `maxMembers` link participants already.
        case full
    }

    /// A participant let in by a link.
    package struct Member: Sendable, Hashable {
        /// Its feed at the SFU.
        package let feed: UInt64
        /// Its X25519 public key: room keys are sealed to it.
        package let publicKey: [UInt8]
        /// The display name it chose.
        package let name: String
        /// The link it came in by.
        package let linkID: [UInt8]
    }

    /// What `consider` decided.
    package enum Decision: Sendable, Hashable {
        /// Let in, as this member.
        case admit(Member)
        /// Refused, for this reason.
        case refuse(Refusal)
    }

    /// Most live links at once.
    package static let maxLinks = 8
    /// Most revoked links remembered (the oldest is forgotten past it; its requests are then
    /// refused as `.unknownLink`, still refused).
    package static let maxRevoked = 64
    /// Most link participants (one envelope holds them all).
    package static let maxMembers = RoomLinkEnvelope.maxEntries
    /// Most removed public keys remembered.
    package static let maxRemoved = 256

    private(set) var live: [RoomLinkKeys] = []
    private(set) var revokedLinks: [RoomLinkKeys] = []
    /// Members by feed.
    package private(set) var members: [UInt64: Member] = [:]
    private(set) var removedKeys: [[UInt8]] = []
    /// Refusals so far, by reason.
    package private(set) var refusals: [Refusal: Int] = [:]

    /// No link live, nobody let in. Cost: none.
    package init() {}

    /// Starts admitting by the link of `keys`; false when `maxLinks` are live already or it
    /// was revoked (a revoked link stays revoked).
    @discardableResult
    package mutating func open(_ keys: RoomLinkKeys) -> Bool {
        guard live.count < Self.maxLinks, !revokedLinks.contains(where: { $0.linkID == keys.linkID }) else { return false }
        if !live.contains(where: { $0.linkID == keys.linkID }) { live.append(keys) }
        return true
    }

    /// Stops admitting by the link `linkID`; those it let in stay until removed. False when no
    /// live link has that ID.
    @discardableResult
    package mutating func revoke(linkID: [UInt8]) -> Bool {
        guard let i = live.firstIndex(where: { $0.linkID == linkID }) else { return false }
        revokedLinks.append(live.remove(at: i))
        if revokedLinks.count > Self.maxRevoked { revokedLinks.removeFirst() }
        return true
    }

    /// Whether `linkID` is live.
    package func isLive(_ linkID: [UInt8]) -> Bool { live.contains { $0.linkID == linkID } }

    /// Decides on the participant at `feed` whose display text is `text`. A member already let
    /// in at that feed with that key is admitted again (the server lists it every time), also
    /// after its link was revoked.
    package mutating func consider(_ text: String, feed: UInt64) -> Decision {
        let decision = decide(text, feed: feed)
        switch decision {
        case .admit(let m): members[feed] = m
        case .refuse(let r): refusals[r, default: 0] += 1
        }
        return decision
    }

    private func decide(_ text: String, feed: UInt64) -> Decision {
        // A member listed again with its request: it stays, even if its link was revoked since.
        if let known = members[feed], RoomLinkJoinRequest.claimedKey(text) == known.publicKey { return .admit(known) }
        var opened: (RoomLinkJoinRequest, RoomLinkKeys)?
        for keys in live {
            if let r = RoomLinkJoinRequest.open(text, keys: keys) {
                opened = (r, keys)
                break
            }
        }
        guard let opened else {
            let underRevoked = revokedLinks.contains { RoomLinkJoinRequest.open(text, keys: $0) != nil }
            return .refuse(underRevoked ? .revoked : .unknownLink)
        }
        let (request, keys) = opened
        if removedKeys.contains(request.publicKey) { return .refuse(.removed) }
        let member = Member(feed: feed, publicKey: request.publicKey, name: request.name, linkID: keys.linkID)
        if members.values.contains(where: { $0.publicKey == request.publicKey && $0.feed != feed }) {
            return .refuse(.duplicate)
        }
        guard members.count < Self.maxMembers || members[feed] != nil else { return .refuse(.full) }
        return .admit(member)
    }

    /// Removes the member at `feed`: its public key is refused from now on, and it is left out
    /// of the next epoch's envelope. Nil when no member is there.
    @discardableResult
    package mutating func remove(feed: UInt64) -> Member? {
        guard let m = members.removeValue(forKey: feed) else { return nil }
        removedKeys.append(m.publicKey)
        if removedKeys.count > Self.maxRemoved { removedKeys.removeFirst() }
        return m
    }

    /// A member whose session at the SFU was made again (after its connection to the server was
    /// lost): listed at a new `feed`, while its old feed is not among `listed`, with a request
    /// that opens under the link it came in by (live, or revoked since) and names its key. It
    /// keeps its place at the new feed; the old feed and the new one are returned. Nil otherwise
    /// (the request is then `consider`ed as any other).
    package mutating func rejoin(_ text: String, feed: UInt64, listed: Set<UInt64>) -> (old: UInt64, member: Member)? {
        guard members[feed] == nil, let key = RoomLinkJoinRequest.claimedKey(text),
            let old = members.first(where: { $0.value.publicKey == key && !listed.contains($0.key) }),
            let keys = (live + revokedLinks).first(where: { $0.linkID == old.value.linkID }),
            RoomLinkJoinRequest.open(text, keys: keys)?.publicKey == key
        else { return nil }
        let m = Member(feed: feed, publicKey: key, name: old.value.name, linkID: old.value.linkID)
        members[old.key] = nil
        members[feed] = m
        return (old.key, m)
    }

    /// The member at `feed` left on its own (it may come back while its link is live).
    @discardableResult
    package mutating func left(feed: UInt64) -> Member? { members.removeValue(forKey: feed) }

    /// Members' public keys in feed order: whom the next envelope is sealed to.
    package var recipients: [[UInt8]] { members.sorted { $0.key < $1.key }.map(\.value.publicKey) }
}
