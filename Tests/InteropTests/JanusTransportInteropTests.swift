// The Janus client's transports and credentials against a real Janus started from generated
// configurations: HTTPS and secure WebSockets with certificates from a CA the test makes (the host
// name `localhost` resolved and checked), plain WebSockets, api_secret, stored tokens, a room's
// secret and pin; wrong credentials, a wrong CA, a certificate for another name and a name that
// does not resolve each end in their typed error at once.
import Foundation
import MediaCore
import MediaTestSupport
import Testing

@Suite(.serialized)
struct JanusTransportInteropTests {
    /// Makes a session at `endpoint`, a room with `options`, lists it, destroys the room and the
    /// session; returns how long it took.
    static func roundTrip(_ endpoint: JanusEndpoint, options: JanusRoomOptions = JanusRoomOptions()) async throws -> Double {
        let started = Date()
        let session = try await JanusSession.create(endpoint: endpoint)
        let handle = try await JanusVideoRoom(session: session)
        var o = options
        o.room = UInt64.random(in: 1...1_000_000)
        let room = try await handle.createRoom(o)
        let joined = try await handle.joinAsPublisher(room: room, display: "probe", pin: o.pin)
        let listed = try await handle.listParticipants(room: room)
        #expect(listed.map(\.id) == [joined.id], "\(listed)")
        try await handle.leave()
        try await handle.destroyRoom(room, secret: o.secret)
        await session.destroy()
        return Date().timeIntervalSince(started)
    }

    /// The error of `body`, with how long it took to come; nil and the time when it succeeded.
    static func failure(_ body: () async throws -> Void) async -> (error: JanusError?, seconds: Double) {
        let started = Date()
        do {
            try await body()
            return (nil, Date().timeIntervalSince(started))
        } catch let error as JanusError {
            return (error, Date().timeIntervalSince(started))
        } catch {
            Issue.record("not a JanusError: \(error)")
            return (nil, Date().timeIntervalSince(started))
        }
    }

    @Test func httpsAndWebSocketsWithCertificatesFromTheTestCA() async throws {
        let ca = try TestCertificateAuthority(serverNames: ["DNS:localhost"])
        defer { ca.remove() }
        var o = JanusServer.Options()
        o.certificate = (ca.serverCertificate, ca.serverKey)
        o.webSocket = true
        let janus = try await JanusServer.started(options: o)
        defer { janus.stop() }

        for url in [
            "https://localhost:\(janus.httpsPort)/janus", "wss://localhost:\(janus.wssPort)/", "ws://localhost:\(janus.wsPort)/",
            "http://localhost:\(janus.port)",
        ] {
            let endpoint = try JanusEndpoint(url: url, certificateAuthorityFile: ca.caFile)
            let info = try await JanusSession.info(endpoint: endpoint)
            #expect(info["server-name"]?.string == "revue-test", "\(url): \(info)")
            let took = try await Self.roundTrip(endpoint)
            print(
                "JanusTransportInteropTests: \(url): session, room, join, list, leave, destroy in \(String(format: "%.3f", took)) s"
            )
        }

        // The certificate's events arrive over wss as over a long poll: a second participant's
        // join reaches the first one's handle.
        let endpoint = try JanusEndpoint(url: "wss://localhost:\(janus.wssPort)/", certificateAuthorityFile: ca.caFile)
        let first = try await JanusSession.create(endpoint: endpoint)
        let second = try await JanusSession.create(endpoint: endpoint)
        let h1 = try await JanusVideoRoom(session: first), h2 = try await JanusVideoRoom(session: second)
        var ro = JanusRoomOptions()
        ro.room = UInt64.random(in: 1...1_000_000)
        let room = try await h1.createRoom(ro)
        _ = try await h1.joinAsPublisher(room: room)
        let joined2 = try await h2.joinAsPublisher(room: room)
        try await h2.leave()
        var sawLeaving = false
        let watch = Task {
            for await event in h1.events {
                if case .leaving(let id) = event, id == joined2.id { return true }
            }
            return false
        }
        let timer = Task {
            try? await Task.sleep(nanoseconds: 5_000_000_000)
            watch.cancel()
        }
        sawLeaving = await watch.value
        timer.cancel()
        #expect(sawLeaving, "the first participant saw the second leave through wss")
        try await h1.destroyRoom(room)
        await first.destroy()
        await second.destroy()
    }

