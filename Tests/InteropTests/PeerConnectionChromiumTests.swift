// A PeerConnection against headless Chromium (scripts/webrtc/chromium_peer.py driving
// chromium_page.html) with real media both ways. Chromium sends its fake camera (a moving
// picture at 320x240) and fake microphone (beeps); Revue decodes them and counts the frames
// against Chromium's own `framesSent`, checks that they are not black and that they move, and
// that the audio is not silent. Revue sends its moving test pattern and a 660 Hz tone; Chromium's
// getStats must report `framesDecoded` for nearly every frame Revue encoded and an inbound
// `audioLevel` above zero, and a screenshot of the page's <video> element must not be black.
// Once with Chromium offering, once with Revue offering (VP8, then VP9).
// A browser that is missing or cannot start fails the test with the reason.
import Foundation
import MediaCore
import MediaTools
import Synchronization
import Testing

/// Measures what a connection receives from Chromium: frames decoded, their luma, how much
/// each differs from the one before it, and the loudest 10 ms of audio. Thread rule: `render` on
/// the decoder's thread, `play` on the playout thread, the counters from any thread. Cost: one
/// pass over a quarter of each frame's luma and over each PCM block.
final class ChromiumMediaProbe: VideoRenderer, AudioSink, @unchecked Sendable {
    /// What the video seen so far adds up to.
    struct Video {
        var frames = 0
        /// Frames that are a picture, not black: their luma spans more than 40 levels.
        var lit = 0
        /// The smallest luma span of any frame.
        var minSpan = Int.max
        /// Frames that differ from the previous one by more than 0.5 mean absolute luma.
        var moved = 0
        var lumaSum = 0.0
        var differenceSum = 0.0
        var width = 0, height = 0
        var meanLuma: Double { frames > 0 ? lumaSum / Double(frames) : 0 }
        var meanDifference: Double { frames > 1 ? differenceSum / Double(frames - 1) : 0 }
    }

    let video = Mutex(Video())
    /// The highest RMS (0...1) of any 10 ms block played, and the samples played.
    let audio = Mutex((loudest: 0.0, samples: 0))
    /// Every second luma sample of every second row of the previous frame; renderer thread only.
    nonisolated(unsafe) var previous: [UInt8] = []

    func render(_ frame: DecodedVideoFrame) {
        let view = frame.view
        var sample = [UInt8]()
        sample.reserveCapacity((view.width / 2) * (view.height / 2))
        var sum = 0, low = 255, high = 0
        for r in stride(from: 0, to: view.height, by: 2) {
            let row = view.y + r * view.strideY
            for c in stride(from: 0, to: view.width, by: 2) {
                sample.append(row[c])
                sum += Int(row[c])
                low = min(low, Int(row[c]))
                high = max(high, Int(row[c]))
            }
        }
        let luma = Double(sum) / Double(max(sample.count, 1))
        var difference: Double?
        if previous.count == sample.count, !sample.isEmpty {
            var total = 0
            for i in 0..<sample.count { total += abs(Int(sample[i]) - Int(previous[i])) }
            difference = Double(total) / Double(sample.count)
        }
        previous = sample
        video.withLock { v in
            v.frames += 1
            v.width = view.width
            v.height = view.height
            v.lumaSum += luma
            if high - low > 40 { v.lit += 1 }
            v.minSpan = min(v.minSpan, high - low)
            if let difference {
                v.differenceSum += difference
                if difference > 0.5 { v.moved += 1 }
            }
        }
    }

    func play(_ samples: Span<Int16>, sampleRate: Int, channels: Int) {
        var squares = 0.0
        for i in samples.indices { squares += Double(samples[i]) * Double(samples[i]) }
        let rms = (squares / Double(max(samples.count, 1))).squareRoot() / 32768
        audio.withLock {
            $0.loudest = max($0.loudest, rms)
            $0.samples += samples.count / max(channels, 1)
        }
    }
}

@Suite(.serialized)
struct PeerConnectionChromiumTests {
    static let width = 320, height = 240

