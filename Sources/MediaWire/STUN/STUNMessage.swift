internal import CMediaShims
import MediaBase

/// Why a datagram is not a usable STUN message.
/// Thread rule: a value type. Cost: none.
package enum STUNError: Error, Equatable, Sendable {
    /// Shorter than the 20-byte header, the two top bits set, no magic cookie, or a length that is
    /// not a multiple of 4 or disagrees with the datagram.
    case notSTUN
    /// An attribute runs past the message.
    case truncatedAttribute(type: UInt16)
    /// An attribute's value has the wrong size or contents (for example an address family that is
    /// neither IPv4 nor IPv6).
    case badAttribute(type: UInt16)
}

/// A STUN message (RFC 8489): method and class, a 96-bit transaction ID and a list of
/// attributes, with MESSAGE-INTEGRITY (HMAC-SHA1, short- or long-term credentials) and
/// FINGERPRINT (CRC-32) added on encoding and checked on demand after parsing. The same codec
/// serves ICE connectivity checks (RFC 8445 §7) and TURN (RFC 8656).
///
/// Thread rule: a value type. Cost: parsing copies each attribute value once; encoding builds one
/// array; integrity costs one HMAC over the message.
package struct STUNMessage: Equatable, Sendable {
    /// The message class (RFC 8489 §5: the C1 and C0 bits).
    package enum Class: UInt16, Sendable {
        case request = 0
        case indication = 1
        case successResponse = 2
        case errorResponse = 3
    }

    /// A STUN method (12 bits; RFC 8489 §18.2, RFC 8656 §17).
    package struct Method: RawRepresentable, Hashable, Sendable {
        package var rawValue: UInt16
        package init(rawValue: UInt16) { self.rawValue = rawValue & 0x0FFF }
        package static let binding = Method(rawValue: 0x001)
        package static let allocate = Method(rawValue: 0x003)
        package static let refresh = Method(rawValue: 0x004)
        package static let send = Method(rawValue: 0x006)
        package static let data = Method(rawValue: 0x007)
        package static let createPermission = Method(rawValue: 0x008)
        package static let channelBind = Method(rawValue: 0x009)
    }

    /// Attribute types used here (RFC 8489 §18.3, RFC 8656 §18, RFC 8445 §16.1).
    package enum AttributeType {
        package static let mappedAddress: UInt16 = 0x0001
        package static let username: UInt16 = 0x0006
        package static let messageIntegrity: UInt16 = 0x0008
        package static let errorCode: UInt16 = 0x0009
        package static let unknownAttributes: UInt16 = 0x000A
        package static let channelNumber: UInt16 = 0x000C
        package static let lifetime: UInt16 = 0x000D
        package static let xorPeerAddress: UInt16 = 0x0012
        package static let data: UInt16 = 0x0013
        package static let realm: UInt16 = 0x0014
        package static let nonce: UInt16 = 0x0015
        package static let xorRelayedAddress: UInt16 = 0x0016
        /// REQUESTED-ADDRESS-FAMILY (RFC 8656 §18.8): the family of the relayed address asked for.
        package static let requestedAddressFamily: UInt16 = 0x0017
        package static let requestedTransport: UInt16 = 0x0019
        package static let xorMappedAddress: UInt16 = 0x0020
        package static let priority: UInt16 = 0x0024
        package static let useCandidate: UInt16 = 0x0025
        /// ADDITIONAL-ADDRESS-FAMILY (RFC 8656 §18.11): an IPv6 relayed address besides the IPv4 one.
        package static let additionalAddressFamily: UInt16 = 0x8000
        /// ADDRESS-ERROR-CODE (RFC 8656 §18.12): why one family of a dual allocation was refused.
        package static let addressErrorCode: UInt16 = 0x8001
        /// The code points coturn (4.6) still uses for the two, from the draft before RFC 8656
        /// ("SSODA"); IANA lists 0x8032 and 0x8033 as other comprehension-optional attributes,
        /// which a server that does not know them ignores.
        package static let additionalAddressFamilyDraft: UInt16 = 0x8032
        /// ADDRESS-ERROR-CODE at coturn's draft code point (see `additionalAddressFamilyDraft`).
        package static let addressErrorCodeDraft: UInt16 = 0x8033
        package static let software: UInt16 = 0x8022
        package static let fingerprint: UInt16 = 0x8028
        package static let iceControlled: UInt16 = 0x8029
        package static let iceControlling: UInt16 = 0x802A
    }

    /// One attribute: its type and value (without padding).
    package struct Attribute: Equatable, Sendable {
        package var type: UInt16
        package var value: [UInt8]
        package init(type: UInt16, value: [UInt8]) { self.type = type; self.value = value }
    }

    /// RFC 8489 §5: the fixed value in bytes 4-7 of every message.
    package static let magicCookie: UInt32 = 0x2112_A442
    /// RFC 8489 §14.7: FINGERPRINT is the CRC-32 of the message XORed with this.
    package static let fingerprintXor: UInt32 = 0x5354_554E

    package var method: Method
    package var messageClass: Class
    /// 12 random bytes that pair a response with its request.
    package var transactionID: [UInt8]
    /// The attributes in order (MESSAGE-INTEGRITY and FINGERPRINT included when parsed).
    package var attributes: [Attribute]

    /// A message with a fresh random transaction ID (libsodium's CSPRNG).
    package init(method: Method, class messageClass: Class, transactionID: [UInt8]? = nil, attributes: [Attribute] = []) {
        self.method = method
        self.messageClass = messageClass
        self.transactionID = transactionID ?? RandomBytes.bytes(12)
        self.attributes = attributes
    }

    /// True when `first` can start a STUN message on a socket shared with other protocols: RFC 7983
    /// gives STUN the first-byte range 0...3.
    @inline(__always)
    package static func mayBeSTUN(firstByte first: UInt8) -> Bool { first < 4 }

    // MARK: Encoding

    /// The message's bytes. With `integrity`, a MESSAGE-INTEGRITY attribute (HMAC-SHA1 under that
    /// key) is appended; with `fingerprint`, a FINGERPRINT attribute after it. Existing
    /// MESSAGE-INTEGRITY and FINGERPRINT attributes in `attributes` are not written again.
    /// A message whose length field cannot hold it (an attribute over 65,535 bytes, or more than
    /// 65,535 bytes after the header) encodes to an empty array: the 16-bit lengths of RFC 8489
    /// cannot describe it, and no sender here builds one.
    package func encode(integrity key: [UInt8]? = nil, fingerprint: Bool = false) -> [UInt8] {
        let written = attributes.filter { $0.type != AttributeType.messageIntegrity && $0.type != AttributeType.fingerprint }
        let body = written.reduce(0) { $0 + 4 + ($1.value.count + 3) & ~3 } + (key != nil ? 24 : 0) + (fingerprint ? 8 : 0)
        guard body <= 0xFFFF, written.allSatisfy({ $0.value.count <= 0xFFFF }) else { return [] }
        var out: [UInt8] = []
        out.reserveCapacity(20 + body)
        let type = Self.messageType(method: method, class: messageClass)
        out.appendU16(type)
        out.appendU16(0)  // length, set below
        out.appendU32(Self.magicCookie)
        out += transactionID
        for a in attributes where a.type != AttributeType.messageIntegrity && a.type != AttributeType.fingerprint {
            Self.appendAttribute(&out, a.type, a.value)
        }
        if let key {
            Self.setLength(&out, out.count - 20 + 24)
            let mac = Self.hmacSHA1(key: key, out)
            Self.appendAttribute(&out, AttributeType.messageIntegrity, mac)
        }
        if fingerprint {
            Self.setLength(&out, out.count - 20 + 8)
            let crc = CRC32.checksum(out) ^ Self.fingerprintXor
            var v: [UInt8] = []
            v.appendU32(crc)
            Self.appendAttribute(&out, AttributeType.fingerprint, v)
        }
        Self.setLength(&out, out.count - 20)
        return out
    }

    /// RFC 8489 §5: the 14 type bits interleave the method's 12 bits with the class's two.
    package static func messageType(method: Method, class c: Class) -> UInt16 {
        let m = method.rawValue
        return (m & 0x000F) | ((m & 0x0070) << 1) | ((m & 0x0F80) << 2) | ((c.rawValue & 1) << 4) | ((c.rawValue & 2) << 7)
    }

    // MARK: Parsing

    /// Parses a message; each attribute must fit (values are kept without padding). Integrity and
    /// fingerprint are not checked here: see `hasValidFingerprint(_:)` and
    /// `hasValidIntegrity(_:key:)`, which need the original bytes.
    package init(parsing bytes: RawSpan) throws(STUNError) {
        var r = SpanReader(bytes)
        guard let type = r.u16(), type & 0xC000 == 0, let length = r.u16(), r.u32() == Self.magicCookie,
            length % 4 == 0, r.remaining == 12 + Int(length), let id = r.array(12)
        else { throw .notSTUN }
        let m = (type & 0x000F) | ((type & 0x00E0) >> 1) | ((type & 0x3E00) >> 2)
        let c = ((type >> 4) & 1) | ((type >> 7) & 2)
        method = Method(rawValue: m)
        messageClass = Class(rawValue: c)!
        transactionID = id
        attributes = []
        while !r.isAtEnd {
            guard let t = r.u16(), let n = r.u16() else { throw .truncatedAttribute(type: 0) }
            guard let value = r.array(Int(n)) else { throw .truncatedAttribute(type: t) }
            attributes.append(Attribute(type: t, value: value))
            r.skip(min((4 - Int(n) % 4) % 4, r.remaining))
        }
    }

    /// Parses `bytes` (see `init(parsing:)`).
    package init(parsing bytes: [UInt8]) throws(STUNError) {
        try self.init(parsing: bytes.span.bytes)
    }

    /// The first value of attribute `type`.
    package func value(_ type: UInt16) -> [UInt8]? { attributes.first { $0.type == type }?.value }

    /// True when the message ends with a FINGERPRINT attribute whose CRC-32 matches (RFC 8489 §14.7).
    package static func hasValidFingerprint(_ bytes: [UInt8]) -> Bool {
        guard bytes.count >= 28, bytes.span.bytes.u16(bytes.count - 8) == AttributeType.fingerprint,
            bytes.span.bytes.u16(bytes.count - 6) == 4
        else { return false }
        let expected = bytes.span.bytes.u32(bytes.count - 4)
        return CRC32.checksum(bytes[0..<(bytes.count - 8)]) ^ fingerprintXor == expected
    }

    /// True when the message carries MESSAGE-INTEGRITY and its HMAC-SHA1 under `key` matches:
    /// computed over the message up to that attribute, with the header's length covering it
    /// (RFC 8489 §14.5). Attributes after it other than FINGERPRINT make it invalid.
    package static func hasValidIntegrity(_ bytes: [UInt8], key: [UInt8]) -> Bool {
        guard bytes.count >= 20 else { return false }
        var i = 20
        while i + 4 <= bytes.count {
            let t = bytes.span.bytes.u16(i), n = Int(bytes.span.bytes.u16(i + 2))
            if t == AttributeType.messageIntegrity {
                guard n == 20, i + 24 <= bytes.count else { return false }
                let rest = i + 24
                // Only FINGERPRINT may follow.
                if rest != bytes.count && !(rest + 8 == bytes.count && bytes.span.bytes.u16(rest) == AttributeType.fingerprint) {
                    return false
                }
                var prefix = Array(bytes[0..<i])
                setLength(&prefix, i - 20 + 24)
                let mac = hmacSHA1(key: key, prefix)
                return constantTimeEqual(mac, Array(bytes[(i + 4)..<(i + 24)]))
            }
            i += 4 + (n + 3) & ~3
        }
        return false
    }

    // MARK: Keys

    /// RFC 8489 §9.1.1: the short-term key is the password itself (ICE uses this).
    package static func shortTermKey(password: String) -> [UInt8] { Array(password.utf8) }

    /// RFC 8489 §9.2.2: the long-term key is MD5(username ":" realm ":" password). (The RFC runs
    /// the password through OpaqueString first; ASCII credentials, the usual case, are unchanged by it.)
    package static func longTermKey(username: String, realm: String, password: String) -> [UInt8] {
        let input = Array("\(username):\(realm):\(password)".utf8)
        var out = [UInt8](repeating: 0, count: 16)
        let ok = input.withUnsafeBytes { i in
            out.withUnsafeMutableBufferPointer { cms_md5(i.baseAddress, i.count, $0.baseAddress) }
        }
        precondition(ok == 1, "MD5 failed in libcrypto")
        return out
    }

    // MARK: Attribute helpers

    /// Appends an XOR-MAPPED-ADDRESS-style attribute (RFC 8489 §14.2): the port XORed with the
    /// cookie's top 16 bits, the address with the cookie (and the transaction ID for IPv6).
    package mutating func appendXORAddress(_ type: UInt16, _ address: SocketAddress) {
        var v: [UInt8] = [0, address.family == .ipv4 ? 1 : 2]
        v.appendU16(address.port ^ UInt16(Self.magicCookie >> 16))
        v += zip(address.addressBytes, xorMask).map { $0 ^ $1 }
        attributes.append(Attribute(type: type, value: v))
    }

    /// The address in an XOR-MAPPED-ADDRESS-style attribute of `type`, if present and well formed.
    package func xorAddress(_ type: UInt16) throws(STUNError) -> SocketAddress? {
        guard let v = value(type) else { return nil }
        return try decodeXORAddress(v, type: type)
    }

    /// Every attribute of `type` decoded as an XOR address, in order (a dual allocation's answer
    /// carries two XOR-RELAYED-ADDRESS attributes, RFC 8656 §7.3). Throws on a malformed one.
    package func xorAddresses(_ type: UInt16) throws(STUNError) -> [SocketAddress] {
        var out: [SocketAddress] = []
        for a in attributes where a.type == type { out.append(try decodeXORAddress(a.value, type: type)) }
        return out
    }

    private func decodeXORAddress(_ v: [UInt8], type: UInt16) throws(STUNError) -> SocketAddress {
        guard v.count == 8 || v.count == 20 else { throw .badAttribute(type: type) }
        let port = v.span.bytes.u16(2) ^ UInt16(Self.magicCookie >> 16)
        switch (v[1], v.count) {
        case (1, 8):
            let a = zip(v[4..<8], xorMask).map { $0 ^ $1 }
            return SocketAddress(ipv4: a[0], a[1], a[2], a[3], port: port)
        case (2, 20):
            return SocketAddress(ipv6: zip(v[4..<20], xorMask).map { $0 ^ $1 }, port: port)
        default:
            throw .badAttribute(type: type)
        }
    }

    /// The cookie followed by the transaction ID: what XOR-encoded addresses are masked with.
    private var xorMask: [UInt8] {
        var m: [UInt8] = []
        m.appendU32(Self.magicCookie)
        return m + transactionID
    }

    /// ERROR-CODE (RFC 8489 §14.8): the code (300...699) and reason phrase.
    package var errorCode: (code: Int, reason: String)? {
        guard let v = value(AttributeType.errorCode), v.count >= 4 else { return nil }
        return (Int(v[2] & 0x07) * 100 + Int(v[3]), String(decoding: v[4...], as: UTF8.self))
    }

    /// Appends ERROR-CODE with `code` and `reason`.
    package mutating func appendErrorCode(_ code: Int, reason: String) {
        attributes.append(
            Attribute(type: AttributeType.errorCode, value: [0, 0, UInt8(code / 100), UInt8(code % 100)] + Array(reason.utf8)))
    }

    /// Appends a UTF-8 text attribute (USERNAME, REALM, NONCE, SOFTWARE).
    package mutating func appendText(_ type: UInt16, _ text: String) {
        attributes.append(Attribute(type: type, value: Array(text.utf8)))
    }

    /// A text attribute's value.
    package func text(_ type: UInt16) -> String? { value(type).map { String(decoding: $0, as: UTF8.self) } }

    /// Appends a 32-bit attribute (PRIORITY, LIFETIME, REQUESTED-TRANSPORT...).
    package mutating func appendUInt32(_ type: UInt16, _ v: UInt32) {
        var b: [UInt8] = []
        b.appendU32(v)
        attributes.append(Attribute(type: type, value: b))
    }

    /// A 32-bit attribute's value.
    package func uint32(_ type: UInt16) -> UInt32? {
        guard let v = value(type), v.count == 4 else { return nil }
        return v.span.bytes.u32(0)
    }

    /// Appends a 64-bit attribute (ICE-CONTROLLING / ICE-CONTROLLED tie-breakers).
    package mutating func appendUInt64(_ type: UInt16, _ v: UInt64) {
        var b: [UInt8] = []
        b.appendU32(UInt32(v >> 32)); b.appendU32(UInt32(truncatingIfNeeded: v))
        attributes.append(Attribute(type: type, value: b))
    }

    // MARK: Bytes

    static func appendAttribute(_ out: inout [UInt8], _ type: UInt16, _ value: [UInt8]) {
        out.appendU16(type)
        out.appendU16(UInt16(value.count))
        out += value
        out += [UInt8](repeating: 0, count: (4 - value.count % 4) % 4)
    }

    static func setLength(_ out: inout [UInt8], _ length: Int) {
        out[2] = UInt8(length >> 8); out[3] = UInt8(length & 0xFF)
    }

    static func hmacSHA1(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        key.withUnsafeBytes { hmacSHA1(key: $0, data) }
    }

    /// HMAC-SHA1 (RFC 2104) of `data` under `key`, read in place: STUN's MESSAGE-INTEGRITY and
    /// TURN's shared-secret passwords. Thread rule: any thread. Cost: one HMAC-SHA1 in libcrypto.
    package static func hmacSHA1(key: UnsafeRawBufferPointer, _ data: [UInt8]) -> [UInt8] {
        var mac = [UInt8](repeating: 0, count: 20)
        let ok = data.withUnsafeBytes { d in
            mac.withUnsafeMutableBufferPointer {
                cms_hmac_sha1(key.baseAddress, key.count, d.baseAddress, d.count, $0.baseAddress)
            }
        }
        precondition(ok == 1, "HMAC-SHA1 failed in libcrypto")
        return mac
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var d: UInt8 = 0
        for i in 0..<a.count { d |= a[i] ^ b[i] }
        return d == 0
    }
}

/// CRC-32 (ISO-HDLC, the polynomial 0xEDB88320 reflected), as STUN's FINGERPRINT uses it.
/// Thread rule: stateless. Cost: one table lookup per byte.
package enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    /// The CRC-32 of `bytes`.
    package static func checksum<C: Collection>(_ bytes: C) -> UInt32 where C.Element == UInt8 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes { c = table[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }
}
