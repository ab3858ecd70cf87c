// The ICE agent over real loopback sockets: two agents in one process connect and carry media
// over IPv4 and IPv6, pick the best pair, gather from the interfaces and a STUN server; attacks
// with a raw UDP socket (forged responses, unauthenticated requests, garbage) are performed and
// refused. Nothing here bounds time beyond "within a few seconds": what is timing (failover,
// consent expiry, the quiet pace, role conflicts, pacing, the probe budget and the answering rate)
// is tested on simulated time in MediaCoreTests' SimulatedICEAgent suites.
import Foundation
import MediaCore
import MediaTestSupport
import Synchronization
import Testing

@Suite(.serialized) struct ICEAgentTests {
    /// Two agents on 127.0.0.1 (or ::1) select the pair within 2 s and media sent on `path` arrives.
    @Test(arguments: [SocketAddress.Family.ipv4, .ipv6])
    func connectsAndCarriesMedia(family: SocketAddress.Family) throws {
        let bind: SocketAddress = family == .ipv4 ? .loopbackIPv4(port: 0) : .loopbackIPv6(port: 0)
        let a = try ICETestPeer(bind: bind, controlling: true)
        let b = try ICETestPeer(bind: bind, controlling: false)
        defer { a.close(); b.close() }
        iceConnect(a, b)
        #expect(pollUntil(2) { a.agent.selectedPair != nil && b.agent.selectedPair != nil })
        #expect(a.agent.selectedPair?.remote.address == b.address)
        #expect(b.agent.selectedPair?.remote.address == a.address)
        #expect(a.agent.path.route?.peer == b.address)
        #expect(b.agent.path.route?.peer == a.address)
        #expect(pollUntil(2) { a.gathered.load(ordering: .relaxed) && b.gathered.load(ordering: .relaxed) })
        #expect(a.agent.localCandidates.map(\.address) == [a.address])

        a.sendMedia([0x80, 0xA1])
        b.sendMedia([0x80, 0xB1])
        #expect(pollUntil(2) { b.received(tagged: [0x80, 0xA1]).count == 5 && a.received(tagged: [0x80, 0xB1]).count == 5 })
        #expect(b.received(tagged: [0x80, 0xA1]).allSatisfy { $0.from == a.address })
        let sa = a.agent.statistics, sb = b.agent.statistics
        #expect(sa.checksSent > 0 && sa.responsesReceived > 0 && sa.checksAnswered > 0)
        #expect(sa.droppedResponses == 0 && sb.droppedResponses == 0 && sa.droppedRequests == 0 && sb.droppedRequests == 0)
        #expect(a.agent.isControlling && !b.agent.isControlling)
    }

