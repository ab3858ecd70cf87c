// Two RTCPeerConnections in one process, connected on loopback through the public API only:
// candidates travel by trickle alone (the descriptions given to the peer have their candidate
// lines removed), video and audio go both ways, and what each side decodes is compared with
// what the other sent (PSNR against the pattern, the tone's level and pitch); then getStats()
// is checked against what the probes counted and against the other side's stats. Real time:
// runs in an e2e lane (scripts/test).
import Foundation
import RevueMedia
import Synchronization
import Testing

@Suite(.serialized)
struct RTCLoopbackCallTests {
    static let width = 320, height = 240

    static func configuration() -> RTCConfiguration {
        var c = RTCConfiguration()
        c.localAddress = "127.0.0.1"
        // Descriptions come back at once; candidates arrive by trickle.
        c.gatheringWait = .zero
        c.connectTimeout = .seconds(20)
        c.videoWidth = width
        c.videoHeight = height
        c.videoBitrate = 800_000
        return c
    }

    /// The SDP without its candidates, as a peer that trickles everything receives it.
    static func withoutCandidates(_ d: RTCSessionDescription) -> RTCSessionDescription {
        let lines = d.sdp.components(separatedBy: "\r\n").filter {
            !$0.hasPrefix("a=candidate:") && $0 != "a=end-of-candidates"
        }
        return RTCSessionDescription(type: d.type, sdp: lines.joined(separator: "\r\n"))
    }

    @Test func twoPeersTrickleAndExchangeVideoAndAudioBothWays() async throws {
        // a presents a certificate of its own making; DTLS must verify it by its fingerprint.
        let certificate = try RTCCertificate.generate()
        var configurationA = Self.configuration()
        configurationA.certificates = [certificate]
        let a = try RTCPeerConnection(configuration: configurationA)
        let b = try RTCPeerConnection(configuration: Self.configuration())
        defer {
            a.close()
            b.close()
        }
        let logA = EventLog(), logB = EventLog()
        logA.attach(to: a)
        logB.attach(to: b)
        let aToB = TrickleChannel(), bToA = TrickleChannel()
        a.onIceCandidate = aToB.handler
        b.onIceCandidate = bToA.handler

        let aVideo = try a.addTrack(.video), aAudio = try a.addTrack(.audio)
        let bVideo = try b.addTransceiver(.video, direction: .sendrecv)
        let bAudio = try b.addTransceiver(.audio, direction: .sendrecv)
        let probeA = MediaProbe(), probeB = MediaProbe()
        a.remoteVideoRenderer = probeA
        a.remoteAudioSink = probeA
        b.remoteVideoRenderer = probeB
        b.remoteAudioSink = probeB
        let feedA = PatternFeeder(
            video: aVideo.videoCapturer, audio: aAudio.audioCapturer, width: Self.width, height: Self.height, tone: 440)
        let feedB = PatternFeeder(
            video: bVideo.videoCapturer, audio: bAudio.audioCapturer, width: Self.width, height: Self.height, tone: 660,
            frameOffset: 10_000)
        defer {
            feedA.stop()
            feedB.stop()
        }

        // Offer/answer, every candidate by trickle.
        let offer = try await a.createOffer()
        #expect(offer.sdp.contains("a=fingerprint:sha-256 \(certificate.fingerprint.value)\r\n"))
        try await a.setLocalDescription(offer)
        try await b.setRemoteDescription(Self.withoutCandidates(offer))
        let answer = try await b.createAnswer()
        try await b.setLocalDescription(answer)
        try await a.setRemoteDescription(Self.withoutCandidates(answer))
        #expect(a.signalingState == .stable && b.signalingState == .stable)
        #expect(aVideo.mid != nil && aAudio.mid != nil && aVideo.mid != aAudio.mid)

        let connected = await waitFor(timeout: 20) {
            a.connectionState == .connected && b.connectionState == .connected
        } trickle: {
            try await aToB.deliver(to: b)
            try await bToA.deliver(to: a)
        }
        try #require(
            connected,
            "a \(a.connectionState) \(a.error.map { "\($0)" } ?? ""), b \(b.connectionState) \(b.error.map { "\($0)" } ?? "")")
        // Candidates that came after the connection (none on loopback, usually) and the ends.
        _ = await waitFor(timeout: 5) {
            false
        } trickle: {
            try await aToB.deliver(to: b)
            try await bToA.deliver(to: a)
        } until: {
            aToB.endsDelivered.load(ordering: .relaxed) == 1 && bToA.endsDelivered.load(ordering: .relaxed) == 1
        }
        print(
            "RTCLoopbackCallTests trickled \(aToB.delivered.load(ordering: .relaxed)) candidates a→b, \(bToA.delivered.load(ordering: .relaxed)) b→a"
        )
        #expect(aToB.delivered.load(ordering: .relaxed) >= 1 && bToA.delivered.load(ordering: .relaxed) >= 1)
        #expect(aToB.endsDelivered.load(ordering: .relaxed) == 1 && bToA.endsDelivered.load(ordering: .relaxed) == 1)
        #expect(a.remoteEndOfCandidates && b.remoteEndOfCandidates)
        #expect(a.iceGatheringState == .complete && b.iceGatheringState == .complete)

