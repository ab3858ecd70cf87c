/// Why a `DTLSTransport` failed. Once failed, a transport stays failed and never yields keys.
/// Thread rule: a value type, freely shared. Cost: none.
package enum DTLSError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The handshake did not finish within `DTLSTransport.Configuration.handshakeTimeout`, or
    /// OpenSSL gave up retransmitting a flight that was never answered.
    case handshakeTimeout
    /// The peer's certificate does not have the fingerprint of the remote description: the peer is
    /// not who signalling said (RFC 5763 section 5). No key was exported.
    case fingerprintMismatch
    /// The peer sent a fatal alert (RFC 5246 section 7.2): its description code and name.
    case alert(code: UInt8, description: String)
    /// The handshake broke for another reason (OpenSSL's reason text, or a missing SRTP profile).
    case protocolError(reason: String)

    /// A readable description, for logs and error messages.
    package var description: String {
        switch self {
        case .handshakeTimeout: "DTLS handshake timed out"
        case .fingerprintMismatch: "DTLS peer certificate does not match the signalled fingerprint"
        case .alert(let code, let name): "DTLS peer sent fatal alert \(code) (\(name))"
        case .protocolError(let reason): "DTLS protocol error: \(reason)"
        }
    }
}
