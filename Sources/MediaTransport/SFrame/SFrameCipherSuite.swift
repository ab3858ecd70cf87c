/// The SFrame cipher suites of RFC 9605 section 4.5 / 8.1, by their registered value. The AES-CTR
/// suites use AES-128 in counter mode with an HMAC-SHA256 tag truncated to 80, 64 or 32 bits
/// (section 4.5.1; short tags suit audio, where the tag is a large part of a small frame); the
/// AES-GCM suites are the plain AEADs with a 128-bit tag. Every suite uses a 12-byte nonce.
/// Thread rule: a value type, freely shared. Cost: none.
public enum SFrameCipherSuite: UInt16, Sendable, CaseIterable {
    /// AES-128-CTR with HMAC-SHA256, 10-byte tag.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    case aes128CTRHMACSHA256_80 = 0x0001
    /// AES-128-CTR with HMAC-SHA256, 8-byte tag.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    case aes128CTRHMACSHA256_64 = 0x0002
    /// AES-128-CTR with HMAC-SHA256, 4-byte tag.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    case aes128CTRHMACSHA256_32 = 0x0003
    /// AES-128-GCM, 16-byte tag; HKDF with SHA-256.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    case aes128GCMSHA256_128 = 0x0004
    /// AES-256-GCM, 16-byte tag; HKDF with SHA-512.
    // swift-format-ignore: AlwaysUseLowerCamelCase
    case aes256GCMSHA512_128 = 0x0005

    /// Nk: the bytes of `sframe_key` (for the CTR suites the 16-byte AES key then the 32-byte HMAC key).
    public var keyLength: Int {
        switch self {
        case .aes128CTRHMACSHA256_80, .aes128CTRHMACSHA256_64, .aes128CTRHMACSHA256_32: 48
        case .aes128GCMSHA256_128: 16
        case .aes256GCMSHA512_128: 32
        }
    }

    /// Nn: the bytes of the nonce and of `sframe_salt`.
    public var nonceLength: Int { 12 }

    /// Nt: the bytes of the authentication tag appended to the ciphertext.
    public var tagLength: Int {
        switch self {
        case .aes128CTRHMACSHA256_80: 10
        case .aes128CTRHMACSHA256_64: 8
        case .aes128CTRHMACSHA256_32: 4
        case .aes128GCMSHA256_128, .aes256GCMSHA512_128: 16
        }
    }

    /// The longest tag of any suite (16 bytes), for sizing buffers before the suite is known.
    public static let maxTagLength = 16

    /// Whether HKDF runs on SHA-512 (suite 5) rather than SHA-256.
    var usesSHA512: Bool { self == .aes256GCMSHA512_128 }
}
