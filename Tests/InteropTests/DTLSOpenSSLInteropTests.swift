import Foundation
import MediaCore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The hex after `Keying material: ` in openssl s_client/s_server output (`-keymatexport`).
private func keyingMaterial(_ output: String) -> [UInt8]? {
    guard let line = output.split(separator: "\n").first(where: { $0.contains("Keying material:") }),
        let hex = line.split(separator: ":").last?.trimmingCharacters(in: .whitespaces), hex.count % 2 == 0
    else { return nil }
    var out: [UInt8] = []
    var i = hex.startIndex
    while i < hex.endIndex {
        let j = hex.index(i, offsetBy: 2)
        guard let b = UInt8(hex[i..<j], radix: 16) else { return nil }
        out.append(b)
        i = j
    }
    return out
}

/// Our DTLS-SRTP handshake against the openssl command-line tools (`s_server` when we are active,
/// `s_client` when we are passive), which print the RFC 5764 exporter output themselves
/// (`-keymatexport EXTRACTOR-dtls_srtp`): our split of the keying material into client and server
/// key and salt must be exactly theirs, for the GCM and the AES-CM profile.
@Suite(.serialized, .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl"), "openssl not installed"))
struct DTLSOpenSSLInteropTests {
    @Test(arguments: [
        (DTLSTransport.Role.active, SRTPSuite.aeadAES128GCM), (.passive, .aesCM128HMACSHA1_80),
        (.active, .aesCM128HMACSHA1_80), (.passive, .aeadAES128GCM),
    ])
    func exportedKeysMatchOpenSSLTools(role: DTLSTransport.Role, suite: SRTPSuite) throws {
        let dir = InteropTempDir()
        defer { dir.remove() }
        let made = try runTool(
            "openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", dir.file("key.pem"), "-out", dir.file("cert.pem"), "-days", "2",
                "-subj", "/CN=openssl-peer",
            ])
        try #require(made.status == 0, "openssl could not make a certificate: \(made.stderr)")
        let fingerprintRun = try runTool("openssl", ["x509", "-in", dir.file("cert.pem"), "-noout", "-fingerprint", "-sha256"])
        let theirs = try #require(
            fingerprintRun.stdout.split(separator: "=").last
                .flatMap { DTLSFingerprint(sdpValue: "sha-256 " + $0.trimmingCharacters(in: .whitespacesAndNewlines)) })

        let profile = suite == .aeadAES128GCM ? "SRTP_AEAD_AES_128_GCM" : "SRTP_AES128_CM_SHA1_80"
        let length = 2 * suite.keyAndSaltLength
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let ourPort = try socket.localAddress().port
        let common = [
            "-dtls1_2", "-cert", dir.file("cert.pem"), "-key", dir.file("key.pem"), "-use_srtp", profile,
            "-keymatexport", "EXTRACTOR-dtls_srtp", "-keymatexportlen", "\(length)",
        ]
        // The tools read stdin and quit at its end: it stays open until our side of the handshake
        // is over, so each run takes as long as its handshake.
        var peer: SocketAddress?
        let tool: ToolProcess
        if role == .active {
            let port = cliFreePort()
            peer = .loopbackIPv4(port: UInt16(port))
            let command = (["openssl", "s_server", "-accept", "127.0.0.1:\(port)", "-verify", "1", "-naccept", "1"] + common)
                .joined(separator: " ")
            tool = try ToolProcess("/bin/sh", ["-c", "exec \(command)"], keepsInputOpen: true)
            usleep(500_000)
        } else {
            let command = (["openssl", "s_client", "-connect", "127.0.0.1:\(ourPort)"] + common).joined(separator: " ")
            tool = try ToolProcess("/bin/sh", ["-c", "exec \(command)"], keepsInputOpen: true)
        }

        var conf = DTLSTransport.Configuration(role: role)
        conf.handshakeTimeout = 8
        let transport = try DTLSTransport(configuration: conf)
        transport.setRemoteFingerprint(theirs)
        transport.onDatagram = { d in if let peer { _ = try? socket.send(d, to: peer) } }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 16)
        defer { buffer.deallocate() }
        let start = MonotonicTime.now
        transport.start(now: start)
        while transport.state == .new || transport.state == .connecting {
            let now = MonotonicTime.now
            if now - start > .seconds(10) { break }
            if try socket.waitUntilReadable(timeoutMilliseconds: 10) {
                let got = try socket.receive(into: buffer)
                if peer == nil { peer = got.source }
                transport.handle(
                    datagram: UnsafeRawBufferPointer(rebasing: buffer[0..<got.count]), now: .now)
            }
            transport.handleTimeout(now: .now)
        }
        let keys = transport.takeKeys()
        transport.close()
        // Our last flight may still be on its way to the tool: give it a moment before its EOF.
        usleep(300_000)
        tool.closeInput()
        let run = tool.wait(timeout: 15)
        try #require(
            transport.state == .closed || transport.state == .connected,
            "handshake with openssl \(role == .active ? "s_server" : "s_client"): \(transport.state), \(transport.statistics)\n\(run.stdout)\n\(run.stderr)"
        )
        let ours = try #require(keys)
        // Our pre-check refused none of OpenSSL's records.
        #expect(
            transport.statistics.malformedDropped == 0 && transport.statistics.unexpectedDropped == 0, "\(transport.statistics)")
        #expect(ours.suite == suite)
        #expect(run.stdout.contains("SRTP Extension negotiated, profile=\(profile)"), "\(run.stdout)")
        let exported = try #require(keyingMaterial(run.stdout), "no keying material in the tool's output: \(run.stdout)")
        #expect(exported.count == length)
        // RFC 5764 section 4.2: client key, server key, client salt, server salt.
        let (client, server) = role == .active ? (ours.send, ours.receive) : (ours.receive, ours.send)
        #expect(
            exported == client.masterKey + server.masterKey + client.masterSalt + server.masterSalt,
            "our split of the exporter output differs from openssl's")
    }
}
