// TURN credentials from a rendezvous node, on simulated time: the credential format against
// coturn's shared-secret scheme, the sealed request and answer byte by byte (who gets an answer,
// replays, the rates), and whole peers that fetch, renew and use the credentials with no TURN
// configuration of their own.
import Foundation
import MediaCore
import MediaTestSupport
import Testing

@testable import RevueSession

extension SimulatedRendezvousClient {
    /// A credentials request under this client's registration key and MAC key with `nonce` (the
    /// next timestamp when nil).
    func credentialsRequest(nonce: UInt64? = nil) -> (bytes: [UInt8], nonce: UInt64) {
        if nonce == nil { timestamp += 1 }
        let n = nonce ?? timestamp
        var w = ByteWriter()
        w.u8(PacketType.turnCredentialsRequest.rawValue)
        w.u8(revueProtocolVersion)
        w.append(keys.publicKey)
        w.u64(n)
        w.append(
            Sodium.seal(
                key: macKey ?? [UInt8](repeating: 0, count: 32), nonce: n, ad: w.bytes,
                plaintext: [UInt8](repeating: 0, count: RendezvousAuth.credentialsPaddingLength)))
        return (w.bytes, n)
    }

    /// Credentials answers received so far.
    var credentialsAnswers: [[UInt8]] { replies.filter { $0.first == PacketType.turnCredentials.rawValue } }

    /// Opens a credentials answer to the request with `nonce`: how long it is valid and its servers.
    func openCredentials(_ reply: [UInt8], nonce: UInt64) -> (validFor: UInt32, servers: [ICEServer])? {
        guard let macKey, reply.count >= 10,
            let plain = Sodium.open(
                key: macKey, nonce: nonce | RendezvousAuth.credentialsNonceBit, ad: Array(reply[0..<10]),
                ciphertext: reply[10...])
        else { return nil }
        return TURNCredentialsWire.parse(plain)
    }

    /// Sends one request and opens its answer (nil when none came).
    func askCredentials() -> (validFor: UInt32, servers: [ICEServer])? {
        let before = credentialsAnswers.count
        let (bytes, nonce) = credentialsRequest()
        port.send(bytes, to: lab.nodeAddress)
        lab.settle()
        guard credentialsAnswers.count > before, let reply = credentialsAnswers.last else { return nil }
        return openCredentials(reply, nonce: nonce)
    }
}

@MainActor
@Suite(.serialized) struct SimulatedTURNCredentialsTests {
    /// The secret of these tests (coturn's `static-auth-secret`).
    static let secretText = "revue-lab-secret-0123456789"
    static var secret: SecretKeyBytes { SecretKeyBytes(Array(secretText.utf8)) }
    /// Two servers: UDP and TCP on one address.
    static let servers = [
        ICEServer(kind: .turn, address: SocketAddress(ipv4: 127, 77, 0, 200, port: 3478)),
        ICEServer(kind: .turn, address: SocketAddress(ipv4: 127, 77, 0, 200, port: 3478), transport: .tcp),
    ]

    static func offer(lifetime: UInt32 = 3600) throws -> TURNOffer {
        try TURNOffer(servers: servers, secret: secret, lifetime: lifetime)
    }

