// Making offers and answers (RFC 8829 §5.2, §5.3): what this engine sends and receives
// (Opus, VP8, VP9 profile 0, RTX), over one BUNDLE transport with rtcp-mux, DTLS-SRTP and
// trickle ICE.
import MediaWire

extension SDPExtensionMap {
    /// RFC 8843 §15.2 media identification (`a=mid` carried in RTP).
    public static let midURI = "urn:ietf:params:rtp-hdrext:sdes:mid"
}

/// One local track (a transceiver, RFC 8829 §3.4.1) as offers and answers describe it.
/// Thread rule: a value type. Cost: none.
public struct JSEPTrack: Hashable, Sendable {
    /// `.audio` or `.video`.
    public var kind: JSEPMediaKind
    /// The track id written in `a=msid` (RFC 8830).
    public var id: String
    /// The stream id written in `a=msid`.
    public var streamID: String
    /// The SSRC its media goes out on.
    public var ssrc: UInt32
    /// For video, the RFC 4588 retransmission SSRC (`a=ssrc-group:FID`).
    public var retransmissionSSRC: UInt32?
    /// What the transceiver wants in an offer: `sendrecv`, `sendonly`, `recvonly` (receive only:
    /// the section carries no msid or SSRC) or `inactive`. An answer narrows it to what the
    /// offer allows.
    public var direction: SDPDirection
    /// The mid of the m-section the track uses. Nil: an offer reuses the section the same track
    /// id had in `previous`, or adds a section with a new mid; an answer takes the first offered
    /// section of the same kind that no other track took.
    public var mid: String?

    /// A track.
    public init(
        kind: JSEPMediaKind, id: String, streamID: String, ssrc: UInt32, retransmissionSSRC: UInt32? = nil,
        direction: SDPDirection = .sendrecv, mid: String? = nil
    ) {
        self.kind = kind; self.id = id; self.streamID = streamID; self.ssrc = ssrc
        self.retransmissionSSRC = retransmissionSSRC; self.direction = direction; self.mid = mid
    }

    /// Whether the direction includes sending.
    var sends: Bool { direction == .sendrecv || direction == .sendonly }
}

/// The local transport parameters that go into every description: the ICE agent's credentials
/// and gathered candidates and the DTLS certificate's fingerprint (RFC 8829 §5.2.1).
/// Thread rule: a value type. Cost: none.
public struct JSEPTransportParameters: Hashable, Sendable {
    /// The ICE agent's credentials.
    public var ice: JSEPICEParameters
    /// The certificate fingerprints (sha-256 at least).
    public var fingerprints: [JSEPFingerprint]
    /// Candidates gathered so far (written in the first bundled m-section; later ones are
    /// trickled).
    public var candidates: [JSEPCandidate]
    /// Whether gathering has finished (`a=end-of-candidates`).
    public var endOfCandidates: Bool
    /// The RTCP CNAME of every SSRC (RFC 7022: random, per peer connection).
    public var cname: String

    /// Local parameters.
    public init(
        ice: JSEPICEParameters, fingerprints: [JSEPFingerprint], candidates: [JSEPCandidate] = [],
        endOfCandidates: Bool = false, cname: String
    ) {
        self.ice = ice; self.fingerprints = fingerprints; self.candidates = candidates
        self.endOfCandidates = endOfCandidates; self.cname = cname
    }
}

/// Makes JSEP offers and answers for this engine's media: Opus 48000/2 (payload type 111),
/// VP8 (96, RTX 97) and VP9 profile 0 (98, RTX 99); the header extensions ssrc-audio-level,
/// abs-send-time, transport-wide-cc and sdes:mid; RTCP feedback nack, nack pli, ccm fir,
/// goog-remb and transport-cc; one BUNDLE transport with rtcp-mux and rtcp-rsize.
/// docs/jsep.md has the rules. Thread rule: stateless; any thread. Cost: linear in the sections.
public enum JSEPNegotiator {
    /// The feedback this engine's receivers act on (and its senders answer).
    public static let supportedFeedback: [SDPRTCPFeedback] = [
        .remb(nil), .init(payloadType: nil, type: "transport-cc"), .fir(nil), .nack(nil), .pli(nil),
    ]