        // About 4 s of media each way.
        feedA.start()
        feedB.start()
        _ = await waitFor(timeout: 60) {
            feedA.framesFed.load(ordering: .relaxed) >= 120 && feedB.framesFed.load(ordering: .relaxed) >= 120
        }
        feedA.stop()
        feedB.stop()
        let statsBefore = (await a.getStats(), await b.getStats())
        let encodedA = Int(
            statsBefore.0.records(ofType: .outboundRTP).first { $0.string("kind") == "video" }?.int("framesEncoded") ?? 0)
        let encodedB = Int(
            statsBefore.1.records(ofType: .outboundRTP).first { $0.string("kind") == "video" }?.int("framesEncoded") ?? 0)
        #expect(encodedA >= 60 && encodedB >= 60, "encoded \(encodedA) and \(encodedB) frames")
        _ = await waitFor(timeout: 10) {
            probeB.video.withLock { $0.frames } >= encodedA * 9 / 10 && probeA.video.withLock { $0.frames } >= encodedB * 9 / 10
        }
        // Let the last packets, and a round of RTCP reports, arrive.
        try await Task.sleep(nanoseconds: 1_500_000_000)

        for (name, probe, encoded, tone, senderOffset) in [
            ("a→b", probeB, encodedA, 440.0, 0), ("b→a", probeA, encodedB, 660.0, 10_000),
        ] {
            let v = probe.video.withLock { $0 }, au = probe.audio.withLock { $0 }
            print(
                "RTCLoopbackCallTests \(name): \(v.frames)/\(encoded) frames, PSNR mean \(v.psnrMean) min \(v.psnrMin) dB, audio RMS \(au.rms), \(au.crossingsPerSecond) crossings/s"
            )
            #expect(v.frames >= encoded * 9 / 10, "\(name): \(v.frames) of \(encoded) frames decoded")
            #expect(v.identified >= v.frames * 9 / 10, "\(name): \(v.identified) of \(v.frames) frames identified")
            #expect(v.indexMin >= senderOffset && v.indexMax < senderOffset + 10_000, "\(name): pictures of the wrong sender")
            #expect(v.psnrMean >= 30, "\(name): mean PSNR \(v.psnrMean) dB")
            #expect(au.samples >= 48_000 * 2, "\(name): \(au.samples) samples")
            // A 0.5 peak sine has RMS 0.354; two zero crossings per period.
            #expect(au.rms > 0.2 && au.rms < 0.5, "\(name): RMS \(au.rms)")
            #expect(abs(au.crossingsPerSecond - 2 * tone) < 0.05 * 2 * tone, "\(name): \(au.crossingsPerSecond) crossings/s")
        }

