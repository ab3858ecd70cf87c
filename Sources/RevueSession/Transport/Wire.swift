// The session wire format: every datagram starts with a type byte in 0x50...0x5F, clear of the
// RFC 7983 demultiplexing ranges (STUN 0-3, DTLS 20-63, RTP/RTCP 128-191). docs/session.md has
// the byte layouts.

package import MediaCore

/// The first byte of each session datagram.
package enum PacketType: UInt8 {
    /// The first bytes a session packet may start with: 80-95, a block RFC 7983 gives to no other
    /// protocol sharing a socket with STUN, TURN, DTLS and SRTP (every type below is in it).
    package static let firstByteRange: ClosedRange<UInt8> = 80...95

    /// Noise IK message 1: [type][version][sender index u32][e, s, payload][mac1 16][mac2 16].
    /// mac1 = keyed BLAKE2b (key `HandshakeMACs.mac1Key(responder public key)`) over the bytes
    /// before it; mac2 = keyed BLAKE2b (key: a cookie from the responder) over the bytes before
    /// it, or zeros without a cookie.
    case handshakeInitiation = 0x51
    /// Noise IK message 2: [type][version][sender index u32][receiver index u32][e, payload].
    case handshakeResponse = 0x52
    /// Transport data: [type][receiver index u32][counter u64][AEAD(frame)], header as AD.
    case transportData = 0x53
    /// Answer to an initiation while the responder is under load:
    /// [type][version][receiver index u32][nonce u64][AEAD(cookie 16)], key
    /// `HandshakeMACs.cookieKey(responder public key)`, AD the initiation's mac1.
    case cookieReply = 0x54
    /// To a rendezvous node, from a registered peer: [type][version][registration key 32]
    /// [nonce u64][AEAD(zeros)] (`RendezvousAuth.credentialsRequestLength`), key = the
    /// registration's MAC key, AD = the 42 bytes before, nonce < 2^62 and above every nonce the
    /// node answered for that registration (the lookup clock). Asks for TURN credentials; the
    /// zeros make it at least as large as the largest answer.
    case turnCredentialsRequest = 0x55
    /// From a rendezvous node: [type][version][nonce u64 = the request's + 2^62][AEAD(valid for
    /// s u32, username s8, password s8, count u8, [transport u8: 0 UDP, 1 TCP][endpoint 7|19] x
    /// count)], key = the registration's MAC key, AD = the 10 bytes before. coturn's
    /// shared-secret credentials (`TURNCredentials`) for the node's TURN servers; count 0 when
    /// the node offers none (ask again after the time given).
    case turnCredentials = 0x56
    /// To a rendezvous node: [type][version][registration key 32][timestamp u64][cookie 16]
    /// [AEAD(status u8, tag 16 x n)], n <= `RendezvousAuth.maxTagsPerRegistration`; AEAD key =
    /// `RendezvousAuth.key` of the per-node registration key pair and the node's key, nonce = the
    /// timestamp (below 2^62, growing), AD = the 58 bytes before; cookie = the last one the node
    /// gave this endpoint.
    /// Before the node's key is known: an empty AEAD of 16 zero bytes (asks for key and cookie).
    /// The registration key is random per node and run, never the long-term key; the tags are
    /// `PrivacyTags.rendezvous` for each friend and `PrivacyTags.request` for ourselves.
    case rendezvousRegister = 0x58
    /// From a rendezvous node, in one of two forms (the third byte tells which):
    /// - sealed, to a registration that opened under its key with a growing timestamp:
    ///   [type][version][1][nonce u64 = the timestamp + 3 x 2^62][AEAD(accepted u8, cookie 16,
    ///   relay token 16)] (token zeros unless accepted), key = the registration's MAC key, AD =
    ///   the 11 bytes before (`RendezvousAuth.registeredLength`);
    /// - unsealed, to anything else (first contact, no cookie yet, an unknown key):
    ///   [type][version][0][node key 32][cookie 16] (`RendezvousAuth.registeredUnsealedLength`):
    ///   never an acceptance or a token, and believed only while the node has not accepted us lately.
    /// Neither echoes the sender's endpoint: a STUN Binding request to the node tells that, and an
    /// IPv6 endpoint would make the answer larger than the smallest registration.
    case rendezvousRegistered = 0x59
    /// To a rendezvous node: [type][version][registration key 32][nonce u64][AEAD(tag 16)], key =
    /// the registration key, AD = the 42 bytes before, nonce < 2^62 never reused (a clock; the
    /// node answers each nonce once and only one above the lowest of the last four it answered).
    case rendezvousLookup = 0x5A
    /// From a rendezvous node: [type][version][nonce u64 = the lookup's + 2^63][AEAD([tag 16]
    /// [found u8][status u8][age s u16][endpoint 7|19, only when found is 1])], key = the asker's
    /// registration key, AD = the 10 bytes before.
    case rendezvousLookupReply = 0x5B
    /// To a rendezvous node: [type][version][registration key 32][relay token 16][target tag 16]
    /// [source tag 16][inner datagram]; the source tag must be one the sender registered.
    case relaySend = 0x5C
    /// From a rendezvous node: [type][version][source tag 16][inner datagram].
    case relayDeliver = 0x5D
    /// LAN discovery announcement, on the multicast socket only: [type][version][port u16][count u8]
    /// [tag 16 x count], count a multiple of 8 (random filler), at most `PrivacyTags.maxLANTags`;
    /// the tags are `PrivacyTags.lan` for each friend and `PrivacyTags.lanRequest` for ourselves.
    case lanAnnounce = 0x5E
}

