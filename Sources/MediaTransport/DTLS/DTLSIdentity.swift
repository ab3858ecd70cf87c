// A DTLS key and certificate made once and presented by several endpoints, so that connections
// share one fingerprint (the W3C `RTCCertificate`): a peer or a signalling service can then
// recognise this endpoint by it across connections.
internal import CMediaShims

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// An ECDSA P-256 key and its self-signed certificate, as `DTLSTransport` makes them, for
/// `DTLSTransport.Configuration.identity`. Thread rule: any thread (immutable; each endpoint made
/// with it takes its own reference to the key and certificate, which OpenSSL only reads).
/// Cost: generating one is about a millisecond; the key lives until the last endpoint using it.
/// Sendable: the handle is set once in `init` and freed in `deinit`; OpenSSL's key and
/// certificate behind it are never modified after generation.
package final class DTLSIdentity: @unchecked Sendable {
    let handle: OpaquePointer
    /// The SHA-256 fingerprint of the certificate (what `a=fingerprint` carries).
    package let fingerprint: DTLSFingerprint
    /// When the certificate stops being valid (it was made valid from an hour before).
    package let expires: Date

    /// A fresh key and a certificate valid for `validityDays` (1...3650). Throws
    /// `.protocolError` when OpenSSL cannot make them.
    package init(validityDays: Int = 30) throws(DTLSError) {
        let days = max(1, min(validityDays, 3650))
        var error = [CChar](repeating: 0, count: 256)
        guard let made = cms_dtls_identity_new(Int32(days), &error, error.count) else {
            throw .protocolError(
                reason: String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        handle = made
        var digest = [UInt8](repeating: 0, count: 32)
        cms_dtls_identity_fingerprint(made, &digest)
        fingerprint = DTLSFingerprint(bytes: digest)!
        expires = Date().addingTimeInterval(Double(days) * 86_400)
    }

    deinit { cms_dtls_identity_free(handle) }
}
