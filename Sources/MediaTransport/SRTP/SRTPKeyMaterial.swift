internal import CMediaShims
import MediaBase

/// An SRTP master key and master salt for one suite, with the optional lifetime and MKI of an SDP
/// `inline:` key parameter (RFC 4568 section 6.1).
///
/// Generate with `random(for:)` (libsodium), carry as bytes or as the `inline:` text, hand to
/// `SRTPContext`. The bytes live in one private allocation that is zeroed when the last copy goes
/// away, and `description`, `debugDescription` and mirrors never show them: logging a key material
/// prints its suite, sizes and a short BLAKE2b fingerprint (enough to see whether two peers agree).
/// Equality compares the bytes in constant time.
/// Thread rule: an immutable value, freely shared across threads. Cost: `init` copies 28-46 bytes;
/// `masterKey`, `masterSalt`, `keyAndSalt` and `inlineKeyParams` allocate their result.
public struct SRTPKeyMaterial: Sendable, Equatable, CustomStringConvertible,
    CustomDebugStringConvertible, CustomReflectable
{
    /// An RFC 4568 Master Key Identifier: `value` written big-endian in `length` bytes (1-128)
    /// after the payload of every packet (RFC 3711 section 3.1).
    public struct MKI: Hashable, Sendable {
        /// The MKI value (RFC 4568 allows up to 128 decimal digits; Revue keeps 64 bits).
        public var value: UInt64
        /// Bytes the MKI takes in each packet, 1...128.
        public var length: Int

        /// An MKI; `value` must fit in `length` bytes. Traps otherwise (a programmer error; parsed
        /// MKIs are validated with a thrown error instead).
        public init(value: UInt64, length: Int) {
            precondition(MKI.fits(value, length), "MKI \(value) does not fit in \(length) bytes")
            self.value = value
            self.length = length
        }

        static func fits(_ value: UInt64, _ length: Int) -> Bool {
            guard (1...128).contains(length) else { return false }
            return length >= 8 || value < (UInt64(1) << UInt64(8 * length))
        }
    }

    /// The suite the key and salt are sized for.
    public let suite: SRTPSuite
    /// Maximum number of packets to protect with this key (the RFC 4568 lifetime), or nil for the
    /// SRTP default (2^48 for SRTP, 2^31 for SRTCP). Informational: `SRTPContext` lets libsrtp
    /// enforce its own limits.
    public var lifetime: UInt64?
    /// The MKI signalled with this key, or nil (the usual case, and what WebRTC uses). An
    /// `SRTPContext` made from key material with an MKI writes it into every packet and requires
    /// it on every packet it receives.
    public var mki: MKI?

    private let secret: SecretKeyBytes

    /// Key material from a master key and salt of exactly the suite's lengths.
    /// Throws `.wrongLength` (naming the part and both lengths) when a length is wrong.
    public init(
        suite: SRTPSuite, masterKey: [UInt8], masterSalt: [UInt8],
        lifetime: UInt64? = nil, mki: MKI? = nil
    ) throws(SRTPKeyMaterialError) {
        guard masterKey.count == suite.masterKeyLength else {
            throw SRTPKeyMaterialError(
                .wrongLength,
                "\(suite.sdpName) master key must be \(suite.masterKeyLength) bytes, got \(masterKey.count)")
        }
        guard masterSalt.count == suite.masterSaltLength else {
            throw SRTPKeyMaterialError(
                .wrongLength,
                "\(suite.sdpName) master salt must be \(suite.masterSaltLength) bytes, got \(masterSalt.count)")
        }
        self.suite = suite
        self.lifetime = lifetime
        self.mki = mki
        secret = SecretKeyBytes(count: suite.keyAndSaltLength) { out in
            masterKey.withUnsafeBytes { out.copyMemory(from: $0) }
            masterSalt.withUnsafeBytes {
                UnsafeMutableRawBufferPointer(rebasing: out[suite.masterKeyLength...]).copyMemory(from: $0)
            }
        }
    }

    /// Key material from key||salt concatenated (the layout of `inline:` and of DTLS-SRTP exporters),
    /// which must be exactly `suite.keyAndSaltLength` bytes; throws `.wrongLength` otherwise.
    public init(suite: SRTPSuite, keyAndSalt: [UInt8]) throws(SRTPKeyMaterialError) {
        guard keyAndSalt.count == suite.keyAndSaltLength else {
            throw SRTPKeyMaterialError(
                .wrongLength,
                "\(suite.sdpName) key and salt must be \(suite.keyAndSaltLength) bytes "
                    + "(\(suite.masterKeyLength) + \(suite.masterSaltLength)), got \(keyAndSalt.count)")
        }
        self.suite = suite
        secret = SecretKeyBytes(keyAndSalt)
    }

    /// Key material from a master key and a master salt read in place (the DTLS-SRTP exporter's
    /// layout keeps them apart), copied straight into the allocation that is zeroed when freed, so
    /// no other copy is made; the caller zeroes its own buffer. Traps on a wrong length (the caller
    /// sizes both from `suite`).
    init(suite: SRTPSuite, key: UnsafeRawBufferPointer, salt: UnsafeRawBufferPointer) {
        precondition(
            key.count == suite.masterKeyLength && salt.count == suite.masterSaltLength,
            "key or salt length does not match \(suite.sdpName)")
        self.suite = suite
        secret = SecretKeyBytes(count: suite.keyAndSaltLength) { out in
            UnsafeMutableRawBufferPointer(rebasing: out[0..<key.count]).copyMemory(from: key)
            UnsafeMutableRawBufferPointer(rebasing: out[key.count...]).copyMemory(from: salt)
        }
    }

    private init(suite: SRTPSuite, secret: SecretKeyBytes) {
        self.suite = suite
        self.secret = secret
    }

    /// Fresh random key and salt for `suite` from libsodium's secure generator.
    public static func random(for suite: SRTPSuite = .default) -> SRTPKeyMaterial {
        SRTPKeyMaterial(suite: suite, secret: Sodium.randomSecret(suite.keyAndSaltLength))
    }

    /// A copy of the master key bytes.
    public var masterKey: [UInt8] { secret.withUnsafeBytes { Array($0[0..<suite.masterKeyLength]) } }
    /// A copy of the master salt bytes.
    public var masterSalt: [UInt8] { secret.withUnsafeBytes { Array($0[suite.masterKeyLength...]) } }
    /// A copy of key||salt, the layout libsrtp and `inline:` use.
    public var keyAndSalt: [UInt8] { secret.exposedCopy }

    /// Calls `body` with key||salt in place, without copying (for `SRTPContext`).
    func withKeyAndSalt<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try secret.withUnsafeBytes(body)
    }

    // MARK: RFC 4568 inline form

    /// The SDP key parameter: `inline:` + base64(key||salt) (RFC 4568 section 6.1, base64 of
    /// RFC 4648 section 4 with padding), then `|lifetime` (written `2^n` when a power of two) and
    /// `|mki:length` when set. Contains the key: send it only over an encrypted channel.
    public var inlineKeyParams: String {
        var text = "inline:" + secret.withUnsafeBytes { SRTPInlineBase64.encode($0.bytes) }
        if let lifetime {
            if lifetime != 0 && lifetime & (lifetime - 1) == 0 {
                text += "|2^\(lifetime.trailingZeroBitCount)"
            } else {
                text += "|\(lifetime)"
            }
        }
        if let mki { text += "|\(mki.value):\(mki.length)" }
        return text
    }

    /// Parses an RFC 4568 section 6.1 key parameter for `suite`:
    /// `inline:<base64 key||salt>[|<lifetime>][|<mki>:<length>]`, where lifetime is decimal or
    /// `2^n` (at most 2^48, RFC 3711 section 9.2) and the MKI length is 1-128 bytes. The `inline:`
    /// prefix is required (in any letter case); padding of the base64 may be omitted. Throws an `SRTPKeyMaterialError`
    /// whose message names the part that is wrong (`.badKeyMethod`, `.badBase64`, `.wrongLength`,
    /// `.badLifetime`, `.badMKI`); messages never contain key bytes.
    public init(suite: SRTPSuite, inline text: String) throws(SRTPKeyMaterialError) {
        let prefix = "inline:"
        // ABNF literals are case-insensitive (RFC 5234 section 2.3), so "INLINE:" is valid too.
        guard text.prefix(prefix.count).lowercased() == prefix else {
            let method = text.split(separator: ":", maxSplits: 1).first.map(String.init) ?? ""
            throw SRTPKeyMaterialError(
                .badKeyMethod,
                "SRTP key parameter must use key method \"inline\", got \"\(method.prefix(16))\"")
        }
        let info = text.dropFirst(prefix.count)
        if info.contains(";") {
            throw SRTPKeyMaterialError(
                .badKeyMethod,
                "SRTP key parameter holds several keys (';'); pass one inline: parameter at a time")
        }
        let parts = info.split(separator: "|", omittingEmptySubsequences: false)
        guard parts.count <= 3 else {
            throw SRTPKeyMaterialError(
                .badKeyMethod,
                "SRTP inline key has \(parts.count - 1) '|' fields; at most lifetime and MKI are allowed")
        }
        let bytes = try SRTPInlineBase64.decode(parts[0])
        try self.init(suite: suite, keyAndSalt: bytes)
        for field in parts.dropFirst() {
            if field.contains(":") {
                guard mki == nil else {
                    throw SRTPKeyMaterialError(.badMKI, "SRTP inline key has two MKI fields")
                }
                mki = try Self.parseMKI(field)
            } else {
                guard lifetime == nil, mki == nil else {
                    throw SRTPKeyMaterialError(
                        .badLifetime,
                        "SRTP inline key lifetime \"\(field.prefix(24))\" is misplaced or repeated "
                            + "(RFC 4568: key|lifetime|mki:length)")
                }
                lifetime = try Self.parseLifetime(field)
            }
        }
    }

    private static func parseLifetime(_ field: Substring) throws(SRTPKeyMaterialError) -> UInt64 {
        let limit: UInt64 = 1 << 48
        if field.hasPrefix("2^") {
            let exponentText = field.dropFirst(2)
            guard !exponentText.isEmpty, exponentText.allSatisfy(\.isASCIIDigit),
                let exponent = Int(exponentText), exponent <= 48
            else {
                throw SRTPKeyMaterialError(
                    .badLifetime,
                    "SRTP inline key lifetime \"\(field.prefix(24))\" must be 2^n with n at most 48")
            }
            return UInt64(1) << UInt64(exponent)
        }
        guard !field.isEmpty, field.allSatisfy(\.isASCIIDigit), let value = UInt64(field),
            value > 0, value <= limit
        else {
            throw SRTPKeyMaterialError(
                .badLifetime,
                "SRTP inline key lifetime \"\(field.prefix(24))\" must be a decimal from 1 to 2^48 or 2^n")
        }
        return value
    }

    private static func parseMKI(_ field: Substring) throws(SRTPKeyMaterialError) -> MKI {
        let pieces = field.split(separator: ":", omittingEmptySubsequences: false)
        guard pieces.count == 2, !pieces[0].isEmpty, !pieces[1].isEmpty,
            pieces[0].allSatisfy(\.isASCIIDigit), pieces[1].allSatisfy(\.isASCIIDigit),
            pieces[1].count <= 3
        else {
            throw SRTPKeyMaterialError(
                .badMKI,
                "SRTP inline key MKI \"\(field.prefix(24))\" must be <decimal value>:<length 1-128>")
        }
        guard let length = Int(pieces[1]), (1...128).contains(length) else {
            throw SRTPKeyMaterialError(
                .badMKI,
                "SRTP inline key MKI length \(pieces[1]) is outside 1-128 bytes")
        }
        guard let value = UInt64(pieces[0]) else {
            throw SRTPKeyMaterialError(
                .badMKI,
                "SRTP inline key MKI value \(pieces[0].prefix(24)) is larger than 64 bits")
        }
        guard MKI.fits(value, length) else {
            throw SRTPKeyMaterialError(
                .badMKI,
                "SRTP inline key MKI value \(value) does not fit in \(length) bytes")
        }
        return MKI(value: value, length: length)
    }

    // MARK: Redaction and equality

    /// First 4 bytes of BLAKE2b-128 over key||salt, in hex: identifies a key in logs without
    /// revealing it.
    public var fingerprint: String {
        let digest = Sodium.blake2b(secret, outputLength: 16)
        return digest.prefix(4).map { byte in
            let hex = String(byte, radix: 16)
            return hex.count == 1 ? "0" + hex : hex
        }.joined()
    }

    /// Suite, sizes and fingerprint; never the key.
    public var description: String {
        var text =
            "SRTPKeyMaterial(\(suite.sdpName), key \(suite.masterKeyLength) B, "
            + "salt \(suite.masterSaltLength) B, fingerprint \(fingerprint), redacted"
        if let lifetime { text += ", lifetime \(lifetime)" }
        if let mki { text += ", mki \(mki.value):\(mki.length)" }
        return text + ")"
    }

    /// Same as `description`: the key is redacted.
    public var debugDescription: String { description }

    /// A mirror without the key bytes, so `dump` and debuggers show the redacted form.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "suite": suite, "lifetime": lifetime as Any, "mki": mki as Any,
                "key": "<redacted>",
            ], displayStyle: .struct)
    }

    /// Equal when suite, lifetime, MKI and bytes match; the bytes are compared in constant time.
    public static func == (a: SRTPKeyMaterial, b: SRTPKeyMaterial) -> Bool {
        guard a.suite == b.suite, a.lifetime == b.lifetime, a.mki == b.mki else { return false }
        return a.secret == b.secret
    }
}

