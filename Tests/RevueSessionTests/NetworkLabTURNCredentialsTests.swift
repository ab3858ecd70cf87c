import Foundation
import MediaCore
import Synchronization
import Testing

@testable import RevueSession

#if canImport(Glibc)
    import Glibc
#endif

/// A rendezvous node paired with its coturn by a shared secret, as a deployment runs them
/// (docs/turn.md, Deployment): coturn checks `use-auth-secret` credentials, the node hands its
/// registered peers credentials made from the secret, and the peers are given nothing
/// TURN-related. Calls between symmetric NATs then go through coturn; credentials are renewed
/// and a call outlives the ones its allocations were made with; coturn refuses expired
/// credentials and the node answers nobody it did not register. Root only.
@Suite(
    .enabled(
        if: networkLabHasTURN,
        "needs root, ip, nft, coturn's turnserver and a built revue-node: the TURN credentials lab cases are skipped"))
struct NetworkLabTURNCredentialsTests {
    /// The user names of coturn's granted allocations ("user <NAME>" in its log lines).
    static func allocationUsers(_ lab: NetworkLab) -> [String] {
        lab.turnAllocations().compactMap { line in
            guard let start = line.range(of: "user <"), let end = line[start.upperBound...].firstIndex(of: ">") else {
                return nil
            }
            return String(line[start.upperBound..<end])
        }
    }

    /// Whether `user` has coturn's shared-secret form "<expiry>:<16 hex>".
    static func isSharedSecretUser(_ user: String) -> Bool {
        let parts = user.split(separator: ":")
        return parts.count == 2 && UInt64(parts[0]) != nil && parts[1].count == 16 && parts[1].allSatisfy(\.isHexDigit)
    }

    /// The `counters` of a peer.
    static func counters(_ call: LabCall, _ p: NodeProcess) async -> [String: Any] {
        await call.call(p, ["cmd": "counters"]) ?? [:]
    }

    /// Two homes behind symmetric NATs, peers started with `--rendezvous` alone (no `--stun`, no
    /// `--turn`): each gets credentials from the node, and the call's media goes both ways
    /// through coturn, whose allocations carry the node's user names.
    @Test func symmetricHomesCallThroughTheNodesCoturnWithNoTURNConfiguration() async throws {
        let lab = try await NetworkLab(
            .init(home1: .symmetric, home2: .symmetric, servicesDefaultRoute: false, sharedSecretLifetime: 3600))
        defer { lab.teardown() }
        let call = try LabCall(lab, arguments: [])
        defer { call.stop() }
        try await call.befriend()
        try await call.startCall()
        let failures = await call.mediaBothWays(seconds: 3)
        let pa = await call.mediaPath(call.a, about: call.bId) ?? [:]
        let pb = await call.mediaPath(call.b, about: call.aId) ?? [:]
        let j = call.judged
        let users = Self.allocationUsers(lab)
        let ca = await Self.counters(call, call.a), cb = await Self.counters(call, call.b)
        print(
            "node-issued TURN credentials, symmetric/symmetric: a decoded \(j.aFromB) of \(j.fedByB) frames from b, "
                + "b \(j.bFromA) of \(j.fedByA) from a; a's pair \(pa["local"] ?? "none") -> \(pa["remote"] ?? "none"), "
                + "b's pair \(pb["local"] ?? "none") -> \(pb["remote"] ?? "none"); coturn relayed \(lab.relayBytes()) bytes; "
                + "allocations by \(users); credentials received a \(ca["turnCredentialsReceived"] ?? "?"), "
                + "b \(cb["turnCredentialsReceived"] ?? "?")")
        #expect(failures.isEmpty, "\(failures)\n\(call.diagnosis())")
        #expect(j.aFromB > 0 && j.bFromA > 0)
        let legs = try #require(await call.legsRelayed(), "no selected pair reported\n\(call.diagnosis())")
        #expect(legs == [true, true], "legs relayed: \(legs)\n\(call.diagnosis())")
        #expect(pa["relayed"] as? Bool == true || pa["remoteType"] as? String == "relay")
        #expect(!users.isEmpty && users.allSatisfy(Self.isSharedSecretUser), "\(users)")
        #expect((ca["turnCredentialsReceived"] as? Int ?? 0) >= 1 && (cb["turnCredentialsReceived"] as? Int ?? 0) >= 1)
        #expect(lab.relayBytes() > 0)
    }

