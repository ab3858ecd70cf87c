// The peer-connection API's refusals and values, without a clock: configurations that cannot be
// used, calls out of order, edited or malformed SDP and candidates, and the ICE restart this
// engine does not do, each with its typed error and nothing changed. Connections bind real
// loopback sockets but never connect; runs in the unit phase.
import Foundation
import RevueMedia
import Testing

@Suite struct RTCPeerConnectionAPITests {
    static func loopback() -> RTCConfiguration {
        var c = RTCConfiguration()
        c.localAddress = "127.0.0.1"
        c.gatheringWait = .zero
        return c
    }

    /// The `RTCError` `body` throws, or nil (also for any other error, which the API never throws).
    static func error(_ body: () async throws -> Void) async -> RTCError? {
        do {
            try await body()
            return nil
        } catch {
            return error as? RTCError
        }
    }

    @Test func configurationsThatCannotBeUsedAreRefused() async {
        func refusal(_ edit: (inout RTCConfiguration) -> Void) -> RTCError? {
            var c = Self.loopback()
            edit(&c)
            do {
                _ = try RTCPeerConnection(configuration: c)
                return nil
            } catch {
                return error
            }
        }
        // Accepted: STUN with and without a port, TURN over UDP, TCP and TLS with credentials.
        #expect(
            refusal {
                $0.iceServers = [
                    RTCIceServer(urls: ["stun:127.0.0.1", "stun:127.0.0.1:19302"]),
                    RTCIceServer(
                        urls: ["turn:127.0.0.1:3478", "turn:127.0.0.1?transport=tcp", "turns:127.0.0.1:5349"],
                        username: "u", credential: "p"),
                ]
            } == nil)
        #expect(
            refusal {
                $0.iceServers = [RTCIceServer(urls: ["turn:127.0.0.1"], username: "u", credential: "p")];
                $0.iceTransportPolicy = .relay
            } == nil)
        #expect(refusal { $0.localAddress = "::1" } == nil && refusal { $0.localAddress = "0.0.0.0" } == nil)
        for bad in ["http://127.0.0.1", "stun:", "stun:user@127.0.0.1", "turn:127.0.0.1?transport=sctp", "stun:127.0.0.1:99999"] {
            guard
                case .invalidConfiguration? = refusal({
                    $0.iceServers = [RTCIceServer(urls: [bad], username: "u", credential: "p")]
                })
            else {
                Issue.record("\(bad) was not refused as a configuration")
                continue
            }
        }
        guard case .invalidConfiguration? = refusal({ $0.iceServers = [RTCIceServer(urls: ["turn:127.0.0.1"])] }) else {
            Issue.record("TURN without credentials was accepted")
            return
        }
        guard case .invalidConfiguration? = refusal({ $0.iceTransportPolicy = .relay }) else {
            Issue.record("relay without a TURN server was accepted")
            return
        }
        guard case .notSupported? = refusal({ $0.bundlePolicy = .maxCompat }) else {
            Issue.record("max-compat was accepted")
            return
        }
        guard case .invalidConfiguration? = refusal({ $0.localAddress = "not an address" }),
            case .invalidConfiguration? = refusal({ $0.videoWidth = 15 }),
            case .invalidConfiguration? = refusal({ $0.videoBitrate = 0 }),
            case .invalidConfiguration? = refusal({ $0.videoMaximumBitrate = 500_000 }),  // below the start
            case .invalidConfiguration? = refusal({ $0.videoMaximumBitrate = 30_000_000 })
        else {
            Issue.record("a bad address, size or bitrate was accepted")
            return
        }
    }

    @Test func callsOutOfOrderEditedSDPAndBadCandidatesAreRefusedWithTypedErrors() async throws {
        let a = try RTCPeerConnection(configuration: Self.loopback())
        let b = try RTCPeerConnection(configuration: Self.loopback())
        defer {
            a.close()
            b.close()
        }
        try a.addTrack(.video)
        try a.addTrack(.audio)
        // Statistics before any exchange: the transport, and each local track at zero.
        let early = await a.getStats()
        #expect(early["T01"]?.string("dtlsState") == "new" && early["T01"]?.string("selectedCandidatePairId") == nil)
        #expect(early.records(ofType: .inboundRTP).isEmpty && early.records(ofType: .candidatePair).isEmpty)
        #expect(early.records(ofType: .outboundRTP).map { $0.int("packetsSent") } == [0, 0])
        let receiveOnly = try b.addTransceiver(.video, direction: .recvonly)
        #expect(receiveOnly.videoCapturer == nil && receiveOnly.audioCapturer == nil && receiveOnly.mid != nil)
        guard case .notSupported? = await Self.error({ _ = try b.addTransceiver(.audio, direction: .inactive) }),
            case .invalidState? = await Self.error({ try b.removeTrack(receiveOnly) })
        else {
            Issue.record("an inactive transceiver or removing a receive-only one was accepted")
            return
        }

        // Before any description.
        guard case .invalidState? = await Self.error({ _ = try await a.createAnswer() }),
            case .invalidState? = await Self.error({
                try await a.addIceCandidate(RTCIceCandidate(candidate: "candidate:1 1 udp 1 127.0.0.1 9 typ host", sdpMid: "0"))
            })
        else {
            Issue.record("an answer or a candidate before the remote description was accepted")
            return
        }
        // Before the first exchange, an ICE restart has nothing to restart.
        guard await Self.error({ try a.restartIce() }) == nil else {
            Issue.record("restartIce before any exchange threw")
            return
        }

        // An edited offer is refused, the one createOffer returned is taken, and a second
        // createOffer gives the same offer.
        let offer = try await a.createOffer()
        #expect(offer.type == .offer && offer.sdp.contains("m=video") && offer.sdp.contains("m=audio"))
        let edited = RTCSessionDescription(
            type: .offer, sdp: offer.sdp.replacingOccurrences(of: "a=rtcp-mux", with: "a=x-edited"))
        guard case .invalidModification? = await Self.error({ try await a.setLocalDescription(edited) }) else {
            Issue.record("an edited offer was accepted")
            return
        }
        #expect(a.signalingState == .stable && a.localDescription == nil)
        try await a.setLocalDescription(offer)
        #expect(a.signalingState == .haveLocalOffer && a.localDescription == offer)
        #expect(try await a.createOffer() == offer)

        // Malformed and unusable remote descriptions change nothing.
        for sdp in ["", "v=0\r\nthis is not SDP\r\n", String(repeating: "a", count: 100_000)] {
            guard
                case .invalidDescription? = await Self.error({
                    try await b.setRemoteDescription(RTCSessionDescription(type: .offer, sdp: sdp))
                })
            else {
                Issue.record("SDP '\(sdp.prefix(20))' was accepted")
                continue
            }
        }
        let noFingerprint = offer.sdp.components(separatedBy: "\r\n").filter { !$0.hasPrefix("a=fingerprint:") }
            .joined(separator: "\r\n")
        guard
            case .invalidDescription? = await Self.error({
                try await b.setRemoteDescription(RTCSessionDescription(type: .offer, sdp: noFingerprint))
            })
        else {
            Issue.record("an offer without a fingerprint was accepted")
            return
        }
        #expect(b.signalingState == .stable && b.remoteDescription == nil)
        // An answer where an offer is expected.
        guard
            case .invalidState? = await Self.error({
                try await b.setRemoteDescription(RTCSessionDescription(type: .answer, sdp: offer.sdp))
            })
        else {
            Issue.record("an answer without our offer was accepted")
            return
        }

        try await b.setRemoteDescription(offer)
        #expect(b.signalingState == .haveRemoteOffer)
        // Candidates: garbage text, an unknown section, another ufrag, neither mid nor index.
        let good = "candidate:1 1 udp 2130706431 127.0.0.1 40000 typ host"
        for c in [
            RTCIceCandidate(candidate: "candidate:garbage", sdpMid: "0"),
            RTCIceCandidate(candidate: String(repeating: "x", count: 5000), sdpMid: "0"),
            RTCIceCandidate(candidate: good, sdpMid: "no-such-mid"),
            RTCIceCandidate(candidate: good, sdpMLineIndex: 7),
            RTCIceCandidate(candidate: good, sdpMid: "0", usernameFragment: "other"),
            RTCIceCandidate(candidate: good),
        ] {
            guard case .invalidCandidate? = await Self.error({ try await b.addIceCandidate(c) }) else {
                Issue.record("candidate \(c) was accepted")
                continue
            }
        }
        try await b.addIceCandidate(RTCIceCandidate(candidate: good, sdpMid: "0"))
        #expect(!b.remoteEndOfCandidates)
        try await b.addIceCandidate(nil)
        #expect(b.remoteEndOfCandidates)

        // The answer: the offered video section is answered, b's receive-only section is not offered.
        let answer = try await b.createAnswer()
        try await b.setLocalDescription(answer)
        #expect(b.signalingState == .stable)
        #expect(answer.sdp.components(separatedBy: "m=").count == 3, "two sections answered")

        a.close()
        #expect(a.signalingState == .closed && a.connectionState == .closed)
        guard case .invalidState? = await Self.error({ _ = try await a.createOffer() }),
            case .invalidState? = await Self.error({ _ = try a.addTrack(.audio) })
        else {
            Issue.record("a closed connection accepted a call")
            return
        }
    }

    @Test func aGeneratedCertificateGivesConnectionsOneFingerprint() async throws {
        let certificate = try RTCCertificate.generate(expires: .seconds(86_400))
        #expect(certificate.fingerprint.algorithm == "sha-256" && certificate.fingerprint.value.count == 32 * 3 - 1)
        #expect(certificate.expires > Date() && certificate.expires < Date().addingTimeInterval(2 * 86_400))
        var c = Self.loopback()
        c.certificates = [certificate]
        var fingerprints: [String] = []
        for configuration in [c, c, Self.loopback()] {
            let pc = try RTCPeerConnection(configuration: configuration)
            defer { pc.close() }
            try pc.addTrack(.audio)
            let offer = try await pc.createOffer()
            fingerprints += offer.sdp.components(separatedBy: "\r\n").filter { $0.hasPrefix("a=fingerprint:") }.prefix(1)
        }
        let expected = "a=fingerprint:sha-256 \(certificate.fingerprint.value)"
        #expect(fingerprints.count == 3 && fingerprints[0] == expected && fingerprints[1] == expected, "\(fingerprints)")
        #expect(fingerprints[2] != expected, "a connection without the certificate made its own")
        c.certificates = [certificate, try RTCCertificate.generate()]
        do {
            _ = try RTCPeerConnection(configuration: c)
            Issue.record("two certificates were accepted")
        } catch {
            guard case .notSupported = error else { throw error }
        }
    }

    @Test func statsValuesAndReportLookups() {
        let r = RTCStatsReport(records: [
            RTCStats(id: "x", type: .inboundRTP, timestamp: 1, members: ["packetsReceived": .int(7), "jitter": .double(0.5)]),
            RTCStats(id: "t", type: .transport, timestamp: 1, members: ["dtlsState": .string("new")]),
        ])
        #expect(r["x"]?.int("packetsReceived") == 7 && r["x"]?.double("packetsReceived") == 7)
        #expect(r["x"]?.double("jitter") == 0.5 && r["x"]?.int("jitter") == nil)
        #expect(r.records(ofType: .transport).map(\.id) == ["t"] && r["t"]?.string("dtlsState") == "new")
        #expect(RTCStatsType.candidatePair.rawValue == "candidate-pair")
    }
}
