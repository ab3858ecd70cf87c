import MediaCore
// The bound on checks toward addresses that never answered, on simulated time: an agent that
// tries as hard as it can (a datagram to every destination every 10 ms) gets no more than the
// per-address budget, the address caps and the rate let through; answers and the peer's own
// checks lift the bound for their address only.
import Testing

@Suite struct ICEProbeBudgetTests {
    static let t0 = MonotonicTime(nanoseconds: 1_000_000_000)

    static func at(_ ms: Int) -> MonotonicTime { t0 + .milliseconds(ms) }

    /// 32 destinations (16 ports of 127.0.0.1, 16 addresses of 127.0.1.0/24), a 100-byte
    /// datagram to each every 10 ms for 60 s: at most min(16 addresses x 12, 40 + 20 x 60)
    /// datagrams and 8000 + 4000 x 60 bytes go, and no more than 8 addresses of one /24.
    @Test func anAgentTryingHardestSendsNoMoreThanTheBound() {
        let c = ICEAgentConfiguration(controlling: false)
        var budget = ICEProbeBudget(configuration: c, now: Self.t0)
        let victims =
            (0..<16).map { SocketAddress(ipv4: 127, 0, 0, 1, port: UInt16(40000 + $0)) }
            + (0..<16).map { SocketAddress(ipv4: 127, 0, 1, UInt8(1 + $0), port: 9) }
        var sent: [SocketAddress: Int] = [:]
        var total = 0, bytes = 0, withheld = 0
        let seconds = 60
        for step in 0..<(seconds * 100) {
            for v in victims {
                switch budget.admit(v, relay: nil, size: 100, now: Self.at(step * 10)) {
                case .send:
                    sent[v, default: 0] += 1
                    total += 1
                    bytes += 100
                case .later: break
                case .never: withheld += 1
                }
            }
        }
        let bound = min(
            c.maxUnansweredAddresses * c.unansweredSendsPerAddress,
            2 * c.unansweredChecksPerSecond + c.unansweredChecksPerSecond * seconds)
        print(
            "probe budget: \(total) datagrams (\(bytes) bytes) to \(sent.count) of 32 unanswered addresses in \(seconds) s; bound \(bound)"
        )
        #expect(total <= bound)
        #expect(bytes <= 2 * c.unansweredBytesPerSecond + c.unansweredBytesPerSecond * seconds)
        #expect(sent.count == c.maxUnansweredAddresses)
        #expect(sent.values.allSatisfy { $0 == c.unansweredSendsPerAddress })
        #expect(sent.keys.filter { $0.addressBytes[2] == 0 }.count == c.maxUnansweredAddressesPerSubnet)
        #expect(sent.keys.filter { $0.addressBytes[2] == 1 }.count == c.maxUnansweredAddressesPerSubnet)
        #expect(withheld > 0)
    }

    /// The rate: a burst of twice the rate, then the rate; bytes likewise.
    @Test func unansweredTrafficHasARate() {
        var c = ICEAgentConfiguration(controlling: false)
        c.unansweredSendsPerAddress = 1000
        var budget = ICEProbeBudget(configuration: c, now: Self.t0)
        let v = SocketAddress(ipv4: 192, 0, 2, 1, port: 9)
        var burst = 0
        while budget.admit(v, relay: nil, size: 50, now: Self.t0) == .send { burst += 1 }
        #expect(burst == 2 * c.unansweredChecksPerSecond)
        #expect(budget.admit(v, relay: nil, size: 50, now: Self.t0) == .later)
        var inTwoSeconds = 0
        for ms in stride(from: 1, through: 2000, by: 1) where budget.admit(v, relay: nil, size: 50, now: Self.at(ms)) == .send {
            inTwoSeconds += 1
        }
        #expect((2 * c.unansweredChecksPerSecond - 1...2 * c.unansweredChecksPerSecond).contains(inTwoSeconds))
        // Large datagrams (a long ufrag): the byte rate binds first.
        var big = ICEProbeBudget(configuration: c, now: Self.t0)
        var bigSent = 0
        while big.admit(v, relay: nil, size: 1000, now: Self.t0) == .send { bigSent += 1 }
        #expect(bigSent == 2 * c.unansweredBytesPerSecond / 1000)
    }

    /// IPv6: at most 8 addresses of one /64; another /64 has its own 8.
    @Test func subnetCapIPv6() {
        let c = ICEAgentConfiguration(controlling: false)
        var budget = ICEProbeBudget(configuration: c, now: Self.t0)
        func address(_ net: UInt8, _ host: UInt8) -> SocketAddress {
            SocketAddress(ipv6: [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, net, 0, 0, 0, 0, 0, 0, 0, host], port: 9)
        }
        let first = (1...12).map { budget.admit(address(1, $0), relay: nil, size: 100, now: Self.at(Int($0) * 100)) }
        #expect(first.filter { $0 == .send }.count == c.maxUnansweredAddressesPerSubnet)
        #expect(first.suffix(4).allSatisfy { $0 == .never })
        #expect(budget.admit(address(2, 1), relay: nil, size: 100, now: Self.at(2000)) == .send)
    }

    /// An answer lifts every bound for its address; a request lifts the caps for its address and
    /// tops its budget up to one transaction; a new generation starts the budgets again.
    @Test func answersAndRequestsLiftTheBoundForTheirAddressOnly() {
        var c = ICEAgentConfiguration(controlling: false)
        c.maxUnansweredAddressesPerSubnet = 2
        var budget = ICEProbeBudget(configuration: c, now: Self.t0)
        let a = SocketAddress(ipv4: 10, 0, 0, 1, port: 1), b = SocketAddress(ipv4: 10, 0, 0, 2, port: 1)
        let peer = SocketAddress(ipv4: 10, 0, 0, 3, port: 1)
        var ms = 0
        func admit(_ x: SocketAddress, relay: Int? = nil) -> ICEProbeBudget.Verdict {
            ms += 100
            return budget.admit(x, relay: relay, size: 100, now: Self.at(ms))
        }
        for _ in 0..<c.unansweredSendsPerAddress { #expect(admit(a) == .send) }
        #expect(admit(a) == .never)
        #expect(admit(b) == .send)
        #expect(admit(peer) == .never)  // the /24 holds two already
        // Through a relay, the same address has a budget of its own (caps count addresses).
        #expect(admit(a, relay: 0) == .send)
        // The peer asks: its full budget (never spent, the cap held it back) may go now.
        budget.noteRequest(from: peer, relay: nil)
        for _ in 0..<c.unansweredSendsPerAddress { #expect(admit(peer) == .send) }
        #expect(admit(peer) == .never)
        // Asking again gives one more transaction, no more.
        budget.noteRequest(from: peer, relay: nil)
        for _ in 0..<ICEProbeBudget.sendsPerRequest { #expect(admit(peer) == .send) }
        #expect(admit(peer) == .never)
        budget.noteAnswer(from: peer)
        for _ in 0..<100 { #expect(admit(peer) == .send) }
        #expect(admit(a) == .never)
        budget.newGeneration()
        #expect(admit(a) == .send)
        #expect(budget.isAnswered(peer))
    }
}
