// A PeerConnection against aiortc (scripts/webrtc/aiortc_peer.py in .venv-interop) with real media
// both ways: aiortc sends the test pattern from a Y4M file this test writes and a 440 Hz tone,
// Revue decodes them (frame count, PSNR against the pattern, tone level and pitch); Revue sends
// the pattern and a 660 Hz tone, aiortc decodes them and writes the frames to a Y4M file this
// test reads back (frame count, PSNR) and reports the tone it heard. Once with aiortc offering,
// once with Revue offering and only AES_CM_128_HMAC_SHA1_80 allowed in DTLS.
import Foundation
import MediaCore
import Synchronization
import Testing

@Suite(.serialized)
struct PeerConnectionInteropTests {
    static let width = 320, height = 240
    static let loopFrames = 90

    static func startAiortc() throws -> JSONLinePeer {
        let python = JSEPInteropTests.root + "/.venv-interop/bin/python3"
        return try JSONLinePeer(
            name: "aiortc", executable: python, arguments: [JSEPInteropTests.root + "/scripts/webrtc/aiortc_peer.py"])
    }

    static func configuration(profiles: [SRTPSuite]) -> PeerConnectionConfiguration {
        var c = PeerConnectionConfiguration()
        // aiortc offers its interface addresses, not loopback: ours must be reachable from them.
        c.bindAddress = .anyIPv4(port: 0)
        c.videoWidth = width
        c.videoHeight = height
        c.videoBitrate = 800_000
        c.srtpProfiles = profiles
        return c
    }

    @Test func aiortcOffersAndRevueAnswers() async throws {
        try await exchange(revueOffers: false, profiles: [.aeadAES128GCM, .aesCM128HMACSHA1_80])
    }

    @Test func revueOffersAndAiortcAnswersWithAESCM() async throws {
        try await exchange(revueOffers: true, profiles: [.aesCM128HMACSHA1_80])
    }

    func exchange(revueOffers: Bool, profiles: [SRTPSuite]) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-pc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("aiortc-sends.y4m").path
        let output = dir.appendingPathComponent("aiortc-received.y4m").path
        try PeerConnectionY4M.writePattern(to: input, count: Self.loopFrames, width: Self.width, height: Self.height)

        let peer = try Self.startAiortc()
        defer { peer.stop() }
        let connection = try PeerConnection(configuration: Self.configuration(profiles: profiles))
        defer { connection.close() }
        let video = try connection.addVideoTrack()
        let audio = try connection.addAudioTrack()
        let probe = PeerConnectionProbe(loop: Self.loopFrames)
        connection.videoRenderer = probe
        connection.audioSink = probe
        let feeder = PeerConnectionFeeder(video: video, audio: audio, width: Self.width, height: Self.height, tone: 660)

