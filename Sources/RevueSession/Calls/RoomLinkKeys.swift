// What a room link's secret is turned into, and the two messages of a link room that travel
// through the SFU, where the server reads them: a joiner's request (its public key, its name
// sealed, a proof that it holds the link) and the host's key envelopes (the room key of an epoch,
// sealed to each admitted participant's public key). Pure functions of their inputs: no clock,
// no I/O. docs/security.md, "Rooms joined by link".
internal import MediaCore

/// The keys one link derives: a public identifier, the key join proofs are made with, and the
/// key display names are sealed with. All three depend on the secret and on the server, room
/// and host key the link names, so the same secret under another room derives other keys.
///
/// Thread rule: a value type, any thread. Cost: `init` runs one HKDF (three HMAC-BLAKE2b).
package struct RoomLinkKeys: Sendable {
    /// 16 bytes that name the link (in revocation lists); they reveal nothing of the secret.
    package let linkID: [UInt8]
    /// The key of join proofs (32 bytes).
    let admissionKey: [UInt8]
    /// The key display names are sealed with (32 bytes): the server does not learn them.
    let nameKey: [UInt8]
    /// The room number, bound into every proof.
    let room: UInt64

    /// The keys of `link`. Thread rule: any thread. Cost: one HKDF.
    package init(_ link: RoomLink) {
        self.init(secret: link.secret, server: link.server, hostKey: link.hostKey)
    }

    /// The keys of a link made of `secret`, `server` (its URL and room) and `hostKey`, without its
    /// text. Thread rule: any thread. Cost: one HKDF.
    package init(secret: [UInt8], server: SFUServer, hostKey: [UInt8]) {
        let context = Array("revue room link 1\u{0}\(server.url)\u{0}\(server.room)\u{0}".utf8) + hostKey
        let out = Sodium.hkdf(chainingKey: secret, input: context, outputs: 3)
        linkID = Array(out[0].prefix(16))
        admissionKey = Array(out[1].prefix(32))
        nameKey = Array(out[2].prefix(32))
        room = server.room
    }

    /// The link's identifier in hex (32 characters), for the host's list of links.
    package var linkIDHex: String { linkID.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() }
}

/// A joiner's request to be let into a link room, carried as its display name at the SFU:
/// `rl1.PUBLIC.NONCE.NAME.PROOF` (base64url; NONCE 8 bytes, NAME the display name sealed under
/// the link's name key, PROOF 16 bytes of keyed BLAKE2b under its admission key over the room,
/// the public key, the nonce and the sealed name).
///
/// Thread rule: a value type, any thread. Cost: `make` and `open` are one AEAD and one MAC
/// over at most `maxText` bytes.
package struct RoomLinkJoinRequest: Sendable, Hashable {
    /// The longest request text read (longer ones are refused unread).
    package static let maxText = 400
    /// The longest display name, in UTF-8 bytes.
    package static let maxName = 64
    static let prefix = "rl1."

    /// The joiner's X25519 public key: the host seals room keys to it.
    package let publicKey: [UInt8]
    /// The display name the joiner chose.
    package let name: String

    /// The request text for `publicKey` and `name` under `keys` (`nonce` random unless given).
    /// Nil when the name is empty, too long or has a control character.
    package static func make(publicKey: [UInt8], name: String, keys: RoomLinkKeys, nonce: UInt64? = nil) -> String? {
        guard publicKey.count == 32, isAcceptable(name) else { return nil }
        let nonce = nonce ?? RandomBytes.uint64()
        let sealedName = Sodium.seal(key: keys.nameKey, nonce: nonce, ad: publicKey, plaintext: Array(name.utf8))
        let n = linkBytes(nonce)
        let proof = Self.proof(keys, publicKey, n, sealedName)
        return prefix + [publicKey, n, sealedName, proof].map(Base64.encodeURL).joined(separator: ".")
    }

    /// The request in `text` if it was made under `keys`; nil for anything else (another link,
    /// another room, a byte changed, a name that does not open, a text too long).
    package static func open(_ text: String, keys: RoomLinkKeys) -> RoomLinkJoinRequest? {
        guard let parts = fields(text), parts[1].count == 8, parts[3].count == 16,
            Sodium.equal(parts[3], proof(keys, parts[0], parts[1], parts[2]))
        else { return nil }
        let nonce = parts[1].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard let plain = Sodium.open(key: keys.nameKey, nonce: nonce, ad: parts[0], ciphertext: parts[2]),
            let name = String(validating: plain, as: UTF8.self), isAcceptable(name)
        else { return nil }
        return RoomLinkJoinRequest(publicKey: parts[0], name: name)
    }

    /// Whether `text` has the request's shape (it may still be forged): the four fields decoded,
    /// a 32-byte public key. Nil otherwise.
    static func fields(_ text: String) -> [[UInt8]]? {
        guard text.utf8.count <= maxText, text.hasPrefix(prefix) else { return nil }
        let parts = text.dropFirst(prefix.count).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        let decoded = parts.compactMap { Base64.decodeURL(String($0)) }
        guard decoded.count == 4, decoded[0].count == 32 else { return nil }
        return decoded
    }

    /// The public key a request text names, unchecked (to tell who a refused request was from).
    package static func claimedKey(_ text: String) -> [UInt8]? { fields(text)?[0] }

    static func proof(_ keys: RoomLinkKeys, _ publicKey: [UInt8], _ nonce: [UInt8], _ sealedName: [UInt8]) -> [UInt8] {
        let data = Array("join".utf8) + linkBytes(keys.room) + publicKey + nonce + sealedName
        return Sodium.keyedBlake2b(key: keys.admissionKey, data, outputLength: 16)
    }

    static func isAcceptable(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= maxName
            && !name.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }
    }
}

