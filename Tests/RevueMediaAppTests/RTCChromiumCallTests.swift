// An RTCPeerConnection against headless Chromium (scripts/webrtc/chromium_peer.py driving
// chromium_page.html) through the public API only: Revue offers VP9 and Opus with
// addTransceiver, Chromium answers with its fake camera and microphone. Chromium must decode
// nearly every frame Revue encoded (its own getStats) and hear the tone; Revue must decode
// nearly every frame Chromium sent (pictures that move: Chromium's fake camera is not the
// pattern, so no PSNR), and its getStats must agree with both counts and show Chromium's
// receiver reports. Real time against a real browser: runs in lane 2 (scripts/test).
import Foundation
import RevueMedia
import Synchronization
import Testing

/// Counts decoded frames, the ones that are a picture (luma spans more than 40 levels) and the
/// ones that differ from the frame before (mean absolute luma difference above 0.5).
final class MotionProbe: VideoRenderer, @unchecked Sendable {
    // Sendable: `previous` is used only by `render`, on the receive thread; counts in a Mutex.
    let counts = Mutex((frames: 0, lit: 0, moved: 0, width: 0))
    var previous: [UInt8] = []

    func render(_ frame: DecodedVideoFrame) {
        frame.withView { view in
            var sample: [UInt8] = []
            view.withPlanes { y, _, _ in
                for r in stride(from: 0, to: view.height, by: 2) {
                    for c in stride(from: 0, to: view.width, by: 2) { sample.append(y[r * view.strideY + c]) }
                }
            }
            let span = Int(sample.max() ?? 0) - Int(sample.min() ?? 0)
            var moved = false
            if previous.count == sample.count, !sample.isEmpty {
                let total = zip(sample, previous).reduce(0) { $0 + abs(Int($1.0) - Int($1.1)) }
                moved = Double(total) / Double(sample.count) > 0.5
            }
            previous = sample
            counts.withLock { c in
                c.frames += 1
                c.width = view.width
                if span > 40 { c.lit += 1 }
                if moved { c.moved += 1 }
            }
        }
    }
}

@Suite(.serialized)
struct RTCChromiumCallTests {
    static let width = 320, height = 240

    /// A page function call for chromium_peer.py: `function(argument)`, awaited in the page.
    static func js(_ function: String, _ argument: String? = nil) throws -> [String: String] {
        guard let argument else { return ["op": function, "js": "\(function)()"] }
        let quoted = String(decoding: try JSONSerialization.data(withJSONObject: [argument]), as: UTF8.self)
        return ["op": function, "js": "\(function)(...\(quoted))"]
    }

    /// The page's `mediaStats()`.
    static func pageStats(_ peer: JSONLineProcess) throws -> [String: Any] {
        guard let text = try peer.call(try js("mediaStats"))["sdp"],
            let stats = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        else { throw JSONLineProcess.Failure(description: "mediaStats() gave no statistics") }
        return stats
    }

    static func number(_ stats: [String: Any], _ key: String) -> Double { (stats[key] as? NSNumber)?.doubleValue ?? 0 }

