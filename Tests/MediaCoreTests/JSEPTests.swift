import MediaCore
import Testing

@Suite struct JSEPTests {
    static let fingerprint = JSEPFingerprint(bytes: (0..<32).map { UInt8($0 * 8 + 3) })
    static let transport = JSEPTransportParameters(
        ice: JSEPICEParameters(usernameFragment: "Rv0a", password: "revuepasswordrevuepassw"),
        fingerprints: [fingerprint], cname: "revue-cname")
    static let audio = JSEPTrack(kind: .audio, id: "mic", streamID: "call", ssrc: 1111)
    static let video = JSEPTrack(kind: .video, id: "cam", streamID: "call", ssrc: 2222, retransmissionSSRC: 3333)

    static func offer() -> JSEPSessionDescription {
        JSEPNegotiator.createOffer(tracks: [audio, video], transport: transport, sessionID: 77)
    }

    /// An offer shaped like a browser's: BUNDLE, many codecs this engine does not use, a data
    /// channel section, session-level fingerprint (as Firefox writes it), wildcard feedback.
    static let browserOffer = """
        v=0
        o=mozilla...THIS_IS_SDPARTA-99.0 5093431209472474585 0 IN IP4 0.0.0.0
        s=-
        t=0 0
        a=fingerprint:sha-256 0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9:0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9
        a=group:BUNDLE 0 1 2
        a=ice-options:trickle
        a=msid-semantic:WMS *
        m=audio 9 UDP/TLS/RTP/SAVPF 109 9 0 8 101
        c=IN IP4 0.0.0.0
        a=sendonly
        a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=extmap:2/recvonly urn:ietf:params:rtp-hdrext:csrc-audio-level
        a=extmap:3 urn:ietf:params:rtp-hdrext:sdes:mid
        a=fmtp:109 maxplaybackrate=48000;stereo=1;useinbandfec=1;usedtx=1
        a=fmtp:101 0-15
        a=ice-pwd:0123456789abcdef0123456789abcdef
        a=ice-ufrag:a1b2c3d4
        a=mid:0
        a=msid:{stream} {audio-track}
        a=rtcp-mux
        a=rtpmap:109 opus/48000/2
        a=rtpmap:9 G722/8000/1
        a=rtpmap:101 telephone-event/8000
        a=setup:actpass
        a=ssrc:111222333 cname:{firefox}
        m=video 9 UDP/TLS/RTP/SAVPF 120 124 121 125 126 127 97 98
        c=IN IP4 0.0.0.0
        a=recvonly
        a=extmap:3 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:4 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=extmap:5 urn:ietf:params:rtp-hdrext:toffset
        a=extmap:7 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=fmtp:126 profile-level-id=42e01f;level-asymmetry-allowed=1;packetization-mode=1
        a=fmtp:97 profile-level-id=42e01f;level-asymmetry-allowed=1
        a=fmtp:120 max-fs=12288;max-fr=60
        a=fmtp:124 apt=120
        a=fmtp:121 max-fs=12288;max-fr=60;profile-id=2
        a=fmtp:125 apt=121
        a=fmtp:127 apt=126
        a=fmtp:98 apt=97
        a=ice-pwd:0123456789abcdef0123456789abcdef
        a=ice-ufrag:a1b2c3d4
        a=mid:1
        a=rtcp-fb:120 nack
        a=rtcp-fb:120 nack pli
        a=rtcp-fb:120 ccm fir
        a=rtcp-fb:120 goog-remb
        a=rtcp-fb:120 transport-cc
        a=rtcp-fb:120 ccm tmmbr
        a=rtcp-fb:* rrtr
        a=rtcp-mux
        a=rtcp-rsize
        a=rtpmap:120 VP8/90000
        a=rtpmap:124 rtx/90000
        a=rtpmap:121 VP9/90000
        a=rtpmap:125 rtx/90000
        a=rtpmap:126 H264/90000
        a=rtpmap:127 rtx/90000
        a=rtpmap:97 AV1/90000
        a=rtpmap:98 rtx/90000
        a=setup:actpass
        m=application 9 UDP/DTLS/SCTP webrtc-datachannel
        c=IN IP4 0.0.0.0
        a=sendrecv
        a=ice-pwd:0123456789abcdef0123456789abcdef
        a=ice-ufrag:a1b2c3d4
        a=mid:2
        a=setup:actpass
        a=sctp-port:5000
        a=max-message-size:1073741823

        """

