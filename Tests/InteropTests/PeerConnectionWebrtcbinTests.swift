// A PeerConnection against GStreamer's webrtcbin (scripts/webrtc/webrtcbin_peer.py, system python3
// with PyGObject) with real media both ways: webrtcbin sends the test pattern from a Y4M file this
// test writes (VP8 or VP9 by GStreamer's own encoders) and a 440 Hz tone; Revue decodes them
// (frames against what webrtcbin sent once connected, PSNR against the pattern, tone level and
// pitch). Revue sends its pattern and a 660 Hz tone; webrtcbin decodes them with decodebin, writes
// the frames to a Y4M file this test reads back (count, PSNR) and measures the tone. Once with
// webrtcbin offering VP8, once with Revue offering VP9 and webrtcbin answering.
import Foundation
import MediaCore
import Synchronization
import Testing

@Suite(.serialized)
struct PeerConnectionWebrtcbinTests {
    static let width = 320, height = 240
    /// Frames in webrtcbin's file: 12 s at 30 fps, more than the set-up and 8 s of media take.
    static let fileFrames = 360

    @Test func webrtcbinOffersVP8AndRevueAnswers() async throws {
        try await exchange(revueOffers: false, codec: .vp8)
    }

    @Test func revueOffersVP9AndWebrtcbinAnswers() async throws {
        try await exchange(revueOffers: true, codec: .vp9)
    }

    func exchange(revueOffers: Bool, codec: VPXCodec) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-pc-gst-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("webrtcbin-sends.y4m").path
        let output = dir.appendingPathComponent("webrtcbin-received.y4m").path
        try PeerConnectionY4M.writePattern(to: input, count: Self.fileFrames, width: Self.width, height: Self.height)

        let peer = try JSONLinePeer(
            name: "webrtcbin", executable: "/usr/bin/python3",
            arguments: [JSEPInteropTests.root + "/scripts/webrtc/webrtcbin_peer.py"])
        defer { peer.stop() }
        var configuration = PeerConnectionInteropTests.configuration(profiles: [.aeadAES128GCM, .aesCM128HMACSHA1_80])
        configuration.videoWidth = Self.width
        configuration.videoHeight = Self.height
        let connection = try PeerConnection(configuration: configuration)
        defer { connection.close() }
        let video = try connection.addVideoTrack(codec: codec)
        let audio = try connection.addAudioTrack()
        let probe = PeerConnectionProbe()
        connection.videoRenderer = probe
        connection.audioSink = probe
        let feeder = PeerConnectionFeeder(video: video, audio: audio, width: Self.width, height: Self.height, tone: 660)