    @Test func wrongCAOtherNameAndUnknownHostAreTypedErrors() async throws {
        let ca = try TestCertificateAuthority(serverNames: ["DNS:localhost"])
        defer { ca.remove() }
        var o = JanusServer.Options()
        o.certificate = (ca.serverCertificate, ca.serverKey)
        o.webSocket = true
        let janus = try await JanusServer.started(options: o)
        defer { janus.stop() }

        for url in ["https://localhost:\(janus.httpsPort)/janus", "wss://localhost:\(janus.wssPort)/"] {
            // A CA that signed nothing the server presents.
            let other = try JanusEndpoint(url: url, certificateAuthorityFile: ca.otherCAFile)
            let (wrongCA, t1) = await Self.failure { _ = try await JanusSession.create(endpoint: other) }
            guard case .certificateRejected? = wrongCA else {
                Issue.record("\(url) with another CA: \(String(describing: wrongCA))")
                continue
            }
            // The system's CAs do not know the test CA either.
            let system = try JanusEndpoint(url: url)
            let (unknown, _) = await Self.failure { _ = try await JanusSession.create(endpoint: system) }
            if case .certificateRejected? = unknown {
            } else {
                Issue.record("\(url) with the system CAs: \(String(describing: unknown))")
            }
            // The certificate names localhost, not 127.0.0.1.
            let byAddress = try JanusEndpoint(
                url: url.replacingOccurrences(of: "localhost", with: "127.0.0.1"), certificateAuthorityFile: ca.caFile)
            let (mismatch, t2) = await Self.failure { _ = try await JanusSession.create(endpoint: byAddress) }
            if case .nameMismatch? = mismatch {} else { Issue.record("\(url) by address: \(String(describing: mismatch))") }
            print(
                "JanusTransportInteropTests: \(url): another CA refused in \(String(format: "%.3f", t1)) s (\(wrongCA!)); by address in \(String(format: "%.3f", t2)) s (\(String(describing: mismatch)))"
            )
            #expect(t1 < 2 && t2 < 2)
        }
        let nowhere = try JanusEndpoint(url: "wss://no-such-host.invalid:\(janus.wssPort)/")
        let (unresolved, _) = await Self.failure { _ = try await JanusSession.create(endpoint: nowhere) }
        if case .resolutionFailed? = unresolved {} else { Issue.record("unknown host: \(String(describing: unresolved))") }
        // A plain client on the TLS port gets an error, not a hang.
        let plain = try JanusEndpoint(url: "ws://localhost:\(janus.wssPort)/")
        let (noTLS, t3) = await Self.failure { _ = try await JanusSession.create(endpoint: plain, requestTimeoutSeconds: 3) }
        #expect(noTLS != nil && t3 < 4, "plain WebSocket to the wss port: \(String(describing: noTLS)) after \(t3) s")
    }

    @Test func apiSecretIsSentAndAWrongOneRefusedAtOnce() async throws {
        let secret = "api-\(UInt64.random(in: 0...UInt64.max))"
        var o = JanusServer.Options()
        o.webSocket = true
        o.apiSecret = secret
        let janus = try await JanusServer.started(options: o)
        defer { janus.stop() }
        for url in ["http://127.0.0.1:\(janus.port)/janus", "ws://127.0.0.1:\(janus.wsPort)/"] {
            let took = try await Self.roundTrip(try JanusEndpoint(url: url, apiSecret: secret))
            print("JanusTransportInteropTests: \(url) with the api_secret: round trip in \(String(format: "%.3f", took)) s")
            for wrong in [nil, "not-the-secret"] {
                let endpoint = try JanusEndpoint(url: url, apiSecret: wrong)
                let (error, seconds) = await Self.failure { _ = try await JanusSession.create(endpoint: endpoint) }
                guard case .unauthorized(403, _)? = error else {
                    Issue.record("\(url) with secret \(wrong ?? "none"): \(String(describing: error))")
                    continue
                }
                #expect(seconds < 1, "\(url): refused after \(seconds) s")
            }
        }
    }