    // MARK: Offers

    @Test func offerListsEveryCodecExtensionAndFeedback() throws {
        let o = Self.offer()
        let sdp = o.sdp
        #expect(sdp.hasSuffix("\r\n"))
        #expect(!sdp.replacingOccurrences(of: "\r\n", with: "").contains("\n"), "every line ends in CRLF")
        for line in [
            "v=0", "o=- 77 1 IN IP4 127.0.0.1", "a=group:BUNDLE 0 1",
            "m=audio 9 UDP/TLS/RTP/SAVPF 111", "m=video 9 UDP/TLS/RTP/SAVPF 96 97 98 99",
            "a=rtpmap:111 opus/48000/2", "a=fmtp:111 minptime=10;useinbandfec=1", "a=rtcp-fb:111 transport-cc",
            "a=rtpmap:96 VP8/90000", "a=rtpmap:97 rtx/90000", "a=fmtp:97 apt=96",
            "a=rtpmap:98 VP9/90000", "a=fmtp:98 profile-id=0", "a=fmtp:99 apt=98",
            "a=rtcp-fb:96 nack", "a=rtcp-fb:96 nack pli", "a=rtcp-fb:96 ccm fir", "a=rtcp-fb:96 goog-remb",
            "a=rtcp-fb:96 transport-cc", "a=rtcp-fb:98 nack pli",
            "a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level",
            "a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time",
            "a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01",
            "a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid",
            "a=setup:actpass", "a=rtcp-mux", "a=rtcp-rsize", "a=ice-options:trickle",
            "a=ice-ufrag:Rv0a", "a=ice-pwd:revuepasswordrevuepassw",
            "a=fingerprint:" + Self.fingerprint.value, "a=mid:0", "a=mid:1", "a=sendrecv",
            "a=msid:call mic", "a=msid:call cam", "a=ssrc-group:FID 2222 3333",
            "a=ssrc:2222 cname:revue-cname", "a=ssrc:3333 cname:revue-cname", "a=ssrc:1111 msid:call mic",
        ] {
            #expect(sdp.contains(line + "\r\n"), "missing \(line)")
        }
        #expect(Self.fingerprint.value.hasPrefix("sha-256 03:0B:13:"))
        // Parsing our own offer gives back the same value.
        let parsed = try JSEPSessionDescription(parsing: sdp, type: .offer)
        #expect(parsed == o)
        #expect(parsed.sdp == sdp)
        let v = try #require(parsed.section(mid: "1"))
        #expect(v.retransmissionPayloadType(for: 96) == 97)
        #expect(v.retransmissionPayloadType(for: 98) == 99)
        #expect(v.codecs.map(\.known) == [.vp8, .rtx, .vp9, .rtx])
        #expect(v.sendingSSRCs.map(\.media) == [2222] && v.sendingSSRCs.first?.retransmission == 3333)
        #expect(parsed.supportsTrickle(in: v))
    }