    @Test func revueOffersVP9AndChromiumAnswersThroughThePublicAPI() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium") else {
            throw JSONLineProcess.Failure(description: "chromium is not installed: run scripts/install-deps")
        }
        let profile = FileManager.default.temporaryDirectory.appendingPathComponent("revue-app-chromium-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: profile, withIntermediateDirectories: true)
        defer {
            try? FileManager.default.removeItem(at: profile)
            try? FileManager.default.removeItem(atPath: profile.path + "/profile.log")
        }
        let scripts = packageRoot + "/scripts/webrtc"
        let peer = try JSONLineProcess(
            name: "chromium", executable: "/usr/bin/python3",
            arguments: [scripts + "/chromium_peer.py", profile.path + "/profile", scripts + "/chromium_page.html"])
        defer { peer.stop() }

        var configuration = RTCConfiguration()
        // Chromium offers its interface addresses, not loopback: ours must be reachable from them.
        configuration.localAddress = "0.0.0.0"
        configuration.videoWidth = Self.width
        configuration.videoHeight = Self.height
        configuration.videoBitrate = 800_000
        let pc = try RTCPeerConnection(configuration: configuration)
        defer { pc.close() }
        let video = try pc.addTransceiver(.video, direction: .sendrecv, videoCodec: .vp9)
        let audio = try pc.addTransceiver(.audio, direction: .sendrecv)
        let motion = MotionProbe(), tone = MediaProbe()
        pc.remoteVideoRenderer = motion
        pc.remoteAudioSink = tone

        try await pc.setLocalDescription()
        let offer = try #require(pc.localDescription)
        let answer = try #require(try peer.call(try Self.js("mediaAnswer", offer.sdp))["sdp"])
        try await pc.setRemoteDescription(RTCSessionDescription(type: .answer, sdp: answer))
        let connected = await waitFor(timeout: 40) { pc.connectionState == .connected || pc.connectionState == .failed }
        try #require(
            connected && pc.connectionState == .connected,
            "Revue \(pc.connectionState) \(pc.error.map { "\($0)" } ?? ""); Chromium \((try? Self.pageStats(peer))?["connection"] ?? "?")"
        )

        let feeder = PatternFeeder(
            video: video.videoCapturer, audio: audio.audioCapturer, width: Self.width, height: Self.height, tone: 660)
        feeder.start()
        _ = await waitFor(timeout: 90) {
            feeder.framesFed.load(ordering: .relaxed) >= 210
                && Self.number((try? Self.pageStats(peer)) ?? [:], "framesSent") >= 120
        }
        let playing = try Self.pageStats(peer)
        feeder.stop()
        _ = try peer.call(try Self.js("mediaStopSending"))
        try await Task.sleep(nanoseconds: 500_000_000)
        let encoded = Int(
            (await pc.getStats()).records(ofType: .outboundRTP).first { $0.string("kind") == "video" }?.int("framesEncoded") ?? 0)
        let sentByChromium = Int(Self.number(try Self.pageStats(peer), "framesSent"))
        _ = await waitFor(timeout: 20) {
            let s = (try? Self.pageStats(peer)) ?? [:]
            return Int(Self.number(s, "framesDecoded")) >= encoded * 95 / 100
                && motion.counts.withLock { $0.frames } >= sentByChromium * 9 / 10
        }
        try await Task.sleep(nanoseconds: 500_000_000)
        let page = try Self.pageStats(peer)
        let m = motion.counts.withLock { $0 }
        let stats = await pc.getStats()
        let inVideo = try #require(stats.records(ofType: .inboundRTP).first { $0.string("kind") == "video" })
        let inAudio = try #require(stats.records(ofType: .inboundRTP).first { $0.string("kind") == "audio" })
        let rtts = stats.records(ofType: .remoteInboundRTP).filter { ($0.int("roundTripTimeMeasurements") ?? 0) > 0 }
        let decodedByChromium = Int(Self.number(page, "framesDecoded"))
        let played = tone.audio.withLock { $0.samplesSeen }
        print(
            "RTCChromiumCallTests Revue→Chromium \(decodedByChromium)/\(encoded) frames decoded as \(page["receivedCodec"] ?? "?"), audioLevel \(Self.number(playing, "audioLevel")); Chromium→Revue \(m.frames)/\(sentByChromium) frames \(m.width) wide, \(m.lit) lit, \(m.moved) moved, inbound-rtp framesDecoded \(inVideo.int("framesDecoded") ?? -1) packetsReceived \(inVideo.int("packetsReceived") ?? -1) packetsLost \(inVideo.int("packetsLost") ?? -1), audio packetsReceived \(inAudio.int("packetsReceived") ?? -1), \(played) samples played; round trip \(rtts.compactMap { $0.double("roundTripTime") }) s"
        )
        // Revue → Chromium.
        #expect(encoded >= 105, "encoded \(encoded) frames")
        #expect(page["receivedCodec"] as? String == "video/VP9", "\(page)")
        #expect(decodedByChromium >= encoded * 95 / 100, "Chromium decoded \(decodedByChromium) of \(encoded); \(page)")
        #expect(Self.number(playing, "audioLevel") > 0, "Chromium's audioLevel while the tone played: \(playing)")
        // Chromium → Revue.
        #expect(sentByChromium >= 120, "Chromium sent \(sentByChromium) frames")
        #expect(m.frames >= sentByChromium * 9 / 10, "Revue decoded \(m.frames) of Chromium's \(sentByChromium)")
        #expect(m.lit >= m.frames * 9 / 10 && m.moved >= m.frames / 2, "\(m.lit) lit and \(m.moved) moved of \(m.frames)")
        let decoded = inVideo.int("framesDecoded") ?? 0
        #expect(decoded >= Int64(m.frames) && decoded <= Int64(m.frames) + 10, "framesDecoded \(decoded), rendered \(m.frames)")
        #expect(inVideo.int("frameWidth") == Int64(m.width) && (inVideo.int("packetsReceived") ?? 0) >= decoded)
        #expect((inAudio.int("packetsReceived") ?? 0) >= 100 && played >= 48_000)
        #expect(!rtts.isEmpty, "no receiver report from Chromium measured a round trip")
    }
}