    /// The codecs an offer lists for `kind`, in order of preference.
    public static func offeredCodecs(_ kind: JSEPMediaKind) -> [JSEPCodec] {
        func fb(_ pt: Int, _ list: [SDPRTCPFeedback]) -> [SDPRTCPFeedback] {
            list.map { SDPRTCPFeedback(payloadType: pt, type: $0.type, parameter: $0.parameter) }
        }
        if kind == .audio {
            return [
                JSEPCodec(
                    payloadType: 111, name: "opus", clockRate: 48_000, channels: 2,
                    parameters: "minptime=10;useinbandfec=1",
                    feedback: [SDPRTCPFeedback(payloadType: 111, type: "transport-cc")])
            ]
        }
        guard kind == .video else { return [] }
        return [
            JSEPCodec(payloadType: 96, name: "VP8", clockRate: 90_000, feedback: fb(96, supportedFeedback)),
            JSEPCodec(payloadType: 97, name: "rtx", clockRate: 90_000, parameters: "apt=96"),
            JSEPCodec(
                payloadType: 98, name: "VP9", clockRate: 90_000, parameters: "profile-id=0", feedback: fb(98, supportedFeedback)),
            JSEPCodec(payloadType: 99, name: "rtx", clockRate: 90_000, parameters: "apt=98"),
        ]
    }

    /// The header extensions an offer lists for `kind`, with their IDs (the same URI has the
    /// same ID in every section, as RFC 8843 §9.2 requires inside one BUNDLE group).
    public static func offeredExtensions(_ kind: JSEPMediaKind) -> [SDPExtensionMap] {
        var list = [
            SDPExtensionMap(id: 2, uri: SDPExtensionMap.absoluteSendTimeURI),
            SDPExtensionMap(id: 3, uri: SDPExtensionMap.transportSequenceNumberURI),
            SDPExtensionMap(id: 4, uri: SDPExtensionMap.midURI),
        ]
        if kind == .audio { list.insert(SDPExtensionMap(id: 1, uri: SDPExtensionMap.audioLevelURI), at: 0) }
        return kind == .audio || kind == .video ? list : []
    }

    /// A new session id: random, below 2^62 (RFC 8829 §5.2.1 asks for at most 63 bits).
    public static func newSessionID() -> UInt64 { UInt64.random(in: 1..<(1 << 62)) }

    /// Makes an offer for `tracks` (RFC 8829 §5.2). With `previous` (the last local description,
    /// offer or answer) it is a renegotiation (§5.2.2): the session id stays and the version
    /// grows by one; every earlier section keeps its mid and place; a track whose `mid` names an
    /// earlier section, or whose id that section's msid named, keeps that section (a section that
    /// sent nothing goes to a track of its kind not seen before); an earlier section with no track
    /// left is rejected (port 0) and leaves the BUNDLE group; new tracks get new sections at the
    /// end. Every offer says `a=setup:actpass`.
    public static func createOffer(
        tracks: [JSEPTrack], transport: JSEPTransportParameters,
        previous: JSEPSessionDescription? = nil,
        sessionID: UInt64 = newSessionID()
    ) -> JSEPSessionDescription {
        createOffer(tracks: tracks, transport: transport, previous: previous, dataChannel: nil, sessionID: sessionID)
    }