    /// The same with the node offering coturn's TLS port alone (`turns:`): the peers, given
    /// nothing TURN-related, check coturn's certificate against the CA store (the lab's CA stands
    /// in for a public one) and relay the call over TLS, with the node's credentials.
    @Test func symmetricHomesCallThroughTheNodesCoturnOverTLS() async throws {
        var options = NetworkLab.Options(
            home1: .symmetric, home2: .symmetric, servicesDefaultRoute: false, sharedSecretLifetime: 3600)
        options.turnTLS = true
        let lab = try await NetworkLab(options)
        defer { lab.teardown() }
        let call = try LabCall(lab, arguments: [])
        defer { call.stop() }
        try await call.befriend()
        try await call.startCall()
        let failures = await call.mediaBothWays(seconds: 3)
        let j = call.judged
        let users = Self.allocationUsers(lab)
        let traffic = lab.turnClientTraffic()
        let pa = await call.mediaPath(call.a, about: call.bId) ?? [:]
        let pb = await call.mediaPath(call.b, about: call.aId) ?? [:]
        print(
            "node-issued turns: credentials, symmetric/symmetric: a decoded \(j.aFromB) of \(j.fedByB) frames from b, "
                + "b \(j.bFromA) of \(j.fedByA) from a; a's pair \(pa["local"] ?? "none") -> \(pa["remote"] ?? "none"), "
                + "b's pair \(pb["local"] ?? "none") -> \(pb["remote"] ?? "none"); coturn relayed \(lab.relayBytes()) bytes; "
                + "client traffic \(traffic); allocations by \(users)")
        #expect(failures.isEmpty, "\(failures)\n\(call.diagnosis())")
        #expect(try #require(await call.legsRelayed(), "no selected pair reported\n\(call.diagnosis())") == [true, true])
        #expect(traffic.tls > 0 && traffic.tcp == 0, "\(traffic)\n\(call.diagnosis())")
        #expect(!users.isEmpty && users.allSatisfy(Self.isSharedSecretUser), "\(users)")
    }

    /// Credentials that last 6 s, coturn allocations capped at 4 s (so refreshed every 2 s) and
    /// nonces that go stale every 2 s: the peers renew their credentials every 3 s, and a call
    /// carries media both ways through coturn for 12 s, well past the expiry of the credentials
    /// its allocations were made with (coturn keeps an allocation's key once it authenticated it;
    /// `coturnRefusesExpiredCredentialsAndKeepsAllocationsMadeBefore` checks the refreshes).
    @Test func credentialsAreRenewedAndACallOutlivesThem() async throws {
        let lab = try await NetworkLab(
            .init(
                home1: .symmetric, home2: .symmetric, servicesDefaultRoute: false, sharedSecretLifetime: 6,
                turnExtraConfiguration: ["max-allocate-lifetime=4", "stale-nonce=2"]))
        defer { lab.teardown() }
        let call = try LabCall(lab, arguments: [])
        defer { call.stop() }
        try await call.befriend()
        try await call.startCall()
        let failures = await call.mediaBothWays(seconds: 12)
        let end = Date().timeIntervalSince1970
        let j = call.judged
        let users = Self.allocationUsers(lab)
        let expiries = users.compactMap { UInt64($0.split(separator: ":").first ?? "") }
        let ca = await Self.counters(call, call.a)
        let received = ca["turnCredentialsReceived"] as? Int ?? 0
        print(
            "TURN credentials lasting 6 s: a received \(received) sets; allocations by \(users) (expired "
                + "\(expiries.map { Int(end) - Int($0) }) s before the call's end); a decoded \(j.aFromB) of \(j.fedByB) frames from b, b \(j.bFromA) of \(j.fedByA) from a over 12 s"
        )
        #expect(failures.isEmpty, "\(failures)\n\(call.diagnosis())")
        #expect(try #require(await call.legsRelayed()) == [true, true])
        #expect(received >= 3, "credentials were not renewed: \(ca)")
        #expect(!expiries.isEmpty && expiries.allSatisfy { Double($0) < end - 2 }, "\(users) at \(end)")
    }

