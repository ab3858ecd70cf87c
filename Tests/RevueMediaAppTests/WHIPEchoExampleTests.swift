// The whip-echo example (Examples/whip-echo) as a client sees it: the built program is started,
// an RTCPeerConnection POSTs its offer over HTTP and takes the 201's answer, sends the pattern
// and a tone, and checks what comes back: its own pictures (identified by bar code) with the
// example's white square moving over them, and its tone. Then the WHIP refusals and DELETE.
// Real time: runs in an e2e lane (scripts/test).
import Foundation
import RevueMedia
import Synchronization
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Finds the square the example draws: in the middle row, the columns that are near white in
/// `echoed` and not in the pattern frame it shows.
final class SquareProbe: VideoRenderer, @unchecked Sendable {
    // Sendable: `reference` is used only by `render`, on the receive thread; counts in a Mutex.
    struct Seen {
        var frames = 0, identified = 0, withSquare = 0
        var psnrSum = 0.0
        var positions: Set<Int> = []
        var widths: [Int] = []
    }
    let seen = Mutex(Seen())
    var reference: VideoFrame?

    func render(_ frame: DecodedVideoFrame) {
        frame.withView { view in
            guard let index = SyntheticVideo.frameIndex(in: view) else {
                seen.withLock { $0.frames += 1 }
                return
            }
            if reference?.width != view.width || reference?.height != view.height {
                reference = VideoFrame(width: view.width, height: view.height)
            }
            let reference = reference!
            SyntheticVideo.render(frameIndex: index, into: reference)
            let psnr = reference.withView { Quality.psnr(view, $0) }
            var columns: [Int] = []
            let row = view.height / 2
            view.withPlanes { y, _, _ in
                reference.withView { r in
                    r.withPlanes { ry, _, _ in
                        for c in 0..<view.width {
                            let e = Int(y[row * view.strideY + c]), p = Int(ry[row * r.strideY + c])
                            if e >= 215, e - p > 30 { columns.append(c) }
                        }
                    }
                }
            }
            seen.withLock { s in
                s.frames += 1
                s.identified += 1
                s.psnrSum += psnr
                guard let first = columns.first, let last = columns.last else { return }
                s.withSquare += 1
                s.positions.insert((first + last) / 2 / 4)
                s.widths.append(last - first + 1)
            }
        }
    }
}

@Suite(.serialized)
struct WHIPEchoExampleTests {
    static let width = 320, height = 240

    /// Where `swift build` put the example: next to the test bundle.
    static func examplePath() throws -> String {
        var candidates: [String] = []
        if let exe = Bundle.main.executablePath { candidates.append(URL(fileURLWithPath: exe).deletingLastPathComponent().path) }
        candidates.append(URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().path)
        candidates.append(packageRoot + "/.build/debug")
        for dir in candidates where FileManager.default.isExecutableFile(atPath: dir + "/whip-echo") { return dir + "/whip-echo" }
        throw JSONLineProcess.Failure(description: "whip-echo is not built (swift build) in \(candidates)")
    }

    /// One HTTP request; the status, header fields and body.
    static func request(_ method: String, _ url: String, contentType: String? = nil, body: String = "") async throws -> (
        Int, [String: String], String
    ) {
        var r = URLRequest(url: URL(string: url)!)
        r.httpMethod = method
        if let contentType { r.setValue(contentType, forHTTPHeaderField: "Content-Type") }
        if !body.isEmpty { r.httpBody = Data(body.utf8) }
        let (data, response) = try await URLSession.shared.data(for: r)
        let http = try #require(response as? HTTPURLResponse)
        var headers: [String: String] = [:]
        for (k, v) in http.allHeaderFields { headers[String(describing: k).lowercased()] = String(describing: v) }
        return (http.statusCode, headers, String(decoding: data, as: UTF8.self))
    }

    @Test func exampleAnswersAWHIPOfferAndEchoesVideoWithAMovingSquareAndAudio() async throws {
        let bot = Process()
        bot.executableURL = URL(fileURLWithPath: try Self.examplePath())
        bot.arguments = ["--host", "127.0.0.1", "--port", "0", "--size", "\(Self.width)x\(Self.height)"]
        let out = Pipe()
        bot.standardOutput = out
        try bot.run()
        defer {
            bot.terminate()
            bot.waitUntilExit()
        }
        // "whip-echo: POST offers to http://127.0.0.1:PORT/whip"
        let firstLine = Mutex<String?>(nil)
        let reader = out.fileHandleForReading
        Thread {
            var text = ""
            while !text.contains("\n") {
                let chunk = reader.availableData
                if chunk.isEmpty { break }
                text += String(decoding: chunk, as: UTF8.self)
            }
            firstLine.withLock { $0 = text }
        }.start()
        _ = await waitFor(timeout: 20) { firstLine.withLock { $0 } != nil }
        let line = firstLine.withLock { $0 } ?? ""
        let endpoint = try #require(
            line.split(separator: " ").first { $0.hasPrefix("http://") }.map {
                String($0).trimmingCharacters(in: .whitespacesAndNewlines)
            },
            "whip-echo printed '\(line)' (running: \(bot.isRunning))")

