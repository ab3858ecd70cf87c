internal import CMediaShims

/// An SRTP protection profile: the cipher, key and salt sizes and the authentication tag that
/// `SRTPContext` applies to RTP and RTCP.
///
/// Names are the SDP crypto-suite names of RFC 4568 section 6.2 (`AES_CM_128_HMAC_SHA1_80`,
/// `AES_CM_128_HMAC_SHA1_32`) and RFC 7714 section 14.2 (`AEAD_AES_128_GCM`, `AEAD_AES_256_GCM`).
/// `aeadAES128GCM` is the default: with Debian's NSS-backed libsrtp it costs a fraction of
/// AES-CM + HMAC-SHA1; the AES-CM suites are kept for interoperability.
/// Thread rule: a value type, freely shared. Cost: none.
public enum SRTPSuite: String, CaseIterable, Sendable, CustomStringConvertible {
    /// AES-128 in GCM mode with a 16-byte tag (RFC 7714). The default.
    case aeadAES128GCM = "AEAD_AES_128_GCM"
    /// AES-256 in GCM mode with a 16-byte tag (RFC 7714).
    case aeadAES256GCM = "AEAD_AES_256_GCM"
    /// AES-128 counter mode with a 10-byte HMAC-SHA1 tag (RFC 3711, RFC 4568).
    // swift-format-ignore: AlwaysUseLowerCamelCase
    // The name keeps the RFC 4568/5764 profile name's `_80` tag length suffix.
    case aesCM128HMACSHA1_80 = "AES_CM_128_HMAC_SHA1_80"
    /// AES-128 counter mode with a 4-byte HMAC-SHA1 tag on RTP; RTCP keeps the 10-byte tag, as
    /// RFC 5764 section 4.1.2 specifies for this profile and libsrtp recommends (RFC 3711 section
    /// 7.5), like libwebrtc and pion. (ffmpeg under this SDES name uses 4 bytes on RTCP too.)
    // swift-format-ignore: AlwaysUseLowerCamelCase
    // The name keeps the RFC 4568/5764 profile name's `_32` tag length suffix.
    case aesCM128HMACSHA1_32 = "AES_CM_128_HMAC_SHA1_32"

    /// The default suite for new sessions.
    public static let `default`: SRTPSuite = .aeadAES128GCM

    /// Parses an SDP crypto-suite name (exact, case-sensitive as RFC 4568 specifies); nil when the
    /// name is not one of the supported suites.
    public init?(sdpName: String) { self.init(rawValue: sdpName) }

    /// The SDP crypto-suite name, as written in `a=crypto` lines.
    public var sdpName: String { rawValue }

    /// A readable description, for logs and error messages.
    public var description: String { rawValue }

    /// Master key length in bytes.
    public var masterKeyLength: Int {
        switch self {
        case .aeadAES128GCM, .aesCM128HMACSHA1_80, .aesCM128HMACSHA1_32: 16
        case .aeadAES256GCM: 32
        }
    }

    /// Master salt length in bytes: 12 for the AEAD suites (RFC 7714 section 8.1), 14 for AES-CM
    /// (RFC 3711 section 8.2).
    public var masterSaltLength: Int {
        switch self {
        case .aeadAES128GCM, .aeadAES256GCM: 12
        case .aesCM128HMACSHA1_80, .aesCM128HMACSHA1_32: 14
        }
    }

    /// Master key plus salt, the length of the `inline:` key-salt (RFC 4568 section 6.1).
    public var keyAndSaltLength: Int { masterKeyLength + masterSaltLength }

    /// Authentication tag length in bytes on SRTP packets.
    public var rtpTagLength: Int {
        switch self {
        case .aeadAES128GCM, .aeadAES256GCM: 16
        case .aesCM128HMACSHA1_80: 10
        case .aesCM128HMACSHA1_32: 4
        }
    }

    /// Authentication tag length in bytes on SRTCP packets.
    public var rtcpTagLength: Int {
        switch self {
        case .aeadAES128GCM, .aeadAES256GCM: 16
        case .aesCM128HMACSHA1_80, .aesCM128HMACSHA1_32: 10
        }
    }

    /// Bytes that protecting an RTP packet adds: the tag (plus the MKI when one is used; see
    /// `SRTPContext.rtpOverhead`).
    public var rtpOverhead: Int { rtpTagLength }

    /// Bytes that protecting an RTCP packet adds: the 4-byte E flag and SRTCP index
    /// (RFC 3711 section 3.4) plus the tag (plus the MKI when one is used).
    public var rtcpOverhead: Int { rtcpTagLength + 4 }

    /// Fills libsrtp's policy for RTP with this suite.
    func setRTPPolicy(_ p: inout srtp_crypto_policy_t) {
        switch self {
        case .aeadAES128GCM: srtp_crypto_policy_set_aes_gcm_128_16_auth(&p)
        case .aeadAES256GCM: srtp_crypto_policy_set_aes_gcm_256_16_auth(&p)
        case .aesCM128HMACSHA1_80: cms_srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&p)
        case .aesCM128HMACSHA1_32: srtp_crypto_policy_set_aes_cm_128_hmac_sha1_32(&p)
        }
    }

    /// Fills libsrtp's policy for RTCP with this suite (80-bit tag for both AES-CM suites).
    func setRTCPPolicy(_ p: inout srtp_crypto_policy_t) {
        switch self {
        case .aeadAES128GCM: srtp_crypto_policy_set_aes_gcm_128_16_auth(&p)
        case .aeadAES256GCM: srtp_crypto_policy_set_aes_gcm_256_16_auth(&p)
        case .aesCM128HMACSHA1_80, .aesCM128HMACSHA1_32:
            cms_srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&p)
        }
    }
}