/// Frames inside an encrypted transport packet (first plaintext byte).
package enum FrameType: UInt8 {
    /// [type][sender clock ns u64]: keepalive that asks for a pong (RTT).
    case ping = 0
    /// [type][echoed clock ns u64].
    case pong = 1
    /// [type][stream epoch u32][seq u32][kind u8][body]: one reliable, ordered item.
    case reliable = 2
    /// [type][stream epoch u32][seq u32]: every item up to seq of that epoch is delivered.
    case ack = 3
    /// [type]: the sender is going offline (destroy); drop its sessions now.
    case bye = 4
    /// [type][ufrag s8][password s8][your ufrag s8][your candidates taken u8][count u8]
    /// [candidate s8 x count] (s8: a one-byte length, then UTF-8; candidates in SDP form, RFC 8839):
    /// the sender's ICE agent of the friend's link (`FriendLink`), and what it knows of ours.
    case link = 5
}

/// Kinds of reliable items.
package enum ReliableKind: UInt8 {
    /// A friend message (UTF-8 text).
    case message = 1
    /// The sender's profile: [status u8][name length u16][name][status message].
    case profile = 2
}

/// Handshake payload kinds (first plaintext byte of message 1's payload).
package enum HandshakeKind: UInt8 {
    /// A friend reconnecting: [kind][timestamp u64].
    case connect = 0
    /// A friend request: [kind][timestamp u64][nospam u32][message].
    case friendRequest = 1
}

/// Builds a session datagram in a byte array: little-endian fields (the session wire's order)
/// through the engine's byte appends (`appendU16(_:_:)` and the rest, MediaBase/Bytes). A value
/// on one thread; each field is an amortized O(1) append.
package struct ByteWriter {
    package var bytes: [UInt8] = []

    package init(capacity: Int = 64) { bytes.reserveCapacity(capacity) }

    package mutating func u8(_ v: UInt8) { bytes.appendU8(v) }
    package mutating func u16(_ v: UInt16) { bytes.appendU16(v, .little) }
    package mutating func u32(_ v: UInt32) { bytes.appendU32(v, .little) }
    package mutating func u64(_ v: UInt64) { bytes.appendU64(v, .little) }
    package mutating func append(_ b: some Sequence<UInt8>) { bytes.append(contentsOf: b) }

    /// An endpoint: [family u8: 4 or 6][address 4 or 16 bytes, network order][port u16]
    /// (`RendezvousAuth.endpointLength` bytes). The one address encoding of the session protocol.
    package mutating func endpoint(_ a: SocketAddress) {
        u8(a.family == .ipv4 ? 4 : 6)
        append(a.addressBytes)
        u16(a.port)
    }
}