    /// Candidates and credentials in any order: B's candidates reach A before A starts, A's reach
    /// B before B knows A's credentials, and the credentials come last (A's checks arrive at B
    /// first and are answered, then checked back).
    @Test func candidatesAndCredentialsInAnyOrder() throws {
        let a = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: true)
        let b = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: false)
        defer { a.close(); b.close() }
        a.agent.onCandidate = { [weak b] c in b?.agent.addRemoteCandidate(c) }
        b.agent.onCandidate = { [weak a] c in a?.agent.addRemoteCandidate(c) }
        b.startReading()
        b.agent.start()
        #expect(pollUntil(1) { b.gathered.load(ordering: .relaxed) })
        a.agent.setRemoteCredentials(ufrag: b.agent.localUfrag, password: b.agent.localPassword)
        a.startReading()
        a.agent.start()
        #expect(pollUntil(1) { b.agent.statistics.checksAnswered > 0 })
        #expect(b.agent.selectedPair == nil && b.agent.statistics.checksSent == 0)
        b.agent.setRemoteCredentials(ufrag: a.agent.localUfrag, password: a.agent.localPassword)
        #expect(pollUntil(2) { a.agent.selectedPair != nil && b.agent.selectedPair != nil })
        #expect(b.agent.selectedPair?.remote.address == a.address && a.agent.selectedPair?.remote.address == b.address)
    }

    /// The peer's credentials change (it restarted its agent, RFC 8445 §9): the old candidates
    /// and pairs go at once, media stops on the old pair, and checks with the new agent find a
    /// pair with it alone.
    @Test func newRemoteCredentialsForgetTheOldGeneration() throws {
        let a = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: true)
        let b = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: false)
        let c = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: false)
        defer { a.close(); b.close(); c.close() }
        b.agent.onCandidate = { [weak a] cand in a?.agent.addRemoteCandidate(cand) }
        a.agent.setRemoteCredentials(ufrag: b.agent.localUfrag, password: b.agent.localPassword)
        b.agent.setRemoteCredentials(ufrag: a.agent.localUfrag, password: a.agent.localPassword)
        for p in [b, a] { p.startReading(); p.agent.start() }
        #expect(pollUntil(2) { a.agent.selectedPair?.remote.address == b.address })
        b.close()
        a.agent.setRemoteCredentials(ufrag: c.agent.localUfrag, password: c.agent.localPassword)
        #expect(pollUntil(1) { a.agent.selectedPair == nil && a.agent.path.route == nil })
        #expect(a.agent.pairSnapshots.allSatisfy { $0.remote.address != b.address }, "\(a.agent.pairSnapshots)")
        c.agent.onCandidate = { [weak a] cand in a?.agent.addRemoteCandidate(cand) }
        c.agent.setRemoteCredentials(ufrag: a.agent.localUfrag, password: a.agent.localPassword)
        c.startReading()
        c.agent.start()
        #expect(pollUntil(2) { a.agent.selectedPair?.remote.address == c.address && c.agent.selectedPair != nil })
        #expect(a.agent.pairSnapshots.allSatisfy { $0.remote.address == c.address }, "\(a.agent.pairSnapshots)")
    }

    /// A remote candidate first learned from a check (peer-reflexive) and signalled later: the
    /// selected pair then names the signalled candidate (RFC 8445 §7.3.1.3), on the same path.
    @Test func aSignalledCandidateReplacesThePeerReflexiveOne() throws {
        let a = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: true)
        let b = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: false)
        defer { a.close(); b.close() }
        b.agent.onCandidate = { [weak a] c in a?.agent.addRemoteCandidate(c) }
        a.agent.setRemoteCredentials(ufrag: b.agent.localUfrag, password: b.agent.localPassword)
        b.agent.setRemoteCredentials(ufrag: a.agent.localUfrag, password: a.agent.localPassword)
        for p in [b, a] { p.startReading(); p.agent.start() }
        #expect(pollUntil(2) { b.agent.selectedPair != nil })
        #expect(b.agent.selectedPair?.remote.type == .prflx && b.agent.selectedPair?.remote.address == a.address)
        let host = try #require(a.agent.localCandidates.first { $0.type == .host })
        b.agent.addRemoteCandidate(host)
        #expect(pollUntil(1) { b.agent.selectedPair?.remote.type == .host }, "\(String(describing: b.agent.selectedPair))")
        #expect(b.agent.selectedPair?.remote.address == a.address && b.agent.path.route?.peer == a.address)
    }

    /// Both paths of `twoPaths` are valid on both agents, and each selected the direct one.
    static func bothPathsValidDirectSelected(_ a: ICETestPeer, _ b: ICETestPeer) -> Bool {
        a.agent.pairSnapshots.filter(\.valid).count >= 2 && b.agent.pairSnapshots.filter(\.valid).count >= 2
            && a.agent.selectedPair?.remote.address == b.address && b.agent.selectedPair?.remote.address == a.address
    }

    /// With a direct path and a forwarded one (a NAT-like second path), both agents select the
    /// direct pair, the highest-priority valid pair, while the other becomes valid too.
    @Test func selectsTheHighestPriorityPair() throws {
        let (a, b, forwarder) = try Self.twoPaths()
        defer { a.close(); b.close(); forwarder.stop() }
        #expect(
            pollUntil(3) { Self.bothPathsValidDirectSelected(a, b) }, "\(a.agent.pairSnapshots) \(b.agent.pairSnapshots)")
        for peer in [a, b] {
            let pairs = peer.agent.pairSnapshots
            let best = pairs.filter(\.valid).max { $0.priority < $1.priority }
            #expect(best?.selected == true, "\(pairs)")
        }
    }

    /// An attacker who sees our checks to its address (a remote candidate it planted, with a higher
    /// priority than the real one) answers them: with a wrong MESSAGE-INTEGRITY, with the right one
    /// but from another address, with a broken FINGERPRINT, and for a transaction we never sent.
    /// Every forgery is dropped and counted, and the agent stays on the real peer.
    @Test func forgedResponsesAreDroppedAndChangeNothing() throws {
        let a = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: true)
        let b = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: false)
        defer { a.close(); b.close() }
        let attacker = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let elsewhere = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let attackerAddress = try attacker.localAddress()
        let planted = ICECandidate(
            foundation: "x", priority: ICECandidate.priority(type: .host, localPreference: 65535),
            address: attackerAddress, type: .host)
        a.agent.addRemoteCandidate(planted)
        iceConnect(a, b)

        let request = try #require(iceReceiveRequest(attacker, seconds: 2))
        #expect(request.from == a.address)
        #expect(request.message.text(STUNMessage.AttributeType.username) == "\(b.agent.localUfrag):\(a.agent.localUfrag)")
        func response(id: [UInt8], key: [UInt8]) -> [UInt8] {
            var m = STUNMessage(method: .binding, class: .successResponse, transactionID: id)
            m.appendXORAddress(STUNMessage.AttributeType.xorMappedAddress, a.address)
            return m.encode(integrity: key, fingerprint: true)
        }
        let realKey = STUNMessage.shortTermKey(password: b.agent.localPassword)
        let wrongIntegrity = response(
            id: request.message.transactionID, key: STUNMessage.shortTermKey(password: "not the peer's password"))
        let rightButElsewhere = response(id: request.message.transactionID, key: realKey)
        var brokenFingerprint = response(id: request.message.transactionID, key: realKey)
        brokenFingerprint[brokenFingerprint.count - 1] ^= 0xFF
        let unknownTransaction = response(id: RandomBytes.bytes(12), key: realKey)
        for bytes in [wrongIntegrity, brokenFingerprint, unknownTransaction] {
            _ = try bytes.withUnsafeBytes { try attacker.send($0, to: a.address) }
        }
        _ = try rightButElsewhere.withUnsafeBytes { try elsewhere.send($0, to: a.address) }

        #expect(pollUntil(2) { a.agent.statistics.droppedResponses >= 4 })
        #expect(pollUntil(2) { a.agent.selectedPair?.remote.address == b.address })
        usleep(300_000)
        #expect(a.agent.selectedPair?.remote.address == b.address)
        #expect(a.changes.withLock { $0.allSatisfy { $0.remote?.address != attackerAddress } })
        #expect(a.agent.pairSnapshots.filter { $0.remote.address == attackerAddress }.allSatisfy { !$0.valid })
        // Nothing reached b but a's answers: on a busy machine a check of b's may go out twice
        // before its answer comes, and the second answer finds no transaction.
        #expect(b.agent.statistics.droppedResponses <= b.agent.statistics.checksRetransmitted, "\(b.agent.statistics)")

        // Control: the same answer from the address the check went to, signed with the peer's
        // key, is accepted, so it was the checks above that kept the planted candidate out.
        let accepted = a.agent.statistics.responsesReceived
        _ = try rightButElsewhere.withUnsafeBytes { try attacker.send($0, to: a.address) }
        #expect(pollUntil(1) { a.agent.pairSnapshots.contains { $0.remote.address == attackerAddress && $0.valid } })
        #expect(a.agent.statistics.responsesReceived > accepted)
    }

    /// Requests without the right credentials (no MESSAGE-INTEGRITY, a wrong password, a wrong
    /// ufrag, no FINGERPRINT) get no answer and are counted; a correctly signed one is answered
    /// even before the peer's credentials are known, and is checked back once they are.
    @Test func unauthenticatedRequestsAreNotAnswered() throws {
        let a = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: false)
        defer { a.close() }
        a.startReading()
        a.agent.start()
        let raw = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let rawUfrag = "rawpeer1", rawPassword = "raw-peer-password-0123456789"
        let me = "\(a.agent.localUfrag):\(rawUfrag)"
        let forged = [
            iceBindingRequest(username: me, password: nil).bytes,
            iceBindingRequest(username: me, password: "a guess at the password!").bytes,
            iceBindingRequest(username: "nope:\(rawUfrag)", password: a.agent.localPassword).bytes,
            iceBindingRequest(username: me, password: a.agent.localPassword, fingerprint: false).bytes,
        ]
        for bytes in forged { _ = try bytes.withUnsafeBytes { try raw.send($0, to: a.address) } }
        #expect(iceReceiveAll(raw, seconds: 0.5).isEmpty)
        #expect(a.agent.statistics.droppedRequests == forged.count)
        #expect(a.agent.statistics.checksAnswered == 0)

        let good = iceBindingRequest(username: me, password: a.agent.localPassword, controlling: true)
        _ = try good.bytes.withUnsafeBytes { try raw.send($0, to: a.address) }
        let answers = iceReceiveAll(raw, seconds: 0.5)
        #expect(answers.count == 1)
        if let answer = answers.first {
            let m = try STUNMessage(parsing: answer.bytes)
            #expect(m.messageClass == .successResponse && m.transactionID == good.message.transactionID)
            #expect(STUNMessage.hasValidIntegrity(answer.bytes, key: STUNMessage.shortTermKey(password: a.agent.localPassword)))
            #expect(STUNMessage.hasValidFingerprint(answer.bytes))
            #expect(try m.xorAddress(STUNMessage.AttributeType.xorMappedAddress) == (try raw.localAddress()))
            #expect(answer.bytes.count <= good.bytes.count)
        }
        // Once the credentials arrive, the remembered request triggers a check back.
        a.agent.setRemoteCredentials(ufrag: rawUfrag, password: rawPassword)
        let check = try #require(iceReceiveRequest(raw, seconds: 2))
        #expect(check.message.text(STUNMessage.AttributeType.username) == "\(rawUfrag):\(a.agent.localUfrag)")
        #expect(STUNMessage.hasValidIntegrity(check.bytes, key: STUNMessage.shortTermKey(password: rawPassword)))
    }

    /// Remote candidates beyond `maxRemoteCandidates` and pairs beyond `maxPairs` are not kept.
    @Test func remoteStateIsBounded() throws {
        let a = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: true) {
            $0.maxRemoteCandidates = 8; $0.maxPairs = 5
        }
        defer { a.close() }
        a.agent.start()
        for i in 0..<20 {
            a.agent.addRemoteCandidate(
                ICECandidate(
                    foundation: "\(i)", priority: UInt32(1000 + i),
                    address: .init(ipv4: 127, 0, 9, UInt8(i), port: 9), type: .host))
        }
        #expect(pollUntil(1) { a.agent.statistics.droppedRemoteCandidates == 12 })
        #expect(a.agent.pairSnapshots.count == 5)
        // The pairs kept are the highest-priority ones.
        #expect(a.agent.pairSnapshots.map(\.remote.priority).min() == 1003)
    }

    /// Host candidates honour `hostAddresses`; a STUN server's answer gives a server-reflexive
    /// candidate; the Binding request to the server is padded to be no smaller than the answer.
    @Test func gathersHostAndServerReflexiveCandidates() throws {
        let server = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let serverAddress = try server.localAddress()
        let a = try ICETestPeer(bind: .anyIPv4(port: 0), controlling: true) {
            $0.hostAddresses = [.init(ipv4: 127, 0, 0, 1, port: 0), .init(ipv4: 127, 0, 0, 2, port: 0)]
            $0.servers = [ICEServer(kind: .stun, address: serverAddress)]
        }
        defer { a.close() }
        let seen = Mutex<[ICECandidate]>([])
        a.agent.onCandidate = { c in seen.withLock { $0.append(c) } }
        a.startReading()
        a.agent.start()
        let request = try #require(iceReceiveRequest(server, seconds: 2))
        let mapped = SocketAddress(ipv4: 198, 51, 100, 7, port: 40000)
        var answer = STUNMessage(method: .binding, class: .successResponse, transactionID: request.message.transactionID)
        answer.appendXORAddress(STUNMessage.AttributeType.xorMappedAddress, mapped)
        answer.appendXORAddress(0x802B, serverAddress)  // RESPONSE-ORIGIN
        answer.appendXORAddress(0x802C, serverAddress)  // OTHER-ADDRESS
        answer.appendText(STUNMessage.AttributeType.software, "a STUN server of some kind")
        let answerBytes = answer.encode(fingerprint: true)
        #expect(request.bytes.count >= answerBytes.count)
        _ = try answerBytes.withUnsafeBytes { try server.send($0, to: request.from) }
        #expect(pollUntil(2) { a.gathered.load(ordering: .relaxed) })
        let candidates = seen.withLock { $0 }
        #expect(candidates.filter { $0.type == .host }.map(\.address.host) == ["127.0.0.1", "127.0.0.2"])
        #expect(candidates.allSatisfy { $0.type != .host || $0.address.port == a.address.port })
        let srflx = candidates.filter { $0.type == .srflx }
        #expect(srflx.map(\.address) == [mapped])
        #expect(srflx.first?.relatedAddress?.host == "127.0.0.1")
        let hosts = candidates.filter { $0.type == .host }
        #expect(hosts.count == 2 && hosts[0].priority != hosts[1].priority && hosts[0].foundation != hosts[1].foundation)
        #expect(Set(candidates.map(\.foundation)).count == candidates.count)
    }

    /// Without `hostAddresses`: a socket bound to every interface offers each up, non-loopback
    /// interface address of its family with its port; one bound to loopback offers loopback.
    @Test func hostCandidatesComeFromTheInterfaces() throws {
        for bind in [SocketAddress.anyIPv4(port: 0), .anyIPv6(port: 0), .loopbackIPv4(port: 0)] {
            let peer = try ICETestPeer(bind: bind, controlling: true)
            defer { peer.close() }
            let seen = Mutex<[ICECandidate]>([])
            peer.agent.onCandidate = { c in seen.withLock { $0.append(c) } }
            peer.agent.start()
            #expect(pollUntil(2) { peer.gathered.load(ordering: .relaxed) })
            let hosts = seen.withLock { $0 }
            #expect(hosts == peer.agent.localCandidates)
            #expect(
                hosts.allSatisfy { $0.type == .host && $0.address.family == bind.family && $0.address.port == peer.address.port })
            #expect(Set(hosts.map(\.priority)).count == hosts.count)
            if ICEHostAddresses.isWildcard(bind) {
                #expect(hosts.allSatisfy { !ICEHostAddresses.isLoopback($0.address) && !ICEHostAddresses.isWildcard($0.address) })
            } else {
                #expect(hosts.map(\.address) == [peer.address])
            }
        }
    }

    /// Garbage (random bytes in the STUN range, truncations, bit flips and bad lengths of a signed
    /// request and response) fed to a connected agent, through `handleDatagram` from another
    /// thread and over the socket: nothing crashes, nothing forged is answered, the call goes on.
    @Test func garbageIsDroppedAndTheCallGoesOn() throws {
        let a = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: true)
        let b = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: false)
        defer { a.close(); b.close() }
        iceConnect(a, b)
        #expect(pollUntil(2) { a.agent.selectedPair != nil && b.agent.selectedPair != nil })
        let raw = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let rawAddress = try raw.localAddress()
        let request = iceBindingRequest(username: "\(a.agent.localUfrag):\(b.agent.localUfrag)", password: a.agent.localPassword)
            .bytes
        var response = STUNMessage(method: .binding, class: .successResponse)
        response.appendXORAddress(STUNMessage.AttributeType.xorMappedAddress, a.address)
        let responseBytes = response.encode(
            integrity: STUNMessage.shortTermKey(password: b.agent.localPassword), fingerprint: true)
        var rng = SystemRandomNumberGenerator()
        for i in 0..<4000 {
            var bytes = i % 2 == 0 ? request : responseBytes
            switch i % 5 {
            case 0:
                for _ in 0..<Int.random(in: 1...4, using: &rng) {
                    bytes[Int.random(in: 0..<bytes.count, using: &rng)] ^= UInt8.random(in: 1...255, using: &rng)
                }
            case 1:
                bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &rng)))
            case 2:
                bytes = (0..<Int.random(in: 1...120, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                bytes[0] &= 0x03
            case 3:
                let at = 20 + 4 * Int.random(in: 0..<((bytes.count - 20) / 4), using: &rng)
                bytes[at + 2] = 0xFF; bytes[at + 3] = UInt8.random(in: 0...255, using: &rng)
            default:
                bytes[2] = UInt8.random(in: 0...255, using: &rng); bytes[3] = UInt8.random(in: 0...255, using: &rng)
            }
            if bytes == request || bytes == responseBytes { continue }  // a mutation that changed nothing
            if i % 3 == 0 {
                _ = try? bytes.withUnsafeBytes { try raw.send($0, to: a.address) }
            } else {
                bytes.withUnsafeBytes { a.agent.handleDatagram($0, from: rawAddress) }
            }
        }
        let answers = iceReceiveAll(raw, seconds: 0.5)
        #expect(answers.isEmpty, "\(answers.count) answers to garbage")
        #expect(a.agent.statistics.checksAnswered > 0 && a.agent.selectedPair?.remote.address == b.address)
        a.sendMedia([0x80, 0xF1])
        #expect(pollUntil(1) { b.received(tagged: [0x80, 0xF1]).count == 5 })
    }

    /// A and B on 127.0.0.1 with a forwarding socket as a second path between them, offered to each
    /// as the other's server-reflexive candidate (lower priority than the host one).
    static func twoPaths() throws -> (ICETestPeer, ICETestPeer, ICEForwarder) {
        let a = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: true)
        let b = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: false)
        let forwarder = try ICEForwarder(between: a.address, and: b.address)
        let srflx = ICECandidate.priority(type: .srflx, localPreference: 65535)
        a.agent.addRemoteCandidate(
            ICECandidate(
                foundation: "f", priority: srflx, address: forwarder.address, type: .srflx,
                relatedAddress: b.address))
        b.agent.addRemoteCandidate(
            ICECandidate(
                foundation: "f", priority: srflx, address: forwarder.address, type: .srflx,
                relatedAddress: a.address))
        iceConnect(a, b)
        return (a, b, forwarder)
    }
}
