// A room joined by link: the text a host shares so that someone who is nobody's friend can join a
// room on an SFU. Everything the server needs (its URL and credentials, the room) is in the
// link's visible part; the room's end-to-end secret is in the fragment, which is never sent to
// the server. This file reads and writes that text and nothing else: what the secret is turned
// into is `RoomLinkKeys`, who is let in is `RoomLinkAdmission` (docs/security.md, "Rooms joined
// by link").
internal import MediaCore

/// Why a room link was not accepted (`RoomLink.init(parsing:)`).
public enum RoomLinkError: Error, Sendable, Hashable {
    /// Longer than `RoomLink.maxLength` bytes.
    case tooLong
    /// A space, a control character or a byte outside printable ASCII.
    case invalidCharacter
    /// Not a `revue-room://` link.
    case notARoomLink
    /// The server's host, port or path, or its transport, is not one the SFU client can reach.
    case badServer
    /// The room number is missing or not a number from 1 to 2^53-1.
    case badRoom
    /// A field the link must have is missing (its name).
    case missingField(String)
    /// A field this version does not know (its name, cut to 32 bytes).
    case unknownField(String)
    /// A field given twice (its name).
    case duplicateField(String)
    /// A field's value is empty, too long or badly encoded (its name).
    case badField(String)
    /// No `#` part: the link carries no end-to-end secret.
    case missingSecret
    /// The `#` part is not a secret of this version (`k1.` and 32 bytes in base64url).
    case badSecret
    /// The host's key is not 32 bytes in base64url.
    case badHostKey
    /// `Revue.initialize(_:)` has not run, or `destroy()` has (`Room.createLink`, `Room.joinRoom`).
    case notInitialized
    /// You are in a call already, or (for `createLink`) in a room you joined by link.
    case inCall
    /// `RoomOptions.sfu` is nil or not a usable server (`Room.createLink`).
    case noServer
    /// The room has as many live links as it may (8); revoke one first.
    case tooManyLinks
    /// The display name is empty, longer than 64 bytes or has a control character.
    case badName
}

/// A link to a room on an SFU that anyone holding it can join, friend or not.
///
/// Its text is `revue-room://HOST[:PORT][/PATH]?t=TRANSPORT&room=N&key=HOSTKEY[&pin=..][&token=..]
/// [&apisecret=..]#k1.SECRET`: `t` is the SFU API's scheme (`http`, `https`, `ws`, `wss`),
/// `room` the VideoRoom number, `key` the host's public key, and the optional fields the server's
/// credentials. The part after `#` is the room's end-to-end secret: an app that opens the link
/// must not send it anywhere, and `description` never shows it (nor the credentials).
///
/// Thread rule: a value type, any thread. Cost: parsing is one pass over at most
/// `maxLength` bytes; no network, no key derivation.
public struct RoomLink: Sendable, Hashable, CustomStringConvertible {
    /// The scheme of every room link.
    public static let scheme = "revue-room"
    /// The longest link accepted, in bytes.
    public static let maxLength = 2048
    /// The longest value of a field, in bytes once decoded.
    static let maxFieldLength = 256

    /// The SFU and room (with the credentials the link carries; never a room secret, which only
    /// the host holds). End-to-end encryption is always on.
    public let server: SFUServer
    /// The host's X25519 public key: room keys come only from the holder of its private key.
    let hostKey: [UInt8]
    /// The room's end-to-end secret (32 bytes), from the `#` part.
    let secret: [UInt8]
    /// How the server part was written: the transport, the authority and the path.
    private let transport: String, authority: String, path: String

    /// Reads a link strictly: every field checked, unknown or repeated fields refused, the
    /// secret exactly 32 bytes. Thread rule: any thread. Cost: one pass over the text.
    public init(parsing text: String) throws(RoomLinkError) {
        let bytes = Array(text.utf8)
        guard bytes.count <= Self.maxLength else { throw .tooLong }
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw .invalidCharacter }
        let prefix = Array("\(Self.scheme)://".utf8)
        guard bytes.starts(with: prefix) else { throw .notARoomLink }
        let rest = bytes[prefix.count...]
        let hashes = rest.indices.filter { rest[$0] == UInt8(ascii: "#") }
        guard let hash = hashes.first else { throw .missingSecret }
        guard hashes.count == 1 else { throw .badSecret }
        let beforeFragment = rest[..<hash], fragment = rest[(hash + 1)...]
        guard let secret = Self.secret(fromFragment: Array(fragment)) else { throw .badSecret }