        // getStats against the probes and against the other side.
        let statsA = await a.getStats(), statsB = await b.getStats()
        for (name, sender, receiver, probe) in [("a→b", statsA, statsB, probeB), ("b→a", statsB, statsA, probeA)] {
            let outVideo = try #require(sender.records(ofType: .outboundRTP).first { $0.string("kind") == "video" })
            let inVideo = try #require(receiver.records(ofType: .inboundRTP).first { $0.string("kind") == "video" })
            let outAudio = try #require(sender.records(ofType: .outboundRTP).first { $0.string("kind") == "audio" })
            let inAudio = try #require(receiver.records(ofType: .inboundRTP).first { $0.string("kind") == "audio" })
            let sent = outVideo.int("packetsSent") ?? 0, received = inVideo.int("packetsReceived") ?? 0
            let decoded = inVideo.int("framesDecoded") ?? 0, rendered = Int64(probe.video.withLock { $0.frames })
            print(
                "RTCLoopbackCallTests stats \(name): video packetsSent \(sent) packetsReceived \(received) bytesReceived \(inVideo.int("bytesReceived") ?? -1) framesDecoded \(decoded) (rendered \(rendered)) packetsLost \(inVideo.int("packetsLost") ?? -1) jitter \(inVideo.double("jitter") ?? -1) s; audio packetsSent \(outAudio.int("packetsSent") ?? -1) packetsReceived \(inAudio.int("packetsReceived") ?? -1)"
            )
            #expect(outVideo.int("ssrc") == inVideo.int("ssrc"), "\(name): the inbound stream is the outbound one")
            #expect(received > 100 && received <= sent && received >= sent * 95 / 100, "\(name): \(received) of \(sent) packets")
            #expect((inVideo.int("bytesReceived") ?? 0) > received * 100, "\(name): bytesReceived")
            #expect(decoded >= rendered && decoded <= rendered + 5, "\(name): framesDecoded \(decoded), rendered \(rendered)")
            #expect(inVideo.int("frameWidth") == Int64(Self.width) && inVideo.int("frameHeight") == Int64(Self.height))
            #expect((inVideo.int("packetsLost") ?? -1) >= 0 && (inVideo.int("packetsLost") ?? 99) <= sent / 100)
            #expect((inVideo.double("jitter") ?? -1) >= 0 && (inVideo.double("jitter") ?? 1) < 0.05, "\(name): jitter")
            let audioSent = outAudio.int("packetsSent") ?? 0, audioReceived = inAudio.int("packetsReceived") ?? 0
            #expect(audioReceived >= 150 && audioReceived <= audioSent && audioReceived >= audioSent * 95 / 100)
            #expect((inAudio.int("totalSamplesReceived") ?? 0) >= 48_000 * 2)
            // The sender's level from the RFC 6464 header extension: a 0.5 peak tone is -9 dBov.
            let level = inAudio.double("audioLevel") ?? -1
            #expect(level > 0.25 && level < 0.45, "\(name): audioLevel \(level)")
        }
        for (name, stats) in [("a", statsA), ("b", statsB)] {
            let transport = try #require(stats["T01"])
            let pairID = try #require(transport.string("selectedCandidatePairId"))
            let pair = try #require(stats[pairID])
            let local = try #require(stats[pair.string("localCandidateId") ?? ""])
            let remoteInbound = stats.records(ofType: .remoteInboundRTP).filter { ($0.int("roundTripTimeMeasurements") ?? 0) > 0 }
            let rtt = remoteInbound.compactMap { $0.double("roundTripTime") }.max() ?? -1
            print(
                "RTCLoopbackCallTests stats \(name): pair \(pairID) bytesSent \(pair.int("bytesSent") ?? -1) bytesReceived \(pair.int("bytesReceived") ?? -1) requestsSent \(pair.int("requestsSent") ?? -1) responsesReceived \(pair.int("responsesReceived") ?? -1), roundTripTime \(rtt) s over \(remoteInbound.count) streams, \(transport.string("srtpCipher") ?? "?")"
            )
            #expect(transport.string("dtlsState") == "connected" && transport.string("iceState") == "connected")
            #expect(transport.string("srtpCipher") == "AEAD_AES_128_GCM")
            #expect(local.string("address") == "127.0.0.1" && local.string("candidateType") == "host")
            #expect((pair.int("bytesSent") ?? 0) > 100_000 && (pair.int("bytesReceived") ?? 0) > 100_000)
            #expect((pair.int("requestsSent") ?? 0) >= 1 && (pair.int("responsesReceived") ?? 0) >= 1)
            #expect(!remoteInbound.isEmpty, "\(name): no receiver report measured a round trip")
            // Our send-side estimate, fed by the other side's transport feedback on loopback.
            let estimate = pair.double("availableOutgoingBitrate") ?? 0
            #expect(estimate >= 50_000, "\(name): availableOutgoingBitrate \(estimate)")
            #expect(rtt >= 0 && rtt < 0.1, "\(name): roundTripTime \(rtt) s on loopback")
        }

        // The events, in order.
        #expect(logA.values("signaling") == ["have-local-offer", "stable"])
        #expect(logB.values("signaling") == ["have-remote-offer", "stable"])
        for log in [logA, logB] {
            #expect(log.values("gathering") == ["gathering", "complete"])
            #expect(log.values("connection") == ["connecting", "connected"])
            #expect(log.values("ice").prefix(2) == ["checking", "connected"])
            #expect(log.values("track").sorted() == ["audio", "video"])
        }

