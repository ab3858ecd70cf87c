// Two PeerConnections on loopback: offer and answer as SDP text, ICE, DTLS-SRTP, then VP8 video
// and Opus audio both ways, checked against what was sent (pattern PSNR, tone level and pitch);
// and a tampered fingerprint, which must end the connection with a typed error and no media.
import Foundation
import Synchronization
import Testing

@testable import MediaCore

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

    /// VP8 both ways, or VP9 from the offerer and VP8 back.
    @Test(arguments: [VPXCodec.vp8, .vp9])
    func swiftPeersExchangeVideoAndAudioBothWays(codec: VPXCodec) async throws {
        let a = try Side(tone: 440, codec: codec), b = try Side(tone: 660)
        defer { a.connection.close(); b.connection.close() }
        try await Self.negotiate(a.connection, b.connection)
        let stateA = await a.connection.waitUntilSettled(timeout: 60)
        let stateB = await b.connection.waitUntilSettled(timeout: 60)
        try #require(
            stateA == .connected && stateB == .connected,
            "a \(stateA) \(a.connection.error.map { "\($0)" } ?? ""), b \(stateB) \(b.connection.error.map { "\($0)" } ?? "")")
        #expect(a.connection.srtpSuite == .aeadAES128GCM)
        a.feeder.start()
        b.feeder.start()
        // About 6 s of media each way (180 frames); then the last frames drain.
        _ = await waitFor(timeout: 60) {
            a.feeder.framesFed.load(ordering: .relaxed) >= 180 && b.feeder.framesFed.load(ordering: .relaxed) >= 180
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
                "PeerConnectionTests \(codec) \(name): \(v.frames)/\(fed) frames, PSNR mean \(v.psnrMean) min \(v.psnrMin), audio RMS \(au.rms), \(au.crossingsPerSecond) crossings/s"
            )
            #expect(v.frames >= fed * 9 / 10, "\(name): \(v.frames) of \(fed) frames decoded")
            #expect(v.identified >= v.frames * 9 / 10, "\(name): \(v.identified) of \(v.frames) frames identified")
            #expect(v.psnrMean >= 30, "\(name): mean PSNR \(v.psnrMean) dB (min \(v.psnrMin))")
            // A 0.5 peak sine has RMS 0.354; two zero crossings per period.
            #expect(au.samples >= 48_000 * 3, "\(name): \(au.samples) samples played")
            #expect(au.rms > 0.2 && au.rms < 0.5, "\(name): RMS \(au.rms)")
            #expect(abs(au.crossingsPerSecond - 2 * tone) < 0.05 * 2 * tone, "\(name): \(au.crossingsPerSecond) crossings/s")
        }
        // Each side's sender reports reached the other.
        #expect((a.connection.receiveStatistics?.senderReportsReceived ?? 0) > 0)
        #expect((b.connection.receiveStatistics?.senderReportsReceived ?? 0) > 0)
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
    }

    @Test func callsOutOfOrderAreRefused() async throws {
        let a = try PeerConnection(configuration: Self.configuration())
        let b = try PeerConnection(configuration: Self.configuration())
        defer { a.close(); b.close() }
        _ = try a.addAudioTrack()
        await #expect(throws: PeerConnectionError.self) { _ = try await a.createAnswer() }
        let offer = try await a.createOffer()
        #expect(throws: PeerConnectionError.self) { _ = try a.addVideoTrack() }
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
}