    /// The user name is "<expiry>:<id>" and the password base64(HMAC-SHA1(secret, user name)),
    /// as coturn computes it for `use-auth-secret` (the expected value is Python's
    /// `base64.b64encode(hmac.new(secret, username, hashlib.sha1).digest())`); base64 follows
    /// RFC 4648's vectors.
    @Test func credentialsAreCoturnsSharedSecretScheme() {
        let c = TURNCredentials.make(secret: Self.secret, id: "0123456789abcdef", expiry: 1_700_000_000)
        #expect(c.username == "1700000000:0123456789abcdef")
        #expect(c.password == "0miuuPXK8vXH9ymlaSoM95J2PXo=")
        #expect(c.expiry == 1_700_000_000)
        let vectors = [
            "": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=", "foobar": "Zm9vYmFy",
        ]
        for (plain, encoded) in vectors { #expect(Base64.encode(Array(plain.utf8)) == encoded) }
        print("TURN credentials: user \(c.username), password \(c.password)")
    }

    /// The largest answer (four IPv6 servers, the longest user name and password) is no larger
    /// than a request, so the node never amplifies; the URL forms parse; offers and secret files
    /// are checked.
    @Test func requestsAreNeverSmallerThanAnswersAndConfigurationIsChecked() throws {
        // The largest answer: four IPv6 TLS servers whose names fill their budget.
        let nameLength = RendezvousAuth.maxTURNServerNamesLength / RendezvousAuth.maxTURNServers
        let v6 = (0..<RendezvousAuth.maxTURNServers).map { i in
            ICEServer(
                kind: .turn, address: try! SocketAddress(parsing: "[2001:db8::\(i + 1)]:5349"),
                transport: .tls,
                tls: ICEServer.TLSVerification(serverName: String(repeating: "t", count: nameLength - 4) + ".lab"))
        }
        let longest = TURNCredentials(
            username: String(repeating: "9", count: RendezvousAuth.maxTURNUsernameLength),
            password: String(repeating: "x", count: RendezvousAuth.maxTURNPasswordLength))
        let plain = TURNCredentialsWire.plaintext(validFor: 3600, credentials: longest, servers: v6)
        #expect(10 + plain.count + 16 == RendezvousAuth.maxCredentialsLength)
        #expect(RendezvousAuth.maxCredentialsLength <= RendezvousAuth.credentialsRequestLength)
        // TLS servers keep their names through the wire; the names' budget and characters are checked.
        let parsed = try #require(TURNCredentialsWire.parse(plain)).servers
        #expect(parsed.map(\.transport) == v6.map { _ in .tls } && parsed.map(\.tls.serverName) == v6.map(\.tls.serverName))
        #expect(parsed.allSatisfy { $0.username == longest.username && $0.password == longest.password })
        var tooLong = plain
        tooLong[plain.count - nameLength - 1] = UInt8(nameLength + 1)
        #expect(TURNCredentialsWire.parse(tooLong) == nil)
        var badName = plain
        badName[plain.count - 1] = UInt8(ascii: "/")
        #expect(TURNCredentialsWire.parse(badName) == nil)
        let named = try TURNOffer.server(parsing: "turns:localhost:5349")
        #expect(named.transport == .tls && named.tls.serverName == "localhost" && named.address.port == 5349)
        let numeric = try TURNOffer.server(parsing: "turns:203.0.113.1:5349")
        #expect(numeric.transport == .tls && numeric.tls.serverName == nil)
        let offer = try TURNOffer(servers: [named, numeric], secret: Self.secret)
        #expect(offer.servers.map(\.tls.serverName) == ["localhost", nil])
        // Three names of 16 bytes and one of 20: past the 64-byte budget.
        var long = named
        long.tls.serverName = String(repeating: "n", count: 16) + ".lab"
        #expect(throws: RevueError.self) { try TURNOffer(servers: Array(v6.prefix(3)) + [long], secret: Self.secret) }
        _ = try TURNOffer(servers: Array(v6.prefix(3)) + [named], secret: Self.secret)
        let udp = try TURNOffer.server(parsing: "turn:203.0.113.1:3478")
        #expect(udp.address == SocketAddress(ipv4: 203, 0, 113, 1, port: 3478) && udp.transport == .udp)
        let tcp = try TURNOffer.server(parsing: "turn:[2001:db8::1]:3478?transport=tcp")
        #expect(tcp.transport == .tcp && tcp.address.family == .ipv6)
        for bad in [
            "stun:1.2.3.4:3478", "turn:1.2.3.4", "turn:1.2.3.4:3478?transport=sctp", "turn:0.0.0.0:3478",
            "turn:1.2.3.4:3478?transport=tls", "turns:1.2.3.4:5349?transport=tcp",
        ] {
            #expect(throws: RevueError.self) { try TURNOffer.server(parsing: bad) }
        }
        #expect(throws: RevueError.self) { try TURNOffer(servers: [], secret: Self.secret) }
        #expect(throws: RevueError.self) { try TURNOffer(servers: [udp, udp], secret: Self.secret) }
        #expect(throws: RevueError.self) { try TURNOffer(servers: [udp], secret: SecretKeyBytes(Array("short".utf8))) }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-turn-secret-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/secret"
        try (Self.secretText + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o600)
        #expect(try TURNOffer.readSecret(path: file).exposedCopy == Array(Self.secretText.utf8))
        chmod(file, 0o644)
        #expect(throws: RevueError.self) { try TURNOffer.readSecret(path: file) }
        try "has space in it 0123456789\n".write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o600)
        #expect(throws: RevueError.self) { try TURNOffer.readSecret(path: file) }
    }

