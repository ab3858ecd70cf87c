internal import MediaCore

/// A Revue address: the public key, a 4-byte "nospam" value and a 2-byte checksum, 38 bytes shown
/// as 76 hexadecimal digits (the shape of a Tox ID). The nospam lets you change what you hand out
/// without changing your identity; the checksum catches typos.
package struct RevueAddress: Hashable, Sendable {
    package static let byteCount = 38
    package static let hexCount = 76

    package let publicKey: [UInt8]
    package let nospam: UInt32

    package init(publicKey: [UInt8], nospam: UInt32) {
        precondition(publicKey.count == 32)
        self.publicKey = publicKey
        self.nospam = nospam
    }

    /// The 2-byte checksum: the first bytes of BLAKE2b(public key || nospam). Any single typo
    /// changes it with probability 1 - 2^-16.
    package static func checksum(publicKey: [UInt8], nospam: UInt32) -> [UInt8] {
        Array(Sodium.blake2b(publicKey, nospamBytes(nospam), outputLength: 16).prefix(2))
    }

    package static func nospamBytes(_ nospam: UInt32) -> [UInt8] {
        [
            UInt8(nospam >> 24), UInt8(truncatingIfNeeded: nospam >> 16), UInt8(truncatingIfNeeded: nospam >> 8),
            UInt8(truncatingIfNeeded: nospam),
        ]
    }

    /// The 76-digit text form (upper case).
    package var text: String {
        Hex.encode(publicKey + Self.nospamBytes(nospam) + Self.checksum(publicKey: publicKey, nospam: nospam))
    }

    /// Parses the text form (either case, surrounding whitespace ignored).
    package static func parse(_ text: String) throws(FriendAddError) -> RevueAddress {
        let t = text.trimmingWhitespace()
        guard t.utf8.count == hexCount, let bytes = Hex.decode(t) else { throw .invalidAddress }
        let key = Array(bytes[0..<32])
        let nospam = bytes[32..<36].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        guard Array(bytes[36..<38]) == checksum(publicKey: key, nospam: nospam) else { throw .badChecksum }
        return RevueAddress(publicKey: key, nospam: nospam)
    }

    /// Parses a 64-digit friend ID (a public key).
    package static func parseFriendId(_ text: String) -> [UInt8]? {
        let t = text.trimmingWhitespace()
        guard t.utf8.count == 64, let bytes = Hex.decode(t) else { return nil }
        return bytes
    }
}

extension String {
    func trimmingWhitespace() -> String {
        var s = Substring(self)
        while let c = s.first, c.isWhitespace { s.removeFirst() }
        while let c = s.last, c.isWhitespace { s.removeLast() }
        return String(s)
    }
}
