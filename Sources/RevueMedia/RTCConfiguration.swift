// The settings of an `RTCPeerConnection`, shaped after the W3C `RTCConfiguration` dictionary:
// ICE servers by URL, the transport and bundle policies, and the few engine settings a program
// needs beyond them (where the socket binds, the video size and bitrate).
import MediaCore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A STUN or TURN server, as the W3C `RTCIceServer` names one: one or more URLs (RFC 7064
/// `stun:host[:port]`, RFC 7065 `turn:host[:port][?transport=udp|tcp]` and `turns:host[:port]`)
/// and, for TURN, a username and credential (RFC 8489 long-term credentials).
/// Thread rule: a value type. Cost: none; the URLs are read (and host names resolved) when a
/// connection is made with it.
public struct RTCIceServer: Sendable, Hashable {
    /// The server's URLs; each becomes one server of the ICE agent.
    public var urls: [String]
    /// The TURN username (required for `turn:`/`turns:` URLs, ignored for `stun:`).
    public var username: String?
    /// The TURN password (required for `turn:`/`turns:` URLs, ignored for `stun:`).
    public var credential: String?

    /// A server reached at `urls`, with TURN credentials when it relays.
    public init(urls: [String], username: String? = nil, credential: String? = nil) {
        self.urls = urls
        self.username = username
        self.credential = credential
    }

    /// The servers the engine's ICE agent takes, one per URL; host names are resolved here
    /// (blocking `getaddrinfo`, IPv4 preferred). Throws `.invalidConfiguration` for a URL that is
    /// not `stun:`, `turn:` or `turns:` with a host and an optional port, an unknown transport,
    /// or a TURN URL without username and credential.
    func engineServers() throws(RTCError) -> [ICEServer] {
        var out: [ICEServer] = []
        for url in urls {
            let (scheme, rest) = Self.split(url)
            var hostPort = Substring(rest)
            var query: Substring = ""
            if let q = hostPort.firstIndex(of: "?") {
                query = hostPort[hostPort.index(after: q)...]
                hostPort = hostPort[..<q]
            }
            guard !hostPort.isEmpty, !hostPort.contains("@"), !hostPort.contains("/") else {
                throw .invalidConfiguration("ICE server URL '\(url)': expected scheme:host[:port]")
            }
            let kind: ICEServer.Kind
            var transport = ICEServer.Transport.udp
            let defaultPort: UInt16
            switch scheme {
            case "stun":
                kind = .stun
                defaultPort = 3478
                guard query.isEmpty else { throw .invalidConfiguration("ICE server URL '\(url)': a stun: URL has no query") }
            case "turn":
                kind = .turn
                defaultPort = 3478
                switch query {
                case "", "transport=udp": transport = .udp
                case "transport=tcp": transport = .tcp
                default: throw .invalidConfiguration("ICE server URL '\(url)': the transport is udp or tcp")
                }
            case "turns":
                kind = .turn
                defaultPort = 5349
                transport = .tls
                guard query.isEmpty || query == "transport=tcp" else {
                    throw .invalidConfiguration("ICE server URL '\(url)': a turns: URL runs over TCP")
                }
            default:
                throw .invalidConfiguration("ICE server URL '\(url)': the scheme is stun, turn or turns")
            }
            let address: SocketAddress
            do { address = try SocketAddress(parsing: String(hostPort), defaultPort: defaultPort) } catch {
                throw .invalidConfiguration("ICE server URL '\(url)': \(error)")
            }
            if kind == .stun {
                out.append(ICEServer(kind: .stun, address: address))
                continue
            }
            guard let username, let credential, !username.isEmpty else {
                throw .invalidConfiguration("ICE server URL '\(url)': a TURN server needs a username and a credential")
            }
            var tls = ICEServer.TLSVerification()
            // The certificate must name the host as written when it is a name.
            let host = hostPort.hasPrefix("[") ? "" : String(hostPort.split(separator: ":").first ?? "")
            if transport == .tls, !host.isEmpty, !host.allSatisfy({ $0 == "." || $0.isNumber }) { tls.serverName = host }
            out.append(
                ICEServer(
                    kind: .turn, address: address, username: username, password: credential, transport: transport, tls: tls))
        }
        return out
    }

    /// `scheme:rest` with the scheme lower-cased; an empty scheme without a colon.
    private static func split(_ url: String) -> (String, String) {
        guard let colon = url.firstIndex(of: ":") else { return ("", url) }
        return (url[..<colon].lowercased(), String(url[url.index(after: colon)...]))
    }
}

/// Which candidates ICE may use (W3C `RTCIceTransportPolicy`). Thread rule: a value type. Cost: none.
public enum RTCIceTransportPolicy: String, Sendable, Hashable {
    /// Host, server-reflexive and relayed candidates.
    case all
    /// Only relayed candidates: every packet goes through a TURN server, and the peer never
    /// learns this machine's addresses. Needs a TURN server in `iceServers`.
    case relay
}

/// How media sections share transports (W3C `RTCBundlePolicy`). This engine runs every section
/// over one ICE and DTLS transport (BUNDLE, RFC 9143), so `.balanced` and `.maxBundle` behave
/// the same: facing an offer without BUNDLE, only its first audio or video section is accepted.
/// `.maxCompat` (a transport per section) is refused with `.notSupported`.
/// Thread rule: a value type. Cost: none.
public enum RTCBundlePolicy: String, Sendable, Hashable {
    /// Bundle when the peer does; this engine always offers one BUNDLE group.
    case balanced
    /// A transport per section, for peers without BUNDLE: not supported by this engine.
    case maxCompat = "max-compat"
    /// Everything on one transport.
    case maxBundle = "max-bundle"
}

/// A DTLS certificate and its private key (W3C `RTCCertificate`): an ECDSA P-256 key with a
/// self-signed certificate. Give the same one to several connections (`RTCConfiguration.
/// certificates`) and they all present one fingerprint, so a peer or a signalling service can
/// recognise this endpoint across connections. The private key never leaves the process.
/// Thread rule: any thread (immutable). Cost: `generate` takes about a millisecond; the key lives
/// while this object or a connection made with it does.
public final class RTCCertificate: Sendable, Hashable {
    let identity: DTLSIdentity

    private init(identity: DTLSIdentity) { self.identity = identity }

    /// A fresh key and certificate valid for `expires` from now (rounded up to whole days,
    /// 1 to 3650). Throws `.setup` when OpenSSL cannot make them.
    public static func generate(expires: Duration = .seconds(30 * 86_400)) throws(RTCError) -> RTCCertificate {
        let days = Int((RTCPeerConnection.seconds(expires) / 86_400).rounded(.up))
        do { return RTCCertificate(identity: try DTLSIdentity(validityDays: max(1, min(days, 3650)))) } catch {
            throw .setup("DTLS certificate: \(error)")
        }
    }

    /// When the certificate stops being valid; a connection refuses an expired one.
    public var expires: Date { identity.expires }

    /// The certificate's fingerprint as `a=fingerprint` carries it: the algorithm (`sha-256`)
    /// and the digest in colon-separated upper-case hex.
    public var fingerprint: (algorithm: String, value: String) {
        let parts = identity.fingerprint.sdpValue.split(separator: " ", maxSplits: 1)
        return (String(parts[0]), String(parts.count > 1 ? parts[1] : ""))
    }

    /// Two certificates are equal when they are the same object (the same key).
    public static func == (a: RTCCertificate, b: RTCCertificate) -> Bool { a === b }
    /// Hashes the object's identity.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// The settings of an `RTCPeerConnection`, fixed when it is made (W3C `RTCConfiguration`, plus
/// the engine's own settings at the end). Thread rule: a value type. Cost: none.
public struct RTCConfiguration: Sendable, Hashable {
    /// STUN and TURN servers to gather candidates from.
    public var iceServers: [RTCIceServer] = []
    /// Which candidates may be used.
    public var iceTransportPolicy: RTCIceTransportPolicy = .all
    /// How sections share transports (see `RTCBundlePolicy`).
    public var bundlePolicy: RTCBundlePolicy = .balanced
    /// The DTLS certificate to present (at most one: this engine has one DTLS identity per
    /// connection); empty: a fresh certificate per connection.
    public var certificates: [RTCCertificate] = []
    /// The address the connection's one UDP socket binds (port 0: a free port). The wildcard
    /// `0.0.0.0` (or `::`, both families) offers every up interface address; a loopback
    /// address offers only itself (two peers on one machine).
    public var localAddress: String = "0.0.0.0"
    /// How long `createOffer`/`createAnswer` wait for gathering to finish, so that the description
    /// already carries every candidate for a peer that does not trickle (a WHIP client). Zero:
    /// they return at once and candidates arrive only through `onIceCandidate`.
    public var gatheringWait: Duration = .seconds(5)
    /// ICE and DTLS must connect within this long after the remote description.
    public var connectTimeout: Duration = .seconds(30)
    /// Local video is encoded at this size (the capturer scales what it is given).
    public var videoWidth = 640
    /// See `videoWidth`.
    public var videoHeight = 360
    /// The video encoder's start bitrate in bit/s (the peer's RTCP feedback moves it).
    public var videoBitrate = 1_000_000
    /// The most the video may send in bit/s, however much the path allows. nil (the default):
    /// by the frame size, 600 kbit/s up to 320x240, 1.7 Mbit/s up to 640x480, 2 Mbit/s up to
    /// 960x540 and 2.5 Mbit/s above; never below `videoBitrate`.
    public var videoMaximumBitrate: Int? = nil

    /// The defaults: no servers, all candidates, one bundled transport, a wildcard socket.
    public init() {}

    /// A configuration with `iceServers` and the other defaults.
    public init(iceServers: [RTCIceServer]) { self.iceServers = iceServers }
}