    @Test func storedTokensAreSentAndAnUnknownOneRefusedAtOnce() async throws {
        let ca = try TestCertificateAuthority(serverNames: ["DNS:localhost"])
        defer { ca.remove() }
        var o = JanusServer.Options()
        o.certificate = (ca.serverCertificate, ca.serverKey)
        o.webSocket = true
        o.tokenAuth = true
        let janus = try await JanusServer.started(options: o)
        defer { janus.stop() }
        let token = "token-\(UInt64.random(in: 0...UInt64.max))"
        try await janus.addToken(token)
        for url in ["https://localhost:\(janus.httpsPort)/janus", "wss://localhost:\(janus.wssPort)/"] {
            let took = try await Self.roundTrip(try JanusEndpoint(url: url, certificateAuthorityFile: ca.caFile, token: token))
            print("JanusTransportInteropTests: \(url) with a stored token: round trip in \(String(format: "%.3f", took)) s")
            for wrong in [nil, "not-a-token"] {
                let endpoint = try JanusEndpoint(url: url, certificateAuthorityFile: ca.caFile, token: wrong)
                let (error, seconds) = await Self.failure { _ = try await JanusSession.create(endpoint: endpoint) }
                guard case .unauthorized(403, _)? = error else {
                    Issue.record("\(url) with token \(wrong ?? "none"): \(String(describing: error))")
                    continue
                }
                #expect(seconds < 1, "\(url): refused after \(seconds) s")
            }
        }
    }

    @Test func roomPinAndSecretAreCheckedAtOnce() async throws {
        var o = JanusServer.Options()
        o.webSocket = true
        let janus = try await JanusServer.started(options: o)
        defer { janus.stop() }
        let endpoint = try JanusEndpoint(url: "ws://127.0.0.1:\(janus.wsPort)/")
        var options = JanusRoomOptions()
        options.secret = "room-secret"
        options.pin = "1234"
        print(
            "JanusTransportInteropTests: a room with a secret and a pin: \(String(format: "%.3f", try await Self.roundTrip(endpoint, options: options))) s"
        )

        let session = try await JanusSession.create(endpoint: endpoint)
        let owner = try await JanusVideoRoom(session: session)
        let guest = try await JanusVideoRoom(session: session)
        options.room = UInt64.random(in: 1...1_000_000)
        let room = try await owner.createRoom(options)
        // A wrong pin is refused as unauthorized; a missing one as a missing element (429).
        let (wrongPin, t1) = await Self.failure { _ = try await guest.joinAsPublisher(room: room, pin: "4321") }
        if case .unauthorized(433, _)? = wrongPin {
        } else {
            Issue.record("join with a wrong pin: \(String(describing: wrongPin))")
        }
        let (noPin, t2) = await Self.failure { _ = try await guest.joinAsPublisher(room: room) }
        if case .janus(429, _)? = noPin {} else { Issue.record("join without the pin: \(String(describing: noPin))") }
        print(
            "JanusTransportInteropTests: wrong pin refused in \(String(format: "%.3f", t1)) s, missing pin in \(String(format: "%.3f", t2)) s"
        )
        #expect(t1 < 1 && t2 < 1)
        _ = try await guest.joinAsPublisher(room: room, pin: "1234")
        let (wrongSecret, _) = await Self.failure { try await owner.destroyRoom(room, secret: "guess") }
        if case .unauthorized(433, _)? = wrongSecret {
        } else {
            Issue.record("destroy with a wrong secret: \(String(describing: wrongSecret))")
        }
        try await owner.destroyRoom(room, secret: "room-secret")
        await session.destroy()
    }
}
