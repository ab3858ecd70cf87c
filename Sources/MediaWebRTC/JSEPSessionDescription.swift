import MediaTransport
// JSEP (RFC 8829) session descriptions: the offers and answers a WebRTC peer connection exchanges,
// as typed values. Parsing is in JSEPParser.swift, offer and answer generation in
// JSEPNegotiation.swift; docs/jsep.md says what is supported and what is ignored.
import MediaWire

/// Whether a description is an offer or an answer (RFC 8829 §4.1.8; `pranswer` and `rollback`
/// are not modelled). Thread rule: a value type. Cost: none.
public enum JSEPType: String, Hashable, Sendable {
    case offer, answer
}

/// The media of an m-section: `audio`, `video`, `application` (data channels), or any other token
/// a peer wrote (kept so that it can be rejected by name). Thread rule: a value type. Cost: none.
public struct JSEPMediaKind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The `m=` media token as written.
    public var rawValue: String
    /// The kind named `rawValue`.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// `m=audio`.
    public static let audio = JSEPMediaKind(rawValue: "audio")
    /// `m=video`.
    public static let video = JSEPMediaKind(rawValue: "video")
    /// `m=application` (SCTP data channels, RFC 8841).
    public static let application = JSEPMediaKind(rawValue: "application")
    /// The token.
    public var description: String { rawValue }
}

/// `a=setup` (RFC 4145 §4, RFC 8842 §5): which side opens the DTLS association. An offer says
/// `actpass`; the answer picks `active` (it sends the ClientHello) or `passive`.
/// Thread rule: a value type. Cost: none.
public enum JSEPSetupRole: String, Hashable, Sendable, CaseIterable {
    case actpass, active, passive, holdconn

    /// The role an answerer takes facing an offer with this role (RFC 8842 §5.3: `actpass`
    /// becomes `active`, as RFC 8829 §5.3.1 recommends; `active` becomes `passive` and the other
    /// way round). Nil for `holdconn`.
    public var answerRole: JSEPSetupRole? {
        switch self {
        case .actpass, .passive: return .active
        case .active: return .passive
        case .holdconn: return nil
        }
    }
}

/// `a=fingerprint:<hash> <hex:hex:...>` (RFC 8122 §5): the hash of the certificate the DTLS peer
/// will present. Thread rule: a value type. Cost: none.
public struct JSEPFingerprint: Hashable, Sendable, CustomStringConvertible {
    /// Hash function name, lower case as RFC 8122 registers it: `sha-256`, `sha-1`, `sha-512`.
    public var algorithm: String
    /// The digest.
    public var bytes: [UInt8]

    /// A fingerprint; `algorithm` is stored lower case.
    public init(algorithm: String = "sha-256", bytes: [UInt8]) {
        self.algorithm = algorithm.lowercased(); self.bytes = bytes
    }

    /// Digest length in bytes of the hash functions RFC 8122 names, nil for others.
    public static func digestLength(algorithm: String) -> Int? {
        switch algorithm.lowercased() {
        case "sha-1": return 20
        case "sha-224": return 28
        case "sha-256": return 32
        case "sha-384": return 48
        case "sha-512": return 64
        case "md5": return 16
        case "md2": return 16
        default: return nil
        }
    }

    /// The attribute value: `sha-256 AB:CD:...` (upper-case hex, RFC 8122 §5).
    public var value: String {
        let digits = Array("0123456789ABCDEF")
        return algorithm + " " + bytes.map { String([digits[Int($0 >> 4)], digits[Int($0 & 15)]]) }.joined(separator: ":")
    }

    /// The attribute value.
    public var description: String { value }
}

/// ICE credentials of an m-section or a session (RFC 8839 §5.4): `a=ice-ufrag` and `a=ice-pwd`.
/// `a=ice-options` is kept next to them (`iceOptions`), as it may be written at the other level.
/// Thread rule: a value type. Cost: none.
public struct JSEPICEParameters: Hashable, Sendable {
    /// The username fragment (4-256 ice-chars).
    public var usernameFragment: String
    /// The password (22-256 ice-chars).
    public var password: String

