// Two PeerConnections on loopback: offer and answer as SDP text, ICE, DTLS-SRTP, then VP8 video
// and Opus audio both ways, checked against what was sent (pattern PSNR, tone level and pitch);
// a tampered fingerprint, which must end the connection with a typed error and no media; and
// renegotiation: video added to an audio call by each side in turn and removed again, on the
// same transport, with every direction checked.
import Foundation
import MediaCore
import Synchronization
import Testing

@Suite(.serialized)
struct PeerConnectionTests {
    static let width = 320, height = 240

    static func configuration() -> PeerConnectionConfiguration {
        var c = PeerConnectionConfiguration()
        c.bindAddress = .loopbackIPv4(port: 0)
        c.videoWidth = width
        c.videoHeight = height
        c.videoBitrate = 800_000
        return c
    }

    /// One side: a connection with a video and an audio track, a feeder and a probe.
    struct Side {
        let connection: PeerConnection
        let feeder: PeerConnectionFeeder
        let probe = PeerConnectionProbe()

        init(
            tone: Double, codec: VPXCodec = .vp8, configuration: PeerConnectionConfiguration = PeerConnectionTests.configuration()
        ) throws {
            connection = try PeerConnection(configuration: configuration)
            let video = try connection.addVideoTrack(codec: codec)
            let audio = try connection.addAudioTrack()
            feeder = PeerConnectionFeeder(
                video: video, audio: audio, width: PeerConnectionTests.width,
                height: PeerConnectionTests.height, tone: tone)
            connection.videoRenderer = probe
            connection.audioSink = probe
        }
    }

    /// Offer from `a`, answer from `b`, each through SDP text as signalling carries it;
    /// `tamperAnswer` may change the answer's text before `a` sees it.
    static func negotiate(_ a: PeerConnection, _ b: PeerConnection, tamperAnswer: (String) -> String = { $0 }) async throws {
        let offer = try await a.createOffer()
        try await b.setRemoteDescription(try JSEPSessionDescription(parsing: offer.sdp, type: .offer))
        let answer = try await b.createAnswer()
        try await a.setRemoteDescription(try JSEPSessionDescription(parsing: tamperAnswer(answer.sdp), type: .answer))
    }