    /// `createOffer` with an `m=application` section for data channels when `dataChannel` is
    /// given (RFC 8841): an earlier data section keeps its mid and place, else it is added after
    /// the tracks' sections.
    package static func createOffer(
        tracks: [JSEPTrack], transport: JSEPTransportParameters,
        previous: JSEPSessionDescription?, dataChannel: JSEPDataChannelParameters?,
        sessionID: UInt64 = newSessionID()
    ) -> JSEPSessionDescription {
        var dataPlaced = false
        var d = JSEPSessionDescription(type: .offer, origin: origin(previous: previous, sessionID: sessionID))
        var remaining = tracks
        var usedMids = Set<String>()
        if let previous {
            // Which earlier section each track keeps: the one its mid names, else the one whose
            // msid named its id, else (second pass) a section of its kind that sent nothing
            // (recvonly or inactive: no msid to recognise it by).
            let oldIDs = Set(previous.media.compactMap { $0.mediaStreamIDs.first?.track })
            var kept = [JSEPTrack?](repeating: nil, count: previous.media.count)
            for (k, old) in previous.media.enumerated() where !old.isRejected {
                let mid = old.mid ?? "", oldTrack = old.mediaStreamIDs.first?.track
                if let i = remaining.firstIndex(where: {
                    $0.kind == old.kind && ($0.mid == mid || ($0.mid == nil && oldTrack != nil && $0.id == oldTrack))
                }) {
                    kept[k] = remaining.remove(at: i)
                }
            }
            for (k, old) in previous.media.enumerated() where !old.isRejected && kept[k] == nil && old.mediaStreamIDs.isEmpty {
                if let i = remaining.firstIndex(where: { $0.kind == old.kind && $0.mid == nil && !oldIDs.contains($0.id) }) {
                    kept[k] = remaining.remove(at: i)
                }
            }
            for (k, old) in previous.media.enumerated() {
                usedMids.insert(old.mid ?? "")
                if var t = kept[k] {
                    t.mid = old.mid
                    d.media.append(section(for: t))
                } else if let dataChannel, old.isDataChannel, !old.isRejected, !dataPlaced {
                    d.media.append(dataSection(mid: old.mid, proto: old.proto, dataChannel))
                    dataPlaced = true
                } else {
                    d.media.append(rejected(old))
                }
            }
        }
        var next = 0
        for var t in remaining {
            if t.mid == nil || usedMids.contains(t.mid!) {
                while usedMids.contains(String(next)) { next += 1 }
                t.mid = String(next)
            }
            usedMids.insert(t.mid!)
            d.media.append(section(for: t))
        }
        if let dataChannel, !dataPlaced {
            while usedMids.contains(String(next)) { next += 1 }
            d.media.append(dataSection(mid: String(next), proto: JSEPDataChannelParameters.proto, dataChannel))
        }
        finish(&d, transport: transport, setup: .actpass)
        return d
    }

    /// Answers `offer` (RFC 8829 §5.3): every offered section is answered in order with its mid.
    /// A section is accepted when it is audio or video over `UDP/TLS/RTP/SAVPF` (or another
    /// SAVPF profile), in the offer's BUNDLE group (without a group, only the first usable
    /// section is accepted: this engine runs one transport), and shares a codec with this
    /// engine; otherwise it is rejected with port 0. Accepted sections keep the offerer's payload
    /// types and extension IDs, list the offered codecs this engine supports (with RTX for them),
    /// the offered feedback it supports and the offered extensions it knows. The direction
    /// mirrors the offer's (`sendonly` → `recvonly`, `recvonly` → `sendonly` or `inactive`
    /// without a track, `sendrecv` → `sendrecv` or `recvonly` without a track), and `a=setup`
    /// answers the offer's role (`actpass` → `active`). `previous` (the last local description)
    /// keeps the session id and grows the version.
    public static func createAnswer(
        to offer: JSEPSessionDescription, tracks: [JSEPTrack],
        transport: JSEPTransportParameters, previous: JSEPSessionDescription? = nil,
        sessionID: UInt64 = newSessionID()
    ) -> JSEPSessionDescription {
        createAnswer(to: offer, tracks: tracks, transport: transport, previous: previous, dataChannel: nil, sessionID: sessionID)
    }

