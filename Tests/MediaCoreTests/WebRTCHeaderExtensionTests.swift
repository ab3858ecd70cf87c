import MediaCore
import Testing

/// RTP header extensions on a WebRTC connection: what our answers keep of a Chromium and an
/// aiortc offer, which IDs our packets then carry (the peer's) and which we read (ours), what a
/// renegotiation changes, and that an extension the answer left out gets ID 0 (not sent).
@Suite struct WebRTCHeaderExtensionTests {
    static let transport = JSEPTransportParameters(
        ice: JSEPICEParameters(usernameFragment: "Rv0a", password: "revuepasswordrevuepassw"),
        fingerprints: [JSEPFingerprint(bytes: (0..<32).map { UInt8($0 * 8 + 3) })], cname: "revue-cname")
    static let audio = JSEPTrack(kind: .audio, id: "mic", streamID: "call", ssrc: 1111)
    static let video = JSEPTrack(kind: .video, id: "cam", streamID: "call", ssrc: 2222)

    /// The header extension lines of a Chromium offer (audio and video, `a=extmap-allow-mixed`),
    /// in Chromium's order and with its IDs; `audioExtmaps`/`videoExtmaps` replace them.
    static func chromiumOffer(
        audioExtmaps: String = """
        a=extmap:1 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        """,
        videoExtmaps: String = """
        a=extmap:14 urn:ietf:params:rtp-hdrext:toffset
        a=extmap:2 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=extmap:13 urn:3gpp:video-orientation
        a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
        a=extmap:5 http://www.webrtc.org/experiments/rtp-hdrext/playout-delay
        a=extmap:6 http://www.webrtc.org/experiments/rtp-hdrext/video-content-type
        a=extmap:7 http://www.webrtc.org/experiments/rtp-hdrext/video-timing
        a=extmap:8 http://www.webrtc.org/experiments/rtp-hdrext/color-space
        a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:10 urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id
        a=extmap:11 urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id
        """,
        version: Int = 2
    ) -> String {
        """
        v=0
        o=- 4611731400430051336 \(version) IN IP4 127.0.0.1
        s=-
        t=0 0
        a=group:BUNDLE 0 1
        a=extmap-allow-mixed
        a=msid-semantic: WMS stream
        m=audio 9 UDP/TLS/RTP/SAVPF 111 63 9 0 8 13 110 126
        c=IN IP4 0.0.0.0
        a=rtcp:9 IN IP4 0.0.0.0
        a=ice-ufrag:Ch1u
        a=ice-pwd:chromiumpasswordchromium
        a=ice-options:trickle
        a=fingerprint:sha-256 0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9:0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9
        a=setup:actpass
        a=mid:0
        \(audioExtmaps)
        a=sendrecv
        a=msid:stream audio-track
        a=rtcp-mux
        a=rtpmap:111 opus/48000/2
        a=rtcp-fb:111 transport-cc
        a=fmtp:111 minptime=10;useinbandfec=1
        a=rtpmap:63 red/48000/2
        a=fmtp:63 111/111
        a=rtpmap:9 G722/8000
        a=rtpmap:0 PCMU/8000
        a=rtpmap:8 PCMA/8000
        a=rtpmap:13 CN/8000
        a=rtpmap:110 telephone-event/48000
        a=rtpmap:126 telephone-event/8000
        a=ssrc:3000000001 cname:chromium
        m=video 9 UDP/TLS/RTP/SAVPF 96 97 98 99
        c=IN IP4 0.0.0.0
        a=rtcp:9 IN IP4 0.0.0.0
        a=ice-ufrag:Ch1u
        a=ice-pwd:chromiumpasswordchromium
        a=ice-options:trickle
        a=fingerprint:sha-256 0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9:0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9
        a=setup:actpass
        a=mid:1
        \(videoExtmaps)
        a=sendrecv
        a=msid:stream video-track
        a=rtcp-mux
        a=rtcp-rsize
        a=rtpmap:96 VP8/90000
        a=rtcp-fb:96 goog-remb
        a=rtcp-fb:96 transport-cc
        a=rtcp-fb:96 ccm fir
        a=rtcp-fb:96 nack
        a=rtcp-fb:96 nack pli
        a=rtpmap:97 rtx/90000
        a=fmtp:97 apt=96
        a=rtpmap:98 VP9/90000
        a=rtcp-fb:98 goog-remb
        a=rtcp-fb:98 transport-cc
        a=rtcp-fb:98 ccm fir
        a=rtcp-fb:98 nack
        a=rtcp-fb:98 nack pli
        a=fmtp:98 profile-id=0
        a=rtpmap:99 rtx/90000
        a=fmtp:99 apt=98
        a=ssrc-group:FID 3000000002 3000000003
        a=ssrc:3000000002 cname:chromium
        a=ssrc:3000000003 cname:chromium

        """
    }