    /// Negotiates `a` with `b` and waits until both are connected.
    static func connect(_ a: Side, _ b: Side) async throws {
        try await negotiate(a.connection, b.connection)
        let stateA = await a.connection.waitUntilSettled(timeout: 60)
        let stateB = await b.connection.waitUntilSettled(timeout: 60)
        try #require(
            stateA == .connected && stateB == .connected,
            "a \(stateA) \(a.connection.error.map { "\($0)" } ?? ""), b \(stateB) \(b.connection.error.map { "\($0)" } ?? "")")
    }

    /// Feeds both sides for `frames` video frames (and the tones alongside), lets the last ones
    /// drain, and checks each direction: ≥ 90 % of the encoded frames decoded and identified by
    /// their bar code, mean PSNR ≥ 30 dB, the tone at level and pitch, sender reports received.
    static func exchangeMedia(_ a: Side, _ b: Side, frames: Int, label: String) async {
        a.feeder.start()
        b.feeder.start()
        _ = await waitFor(timeout: 60) {
            a.feeder.framesFed.load(ordering: .relaxed) >= frames && b.feeder.framesFed.load(ordering: .relaxed) >= frames
        }
        a.feeder.stop()
        b.feeder.stop()
        // What each sender encoded and sent (a loaded machine may drop captures before the
        // encoder; that is the capturer's business, not the connection's).
        let fedA = Int(a.connection.videoSendStatistics?.outbound.framesEncoded ?? 0)
        let fedB = Int(b.connection.videoSendStatistics?.outbound.framesEncoded ?? 0)
        #expect(
            fedA >= a.feeder.framesFed.load(ordering: .relaxed) / 2 && fedB >= b.feeder.framesFed.load(ordering: .relaxed) / 2,
            "encoded \(fedA) and \(fedB) frames")
        _ = await waitFor(timeout: 10) {
            b.probe.video.withLock { $0.frames } >= fedA * 9 / 10 && a.probe.video.withLock { $0.frames } >= fedB * 9 / 10
        }
        try? await Task.sleep(nanoseconds: 500_000_000)
        for (name, receiver, fed, tone) in [("a→b", b, fedA, 440.0), ("b→a", a, fedB, 660.0)] {
            let v = receiver.probe.video.withLock { $0 }
            let au = receiver.probe.audio.withLock { $0 }
            print(
                "PeerConnectionTests \(label) \(name): \(v.frames)/\(fed) frames, PSNR mean \(v.psnrMean) min \(v.psnrMin), audio RMS \(au.rms), \(au.crossingsPerSecond) crossings/s"
            )
            #expect(v.frames >= fed * 9 / 10, "\(name): \(v.frames) of \(fed) frames decoded")
            #expect(v.identified >= v.frames * 9 / 10, "\(name): \(v.identified) of \(v.frames) frames identified")
            #expect(v.psnrMean >= 30, "\(name): mean PSNR \(v.psnrMean) dB (min \(v.psnrMin))")
            // A 0.5 peak sine has RMS 0.354; two zero crossings per period.
            #expect(au.samples >= 48_000 * frames / 60, "\(name): \(au.samples) samples played")
            #expect(au.rms > 0.2 && au.rms < 0.5, "\(name): RMS \(au.rms)")
            #expect(abs(au.crossingsPerSecond - 2 * tone) < 0.05 * 2 * tone, "\(name): \(au.crossingsPerSecond) crossings/s")
        }
        // Each side's sender reports reached the other.
        #expect((a.connection.receiveStatistics?.senderReportsReceived ?? 0) > 0)
        #expect((b.connection.receiveStatistics?.senderReportsReceived ?? 0) > 0)
    }

    /// VP8 both ways, or VP9 from the offerer and VP8 back.
    @Test(arguments: [VPXCodec.vp8, .vp9])
    func swiftPeersExchangeVideoAndAudioBothWays(codec: VPXCodec) async throws {
        let a = try Side(tone: 440, codec: codec), b = try Side(tone: 660)
        defer { a.connection.close(); b.connection.close() }
        try await Self.connect(a, b)
        #expect(a.connection.srtpSuite == .aeadAES128GCM)
        // About 6 s of media each way (180 frames).
        await Self.exchangeMedia(a, b, frames: 180, label: "\(codec)")
        // Closing one side sends DTLS close_notify: the other one closes too.
        b.connection.close()
        #expect(await waitFor(timeout: 20) { a.connection.state == .closed }, "a is \(a.connection.state)")
    }

    @Test func tamperedFingerprintFailsWithTypedErrorAndNoMedia() async throws {
        let a = try Side(tone: 440), b = try Side(tone: 660)
        defer { a.connection.close(); b.connection.close() }
        try await Self.negotiate(a.connection, b.connection) { sdp in
            // Flip the first digest byte of every fingerprint of the answer.
            sdp.split(separator: "\r\n", omittingEmptySubsequences: false).map { line -> String in
                guard line.hasPrefix("a=fingerprint:sha-256 ") else { return String(line) }
                let prefix = "a=fingerprint:sha-256 "
                let hex = line.dropFirst(prefix.count)
                let first = UInt8(hex.prefix(2), radix: 16)! ^ 0xFF
                return prefix + String(format: "%02X", first) + hex.dropFirst(2)
            }.joined(separator: "\r\n")
        }
        a.feeder.start()
        b.feeder.start()
        let stateA = await a.connection.waitUntilSettled(timeout: 60)
        #expect(stateA == .failed)
        #expect(a.connection.error == .dtls(.fingerprintMismatch), "\(a.connection.error.map { "\($0)" } ?? "no error")")
        // The answerer saw the right certificate from `a`, so its own handshake may finish; but `a`
        // never exported keys, so it sends nothing and decrypts nothing.
        try? await Task.sleep(nanoseconds: 2_000_000_000)
        a.feeder.stop()
        b.feeder.stop()
        #expect(a.connection.sentPackets.sent == 0)
        #expect(a.connection.receiveStatistics == nil, "a never reads media")
        for side in [a, b] {
            #expect(side.probe.video.withLock { $0.frames } == 0)
        }
        #expect(a.probe.audio.withLock { $0.samplesSeen } == 0)
        // b's playout clock runs if b connected, but plays only silence.
        #expect(b.probe.audio.withLock { $0.loudestBlock } < 0.001)
        // a closed the DTLS association when the fingerprint did not match, so b is closed too
        // (not left to run until ICE consent expires, 30 s later).
        #expect(await waitFor(timeout: 10) { b.connection.state == .closed }, "b is \(b.connection.state)")
    }

    @Test func callsOutOfOrderAreRefused() async throws {
        let a = try PeerConnection(configuration: Self.configuration())
        let b = try PeerConnection(configuration: Self.configuration())
        defer { a.close(); b.close() }
        _ = try a.addAudioTrack()
        await #expect(throws: PeerConnectionError.self) { _ = try await a.createAnswer() }
        let offer = try await a.createOffer()
        // A second offer before the answer, and a candidate before the peer's description.
        await #expect(throws: PeerConnectionError.invalidState("an offer is already under way")) {
            _ = try await a.createOffer()
        }
        #expect(throws: PeerConnectionError.self) { try a.addIceCandidate(offer.media[0].candidates.first!) }
        // An answer before our own offer, and an offer whose fingerprint is gone.
        var asAnswer = offer
        asAnswer.type = .answer
        await #expect(throws: PeerConnectionError.self) { try await b.setRemoteDescription(asAnswer) }
        var bare = offer
        bare.fingerprints = []
        for i in bare.media.indices { bare.media[i].fingerprints = [] }
        await #expect(throws: PeerConnectionError.invalidDescription("no sha-256 a=fingerprint")) {
            try await b.setRemoteDescription(bare)
        }
        // The refused descriptions changed nothing: the real offer is still accepted.
        #expect(b.remoteDescription == nil && b.state == .new)
        try await b.setRemoteDescription(offer)
        _ = try await b.createAnswer()
        a.close()
        #expect(a.state == .closed)
        await #expect(throws: PeerConnectionError.self) { try await a.setRemoteDescription(offer) }
    }

    /// Twelve audio calls negotiated at once, on two cores: every end connects. The answerer's
    /// first DTLS datagram can reach the offerer while it is still applying the answer; it must be
    /// handled in the role the answer gives (passive), never in the default one. Handled in the
    /// default role, both ends send a ClientHello, each drops the other's, and both time out.
    @Test func manyCallsNegotiatedAtOnceAllConnect() async throws {
        var pairs: [(PeerConnection, PeerConnection)] = []
        for _ in 0..<12 {
            pairs.append(
                (try PeerConnection(configuration: Self.configuration()), try PeerConnection(configuration: Self.configuration()))
            )
        }
        defer { for (a, b) in pairs { a.close(); b.close() } }
        for (a, b) in pairs {
            _ = try a.addAudioTrack()
            _ = try b.addAudioTrack()
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (a, b) in pairs { group.addTask { try await Self.negotiate(a, b) } }
            try await group.waitForAll()
        }
        for (i, (a, b)) in pairs.enumerated() {
            let stateA = await a.waitUntilSettled(timeout: 30), stateB = await b.waitUntilSettled(timeout: 30)
            #expect(
                stateA == .connected && stateB == .connected,
                "call \(i): a \(stateA) \(a.error.map { "\($0)" } ?? ""), b \(stateB) \(b.error.map { "\($0)" } ?? "")")
        }
    }

    @Test func unreachablePeerFailsWithICEFailed() async throws {
        var c = Self.configuration()
        c.connectTimeoutSeconds = 3
        let a = try PeerConnection(configuration: c)
        let b = try PeerConnection(configuration: Self.configuration())
        defer { a.close() }
        _ = try a.addAudioTrack()
        let offer = try await a.createOffer()
        try await b.setRemoteDescription(offer)
        let answer = try await b.createAnswer()
        // The answerer goes away before any check: its candidates lead nowhere.
        b.close()
        try await a.setRemoteDescription(answer)
        #expect(await a.waitUntilSettled(timeout: 60) == .failed)
        #expect(a.error == .iceFailed, "\(a.error.map { "\($0)" } ?? "no error")")
    }

    /// Video frames a probe has decoded so far.
    static func frames(_ p: PeerConnectionProbe) -> Int { p.video.withLock { $0.frames } }

    /// An audio call that grows and shrinks: `a` offers audio only; `a` adds video and offers
    /// again (b answers, and its own video track, added before, rides in the same section); then
    /// `b` removes its video and offers (the original answerer makes the offer: roles and the
    /// transport stay); then `a` removes its video and offers. After each exchange every direction
    /// is checked: decoded frames from the right sender (bar-code ranges) at a PSNR, frames that
    /// stop after a removal, and the tones that never stop. An offer with a new fingerprint is
    /// refused and changes nothing.
    @Test func tracksAddedAndRemovedByRenegotiationOnBothSides() async throws {
        let a = try PeerConnection(configuration: Self.configuration())
        let b = try PeerConnection(configuration: Self.configuration())
        defer { a.close(); b.close() }
        let pa = PeerConnectionProbe(), pb = PeerConnectionProbe()
        a.videoRenderer = pa; a.audioSink = pa
        b.videoRenderer = pb; b.audioSink = pb
        let toneA = PeerConnectionFeeder(video: nil, audio: try a.addAudioTrack(), width: 16, height: 16, tone: 440)
        let toneB = PeerConnectionFeeder(video: nil, audio: try b.addAudioTrack(), width: 16, height: 16, tone: 660)
        defer { toneA.stop(); toneB.stop() }
        try await Self.negotiate(a, b)
        #expect(await a.waitUntilSettled(timeout: 60) == .connected)
        #expect(await b.waitUntilSettled(timeout: 60) == .connected)
        #expect(a.signalingState == .stable && b.signalingState == .stable)
        toneA.start()
        toneB.start()
        #expect(a.remoteDescription?.media.map(\.kind) == [.audio])
        let first = try #require(a.localDescription)

        // 1. a adds video (b's video track exists but has no section yet) and offers again.
        let videoA = try a.addVideoTrack(codec: .vp9)
        let videoB = try b.addVideoTrack(codec: .vp8)
        let feedA = PeerConnectionFeeder(video: videoA, audio: nil, width: Self.width, height: Self.height, tone: 0)
        let feedB = PeerConnectionFeeder(
            video: videoB, audio: nil, width: Self.width, height: Self.height, tone: 0, frameOffset: 10_000)
        defer { feedA.stop(); feedB.stop() }
        feedA.start()
        feedB.start()
        let offer1 = try await a.createOffer()
        #expect(offer1.media.map(\.kind) == [.audio, .video])
        #expect(
            offer1.origin.sessionID == first.origin.sessionID && offer1.origin.sessionVersion == first.origin.sessionVersion + 1)
        try await b.setRemoteDescription(try JSEPSessionDescription(parsing: offer1.sdp, type: .offer))
        #expect(b.signalingState == .haveRemoteOffer)
        let answer1 = try await b.createAnswer()
        #expect(answer1.media[1].direction == .sendrecv, "b's own video track takes the new section")
        try await a.setRemoteDescription(try JSEPSessionDescription(parsing: answer1.sdp, type: .answer))
        #expect(a.state == .connected && b.state == .connected)
        #expect(
            await waitFor(timeout: 30) { Self.frames(pb) >= 60 && Self.frames(pa) >= 60 },
            "\(Self.frames(pb)) a→b, \(Self.frames(pa)) b→a")
        let v1b = pb.video.withLock { $0 }, v1a = pa.video.withLock { $0 }
        #expect(v1b.indexMax < 10_000 && v1b.psnrMean >= 30, "a→b VP9: \(v1b)")
        #expect(v1a.indexMin >= 10_000 && v1a.psnrMean >= 30, "b→a VP8: \(v1a)")

        // Refused: a new certificate in b's offer; nothing changes. (New ICE credentials are an
        // ICE restart, taken: `RTCLoopbackCallTests`, `PeerConnectionChromiumTests`.)
        let kept = try await b.createOffer()
        var recertified = kept
        for i in recertified.media.indices {
            recertified.media[i].fingerprints = recertified.media[i].fingerprints.map { f in
                var f = f
                f.bytes[0] ^= 0xFF
                return f
            }
        }
        await #expect(throws: PeerConnectionError.invalidDescription("the DTLS fingerprint changed within the connection")) {
            try await a.setRemoteDescription(recertified)
        }
        #expect(a.signalingState == .stable && a.state == .connected)

        // 2. b (the first answerer) removes its video and completes its own offer.
        try b.removeTrack(videoB)
        #expect(throws: PeerConnectionError.self) { try b.removeTrack(videoB) }
        try await a.setRemoteDescription(try JSEPSessionDescription(parsing: kept.sdp, type: .offer))
        // b's offer was made before the removal, so it still sends video: a second round after.
        let answer2 = try await a.createAnswer()
        try await b.setRemoteDescription(try JSEPSessionDescription(parsing: answer2.sdp, type: .answer))
        let offer3 = try await b.createOffer()
        #expect(offer3.media[1].direction == .recvonly && offer3.media[1].mediaStreamIDs.isEmpty, "\(offer3.sdp)")
        try await a.setRemoteDescription(try JSEPSessionDescription(parsing: offer3.sdp, type: .offer))
        let answer3 = try await a.createAnswer()
        #expect(answer3.media[1].direction == .sendonly)
        try await b.setRemoteDescription(try JSEPSessionDescription(parsing: answer3.sdp, type: .answer))
        try? await Task.sleep(nanoseconds: 500_000_000)
        let stoppedAtA = Self.frames(pa), flowingAtB = Self.frames(pb)
        try? await Task.sleep(nanoseconds: 2_000_000_000)
        #expect(Self.frames(pa) == stoppedAtA, "b removed its video: a decoded \(Self.frames(pa) - stoppedAtA) more")
        #expect(Self.frames(pb) >= flowingAtB + 30, "a's video to b goes on: \(Self.frames(pb) - flowingAtB) more")

        // 3. a removes its video too: the section stays, inactive; no video either way.
        try a.removeTrack(videoA)
        let offer4 = try await a.createOffer()
        #expect(offer4.media.count == 2 && offer4.media[1].direction == .recvonly && !offer4.media[1].isRejected)
        try await b.setRemoteDescription(try JSEPSessionDescription(parsing: offer4.sdp, type: .offer))
        let answer4 = try await b.createAnswer()
        #expect(answer4.media[1].direction == .inactive)
        try await a.setRemoteDescription(try JSEPSessionDescription(parsing: answer4.sdp, type: .answer))
        try? await Task.sleep(nanoseconds: 500_000_000)
        let stoppedAtB = Self.frames(pb)
        try? await Task.sleep(nanoseconds: 1_500_000_000)
        #expect(Self.frames(pb) == stoppedAtB)

        // 4. b stops the video section altogether (port 0, as a browser's `transceiver.stop()`
        // does): it stays rejected, and a's next offer makes no new section for its removed track.
        var stop = try await b.createOffer()
        stop.media[1] = JSEPNegotiator.rejected(stop.media[1])
        stop.bundle.removeAll { $0 == stop.media[1].mid }
        try await a.setRemoteDescription(stop)
        let answer5 = try await a.createAnswer()
        #expect(answer5.media.count == 2 && answer5.media[1].isRejected)
        try await b.setRemoteDescription(answer5)
        let offer6 = try await a.createOffer()
        #expect(offer6.media.count == 2 && offer6.media[1].isRejected, "\(offer6.sdp)")
        try await b.setRemoteDescription(try JSEPSessionDescription(parsing: offer6.sdp, type: .offer))
        try await a.setRemoteDescription(try JSEPSessionDescription(parsing: (try await b.createAnswer()).sdp, type: .answer))
        #expect(a.signalingState == .stable && b.signalingState == .stable)

        // The tones played on through every exchange, at pitch, both ways.
        toneA.stop()
        toneB.stop()
        for (name, probe, tone) in [("a→b", pb, 440.0), ("b→a", pa, 660.0)] {
            let au = probe.audio.withLock { $0 }
            print(
                "PeerConnectionTests renegotiation \(name): audio \(au.samples) samples, RMS \(au.rms), \(au.crossingsPerSecond) crossings/s"
            )
            #expect(au.rms > 0.2 && au.rms < 0.5, "\(name): RMS \(au.rms)")
            #expect(abs(au.crossingsPerSecond - 2 * tone) < 0.05 * 2 * tone, "\(name): \(au.crossingsPerSecond) crossings/s")
        }
        #expect(a.state == .connected && b.state == .connected)
        print("PeerConnectionTests renegotiation video: a→b \(pb.video.withLock { $0 }), b→a \(pa.video.withLock { $0 })")
    }

    /// DTLS and media over TURN: both connections take only relayed candidates from a real
    /// coturn, so the handshake, SRTP media and RTCP all travel through the relay (ChannelData).
    /// Both select a relayed pair, connect with AES-GCM, and exchange VP8 and Opus both ways,
    /// checked as on the direct path.
    @Test func dtlsAndMediaThroughACoturnRelay() async throws {
        let server = try CoturnServer()
        defer { _ = server.stop() }
        try server.waitUntilReady()
        var c = Self.configuration()
        c.iceServers = [
            ICEServer(kind: .turn, address: server.address, username: CoturnServer.user, password: CoturnServer.password)
        ]
        c.relayOnly = true
        let a = try Side(tone: 440, configuration: c), b = try Side(tone: 660, configuration: c)
        defer { a.connection.close(); b.connection.close() }
        try await Self.connect(a, b)
        for side in [a, b] {
            let offered = side.connection.localDescription?.media.first?.candidates.map(\.type) ?? []
            #expect(!offered.isEmpty && offered.allSatisfy { $0 == "relay" }, "candidates \(offered)")
            #expect(side.connection.agent?.selectedPair?.local.type == .relay)
            #expect(side.connection.agent?.path.route?.isRelayed == true)
        }
        #expect(a.connection.srtpSuite == .aeadAES128GCM)
        await Self.exchangeMedia(a, b, frames: 90, label: "TURN")
    }
}
