// An RTCPeerConnection against aiortc (scripts/webrtc/aiortc_peer.py in .venv-interop), through
// the public API only: aiortc offers (video from a Y4M file of the test pattern this test writes,
// a 440 Hz tone), Revue answers and sends the pattern and a 660 Hz tone back. Each side's
// decoded video is compared with the pattern (PSNR), each side's tone measured, and Revue's
// getStats() checked against what it decoded and against aiortc's counts. Real time against a
// real peer: runs in an e2e lane (scripts/test).
import Foundation
import RevueMedia
import Synchronization
import Testing

@Suite(.serialized)
struct RTCAiortcCallTests {
    static let width = 320, height = 240, loopFrames = 90

    @Test func aiortcOffersAndRevueAnswersThroughThePublicAPI() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-app-aiortc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let input = dir.appendingPathComponent("aiortc-sends.y4m").path
        let output = dir.appendingPathComponent("aiortc-received.y4m").path
        let writer = try Y4MWriter(path: input, width: Self.width, height: Self.height, frameRate: ContainerRational(30, 1))
        let pattern = VideoFrame(width: Self.width, height: Self.height)
        for n in 0..<Self.loopFrames {
            SyntheticVideo.render(frameIndex: n, into: pattern)
            try pattern.withView { view throws(ContainerError) in try writer.write(view) }
        }
        try writer.finish()

        let peer = try JSONLineProcess(
            name: "aiortc", executable: packageRoot + "/.venv-interop/bin/python3",
            arguments: [packageRoot + "/scripts/webrtc/aiortc_peer.py"])
        defer { peer.stop() }

        var configuration = RTCConfiguration()
        // aiortc offers its interface addresses, not loopback: ours must be reachable from them.
        configuration.localAddress = "0.0.0.0"
        configuration.videoWidth = Self.width
        configuration.videoHeight = Self.height
        configuration.videoBitrate = 800_000
        let pc = try RTCPeerConnection(configuration: configuration)
        defer { pc.close() }
        let log = EventLog()
        log.attach(to: pc)
        let probe = MediaProbe(loop: Self.loopFrames)
        pc.remoteVideoRenderer = probe
        pc.remoteAudioSink = probe