    @Test func renegotiationKeepsMidsAndBundle() throws {
        let first = Self.offer()
        // Adding a second video track: old sections keep their mids, the new one gets mid 2.
        let screen = JSEPTrack(kind: .video, id: "screen", streamID: "call", ssrc: 4444, retransmissionSSRC: 5555)
        let second = JSEPNegotiator.createOffer(
            tracks: [Self.audio, Self.video, screen], transport: Self.transport, previous: first)
        #expect(second.origin.sessionID == 77 && second.origin.sessionVersion == 2)
        #expect(second.media.map(\.mid) == ["0", "1", "2"])
        #expect(second.media.map(\.kind) == [.audio, .video, .video])
        #expect(second.bundle == ["0", "1", "2"])
        #expect(second.media[2].mediaStreamIDs == [JSEPMediaStreamID(stream: "call", track: "screen")])
        #expect(second.media[1].codecs == first.media[1].codecs, "payload types stay")
        _ = try JSEPSessionDescription(parsing: second.sdp, type: .offer)

        // Removing the camera: its section stays in place, rejected, and leaves the BUNDLE group.
        let third = JSEPNegotiator.createOffer(tracks: [Self.audio, screen], transport: Self.transport, previous: second)
        #expect(third.origin.sessionVersion == 3)
        #expect(third.media.map(\.mid) == ["0", "1", "2"])
        #expect(third.media.map(\.port) == [9, 0, 9])
        #expect(third.bundle == ["0", "2"])
        #expect(third.media[2].mediaStreamIDs.first?.track == "screen")
        let reparsed = try JSEPSessionDescription(parsing: third.sdp, type: .offer)
        #expect(reparsed.media[1].isRejected && reparsed.media[1].mid == "1" && reparsed.media[1].codecs.isEmpty)

        // A track that stops sending but keeps its transceiver: recvonly, no msid or SSRC.
        var quiet = Self.audio
        quiet.direction = .recvonly
        let fourth = JSEPNegotiator.createOffer(tracks: [quiet, screen], transport: Self.transport, previous: third)
        #expect(fourth.media[0].direction == .recvonly && fourth.media[0].ssrcs.isEmpty && fourth.media[0].mediaStreamIDs.isEmpty)
        #expect(fourth.media.map(\.mid) == ["0", "1", "2"] && fourth.bundle == ["0", "2"])

        // A new track later reuses no mid of a rejected section: it gets a new one.
        let fifth = JSEPNegotiator.createOffer(tracks: [quiet, screen, Self.video], transport: Self.transport, previous: fourth)
        #expect(fifth.media.map(\.mid) == ["0", "1", "2", "3"] && fifth.bundle == ["0", "2", "3"])
    }

    // MARK: Answers

    @Test func answerToOurOwnOfferMirrorsEverything() throws {
        let offer = Self.offer()
        let peer = JSEPTransportParameters(
            ice: JSEPICEParameters(usernameFragment: "peer", password: "peerpasswordpeerpasswd"),
            fingerprints: [Self.fingerprint], cname: "peer")
        let remoteAudio = JSEPTrack(kind: .audio, id: "a2", streamID: "s2", ssrc: 9001)
        let answer = JSEPNegotiator.createAnswer(to: offer, tracks: [remoteAudio], transport: peer, sessionID: 5)
        #expect(answer.type == .answer)
        #expect(answer.bundle == ["0", "1"])
        #expect(answer.media.map(\.mid) == ["0", "1"])
        #expect(answer.media[0].direction == .sendrecv)
        #expect(answer.media[1].direction == .recvonly, "no video track to send")
        #expect(answer.media[1].ssrcs.isEmpty)
        #expect(answer.media.allSatisfy { $0.setup == .active })
        #expect(answer.media[1].codecs.map(\.payloadType) == [96, 97, 98, 99])
        #expect(answer.media[1].codecs[0].feedback.count == 5)
        #expect(answer.media[0].extensions.map(\.id) == [1, 2, 3, 4])
        let parsed = try JSEPSessionDescription(parsing: answer.sdp, type: .answer)
        #expect(parsed == answer)
    }