    /// coturn, paired with the node's secret, refuses credentials whose expiry has passed and
    /// credentials made with another secret (a 401 to our TURN client), and grants fresh ones.
    /// An allocation made with credentials that expire 3 s later is refreshed after they expired
    /// (coturn caps allocations at 4 s and lets nonces go stale every 2 s here), through new
    /// nonces, and stays allocated. A stranger in a home asking the node for credentials with a
    /// registration key it never registered gets no answer.
    @Test func coturnRefusesExpiredCredentialsAndKeepsAllocationsMadeBefore() async throws {
        let lab = try await NetworkLab(
            .init(
                home1: .cone, home2: .cone, sharedSecretLifetime: 60,
                turnExtraConfiguration: ["max-allocate-lifetime=4", "stale-nonce=2"]))
        defer { lab.teardown() }
        let turn = try SocketAddress(host: lab.serviceHost, port: NetworkLab.turnPort)
        let now = UInt64(Date().timeIntervalSince1970)
        let secret = SecretKeyBytes(Array(NetworkLab.turnSecret.utf8))
        let cases: [(String, TURNCredentials)] = [
            ("fresh", TURNCredentials.make(secret: secret, id: "0123456789abcdef", expiry: now + 60)),
            ("expired 10 s ago", TURNCredentials.make(secret: secret, id: "0123456789abcdef", expiry: now - 10)),
            (
                "another secret",
                TURNCredentials.make(
                    secret: SecretKeyBytes(Array("not-the-shared-secret-0123".utf8)), id: "0123456789abcdef", expiry: now + 60)
            ),
        ]
        var outcomes: [String: TURNClient.State] = [:]
        for (label, credentials) in cases {
            outcomes[label] = try await allocate(lab, turn, credentials).state
        }
        print("coturn with the shared secret: \(cases.map { "\($0.0) \($0.1.username): \(outcomes[$0.0]!)" })")
        if case .allocated = outcomes["fresh"] {} else { Issue.record("fresh credentials refused: \(outcomes)") }
        for label in ["expired 10 s ago", "another secret"] {
            guard case .failed(let reason) = outcomes[label] else {
                Issue.record("\(label): \(String(describing: outcomes[label]))")
                continue
            }
            #expect(reason.contains("401"), "\(label): \(reason)")
        }

        // Allocated at most 1 s before the credentials expire (tried again if the second turned
        // first): the allocation's refresh 2 s in, and the permission refreshed every 0.5 s
        // through nonces gone stale, all come after the expiry.
        var late: (state: TURNClient.State, statistics: TURNClientStatistics)?
        for _ in 0..<3 {
            let expiring = TURNCredentials.make(
                secret: secret, id: "0123456789abcdef", expiry: UInt64(Date().timeIntervalSince1970) + 1)
            let outcome = try await allocate(
                lab, turn, expiring, keep: 8, permission: try SocketAddress(host: lab.publicAddress(2), port: 9))
            if case .failed = outcome.state, outcome.statistics.allocationRefreshes == 0 { continue }
            late = outcome
            break
        }
        let (state, statistics) = try #require(late)
        print(
            "an allocation made under 1 s before its credentials expired, 8 s later: \(state), "
                + "\(statistics.allocationRefreshes) refreshes, \(statistics.staleNonceRetries) stale-nonce retries, "
                + "\(statistics.permissionFailures) permission failures")
        if case .allocated = state {} else { Issue.record("the allocation did not outlive its credentials: \(state)") }
        #expect(statistics.allocationRefreshes >= 1 && statistics.staleNonceRetries >= 2, "\(statistics)")
        #expect(statistics.permissionFailures == 0, "\(statistics)")

        // A stranger: a fresh registration key, a MAC key of its own making.
        let socket = try lab.inNamespace(lab.home(1)) { try UDPSocket(bindingTo: .anyIPv4(port: 0)) }
        defer { socket.close() }
        let node = try SocketAddress(host: lab.serviceHost, port: NetworkLab.rendezvousPort)
        var w = ByteWriter()
        w.u8(PacketType.turnCredentialsRequest.rawValue)
        w.u8(revueProtocolVersion)
        w.append(KeyPair().publicKey)
        w.u64(12_345)
        w.append(
            Sodium.seal(
                key: RandomBytes.bytes(32), nonce: 12_345, ad: w.bytes,
                plaintext: [UInt8](repeating: 0, count: RendezvousAuth.credentialsPaddingLength)))
        for _ in 0..<3 { _ = try w.bytes.withUnsafeBytes { try socket.send($0, to: node) } }
        let answered = try socket.waitUntilReadable(timeoutMilliseconds: 1500)
        print("a stranger's credentials requests to the node: \(answered ? "answered" : "no answer in 1.5 s")")
        #expect(!answered)
    }