        let codecName = codec == .vp8 ? "VP8" : "VP9"
        let media = ["y4m": input, "tone": "440", "codec": codecName, "out_y4m": output, "max_frames": "400"]
        try await negotiateMedia(connection, with: peer, media: media, revueOffers: revueOffers)
        let state = await connection.waitUntilSettled(timeout: 60)
        try #require(
            state == .connected,
            "Revue \(state): \(connection.error.map { "\($0)" } ?? "no error"); webrtcbin \((try? peer.call(["op": "stats"]))?["state"] ?? "?")"
        )

        feeder.start()
        // webrtcbin encodes from the moment its pipeline plays, and what it encoded before both
        // ends had their keys had nowhere to go: its frames are counted from the first one we
        // decode.
        _ = await waitFor(timeout: 10) { probe.video.withLock { $0.frames } > 0 }
        let sentBeforeFirstFrame = Int((try? peer.call(["op": "stats"]))?["frames_sent"] ?? "") ?? 0
        let decodedBeforeFirstFrame = probe.video.withLock { $0.frames }
        // About 8 s of media each way.
        _ = await waitFor(timeout: 90) { feeder.framesFed.load(ordering: .relaxed) >= 240 }
        feeder.stop()
        let fed = Int(connection.videoSendStatistics?.outbound.framesEncoded ?? 0)
        #expect(
            fed >= feeder.framesFed.load(ordering: .relaxed) / 2,
            "encoded \(fed) of \(feeder.framesFed.load(ordering: .relaxed)) frames")
        // The last frames in flight, both ways.
        _ = await waitFor(timeout: 20) {
            let s = (try? peer.call(["op": "stats"])) ?? [:]
            return (Int(s["frames_received"] ?? "") ?? 0) >= fed * 95 / 100
        }
        try? await Task.sleep(nanoseconds: 500_000_000)
        let stats = try peer.call(["op": "stats"])
        let v = probe.video.withLock { $0 }, au = probe.audio.withLock { $0 }
        let sentByWebrtcbin = (Int(stats["frames_sent"] ?? "") ?? 0) - sentBeforeFirstFrame
        print(
            "PeerConnectionWebrtcbinTests \(codecName) webrtcbin→Revue (\(connection.srtpSuite.map { "\($0)" } ?? "?")): \(v.frames - decodedBeforeFirstFrame)/\(sentByWebrtcbin) frames after the first, PSNR mean \(v.psnrMean) min \(v.psnrMin), RMS \(au.rms), \(au.crossingsPerSecond) crossings/s; \(stats)"
        )

        // webrtcbin → Revue.
        #expect(sentByWebrtcbin >= 200, "webrtcbin sent \(sentByWebrtcbin) frames after the first we decoded")
        #expect(
            v.frames - decodedBeforeFirstFrame >= sentByWebrtcbin * 9 / 10,
            "Revue decoded \(v.frames - decodedBeforeFirstFrame) of webrtcbin's \(sentByWebrtcbin) frames after the first")
        #expect(v.identified >= v.frames * 9 / 10, "\(v.identified) of \(v.frames) frames identified")
        #expect(v.psnrMean >= 30, "webrtcbin→Revue mean PSNR \(v.psnrMean) dB (min \(v.psnrMin))")
        #expect(
            au.samples >= 48_000 * 3 && au.rms > 0.2 && au.rms < 0.5,
            "webrtcbin→Revue audio: \(au.samples) samples, RMS \(au.rms)")
        #expect(abs(au.crossingsPerSecond - 880) < 44, "webrtcbin→Revue tone: \(au.crossingsPerSecond) crossings/s")

        // Revue → webrtcbin: counted as decoded, then read back from the file it wrote (closed
        // when the peer quits).
        let received = Int(stats["frames_received"] ?? "") ?? 0
        #expect(received >= fed * 9 / 10, "webrtcbin decoded \(received) of Revue's \(fed) frames")
        let rms = Double(stats["audio_rms"] ?? "") ?? 0, crossings = Double(stats["audio_crossings_per_second"] ?? "") ?? 0
        #expect(rms > 0.2 && rms < 0.5, "Revue→webrtcbin audio RMS \(rms)")
        #expect(abs(crossings - 1320) < 66, "Revue→webrtcbin tone: \(crossings) crossings/s")
        // Our RTCP reached webrtcbin: sender reports for both streams (webrtcbin may list a
        // stream twice).
        #expect(
            (Int(stats["sender_reports_for"] ?? "") ?? 0) >= 2,
            "webrtcbin saw sender reports for \(stats["sender_reports_for"] ?? "?") streams")
        #expect((connection.receiveStatistics?.senderReportsReceived ?? 0) > 0)
        peer.stop()
        var frames = 0, identified = 0, psnrSum = 0.0
        let reference = VideoFrame(width: Self.width, height: Self.height)
        var sizes = Set<String>()
        try PeerConnectionY4M.forEachFrame(in: output) { view in
            frames += 1
            sizes.insert("\(view.width)x\(view.height)")
            guard view.width == Self.width, view.height == Self.height, let index = SyntheticVideo.frameIndex(in: view) else {
                return
            }
            identified += 1
            SyntheticVideo.render(frameIndex: index, into: reference)
            psnrSum += Quality.psnr(view, reference.view)
        }
        let psnr = identified > 0 ? psnrSum / Double(identified) : 0
        print(
            "PeerConnectionWebrtcbinTests \(codecName) Revue→webrtcbin: \(received)/\(fed) frames, \(identified) of \(frames) written frames (\(sizes.sorted().joined(separator: ", "))) identified, PSNR mean \(psnr)"
        )
        #expect(
            frames >= received * 9 / 10 && identified >= frames * 9 / 10,
            "\(identified) of \(frames) frames webrtcbin wrote identified")
        #expect(psnr >= 30, "Revue→webrtcbin mean PSNR \(psnr) dB")
    }
}