    @Test func answerToABrowserShapedOffer() throws {
        let offer = try JSEPSessionDescription(parsing: Self.browserOffer, type: .offer)
        #expect(offer.fingerprints.count == 1 && offer.media[0].fingerprints.isEmpty)
        #expect(offer.effectiveFingerprints(of: offer.media[1]) == offer.fingerprints)
        #expect(offer.supportsTrickle(in: offer.media[0]))
        #expect(
            offer.media[0].codecs.map(\.name) == ["opus", "G722", "PCMU", "PCMA", "telephone-event"],
            "static payload types without rtpmap get their RFC 3551 names")
        let opus = try #require(offer.media[0].codec(payloadType: 109))
        #expect(opus.known == .opus && opus.usesInbandFEC && opus.usesDTX && opus.minimumPacketTime == nil)
        let video = offer.media[1]
        #expect(video.codec(payloadType: 121)?.profileID == 2 && video.codec(payloadType: 121)?.known == nil)
        #expect(video.wildcardFeedback == [SDPRTCPFeedback(payloadType: nil, type: "rrtr")])
        #expect(offer.media[2].kind == .application && offer.media[2].formats == ["webrtc-datachannel"])

        let answer = JSEPNegotiator.createAnswer(
            to: offer, tracks: [Self.audio, Self.video], transport: Self.transport, sessionID: 9)
        let a = answer.media[0], v = answer.media[1], app = answer.media[2]
        // Audio: only Opus, the offerer's payload type, our fmtp; sendonly becomes recvonly.
        #expect(a.codecs.map(\.payloadType) == [109])
        #expect(a.codecs[0].parameters == "minptime=10;useinbandfec=1")
        #expect(a.direction == .recvonly && a.mediaStreamIDs.isEmpty && a.ssrcs.isEmpty)
        #expect(
            a.extensions == [
                SDPExtensionMap(id: 1, uri: SDPExtensionMap.audioLevelURI),
                SDPExtensionMap(id: 3, uri: SDPExtensionMap.midURI),
            ])
        // Video: VP8 and its RTX; VP9 profile 2, H264 and AV1 are left out. recvonly becomes sendonly.
        #expect(v.codecs.map(\.payloadType) == [120, 124])
        #expect(v.codecs[1].associatedPayloadType == 120)
        #expect(
            v.codecs[0].feedback == [
                .nack(120), .pli(120), .fir(120), .remb(120),
                SDPRTCPFeedback(payloadType: 120, type: "transport-cc"),
            ], "ccm tmmbr and rrtr are dropped")
        #expect(v.extensions.map(\.id) == [3, 4, 7])
        #expect(v.direction == .sendonly)
        #expect(v.mediaStreamIDs == [JSEPMediaStreamID(stream: "call", track: "cam")])
        #expect(v.ssrcGroups == [SDPSSRCGroup(semantics: "FID", ssrcs: [2222, 3333])])
        #expect(v.rtcpReducedSize && !a.rtcpReducedSize)
        // The data channel section is rejected with port 0 and keeps its mid.
        #expect(app.isRejected && app.mid == "2" && app.formats == ["webrtc-datachannel"])
        #expect(answer.bundle == ["0", "1"])
        #expect(answer.media.filter { !$0.isRejected }.allSatisfy { $0.setup == .active && $0.ice == Self.transport.ice })
        let text = answer.sdp
        #expect(text.contains("m=application 0 UDP/DTLS/SCTP webrtc-datachannel\r\na=mid:2\r\n"))
        #expect(try JSEPSessionDescription(parsing: text, type: .answer) == answer)
    }

    @Test func answersFollowARenegotiation() throws {
        let firstOffer = Self.offer()
        let peer = JSEPTransportParameters(
            ice: JSEPICEParameters(usernameFragment: "peer", password: "peerpasswordpeerpasswd"),
            fingerprints: [Self.fingerprint], cname: "peer")
        let peerVideo = JSEPTrack(kind: .video, id: "pv", streamID: "p", ssrc: 7, retransmissionSSRC: 8)
        let firstAnswer = JSEPNegotiator.createAnswer(to: firstOffer, tracks: [peerVideo], transport: peer, sessionID: 600)
        #expect(firstAnswer.media.map(\.direction) == [.recvonly, .sendrecv])
        // The offerer adds a screen track and drops its microphone.
        let screen = JSEPTrack(kind: .video, id: "screen", streamID: "call", ssrc: 4444)
        let secondOffer = JSEPNegotiator.createOffer(
            tracks: [Self.video, screen], transport: Self.transport, previous: firstOffer)
        let peerScreen = JSEPTrack(kind: .video, id: "ps", streamID: "p", ssrc: 9)
        let secondAnswer = JSEPNegotiator.createAnswer(
            to: secondOffer, tracks: [peerVideo, peerScreen], transport: peer,
            previous: firstAnswer)
        #expect(secondAnswer.origin.sessionID == 600 && secondAnswer.origin.sessionVersion == 2)
        #expect(secondAnswer.media.map(\.mid) == ["0", "1", "2"])
        #expect(secondAnswer.media.map(\.isRejected) == [true, false, false], "a section the offer rejected is rejected")
        #expect(secondAnswer.bundle == ["1", "2"])
        #expect(
            secondAnswer.media[1].mediaStreamIDs.first?.track == "pv" && secondAnswer.media[2].mediaStreamIDs.first?.track == "ps"
        )
        #expect(try JSEPSessionDescription(parsing: secondAnswer.sdp, type: .answer) == secondAnswer)
    }

    @Test(arguments: [
        (SDPDirection.sendrecv, true, SDPDirection.sendrecv), (.sendrecv, false, .recvonly),
        (.sendonly, true, .recvonly), (.sendonly, false, .recvonly),
        (.recvonly, true, .sendonly), (.recvonly, false, .inactive),
        (.inactive, true, .inactive), (.inactive, false, .inactive),
    ])
    func answerDirections(offered: SDPDirection, haveTrack: Bool, answered: SDPDirection) {
        var remote = JSEPTrack(kind: .audio, id: "x", streamID: "y", ssrc: 1, direction: offered)
        remote.mid = nil
        let offer = JSEPNegotiator.createOffer(tracks: [remote], transport: Self.transport)
        let answer = JSEPNegotiator.createAnswer(to: offer, tracks: haveTrack ? [Self.audio] : [], transport: Self.transport)
        #expect(answer.media[0].direction == answered)
        #expect(answer.media[0].mediaStreamIDs.isEmpty == !(answered == .sendrecv || answered == .sendonly))
    }

    @Test func setupRoles() {
        #expect(JSEPSetupRole.actpass.answerRole == .active)
        #expect(JSEPSetupRole.active.answerRole == .passive)
        #expect(JSEPSetupRole.passive.answerRole == .active)
        #expect(JSEPSetupRole.holdconn.answerRole == nil)
        var offer = Self.offer()
        for i in offer.media.indices { offer.media[i].setup = .active }
        let answer = JSEPNegotiator.createAnswer(to: offer, tracks: [], transport: Self.transport)
        #expect(answer.media.allSatisfy { $0.setup == .passive })
    }

    @Test func offerWithoutBundleGetsOneTransport() throws {
        var offer = Self.offer()
        offer.bundle = []
        let answer = JSEPNegotiator.createAnswer(to: offer, tracks: [], transport: Self.transport)
        #expect(answer.media.map(\.isRejected) == [false, true])
        #expect(answer.bundle == ["0"])
    }

    // MARK: Trickle ICE

    @Test func candidatesInEveryForm() throws {
        let host = try #require(
            JSEPCandidate("a=candidate:699717270 1 udp 2122194687 192.0.2.2 49746 typ host generation 0 network-id 1"))
        #expect(host.foundation == "699717270" && host.priority == 2_122_194_687 && host.port == 49746 && host.type == "host")
        #expect(host.extensions.map(\.name) == ["generation", "network-id"])
        #expect(host.iceCandidate?.address == (try SocketAddress(host: "192.0.2.2", port: 49746)))
        let srflx = try #require(
            JSEPCandidate("candidate:1 1 UDP 1686052607 203.0.113.9 61000 typ srflx raddr 10.0.0.2 rport 5000"))
        #expect(srflx.relatedAddress == "10.0.0.2" && srflx.relatedPort == 5000)
        #expect(srflx.value == "1 1 UDP 1686052607 203.0.113.9 61000 typ srflx raddr 10.0.0.2 rport 5000")
        let tcp = try #require(JSEPCandidate("3609068034 1 tcp 1518214911 192.0.2.2 9 typ host tcptype active generation 0"))
        #expect(tcp.iceCandidate == nil, "the agent uses UDP only")
        let mdns = try #require(
            JSEPCandidate("candidate:2 1 udp 2113937151 4f5e6d7c-1a2b-4c3d-8e9f-0a1b2c3d4e5f.local 54400 typ host"))
        #expect(mdns.address.hasSuffix(".local") && mdns.iceCandidate == nil)
        for bad in [
            "candidate:1 1 udp", "candidate:1 0 udp 1 1.2.3.4 5 typ host", "candidate:1 1 udp x 1.2.3.4 5 typ host",
            "candidate:1 1 udp 1 1.2.3.4 70000 typ host", "candidate:1 1 udp 1 1.2.3.4 5 type host",
            "candidate:1 1 udp 1 1.2.3.4 5 typ host generation",
        ] {
            #expect(JSEPCandidate(bad) == nil, "\(bad)")
        }
        // The agent's own candidates round-trip.
        let agent = ICECandidate(
            foundation: "f1", priority: 2_130_706_431, address: try SocketAddress(host: "127.0.0.1", port: 40000), type: .host)
        #expect(JSEPCandidate(agent).iceCandidate == agent)
    }

    @Test func trickledCandidatesAndEndOfCandidates() throws {
        var offer = Self.offer()
        let c = try #require(JSEPCandidate("candidate:1 1 udp 2130706431 127.0.0.1 40000 typ host"))
        let added = offer.addCandidate(c, mid: "0")
        let again = offer.addCandidate(c, mid: nil, mLineIndex: 0)
        let nowhere = offer.addCandidate(c, mid: "9")
        let ended = offer.addEndOfCandidates(mid: "0")
        #expect(added && again && !nowhere && ended)
        #expect(offer.media[0].candidates == [c], "a candidate already there is not added twice")
        let text = offer.sdp
        #expect(text.contains("a=candidate:1 1 udp 2130706431 127.0.0.1 40000 typ host\r\na=end-of-candidates\r\n"))
        let parsed = try JSEPSessionDescription(parsing: text, type: .offer)
        #expect(parsed.media[0].candidates == [c] && parsed.media[0].endOfCandidates && !parsed.media[1].endOfCandidates)
        // Candidates known when the offer is made go into the first section and set the default address.
        var t = Self.transport
        t.candidates = [c]
        t.endOfCandidates = true
        let withCandidates = JSEPNegotiator.createOffer(tracks: [Self.audio, Self.video], transport: t)
        #expect(withCandidates.media[0].candidates == [c] && withCandidates.media[1].candidates.isEmpty)
        #expect(withCandidates.media[0].port == 40000 && withCandidates.media[0].connection?.address == "127.0.0.1")
        #expect(withCandidates.sdp.contains("m=audio 40000 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 127.0.0.1\r\n"))
    }

    // MARK: Errors name the line

    static func replacing(_ old: String, _ new: String) -> String {
        let text = offer().sdp
        precondition(text.contains(old), old)
        return text.replacingOccurrences(of: old, with: new)
    }

    static func lineNumber(of prefix: String, in text: String) -> Int {
        let lines = text.components(separatedBy: "\r\n")
        return lines.firstIndex { $0.hasPrefix(prefix) }! + 1
    }

    @Test(arguments: [
        ("a=setup:actpass", "a=setup:sideways", "a=setup:sideways", "actpass, active, passive or holdconn"),
        ("a=fingerprint:sha-256 03:", "a=fingerprint:sha-256 ZZ:", "a=fingerprint:sha-256 ZZ:", "not a hex byte"),
        ("a=fingerprint:sha-256 03:0B:", "a=fingerprint:sha-256 0B:", "a=fingerprint:sha-256 0B:", "has 32 bytes"),
        ("a=ice-ufrag:Rv0a", "a=ice-ufrag:R!", "a=ice-ufrag:R!", "4-256 characters"),
        ("a=ice-pwd:revuepasswordrevuepassw", "a=ice-pwd:short", "a=ice-pwd:short", "22-256"),
        ("a=mid:1", "a=mid:0", "a=mid:0", "already used by the m-section at line"),
        ("a=group:BUNDLE 0 1", "a=group:BUNDLE 0 7", "a=group:BUNDLE", "names mid \"7\""),
        ("a=rtpmap:97 rtx/90000", "a=rtpmap:95 rtx/90000", "a=rtpmap:95", "payload type 95 is not on the m= line"),
        ("a=fmtp:97 apt=96", "a=fmtp:97 apt=90", "a=fmtp:97 apt=90", "repairs 90"),
        ("a=rtcp-fb:98 nack pli", "a=rtcp-fb:93 nack pli", "a=rtcp-fb:93", "the m= line does not list"),
        (
            "a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01\r\na=extmap:4",
            "a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01\r\na=extmap:3",
            "a=extmap:3 urn", "mapped twice"
        ),
        ("a=sendrecv\r\na=msid:call mic", "a=sendrecv\r\na=sendonly\r\na=msid:call mic", "a=sendonly", "second direction"),
        ("a=msid:call mic", "a=msid:call mic extra", "a=msid:call mic extra", "a=msid needs"),
        ("a=mid:1\r\n", "a=mid:1\r\na=candidate:1 1 udp 1 2.3.4.5 x typ host\r\n", "a=candidate:1 1 udp 1 2.3.4.5 x", "RFC 8839"),
        ("a=rtpmap:96 VP8/90000", "a=rtpmap:96 VP8/fast", "a=rtpmap:96 VP8/fast", "clock rate"),
        (
            "m=video 9 UDP/TLS/RTP/SAVPF 96 97 98 99", "m=video 9 UDP/TLS/RTP/SAVPF 96 97 98 99 100",
            "m=video", "payload type 100 has no a=rtpmap"
        ),
        (
            "a=ice-pwd:revuepasswordrevuepassw\r\na=ice-options:trickle\r\na=fingerprint:sha-256 03:0B:13:1B:23:2B:33:3B:43:4B:53:5B:63:6B:73:7B:83:8B:93:9B:A3:AB:B3:BB:C3:CB:D3:DB:E3:EB:F3:FB\r\na=setup:actpass\r\na=mid:1",
            "a=ice-pwd:revuepasswordrevuepassw\r\na=ice-options:trickle\r\na=setup:actpass\r\na=mid:1", "m=video",
            "no a=fingerprint"
        ),
    ])
    func malformedOfferNamesTheLine(old: String, new: String, linePrefix: String, message: String) {
        let text = Self.replacing(old, new)
        do {
            _ = try JSEPSessionDescription(parsing: text, type: .offer)
            Issue.record("accepted: \(new)")
        } catch {
            let wanted = linePrefix.components(separatedBy: "\r\n").last!
            let lines = text.components(separatedBy: "\r\n")
            #expect(lines[error.line - 1] == error.text, "the error quotes its line")
            #expect(error.text.hasPrefix(wanted), "\(error)")
            #expect(error.message.contains(message), "\(error)")
            #expect(error.description.hasPrefix("line \(error.line) \""))
        }
    }

    @Test func answerMustNotSayActpass() throws {
        let text = Self.offer().sdp
        #expect(throws: JSEPError.self) { try JSEPSessionDescription(parsing: text, type: .answer) }
        do { _ = try JSEPSessionDescription(parsing: text, type: .answer) } catch {
            #expect(error.text == "a=setup:actpass" && error.line == Self.lineNumber(of: "a=setup:actpass", in: text))
        }
    }

    @Test func structuralErrorsComeFromTheSDPParserWithTheirLine() {
        let cases: [(String, Int, String)] = [
            ("", 1, "v=0"),
            ("v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 200\r\n", 5, "0...127"),
            ("v=0\r\nbogus\r\n", 2, "expected <type>=<value>"),
            (
                "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 0\r\na=mid:0\r\na=ice-ufrag:abcd\r\n",
                7, "without a=ice-pwd"
            ),
        ]
        for (text, line, message) in cases {
            do {
                _ = try JSEPSessionDescription(parsing: text, type: .offer)
                Issue.record("accepted \(text.debugDescription)")
            } catch {
                #expect(error.line == line, "\(error)")
                #expect(error.message.contains(message), "\(error)")
            }
        }
        let huge = String(repeating: "a", count: JSEPSessionDescription.maximumTextLength + 1)
        #expect(
            throws: JSEPError(
                line: 0, text: "",
                "the description is \(huge.utf8.count) bytes, more than \(JSEPSessionDescription.maximumTextLength)")
        ) {
            try JSEPSessionDescription(parsing: huge, type: .offer)
        }
    }
    // MARK: What parses writes back to the same value

    @Test func oddButValidDescriptionsRoundTrip() throws {
        let head = "v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\ns=\r\nt=0 0\r\n"
        let section =
            "m=audio 9 UDP/TLS/RTP/SAVPF 0\r\na=x-first\r\na=rtcp:9 IN IP4 0.0.0.0\r\na=mid:a\r\n"
            + "a=ice-ufrag:abcd\r\na=ice-pwd:abcdefghijklmnopqrstuv\r\na=fingerprint:SHA-1 "
            + Array(repeating: "0f", count: 20).joined(separator: ":")
            + "\r\na=setup:passive\r\na=candidate:x 2 tcp 5 host.local 9 typ host rport 7 raddr ::1 generation 0 rport 8\r\n"
        let texts = [
            // Empty s=, an empty BUNDLE group before the real one, a static payload type without
            // rtpmap, attributes around a=rtcp, a candidate with rport before raddr and twice.
            head + "a=group:BUNDLE\r\na=group:BUNDLE a\r\na=ice-options:trickle renomination\r\n" + section,
            // LF line ends, no direction attribute, session-level credentials and a section without them.
            (head + "a=ice-ufrag:sess\r\na=ice-pwd:abcdefghijklmnopqrstuv\r\na=fingerprint:sha-256 "
                + Array(repeating: "AB", count: 32).joined(separator: ":")
                + "\r\na=setup:actpass\r\nm=video 9 UDP/TLS/RTP/SAVPF 96\r\na=mid:v\r\na=rtpmap:96 VP8/90000\r\n")
                .replacingOccurrences(of: "\r\n", with: "\n"),
        ]
        for text in texts {
            let d = try JSEPSessionDescription(parsing: text, type: .offer)
            let again = try JSEPSessionDescription(parsing: d.sdp, type: .offer)
            #expect(again == d)
            #expect(again.sdp == d.sdp)
        }
        let first = try JSEPSessionDescription(parsing: texts[0], type: .offer)
        #expect(first.sessionName == "-" && first.bundle == ["a"])
        #expect(first.otherAttributes == [SDPAttribute("group", "BUNDLE")])
        #expect(first.media[0].otherAttributes.map(\.name) == ["x-first", "rtcp"])
        #expect(first.media[0].codecs.map(\.name) == ["PCMU"] && first.media[0].hasDirectionAttribute == false)
        #expect(first.media[0].fingerprints[0].algorithm == "sha-1" && first.media[0].setup == .passive)
        let c = try #require(first.media[0].candidates.first)
        #expect(c.relatedAddress == "::1" && c.relatedPort == 7 && c.extensions.map(\.name) == ["generation", "rport"])
        #expect(c.component == 2 && c.iceCandidate == nil)
        #expect(first.iceOptions == ["trickle", "renomination"])
        let second = try JSEPSessionDescription(parsing: texts[1], type: .offer)
        #expect(second.media[0].ice == nil && second.effectiveICE(of: second.media[0])?.usernameFragment == "sess")
        #expect(second.media[0].direction == .sendrecv)
    }
}