    /// A registered client gets sealed credentials for the node's servers: its user name's
    /// expiry is the node's wall clock plus the lifetime, its password the HMAC coturn expects,
    /// and the same registration key keeps its id. A key that never registered, a registered key
    /// asking from another endpoint, a replayed request, a nonce not above the last answered and
    /// a request sealed under the wrong key get nothing (each counted as dropped); a node without
    /// an offer answers with no server.
    @Test func onlyRegisteredEndpointsGetCredentialsAndEachNonceOnce() throws {
        var limits = RendezvousNode.Limits()
        limits.credentialBurst = 10
        let lab = RendezvousLab(limits: limits)
        let node = lab.node
        node.turnOffer = try Self.offer()
        node.wallClock = { 1_800_000_000 }
        let peer = lab.client(SocketAddress(ipv4: 127, 67, 0, 1, port: 5000))
        #expect(peer.register())
        let answer = try #require(peer.askCredentials())
        #expect(answer.validFor == 3600)
        #expect(answer.servers.map(\.address) == Self.servers.map(\.address))
        #expect(answer.servers.map(\.transport) == [.udp, .tcp])
        let first = answer.servers[0]
        let id = String(first.username.split(separator: ":")[1])
        #expect(first.username == "1800003600:\(id)" && id.count == 16)
        #expect(first.password == TURNCredentials.make(secret: Self.secret, id: id, expiry: 1_800_003_600).password)
        let again = try #require(peer.askCredentials())
        #expect(again.servers[0].username == first.username)

        // Never registered: a fresh key with a MAC key of its own making.
        let dropped = node.droppedPackets
        let stranger = lab.client(SocketAddress(ipv4: 127, 68, 0, 1, port: 5000))
        stranger.macKey = RandomBytes.bytes(32)
        #expect(stranger.askCredentials() == nil && stranger.credentialsAnswers.isEmpty)
        // The registered key from another endpoint (someone who saw its requests).
        let elsewhere = lab.client(SocketAddress(ipv4: 127, 68, 0, 2, port: 5000))
        elsewhere.keys = peer.keys
        elsewhere.macKey = peer.macKey
        elsewhere.timestamp = peer.timestamp + 100
        #expect(elsewhere.askCredentials() == nil)
        // A replay, and a nonce below the last answered.
        let captured = peer.credentialsRequest()
        peer.port.send(captured.bytes, to: lab.nodeAddress)
        lab.settle()
        let answered = peer.credentialsAnswers.count
        peer.port.send(captured.bytes, to: lab.nodeAddress)
        peer.port.send(peer.credentialsRequest(nonce: captured.nonce - 1).bytes, to: lab.nodeAddress)
        lab.settle()
        #expect(peer.credentialsAnswers.count == answered)
        // Sealed under another key.
        let realKey = peer.macKey
        peer.macKey = RandomBytes.bytes(32)
        #expect(peer.askCredentials() == nil)
        peer.macKey = realKey
        #expect(node.droppedPackets == dropped + 5)

        node.turnOffer = nil
        let none = try #require(peer.askCredentials())
        #expect(none.servers.isEmpty && none.validFor == TURNOffer.defaultLifetime)
        print(
            "TURN credentials: registered endpoint answered (\(first.username), \(answer.servers.count) servers, "
                + "\(answer.validFor) s); stranger, other endpoint, replay, old nonce, wrong key: 5 dropped, none answered")
    }

