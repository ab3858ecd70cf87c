import Foundation
import MediaCore
import Testing

@Suite struct SDPTests {
    static let key: [UInt8] = (0..<30).map { UInt8($0 * 7 + 1) }

    static func sample() -> SDPSessionDescription {
        var s = SDPSessionDescription(
            origin: SDPOrigin(sessionID: 4_242_424_242, address: "127.0.0.1"),
            sessionName: "Revue", connection: SDPConnection(address: "127.0.0.1"))
        s.attributes = [SDPAttribute("tool", "revue-media")]
        var v = SDPMediaDescription(type: "video", port: 5004, payloadType: 96, encoding: "VP8", clockRate: 90_000)
        v.rtcpFeedback = [.nack(96), .pli(96), .fir(96), .remb(96)]
        v.crypto = [SDPCrypto(tag: 1, suite: "AES_CM_128_HMAC_SHA1_80", keyAndSalt: key)]
        v.extensionMaps = [SDPExtensionMap(id: 3, uri: SDPExtensionMap.absoluteSendTimeURI)]
        v.ssrcs = [SDPSSRCAttribute(ssrc: 3_000_000_001, attribute: "cname", value: "revue")]
        v.direction = .sendonly
        var a = SDPMediaDescription(type: "audio", port: 5006, payloadType: 111, encoding: "opus", clockRate: 48_000, channels: 2)
        a.formatParameters = [SDPFormatParameters(payloadType: 111, parameters: "minptime=10;useinbandfec=1")]
        a.crypto = [SDPCrypto(tag: 1, suite: "AES_CM_128_HMAC_SHA1_80", keyAndSalt: key)]
        a.extensionMaps = [SDPExtensionMap(id: 1, direction: .sendonly, uri: SDPExtensionMap.audioLevelURI, attributes: "vad=on")]
        a.rtcpMux = true
        s.media = [v, a]
        return s
    }