    /// aiortc's offer: mid and abs-send-time for video, mid and the audio level for audio, no
    /// transport-cc; its own IDs.
    static let aiortcOffer = """
        v=0
        o=- 3929186612 3929186612 IN IP4 0.0.0.0
        s=-
        t=0 0
        a=group:BUNDLE 0 1
        a=msid-semantic:WMS *
        m=audio 9 UDP/TLS/RTP/SAVPF 111 0 8
        c=IN IP4 0.0.0.0
        a=sendrecv
        a=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:2 urn:ietf:params:rtp-hdrext:ssrc-audio-level
        a=mid:0
        a=msid:aio a1
        a=rtcp:9 IN IP4 0.0.0.0
        a=rtcp-mux
        a=ssrc:4000000001 cname:aiortc
        a=rtpmap:111 opus/48000/2
        a=rtpmap:0 PCMU/8000
        a=rtpmap:8 PCMA/8000
        a=ice-ufrag:aIoR
        a=ice-pwd:aiortcpasswordaiortcpass
        a=fingerprint:sha-256 0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9:0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9
        a=setup:actpass
        m=video 9 UDP/TLS/RTP/SAVPF 97 98
        c=IN IP4 0.0.0.0
        a=sendrecv
        a=extmap:1 urn:ietf:params:rtp-hdrext:sdes:mid
        a=extmap:3 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
        a=mid:1
        a=msid:aio v1
        a=rtcp:9 IN IP4 0.0.0.0
        a=rtcp-mux
        a=ssrc-group:FID 4000000002 4000000003
        a=ssrc:4000000002 cname:aiortc
        a=ssrc:4000000003 cname:aiortc
        a=rtpmap:97 VP8/90000
        a=rtcp-fb:97 nack
        a=rtcp-fb:97 nack pli
        a=rtcp-fb:97 goog-remb
        a=rtpmap:98 rtx/90000
        a=fmtp:98 apt=97
        a=ice-ufrag:aIoR
        a=ice-pwd:aiortcpasswordaiortcpass
        a=fingerprint:sha-256 0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9:0A:1B:2C:3D:4E:5F:60:71:82:93:A4:B5:C6:D7:E8:F9
        a=setup:actpass

        """

    typealias Map = PeerConnectionHeaderExtensions