    /// Allocates on `turn` from home 1 over UDP with `credentials` through our TURN client; the
    /// state it ends in (allocated or failed), or its last state after 8 s; with `keep`, the state
    /// `keep` seconds after it was allocated. With the client's counters then. With `permission`,
    /// a permission for that address refreshed every 0.5 s.
    func allocate(
        _ lab: NetworkLab, _ turn: SocketAddress, _ credentials: TURNCredentials, keep: Double? = nil,
        permission: SocketAddress? = nil
    ) async throws -> (state: TURNClient.State, statistics: TURNClientStatistics) {
        let socket = try lab.inNamespace(lab.home(1)) { try UDPSocket(bindingTo: .anyIPv4(port: 0)) }
        let server = ICEServer(
            kind: .turn, address: turn, username: credentials.username, password: credentials.password)
        let client = TURNClient(server: server, socket: socket, queue: DispatchQueue(label: "lab.turn"))
        let reading = Reading()
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 2048)
            while !reading.stop.withLock({ $0 }) {
                guard (try? socket.waitUntilReadable(timeoutMilliseconds: 50)) == true,
                    let got = try? buffer.withUnsafeMutableBytes({ try socket.receive(into: $0) }), let from = got.source
                else { continue }
                buffer.withUnsafeBytes {
                    _ = client.handleDatagram(UnsafeRawBufferPointer(rebasing: $0[0..<got.count]), from: from)
                }
            }
            reading.done.signal()
        }
        reader.start()
        defer {
            client.close()
            reading.stop.withLock { $0 = true }
            reading.done.wait()
            socket.close()
        }
        if let permission {
            var timing = TURNClientTiming()
            timing.permissionRefresh = 0.5
            client.timing = timing
            client.createPermission(permission)
        }
        client.allocate()
        let deadline = MonotonicTime.now + .seconds(8)
        while MonotonicTime.now < deadline {
            switch client.state {
            case .allocated:
                if let keep { try await Task.sleep(for: .seconds(keep)) }
                return (client.state, client.statistics)
            case .failed: return (client.state, client.statistics)
            default: try await Task.sleep(for: .milliseconds(20))
            }
        }
        return (client.state, client.statistics)
    }
}

/// The stop flag of a test's socket reader and its end. Thread rule: any thread.
private final class Reading: Sendable {
    let stop = Mutex(false)
    let done = DispatchSemaphore(value: 0)
}