        let offer = try #require(
            try peer.call(["op": "media-offer", "y4m": input, "tone": "440", "out_y4m": output, "max_frames": "400"])["sdp"])
        try await pc.setRemoteDescription(RTCSessionDescription(type: .offer, sdp: offer))
        // The offer's sections take our tracks (added after the offer, as an answering app does).
        let video = try pc.addTrack(.video), audio = try pc.addTrack(.audio)
        let answer = try await pc.createAnswer()
        try await pc.setLocalDescription(answer)
        _ = try peer.call(["op": "remote-answer", "sdp": answer.sdp])
        let connected = await waitFor(timeout: 40) { pc.connectionState == .connected || pc.connectionState == .failed }
        let aiortcState = (try? peer.call(["op": "stats"]))?["state"] ?? "?"
        try #require(
            connected && pc.connectionState == .connected,
            "Revue \(pc.connectionState) \(pc.error.map { "\($0)" } ?? ""); aiortc \(aiortcState)")
        #expect(log.values("track").sorted() == ["audio", "video"])

        let feeder = PatternFeeder(
            video: video.videoCapturer, audio: audio.audioCapturer, width: Self.width, height: Self.height, tone: 660)
        feeder.start()
        _ = await waitFor(timeout: 60) { feeder.framesFed.load(ordering: .relaxed) >= 180 }
        feeder.stop()
        try await Task.sleep(nanoseconds: 1_500_000_000)
        let aiortc = try peer.call(["op": "stats"])
        // aiortc keeps sending, and the receive statistics are a snapshot the engine publishes as
        // it goes: the counts may differ by the frames of a moment.
        let v = probe.video.withLock { $0 }, au = probe.audio.withLock { $0 }
        let stats = await pc.getStats()

        // aiortc → Revue.
        let sentByAiortc = Int(aiortc["frames_sent"] ?? "") ?? 0
        let inVideo = try #require(stats.records(ofType: .inboundRTP).first { $0.string("kind") == "video" })
        let inAudio = try #require(stats.records(ofType: .inboundRTP).first { $0.string("kind") == "audio" })
        print(
            "RTCAiortcCallTests aiortc→Revue: \(v.frames)/\(sentByAiortc) frames, PSNR mean \(v.psnrMean) min \(v.psnrMin) dB, audio RMS \(au.rms), \(au.crossingsPerSecond) crossings/s; inbound-rtp video packetsReceived \(inVideo.int("packetsReceived") ?? -1) framesDecoded \(inVideo.int("framesDecoded") ?? -1) packetsLost \(inVideo.int("packetsLost") ?? -1) jitter \(inVideo.double("jitter") ?? -1) s, audio packetsReceived \(inAudio.int("packetsReceived") ?? -1)"
        )
        #expect(sentByAiortc >= 150, "aiortc sent \(sentByAiortc) frames")
        #expect(v.frames >= sentByAiortc * 8 / 10, "Revue decoded \(v.frames) of aiortc's \(sentByAiortc) frames")
        #expect(v.identified >= v.frames * 9 / 10 && v.psnrMean >= 30, "aiortc→Revue PSNR \(v.psnrMean) dB")
        #expect(au.rms > 0.2 && au.rms < 0.5, "aiortc→Revue audio RMS \(au.rms)")
        #expect(abs(au.crossingsPerSecond - 880) < 44, "aiortc→Revue tone: \(au.crossingsPerSecond) crossings/s")
        let decoded = inVideo.int("framesDecoded") ?? 0
        #expect(abs(decoded - Int64(v.frames)) <= 10, "framesDecoded \(decoded), rendered \(v.frames)")
        #expect((inVideo.int("packetsReceived") ?? 0) > Int64(v.frames), "a frame is at least a packet")
        #expect((inAudio.int("packetsReceived") ?? 0) >= 150)
        #expect((inVideo.double("jitter") ?? -1) >= 0 && (inVideo.double("jitter") ?? 1) < 0.2)

        // Revue → aiortc.
        let outVideo = try #require(stats.records(ofType: .outboundRTP).first { $0.string("kind") == "video" })
        let encoded = Int(outVideo.int("framesEncoded") ?? 0)
        let receivedByAiortc = Int(aiortc["frames_received"] ?? "") ?? 0
        var written = 0, identified = 0, psnrSum = 0.0
        let reader = try Y4MReader(path: output)
        let frame = reader.makeFrame()
        let reference = VideoFrame(width: reader.width, height: reader.height)
        while try reader.readFrame(into: frame) {
            written += 1
            guard let index = frame.withView({ SyntheticVideo.frameIndex(in: $0) }) else { continue }
            identified += 1
            SyntheticVideo.render(frameIndex: index, into: reference)
            psnrSum += frame.withView { f in reference.withView { Quality.psnr(f, $0) } }
        }
        let psnr = identified > 0 ? psnrSum / Double(identified) : 0
        let rms = Double(aiortc["audio_rms"] ?? "") ?? 0, crossings = Double(aiortc["audio_crossings_per_second"] ?? "") ?? 0
        print(
            "RTCAiortcCallTests Revue→aiortc: \(receivedByAiortc)/\(encoded) frames, \(identified) of \(written) written frames identified, PSNR mean \(psnr) dB, audio RMS \(rms), \(crossings) crossings/s; outbound-rtp video packetsSent \(outVideo.int("packetsSent") ?? -1)"
        )
        #expect(encoded >= 90, "encoded \(encoded) frames")
        #expect(receivedByAiortc >= encoded * 8 / 10, "aiortc decoded \(receivedByAiortc) of \(encoded) frames")
        #expect(written > 0 && identified >= written * 9 / 10 && psnr >= 30, "Revue→aiortc PSNR \(psnr) dB")
        #expect(rms > 0.2 && rms < 0.5, "Revue→aiortc audio RMS \(rms)")
        #expect(abs(crossings - 1320) < 66, "Revue→aiortc tone: \(crossings) crossings/s")
        // aiortc's receiver reports gave a round trip, and our sender reports reached it.
        let rtts = stats.records(ofType: .remoteInboundRTP).filter { ($0.int("roundTripTimeMeasurements") ?? 0) > 0 }
        #expect(!rtts.isEmpty, "no receiver report from aiortc measured a round trip")
        #expect(
            aiortc["sender_reports_for"] == "2", "aiortc saw sender reports for \(aiortc["sender_reports_for"] ?? "?") streams")
        let pairID = try #require(stats["T01"]?.string("selectedCandidatePairId"))
        #expect((stats[pairID]?.int("bytesReceived") ?? 0) > 100_000)
    }
}