/// One participant of a link room as the host lists it: its feed at the SFU, the tag of its
/// public key (16 hex digits; its identity in the room is `link-TAG`) and its display name.
/// Thread rule: a value type, any thread. Cost: none.
package struct RoomLinkRosterEntry: Sendable, Hashable {
    /// The participant's feed at the SFU.
    package let feed: UInt64
    /// The first 8 bytes of its public key in hex.
    package let tag: String
    /// The display name it chose.
    package let name: String

    /// An entry of these fields. Cost: none.
    package init(feed: UInt64, tag: String, name: String) {
        self.feed = feed
        self.tag = tag
        self.name = name
    }

    /// The tag of a public key: its first 8 bytes in hex.
    package static func tag(_ publicKey: [UInt8]) -> String {
        publicKey.prefix(8).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}

/// The host's room key of one epoch, sealed to each admitted participant, and the room's roster
/// sealed under that key, carried as the host's display name at the SFU:
/// `rlh1.EPOCH.ENTRY,ENTRY,...~ROSTER`, each entry `TAG:SEALED` (TAG the first 8 bytes of the
/// participant's public key, SEALED the 32-byte room key under a key both derive from X25519
/// between the host's key and the participant's), ROSTER the participants' feeds, tags and names.
/// Whoever is left out of an epoch (removed, or admitted after it) opens neither.
///
/// Thread rule: a value type, any thread. Cost: one X25519 and one AEAD per entry.
package enum RoomLinkEnvelope {
    /// The most participants one envelope text holds.
    package static let maxEntries = 32
    /// The longest envelope text read.
    package static let maxText = 8192
    static let prefix = "rlh1."

    /// The envelope text of `roomKey` for `epoch`, sealed to each of `members`, with `roster`
    /// (at most `maxEntries` each; nil past that, for a bad key or a point of small order).
    static func seal(
        roomKey: [UInt8], epoch: UInt64, room: UInt64, hostSecret: SecretKeyBytes, members: [[UInt8]],
        roster: [RoomLinkRosterEntry] = []
    ) -> String? {
        guard roomKey.count == 32, members.count <= maxEntries, roster.count <= maxEntries + 1 else { return nil }
        var entries: [String] = []
        for member in members {
            guard member.count == 32, let key = pairKey(hostSecret, member, room: room, epoch: epoch) else { return nil }
            let sealed = Sodium.seal(key: key, nonce: epoch, ad: member + linkBytes(room), plaintext: roomKey)
            entries.append(Base64.encodeURL(Array(member.prefix(8))) + ":" + Base64.encodeURL(sealed))
        }
        let lines = roster.map { "\($0.feed)\t\($0.tag)\t\($0.name)" }.joined(separator: "\n")
        let sealedRoster = Sodium.seal(
            key: rosterKey(roomKey), nonce: epoch, ad: Array("roster".utf8) + linkBytes(room), plaintext: Array(lines.utf8))
        let text = prefix + String(epoch) + "." + entries.joined(separator: ",") + "~" + Base64.encodeURL(sealedRoster)
        return text.utf8.count <= maxText ? text : nil
    }

    /// The epoch, room key and roster sealed to `memberSecret` (whose public key is
    /// `memberPublic`) in `text` by the holder of `hostKey`'s private key; nil when there is none
    /// for us, or it was not made by the host, or `text` is not an envelope.
    static func open(
        _ text: String, room: UInt64, hostKey: [UInt8], memberSecret: SecretKeyBytes, memberPublic: [UInt8]
    ) -> (epoch: UInt64, roomKey: [UInt8], roster: [RoomLinkRosterEntry])? {
        guard text.utf8.count <= maxText, text.hasPrefix(prefix) else { return nil }
        let body = text.dropFirst(prefix.count)
        guard let dot = body.firstIndex(of: "."), let epoch = UInt64(body[..<dot]) else { return nil }
        let rest = body[body.index(after: dot)...].split(separator: "~", omittingEmptySubsequences: false)
        guard rest.count == 2 else { return nil }
        let tag = Base64.encodeURL(Array(memberPublic.prefix(8)))
        for entry in rest[0].split(separator: ",").prefix(maxEntries) {
            let pair = entry.split(separator: ":", omittingEmptySubsequences: false)
            guard pair.count == 2, pair[0] == tag, let sealed = Base64.decodeURL(String(pair[1])),
                let key = pairKey(memberSecret, hostKey, room: room, epoch: epoch),
                let roomKey = Sodium.open(key: key, nonce: epoch, ad: memberPublic + linkBytes(room), ciphertext: sealed),
                roomKey.count == 32
            else { continue }
            guard let sealedRoster = Base64.decodeURL(String(rest[1])),
                let plain = Sodium.open(
                    key: rosterKey(roomKey), nonce: epoch, ad: Array("roster".utf8) + linkBytes(room), ciphertext: sealedRoster),
                let lines = String(validating: plain, as: UTF8.self)
            else { return nil }
            var roster: [RoomLinkRosterEntry] = []
            for line in lines.split(separator: "\n").prefix(maxEntries + 1) {
                let f = line.split(separator: "\t", omittingEmptySubsequences: false)
                guard f.count == 3, let feed = UInt64(f[0]), f[1].utf8.count == 16 else { return nil }
                roster.append(RoomLinkRosterEntry(feed: feed, tag: String(f[1]), name: String(f[2])))
            }
            return (epoch, roomKey, roster)
        }
        return nil
    }

    /// The key the roster is sealed with, apart from the room key's other uses.
    static func rosterKey(_ roomKey: [UInt8]) -> [UInt8] {
        Sodium.keyedBlake2b(key: roomKey, Array("roster".utf8), outputLength: 32)
    }

    /// The key of one entry: HKDF over the X25519 of our secret and their public key.
    static func pairKey(_ secret: SecretKeyBytes, _ peer: [UInt8], room: UInt64, epoch: UInt64) -> [UInt8]? {
        guard var shared = Sodium.x25519(secret: secret, peerPublic: peer) else { return nil }
        defer { Sodium.wipe(&shared) }
        let out = Sodium.hkdf(
            chainingKey: shared, input: Array("revue room envelope".utf8) + linkBytes(room) + linkBytes(epoch), outputs: 2)
        return Array(out[0].prefix(32))
    }
}

/// Each sender's SFrame keys in a link room: from the epoch's room key and the sender's feed,
/// a base key and one key ID per kind. Every participant holding the room key derives every
/// sender's keys, so each stream is bound to the key IDs of the feed the server says it
/// carries, as in other SFU rooms.
///
/// Thread rule: any thread. Cost: two keyed BLAKE2b per call.
package enum RoomLinkSenderKeys {
    /// The base key (16 bytes) and the video and audio key IDs (distinct, below 2^32) of `feed`
    /// under `roomKey`.
    package static func keys(roomKey: [UInt8], feed: UInt64) -> (baseKey: [UInt8], video: UInt64, audio: UInt64) {
        let base = Sodium.keyedBlake2b(key: roomKey, Array("sframe".utf8) + linkBytes(feed), outputLength: 16)
        let ids = Sodium.keyedBlake2b(key: roomKey, Array("kid".utf8) + linkBytes(feed), outputLength: 8)
        let video = UInt64(ids[0..<4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        var audio = UInt64(ids[4..<8].reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        if audio == video { audio ^= 1 }
        return (base, video, audio)
    }
}

/// `v` as 8 big-endian bytes.
func linkBytes(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: v >> (56 - 8 * UInt64($0))) } }
