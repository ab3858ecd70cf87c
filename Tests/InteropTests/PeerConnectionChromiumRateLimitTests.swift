// Congestion control both ways with Chromium over a rate-limited path: Chromium offers, and knows
// Revue only as the impairment relay's address; the relay limits both directions to the same
// rate for a while, then lifts the limit. With transport-cc negotiated, Revue's packets carry
// transport-wide sequence numbers (Chromium answers with transport feedback, which drives our
// delay-based estimate) and Revue sends transport feedback for Chromium's packets (which drives
// Chromium's). Chromium's send-side estimate is its `availableOutgoingBitrate` (getStats'
// candidate pair); ours is the target our encoders are held to.
import Foundation
import MediaCore
import MediaTools
import Testing

extension PeerConnectionChromiumTests {
    /// One sample of both estimates, bits per second.
    struct EstimateSample: CustomStringConvertible {
        var second: Int
        var chromium: Double
        var revue: Double
        /// What Chromium's video sent in the last second, its encoder target, the loss our
        /// reports gave it, and the transport feedback Revue sent in all.
        var chromiumSent: Double, chromiumTarget: Double, chromiumLoss: Double, feedbackSent: Int
        var description: String {
            "\(second)s: Chromium \(Int(chromium / 1000)) kbit/s (video sent \(Int(chromiumSent / 1000)), target \(Int(chromiumTarget / 1000)), loss reported \(chromiumLoss)), Revue \(Int(revue / 1000)) kbit/s; Revue's transport feedback \(feedbackSent)"
        }
    }

    @Test func bothEstimatesFollowARateLimitDownAndBackUp() async throws {
        // Below what Chromium's fake camera and microphone send (about 200 + 40 kbit/s; its
        // estimate has no reason to come down for a limit its traffic fits under).
        let limit = 160_000
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
        let open = ImpairmentRelay.Configuration(listen: .loopbackIPv4(port: 0), to: .loopbackIPv4(port: revuePort), seed: 11)
        let relay = try ImpairmentRelay(configuration: open)
        relay.start()
        defer { relay.stop() }

        let offer = try #require(try peer.call(JSEPInteropTests.js("mediaOffer"))["sdp"])
        #expect(offer.contains("transport-wide-cc-extensions-01"), "Chromium offers transport-cc")
        try await connection.setRemoteDescription(
            try JSEPSessionDescription(parsing: Self.replacingCandidates(in: offer, with: nil), type: .offer))
        let answer = try await connection.createAnswer()
        #expect(answer.sdp.contains("transport-wide-cc-extensions-01") && answer.sdp.contains("transport-cc"))
        let relayed = Self.replacingCandidates(
            in: answer.sdp, with: "candidate:1 1 udp 2130706431 127.0.0.1 \(relay.listenAddress.port) typ host")
        let taken = try peer.call(JSEPInteropTests.js("mediaTakeAnswer", relayed))["sdp"]
        #expect(taken == "stable", "Chromium applied our answer: \(taken ?? "?")")
        let state = await connection.waitUntilSettled(timeout: 60)
        try #require(state == .connected, "Revue \(state): \(connection.error.map { "\($0)" } ?? "no error")")
        feeder.start()
        defer { feeder.stop() }

        var samples: [EstimateSample] = []
        let start = Date()
        /// Samples both estimates once a second for `seconds`.
        var lastBytes = 0.0
        func watch(_ seconds: Int) async {
            for _ in 0..<seconds {
                try? await Task.sleep(nanoseconds: 1_000_000_000)
                let stats = (try? Self.pageStats(peer)) ?? [:]
                let bytes = Self.number(stats, "videoBytesSent")
                samples.append(
                    EstimateSample(
                        second: Int(Date().timeIntervalSince(start)), chromium: Self.number(stats, "availableOutgoingBitrate"),
                        revue: Double(connection.sendBandwidthEstimate ?? 0), chromiumSent: (bytes - lastBytes) * 8,
                        chromiumTarget: Self.number(stats, "videoTargetBitrate"),
                        chromiumLoss: Self.number(stats, "remoteFractionLost"),
                        feedbackSent: connection.receiveStatistics?.transportFeedbackSent ?? 0))
                lastBytes = bytes
            }
        }
        func last(_ n: Int) -> (chromium: Double, revue: Double) {
            let tail = samples.suffix(n)
            return (tail.map(\.chromium).reduce(0, +) / Double(tail.count), tail.map(\.revue).reduce(0, +) / Double(tail.count))
        }

        await watch(10)
        let before = last(3)
        var limited = open
        limited.forward = ImpairmentModel.Settings(rateBitsPerSecond: limit, queueLimitMilliseconds: 200)
        limited.reverse = limited.forward
        relay.update(configuration: limited)
        await watch(25)
        let under = last(4)
        relay.update(configuration: open)
        await watch(25)
        let after = last(3)
        let feedback = connection.transportFeedbackReceived ?? 0
        let relayStatistics = relay.statistics
        print(
            """
            PeerConnectionChromiumTests rate limit \(limit / 1000) kbit/s both ways: before \
            Chromium \(Int(before.chromium / 1000)) / Revue \(Int(before.revue / 1000)) kbit/s, limited \
            \(Int(under.chromium / 1000)) / \(Int(under.revue / 1000)), lifted \(Int(after.chromium / 1000)) / \
            \(Int(after.revue / 1000)); Chromium's transport feedback packets taken by Revue \(feedback); relay dropped \
            \(relayStatistics.forward.droppedByQueue) (Chromium to Revue) and \(relayStatistics.reverse.droppedByQueue) \
            (Revue to Chromium) at its queue
            \(samples.map(\.description).joined(separator: "\n"))
            """)
        // Chromium numbered nothing for us unless our packets carried transport-wide numbers it
        // read: its feedback is the proof that the extension went out under its ID.
        #expect(feedback > 20, "Revue took \(feedback) transport feedback packets from Chromium")
        #expect(before.chromium > 0 && before.revue > 0)
        // Under the limit both end within a band around it (the rate counts UDP payload only; our
        // estimate may rest at its 50 kbit/s floor).
        let band = (Double(limit) * 0.25)...(Double(limit) * 1.6)
        #expect(band.contains(under.chromium), "Chromium's estimate under the limit: \(Int(under.chromium))")
        #expect(band.contains(under.revue), "Revue's estimate under the limit: \(Int(under.revue))")
        // Lifted, both climb back above it (ours grows by about 8 % a second from its floor).
        #expect(
            after.chromium > max(under.chromium * 1.5, Double(limit) * 1.25), "Chromium after the limit: \(Int(after.chromium))")
        #expect(after.revue > max(under.revue * 1.5, Double(limit)), "Revue after the limit: \(Int(after.revue))")
    }
}