    /// `createAnswer` that also accepts the offer's data channel section (`UDP/DTLS/SCTP` or
    /// `DTLS/SCTP` with `webrtc-datachannel`, under the same BUNDLE rule as media) when
    /// `dataChannel` is given, answering with our SCTP port and `a=max-message-size`.
    package static func createAnswer(
        to offer: JSEPSessionDescription, tracks: [JSEPTrack],
        transport: JSEPTransportParameters, previous: JSEPSessionDescription?,
        dataChannel: JSEPDataChannelParameters?, sessionID: UInt64 = newSessionID()
    ) -> JSEPSessionDescription {
        var d = JSEPSessionDescription(type: .answer, origin: origin(previous: previous, sessionID: sessionID))
        var remaining = tracks
        var acceptedOne = false
        var setupRole: JSEPSetupRole = .active
        var dataAccepted = false
        for offered in offer.media {
            if let dataChannel, offered.isDataChannel, !offered.isRejected, !dataAccepted, let mid = offered.mid,
                offer.bundle.isEmpty ? !acceptedOne : offer.bundle.contains(mid),
                let role = offer.effectiveSetup(of: offered)?.answerRole
            {
                var s = dataSection(mid: mid, proto: offered.proto, dataChannel)
                s.setup = role
                setupRole = role
                d.media.append(s)
                acceptedOne = true
                dataAccepted = true
                continue
            }
            guard !offered.isRejected, offered.isRTP, offered.proto.hasSuffix("SAVPF"),
                offered.kind == .audio || offered.kind == .video, let mid = offered.mid,
                offer.bundle.isEmpty ? !acceptedOne : offer.bundle.contains(mid),
                let role = offer.effectiveSetup(of: offered)?.answerRole
            else {
                d.media.append(rejected(offered))
                continue
            }
            let codecs = answerCodecs(offered)
            guard !codecs.isEmpty else { d.media.append(rejected(offered)); continue }
            setupRole = role
            let trackIndex =
                remaining.firstIndex { $0.mid == mid }
                ?? remaining.firstIndex { $0.mid == nil && $0.kind == offered.kind }
            let track = trackIndex.map { remaining.remove(at: $0) }
            let sends = track?.sends ?? false
            let direction: SDPDirection
            switch offered.direction {
            case .sendrecv: direction = sends ? .sendrecv : .recvonly
            case .sendonly: direction = .recvonly
            case .recvonly: direction = sends ? .sendonly : .inactive
            case .inactive: direction = .inactive
            }
            var s = JSEPMediaSection(kind: offered.kind, proto: offered.proto)
            s.mid = mid
            s.direction = direction
            s.codecs = codecs
            s.formats = codecs.map { String($0.payloadType) }
            let known = Set(offeredExtensions(offered.kind).map(\.uri))
            s.extensions = offered.extensions.filter { known.contains($0.uri) }.map { SDPExtensionMap(id: $0.id, uri: $0.uri) }
            s.rtcpMux = offered.rtcpMux
            s.rtcpReducedSize = offered.rtcpReducedSize
            if direction == .sendrecv || direction == .sendonly, var t = track {
                t.mid = mid
                if s.retransmissionPayloadType(for: codecs[0].payloadType) == nil { t.retransmissionSSRC = nil }
                addSender(t, to: &s)
            }
            s.setup = role
            d.media.append(s)
            acceptedOne = true
        }
        let accepted = Set(d.media.filter { !$0.isRejected }.compactMap(\.mid))
        let order = offer.bundle.isEmpty ? d.media.compactMap(\.mid) : offer.bundle
        finish(&d, transport: transport, setup: setupRole, bundle: order.filter { accepted.contains($0) })
        return d
    }

    /// The offered codecs this engine supports, as the answer lists them: the offerer's payload
    /// types and order, this engine's fmtp, the offered feedback it supports, RTX only for kept codecs.
    static func answerCodecs(_ offered: JSEPMediaSection) -> [JSEPCodec] {
        var out: [JSEPCodec] = []
        for c in offered.codecs {
            guard let known = c.known, known != .rtx else { continue }
            let supported =
                c.feedback.filter { f in supportedFeedback.contains { $0.type == f.type && $0.parameter == f.parameter } }
                + offered.wildcardFeedback.filter { f in
                    supportedFeedback.contains { $0.type == f.type && $0.parameter == f.parameter }
                }
                .map { SDPRTCPFeedback(payloadType: c.payloadType, type: $0.type, parameter: $0.parameter) }
            var codec = JSEPCodec(
                payloadType: c.payloadType, name: c.name, clockRate: c.clockRate, channels: c.channels,
                feedback: supported)
            switch known {
            case .opus: codec.parameters = "minptime=10;useinbandfec=1"
            case .vp9: codec.parameters = c.profileID != nil ? "profile-id=0" : nil
            default: break
            }
            out.append(codec)
        }
        var withRTX: [JSEPCodec] = []
        for c in out {
            withRTX.append(c)
            if let rtx = offered.codecs.first(where: { $0.known == .rtx && $0.associatedPayloadType == c.payloadType }) {
                withRTX.append(
                    JSEPCodec(
                        payloadType: rtx.payloadType, name: rtx.name, clockRate: rtx.clockRate,
                        parameters: "apt=\(c.payloadType)"))
            }
        }
        return withRTX
    }

