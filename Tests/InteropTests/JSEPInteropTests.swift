// JSEP offers and answers against real WebRTC stacks, recorded by the tests as they run: aiortc
// (Python, in .venv-interop), headless Chromium (driven over the DevTools protocol on a pipe,
// fake camera and microphone) and GStreamer's webrtcbin (through PyGObject). Each peer's offer is
// parsed and answered by JSEPNegotiator, and the peer must accept that answer; our offer goes to
// each peer, which must accept it and answer, and its answer is parsed and checked field by field.
// A peer that is missing or cannot run fails the test with the reason: scripts/install-deps
// installs all three.
import Foundation
import MediaCore
import Synchronization
import Testing

@Suite(.serialized)
struct JSEPInteropTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let transport = JSEPTransportParameters(
        ice: JSEPICEParameters(usernameFragment: "RvIx", password: "revueinteroppassword0123"),
        fingerprints: [JSEPFingerprint(bytes: (0..<32).map { UInt8(255 - $0 * 5) })],
        candidates: [JSEPCandidate("candidate:1 1 udp 2130706431 127.0.0.1 40000 typ host")!],
        endOfCandidates: true, cname: "revue-interop")
    static let tracks = [
        JSEPTrack(kind: .audio, id: "mic", streamID: "revue", ssrc: 0x1111_2222),
        JSEPTrack(kind: .video, id: "cam", streamID: "revue", ssrc: 0x3333_4444, retransmissionSSRC: 0x5555_6666),
    ]

    /// Our offer, as every peer gets it.
    static func ourOffer() -> JSEPSessionDescription {
        JSEPNegotiator.createOffer(tracks: tracks, transport: transport, sessionID: 1_234_567)
    }

    // MARK: Checks shared by every peer

    /// A peer's offer: parses, has what JSEP requires, and our answer to it is right field by field.
    static func checkPeerOffer(_ sdp: String, peer: String) throws -> JSEPSessionDescription {
        let offer: JSEPSessionDescription
        do { offer = try JSEPSessionDescription(parsing: sdp, type: .offer) } catch {
            Issue.record("\(peer)'s offer does not parse: \(error)\n\(sdp)")
            throw error
        }
        #expect(offer.media.map(\.kind) == [.audio, .video], "\(peer)")
        #expect(!offer.bundle.isEmpty, "\(peer) bundles")
        // Written back, the peer's offer parses to the same value (unknown attributes kept).
        #expect(try JSEPSessionDescription(parsing: offer.sdp, type: .offer) == offer, "\(peer)")
        for s in offer.media {
            #expect(s.mid != nil && s.rtcpMux && s.proto == "UDP/TLS/RTP/SAVPF", "\(peer) \(s.kind)")
            #expect(offer.effectiveSetup(of: s) == .actpass, "\(peer)")
            #expect(offer.effectiveFingerprints(of: s).contains { $0.algorithm == "sha-256" && $0.bytes.count == 32 }, "\(peer)")
            #expect(offer.effectiveICE(of: s) != nil, "\(peer)")
        }
        let audio = offer.media[0], video = offer.media[1]
        let opus = try #require(audio.codecs.first { $0.known == .opus }, "\(peer) offers Opus")
        let vp8 = try #require(video.codecs.first { $0.known == .vp8 }, "\(peer) offers VP8")

        let answer = JSEPNegotiator.createAnswer(to: offer, tracks: tracks, transport: transport, sessionID: 42)
        #expect(answer.media.map(\.mid) == offer.media.map(\.mid), "\(peer): mids mirror the offer")
        #expect(answer.bundle == offer.bundle.filter { m in answer.section(mid: m).map { !$0.isRejected } ?? false })
        for (a, o) in zip(answer.media, offer.media) {
            #expect(!a.isRejected && a.setup == .active, "\(peer) \(o.kind)")
            let expected: SDPDirection =
                switch o.direction {
                case .sendrecv: .sendrecv
                case .sendonly: .recvonly
                case .recvonly: .sendonly
                case .inactive: .inactive
                }
            #expect(a.direction == expected, "\(peer) \(o.kind): offered \(o.direction)")
            // Every answered codec is an offered one with the offerer's payload type, clock rate
            // and name; nothing this engine cannot use.
            for c in a.codecs {
                let offered = try #require(o.codec(payloadType: c.payloadType))
                #expect(offered.name == c.name && offered.clockRate == c.clockRate && c.known != nil, "\(peer) \(c.name)")
                for f in c.feedback {
                    #expect(
                        offered.feedback.contains { $0.type == f.type && $0.parameter == f.parameter }
                            || o.wildcardFeedback.contains { $0.type == f.type && $0.parameter == f.parameter })
                }
            }
            // Extensions: a subset of the offered ones with the offerer's IDs.
            for e in a.extensions { #expect(o.extensions.contains { $0.id == e.id && $0.uri == e.uri }, "\(peer) \(e.uri)") }
            #expect(a.rtcpMux)
        }
        #expect(answer.media[0].codecs.first?.payloadType == opus.payloadType)
        #expect(answer.media[0].codecs.first?.usesInbandFEC == true)
        #expect(answer.media[1].codecs.contains { $0.payloadType == vp8.payloadType })
        if let rtx = video.retransmissionPayloadType(for: vp8.payloadType) {
            #expect(answer.media[1].retransmissionPayloadType(for: vp8.payloadType) == rtx)
        }
        #expect(try JSEPSessionDescription(parsing: answer.sdp, type: .answer) == answer)
        return answer
    }

    /// A peer's answer to our offer: parses and agrees with the offer.
    static func checkPeerAnswer(_ sdp: String, to offer: JSEPSessionDescription, peer: String) throws -> JSEPSessionDescription {
        let answer: JSEPSessionDescription
        do { answer = try JSEPSessionDescription(parsing: sdp, type: .answer) } catch {
            Issue.record("\(peer)'s answer does not parse: \(error)\n\(sdp)")
            throw error
        }
        #expect(try JSEPSessionDescription(parsing: answer.sdp, type: .answer) == answer, "\(peer)")
        #expect(answer.media.map(\.mid) == ["0", "1"], "\(peer)")
        #expect(answer.media.map(\.kind) == [.audio, .video], "\(peer)")
        #expect(answer.bundle == ["0", "1"], "\(peer)")
        for (a, o) in zip(answer.media, offer.media) {
            #expect(!a.isRejected, "\(peer) \(a.kind)")
            let role = answer.effectiveSetup(of: a)
            #expect(role == .active || role == .passive, "\(peer) \(a.kind)")
            #expect(answer.effectiveICE(of: a) != nil && !answer.effectiveFingerprints(of: a).isEmpty, "\(peer)")
            #expect(a.direction == .sendrecv, "\(peer) \(a.kind) answers with its own track")
            #expect(!a.codecs.isEmpty, "\(peer) \(a.kind)")
            for c in a.codecs {
                let ours = o.codec(payloadType: c.payloadType)
                #expect(ours?.name.lowercased() == c.name.lowercased(), "\(peer) keeps our payload type \(c.payloadType)")
            }
            for e in a.extensions { #expect(o.extensions.contains { $0.id == e.id && $0.uri == e.uri }, "\(peer) \(e.uri)") }
        }
        #expect(answer.media[0].codecs.first { $0.known == .opus }?.payloadType == 111, "\(peer)")
        #expect(answer.media[1].codecs.contains { $0.known == .vp8 && $0.payloadType == 96 }, "\(peer)")
        return answer
    }

    // MARK: aiortc

    /// The peer programs (JSON lines in and out), shared with scripts/make-fuzz-corpus.
    static let peers = root + "/scripts/webrtc"

    static func aiortc() throws -> (JSONLinePeer, InteropTempDir) {
        let dir = InteropTempDir()
        let peer = try JSONLinePeer(
            name: "aiortc", executable: root + "/.venv-interop/bin/python3",
            arguments: [peers + "/aiortc_peer.py"])
        return (peer, dir)
    }

    @Test func aiortcOfferIsAnsweredAndTheAnswerAccepted() throws {
        let (peer, dir) = try Self.aiortc()
        defer { peer.stop(); dir.remove() }
        let offerText = try #require(try peer.call(["op": "offer"])["sdp"])
        let answer = try Self.checkPeerOffer(offerText, peer: "aiortc")
        let offer = try JSEPSessionDescription(parsing: offerText, type: .offer)
        #expect(!offer.media[0].candidates.isEmpty, "aiortc gathers before it offers")
        let state = try peer.call(["op": "remote-answer", "sdp": answer.sdp])
        #expect(state["state"] == "stable")
    }

    @Test func aiortcAnswersOurOffer() throws {
        let (peer, dir) = try Self.aiortc()
        defer { peer.stop(); dir.remove() }
        let offer = Self.ourOffer()
        let answerText = try #require(try peer.call(["op": "answer", "sdp": offer.sdp])["sdp"])
        let answer = try Self.checkPeerAnswer(answerText, to: offer, peer: "aiortc")
        // aiortc has no VP9: it answers VP8 (and its RTX) only.
        #expect(answer.media[1].codecs.contains { $0.known == .vp9 } == false)
    }

    // MARK: Chromium

    static func chromium() throws -> (JSONLinePeer, InteropTempDir) { try JSONLinePeer.chromium(scripts: peers) }

    static func js(_ function: String, _ argument: String? = nil) -> [String: String] { JSONLinePeer.js(function, argument) }

    @Test func chromiumOfferIsAnsweredAndTheAnswerAccepted() throws {
        let (peer, dir) = try Self.chromium()
        defer { peer.stop(); dir.remove() }
        let offerText = try #require(try peer.call(Self.js("makeOffer"))["sdp"])
        let answer = try Self.checkPeerOffer(offerText, peer: "Chromium")
        let offer = try JSEPSessionDescription(parsing: offerText, type: .offer)
        // What Chromium offers beyond what we answer: H264, AV1, red, ulpfec and VP9 profile 2
        // are parsed and left out.
        let names = Set(offer.media[1].codecs.map { $0.name.uppercased() })
        #expect(names.isSuperset(of: ["VP8", "VP9", "RTX"]))
        #expect(answer.media[1].codecs.allSatisfy { ["VP8", "VP9", "RTX"].contains($0.name.uppercased()) })
        #expect(answer.media[1].codecs.contains { $0.known == .vp9 && $0.profileID == 0 })
        #expect(offer.media[0].extensions.contains { $0.uri == SDPExtensionMap.audioLevelURI })
        #expect(offer.media[0].candidates.contains { $0.type == "host" })
        let state = try #require(try peer.call(Self.js("takeAnswer", answer.sdp))["sdp"])
        #expect(state == "stable sendrecv sendrecv", "Chromium applied our answer")
    }

    @Test func chromiumAnswersOurOffer() throws {
        let (peer, dir) = try Self.chromium()
        defer { peer.stop(); dir.remove() }
        let offer = Self.ourOffer()
        let answerText = try #require(try peer.call(Self.js("answerOffer", offer.sdp))["sdp"])
        let answer = try Self.checkPeerAnswer(answerText, to: offer, peer: "Chromium")
        #expect(answer.media[1].codecs.map(\.payloadType) == [96, 97, 98, 99], "Chromium takes VP8, VP9 and both RTX")
        #expect(answer.media.allSatisfy { answer.effectiveSetup(of: $0) == .active })
        #expect(answer.media[1].extensions.map(\.id) == [2, 3, 4])
    }
    // MARK: GStreamer webrtcbin

    static func gstreamer() throws -> (JSONLinePeer, InteropTempDir) {
        let dir = InteropTempDir()
        let peer = try JSONLinePeer(name: "webrtcbin", executable: "/usr/bin/python3", arguments: [peers + "/webrtcbin_peer.py"])
        return (peer, dir)
    }

    @Test func gstreamerOfferIsAnsweredAndTheAnswerAccepted() throws {
        let (peer, dir) = try Self.gstreamer()
        defer { peer.stop(); dir.remove() }
        let offerText = try #require(try peer.call(["op": "offer"])["sdp"])
        let answer = try Self.checkPeerOffer(offerText, peer: "webrtcbin")
        let offer = try JSEPSessionDescription(parsing: offerText, type: .offer)
        // max-bundle: the second section has port 0 and a=bundle-only, and is not rejected.
        #expect(offer.media[1].port == 0 && offer.media[1].bundleOnly && !offer.media[1].isRejected)
        #expect(answer.media[1].port != 0 && !answer.media[1].bundleOnly)
        // webrtcbin writes OPUS/48000 without the channel count; the answer mirrors its rtpmap.
        #expect(answer.media[0].codecs.first?.known == .opus)
        let state = try peer.call(["op": "remote-answer", "sdp": answer.sdp])
        #expect(state["state"] == "stable")
    }

    @Test func gstreamerAnswersOurOffer() throws {
        let (peer, dir) = try Self.gstreamer()
        defer { peer.stop(); dir.remove() }
        let offer = Self.ourOffer()
        let answerText = try #require(try peer.call(["op": "answer", "sdp": offer.sdp])["sdp"])
        _ = try Self.checkPeerAnswer(answerText, to: offer, peer: "webrtcbin")
    }
}