        a.close()
        b.close()
        #expect(a.connectionState == .closed && a.signalingState == .closed)
        _ = await waitFor(timeout: 2) { logA.values("connection").last == "closed" && a.onConnectionStateChange == nil }
        #expect(
            logA.values("connection").last == "closed" && logA.values("signaling").last == "closed",
            "connection \(logA.values("connection")), signaling \(logA.values("signaling"))")
        #expect(a.onConnectionStateChange == nil && a.onIceCandidate == nil, "the handlers are released after close")
    }
}

extension RTCLoopbackCallTests {
    /// Two connections whose descriptions carry every candidate (up to 2 s of gathering), each
    /// with an event log and a probe as its remote video renderer. The caller closes them.
    static func pairWithoutTrickle() throws -> (
        RTCPeerConnection, RTCPeerConnection, EventLog, EventLog, MediaProbe, MediaProbe
    ) {
        var configuration = Self.configuration()
        configuration.gatheringWait = .seconds(2)
        let a = try RTCPeerConnection(configuration: configuration)
        let b = try RTCPeerConnection(configuration: configuration)
        let logA = EventLog(), logB = EventLog()
        logA.attach(to: a)
        logB.attach(to: b)
        let probeA = MediaProbe(), probeB = MediaProbe()
        a.remoteVideoRenderer = probeA
        b.remoteVideoRenderer = probeB
        return (a, b, logA, logB, probeA, probeB)
    }