        var configuration = RTCConfiguration()
        configuration.localAddress = "127.0.0.1"
        configuration.videoWidth = Self.width
        configuration.videoHeight = Self.height
        configuration.videoBitrate = 1_000_000
        let pc = try RTCPeerConnection(configuration: configuration)
        defer { pc.close() }
        let video = try pc.addTrack(.video), audio = try pc.addTrack(.audio)
        let squares = SquareProbe(), tone = MediaProbe()
        pc.remoteVideoRenderer = squares
        pc.remoteAudioSink = tone

        // WHIP refusals first: a wrong type, SDP that is not SDP, a wrong method, an unknown session.
        #expect(try await Self.request("POST", endpoint, contentType: "text/plain", body: "x").0 == 415)
        let bad = try await Self.request("POST", endpoint, contentType: "application/sdp", body: "v=0\r\nnot sdp\r\n")
        #expect(bad.0 == 400, "garbage SDP: \(bad.0) \(bad.2)")
        #expect(try await Self.request("GET", endpoint).0 == 405)
        #expect(try await Self.request("DELETE", endpoint + "/no-such-session").0 == 404)

        // The offer (every candidate in it: the bot does not trickle), the 201 and the answer.
        let offer = try await pc.createOffer()
        try await pc.setLocalDescription(offer)
        let (status, headers, answer) = try await Self.request("POST", endpoint, contentType: "application/sdp", body: offer.sdp)
        try #require(status == 201, "POST: \(status) \(answer)")
        let location = try #require(headers["location"])
        #expect(location.hasPrefix("/whip/") && headers["content-type"] == "application/sdp")
        try await pc.setRemoteDescription(RTCSessionDescription(type: .answer, sdp: answer))
        let connected = await waitFor(timeout: 20) { pc.connectionState == .connected || pc.connectionState == .failed }
        try #require(connected && pc.connectionState == .connected, "\(pc.connectionState) \(pc.error.map { "\($0)" } ?? "")")

        let feeder = PatternFeeder(
            video: video.videoCapturer, audio: audio.audioCapturer, width: Self.width, height: Self.height, tone: 440)
        feeder.start()
        _ = await waitFor(timeout: 60) { feeder.framesFed.load(ordering: .relaxed) >= 150 }
        feeder.stop()
        try await Task.sleep(nanoseconds: 1_000_000_000)

        let s = squares.seen.withLock { $0 }, au = tone.audio.withLock { $0 }
        let meanWidth = s.widths.isEmpty ? 0 : s.widths.reduce(0, +) / s.widths.count
        let psnr = s.identified > 0 ? s.psnrSum / Double(s.identified) : 0
        print(
            "WHIPEchoExampleTests echoed: \(s.frames) frames of \(feeder.framesFed.load(ordering: .relaxed)) sent, \(s.identified) identified, \(s.withSquare) with the square at \(s.positions.count) positions, width \(meanWidth) px, PSNR against the pattern \(psnr) dB; audio RMS \(au.rms), \(au.crossingsPerSecond) crossings/s"
        )
        #expect(s.frames >= 90, "\(s.frames) frames came back")
        #expect(s.identified >= s.frames * 9 / 10, "our own pictures come back: \(s.identified) of \(s.frames)")
        #expect(s.withSquare >= s.identified * 9 / 10, "the square is drawn on \(s.withSquare) of \(s.identified)")
        // A sixth of the height (40 px at 240), moving: many positions in 3 s.
        #expect(meanWidth >= 30 && meanWidth <= 50, "square width \(meanWidth) px")
        #expect(s.positions.count >= 10, "the square was at \(s.positions.count) positions")
        #expect(psnr >= 20, "echoed PSNR \(psnr) dB")
        #expect(
            au.rms > 0.2 && au.rms < 0.5 && abs(au.crossingsPerSecond - 880) < 44,
            "echoed tone \(au.rms) \(au.crossingsPerSecond)")

        // DELETE ends the session: the bot closes its connection, and ours sees DTLS close.
        let origin = endpoint.components(separatedBy: "/whip").first ?? endpoint
        #expect(try await Self.request("DELETE", origin + location).0 == 200)
        #expect(await waitFor(timeout: 10) { pc.connectionState == .closed }, "after DELETE: \(pc.connectionState)")
        #expect(try await Self.request("DELETE", origin + location).0 == 404)
    }
}
