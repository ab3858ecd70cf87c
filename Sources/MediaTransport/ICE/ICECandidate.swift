import MediaBase
import Synchronization

// ICE candidates (RFC 8445 §5.1) and their SDP attribute form (RFC 8839 §5.1), the STUN/TURN
// servers an agent gathers from, and the send path media follows (the selected pair).
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The kind of an ICE candidate (RFC 8445 §5.1.1).
package enum ICECandidateType: String, Sendable, Hashable, CaseIterable {
    /// An address of one of our interfaces.
    case host
    /// Our address as a STUN server outside our NAT sees it.
    case srflx
    /// An address learned from a connectivity check (RFC 8445 §7.2.5.3.1).
    case prflx
    /// An address a TURN server relays for us.
    case relay

    /// The type preference of RFC 8445 §5.1.2.2 (recommended values).
    package var typePreference: UInt32 {
        switch self {
        case .host: return 126
        case .prflx: return 110
        case .srflx: return 100
        case .relay: return 0
        }
    }
}

/// One ICE candidate of component 1 over UDP. Thread rule: a value type. Cost: none.
package struct ICECandidate: Hashable, Sendable, CustomStringConvertible {
    /// Candidates with the same type, base IP and server share a foundation (RFC 8445 §5.1.1.3).
    package var foundation: String
    /// The component (always 1: RTP and RTCP are multiplexed, RFC 5761).
    package var component: UInt8 = 1
    /// RFC 8445 §5.1.2 priority.
    package var priority: UInt32
    /// Where the candidate receives.
    package var address: SocketAddress
    package var type: ICECandidateType
    /// The base (host) or mapped address a reflexive or relayed candidate came from.
    package var relatedAddress: SocketAddress?

    package init(
        foundation: String, priority: UInt32, address: SocketAddress, type: ICECandidateType, relatedAddress: SocketAddress? = nil
    ) {
        self.foundation = foundation
        self.priority = priority
        self.address = address
        self.type = type
        self.relatedAddress = relatedAddress
    }

    /// RFC 8445 §5.1.2.1: (2^24)·type preference + (2^8)·local preference + (256 − component).
    package static func priority(type: ICECandidateType, localPreference: UInt32, component: UInt8 = 1) -> UInt32 {
        (type.typePreference << 24) | ((localPreference & 0xFFFF) << 8) | (256 - UInt32(component))
    }

    /// The value of an SDP `a=candidate:` attribute without the `candidate:` prefix (RFC 8839
    /// §5.1): `foundation component udp priority address port typ type [raddr a rport p]`.
    package var sdpValue: String {
        var s = "\(foundation) \(component) udp \(priority) \(address.host) \(address.port) typ \(type.rawValue)"
        if let r = relatedAddress { s += " raddr \(r.host) rport \(r.port)" }
        return s
    }

    /// Parses `sdpValue` (with or without the `candidate:` prefix); nil for anything else,
    /// including TCP candidates, which this agent does not use.
    package init?(sdpValue text: String) {
        var t = Substring(text)
        if t.hasPrefix("candidate:") { t = t.dropFirst("candidate:".count) }
        let f = t.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        guard f.count >= 8, f[0].count <= 32, !f[0].isEmpty, let component = UInt8(f[1]), component >= 1,
            f[2].lowercased() == "udp", let priority = UInt32(f[3]), let port = UInt16(f[5]), port != 0,
            f[6] == "typ", let type = ICECandidateType(rawValue: f[7]),
            let address = try? SocketAddress(host: f[4], port: port)
        else { return nil }
        var related: SocketAddress?
        var i = 8
        while i + 1 < f.count {
            if f[i] == "raddr", i + 3 < f.count, f[i + 2] == "rport", let rp = UInt16(f[i + 3]) {
                related = try? SocketAddress(host: f[i + 1], port: rp)
                i += 4
            } else {
                i += 2  // extensions (generation, ufrag, network-id ...) are ignored
            }
        }
        self.init(foundation: f[0], priority: priority, address: address, type: type, relatedAddress: related)
        self.component = component
    }

    package var description: String { "\(type.rawValue) \(address)" }
}

