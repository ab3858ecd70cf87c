// The ICE agent through a real coturn relay: two agents that offer only relayed candidates connect
// through their allocations, select a relayed pair (ChannelData route) and carry media both ways;
// on IPv6 through an IPv6 relayed pair; and again through new allocations after coturn restarts.
import Foundation
import MediaCore
import Synchronization
import Testing

@Suite(.serialized) struct ICEAgentRelayTests {
    /// One side: a loopback socket, an agent with only relayed candidates, the media it got back
    /// through the relay.
    final class Side: Sendable {
        let socket: UDPSocket
        let agent: ICEAgent
        let media = Mutex<[[UInt8]]>([])
        let candidates = Mutex<[ICECandidate]>([])

        init(
            server: SocketAddress, controlling: Bool, relayOnly: Bool = true, local: SocketAddress = .loopbackIPv4(port: 0),
            transport: ICEServer.Transport = .udp, tls: ICEServer.TLSVerification = .init()
        ) throws {
            socket = try UDPSocket(bindingTo: local)
            var c = ICEAgentConfiguration(controlling: controlling)
            c.servers = [
                ICEServer(
                    kind: .turn, address: server, username: CoturnServer.user, password: CoturnServer.password,
                    transport: transport,
                    tls: tls)
            ]
            c.relayOnly = relayOnly
            agent = ICEAgent(socket: socket, configuration: c)
            agent.onRelayedMedia = { [weak self] bytes in self?.media.withLock { $0.append(Array(bytes)) } }
        }

        /// Media that arrived straight on the socket (not through our own allocation).
        let direct = Mutex<[(bytes: [UInt8], from: SocketAddress)]>([])

        func startReading() {
            agent.startReading { [weak self] bytes, from in self?.direct.withLock { $0.append((Array(bytes), from)) } }
        }

        /// Media tagged `tag` that arrived by either way.
        func arrived(tagged tag: UInt8) -> Int {
            received(tagged: tag) + direct.withLock { $0.filter { $0.bytes.count > 1 && $0.bytes[1] == tag }.count }
        }

        func received(tagged tag: UInt8) -> Int { media.withLock { $0.filter { $0.count > 1 && $0[1] == tag }.count } }

        func send(tag: UInt8, count: Int) {
            for i in 0..<count {
                let bytes: [UInt8] = [0x80, tag, 0, UInt8(i)] + [UInt8](repeating: 0xAB, count: 100)
                bytes.withUnsafeBytes { _ = agent.path.send($0, on: socket) }
            }
        }
    }

    @Test func relayOnlyAgentsConnectThroughCoturn() throws {
        let server = try CoturnServer()
        defer { _ = server.stop() }
        try server.waitUntilReady()
        let a = try Side(server: server.address, controlling: true)
        let b = try Side(server: server.address, controlling: false)
        defer { a.agent.close(); b.agent.close() }
        a.agent.onCandidate = { [weak a, weak b] c in
            a?.candidates.withLock { $0.append(c) }; b?.agent.addRemoteCandidate(c)
        }
        b.agent.onCandidate = { [weak a, weak b] c in
            b?.candidates.withLock { $0.append(c) }; a?.agent.addRemoteCandidate(c)
        }
        a.agent.setRemoteCredentials(ufrag: b.agent.localUfrag, password: b.agent.localPassword)
        b.agent.setRemoteCredentials(ufrag: a.agent.localUfrag, password: a.agent.localPassword)
        a.startReading()
        b.startReading()
        a.agent.start()
        b.agent.start()

        let deadline = Date().addingTimeInterval(8)
        while Date() < deadline && (a.agent.selectedPair == nil || b.agent.selectedPair == nil) { usleep(20_000) }
        let run = (a.agent.selectedPair == nil || b.agent.selectedPair == nil) ? server.stop() : nil
        #expect(
            a.agent.selectedPair != nil && b.agent.selectedPair != nil,
            "A: \(a.agent.pairSnapshots) B: \(b.agent.pairSnapshots) coturn: \(run?.stdout.suffix(3000) ?? "")")
        for side in [a, b] {
            #expect(side.candidates.withLock { $0.count == 1 && $0[0].type == .relay })
            #expect(side.agent.selectedPair?.local.type == .relay)
            #expect(side.agent.path.route?.isRelayed == true)
        }
        #expect(a.agent.selectedPair?.remote.address == b.candidates.withLock { $0.first?.address })
        #expect(b.agent.selectedPair?.remote.address == a.candidates.withLock { $0.first?.address })