    @Test func writesTheExpectedText() {
        let k = Base64.encode(Self.key)
        #expect(
            Self.sample().text == """
                v=0\r
                o=- 4242424242 1 IN IP4 127.0.0.1\r
                s=Revue\r
                c=IN IP4 127.0.0.1\r
                t=0 0\r
                a=tool:revue-media\r
                m=video 5004 RTP/SAVP 96\r
                a=rtpmap:96 VP8/90000\r
                a=rtcp-fb:96 nack\r
                a=rtcp-fb:96 nack pli\r
                a=rtcp-fb:96 ccm fir\r
                a=rtcp-fb:96 goog-remb\r
                a=extmap:3 http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time\r
                a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:\(k)\r
                a=sendonly\r
                a=ssrc:3000000001 cname:revue\r
                m=audio 5006 RTP/SAVP 111\r
                a=rtpmap:111 opus/48000/2\r
                a=fmtp:111 minptime=10;useinbandfec=1\r
                a=extmap:1/sendonly urn:ietf:params:rtp-hdrext:ssrc-audio-level vad=on\r
                a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:\(k)\r
                a=rtcp-mux\r

                """)
    }

    @Test func roundTripsThroughTheParser() throws {
        let s = Self.sample()
        let parsed = try SDPSessionDescription(parsing: s.text)
        #expect(parsed == s)
        #expect(parsed.media[0].crypto[0].keys[0].keyAndSalt == Self.key)
        #expect(parsed.media[1].formatParameters(for: 111)?.value(for: "useinbandfec") == "1")
        #expect(parsed.media[1].rtpMap(for: 111)?.channels == 2)
    }

    @Test func parsesWhatFFmpegAndBrowsersWrite() throws {
        // ffmpeg's sdp muxer output (LF line ends) and browser-style lines we keep as generic ones.
        let text = """
            v=0
            o=- 0 0 IN IP4 127.0.0.1
            s=No Name
            c=IN IP4 127.0.0.1
            t=0 0
            a=tool:libavformat 59.27.100
            m=video 5004 RTP/SAVP 96
            b=AS:200
            a=rtpmap:96 VP8/90000
            a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:\(Base64.encode(Self.key))|2^31|1:4 UNENCRYPTED_SRTCP
            a=rtcp-fb:* nack
            a=ssrc:1 msid:stream track
            a=fingerprint:sha-256 AB:CD
            a=mid:0

            """
        let s = try SDPSessionDescription(parsing: text, source: "ff.sdp")
        #expect(s.sessionName == "No Name")
        #expect(s.media.count == 1)
        let m = s.media[0]
        #expect(m.bandwidths == [SDPBandwidth(type: "AS", value: 200)])
        #expect(m.crypto[0].keys[0].lifetime == "2^31" && m.crypto[0].keys[0].mki == "1:4")
        #expect(m.crypto[0].sessionParameters == ["UNENCRYPTED_SRTCP"])
        #expect(m.rtcpFeedback == [SDPRTCPFeedback(payloadType: nil, type: "nack")])
        #expect(m.ssrcs == [SDPSSRCAttribute(ssrc: 1, attribute: "msid", value: "stream track")])
        #expect(m.otherAttributes == [SDPAttribute("fingerprint", "sha-256 AB:CD")])
        #expect(m.mid == "0")
    }

    @Test func rejectsMalformedLinesWithTheirLineNumber() {
        let head = "v=0\no=- 1 1 IN IP4 1.2.3.4\ns=x\nt=0 0\n"
        let cases: [(String, String)] = [
            ("", "line 1: empty session description (no v=0)"),
            ("v=1\n", "line 1: unsupported SDP version v=1 (only 0)"),
            ("o=- 1 1 IN IP4 1.2.3.4\n", "line 1: a session description must start with v=0"),
            ("v=0\no=- x 1 IN IP4 1.2.3.4\n", "line 2: o= session id and version must be numbers"),
            ("v=0\no=- 1 1 IN IP4\n", "line 2: o= needs 6 fields, got 5"),
            ("v=0\no=- 1 1 IN IP4 1.2.3.4\nt=0 0\n", "line 4: missing s= line"),
            ("v=0\ns=x\nm=audio 1 RTP/AVP 0\n", "line 3: m= before the session's o=, s= and t= lines"),
            (head + "garbage\n", "line 5: expected <type>=<value>, got \"garbage\""),
            (head + "m=video 70000 RTP/SAVP 96\n", "line 5: m= port \"70000\" is not a number in 0...65535"),
            (head + "m=video 5004 RTP/SAVP\n", "line 5: m= needs <media> <port> <proto> <fmt>..., got \"video 5004 RTP/SAVP\""),
            (head + "m=video 5004 RTP/SAVP 200\n", "line 5: m= payload type \"200\" is not a number in 0...127"),
            (head + "m=video 9 UDP/TLS/RTP/SAVPF 96 abc\n", "line 5: m= payload type \"abc\" is not a number in 0...127"),
            (
                head + "m=video 5004 RTP/SAVP 96\na=rtpmap:96 VP8/x\n",
                "line 6: a=rtpmap: clock rate \"x\" is not a number in 1...4294967295"
            ),
            (
                head + "m=video 5004 RTP/SAVP 96\na=rtpmap:96 VP8\n",
                "line 6: a=rtpmap: \"VP8\" is not <encoding>/<clock rate>[/<channels>]"
            ),
            (head + "m=video 5004 RTP/SAVP 96\na=extmap:0 urn:x\n", "line 6: a=extmap: id \"0\" is not a number in 1...255"),
            (
                head + "m=video 5004 RTP/SAVP 96\na=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:AAAA\n",
                "line 6: a=crypto: AES_CM_128_HMAC_SHA1_80 needs 30 bytes of key and salt, the key has 3"
            ),
            (
                head + "m=video 5004 RTP/SAVP 96\na=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:#!\n",
                "line 6: a=crypto: key is not valid base64"
            ),
            (
                head + "m=video 5004 RTP/SAVP 96\na=crypto:1 AES_CM_128_HMAC_SHA1_80\n",
                "line 6: a=crypto needs <tag> <crypto-suite> <key-params>"
            ),
            (head + "m=video 5004 RTP/SAVP 96\na=ssrc:x cname:a\n", "line 6: a=ssrc: \"x\" is not a 32-bit SSRC"),
            (head + "m=video 5004 RTP/SAVP 96\nu=http://x\n", "line 6: u= is not allowed in a media section"),
            (head + "\nm=video 5004 RTP/SAVP 96\n", "line 5: empty line"),
        ]
        for (text, message) in cases {
            let e = containerError { _ = try SDPSessionDescription(parsing: text, source: "in.sdp") }
            #expect(e?.kind == .malformed)
            #expect(e?.description == "in.sdp: \(message)", "\(String(describing: e))")
        }
    }

    @Test func formatParametersWithABareEqualsSign() {
        let f = SDPFormatParameters(payloadType: 111, parameters: "useinbandfec=1;=;=x; minptime = 10")
        #expect(f.pairs.map { "\($0.key)|\($0.value)" } == ["useinbandfec|1", "|", "|x", "minptime|10"])
        #expect(f.value(for: "useinbandfec") == "1" && f.value(for: "minptime") == "10")
    }

    @Test func knowsWhichSuitesFFmpegAndGStreamerCanUse() {
        let cm = SDPCrypto(suite: "AES_CM_128_HMAC_SHA1_80", keyAndSalt: Self.key)
        #expect(cm.isSupportedByFFmpeg)
        #expect(cm.gstreamerCipherAndAuth! == ("aes-128-icm", "hmac-sha1-80"))
        let gcm = SDPCrypto(suite: "AEAD_AES_128_GCM", keyAndSalt: Array(Self.key.prefix(28)))
        #expect(!gcm.isSupportedByFFmpeg)
        #expect(gcm.gstreamerCipherAndAuth! == ("aes-128-gcm", "null"))
        var withLifetime = cm
        withLifetime.keys[0].lifetime = "2^31"
        #expect(!withLifetime.isSupportedByFFmpeg)
        let caps = Self.sample().media[1].gstreamerCaps!
        #expect(
            caps == "application/x-srtp, media=(string)audio, payload=(int)111, clock-rate=(int)48000, "
                + "encoding-name=(string)OPUS, encoding-params=(string)2, srtp-key=(buffer)\(Self.key.map { String(format: "%02x", $0) }.joined()), "
                + "srtp-cipher=(string)aes-128-icm, srtp-auth=(string)hmac-sha1-80, srtcp-cipher=(string)aes-128-icm, srtcp-auth=(string)hmac-sha1-80"
        )
    }

    @Test func base64MatchesRFC4648Vectors() {
        let vectors = [
            "": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=", "foobar": "Zm9vYmFy",
        ]
        for (plain, encoded) in vectors {
            #expect(Base64.encode(Array(plain.utf8)) == encoded)
            #expect(Base64.decode(encoded) == Array(plain.utf8))
        }
        #expect(Base64.decode("Zg=") == nil)
        #expect(Base64.decode("Z") == nil)
        #expect(Base64.decode("Zg==Zg==") == nil)
    }

    @Test func readsAndWritesFilesAtomically() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        try Self.sample().write(to: dir.file("s.sdp"))
        #expect(dir.contents == ["s.sdp"])
        #expect(try SDPSessionDescription.read(path: dir.file("s.sdp")) == Self.sample())
        let e = containerError { _ = try SDPSessionDescription.read(path: dir.write("e.sdp", [])) }
        #expect(e?.description == "\(dir.file("e.sdp")): file is empty (no session description)")
        let bad = dir.write("b.sdp", Array("v=0\r\no=x\r\n".utf8))
        #expect(
            containerError { _ = try SDPSessionDescription.read(path: bad) }?.description
                == "\(bad): line 2: o= needs 6 fields, got 1")
    }

    @Test func survivesRandomCorruption() throws {
        let dir = ContainerTempDir(); defer { dir.remove() }
        let result = exerciseCorruptions(of: Array(Self.sample().text.utf8), in: dir, mutations: 400, truncationStep: 7) { path in
            _ = try SDPSessionDescription.read(path: path)
        }
        #expect(result.errors > 0)
        #expect(result.unnamed.isEmpty, "\(result.unnamed)")
    }

    @Test func writerReportsReadOnlyOutputDirectory() {
        // /sys refuses new files even to root: the error names the output and nothing is created.
        let path = "/sys/revue-test.sdp"
        let e = containerError { try SDPTests.sample().write(to: path) }
        #expect(e?.kind == .permissionDenied)
        #expect(e?.description == "\(path): cannot create output file: Permission denied")
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}