    /// Revue's side: 320x240 video at 800 kbit/s, reachable on every IPv4 interface.
    static func configuration() -> PeerConnectionConfiguration {
        var c = PeerConnectionConfiguration()
        // Chromium offers its interface addresses, not loopback: ours must be reachable from them.
        c.bindAddress = .anyIPv4(port: 0)
        c.videoWidth = width
        c.videoHeight = height
        c.videoBitrate = 800_000
        return c
    }

    /// The page's `mediaStats()` as a dictionary.
    static func pageStats(_ peer: JSONLinePeer) throws -> [String: Any] { try peer.pageStats() }

    /// A numeric field of `mediaStats()`, 0 when absent.
    static func number(_ stats: [String: Any], _ key: String) -> Double {
        (stats[key] as? NSNumber)?.doubleValue ?? 0
    }

    @Test func chromiumOffersAndRevueAnswers() async throws {
        try await exchange(revueOffers: false, codec: .vp8)
    }

    @Test(arguments: [VPXCodec.vp8, .vp9])
    func revueOffersAndChromiumAnswers(codec: VPXCodec) async throws {
        try await exchange(revueOffers: true, codec: codec)
    }

    /// One connection with media both ways for about 8 s, then the checks on both directions.
    func exchange(revueOffers: Bool, codec: VPXCodec) async throws {
        let (peer, dir) = try JSEPInteropTests.chromium()
        defer {
            peer.stop()
            dir.remove()
        }
        let connection = try PeerConnection(configuration: Self.configuration())
        defer { connection.close() }
        let video = try connection.addVideoTrack(codec: codec)
        let audio = try connection.addAudioTrack()
        let probe = ChromiumMediaProbe()
        connection.videoRenderer = probe
        connection.audioSink = probe
        let feeder = PeerConnectionFeeder(video: video, audio: audio, width: Self.width, height: Self.height, tone: 660)

        if revueOffers {
            let offer = try await connection.createOffer()
            let answer = try #require(try peer.call(JSEPInteropTests.js("mediaAnswer", offer.sdp))["sdp"])
            try await connection.setRemoteDescription(try JSEPSessionDescription(parsing: answer, type: .answer))
        } else {
            let offer = try #require(try peer.call(JSEPInteropTests.js("mediaOffer"))["sdp"])
            try await connection.setRemoteDescription(try JSEPSessionDescription(parsing: offer, type: .offer))
            let answer = try await connection.createAnswer()
            let state = try peer.call(JSEPInteropTests.js("mediaTakeAnswer", answer.sdp))["sdp"]
            #expect(state == "stable", "Chromium applied our answer: \(state ?? "?")")
        }
        let state = await connection.waitUntilSettled(timeout: 60)
        let pageState = (try? Self.pageStats(peer))?["connection"] as? String ?? "?"
        try #require(
            state == .connected, "Revue \(state): \(connection.error.map { "\($0)" } ?? "no error"); Chromium \(pageState)")