/// Why an SRTP key parameter or key material was rejected, with a message naming the part that is
/// wrong. Messages never include key bytes.
/// Thread rule: a value type, freely shared. Cost: none.
public struct SRTPKeyMaterialError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The class of problem, to match on.
    public struct Code: RawRepresentable, Hashable, Sendable {
        /// The code's number.
        public let rawValue: Int
        /// The value with this raw code.
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// Key, salt or key||salt has the wrong number of bytes for the suite.
        public static let wrongLength = Code(rawValue: 1)
        /// The key-salt is not valid base64 (bad character, misplaced padding or impossible length).
        public static let badBase64 = Code(rawValue: 2)
        /// Not an `inline:` key parameter, or more fields than RFC 4568 allows.
        public static let badKeyMethod = Code(rawValue: 3)
        /// The lifetime field is not a decimal or `2^n` within 2^48.
        public static let badLifetime = Code(rawValue: 4)
        /// The MKI field is not `value:length` with length 1-128 and the value fitting.
        public static let badMKI = Code(rawValue: 5)
    }

    /// The class of problem.
    public let code: Code
    /// What is wrong, naming the input part.
    public let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// A readable description, for logs and error messages.
    public var description: String { message }
}

/// The RFC 4568 key-salt's base64 (RFC 4648 §4, `Base64`), read with errors that say what is
/// wrong with the text.
package enum SRTPInlineBase64 {
    /// Encodes with `=` padding. Cost: one array and one string of the encoded length.
    package static func encode(_ bytes: RawSpan) -> String { Base64.encode(bytes) }

    /// Decodes standard base64; trailing `=` padding is optional but, when present, must be right.
    package static func decode(_ text: Substring) throws(SRTPKeyMaterialError) -> [UInt8] {
        var chars = Array(text.utf8)
        var padding = 0
        while chars.last == UInt8(ascii: "=") {
            chars.removeLast()
            padding += 1
        }
        if chars.isEmpty {
            throw SRTPKeyMaterialError(.badBase64, "SRTP inline key-salt is empty")
        }
        for (index, c) in chars.enumerated() where Base64.value(c, .standard) == nil {
            let shown = c >= 0x21 && c < 0x7f ? "'\(Character(Unicode.Scalar(c)))'" : "byte 0x\(String(c, radix: 16))"
            throw SRTPKeyMaterialError(
                .badBase64,
                "SRTP inline key-salt is not base64: \(shown) at position \(index)")
        }
        let remainder = chars.count % 4
        if remainder == 1 {
            throw SRTPKeyMaterialError(
                .badBase64,
                "SRTP inline key-salt has \(chars.count) base64 characters, an impossible length")
        }
        if padding > 0 && (padding > 2 || (chars.count + padding) % 4 != 0) {
            throw SRTPKeyMaterialError(
                .badBase64,
                "SRTP inline key-salt has wrong base64 padding (\(padding) '=' after \(chars.count) characters)")
        }
        guard let out = Base64.decode(text) else { throw SRTPKeyMaterialError(.badBase64, "SRTP inline key-salt is not base64") }
        return out
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
}