/// Reads a session datagram it owns: little-endian fields through the engine's span reads
/// (`RawSpan.u16(_:_:)` and the rest, MediaBase/Bytes); every read returns nil past the end, so
/// a truncated datagram is rejected, never read out of bounds. A value on one thread; reads are
/// O(1), `take` and `rest` copy.
package struct ByteReader {
    package let bytes: [UInt8]
    package var offset: Int

    package init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    package var remaining: Int { bytes.count - offset }

    package mutating func u8() -> UInt8? {
        guard remaining >= 1 else { return nil }
        defer { offset += 1 }
        return bytes[offset]
    }

    package mutating func u16() -> UInt16? {
        guard remaining >= 2 else { return nil }
        defer { offset += 2 }
        return bytes.span.bytes.u16(offset, .little)
    }

    package mutating func u32() -> UInt32? {
        guard remaining >= 4 else { return nil }
        defer { offset += 4 }
        return bytes.span.bytes.u32(offset, .little)
    }

    package mutating func u64() -> UInt64? {
        guard remaining >= 8 else { return nil }
        defer { offset += 8 }
        return bytes.span.bytes.u64(offset, .little)
    }

    package mutating func take(_ n: Int) -> [UInt8]? {
        guard n >= 0, remaining >= n else { return nil }
        defer { offset += n }
        return Array(bytes[offset..<offset + n])
    }

    /// An endpoint as `ByteWriter.endpoint` writes it; nil for a truncated one or another family byte.
    package mutating func endpoint() -> SocketAddress? {
        switch u8() {
        case 4:
            guard let a = take(4), let port = u16() else { return nil }
            return SocketAddress(ipv4: a[0], a[1], a[2], a[3], port: port)
        case 6:
            guard let a = take(16), let port = u16() else { return nil }
            return SocketAddress(ipv6: a, port: port)
        default:
            return nil
        }
    }

    package mutating func rest() -> [UInt8] {
        defer { offset = bytes.count }
        return Array(bytes[offset...])
    }
}

