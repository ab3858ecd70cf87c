import MediaCore
// Gathering (`ICEGathering`) on fixed instants, with no agent or socket: the STUN requests and
// their retransmissions, when gathering completes, and the candidates it makes.
import Testing

@Suite struct ICEGatheringTests {
    static let t0 = MonotonicTime(nanoseconds: 1_000_000_000)
    static func at(_ ms: Int) -> MonotonicTime { t0 + .milliseconds(ms) }

    /// A STUN server's request goes at once and again at 250, 750 and 1750 ms, then is given up
    /// at 3750 ms; with an allocation still pending, gathering completes at the 8 s deadline.
    @Test func stunRequestsAreRetransmittedAndGatheringEndsByTheDeadline() throws {
        var g = ICEGathering()
        let outcome1 = !g.completes()
        #expect(outcome1)
        let server = try SocketAddress(parsing: "192.0.2.1:3478", defaultPort: 0)
        let sent = g.start(stunServers: [ICEServer(kind: .stun, address: server)], now: Self.at(0))
        #expect(sent.map(\.destination) == [server])
        let first = try STUNMessage(parsing: try #require(sent.first).bytes)
        #expect(first.messageClass == .request && first.method == .binding)
        #expect(sent[0].bytes.count == 152)
        let relay = g.addRelay()
        #expect(relay == 0)
        var resent: [Int] = []
        var completedAt: Int?
        for ms in stride(from: 0, through: 9000, by: 10) {
            for r in g.retransmit(now: Self.at(ms)) {
                #expect(r.bytes == sent[0].bytes && r.destination == server)
                resent.append(ms)
            }
            if g.completes(now: Self.at(ms)) {
                #expect(completedAt == nil)
                completedAt = ms
            }
        }
        #expect(resent == [250, 750, 1750])
        #expect(completedAt == 8000)
        #expect(!g.hasWork)
    }

    /// Once every server answered and every allocation is done, gathering completes without
    /// waiting for the deadline; an answer from another address or a second answer is not taken.
    @Test func gatheringCompletesWhenEveryServerIsDone() throws {
        var g = ICEGathering()
        let server = try SocketAddress(parsing: "192.0.2.1:3478", defaultPort: 0)
        let other = try SocketAddress(parsing: "192.0.2.2:3478", defaultPort: 0)
        let sent = g.start(stunServers: [ICEServer(kind: .stun, address: server)], now: Self.at(0))
        let id = try STUNMessage(parsing: sent[0].bytes).transactionID
        let relay = g.addRelay()
        let outcome2 = g.serverAnswered([1, 2, 3], from: server) == nil
        #expect(outcome2)
        let outcome3 = g.serverAnswered(id, from: other)?.wrongSource == true
        #expect(outcome3)
        let outcome4 = g.serverAnswered(id, from: server)?.server?.address == server
        #expect(outcome4)
        let outcome5 = g.serverAnswered(id, from: server)?.server == nil
        #expect(outcome5)
        let outcome6 = !g.completes(now: Self.at(10))
        #expect(outcome6)
        g.relayDone(relay)
        let outcome7 = g.completes()
        #expect(outcome7)
        let outcome8 = !g.completes()
        #expect(outcome8)
    }

    /// Host candidates: duplicates dropped, IPv6 above IPv4, each address its own preference and
    /// foundation; the server-reflexive candidate sits on the first host candidate's base.
    @Test func candidatesAndFoundations() throws {
        var g = ICEGathering()
        let v4 = try SocketAddress(parsing: "10.0.0.1:5000", defaultPort: 0)
        let v4b = try SocketAddress(parsing: "10.0.0.2:5000", defaultPort: 0)
        let v6 = try SocketAddress(parsing: "[2001:db8::1]:5000", defaultPort: 0)
        let hosts = g.hostCandidates([v4, v4b, v4, v6])
        #expect(hosts.map(\.candidate.address) == [v4, v4b, v6])
        #expect(hosts.map(\.candidate.foundation) == ["1", "2", "3"])
        #expect(hosts[2].candidate.priority > hosts[0].candidate.priority)
        #expect(hosts[0].candidate.priority > hosts[1].candidate.priority)
        for h in hosts {
            let added = g.add(h)
            #expect(added)
        }
        let outcome9 = !g.add(hosts[0])
        #expect(outcome9)
        let mapped = try SocketAddress(parsing: "203.0.113.7:40000", defaultPort: 0)
        let stun = try SocketAddress(parsing: "192.0.2.1:3478", defaultPort: 0)
        let made = g.serverReflexive(mapped, server: stun)
        let srflx = try #require(made)
        #expect(srflx.base == v4 && srflx.candidate.type == .srflx && srflx.candidate.relatedAddress == v4)
        #expect(g.foundation(.srflx, base: v4, server: stun) == srflx.candidate.foundation)
        let outcome10 = g.add(srflx)
        #expect(outcome10)
        let outcome11 = g.serverReflexive(mapped, server: stun) == nil
        #expect(outcome11)
    }
}