    /// Credentials.
    public init(usernameFragment: String, password: String) {
        self.usernameFragment = usernameFragment; self.password = password
    }

    /// Whether `text` is a valid ICE ufrag or password of length `range` (RFC 8839 §5.4:
    /// ice-char = ALPHA / DIGIT / "+" / "/").
    static func isICEChars(_ text: Substring, _ range: ClosedRange<Int>) -> Bool {
        range.contains(text.utf8.count)
            && text.utf8.allSatisfy { c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2B || c == 0x2F
            }
    }
}

/// One `a=candidate` (RFC 8839 §5.1) as a peer wrote it: UDP or TCP, an IP address or an mDNS
/// `.local` name, with any extensions (`generation`, `ufrag`, `network-id`, `tcptype`).
/// Thread rule: a value type. Cost: parsing is linear in the line.
public struct JSEPCandidate: Hashable, Sendable {
    /// The foundation (1-32 characters).
    public var foundation: String
    /// The component id (1 for RTP, 2 for RTCP without rtcp-mux).
    public var component: Int
    /// `udp` or `tcp` as written (case kept).
    public var transport: String
    /// The RFC 8445 §5.1.2 priority.
    public var priority: UInt32
    /// An IPv4 or IPv6 address, or an mDNS host name (`<uuid>.local`) that the peer resolves.
    public var address: String
    /// The port (0-65535; 9 for active TCP candidates).
    public var port: Int
    /// `host`, `srflx`, `prflx`, `relay` (or another token a peer wrote).
    public var type: String
    /// `raddr`: the base address of a reflexive or relayed candidate.
    public var relatedAddress: String?
    /// `rport`: the base port.
    public var relatedPort: Int?
    /// Every other name/value pair after the type, in order (`tcptype passive`, `generation 0`).
    public var extensions: [(name: String, value: String)] {
        get { extensionPairs.map { ($0.name, $0.value) } }
        set { extensionPairs = newValue.map { Extension(name: $0.name, value: $0.value) } }
    }
    private var extensionPairs: [Extension] = []
    private struct Extension: Hashable, Sendable { var name: String; var value: String }

    /// A candidate from its fields.
    public init(
        foundation: String, component: Int = 1, transport: String = "udp", priority: UInt32,
        address: String, port: Int, type: String, relatedAddress: String? = nil, relatedPort: Int? = nil
    ) {
        self.foundation = foundation; self.component = component; self.transport = transport
        self.priority = priority; self.address = address; self.port = port; self.type = type
        self.relatedAddress = relatedAddress; self.relatedPort = relatedPort
    }

    /// Parses a candidate as it travels: `a=candidate:...`, `candidate:...` (trickled in
    /// signalling, RFC 8838 §4.4) or the bare value. Nil when it does not follow RFC 8839 §5.1:
    /// fewer than eight fields, a component outside 1-256, a priority or port that is not a
    /// number, no `typ`, or an extension without a value.
    public init?(_ text: String) {
        var t = Substring(text)
        if t.hasPrefix("a=") { t = t.dropFirst(2) }
        if t.hasPrefix("candidate:") { t = t.dropFirst("candidate:".count) }
        let f = t.split(separator: " ", omittingEmptySubsequences: true)
        guard f.count >= 8, (1...32).contains(f[0].utf8.count), let component = Int(f[1]), (1...256).contains(component),
            !f[2].isEmpty, let priority = UInt32(f[3]), !f[4].isEmpty, let port = Int(f[5]), (0...65535).contains(port),
            f[6] == "typ", !f[7].isEmpty
        else { return nil }
        self.init(
            foundation: String(f[0]), component: component, transport: String(f[2]), priority: priority,
            address: String(f[4]), port: port, type: String(f[7]))
        var i = 8
        while i < f.count {
            guard i + 1 < f.count else { return nil }
            let name = f[i], value = f[i + 1]
            if name == "raddr" && relatedAddress == nil {
                relatedAddress = String(value)
            } else if name == "rport" && relatedPort == nil {
                guard let p = Int(value), (0...65535).contains(p) else { return nil }
                relatedPort = p
            } else {
                extensionPairs.append(Extension(name: String(name), value: String(value)))
            }
            i += 2
        }
    }

