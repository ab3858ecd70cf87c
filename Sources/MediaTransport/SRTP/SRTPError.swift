internal import CMediaShims

/// An error from the SRTP layer: a libsrtp `srtp_err_status_t` value, or one of Revue's own checks
/// made before libsrtp is called (raw values from 1000 up).
///
/// Shaped like swift-system's `Errno`: compare with the named statics
/// (`catch let e where e == .authFail`). The ones a receiver meets on bad input from the network are
/// `authFail` (tampered or wrong key), `replayFail`/`replayOld` (replayed or too late), `badParam`
/// (malformed packet) and `noSuchSSRC` (no stream for the packet's SSRC).
/// Thread rule: a value type, freely shared. Cost: none.
public struct SRTPError: RawRepresentable, Error, Hashable, Sendable, CustomStringConvertible {
    /// The libsrtp status code, or a Revue code from 1000 up.
    public let rawValue: Int32

    /// Wraps a raw code.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    init(_ status: srtp_err_status_t) { self.rawValue = Int32(bitPattern: status.rawValue) }

    /// Unspecified failure (`srtp_err_status_fail`).
    public static let fail = SRTPError(rawValue: 1)
    /// Unsupported or malformed parameter, including packets too short or with a header longer
    /// than the packet (`srtp_err_status_bad_param`).
    public static let badParam = SRTPError(rawValue: 2)
    /// Could not allocate memory (`srtp_err_status_alloc_fail`).
    public static let allocFail = SRTPError(rawValue: 3)
    /// Could not deallocate properly (`srtp_err_status_dealloc_fail`).
    public static let deallocFail = SRTPError(rawValue: 4)
    /// Could not initialise libsrtp or a cipher (`srtp_err_status_init_fail`).
    public static let initFail = SRTPError(rawValue: 5)
    /// Cannot process as much data as requested (`srtp_err_status_terminus`).
    public static let terminus = SRTPError(rawValue: 6)
    /// Authentication tag mismatch: the packet was altered or protected with another key
    /// (`srtp_err_status_auth_fail`).
    public static let authFail = SRTPError(rawValue: 7)
    /// Cipher failure (`srtp_err_status_cipher_fail`).
    public static let cipherFail = SRTPError(rawValue: 8)
    /// Replay check failed: this packet index was already seen (`srtp_err_status_replay_fail`).
    public static let replayFail = SRTPError(rawValue: 9)
    /// Replay check failed: the index is older than the replay window (`srtp_err_status_replay_old`).
    public static let replayOld = SRTPError(rawValue: 10)
    /// An algorithm failed its self test (`srtp_err_status_algo_fail`).
    public static let algoFail = SRTPError(rawValue: 11)
    /// Unsupported operation (`srtp_err_status_no_such_op`).
    public static let noSuchOp = SRTPError(rawValue: 12)
    /// No stream matches the packet's SSRC and no wildcard policy applies
    /// (`srtp_err_status_no_ctx`).
    public static let noSuchSSRC = SRTPError(rawValue: 13)
    /// Unable to perform the desired validation (`srtp_err_status_cant_check`).
    public static let cantCheck = SRTPError(rawValue: 14)
    /// The key reached its packet limit and must be replaced (`srtp_err_status_key_expired`).
    public static let keyExpired = SRTPError(rawValue: 15)
    // swift-format-ignore: DontRepeatTypeInStaticProperties
    // The name mirrors libsrtp's `srtp_err_status_parse_err`.
    /// Error parsing data (`srtp_err_status_parse_err`).
    public static let parseError = SRTPError(rawValue: 21)
    /// The MKI in the packet is not known (`srtp_err_status_bad_mki`).
    public static let badMKI = SRTPError(rawValue: 25)
    /// The packet index is too old to consider (`srtp_err_status_pkt_idx_old`).
    public static let packetIndexOld = SRTPError(rawValue: 26)
    /// The packet index advanced too far; a reset is needed (`srtp_err_status_pkt_idx_adv`).
    public static let packetIndexAdvanced = SRTPError(rawValue: 27)

    /// Revue's own check: the caller's buffer has no room for the authentication tag and trailer
    /// that protecting the packet adds (see `SRTPContext.maxProtectedSize(for:)`).
    public static let bufferTooSmall = SRTPError(rawValue: 1000)

    /// A readable description, for logs and error messages.
    public var description: String {
        switch self {
        case .fail: "SRTP failure (srtp_err_status_fail)"
        case .badParam: "SRTP bad parameter or malformed packet (srtp_err_status_bad_param)"
        case .allocFail: "SRTP allocation failure (srtp_err_status_alloc_fail)"
        case .deallocFail: "SRTP deallocation failure (srtp_err_status_dealloc_fail)"
        case .initFail: "SRTP initialisation failure (srtp_err_status_init_fail)"
        case .terminus: "SRTP cannot process that much data (srtp_err_status_terminus)"
        case .authFail: "SRTP authentication failure (srtp_err_status_auth_fail)"
        case .cipherFail: "SRTP cipher failure (srtp_err_status_cipher_fail)"
        case .replayFail: "SRTP replayed packet (srtp_err_status_replay_fail)"
        case .replayOld: "SRTP packet older than the replay window (srtp_err_status_replay_old)"
        case .algoFail: "SRTP algorithm self test failed (srtp_err_status_algo_fail)"
        case .noSuchOp: "SRTP unsupported operation (srtp_err_status_no_such_op)"
        case .noSuchSSRC: "SRTP no stream for this SSRC (srtp_err_status_no_ctx)"
        case .cantCheck: "SRTP cannot check (srtp_err_status_cant_check)"
        case .keyExpired: "SRTP key expired (srtp_err_status_key_expired)"
        case .parseError: "SRTP parse error (srtp_err_status_parse_err)"
        case .badMKI: "SRTP unknown MKI (srtp_err_status_bad_mki)"
        case .packetIndexOld: "SRTP packet index too old (srtp_err_status_pkt_idx_old)"
        case .packetIndexAdvanced: "SRTP packet index advanced too far (srtp_err_status_pkt_idx_adv)"
        case .bufferTooSmall: "SRTP buffer too small for the protected packet"
        default: "SRTP error \(rawValue)"
        }
    }
}

extension srtp_err_status_t {
    /// Throws the matching `SRTPError` unless the status is `srtp_err_status_ok`.
    @inline(__always)
    func check() throws(SRTPError) {
        if self != srtp_err_status_ok { throw SRTPError(self) }
    }
}
