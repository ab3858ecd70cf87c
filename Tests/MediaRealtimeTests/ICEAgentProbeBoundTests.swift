// The check reflector attack over real loopback sockets: a remote description lists candidates
// pointing at "victim" sockets that count what reaches them, never answering; a real peer is
// among them. The agent sends the victims no more than its bound, and the peer still connects.
import Foundation
import MediaTestSupport
import Testing

@testable import MediaCore

@Suite(.serialized) struct ICEAgentProbeBoundTests {
    /// Gives `agent` one host candidate per victim socket, in falling priority: what a hostile
    /// description does.
    static func aim(_ agent: ICEAgent, at victims: [UDPSocket]) throws {
        for (i, v) in victims.enumerated() {
            agent.addRemoteCandidate(
                ICECandidate(
                    foundation: "v\(i)", priority: ICECandidate.priority(type: .host, localPreference: UInt32(60000 - i)),
                    address: try v.localAddress(), type: .host))
        }
    }

    /// Every datagram waiting on `sockets` (not blocking), as (victim index, size).
    static func drain(_ sockets: [UDPSocket]) -> [(index: Int, size: Int)] {
        var out: [(index: Int, size: Int)] = []
        var buffer = [UInt8](repeating: 0, count: 2048)
        for (i, s) in sockets.enumerated() {
            while (try? s.waitUntilReadable(timeoutMilliseconds: 0)) == true {
                guard let got = try? buffer.withUnsafeMutableBytes({ try s.receive(into: $0) }) else { break }
                out.append((i, got.count))
            }
        }
        return out
    }

    /// 31 victims (15 ports of 127.0.0.1, 16 addresses of 127.0.3.0/24) and the real peer, its
    /// candidate last in priority and in the /24 the victims already fill: over 6 s the agent
    /// (controlled, like a WHIP endpoint) sends the victims at most min(16 x 12, 40 + 20 x 6)
    /// datagrams, to at most 16 addresses and 8 per /24, while the peer's checks make the agent
    /// check it back and the pair is selected. The same agent with the bound lifted sends far more.
    @Test func aDescriptionAimedAtVictimsGetsNoMoreThanTheBound() throws {
        func run(bounded: Bool) throws -> (datagrams: Int, bytes: Int, addresses: Set<Int>, withheld: Int, connected: Bool) {
            let a = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: false) {
                if !bounded {
                    $0.unansweredSendsPerAddress = 1_000_000
                    $0.maxUnansweredAddresses = 1000
                    $0.maxUnansweredAddressesPerSubnet = 1000
                    $0.unansweredChecksPerSecond = 1_000_000
                    $0.unansweredBytesPerSecond = 1_000_000_000
                }
            }
            let b = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: true)
            let victims =
                try (0..<15).map { _ in try UDPSocket(bindingTo: .loopbackIPv4(port: 0)) }
                + (0..<16).map { try UDPSocket(bindingTo: SocketAddress(ipv4: 127, 0, 3, UInt8(1 + $0), port: 0)) }
            defer {
                a.close()
                b.close()
                for v in victims { v.close() }
            }
            try Self.aim(a.agent, at: victims)
            // The peer's candidate: the lowest priority of all.
            b.agent.onCandidate = { [weak a] c in
                a?.agent.addRemoteCandidate(
                    ICECandidate(foundation: "peer", priority: 1, address: c.address, type: .host))
            }
            a.agent.onCandidate = { [weak b] c in b?.agent.addRemoteCandidate(c) }
            a.agent.setRemoteCredentials(ufrag: b.agent.localUfrag, password: b.agent.localPassword)
            b.agent.setRemoteCredentials(ufrag: a.agent.localUfrag, password: a.agent.localPassword)
            a.startReading()
            a.agent.start()
            // The peer starts a moment later, as a browser that got the answer would.
            Thread.sleep(forTimeInterval: 0.3)
            b.startReading()
            b.agent.start()
            let connected = pollUntil(3) {
                a.agent.selectedPair?.remote.address == b.address && b.agent.selectedPair?.remote.address == a.address
            }
            Thread.sleep(forTimeInterval: 6 - 0.3 - 0.01)
            let got = Self.drain(victims)
            #expect(a.agent.statistics.droppedRemoteCandidates == 0)
            return (got.count, got.map(\.size).reduce(0, +), Set(got.map(\.index)), a.agent.statistics.checksWithheld, connected)
        }
        let c = ICEAgentConfiguration(controlling: false)
        let bound = min(
            c.maxUnansweredAddresses * c.unansweredSendsPerAddress,
            2 * c.unansweredChecksPerSecond + 6 * c.unansweredChecksPerSecond)
        let bounded = try run(bounded: true)
        let open = try run(bounded: false)
        print(
            "victims got \(bounded.datagrams) datagrams (\(bounded.bytes) bytes) at \(bounded.addresses.count) of 31 addresses "
                + "in 6 s; bound \(bound) datagrams, \(2 * c.unansweredBytesPerSecond + 6 * c.unansweredBytesPerSecond) bytes; "
                + "\(bounded.withheld) checks withheld; without the bound: \(open.datagrams) datagrams at \(open.addresses.count) addresses"
        )
        #expect(bounded.connected, "the real peer did not connect")
        #expect(open.connected)
        #expect(bounded.datagrams <= bound)
        #expect(bounded.bytes <= 2 * c.unansweredBytesPerSecond + 6 * c.unansweredBytesPerSecond)
        #expect(bounded.addresses.count <= c.maxUnansweredAddresses)
        #expect(bounded.addresses.filter { $0 < 15 }.count <= c.maxUnansweredAddressesPerSubnet)
        #expect(bounded.addresses.filter { $0 >= 15 }.count <= c.maxUnansweredAddressesPerSubnet)
        #expect(bounded.withheld > 0)
        #expect(open.datagrams > bounded.datagrams)
    }

    /// The per-subnet cap alone: 24 victims in 127.0.7.0/24 and 24 in 127.0.8.0/24 (with the
    /// overall cap out of the way): 8 addresses of each are checked, no more.
    @Test func atMostEightAddressesOfOneSlash24AreChecked() throws {
        let a = try ICETestPeer(bind: .loopbackIPv4(port: 0), controlling: true) {
            $0.maxRemoteCandidates = 64
            $0.maxUnansweredAddresses = 64
        }
        let victims = try (0..<48).map {
            try UDPSocket(bindingTo: SocketAddress(ipv4: 127, 0, $0 < 24 ? 7 : 8, UInt8(1 + $0 % 24), port: 0))
        }
        defer {
            a.close()
            for v in victims { v.close() }
        }
        try Self.aim(a.agent, at: victims)
        a.agent.setRemoteCredentials(ufrag: "victims1", password: "victims-password-0123456789")
        a.startReading()
        a.agent.start()
        Thread.sleep(forTimeInterval: 2)
        let got = Self.drain(victims)
        let reached = Set(got.map(\.index))
        print(
            "per /24: \(reached.filter { $0 < 24 }.count) and \(reached.filter { $0 >= 24 }.count) addresses of 24 each checked, \(got.count) datagrams"
        )
        #expect(reached.filter { $0 < 24 }.count == 8)
        #expect(reached.filter { $0 >= 24 }.count == 8)
        #expect(a.agent.statistics.checksWithheld >= 32)
    }
}