    /// The value after `candidate:` (RFC 8839 §5.1 order: related address before extensions).
    public var value: String {
        var s = "\(foundation) \(component) \(transport) \(priority) \(address) \(port) typ \(type)"
        if let a = relatedAddress { s += " raddr \(a)" }
        if let p = relatedPort { s += " rport \(p)" }
        for e in extensionPairs { s += " \(e.name) \(e.value)" }
        return s
    }

    /// `candidate:<value>`: the string trickled in signalling (`RTCIceCandidate.candidate`).
    public var trickleText: String { "candidate:" + value }

    /// The candidate as the ICE agent uses it: component 1 over UDP at an IP address. Nil for TCP,
    /// mDNS names and other components, which the agent does not use.
    package var iceCandidate: ICECandidate? { ICECandidate(sdpValue: value) }

    /// The SDP form of an agent's candidate.
    package init(_ candidate: ICECandidate) {
        // ICECandidate's own attribute form is the reference; it always parses.
        self = JSEPCandidate(candidate.sdpValue)!
    }
}

/// One codec of an m-section: `a=rtpmap`, its `a=fmtp` and its `a=rtcp-fb` lines (RFC 8866 §6.6,
/// §6.15; RFC 4585). Retransmission (RFC 4588) is a codec of its own named `rtx` whose `apt`
/// names the codec it repairs. Thread rule: a value type. Cost: parameter look-ups parse the fmtp.
public struct JSEPCodec: Hashable, Sendable {
    /// The payload type (0-127).
    public var payloadType: Int
    /// The encoding name as written (`opus`, `VP8`, `rtx`).
    public var name: String
    /// The RTP clock rate (48000 for Opus, 90000 for video).
    public var clockRate: Int
    /// For audio, the channel count (`2` for Opus); nil when the rtpmap has none.
    public var channels: Int?
    /// The fmtp parameters as written (`minptime=10;useinbandfec=1`), nil without `a=fmtp`.
    public var parameters: String?
    /// The feedback this codec's receiver understands (`nack`, `nack pli`, `ccm fir`,
    /// `goog-remb`, `transport-cc`); `payloadType` of each is this codec's.
    public var feedback: [SDPRTCPFeedback]

    /// A codec.
    public init(
        payloadType: Int, name: String, clockRate: Int, channels: Int? = nil, parameters: String? = nil,
        feedback: [SDPRTCPFeedback] = []
    ) {
        self.payloadType = payloadType; self.name = name; self.clockRate = clockRate; self.channels = channels
        self.parameters = parameters; self.feedback = feedback
    }

    /// The codecs this engine sends and receives, by their RFC names. Everything else (H264,
    /// AV1, red, ulpfec, PCMU, telephone-event...) is kept when parsed and left out of answers.
    public enum Known: Hashable, Sendable {
        /// Opus 48000/2 (RFC 7587), also written without the channel count.
        case opus
        /// VP8 90000 (RFC 7741).
        case vp8
        /// VP9 90000 profile 0 (RFC 9628); other VP9 profiles are not supported.
        case vp9
        /// RFC 4588 retransmission of another codec of the section.
        case rtx
    }

    /// Which supported codec this is, nil when this engine cannot use it.
    public var known: Known? {
        switch name.lowercased() {
        // RFC 7587 §7 says `opus/48000/2`; GStreamer writes `OPUS/48000`.
        case "opus": return clockRate == 48_000 && (channels == 2 || channels == nil) ? .opus : nil
        case "vp8": return clockRate == 90_000 ? .vp8 : nil
        case "vp9": return clockRate == 90_000 && (profileID ?? 0) == 0 ? .vp9 : nil
        case "rtx": return associatedPayloadType != nil ? .rtx : nil
        default: return nil
        }
    }

    /// The `key=value` pairs of the fmtp, in order.
    public var parameterPairs: [(key: String, value: String)] {
        guard let p = parameters else { return [] }
        return SDPFormatParameters(payloadType: payloadType, parameters: p).pairs
    }