        let question = beforeFragment.firstIndex(of: UInt8(ascii: "?"))
        guard let question else { throw .missingField("t") }
        let location = beforeFragment[..<question], query = beforeFragment[(question + 1)...]
        let slash = location.firstIndex(of: UInt8(ascii: "/")) ?? location.endIndex
        let authority = String(decoding: location[..<slash], as: UTF8.self)
        let path = String(decoding: location[slash...], as: UTF8.self)
        guard !authority.isEmpty, Self.isAuthority(authority), Self.isPath(path) else { throw .badServer }

        var fields: [String: String] = [:]
        for item in query.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false) {
            guard let eq = item.firstIndex(of: UInt8(ascii: "=")) else {
                throw .badField(Self.fieldName(item))
            }
            let name = String(decoding: item[..<eq], as: UTF8.self)
            guard Self.fields.contains(name) else { throw .unknownField(Self.fieldName(item[..<eq])) }
            guard fields[name] == nil else { throw .duplicateField(name) }
            guard let value = Self.percentDecoded(item[(eq + 1)...]) else { throw .badField(name) }
            fields[name] = value
        }
        guard let transport = fields["t"] else { throw .missingField("t") }
        guard ["http", "https", "ws", "wss"].contains(transport) else { throw .badServer }
        guard let roomText = fields["room"] else { throw .missingField("room") }
        guard let room = Self.roomNumber(roomText) else { throw .badRoom }
        guard let keyText = fields["key"] else { throw .missingField("key") }
        guard let hostKey = Base64.decodeURL(keyText), hostKey.count == 32 else { throw .badHostKey }
        let server = SFUServer(
            url: "\(transport)://\(authority)\(path)", room: room, endToEndEncryption: true, apiSecret: fields["apisecret"],
            token: fields["token"], pin: fields["pin"])
        guard server.isUsable else { throw .badServer }
        self.server = server
        self.hostKey = hostKey
        self.secret = secret
        self.transport = transport
        self.authority = authority
        self.path = path
    }

    /// A new link to `server`'s room, made by the host whose public key is `hostKey`, with a
    /// fresh 32-byte secret (or `secret`, for tests). Nil when the server is not usable or has
    /// a field the link cannot carry. Thread rule: any thread. Cost: 32 random bytes.
    static func make(server: SFUServer, hostKey: [UInt8], secret: [UInt8] = RandomBytes.bytes(32)) -> RoomLink? {
        guard server.isUsable, hostKey.count == 32, secret.count == 32,
            let schemeEnd = server.url.firstRange(of: "://")
        else { return nil }
        let transport = String(server.url[..<schemeEnd.lowerBound])
        let location = server.url[schemeEnd.upperBound...]
        let slash = location.firstIndex(of: "/") ?? location.endIndex
        var text = "\(scheme)://\(location[..<slash])\(location[slash...])?t=\(transport)&room=\(server.room)"
        text += "&key=\(Base64.encodeURL(hostKey))"
        for (name, value) in [("pin", server.pin), ("token", server.token), ("apisecret", server.apiSecret)] {
            guard let value else { continue }
            text += "&\(name)=\(percentEncoded(value))"
        }
        text += "#\(secretPrefix)\(Base64.encodeURL(secret))"
        return try? RoomLink(parsing: text)
    }

    /// The whole link, secret included: the text to share with whoever may join, and nothing
    /// else (not a log, not a server). Thread rule: any thread. Cost: builds a string.
    public var text: String { visible(redacted: false) + "#\(Self.secretPrefix)\(Base64.encodeURL(secret))" }

    /// The link with its secret and credentials replaced by `…`: what may appear in a log.
    public var description: String { visible(redacted: true) + "#…" }

    /// The link's part before `#`, its credentials shown or replaced by `…`.
    private func visible(redacted: Bool) -> String {
        var out = "\(Self.scheme)://\(authority)\(path)?t=\(transport)&room=\(server.room)&key=\(Base64.encodeURL(hostKey))"
        for (name, value) in [("pin", server.pin), ("token", server.token), ("apisecret", server.apiSecret)] {
            guard let value else { continue }
            out += "&\(name)=\(redacted ? "…" : Self.percentEncoded(value))"
        }
        return out
    }

    /// Whether two links are the same: server, room, host key and secret (compared in constant
    /// time). Cost: a comparison of their fields.
    public static func == (a: RoomLink, b: RoomLink) -> Bool {
        a.server == b.server && a.hostKey == b.hostKey && Sodium.equal(a.secret, b.secret)
    }

    /// Hashes the server and host key (not the secret). Cost: hashes a few strings.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(server)
        hasher.combine(hostKey)
    }

    // MARK: Pieces

    static let secretPrefix = "k1."
    static let fields: Set<String> = ["t", "room", "key", "pin", "token", "apisecret"]

    static func secret(fromFragment fragment: [UInt8]) -> [UInt8]? {
        let prefix = Array(secretPrefix.utf8)
        guard fragment.count == prefix.count + 43, fragment.starts(with: prefix) else { return nil }
        guard let bytes = Base64.decodeURL(String(decoding: fragment[prefix.count...], as: UTF8.self)), bytes.count == 32
        else { return nil }
        return bytes
    }

    /// A field's name for an error: at most 32 bytes of it.
    static func fieldName(_ bytes: some Collection<UInt8>) -> String { String(decoding: bytes.prefix(32), as: UTF8.self) }

    /// A room number in decimal, no sign or leading zero, 1 to 2^53-1.
    static func roomNumber(_ text: String) -> UInt64? {
        guard let first = text.utf8.first, first != UInt8(ascii: "0"), text.utf8.count <= 16,
            text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), let n = UInt64(text),
            n < 1 << 53
        else { return nil }
        return n
    }

    /// `host`, `host:port` or `[v6]:port` in the characters a host and port can have.
    static func isAuthority(_ text: String) -> Bool {
        text.utf8.allSatisfy { c in
            (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
                || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || ".-:[]".utf8.contains(c)
        }
    }

    /// Empty or `/` and unreserved characters.
    static func isPath(_ text: String) -> Bool {
        text.isEmpty || (text.hasPrefix("/") && text.utf8.allSatisfy { isUnreserved($0) || $0 == UInt8(ascii: "/") })
    }

    static func isUnreserved(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
            || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || "-._~".utf8.contains(c)
    }

    /// A value with every byte but the unreserved ones as `%XX`.
    static func percentEncoded(_ value: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for c in value.utf8 {
            if isUnreserved(c) {
                out.append(c)
            } else {
                out += [UInt8(ascii: "%"), hex[Int(c >> 4)], hex[Int(c & 15)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A field's value: unreserved characters and `%XX` escapes only, 1 to `maxFieldLength` bytes
    /// once decoded, valid UTF-8 with no control character; nil otherwise.
    static func percentDecoded(_ bytes: some Collection<UInt8>) -> String? {
        var out: [UInt8] = []
        var i = bytes.startIndex
        while i != bytes.endIndex {
            let c = bytes[i]
            if c == UInt8(ascii: "%") {
                let h = bytes.index(after: i)
                guard h != bytes.endIndex else { return nil }
                let l = bytes.index(after: h)
                guard l != bytes.endIndex, let hi = hexValue(bytes[h]), let lo = hexValue(bytes[l]) else { return nil }
                out.append(hi << 4 | lo)
                i = bytes.index(after: l)
            } else {
                guard isUnreserved(c) else { return nil }
                out.append(c)
                i = bytes.index(after: i)
            }
            guard out.count <= maxFieldLength else { return nil }
        }
        guard !out.isEmpty, let s = String(validating: out, as: UTF8.self),
            !s.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        else { return nil }
        return s
    }

    static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