    static func origin(previous: JSEPSessionDescription?, sessionID: UInt64) -> SDPOrigin {
        if let p = previous {
            return SDPOrigin(sessionID: p.origin.sessionID, sessionVersion: p.origin.sessionVersion &+ 1, address: "127.0.0.1")
        }
        return SDPOrigin(sessionID: sessionID, sessionVersion: 1, address: "127.0.0.1")
    }

    /// An m-section sending or receiving `track` (mid set).
    static func section(for track: JSEPTrack) -> JSEPMediaSection {
        var s = JSEPMediaSection(kind: track.kind)
        s.mid = track.mid
        s.direction = track.direction
        s.codecs = offeredCodecs(track.kind)
        s.formats = s.codecs.map { String($0.payloadType) }
        s.extensions = offeredExtensions(track.kind)
        s.rtcpMux = true
        s.rtcpReducedSize = true
        if track.sends { addSender(track, to: &s) }
        return s
    }

    /// A data channel section (RFC 8841): `m=application 9 <proto> webrtc-datachannel` with
    /// `a=sctp-port` and `a=max-message-size`, no direction attribute.
    static func dataSection(mid: String?, proto: String, _ p: JSEPDataChannelParameters) -> JSEPMediaSection {
        var s = JSEPMediaSection(kind: .application, proto: proto, formats: [JSEPDataChannelParameters.format])
        s.mid = mid
        s.hasDirectionAttribute = false
        s.otherAttributes = [
            SDPAttribute("sctp-port", String(p.sctpPort)), SDPAttribute("max-message-size", String(p.maxMessageSize)),
        ]
        return s
    }

    /// `a=msid` and the SSRC lines of a sending track (cname filled in by `finish`).
    static func addSender(_ track: JSEPTrack, to s: inout JSEPMediaSection) {
        s.mediaStreamIDs = [JSEPMediaStreamID(stream: track.streamID, track: track.id)]
        var ssrcs = [track.ssrc]
        if track.kind == .video, let rtx = track.retransmissionSSRC {
            ssrcs.append(rtx)
            s.ssrcGroups = [SDPSSRCGroup(semantics: "FID", ssrcs: [track.ssrc, rtx])]
        }
        s.ssrcs = ssrcs.flatMap { ssrc in
            [
                SDPSSRCAttribute(ssrc: ssrc, attribute: "cname", value: ""),
                SDPSSRCAttribute(ssrc: ssrc, attribute: "msid", value: "\(track.streamID) \(track.id)"),
            ]
        }
    }

    /// A rejected answer or offer section for `s`: port 0, its kind, protocol and formats, its mid.
    package static func rejected(_ s: JSEPMediaSection) -> JSEPMediaSection {
        let formats = s.isRTP && !s.codecs.isEmpty ? s.codecs.map { String($0.payloadType) } : s.formats
        var r = JSEPMediaSection(kind: s.kind, port: 0, proto: s.proto, formats: formats.isEmpty ? ["0"] : formats)
        r.mid = s.mid
        r.hasDirectionAttribute = false
        return r
    }

    /// The transport of every accepted section, the cname, the BUNDLE group and the candidates.
    static func finish(
        _ d: inout JSEPSessionDescription, transport: JSEPTransportParameters, setup: JSEPSetupRole,
        bundle: [String]? = nil
    ) {
        d.bundle = bundle ?? d.media.filter { !$0.isRejected }.compactMap(\.mid)
        d.otherAttributes = [SDPAttribute("msid-semantic", " WMS *")]
        let defaultCandidate = transport.candidates.first { $0.transport.lowercased() == "udp" && $0.component == 1 }
        var first = true
        for i in d.media.indices where !d.media[i].isRejected {
            var s = d.media[i]
            s.port = defaultCandidate?.port ?? 9
            let address = defaultCandidate?.address ?? "0.0.0.0"
            s.connection = SDPConnection(addressType: address.contains(":") ? "IP6" : "IP4", address: address)
            s.ice = transport.ice
            s.iceOptions = ["trickle"]
            s.fingerprints = transport.fingerprints
            if s.setup == nil { s.setup = setup }
            if first {
                s.candidates = transport.candidates
                s.endOfCandidates = transport.endOfCandidates
                first = false
            }
            for k in s.ssrcs.indices where s.ssrcs[k].attribute == "cname" { s.ssrcs[k].value = transport.cname }
            d.media[i] = s
        }
    }
}