    /// The value of fmtp parameter `key`.
    public func parameter(_ key: String) -> String? { parameterPairs.first { $0.key == key }?.value }

    /// RFC 4588 `apt`: the payload type this retransmission codec repairs.
    public var associatedPayloadType: Int? { parameter("apt").flatMap { Int($0) }.flatMap { (0...127).contains($0) ? $0 : nil } }
    /// Opus `minptime` (RFC 7587 §6.1), in ms.
    public var minimumPacketTime: Int? { parameter("minptime").flatMap { Int($0) } }
    /// Opus `useinbandfec=1`: the receiver wants in-band FEC.
    public var usesInbandFEC: Bool { parameter("useinbandfec") == "1" }
    /// Opus `usedtx=1`: the receiver accepts discontinuous transmission.
    public var usesDTX: Bool { parameter("usedtx") == "1" }
    /// VP9 `profile-id` (RFC 9628 §6); absent means profile 0.
    public var profileID: Int? { parameter("profile-id").flatMap { Int($0) } }

    /// Whether the feedback list names `type` (and `parameter`, if given).
    public func hasFeedback(_ type: String, _ parameter: String? = nil) -> Bool {
        feedback.contains { $0.type == type && $0.parameter == parameter }
    }
}

/// `a=msid:<stream id> [<track id>]` (RFC 8830 §2): the media stream (and track) an m-section's
/// outgoing media belongs to. Thread rule: a value type. Cost: none.
public struct JSEPMediaStreamID: Hashable, Sendable {
    /// The stream id (`-` for a track in no stream).
    public var stream: String
    /// The application track id.
    public var track: String?
    /// An msid.
    public init(stream: String, track: String? = nil) { self.stream = stream; self.track = track }
    /// The attribute value.
    public var value: String { track.map { "\(stream) \($0)" } ?? stream }
}

/// One m-section of a JSEP description (RFC 8829 §5.2.1): transport (ICE, DTLS, rtcp-mux),
/// codecs, header extensions, the sending track's identity and its candidates. Attributes this
/// model does not type are kept in `otherAttributes` and written back.
/// Thread rule: a value type. Cost: none beyond its arrays.
public struct JSEPMediaSection: Hashable, Sendable {
    /// `m=` media, port, protocol and formats. Port 0 rejects the section (RFC 8829 §5.3.1)
    /// unless it is `bundleOnly`; 9 is the discard port written before any candidate is known.
    public var kind: JSEPMediaKind
    /// The `m=` port.
    public var port: Int
    /// `UDP/TLS/RTP/SAVPF` for media, `UDP/DTLS/SCTP` for data channels.
    public var proto: String
    /// The formats of the `m=` line: payload types, or `webrtc-datachannel`. For an RTP section
    /// with codecs, `sdp` writes the codecs' payload types instead (they are kept equal).
    public var formats: [String]
    /// `c=`: the default candidate's address, `IN IP4 0.0.0.0` when there is none yet.
    public var connection: SDPConnection?
    /// `b=` lines.
    public var bandwidths: [SDPBandwidth] = []
    /// `a=mid` (RFC 8843 identification tag).
    public var mid: String?
    /// The direction; `sendrecv` when the section has no direction attribute (RFC 8866 §6.7).
    public var direction: SDPDirection = .sendrecv
    /// Whether a direction attribute was written (`direction` is the default otherwise).
    public var hasDirectionAttribute = true
    /// ICE credentials written in this section (nil: the session-level ones apply).
    public var ice: JSEPICEParameters?
    /// `a=ice-options` tokens written in this section: `trickle` (RFC 8838), `ice2`...
    public var iceOptions: [String] = []
    /// `a=fingerprint` lines written in this section.
    public var fingerprints: [JSEPFingerprint] = []
    /// `a=setup`.
    public var setup: JSEPSetupRole?
    /// `a=rtcp-mux` (RFC 5761): RTP and RTCP on one port.
    public var rtcpMux = false
    /// `a=rtcp-rsize` (RFC 5506): reduced-size RTCP.
    public var rtcpReducedSize = false
    /// `a=bundle-only` (RFC 8843 §6): the section only works inside its BUNDLE group.
    public var bundleOnly = false
    /// Codecs in the order of the `m=` line (which is the order of preference).
    public var codecs: [JSEPCodec] = []
    /// `a=rtcp-fb:* ...` lines that apply to every codec.
    public var wildcardFeedback: [SDPRTCPFeedback] = []
    /// `a=extmap` lines (RFC 8285).
    public var extensions: [SDPExtensionMap] = []
    /// `a=msid` lines.
    public var mediaStreamIDs: [JSEPMediaStreamID] = []
    /// `a=ssrc` lines (RFC 5576).
    public var ssrcs: [SDPSSRCAttribute] = []
    /// `a=ssrc-group` lines (`FID` pairs a media SSRC with its retransmission SSRC).
    public var ssrcGroups: [SDPSSRCGroup] = []
    /// `a=candidate` lines.
    public var candidates: [JSEPCandidate] = []
    /// `a=end-of-candidates` (RFC 8838 §4.4: no more will be trickled).
    public var endOfCandidates = false
    /// Every other `a=` line, in order (`a=rtcp:`, `a=sctp-port:`, `a=extmap-allow-mixed`...).
    public var otherAttributes: [SDPAttribute] = []