        // Media both ways, as ChannelData on the bound channels, reaching the other's receive side.
        let until = Date().addingTimeInterval(5)
        while Date() < until && (b.received(tagged: 0xA1) < 5 || a.received(tagged: 0xB1) < 5) {
            if b.received(tagged: 0xA1) < 5 { a.send(tag: 0xA1, count: 1) }
            if a.received(tagged: 0xB1) < 5 { b.send(tag: 0xB1, count: 1) }
            usleep(50_000)
        }
        #expect(b.received(tagged: 0xA1) >= 5 && a.received(tagged: 0xB1) >= 5)
        #expect(a.agent.statistics.droppedResponses == 0 && b.agent.statistics.droppedResponses == 0)
    }

    /// Two agents with host and relayed candidates: they select the direct pair; when the direct
    /// path dies, within 2 s they go through the relay and media keeps flowing; when it comes back,
    /// the controlling agent renominates the direct pair and both return to it.
    @Test func directPathDiesAndTheRelayCarriesTheCall() throws {
        let server = try CoturnServer()
        defer { _ = server.stop() }
        try server.waitUntilReady()
        let a = try Side(server: server.address, controlling: true, relayOnly: false)
        let b = try Side(server: server.address, controlling: false, relayOnly: false)
        defer { a.agent.close(); b.agent.close() }
        exchangeICESignalling(a.agent, b.agent)
        a.startReading()
        b.startReading()
        a.agent.start()
        b.agent.start()
        let aHost = try a.socket.localAddress(), bHost = try b.socket.localAddress()

        func wait(_ seconds: Double, _ condition: () -> Bool) -> Bool { pollUntil(seconds, condition) }
        // Direct first; while it works, nothing is checked through the relay (relayed pairs wait).
        #expect(
            wait(8) {
                a.agent.selectedPair?.remote.address == bHost && b.agent.selectedPair?.remote.address == aHost
            }, "A: \(a.agent.pairSnapshots) B: \(b.agent.pairSnapshots)")
        usleep(700_000)
        #expect(
            !a.agent.pairSnapshots.contains { $0.valid && ($0.local.type == .relay || $0.remote.type == .relay) },
            "A checked relayed pairs while the direct pair worked: \(a.agent.pairSnapshots)")

        // The direct path dies: nothing from the other's host address arrives any more.
        a.agent.dropFilterForTests = { $0 == bHost }
        b.agent.dropFilterForTests = { $0 == aHost }
        let relayedRoute = { (s: Side) -> Bool in
            guard let p = s.agent.selectedPair else { return false }
            return p.local.type == .relay || p.remote.type == .relay
        }
        #expect(wait(2) { relayedRoute(a) && relayedRoute(b) }, "A: \(a.agent.pairSnapshots) B: \(b.agent.pairSnapshots)")
        #expect(
            wait(3) {
                a.send(tag: 0xC1, count: 1)
                b.send(tag: 0xC2, count: 1)
                return b.arrived(tagged: 0xC1) >= 3 && a.arrived(tagged: 0xC2) >= 3
            })

        // It comes back: the direct pair answers again and is renominated.
        a.agent.dropFilterForTests = nil
        b.agent.dropFilterForTests = nil
        let direct = { (s: Side, peer: SocketAddress) -> Bool in
            s.agent.path.route?.peer == peer && s.agent.path.route?.isRelayed == false
        }
        #expect(wait(4) { direct(a, bHost) && direct(b, aHost) }, "A: \(a.agent.pairSnapshots) B: \(b.agent.pairSnapshots)")
        #expect(a.agent.selectedPair?.local.type == .host && b.agent.selectedPair?.local.type == .host)
    }

    /// Agents on ::1 that offer only relayed candidates, coturn on ::1 relaying from 127.0.0.1
    /// and ::1: each asks for a dual allocation (the socket carries IPv6), offers an IPv4 and an
    /// IPv6 relayed candidate, and the call goes through the IPv6 pair (IPv6 preferred, RFC 8421).
    @Test func ipv6AgentsGatherAnIPv6RelayedCandidateAndUseIt() throws {
        let server = try CoturnServer(ip: "::1", relayIPs: ["127.0.0.1", "::1"])
        defer { _ = server.stop() }
        try server.waitUntilReady()
        let a = try Side(server: server.address, controlling: true, local: .loopbackIPv6(port: 0))
        let b = try Side(server: server.address, controlling: false, local: .loopbackIPv6(port: 0))
        defer { a.agent.close(); b.agent.close() }
        exchangeICESignalling(a.agent, b.agent)
        a.startReading()
        b.startReading()
        a.agent.start()
        b.agent.start()
        let ipv6Pair = { (s: Side) -> Bool in
            s.agent.selectedPair.map { $0.local.type == .relay && $0.local.address.family == .ipv6 && $0.remote.type == .relay }
                ?? false
        }
        #expect(
            pollUntil(8) { ipv6Pair(a) && ipv6Pair(b) }, "A: \(a.agent.pairSnapshots) B: \(b.agent.pairSnapshots)")
        for side in [a, b] {
            let families = side.agent.localCandidates.filter { $0.type == .relay }.map(\.address.family)
            #expect(families.sorted { $0 == .ipv6 && $1 == .ipv4 } == [.ipv6, .ipv4], "\(side.agent.localCandidates)")
        }
        print("IPv6 relayed pairs: A \(a.agent.selectedPair.map { "\($0.local) -> \($0.remote)" } ?? "none")")
        #expect(
            pollUntil(5) {
                a.send(tag: 0xE1, count: 1)
                b.send(tag: 0xE2, count: 1)
                return b.received(tagged: 0xE1) >= 5 && a.received(tagged: 0xE2) >= 5
            })
    }

    /// coturn is killed and started again on the same ports during a relayed call: both
    /// allocations are gone and nothing says so. Each side, sending into silence, checks its
    /// allocation with a Refresh, finds it lost, makes a new one; its new relayed candidate is
    /// signalled (and the old one dropped with its pairs), and media flows again both ways.
    @Test func aRelayedCallRecoversWhenCoturnRestarts() throws {
        let server = try CoturnServer()
        defer { _ = server.stop() }
        try server.waitUntilReady()
        let a = try Side(server: server.address, controlling: true)
        let b = try Side(server: server.address, controlling: false)
        defer { a.agent.close(); b.agent.close() }
        exchangeICESignalling(a.agent, b.agent)
        a.startReading()
        b.startReading()
        a.agent.start()
        b.agent.start()
        #expect(
            pollUntil(8) { a.agent.selectedPair != nil && b.agent.selectedPair != nil },
            "A: \(a.agent.pairSnapshots) B: \(b.agent.pairSnapshots)")
        let stopping = Atomic<Bool>(false)
        let sender = Thread {
            while !stopping.load(ordering: .relaxed) {
                a.send(tag: 0xF1, count: 1)
                b.send(tag: 0xF2, count: 1)
                usleep(50_000)
            }
        }
        sender.start()
        defer { stopping.store(true, ordering: .relaxed) }
        #expect(pollUntil(5) { b.received(tagged: 0xF1) >= 10 && a.received(tagged: 0xF2) >= 10 })
        let before = (a: a.received(tagged: 0xF2), b: b.received(tagged: 0xF1))
        let relayedBefore = (a.agent.selectedPair?.local.address, b.agent.selectedPair?.local.address)

        let restartedAt = Date()
        try server.restart()
        try server.waitUntilReady()
        usleep(1_000_000)
        let stalled = (a: a.received(tagged: 0xF2), b: b.received(tagged: 0xF1))
        #expect(
            pollUntil(25) { b.received(tagged: 0xF1) >= stalled.b + 10 && a.received(tagged: 0xF2) >= stalled.a + 10 },
            "A: \(a.agent.pairSnapshots) \(a.agent.turnStatistics) B: \(b.agent.pairSnapshots) \(b.agent.turnStatistics)")
        let after = Date().timeIntervalSince(restartedAt)
        let (ta, tb) = (a.agent.turnStatistics.first, b.agent.turnStatistics.first)
        print(
            "relayed call across a coturn restart: media both ways again after \(String(format: "%.1f", after)) s; "
                + "A relayed \(relayedBefore.0.map { "\($0)" } ?? "?") then \(a.agent.selectedPair.map { "\($0.local.address)" } ?? "none"), "
                + "B \(relayedBefore.1.map { "\($0)" } ?? "?") then \(b.agent.selectedPair.map { "\($0.local.address)" } ?? "none"); "
                + "allocations lost A \(ta?.allocationsLost ?? -1) B \(tb?.allocationsLost ?? -1), probes A \(ta?.livenessProbes ?? -1) "
                + "B \(tb?.livenessProbes ?? -1), relayed candidates replaced A \(a.agent.statistics.relayedCandidatesReplaced) "
                + "B \(b.agent.statistics.relayedCandidatesReplaced); media during the outage A \(stalled.a - before.a) B \(stalled.b - before.b)"
        )
        #expect(after < 25)
        #expect(ta?.allocationsLost == 1 && tb?.allocationsLost == 1)
    }

    /// Two relay-only agents whose TURN server is reached over TLS (`turns:`), its certificate
    /// checked against a CA made at test time: they connect through their allocations and media
    /// flows both ways.
    @Test func relayOnlyAgentsConnectThroughCoturnOverTLS() throws {
        let certificates = try TURNTLSCertificates()
        defer { certificates.remove() }
        let server = try CoturnServer(tls: (certificates.serverCertificate, certificates.serverKey))
        defer { _ = server.stop() }
        try server.waitUntilReady()
        let verification = ICEServer.TLSVerification(certificateAuthorityFile: certificates.caFile)
        let a = try Side(server: server.tlsAddress, controlling: true, transport: .tls, tls: verification)
        let b = try Side(server: server.tlsAddress, controlling: false, transport: .tls, tls: verification)
        defer { a.agent.close(); b.agent.close() }
        exchangeICESignalling(a.agent, b.agent)
        a.startReading()
        b.startReading()
        a.agent.start()
        b.agent.start()
        #expect(
            pollUntil(8) { a.agent.selectedPair != nil && b.agent.selectedPair != nil },
            "A: \(a.agent.noPathReason) B: \(b.agent.noPathReason)")
        #expect(a.agent.path.route?.isRelayed == true && b.agent.path.route?.isRelayed == true)
        #expect(
            pollUntil(5) {
                a.send(tag: 0xA7, count: 1)
                b.send(tag: 0xB7, count: 1)
                return b.received(tagged: 0xA7) >= 5 && a.received(tagged: 0xB7) >= 5
            })
        let sent = (a.agent.turnStatistics.first?.channelDataSent ?? -1, b.agent.turnStatistics.first?.channelDataSent ?? -1)
        print(
            "relay-only agents over TURN over TLS: A \(a.agent.selectedPair.map { "\($0.local) -> \($0.remote)" } ?? "none"), "
                + "ChannelData sent A \(sent.0) B \(sent.1)")
    }
}
