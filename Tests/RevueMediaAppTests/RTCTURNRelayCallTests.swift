// Two RTCPeerConnections that may use only relayed candidates (iceTransportPolicy .relay), their
// TURN server given as a `turn:` URL with a username and credential, through a real coturn this
// test starts from a generated configuration on loopback: once with the server reached over UDP,
// once over TCP (`?transport=tcp`). Every offered candidate must be relayed, the selected pair
// relayed on both ends (getStats), and video and audio must arrive through the relay. Real time
// with an outside server: runs in lane 3 (scripts/test).
import Foundation
import RevueMedia
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A coturn `turnserver` on 127.0.0.1 with one long-term user, stopped by `stop()`.
final class TURNServerProcess {
    static let user = "alice", password = "wonderland"
    let port: UInt16
    let dir: URL
    let process = Process()
    let output = Pipe()

    /// A free TCP port on 127.0.0.1 (the system's choice, released at once).
    static func freePort() throws -> UInt16 {
        let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(s) }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(s, $0, length) == 0 && getsockname(s, $0, &length) == 0 }
        }
        guard ok else { throw JSONLineProcess.Failure(description: "no free port: errno \(errno)") }
        return UInt16(bigEndian: a.sin_port)
    }

    init() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/turnserver") else {
            throw JSONLineProcess.Failure(description: "coturn's turnserver is not installed: run scripts/install-deps")
        }
        port = try Self.freePort()
        let relayBase = try Self.freePort()
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-app-turn-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let configuration = """
            listening-ip=127.0.0.1
            listening-port=\(port)
            relay-ip=127.0.0.1
            min-port=\(relayBase)
            max-port=\(Int(relayBase) + 7)
            realm=revue.test
            lt-cred-mech
            user=\(Self.user):\(Self.password)
            fingerprint
            allow-loopback-peers
            no-tls
            no-dtls
            no-cli
            no-tcp-relay
            log-file=stdout
            simple-log
            pidfile=\(dir.path)/turnserver.pid
            userdb=\(dir.path)/turndb

            """
        try configuration.write(to: dir.appendingPathComponent("turnserver.conf"), atomically: true, encoding: .utf8)
        // The test process blocks signals in the spawning thread and a child inherits the mask:
        // clear it before exec so that SIGTERM stops coturn.
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [
            "-c",
            "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, set()); os.execv(sys.argv[1], sys.argv[1:])",
            "/usr/bin/turnserver", "-c", dir.path + "/turnserver.conf",
        ]
        process.standardOutput = output
        process.standardError = output
        try process.run()
        // Ready when it accepts a TCP connection (it opens its UDP listener first).
        for _ in 0..<100 {
            let s = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = port.bigEndian
            a.sin_addr.s_addr = inet_addr("127.0.0.1")
            let rc = withUnsafePointer(to: &a) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(s, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            close(s)
            if rc == 0 { return }
            guard process.isRunning else { break }
            usleep(100_000)
        }
        let why = stop()
        throw JSONLineProcess.Failure(description: "coturn did not come up on 127.0.0.1:\(port): \(why.suffix(2000))")
    }

    /// Stops coturn and returns what it wrote. Idempotent.
    @discardableResult
    func stop() -> String {
        if process.isRunning {
            process.terminate()
            let deadline = Date().addingTimeInterval(5)
            while process.isRunning && Date() < deadline { usleep(20_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: dir)
        return String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
    }
}

@Suite(.serialized)
struct RTCTURNRelayCallTests {
    static let width = 320, height = 240

    @Test(arguments: ["udp", "tcp"])
    func relayOnlyConnectionsCarryMediaThroughCoturn(transport: String) async throws {
        let server = try TURNServerProcess()
        defer { server.stop() }
        var configuration = RTCConfiguration(iceServers: [
            RTCIceServer(
                urls: ["turn:127.0.0.1:\(server.port)?transport=\(transport)"], username: TURNServerProcess.user,
                credential: TURNServerProcess.password)
        ])
        configuration.iceTransportPolicy = .relay
        configuration.localAddress = "127.0.0.1"
        configuration.videoWidth = Self.width
        configuration.videoHeight = Self.height
        configuration.videoBitrate = 600_000
        let a = try RTCPeerConnection(configuration: configuration)
        let b = try RTCPeerConnection(configuration: configuration)
        defer {
            a.close()
            b.close()
        }
        let aVideo = try a.addTrack(.video), aAudio = try a.addTrack(.audio)
        try b.addTrack(.audio)
        let probe = MediaProbe()
        b.remoteVideoRenderer = probe
        b.remoteAudioSink = probe

        try await a.setLocalDescription()
        let offer = try #require(a.localDescription)
        let offered = offer.sdp.components(separatedBy: "\r\n").filter { $0.hasPrefix("a=candidate:") }
        #expect(!offered.isEmpty && offered.allSatisfy { $0.contains(" typ relay") }, "offered \(offered)")
        try await b.setRemoteDescription(offer)
        try await b.setLocalDescription()
        try await a.setRemoteDescription(try #require(b.localDescription))
        let connected = await waitFor(timeout: 30) {
            (a.connectionState == .connected && b.connectionState == .connected) || a.connectionState == .failed
                || b.connectionState == .failed
        }
        try #require(
            connected && a.connectionState == .connected && b.connectionState == .connected,
            "a \(a.connectionState) \(a.error.map { "\($0)" } ?? ""), b \(b.connectionState) \(b.error.map { "\($0)" } ?? "")")

        let feeder = PatternFeeder(
            video: aVideo.videoCapturer, audio: aAudio.audioCapturer, width: Self.width, height: Self.height, tone: 440)
        feeder.start()
        _ = await waitFor(timeout: 30) { feeder.framesFed.load(ordering: .relaxed) >= 90 }
        feeder.stop()
        try await Task.sleep(nanoseconds: 1_000_000_000)
        let v = probe.video.withLock { $0 }, au = probe.audio.withLock { $0 }
        var types: [String] = []
        for pc in [a, b] {
            let stats = await pc.getStats()
            let pair = try #require(stats["T01"]?.string("selectedCandidatePairId").flatMap { stats[$0] })
            types += [pair.string("localCandidateId"), pair.string("remoteCandidateId")].map {
                $0.flatMap { stats[$0]?.string("candidateType") } ?? "?"
            }
        }
        print(
            "RTCTURNRelayCallTests \(transport): \(offered.count) relayed candidates offered, pairs \(types), \(v.frames) frames, PSNR \(v.psnrMean) dB, audio RMS \(au.rms), \(au.crossingsPerSecond) crossings/s"
        )
        #expect(types == ["relay", "relay", "relay", "relay"], "selected pairs \(types)")
        #expect(v.frames >= 75 && v.identified >= v.frames * 9 / 10 && v.psnrMean >= 30, "\(v.frames) frames, \(v.psnrMean) dB")
        #expect(au.rms > 0.2 && au.rms < 0.5 && abs(au.crossingsPerSecond - 880) < 44, "tone \(au.rms) \(au.crossingsPerSecond)")
    }
}