    /// A section with no attributes.
    public init(kind: JSEPMediaKind, port: Int = 9, proto: String = "UDP/TLS/RTP/SAVPF", formats: [String] = []) {
        self.kind = kind; self.port = port; self.proto = proto; self.formats = formats
    }

    /// Whether the section is rejected: port 0 without `a=bundle-only` (RFC 8843 §6: an offerer
    /// may give a section port 0 and `a=bundle-only` to say it only works bundled, as GStreamer's
    /// webrtcbin does with `max-bundle`). No media flows on a rejected section.
    public var isRejected: Bool { port == 0 && !bundleOnly }

    /// Whether the protocol is RTP (`.../RTP/...`), so that formats are payload types.
    public var isRTP: Bool { proto.split(separator: "/").contains("RTP") }

    /// The codec with payload type `pt`.
    public func codec(payloadType pt: Int) -> JSEPCodec? { codecs.first { $0.payloadType == pt } }

    /// The retransmission payload type repairing `pt`, if negotiated.
    public func retransmissionPayloadType(for pt: Int) -> Int? {
        codecs.first { $0.known == .rtx && $0.associatedPayloadType == pt }?.payloadType
    }

    /// The ID of header extension `uri`, if present.
    public func extensionID(_ uri: String) -> Int? { extensions.first { $0.uri == uri }?.id }

    /// The SSRCs this section sends: those of `a=ssrc` lines, in first-seen order, with the
    /// `FID` group's retransmission SSRC paired to its media SSRC.
    public var sendingSSRCs: [(media: UInt32, retransmission: UInt32?)] {
        var seen: [UInt32] = []
        for s in ssrcs where !seen.contains(s.ssrc) { seen.append(s.ssrc) }
        let rtx = Set(ssrcGroups.filter { $0.semantics == "FID" && $0.ssrcs.count == 2 }.map { $0.ssrcs[1] })
        return seen.filter { !rtx.contains($0) }.map { m in
            (m, ssrcGroups.first { $0.semantics == "FID" && $0.ssrcs.count == 2 && $0.ssrcs[0] == m }?.ssrcs[1])
        }
    }

    /// The `a=ssrc:<ssrc> cname:` value, if any.
    public var cname: String? { ssrcs.first { $0.attribute == "cname" }?.value }

