// The values that travel in signalling: session descriptions and ICE candidates, shaped after the
// W3C `RTCSessionDescriptionInit` and `RTCIceCandidateInit` dictionaries.
import MediaCore

/// What a session description is (W3C `RTCSdpType`; this engine has no provisional answers and
/// no rollback). Thread rule: a value type. Cost: none.
public enum RTCSdpType: String, Sendable, Hashable, Codable {
    /// An offer (RFC 8829 §5.2).
    case offer
    /// An answer to an offer (RFC 8829 §5.3).
    case answer
}

/// An offer or answer as it travels between peers: its type and the SDP text.
/// Thread rule: a value type. Cost: none (the SDP is parsed when a connection takes it).
public struct RTCSessionDescription: Sendable, Hashable, Codable {
    /// Offer or answer.
    public var type: RTCSdpType
    /// The SDP text (RFC 8866), lines ending in CRLF.
    public var sdp: String

    /// A description of `type` with `sdp`.
    public init(type: RTCSdpType, sdp: String) {
        self.type = type
        self.sdp = sdp
    }
}

/// One ICE candidate trickled in signalling (RFC 8838), or with an empty `candidate` the end of
/// candidates (W3C `RTCIceCandidateInit`). Thread rule: a value type. Cost: none.
public struct RTCIceCandidate: Sendable, Hashable, Codable {
    /// The `candidate:...` attribute text (RFC 8839 §5.1); empty: no more candidates.
    public var candidate: String
    /// The mid of the media section the candidate belongs to (with BUNDLE, the first section).
    public var sdpMid: String?
    /// The index of that media section in the description.
    public var sdpMLineIndex: Int?
    /// The ICE username fragment the candidate belongs to (nil: the current one).
    public var usernameFragment: String?

    /// A candidate with its section and ufrag.
    public init(candidate: String, sdpMid: String? = nil, sdpMLineIndex: Int? = nil, usernameFragment: String? = nil) {
        self.candidate = candidate
        self.sdpMid = sdpMid
        self.sdpMLineIndex = sdpMLineIndex
        self.usernameFragment = usernameFragment
    }

    /// Whether this is the end-of-candidates marker (an empty `candidate`).
    public var isEndOfCandidates: Bool { candidate.isEmpty }
}

/// Why an `RTCPeerConnection` refused a call or failed (the W3C exception names in comments).
/// Thread rule: a value type. Cost: none.
public enum RTCError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A call in a state that does not allow it (InvalidStateError): an answer without a remote
    /// offer, a candidate before the remote description, anything after `close`.
    case invalidState(String)
    /// `setLocalDescription` with a description other than the one `createOffer`/`createAnswer`
    /// returned (InvalidModificationError): this engine does not take edited SDP.
    case invalidModification(String)
    /// A description that does not parse, or has no usable audio or video section, ICE
    /// credentials or SHA-256 fingerprint (OperationError); the reason names the line or part.
    case invalidDescription(String)
    /// A trickled candidate that does not parse or names no section of the remote description
    /// (OperationError).
    case invalidCandidate(String)
    /// A configuration that cannot be used (SyntaxError, InvalidAccessError): a malformed ICE
    /// server URL, TURN without credentials, an address that does not parse.
    case invalidConfiguration(String)
    /// Something the W3C API has that this engine does not do (NotSupportedError); the reason
    /// says what.
    case notSupported(String)
    /// No ICE candidate pair worked within `RTCConfiguration.connectTimeout`.
    case iceFailed
    /// Connected, then the peer stopped answering ICE consent checks (RFC 7675).
    case connectionLost
    /// The DTLS handshake failed (the peer's certificate did not match its fingerprint, a
    /// timeout, an alert).
    case dtlsFailed(String)
    /// A socket, codec or SRTP context could not be made.
    case setup(String)

    /// A readable description, for logs and test failures.
    public var description: String {
        switch self {
        case .invalidState(let s): "invalid state: \(s)"
        case .invalidModification(let s): "invalid modification: \(s)"
        case .invalidDescription(let s): "unusable session description: \(s)"
        case .invalidCandidate(let s): "unusable ICE candidate: \(s)"
        case .invalidConfiguration(let s): "invalid configuration: \(s)"
        case .notSupported(let s): "not supported: \(s)"
        case .iceFailed: "ICE found no working candidate pair"
        case .connectionLost: "the peer stopped answering ICE consent checks"
        case .dtlsFailed(let s): "DTLS failed: \(s)"
        case .setup(let s): "media setup failed: \(s)"
        }
    }

    /// The engine's error in these terms.
    init(_ e: PeerConnectionError) {
        switch e {
        case .invalidState(let s): self = .invalidState(s)
        case .invalidDescription(let s): self = .invalidDescription(s)
        case .dtls(let d): self = .dtlsFailed("\(d)")
        case .iceFailed: self = .iceFailed
        case .connectionLost: self = .connectionLost
        case .setup(let s): self = .setup(s)
        }
    }
}