        feeder.start()
        // About 8 s of media each way; the screenshot is taken while Revue's video plays.
        _ = await waitFor(timeout: 90) { feeder.framesFed.load(ordering: .relaxed) >= 150 }
        let shot = try peer.call([
            "op": "screenshot", "path": dir.file("revue-in-chromium.png"), "x": "0", "y": "0",
            "width": "\(Self.width)", "height": "\(Self.height)",
        ])
        // At least 240 frames from Revue and 150 from Chromium (whose camera runs at 20 fps or
        // slower on a loaded machine).
        _ = await waitFor(timeout: 90) {
            feeder.framesFed.load(ordering: .relaxed) >= 240
                && Self.number((try? Self.pageStats(peer)) ?? [:], "framesSent") >= 150
        }
        // The level Chromium hears while the tone plays (it falls to zero once it stops).
        let playing = try Self.pageStats(peer)
        feeder.stop()
        _ = try peer.call(JSEPInteropTests.js("mediaStopSending"))
        // Frames Revue encoded and sent (a loaded machine may drop captures before the encoder).
        let fed = Int(connection.videoSendStatistics?.outbound.framesEncoded ?? 0)
        #expect(
            fed >= feeder.framesFed.load(ordering: .relaxed) / 2,
            "encoded \(fed) of \(feeder.framesFed.load(ordering: .relaxed)) frames")
        try? await Task.sleep(nanoseconds: 500_000_000)
        let sentByChromium = Int(Self.number(try Self.pageStats(peer), "framesSent"))
        // The last frames in flight both ways.
        _ = await waitFor(timeout: 20) {
            let s = (try? Self.pageStats(peer)) ?? [:]
            return Int(Self.number(s, "framesDecoded")) >= fed * 95 / 100
                && probe.video.withLock { $0.frames } >= sentByChromium * 9 / 10
        }
        let stats = try Self.pageStats(peer)
        let v = probe.video.withLock { $0 }, loudest = probe.audio.withLock { $0.loudest }
        let decodedByChromium = Int(Self.number(stats, "framesDecoded"))
        let audioLevel = Self.number(playing, "audioLevel")
        let label = "\(revueOffers ? "Revue offers" : "Chromium offers") \(codec)"
        print(
            "PeerConnectionChromiumTests \(label): Chromium→Revue \(v.frames)/\(sentByChromium) frames \(v.width)x\(v.height), \(v.lit) lit (smallest luma span \(v.minSpan)), \(v.moved) moved, mean luma \(v.meanLuma), mean frame difference \(v.meanDifference), loudest audio block RMS \(loudest); Revue→Chromium \(decodedByChromium)/\(fed) frames decoded, audioLevel \(audioLevel), screenshot \(shot); page \(stats)"
        )

        // Chromium → Revue, with transport-wide sequence numbers under the agreed ID, which our
        // receiver answers with transport feedback for Chromium's congestion control.
        let transportFeedback = connection.receiveStatistics?.transportFeedbackSent ?? 0
        #expect(transportFeedback >= 20, "transport feedback packets sent to Chromium: \(transportFeedback)")
        #expect(sentByChromium >= 150, "Chromium sent \(sentByChromium) frames")
        #expect(v.frames >= sentByChromium * 9 / 10, "Revue decoded \(v.frames) of Chromium's \(sentByChromium) frames")
        #expect(v.lit >= v.frames * 9 / 10, "\(v.lit) of \(v.frames) frames not black (smallest luma span \(v.minSpan))")
        #expect(v.moved >= v.frames / 2, "\(v.moved) of \(v.frames) frames differ from the one before")
        #expect(loudest > 0.01, "Chromium→Revue audio: loudest block RMS \(loudest)")

        // Revue → Chromium.
        #expect(stats["receivedCodec"] as? String == "video/\(codec == .vp9 ? "VP9" : "VP8")", "\(stats)")
        #expect(decodedByChromium >= fed * 95 / 100, "Chromium decoded \(decodedByChromium) of Revue's \(fed) frames; \(stats)")
        #expect(audioLevel > 0, "Chromium's inbound audioLevel \(audioLevel); \(playing)")
        #expect(Self.number(stats, "totalAudioEnergy") > 0, "\(stats)")
        let notBlack = Double(shot["not_black"] ?? "") ?? 0, luma = Double(shot["mean_luma"] ?? "") ?? 0
        #expect(notBlack > 0.5 && luma > 24, "the <video> element in the screenshot: \(shot)")
    }

    /// Renegotiation with a browser on one connection: Revue offers audio only (Chromium's
    /// camera track gets no section yet); Revue adds VP8 video and offers again, and Chromium's
    /// answer puts its camera into the new section, so video flows both ways; Chromium removes
    /// its camera and offers (Revue answers: the section becomes send-only for Revue), so video
    /// from Chromium stops while Revue's goes on; Revue removes its video and offers, so video
    /// stops both ways. Audio plays throughout, and both sides stay connected.
    @Test func videoAddedAndRemovedByRenegotiationWithChromium() async throws {
        let (peer, dir) = try JSEPInteropTests.chromium()
        defer {
            peer.stop()
            dir.remove()
        }
        let connection = try PeerConnection(configuration: Self.configuration())
        defer { connection.close() }
        let probe = ChromiumMediaProbe()
        connection.videoRenderer = probe
        connection.audioSink = probe
        let tone = PeerConnectionFeeder(video: nil, audio: try connection.addAudioTrack(), width: 16, height: 16, tone: 660)
        defer { tone.stop() }
        // Frames the page's <video> element showed (its count stays when a section goes inactive
        // and getStats drops the inbound stream); -1 when the page did not report it.
        func shownByChromium() -> Int {
            let stats = (try? Self.pageStats(peer)) ?? [:]
            return stats["shownFrames"] == nil ? -1 : Int(Self.number(stats, "shownFrames"))
        }
        func decodedByRevue() -> Int { probe.video.withLock { $0.frames } }

        let offer = try await connection.createOffer()
        #expect(offer.media.map(\.kind) == [.audio])
        let answer = try #require(try peer.call(JSEPInteropTests.js("mediaAnswer", offer.sdp))["sdp"])
        try await connection.setRemoteDescription(try JSEPSessionDescription(parsing: answer, type: .answer))
        let state = await connection.waitUntilSettled(timeout: 60)
        try #require(state == .connected, "Revue \(state): \(connection.error.map { "\($0)" } ?? "no error")")
        tone.start()

        // 1. Revue adds video: both ways.
        let video = try connection.addVideoTrack(codec: .vp8)
        let feeder = PeerConnectionFeeder(video: video, audio: nil, width: Self.width, height: Self.height, tone: 0)
        defer { feeder.stop() }
        feeder.start()
        let offer1 = try await connection.createOffer()
        let answer1 = try #require(try peer.call(JSEPInteropTests.js("mediaReanswer", offer1.sdp))["sdp"])
        try await connection.setRemoteDescription(try JSEPSessionDescription(parsing: answer1, type: .answer))
        let both = await waitFor(timeout: 60) { shownByChromium() >= 90 && decodedByRevue() >= 60 }
        let directions1 = try peer.call(JSEPInteropTests.js("mediaDirections"))["sdp"] ?? "?"
        #expect(both, "after adding video: Chromium decoded \(shownByChromium()), Revue \(decodedByRevue()); \(directions1)")
        #expect(directions1 == "0:sendrecv 1:sendrecv", "\(directions1)")

        // 2. Chromium removes its camera and offers: its video stops, Revue's goes on.
        let offer2 = try #require(try peer.call(JSEPInteropTests.js("mediaRemoveVideoAndOffer"))["sdp"])
        try await connection.setRemoteDescription(try JSEPSessionDescription(parsing: offer2, type: .offer))
        let answer2 = try await connection.createAnswer()
        #expect(answer2.media.count == 2 && answer2.media[1].direction == .sendonly, "\(answer2.sdp)")
        #expect(try peer.call(JSEPInteropTests.js("mediaTakeAnswer", answer2.sdp))["sdp"] == "stable")
        try? await Task.sleep(nanoseconds: 1_000_000_000)
        let revueStopped = decodedByRevue(), chromiumGoing = shownByChromium()
        try? await Task.sleep(nanoseconds: 2_000_000_000)
        #expect(
            decodedByRevue() == revueStopped, "Chromium removed its video, Revue decoded \(decodedByRevue() - revueStopped) more")
        #expect(shownByChromium() >= chromiumGoing + 30, "Revue's video goes on: \(shownByChromium() - chromiumGoing) more")

        // 3. Revue removes its video and offers: no video either way, the section stays.
        try connection.removeTrack(video)
        let offer3 = try await connection.createOffer()
        let answer3 = try #require(try peer.call(JSEPInteropTests.js("mediaReanswer", offer3.sdp))["sdp"])
        try await connection.setRemoteDescription(try JSEPSessionDescription(parsing: answer3, type: .answer))
        let directions3 = try peer.call(JSEPInteropTests.js("mediaDirections"))["sdp"] ?? "?"
        #expect(directions3 == "0:sendrecv 1:inactive", "\(directions3)")
        try? await Task.sleep(nanoseconds: 1_000_000_000)
        let chromiumStopped = shownByChromium()
        let playing = try Self.pageStats(peer)
        try? await Task.sleep(nanoseconds: 2_000_000_000)
        #expect(chromiumStopped >= chromiumGoing + 30, "Chromium showed \(chromiumStopped) frames")
        #expect(
            shownByChromium() == chromiumStopped,
            "Revue removed its video, Chromium showed \(shownByChromium() - chromiumStopped) more")

        // Audio all along, and still connected.
        let loudest = probe.audio.withLock { $0.loudest }
        let audioLevel = Self.number(playing, "audioLevel")
        print(
            "PeerConnectionChromiumTests renegotiation: Chromium showed \(chromiumStopped) of Revue's frames, Revue \(revueStopped) of Chromium's; audioLevel \(audioLevel), loudest block RMS \(loudest); \(directions1) → \(directions3)"
        )
        #expect(audioLevel > 0, "Chromium's inbound audioLevel \(audioLevel); \(playing)")
        #expect(loudest > 0.01, "Chromium→Revue audio: loudest block RMS \(loudest)")
        #expect(connection.state == .connected)
        #expect(playing["connection"] as? String == "connected", "\(playing)")
    }

    /// ICE restart both ways with Chromium, each after the path in use died: everything from
    /// Chromium's address of the selected pair is dropped at Revue (Chromium's new generation
    /// gathers new ports, so its new candidates are other addresses). Revue restarts and offers
    /// first, then Chromium restarts and offers. Each time both descriptions carry new ICE
    /// credentials, the pair moves to one of Chromium's new candidates, and media flows again
    /// both ways within 2 s of the answer being set; the connection (and its DTLS session) stays.
    @Test func iceRestartOfferedByEitherSideMovesMediaToANewPath() async throws {
        let (peer, dir) = try JSEPInteropTests.chromium()
        defer {
            peer.stop()
            dir.remove()
        }
        let connection = try PeerConnection(configuration: Self.configuration())
        defer { connection.close() }
        let video = try connection.addVideoTrack(codec: .vp8)
        let audio = try connection.addAudioTrack()
        let probe = ChromiumMediaProbe()
        connection.videoRenderer = probe
        connection.audioSink = probe
        let feeder = PeerConnectionFeeder(video: video, audio: audio, width: Self.width, height: Self.height, tone: 660)
        defer { feeder.stop() }
        let offer = try #require(try peer.call(JSEPInteropTests.js("mediaOffer"))["sdp"])
        try await connection.setRemoteDescription(try JSEPSessionDescription(parsing: offer, type: .offer))
        let answer = try await connection.createAnswer()
        #expect(try peer.call(JSEPInteropTests.js("mediaTakeAnswer", answer.sdp))["sdp"] == "stable")
        let state = await connection.waitUntilSettled(timeout: 60)
        try #require(state == .connected, "Revue \(state): \(connection.error.map { "\($0)" } ?? "no error")")
        feeder.start()
        func decodedByChromium() -> Int { Int(Self.number((try? Self.pageStats(peer)) ?? [:], "framesDecoded")) }
        func decodedByRevue() -> Int { probe.video.withLock { $0.frames } }
        let flowing = await waitFor(timeout: 60) { decodedByChromium() >= 30 && decodedByRevue() >= 30 }
        try #require(flowing, "before any restart: Chromium decoded \(decodedByChromium()), Revue \(decodedByRevue())")
        let agent = try #require(connection.agent)
        let dead = Mutex<Set<SocketAddress>>([])
        agent.dropFilterForTests = { address in dead.withLock { $0.contains(address) } }

        var credentials = [answer.media[0].ice?.usernameFragment ?? answer.ice?.usernameFragment ?? "?"]
        var report: [String] = []
        for revueRestarts in [true, false] {
            let label = revueRestarts ? "Revue restarts" : "Chromium restarts"
            let old = try #require(agent.selectedPair).remote.address
            // The path dies: nothing more from Chromium's old address reaches Revue.
            dead.withLock { _ = $0.insert(old) }
            let revueBefore = decodedByRevue(), chromiumBefore = decodedByChromium()
            let ours: JSEPSessionDescription
            if revueRestarts {
                connection.restartIce()
                ours = try await connection.createOffer()
                let theirs = try #require(try peer.call(JSEPInteropTests.js("mediaReanswerRestart", ours.sdp))["sdp"])
                try await connection.setRemoteDescription(try JSEPSessionDescription(parsing: theirs, type: .answer))
            } else {
                let theirs = try #require(try peer.call(JSEPInteropTests.js("mediaRestartIceAndOffer"))["sdp"])
                try await connection.setRemoteDescription(try JSEPSessionDescription(parsing: theirs, type: .offer))
                ours = try await connection.createAnswer()
                #expect(try peer.call(JSEPInteropTests.js("mediaTakeAnswer", ours.sdp))["sdp"] == "stable")
            }
            let set = ContinuousClock.now
            let ufrag = ours.media[0].ice?.usernameFragment ?? ours.ice?.usernameFragment ?? "?"
            #expect(!credentials.contains(ufrag), "\(label): our ufrag \(ufrag) is not new (\(credentials))")
            credentials.append(ufrag)
            let back = await waitFor(timeout: 10) {
                decodedByRevue() >= revueBefore + 10 && decodedByChromium() >= chromiumBefore + 10
                    && agent.selectedPair.map { $0.remote.address != old } == true
            }
            let took = ContinuousClock.now - set
            let pair = try peer.call(JSEPInteropTests.js("mediaSelectedPair"))["sdp"] ?? "?"
            let now = agent.selectedPair.map { "\($0.local.address) -> \($0.remote.address)" } ?? "none"
            report.append("\(label): media back both ways after \(took) on \(now) (was from \(old)); Chromium's pair \(pair)")
            #expect(
                back,
                "\(label): Revue decoded \(decodedByRevue() - revueBefore), Chromium \(decodedByChromium() - chromiumBefore) more; pair \(now), was \(old); controlling \(agent.isControlling); \(agent.statistics); pairs \(agent.pairSnapshots)"
            )
            #expect(took <= .seconds(2), "\(label): media came back after \(took)")
        }
        print("PeerConnectionChromiumTests ICE restart: " + report.joined(separator: "; "))
        // The same connection and DTLS session throughout.
        #expect(connection.state == .connected && connection.error == nil)
    }

    /// `sdp` without its candidates; with `candidate` instead when given (after each ICE
    /// username line, so in every media section).
    static func replacingCandidates(in sdp: String, with candidate: String?) -> String {
        var lines: [Substring] = []
        for line in sdp.split(separator: "\r\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("a=candidate:") || line.hasPrefix("a=end-of-candidates") { continue }
            lines.append(line)
            if line.hasPrefix("a=ice-ufrag:"), let candidate {
                lines.append(Substring("a=" + candidate))
                lines.append("a=end-of-candidates")
            }
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    /// Revue's video reaches Chromium through the impairment relay, which loses 5 % of what
    /// Revue sends (media, RTCP and ICE alike; Chromium's packets pass untouched). Each side
    /// knows the other only through the relay: Chromium gets the relay's address as Revue's one
    /// candidate, Revue gets no candidate and learns Chromium's address from its checks (a
    /// peer-reflexive candidate). Chromium must still decode and show at least 90 % of the frames
    /// Revue encoded, having asked for the lost packets (NACK) and got them resent.
    @Test func chromiumShowsRevueVideoThroughFivePercentLoss() async throws {
        let (peer, dir) = try JSEPInteropTests.chromium()
        defer {
            peer.stop()
            dir.remove()
        }
        var configuration = Self.configuration()
        configuration.bindAddress = .loopbackIPv4(port: 0)
        let connection = try PeerConnection(configuration: configuration)
        defer { connection.close() }
        let video = try connection.addVideoTrack(codec: .vp8)
        let audio = try connection.addAudioTrack()
        let feeder = PeerConnectionFeeder(video: video, audio: audio, width: Self.width, height: Self.height, tone: 660)
        let revuePort = try #require(connection.localAddress?.port)
        let relay = try ImpairmentRelay(
            configuration: .init(
                listen: .loopbackIPv4(port: 0), to: .loopbackIPv4(port: revuePort), impairment: .init(),
                reverse: .init(loss: 0.05), seed: 7))
        relay.start()
        defer { relay.stop() }

        let offer = try #require(try peer.call(JSEPInteropTests.js("mediaOffer"))["sdp"])
        try await connection.setRemoteDescription(
            try JSEPSessionDescription(parsing: Self.replacingCandidates(in: offer, with: nil), type: .offer))
        let answer = try await connection.createAnswer()
        let relayed = Self.replacingCandidates(
            in: answer.sdp, with: "candidate:1 1 udp 2130706431 127.0.0.1 \(relay.listenAddress.port) typ host")
        let taken = try peer.call(JSEPInteropTests.js("mediaTakeAnswer", relayed))["sdp"]
        #expect(taken == "stable", "Chromium applied our answer: \(taken ?? "?")")
        let state = await connection.waitUntilSettled(timeout: 60)
        let pageState = (try? Self.pageStats(peer))?["connection"] as? String ?? "?"
        try #require(
            state == .connected, "Revue \(state): \(connection.error.map { "\($0)" } ?? "no error"); Chromium \(pageState)")

        feeder.start()
        _ = await waitFor(timeout: 90) { feeder.framesFed.load(ordering: .relaxed) >= 240 }
        feeder.stop()
        let fed = Int(connection.videoSendStatistics?.outbound.framesEncoded ?? 0)
        _ = await waitFor(timeout: 20) {
            Int(Self.number((try? Self.pageStats(peer)) ?? [:], "framesDecoded")) >= fed * 95 / 100
        }
        try? await Task.sleep(nanoseconds: 500_000_000)
        let stats = try Self.pageStats(peer)
        let relayStatistics = relay.statistics
        let outbound = connection.videoSendStatistics?.outbound
        let decoded = Int(Self.number(stats, "framesDecoded")), shown = Int(Self.number(stats, "shownFrames"))
        let lostShare = Double(relayStatistics.reverse.droppedByLoss) / Double(max(relayStatistics.reverse.received, 1))
        print(
            "PeerConnectionChromiumTests 5 % loss: Chromium decoded \(decoded) and showed \(shown) of Revue's \(fed) frames; relay dropped \(relayStatistics.reverse.droppedByLoss) of \(relayStatistics.reverse.received) packets Revue sent; NACKs received \(outbound?.nackCount ?? 0), packets resent \(outbound?.retransmittedPacketsSent ?? 0), PLIs \(outbound?.pliCount ?? 0); page \(stats)"
        )
        #expect(lostShare > 0.03 && lostShare < 0.07, "the relay lost \(lostShare * 100) % of Revue's packets")
        #expect(decoded >= fed * 9 / 10, "Chromium decoded \(decoded) of Revue's \(fed) frames; \(stats)")
        // What the <video> element presents depends on headless Chromium's compositor as well: on
        // a loaded 2-core machine it skipped 30 of 241 frames that had all been decoded. Repair is
        // measured by the decoded count above; this checks that the page shows the video.
        #expect(shown >= fed * 3 / 4, "Chromium's <video> showed \(shown) of Revue's \(fed) frames; \(stats)")
        #expect(Self.number(stats, "nackCount") > 0, "Chromium sent no NACK: \(stats)")
        #expect(
            (outbound?.nackCount ?? 0) > 0 && (outbound?.retransmittedPacketsSent ?? 0) > 0, "\(String(describing: outbound))")
        // The repairs came on our RTX stream (RFC 4588): the answer gave the video one (an FID
        // group with the payload type Chromium offered), and Chromium counted at least half of
        // what we resent as received retransmissions (the relay loses some; probe padding on the
        // same stream counts too).
        #expect(answer.sdp.contains("a=ssrc-group:FID "), "no RTX stream in our answer")
        #expect(
            Self.number(stats, "retransmittedPacketsReceived") >= Double(outbound?.retransmittedPacketsSent ?? 0) / 2,
            "Chromium took no repair from our RTX stream: \(stats)")
        #expect(
            Self.number(stats, "packetsLost") < Double(relayStatistics.reverse.droppedByLoss),
            "Chromium recovered no lost packet: \(stats)")
    }
}