        let media = ["y4m": input, "tone": "440", "out_y4m": output, "max_frames": "400"]
        try await negotiateMedia(connection, with: peer, media: media, revueOffers: revueOffers)
        let state = await connection.waitUntilSettled(timeout: 60)
        let peerState = (try? peer.call(["op": "stats"]))?["state"] ?? "?"
        try #require(
            state == .connected, "Revue \(state): \(connection.error.map { "\($0)" } ?? "no error"); aiortc \(peerState)")
        if profiles == [.aesCM128HMACSHA1_80] { #expect(connection.srtpSuite == .aesCM128HMACSHA1_80) }

        feeder.start()
        // About 8 s of media each way.
        _ = await waitFor(timeout: 90) { feeder.framesFed.load(ordering: .relaxed) >= 240 }
        feeder.stop()
        // Frames Revue encoded and sent (a loaded machine may drop captures before the encoder).
        let fed = Int(connection.videoSendStatistics?.outbound.framesEncoded ?? 0)
        #expect(
            fed >= feeder.framesFed.load(ordering: .relaxed) / 2,
            "encoded \(fed) of \(feeder.framesFed.load(ordering: .relaxed)) frames")
        var stats = try peer.call(["op": "stats"])
        let sentBeforeDrain = Int(stats["frames_sent"] ?? "") ?? 0
        // Wait for the last frames in flight both ways.
        _ = await waitFor(timeout: 20) {
            let s = (try? peer.call(["op": "stats"])) ?? [:]
            return (Int(s["frames_received"] ?? "") ?? 0) >= fed * 95 / 100
                && probe.video.withLock { $0.frames } >= sentBeforeDrain * 95 / 100
        }
        try? await Task.sleep(nanoseconds: 500_000_000)
        // aiortc keeps sending while we wait: compare with its count now (a few frames in flight
        // fit in the 10 % margin).
        let v = probe.video.withLock { $0 }, au = probe.audio.withLock { $0 }
        stats = try peer.call(["op": "stats"])
        let sentByAiortc = Int(stats["frames_sent"] ?? "") ?? 0
        print(
            "PeerConnectionInteropTests aiortc→Revue (\(connection.srtpSuite.map { "\($0)" } ?? "?")): \(v.frames)/\(sentByAiortc) frames, PSNR mean \(v.psnrMean) min \(v.psnrMin), RMS \(au.rms), \(au.crossingsPerSecond) crossings/s"
        )

        // aiortc → Revue.
        #expect(sentByAiortc >= 200, "aiortc sent \(sentByAiortc) frames")
        #expect(v.frames >= sentByAiortc * 9 / 10, "Revue decoded \(v.frames) of aiortc's \(sentByAiortc) frames")
        #expect(v.identified >= v.frames * 9 / 10, "\(v.identified) of \(v.frames) frames identified")
        #expect(v.psnrMean >= 30, "aiortc→Revue mean PSNR \(v.psnrMean) dB (min \(v.psnrMin))")
        #expect(
            au.samples >= 48_000 * 3 && au.rms > 0.2 && au.rms < 0.5, "aiortc→Revue audio: \(au.samples) samples, RMS \(au.rms)")
        #expect(abs(au.crossingsPerSecond - 880) < 44, "aiortc→Revue tone: \(au.crossingsPerSecond) crossings/s")

        // Revue → aiortc.
        let received = Int(stats["frames_received"] ?? "") ?? 0
        #expect(received >= fed * 9 / 10, "aiortc decoded \(received) of Revue's \(fed) frames; \(stats)")
        var frames = 0, identified = 0, psnrSum = 0.0
        let reference = VideoFrame(width: Self.width, height: Self.height)
        try PeerConnectionY4M.forEachFrame(in: output) { view in
            frames += 1
            guard view.width == Self.width, view.height == Self.height, let index = SyntheticVideo.frameIndex(in: view) else {
                return
            }
            identified += 1
            SyntheticVideo.render(frameIndex: index, into: reference)
            psnrSum += Quality.psnr(view, reference.view)
        }
        let psnr = identified > 0 ? psnrSum / Double(identified) : 0
        print(
            "PeerConnectionInteropTests Revue→aiortc: \(received)/\(fed) frames, \(identified) of \(frames) written frames identified, PSNR mean \(psnr); \(stats)"
        )
        #expect(frames > 0 && identified >= frames * 9 / 10, "\(identified) of \(frames) frames aiortc wrote identified")
        #expect(psnr >= 30, "Revue→aiortc mean PSNR \(psnr) dB")
        let rms = Double(stats["audio_rms"] ?? "") ?? 0, crossings = Double(stats["audio_crossings_per_second"] ?? "") ?? 0
        #expect(rms > 0.2 && rms < 0.5, "Revue→aiortc audio RMS \(rms)")
        #expect(abs(crossings - 1320) < 66, "Revue→aiortc tone: \(crossings) crossings/s")
        // Our RTCP reached aiortc: sender reports for both streams, and aiortc's reports back.
        #expect(stats["sender_reports_for"] == "2", "aiortc saw sender reports for \(stats["sender_reports_for"] ?? "?") streams")
        #expect((connection.receiveStatistics?.senderReportsReceived ?? 0) > 0)
    }
}