    /// One offer/answer exchange with every candidate in the descriptions (no trickle).
    static func exchange(_ offerer: RTCPeerConnection, _ answerer: RTCPeerConnection) async throws {
        try await offerer.setLocalDescription()
        try await answerer.setRemoteDescription(try #require(offerer.localDescription))
        try await answerer.setLocalDescription()
        try await offerer.setRemoteDescription(try #require(answerer.localDescription))
    }

    /// a offers audio and a receive-only video section, which b's video track answers (b → a
    /// video); then a adds a video track and offers again, and b, with no second track, receives
    /// it (a → b video). Each direction's frames are identified as the right sender's at ≥ 30 dB.
    @Test func receiveOnlySectionThenVideoAddedByRenegotiation() async throws {
        let (a, b, logA, logB, probeA, probeB) = try Self.pairWithoutTrickle()
        defer {
            a.close()
            b.close()
        }
        try a.addTrack(.audio)
        let viewer = try a.addTransceiver(.video, direction: .recvonly)
        try b.addTrack(.audio)
        let bVideo = try b.addTrack(.video)

        try await Self.exchange(a, b)
        #expect(await waitFor(timeout: 20) { a.connectionState == .connected && b.connectionState == .connected })
        let offer = try #require(a.localDescription).sdp
        #expect(offer.contains("a=mid:\(viewer.mid ?? "?")\r\n") && offer.contains("a=recvonly"))
        let feedB = PatternFeeder(
            video: bVideo.videoCapturer, audio: nil, width: Self.width, height: Self.height, tone: 0, frameOffset: 10_000)
        feedB.start()
        _ = await waitFor(timeout: 30) { feedB.framesFed.load(ordering: .relaxed) >= 60 }
        feedB.stop()

        // a adds video and offers again on the same transport.
        let aVideo = try a.addTrack(.video)
        try await Self.exchange(a, b)
        #expect(a.signalingState == .stable && b.signalingState == .stable && a.connectionState == .connected)
        let feedA = PatternFeeder(video: aVideo.videoCapturer, audio: nil, width: Self.width, height: Self.height, tone: 0)
        feedA.start()
        _ = await waitFor(timeout: 30) { feedA.framesFed.load(ordering: .relaxed) >= 60 }
        feedA.stop()
        try await Task.sleep(nanoseconds: 1_000_000_000)

        let toA = probeA.video.withLock { $0 }, toB = probeB.video.withLock { $0 }
        print(
            "RTCLoopbackCallTests renegotiation: b→a (receive-only section) \(toA.frames) frames, PSNR \(toA.psnrMean) dB; a→b (added) \(toB.frames) frames, PSNR \(toB.psnrMean) dB"
        )
        #expect(toA.frames >= 50 && toA.identified >= toA.frames * 9 / 10 && toA.indexMin >= 10_000 && toA.psnrMean >= 30)
        #expect(toB.frames >= 50 && toB.identified >= toB.frames * 9 / 10 && toB.indexMax < 10_000 && toB.psnrMean >= 30)
        #expect(aVideo.mid != nil && aVideo.mid != viewer.mid)
        #expect(logA.values("signaling") == ["have-local-offer", "stable", "have-local-offer", "stable"])
        #expect(logB.values("signaling") == ["have-remote-offer", "stable", "have-remote-offer", "stable"])
        #expect(logA.values("track") == ["audio", "video"] && logB.values("track") == ["audio", "video"])
        #expect(logA.values("connection") == ["connecting", "connected"])
    }
}

extension RTCLoopbackCallTests {
    /// The ICE ufrag of a description (its first one).
    static func ufrag(_ d: RTCSessionDescription?) -> String? {
        d?.sdp.components(separatedBy: "\r\n").first { $0.hasPrefix("a=ice-ufrag:") }.map { String($0.dropFirst(12)) }
    }

    /// An ICE restart offered by a, then one offered by b, on a call whose path stays good:
    /// each exchange carries new ICE credentials on both sides, and the call goes on through
    /// both without a gap (video keeps arriving both ways, sampled every 50 ms; no state but
    /// connected after the first connection), on the same transport.
    @Test func iceRestartOfferedByEitherSideKeepsTheCallGoing() async throws {
        let (a, b, logA, logB, probeA, probeB) = try Self.pairWithoutTrickle()
        defer {
            a.close()
            b.close()
        }
        let aVideo = try a.addTrack(.video), bVideo = try b.addTrack(.video)
        try await Self.exchange(a, b)
        #expect(await waitFor(timeout: 20) { a.connectionState == .connected && b.connectionState == .connected })
        let feedA = PatternFeeder(video: aVideo.videoCapturer, audio: nil, width: Self.width, height: Self.height, tone: 0)
        let feedB = PatternFeeder(
            video: bVideo.videoCapturer, audio: nil, width: Self.width, height: Self.height, tone: 0, frameOffset: 10_000)
        feedA.start()
        feedB.start()
        defer {
            feedA.stop()
            feedB.stop()
        }
        #expect(
            await waitFor(timeout: 20) { probeA.video.withLock { $0.frames } >= 30 && probeB.video.withLock { $0.frames } >= 30 })

        var ufrags = [Self.ufrag(a.localDescription), Self.ufrag(b.localDescription)]
        var longestGap = Duration.zero
        for (offerer, answerer) in [(a, b), (b, a)] {
            try offerer.restartIce()
            // Frames arriving at both ends, sampled while the restart is negotiated and after.
            let sampling = Task {
                var last = (probeA.video.withLock { $0.frames }, probeB.video.withLock { $0.frames })
                var since = (ContinuousClock.now, ContinuousClock.now)
                var gap = Duration.zero
                let end = ContinuousClock.now + .seconds(3)
                while ContinuousClock.now < end {
                    try? await Task.sleep(nanoseconds: 50_000_000)
                    let now = ContinuousClock.now
                    let counts = (probeA.video.withLock { $0.frames }, probeB.video.withLock { $0.frames })
                    if counts.0 > last.0 { since.0 = now } else { gap = max(gap, now - since.0) }
                    if counts.1 > last.1 { since.1 = now } else { gap = max(gap, now - since.1) }
                    last = counts
                }
                return gap
            }
            try await Self.exchange(offerer, answerer)
            let new = [Self.ufrag(a.localDescription), Self.ufrag(b.localDescription)]
            #expect(new[0] != nil && new[1] != nil && !ufrags.contains(new[0]) && !ufrags.contains(new[1]), "\(ufrags) → \(new)")
            ufrags += new
            longestGap = max(longestGap, await sampling.value)
        }
        print("RTCLoopbackCallTests ICE restart both ways: longest gap in arriving video \(longestGap); ufrags \(ufrags)")
        // 30 frames a second: a gap of a few frames at most, not a reconnection.
        #expect(longestGap < .milliseconds(400), "video stopped for \(longestGap) during a restart")
        #expect(logA.values("connection") == ["connecting", "connected"], "\(logA.values("connection"))")
        #expect(logB.values("connection") == ["connecting", "connected"], "\(logB.values("connection"))")
        #expect(a.connectionState == .connected && b.connectionState == .connected)
    }
}

/// Waits until `condition` holds, running `trickle` every 20 ms meanwhile (the signalling
/// server's delivery), or `timeout` seconds pass; with `until`, waits for that instead.
func waitFor(
    timeout: Double, _ condition: () async -> Bool, trickle: () async throws -> Void, until: (() -> Bool)? = nil
) async -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while true {
        do { try await trickle() } catch { Issue.record("trickle: \(error)") }
        if let until { if until() { return true } } else if await condition() { return true }
        if Date() > deadline { return false }
        try? await Task.sleep(nanoseconds: 20_000_000)
    }
}