/// A STUN or TURN server an agent gathers candidates from. Thread rule: a value type.
package struct ICEServer: Hashable, Sendable, CustomStringConvertible {
    package enum Kind: Hashable, Sendable { case stun, turn }
    /// How we reach a TURN server (RFC 8656 §3.1: UDP, or TCP when UDP is blocked, or TLS over
    /// TCP, the `turns:` scheme of RFC 7065, where only TLS gets out or the server must be
    /// authenticated before it sees our credentials' user name).
    package enum Transport: String, Hashable, Sendable {
        /// UDP from the agent's socket.
        case udp
        /// A TCP connection of the client's own.
        case tcp
        /// TLS over a TCP connection of the client's own, the certificate checked per `tls`.
        case tls
        /// TCP or TLS: a stream of our own with the server, framed as RFC 8656 §12.5 says.
        package var isStream: Bool { self != .udp }
    }

    /// How a TLS server's certificate is checked (`Transport.tls` only). Thread rule: a value type.
    /// Cost: none until a connection is made (the CA file is read once per connection).
    package struct TLSVerification: Hashable, Sendable {
        /// The DNS name the certificate must carry (also sent as SNI); nil: the server's numeric
        /// address, which the certificate must then carry as an IP subjectAltName.
        package var serverName: String?
        /// A PEM file of the CA certificates the server's chain must end at; nil: the system's
        /// store (unless `sha256Fingerprint` is set).
        package var certificateAuthorityFile: String?
        /// The SHA-256 digest (32 bytes) of the server's certificate. Alone it replaces the chain
        /// and name checks (a self-signed server certificate); with a CA file both must hold.
        package var sha256Fingerprint: [UInt8]?

        package init(serverName: String? = nil, certificateAuthorityFile: String? = nil, sha256Fingerprint: [UInt8]? = nil) {
            self.serverName = serverName
            self.certificateAuthorityFile = certificateAuthorityFile
            self.sha256Fingerprint = sha256Fingerprint
        }
    }

    package var kind: Kind
    package var address: SocketAddress
    package var username: String
    package var password: String
    package var transport: Transport
    /// The certificate checks of a `.tls` server (ignored otherwise).
    package var tls: TLSVerification

    package init(
        kind: Kind, address: SocketAddress, username: String = "", password: String = "", transport: Transport = .udp,
        tls: TLSVerification = TLSVerification()
    ) {
        self.kind = kind
        self.address = address
        self.username = username
        self.password = password
        self.transport = transport
        self.tls = tls
    }

    package var description: String {
        switch (kind, transport) {
        case (.stun, _): return "stun:\(address)"
        case (.turn, .udp): return "turn:\(username)@\(address)"
        case (.turn, .tcp): return "turn:\(username)@\(address)?transport=tcp"
        case (.turn, .tls): return "turns:\(username)@\(address)"
        }
    }
}

/// A TURN allocation's hot-path send: a peer's data as ChannelData (RFC 8656 §12.4) on a bound
/// channel. Thread rule: any thread. Cost: no allocation (one `sendmsg` over UDP; one framed write
/// under a lock over TCP).
package protocol TURNChannelSender: AnyObject, Sendable {
    /// Sends `payload` to the peer bound to `channel`; false when it could not be sent.
    func sendChannelData(_ payload: UnsafeRawBufferPointer, channel: UInt16) -> Bool
}

/// Where a call leg's media goes now: the selected ICE pair, set by the agent, read by every
/// thread that sends on the leg (each video and audio sender, the receive pipeline's RTCP).
/// Thread rule: any thread. Cost per send: one lock-free-in-practice `Mutex` read and one
/// `sendto` (direct; `sendmsg` when the route names its local address) or ChannelData send (relayed).
package final class ICESendPath: Sendable {
    /// A route of the selected pair.
    package enum Route: Sendable, CustomStringConvertible {
        /// Straight from our socket to the peer; from the local address `from` when set (a socket
        /// bound to a wildcard address sends as the pair's local candidate).
        case direct(SocketAddress, from: SocketAddress?)
        /// Through our TURN allocation: `channel` is bound to `peer`.
        case relay(any TURNChannelSender, channel: UInt16, peer: SocketAddress)

        package var description: String {
            switch self {
            case .direct(let a, let local?): return "direct \(a) from \(local.host)"
            case .direct(let a, nil): return "direct \(a)"
            case .relay(_, let c, let p): return "relay channel 0x\(String(c, radix: 16)) to \(p)"
            }
        }

        /// The peer's address (the remote candidate).
        package var peer: SocketAddress {
            switch self {
            case .direct(let a, _), .relay(_, _, let a): return a
            }
        }

        package var isRelayed: Bool {
            if case .relay = self { return true }
            return false
        }

        /// The same route: the same peer, and for a relay the same allocation and channel. Cheap
        /// (no formatting), for callers that poll the route.
        package func isSame(as other: Route?) -> Bool {
            switch (self, other) {
            case (.direct(let a, let x), .direct(let b, let y)?): return a == b && x == y
            case (.relay(let s1, let c1, let p1), .relay(let s2, let c2, let p2)?): return s1 === s2 && c1 == c2 && p1 == p2
            default: return false
            }
        }
    }

    private let state = Mutex<Route?>(nil)
    private let sent = Atomic<UInt64>(0)
    private let unrouted = Atomic<UInt64>(0)

    package init(_ route: Route? = nil) { state.withLock { $0 = route } }

    /// The route now (nil: no working pair yet, or every pair failed).
    package var route: Route? {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }

    /// Packets sent on the path, and dropped because it had no route.
    package var packetCounts: (sent: UInt64, unrouted: UInt64) {
        (sent.load(ordering: .relaxed), unrouted.load(ordering: .relaxed))
    }

    /// Sends one datagram on the route now; false (and counted) without a route.
    @discardableResult
    package func send(_ bytes: UnsafeRawBufferPointer, on socket: UDPSocket) -> Bool {
        let ok: Bool
        switch state.withLock({ $0 }) {
        case .direct(let a, let local)?:
            ok = ((try? socket.send(bytes, to: a, from: local)) ?? 0) > 0
        case .relay(let sender, let channel, _)?:
            ok = sender.sendChannelData(bytes, channel: channel)
        case nil:
            unrouted.add(1, ordering: .relaxed)
            return false
        }
        if ok { sent.add(1, ordering: .relaxed) }
        return ok
    }
}
