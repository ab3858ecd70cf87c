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
        var description: String { "\(second)s: Chromium \(Int(chromium / 1000)) kbit/s, Revue \(Int(revue / 1000)) kbit/s" }
    }

    @Test func bothEstimatesFollowARateLimitDownAndBackUp() async throws {
        let limit = 400_000
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
        func watch(_ seconds: Int) async {
            for _ in 0..<seconds {
                try? await Task.sleep(nanoseconds: 1_000_000_000)
                let stats = (try? Self.pageStats(peer)) ?? [:]
                samples.append(
                    EstimateSample(
                        second: Int(Date().timeIntervalSince(start)), chromium: Self.number(stats, "availableOutgoingBitrate"),
                        revue: Double(connection.sendBandwidthEstimate ?? 0)))
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
        await watch(20)
        let under = last(4)
        relay.update(configuration: open)
        await watch(20)
        let after = last(4)
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
        // Under the limit both end within a band around it (the rate counts UDP payload only).
        let band = (Double(limit) * 0.3)...(Double(limit) * 1.5)
        #expect(band.contains(under.chromium), "Chromium's estimate under the limit: \(Int(under.chromium))")
        #expect(band.contains(under.revue), "Revue's estimate under the limit: \(Int(under.revue))")
        // Lifted, both climb back well above it.
        #expect(
            after.chromium > max(under.chromium * 1.5, Double(limit) * 1.25), "Chromium after the limit: \(Int(after.chromium))")
        #expect(after.revue > max(under.revue * 1.3, Double(limit) * 1.25), "Revue after the limit: \(Int(after.revue))")
    }
}