/// Authentication of rendezvous registrations and their answers: only the holder of a static key
/// can register an endpoint for it, and only the node can answer it. The MAC key comes from X25519
/// between the peer's registration key and the node's static key (which the node sends in its
/// unsealed answers), so an off-path sender cannot move someone's endpoint or hand a peer a relay
/// token or cookie, and the increasing timestamp stops a captured registration (or its sealed
/// answer) from being replayed. Pure functions and constants, any thread.
package enum RendezvousAuth {
    /// A registration without tags (the smallest; the first, before the node's key is known).
    package static let registerLength = 1 + 1 + 32 + 8 + 16 + 1 + 16
    /// The registration header that is the AEAD's AD.
    package static let registerHeaderLength = 1 + 1 + 32 + 8 + 16
    /// Tags one registration datagram carries at most (587 bytes): more take several datagrams.
    package static let maxTagsPerRegistration = 32
    /// An endpoint on the wire (`ByteWriter.endpoint`): family byte, address, port.
    package static func endpointLength(_ family: SocketAddress.Family) -> Int { family == .ipv4 ? 1 + 4 + 2 : 1 + 16 + 2 }
    /// The form byte of a sealed registration answer.
    package static let registeredSealed: UInt8 = 1
    /// The form byte of an unsealed registration answer (node key and cookie).
    package static let registeredUnsealed: UInt8 = 0
    /// A sealed registration answer (60 bytes, less than the smallest registration).
    package static let registeredLength = 1 + 1 + 1 + 8 + (1 + 16 + 16) + 16
    /// An unsealed registration answer (51 bytes, less than the smallest registration).
    package static let registeredUnsealedLength = 1 + 1 + 1 + 32 + 16
    /// The bits a sealed registration answer sets in the registration's timestamp to make its
    /// nonce: apart from the registration's own (top bits clear) and from lookup answers' (top
    /// bit set, the next clear), so no nonce seals two messages under one key.
    package static let registeredNonceBits: UInt64 = 3 << 62
    /// A lookup (74 bytes).
    package static let lookupLength = 1 + 1 + 32 + 8 + 16 + 16
    /// A lookup answer: without an endpoint (not found, 46 bytes), or with one of `family` (53 or
    /// 65 bytes), always smaller than the 74-byte lookup.
    package static func lookupReplyLength(_ family: SocketAddress.Family?) -> Int {
        1 + 1 + 8 + 16 + 1 + 1 + 2 + (family.map(endpointLength) ?? 0) + 16
    }
    /// TURN servers one credentials answer names at most.
    package static let maxTURNServers = 4
    /// A TURN user name on the wire is at most this long ("<expiry>:<id>").
    package static let maxTURNUsernameLength = 32
    /// A TURN password on the wire is at most this long (base64 of an HMAC-SHA1: 28).
    package static let maxTURNPasswordLength = 28
    /// The nonce bit a credentials answer sets in its request's nonce: apart from registrations
    /// and lookups (top bits clear), registration answers (both set) and lookup answers (top bit
    /// set, the next clear).
    package static let credentialsNonceBit: UInt64 = 1 << 62
    /// The TLS servers' names of one credentials answer (each checked against its certificate)
    /// take at most this many bytes together.
    package static let maxTURNServerNamesLength = 64
    /// The largest credentials answer: four IPv6 TLS servers, the longest names, user name and
    /// password (241 bytes).
    package static let maxCredentialsLength =
        1 + 1 + 8 + 4 + (1 + maxTURNUsernameLength) + (1 + maxTURNPasswordLength) + 1
        + maxTURNServers * (1 + 19 + 1) + maxTURNServerNamesLength + 16
    /// The zeros a credentials request seals, so that it is never smaller than its answer.
    package static let credentialsPaddingLength = maxCredentialsLength - (1 + 1 + 32 + 8 + 16)
    /// A credentials request (241 bytes): never smaller than its answer.
    package static let credentialsRequestLength = 1 + 1 + 32 + 8 + credentialsPaddingLength + 16
    /// The relay send header before the inner datagram.
    package static let relaySendHeaderLength = 1 + 1 + 32 + 16 + 16 + 16
    /// The relay deliver header before the inner datagram.
    package static let relayDeliverHeaderLength = 1 + 1 + 16

    /// The MAC key of a registration key pair and a node (either side's secret, the other's
    /// public key); nil for an invalid (small-order) key. One X25519 and one BLAKE2b.
    package static func key(secret: SecretKeyBytes, peerPublic: [UInt8]) -> [UInt8]? {
        guard var shared = Sodium.x25519(secret: secret, peerPublic: peerPublic) else { return nil }
        defer { Sodium.wipe(&shared) }
        return Sodium.blake2b(shared, Array("revue rendezvous v1".utf8), outputLength: 32)
    }

    /// `key`, held in zeroing storage (what peers and nodes keep): the plain array is wiped.
    package static func heldKey(secret: SecretKeyBytes, peerPublic: [UInt8]) -> SecretKeyBytes? {
        guard var k = key(secret: secret, peerPublic: peerPublic) else { return nil }
        return SecretKeyBytes(wiping: &k)
    }
}