    /// The section's lines, `m=` first.
    var lines: [String] {
        let written = isRTP && !codecs.isEmpty ? codecs.map { String($0.payloadType) } : formats
        var out = ["m=\(kind.rawValue) \(port) \(proto) \(written.joined(separator: " "))"]
        if let c = connection { out.append("c=\(c.networkType) \(c.addressType) \(c.address)") }
        for b in bandwidths { out.append("b=\(b.type):\(b.value)") }
        for c in candidates { out.append("a=candidate:" + c.value) }
        if endOfCandidates { out.append("a=end-of-candidates") }
        out += JSEPSessionDescription.transportLines(ice: ice, iceOptions: iceOptions, fingerprints: fingerprints, setup: setup)
        if let m = mid { out.append("a=mid:\(m)") }
        if bundleOnly { out.append("a=bundle-only") }
        for e in extensions {
            out.append(
                "a=extmap:\(e.id)" + (e.direction.map { "/\($0.rawValue)" } ?? "") + " \(e.uri)"
                    + (e.attributes.map { " \($0)" } ?? ""))
        }
        if hasDirectionAttribute { out.append("a=\(direction.rawValue)") }
        for m in mediaStreamIDs { out.append("a=msid:" + m.value) }
        if rtcpMux { out.append("a=rtcp-mux") }
        if rtcpReducedSize { out.append("a=rtcp-rsize") }
        for f in wildcardFeedback { out.append("a=rtcp-fb:* \(f.type)" + (f.parameter.map { " \($0)" } ?? "")) }
        for c in codecs {
            out.append("a=rtpmap:\(c.payloadType) \(c.name)/\(c.clockRate)" + (c.channels.map { "/\($0)" } ?? ""))
            for f in c.feedback { out.append("a=rtcp-fb:\(c.payloadType) \(f.type)" + (f.parameter.map { " \($0)" } ?? "")) }
            if let p = c.parameters { out.append("a=fmtp:\(c.payloadType) \(p)") }
        }
        for g in ssrcGroups { out.append("a=ssrc-group:\(g.semantics)" + g.ssrcs.map { " \($0)" }.joined()) }
        for s in ssrcs { out.append("a=ssrc:\(s.ssrc) \(s.attribute)" + (s.value.map { ":\($0)" } ?? "")) }
        for a in otherAttributes { out.append(a.line) }
        return out
    }
}

/// A JSEP session description (RFC 8829): the `sdp` text of an `RTCSessionDescription` and its
/// typed fields. Parse what a peer sent with `init(parsing:type:)`; make ours with
/// `JSEPNegotiator.createOffer`/`createAnswer`; `sdp` writes it with CRLF line ends
/// (RFC 8866 §5). Session-level ICE credentials, fingerprints and setup (as Firefox writes them)
/// apply to every section that has none of its own: read them through `effectiveICE(of:)`,
/// `effectiveFingerprints(of:)` and `effectiveSetup(of:)`.
/// Thread rule: a value type. Cost: parsing and `sdp` are linear in the text.
public struct JSEPSessionDescription: Hashable, Sendable {
    /// Offer or answer.
    public var type: JSEPType
    /// `o=`: session id (stays the same across renegotiation) and version (grows by one with
    /// every new description, RFC 8829 §5.2.2).
    public var origin: SDPOrigin
    /// `s=`.
    public var sessionName: String = "-"
    /// The mids of `a=group:BUNDLE` (RFC 8843), the tagged (first) one first; empty without a group.
    public var bundle: [String] = []
    /// Session-level ICE credentials, when a peer wrote them there.
    public var ice: JSEPICEParameters?
    /// Session-level `a=ice-options` tokens.
    public var iceOptions: [String] = []
    /// Session-level fingerprints (as Firefox writes them).
    public var fingerprints: [JSEPFingerprint] = []
    /// Session-level `a=setup`.
    public var setup: JSEPSetupRole?
    /// `a=ice-lite` (RFC 8839 §5.3): the peer only answers checks.
    public var iceLite = false
    /// Other session-level `a=` lines (`a=msid-semantic`, `a=extmap-allow-mixed`, other groups).
    public var otherAttributes: [SDPAttribute] = []
    /// The m-sections in order; their index is the `sdpMLineIndex` of trickled candidates.
    public var media: [JSEPMediaSection] = []

    /// An empty description.
    public init(type: JSEPType, origin: SDPOrigin) { self.type = type; self.origin = origin }