    @Test func answerToChromiumKeepsOurFourExtensionsUnderChromiumsIDs() throws {
        let offer = try JSEPSessionDescription(parsing: Self.chromiumOffer(), type: .offer)
        let answer = JSEPNegotiator.createAnswer(to: offer, tracks: [Self.audio, Self.video], transport: Self.transport)
        let a = answer.media[0], v = answer.media[1]
        #expect(
            a.extensions == [
                SDPExtensionMap(id: 1, uri: SDPExtensionMap.audioLevelURI),
                SDPExtensionMap(id: 2, uri: SDPExtensionMap.absoluteSendTimeURI),
                SDPExtensionMap(id: 3, uri: SDPExtensionMap.transportSequenceNumberURI),
                SDPExtensionMap(id: 4, uri: SDPExtensionMap.midURI),
            ])
        #expect(
            v.extensions == [
                SDPExtensionMap(id: 2, uri: SDPExtensionMap.absoluteSendTimeURI),
                SDPExtensionMap(id: 3, uri: SDPExtensionMap.transportSequenceNumberURI),
                SDPExtensionMap(id: 4, uri: SDPExtensionMap.midURI),
            ], "toffset, orientation, playout delay, content type, timing, colour space and rids are not ours")
        // Chromium's answer must be able to turn on its send-side estimate with our feedback.
        #expect(a.codecs[0].feedback.contains { $0.type == "transport-cc" })
        #expect(
            v.codecs[0].feedback.contains { $0.type == "transport-cc" }
                && v.codecs[0].feedback.contains { $0.type == "goog-remb" })
        let text = answer.sdp
        #expect(text.contains("a=extmap:3 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01\r\n"))
        #expect(!text.contains("toffset") && !text.contains("video-timing"))

        // We answered: our packets carry the IDs of Chromium's offer, we read ours (the same here).
        #expect(
            Map.sendIDs(mid: "0", remote: offer, answer: answer)
                == NegotiatedHeaderExtensionIDs(audioLevel: 1, absSendTime: 2, transportSequence: 3, mid: 4))
        #expect(
            Map.sendIDs(mid: "1", remote: offer, answer: answer)
                == NegotiatedHeaderExtensionIDs(audioLevel: 0, absSendTime: 2, transportSequence: 3, mid: 4),
            "no audio level on video")
        #expect(Map.receiveID(SDPExtensionMap.transportSequenceNumberURI, local: answer, answer: answer) == 3)
        #expect(Map.receiveID(SDPExtensionMap.absoluteSendTimeURI, kind: .video, local: answer, answer: answer) == 2)
        #expect(Map.receiveID(SDPExtensionMap.audioLevelURI, kind: .audio, local: answer, answer: answer) == 1)
        #expect(Map.sendIDs(mid: "7", remote: offer, answer: answer) == NegotiatedHeaderExtensionIDs(), "no such section")
    }

    @Test func answerToAiortcSendsOnlyWhatAiortcOffered() throws {
        let offer = try JSEPSessionDescription(parsing: Self.aiortcOffer, type: .offer)
        let answer = JSEPNegotiator.createAnswer(to: offer, tracks: [Self.audio, Self.video], transport: Self.transport)
        #expect(answer.media[0].extensions.map(\.id) == [1, 2])
        #expect(answer.media[1].extensions.map(\.id) == [1, 3])
        // aiortc offers no transport-wide numbers: none go out, and none are read.
        #expect(
            Map.sendIDs(mid: "0", remote: offer, answer: answer)
                == NegotiatedHeaderExtensionIDs(audioLevel: 2, absSendTime: 0, transportSequence: 0, mid: 1))
        #expect(
            Map.sendIDs(mid: "1", remote: offer, answer: answer)
                == NegotiatedHeaderExtensionIDs(audioLevel: 0, absSendTime: 3, transportSequence: 0, mid: 1))
        #expect(Map.receiveID(SDPExtensionMap.transportSequenceNumberURI, local: answer, answer: answer) == nil)
        #expect(Map.receiveID(SDPExtensionMap.audioLevelURI, kind: .audio, local: answer, answer: answer) == 2)
    }

    @Test func ourOfferAnsweredWithOtherIDsAndWithoutTransportCC() throws {
        let offer = JSEPNegotiator.createOffer(tracks: [Self.audio, Self.video], transport: Self.transport)
        #expect(offer.media[0].extensions.map(\.id) == [1, 2, 3, 4] && offer.media[1].extensions.map(\.id) == [2, 3, 4])
        #expect(offer.media[1].codecs[0].feedback.contains { $0.type == "transport-cc" })
        // A peer that answers the extensions under IDs of its own and drops transport-cc.
        var peerAnswer = JSEPNegotiator.createAnswer(to: offer, tracks: [], transport: Self.transport)
        peerAnswer.media[0].extensions = [
            SDPExtensionMap(id: 9, uri: SDPExtensionMap.audioLevelURI),
            SDPExtensionMap(id: 12, uri: SDPExtensionMap.absoluteSendTimeURI),
        ]
        peerAnswer.media[1].extensions = [SDPExtensionMap(id: 12, uri: SDPExtensionMap.absoluteSendTimeURI)]
        // The peer answered: its IDs are what we send with; ours (the offer's) what we read.
        #expect(
            Map.sendIDs(mid: "0", remote: peerAnswer, answer: peerAnswer)
                == NegotiatedHeaderExtensionIDs(audioLevel: 9, absSendTime: 12, transportSequence: 0))
        #expect(
            Map.sendIDs(mid: "1", remote: peerAnswer, answer: peerAnswer)
                == NegotiatedHeaderExtensionIDs(audioLevel: 0, absSendTime: 12, transportSequence: 0))
        #expect(Map.receiveID(SDPExtensionMap.absoluteSendTimeURI, kind: .video, local: offer, answer: peerAnswer) == 2)
        #expect(Map.receiveID(SDPExtensionMap.transportSequenceNumberURI, local: offer, answer: peerAnswer) == nil)
        // A rejected section sends nothing.
        peerAnswer.media[1].port = 0
        #expect(Map.sendIDs(mid: "1", remote: peerAnswer, answer: peerAnswer) == NegotiatedHeaderExtensionIDs())
    }

    @Test func renegotiationChangesTheIDs() throws {
        let first = try JSEPSessionDescription(parsing: Self.chromiumOffer(), type: .offer)
        let firstAnswer = JSEPNegotiator.createAnswer(to: first, tracks: [Self.audio, Self.video], transport: Self.transport)
        var audio = Self.audio, video = Self.video
        audio.mid = "0"
        video.mid = "1"
        // The peer's next offer moves transport-cc to 9 and abs-send-time to a two-byte ID
        // (allowed by extmap-allow-mixed), and drops the audio level.
        let second = try JSEPSessionDescription(
            parsing: Self.chromiumOffer(
                audioExtmaps: """
                    a=extmap:20 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
                    a=extmap:9 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
                    a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
                    """,
                videoExtmaps: """
                    a=extmap:20 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time
                    a=extmap:9 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01
                    a=extmap:4 urn:ietf:params:rtp-hdrext:sdes:mid
                    """, version: 3),
            type: .offer)
        let secondAnswer = JSEPNegotiator.createAnswer(
            to: second, tracks: [audio, video], transport: Self.transport, previous: firstAnswer)
        #expect(secondAnswer.media[0].extensions.map(\.id) == [20, 9, 4])
        // Our packets: transport-cc under 9; abs-send-time (ID 20 needs the two-byte form, which
        // our packets do not use) and the audio level are no longer sent.
        #expect(
            Map.sendIDs(mid: "0", remote: second, answer: secondAnswer)
                == NegotiatedHeaderExtensionIDs(audioLevel: 0, absSendTime: 0, transportSequence: 9, mid: 4))
        #expect(
            Map.sendIDs(mid: "1", remote: second, answer: secondAnswer)
                == NegotiatedHeaderExtensionIDs(audioLevel: 0, absSendTime: 0, transportSequence: 9, mid: 4))
        // What we read follows too; a two-byte ID is read.
        #expect(Map.receiveID(SDPExtensionMap.transportSequenceNumberURI, local: secondAnswer, answer: secondAnswer) == 9)
        #expect(Map.receiveID(SDPExtensionMap.absoluteSendTimeURI, kind: .video, local: secondAnswer, answer: secondAnswer) == 20)
        #expect(Map.receiveID(SDPExtensionMap.audioLevelURI, kind: .audio, local: secondAnswer, answer: secondAnswer) == nil)
    }
}