    /// A registration asking over and over gets `credentialBurst` answers at once, then one per
    /// lifetime / `credentialRequestsPerLifetime`; the rest are refused and counted. A network
    /// (/24) gets `credentialBurstPerNetwork` at once whatever the number of its registrations.
    @Test func askingTooOftenIsRateLimitedPerRegistrationAndPerNetwork() throws {
        var limits = RendezvousNode.Limits()
        limits.credentialBurstPerNetwork = 5
        let lab = RendezvousLab(limits: limits)
        let node = lab.node
        node.turnOffer = try Self.offer(lifetime: 40)
        let peer = lab.client(SocketAddress(ipv4: 127, 67, 0, 1, port: 5000))
        #expect(peer.register())
        var answered = 0
        for _ in 0..<20 where peer.askCredentials() != nil { answered += 1 }
        #expect(answered == Int(limits.credentialBurst))
        #expect(node.credentialsRefused == 20 - answered)
        // Refilled one per 40 s / 4 = 10 s.
        lab.time.advance(by: .seconds(9))
        #expect(peer.register())
        #expect(peer.askCredentials() == nil)
        lab.time.advance(by: .seconds(1.5))
        #expect(peer.register())
        #expect(peer.askCredentials() != nil)
        // Eight more registrations of the same /24 ask once each: the network's bucket holds 5,
        // and the first peer took 4 of it less than 15 s ago (2/s refill: full again).
        lab.time.advance(by: .seconds(40))
        let neighbours = (2...9).map { lab.client(SocketAddress(ipv4: 127, 67, 0, UInt8($0), port: 5000)) }
        for n in neighbours { #expect(n.register()) }
        let got = neighbours.filter { $0.askCredentials() != nil }.count
        #expect(got == 5)
        let otherNetwork = lab.client(SocketAddress(ipv4: 127, 67, 1, 1, port: 5000))
        #expect(otherNetwork.register())
        #expect(otherNetwork.askCredentials() != nil)
        print(
            "TURN credentials rate: one registration asking 20 times at once: \(answered) answered, "
                + "\(20 - answered) refused; 8 registrations of one /24 at once: \(got) answered; another /24 still answered")
    }

    /// Whole peers with no TURN configuration: each fetches credentials from the node once
    /// registered, offers the servers to call media after its own configured ones (a configured
    /// server at the same address and transport wins), renews them halfway through their life
    /// (a 20 s lifetime: every 10 s, with a later expiry each time), and asks no more often than
    /// that. Without an offer the node answers with no server, and the peer asks again only
    /// after half the lifetime it was given.
    @Test func peersFetchRenewAndUseCredentialsWithoutConfiguration() throws {
        let world = SimulatedWorld()
        defer { world.close() }
        world.node.turnOffer = try Self.offer(lifetime: 20)
        world.node.wallClock = world.wallClock
        let configured = RevueICEServer.turn("127.77.0.200:3478", username: "own", password: "ownpass")
        let a = try world.addPeer("a")
        let b = try world.addPeer("b") { $0.iceServers = [configured] }
        let ca = try #require(a.revue.core), cb = try #require(b.revue.core)
        #expect(world.run(until: .seconds(5)) { !ca.grantedTURNServers.isEmpty && !cb.grantedTURNServers.isEmpty })
        let firstUser = ca.grantedTURNServers[0].username
        let firstExpiry = try #require(TURNCredentials(username: firstUser, password: "").expiry)
        #expect(abs(Double(firstExpiry) - (world.wallClock() + 20)) <= 2)
        #expect(ca.callICEServers.filter { $0.kind == .turn }.map(\.username) == [firstUser, firstUser])
        let bTurn = cb.callICEServers.filter { $0.kind == .turn }
        #expect(bTurn.map(\.username) == ["own", cb.grantedTURNServers[0].username])
        #expect(bTurn.map(\.transport) == [.udp, .tcp])
        // Renewed every 10 s.
        let start = ca.counters.turnCredentialsReceived
        world.run(for: .seconds(61))
        let renewals = ca.counters.turnCredentialsReceived - start
        #expect((5...7).contains(renewals))
        #expect(ca.counters.turnCredentialsRequested == ca.counters.turnCredentialsReceived)
        let renewedExpiry = try #require(TURNCredentials(username: ca.grantedTURNServers[0].username, password: "").expiry)
        #expect(renewedExpiry >= firstExpiry + 50)
        #expect(world.node.credentialsRefused == 0)
        // No offer: answered with no server; the next request comes half the default life later.
        world.node.turnOffer = nil
        world.run(for: .seconds(11))
        #expect(ca.grantedTURNServers.isEmpty)
        let asked = ca.counters.turnCredentialsRequested
        world.run(for: .seconds(120))
        #expect(ca.counters.turnCredentialsRequested == asked)
        print(
            "TURN credentials on peers: first \(firstUser); \(renewals) renewals in 61 s at a 20 s lifetime "
                + "(expiry now \(renewedExpiry)); b's servers: \(bTurn.map(\.description))")
    }
}