/// Blinded, rotating tags that stand for a friend pair on the wire instead of long-term keys
/// (docs/security.md, What an observer still learns). A tag is 16 bytes of keyed BLAKE2b under a
/// pair key (BLAKE2b of the pair's X25519 shared secret), over a label, the owner's public key (so
/// the two directions differ) and the epoch (the UTC hour): only the two friends can compute it,
/// the tags of two epochs or two pairs are unrelated, and nobody else can tell which key a tag
/// belongs to. Pure functions, any thread; one BLAKE2b each (the pair key costs one X25519).
package enum PrivacyTags {
    /// Seconds per epoch.
    package static let epochLength = 3600.0
    /// Within this many seconds of an epoch boundary the neighbouring epoch's tags are registered
    /// and announced too (tolerates clocks that far apart).
    package static let boundaryMargin = 600.0
    /// Tags one LAN announcement carries at most (1,043 bytes).
    package static let maxLANTags = 64

    /// The epoch of a wall-clock time (seconds since 1970).
    package static func epoch(_ wallSeconds: Double) -> UInt32 {
        guard wallSeconds.isFinite, wallSeconds > 0 else { return 0 }
        return UInt32(clamping: Int64(min(wallSeconds / epochLength, Double(UInt32.max))))
    }

    /// The epochs to register or announce at a time: the current one, and the neighbouring one
    /// within `boundaryMargin` of a boundary.
    package static func epochs(_ wallSeconds: Double) -> [UInt32] {
        let e = epoch(wallSeconds)
        let into = wallSeconds - Double(e) * epochLength
        if into < boundaryMargin, e > 0 { return [e, e - 1] }
        if into > epochLength - boundaryMargin, e < UInt32.max { return [e, e + 1] }
        return [e]
    }

    /// The key two friends share for their tags: nil for an invalid (small-order) public key.
    /// Held in zeroing storage; the intermediate arrays are wiped.
    package static func pairKey(secret: SecretKeyBytes, peerPublic: [UInt8]) -> SecretKeyBytes? {
        guard var shared = Sodium.x25519(secret: secret, peerPublic: peerPublic) else { return nil }
        defer { Sodium.wipe(&shared) }
        var key = Sodium.blake2b(shared, Array("revue pair tags v1".utf8), outputLength: 32)
        return SecretKeyBytes(wiping: &key)
    }

    /// The tag message: label, owner, epoch.
    static func tagInput(_ label: String, owner: [UInt8], epoch: UInt32) -> [UInt8] {
        var w = ByteWriter(capacity: 48)
        w.append(label.utf8)
        w.append(owner)
        w.u32(epoch)
        return w.bytes
    }

    static func tag(_ pairKey: SecretKeyBytes, _ label: String, owner: [UInt8], epoch: UInt32) -> [UInt8] {
        Sodium.keyedBlake2b(key: pairKey, tagInput(label, owner: owner, epoch: epoch))
    }

    /// The tag `owner` registers at rendezvous nodes for one friend, which that friend looks up.
    package static func rendezvous(pairKey: SecretKeyBytes, owner: [UInt8], epoch: UInt32) -> [UInt8] {
        tag(pairKey, "rendezvous", owner: owner, epoch: epoch)
    }

    /// The tag `owner` puts in LAN announcements for one friend.
    package static func lan(pairKey: SecretKeyBytes, owner: [UInt8], epoch: UInt32) -> [UInt8] {
        tag(pairKey, "lan", owner: owner, epoch: epoch)
    }

    /// The key of the tags a peer is found by for friend requests: from its address (public key
    /// and nospam), so only holders of the address compute them.
    static func requestKey(publicKey: [UInt8], nospam: UInt32) -> [UInt8] {
        var w = ByteWriter(capacity: 36)
        w.append(publicKey)
        w.u32(nospam)
        return Sodium.blake2b(w.bytes, Array("revue request tags v1".utf8), outputLength: 32)
    }

    /// The tag a peer registers for strangers holding its address (friend requests).
    package static func request(publicKey: [UInt8], nospam: UInt32, epoch: UInt32) -> [UInt8] {
        Sodium.keyedBlake2b(
            key: requestKey(publicKey: publicKey, nospam: nospam), tagInput("rendezvous", owner: publicKey, epoch: epoch))
    }

    /// The tag a peer puts in LAN announcements for strangers holding its address.
    package static func lanRequest(publicKey: [UInt8], nospam: UInt32, epoch: UInt32) -> [UInt8] {
        Sodium.keyedBlake2b(
            key: requestKey(publicKey: publicKey, nospam: nospam), tagInput("lan", owner: publicKey, epoch: epoch))
    }
}

/// WireGuard's handshake MACs (Donenfeld, "WireGuard", section 5.4.4 and 5.4.7), with BLAKE2b:
/// mac1 proves the sender knows the responder's public key and is checked before any X25519;
/// mac2 proves, under load, that the sender receives datagrams at its source address.
package enum HandshakeMACs {
    /// Length of mac1 plus mac2 at the end of an initiation.
    package static let trailerLength = 32

    /// The key of mac1 for a responder.
    package static func mac1Key(_ responderPublic: [UInt8]) -> [UInt8] {
        Sodium.blake2b(Array("revue mac1".utf8), responderPublic, outputLength: 32)
    }

    /// The key that encrypts cookies a responder sends.
    package static func cookieKey(_ responderPublic: [UInt8]) -> [UInt8] {
        Sodium.blake2b(Array("revue cookie".utf8), responderPublic, outputLength: 32)
    }

    /// The bytes an endpoint's cookie is a MAC of.
    static func endpointBytes(_ a: SocketAddress) -> [UInt8] {
        var w = ByteWriter(capacity: 18)
        w.append(a.addressBytes)
        w.u16(a.port)
        return w.bytes
    }
}
