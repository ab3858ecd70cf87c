// The session wire format: every datagram starts with a type byte in 0x50...0x5F, clear of the
// RFC 7983 demultiplexing ranges (STUN 0-3, DTLS 20-63, RTP/RTCP 128-191). docs/session.md has
// the byte layouts.

/// The first byte of each session datagram.
package enum PacketType: UInt8 {
    /// Noise IK message 1: [type][version][sender index u32][e, s, payload].
    case handshakeInitiation = 0x51
    /// Noise IK message 2: [type][version][sender index u32][receiver index u32][e, payload].
    case handshakeResponse = 0x52
    /// Transport data: [type][receiver index u32][counter u64][AEAD(frame)], header as AD.
    case transportData = 0x53
    /// To a rendezvous node: [type][version][public key 32][status u8][timestamp u64][mac 16],
    /// mac = keyed BLAKE2b over the bytes before it, key = `RendezvousAuth.key` (zeros while the
    /// node's key is unknown).
    case rendezvousRegister = 0x58
    /// From a rendezvous node: [type][version][accepted u8][observed ip u32][observed port u16][node key 32].
    case rendezvousRegistered = 0x59
    /// To a rendezvous node: [type][version][target key 32].
    case rendezvousLookup = 0x5A
    /// From a rendezvous node: [type][version][target key 32][found u8][ip u32][port u16][status u8][age s u16].
    case rendezvousLookupReply = 0x5B
    /// To a rendezvous node: [type][version][target key 32][inner datagram].
    case relaySend = 0x5C
    /// From a rendezvous node: [type][version][source key 32][inner datagram].
    case relayDeliver = 0x5D
    /// LAN discovery announcement: [type][version][public key 32][port u16].
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

/// Appends little-endian integers to a byte array.
package struct ByteWriter {
    package var bytes: [UInt8] = []

    package init(capacity: Int = 64) { bytes.reserveCapacity(capacity) }

    package mutating func u8(_ v: UInt8) { bytes.append(v) }
    package mutating func u16(_ v: UInt16) { bytes.append(UInt8(truncatingIfNeeded: v)); bytes.append(UInt8(v >> 8)) }
    package mutating func u32(_ v: UInt32) { for i in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(i)))) } }
    package mutating func u64(_ v: UInt64) { for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) } }
    package mutating func append(_ b: some Sequence<UInt8>) { bytes.append(contentsOf: b) }
}

/// Reads little-endian integers from a byte array; every read returns nil past the end, so a
/// truncated datagram is rejected, never read out of bounds.
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
        return UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }

    package mutating func u32() -> UInt32? {
        guard remaining >= 4 else { return nil }
        var v: UInt32 = 0
        for i in 0..<4 { v |= UInt32(bytes[offset + i]) << (8 * UInt32(i)) }
        offset += 4
        return v
    }

    package mutating func u64() -> UInt64? {
        guard remaining >= 8 else { return nil }
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(bytes[offset + i]) << (8 * UInt64(i)) }
        offset += 8
        return v
    }

    package mutating func take(_ n: Int) -> [UInt8]? {
        guard n >= 0, remaining >= n else { return nil }
        defer { offset += n }
        return Array(bytes[offset..<offset + n])
    }

    package mutating func rest() -> [UInt8] {
        defer { offset = bytes.count }
        return Array(bytes[offset...])
    }
}

/// Authentication of rendezvous registrations: only the holder of a static key can register an
/// endpoint for it. The MAC key comes from X25519 between the peer's static key and the node's
/// (which the node sends in every reply), so an off-path sender cannot move someone's endpoint, and
/// the increasing timestamp stops a captured registration from being replayed from elsewhere.
enum RendezvousAuth {
    static let registerLength = 1 + 1 + 32 + 1 + 8 + 16

    static func key(secret: [UInt8], peerPublic: [UInt8]) -> [UInt8]? {
        guard let shared = Sodium.x25519(secret: secret, peerPublic: peerPublic) else { return nil }
        return Sodium.blake2b(shared, Array("revue rendezvous v1".utf8), outputLength: 32)
    }
}