    /// The ICE and DTLS attribute lines (credentials, options, fingerprints, setup role), as they
    /// stand at session level or in a media section.
    static func transportLines(
        ice: JSEPICEParameters?, iceOptions: [String], fingerprints: [JSEPFingerprint],
        setup: JSEPSetupRole?
    ) -> [String] {
        var out: [String] = []
        if let ice {
            out.append("a=ice-ufrag:\(ice.usernameFragment)")
            out.append("a=ice-pwd:\(ice.password)")
        }
        if !iceOptions.isEmpty { out.append("a=ice-options:" + iceOptions.joined(separator: " ")) }
        for f in fingerprints { out.append("a=fingerprint:" + f.value) }
        if let s = setup { out.append("a=setup:\(s.rawValue)") }
        return out
    }

    /// The description as SDP text, CRLF line ends, ending with CRLF: what goes into
    /// `RTCSessionDescription.sdp`.
    public var sdp: String {
        var out = [
            "v=0",
            "o=\(origin.username) \(origin.sessionID) \(origin.sessionVersion) \(origin.networkType) \(origin.addressType) \(origin.address)",
            "s=\(sessionName.isEmpty ? "-" : sessionName)",
            "t=0 0",
        ]
        if !bundle.isEmpty { out.append("a=group:BUNDLE " + bundle.joined(separator: " ")) }
        if iceLite { out.append("a=ice-lite") }
        out += JSEPSessionDescription.transportLines(ice: ice, iceOptions: iceOptions, fingerprints: fingerprints, setup: setup)
        for a in otherAttributes { out.append(a.line) }
        for m in media { out.append(contentsOf: m.lines) }
        return out.joined(separator: "\r\n") + "\r\n"
    }

    /// The section with `mid`.
    public func section(mid: String) -> JSEPMediaSection? { media.first { $0.mid == mid } }

    /// The index of the section with `mid` (the `sdpMLineIndex` a trickled candidate names).
    public func sectionIndex(mid: String) -> Int? { media.firstIndex { $0.mid == mid } }

    /// The ICE credentials that apply to `section`: its own, else the session's.
    public func effectiveICE(of section: JSEPMediaSection) -> JSEPICEParameters? { section.ice ?? ice }

    /// Whether the peer trickles candidates for `section` (`a=ice-options:trickle` in the
    /// section or the session, RFC 8838 §4.1.1).
    public func supportsTrickle(in section: JSEPMediaSection) -> Bool {
        (section.iceOptions + iceOptions).contains("trickle")
    }

    /// The fingerprints that apply to `section`: its own, else the session's.
    public func effectiveFingerprints(of section: JSEPMediaSection) -> [JSEPFingerprint] {
        section.fingerprints.isEmpty ? fingerprints : section.fingerprints
    }

    /// The setup role that applies to `section`: its own, else the session's.
    public func effectiveSetup(of section: JSEPMediaSection) -> JSEPSetupRole? { section.setup ?? setup }

    /// Adds a trickled candidate (RFC 8838 §4.4) to the section with `mid` (or, with no mid, the
    /// section at `mLineIndex`). False when no such section exists. Cost: linear in the sections.
    @discardableResult
    public mutating func addCandidate(_ candidate: JSEPCandidate, mid: String?, mLineIndex: Int? = nil) -> Bool {
        guard let i = mid.flatMap({ sectionIndex(mid: $0) }) ?? mLineIndex.flatMap({ media.indices.contains($0) ? $0 : nil })
        else { return false }
        if !media[i].candidates.contains(candidate) { media[i].candidates.append(candidate) }
        return true
    }

    /// Marks the end of trickled candidates (`a=end-of-candidates`) in the section with `mid`,
    /// or in every section when `mid` is nil. False when no such section exists.
    @discardableResult
    public mutating func addEndOfCandidates(mid: String? = nil) -> Bool {
        guard let mid else {
            for i in media.indices where !media[i].isRejected { media[i].endOfCandidates = true }
            return true
        }
        guard let i = sectionIndex(mid: mid) else { return false }
        media[i].endOfCandidates = true
        return true
    }
}
