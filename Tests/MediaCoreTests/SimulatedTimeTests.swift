// The simulated clock and the virtual network that the simulated-time tests stand on: work runs in
// due order at its due time, cancelled work never runs, repeating work does not drift; datagrams
// take exactly the link's delay, losses repeat per seed, and each kind of NAT maps and filters as
// RFC 4787 describes (hole punching works between cones and fails between symmetric NATs).
import MediaCore
import MediaTestSupport
import MediaTools
import Synchronization
import Testing

/// A list that `@Sendable` work can append to (the simulated clock runs it on the test's thread).
final class Trace<T: Sendable>: Sendable {
    private let items = Mutex<[T]>([])
    func append(_ t: T) { items.withLock { $0.append(t) } }
    var all: [T] { items.withLock { $0 } }
}

@Suite struct SimulatedTimeTests {
    @Test func workRunsInDueOrderAtItsDueTimeAndTiesKeepTheirOrder() {
        let time = SimulatedTime()
        let start = time.now
        let trace = Trace<(String, Duration)>()
        for (name, ms) in [("c", 30), ("a", 10), ("b", 10), ("d", 0)] {
            time.schedule(after: .milliseconds(ms)) { trace.append((name, time.now - start)) }
        }
        #expect(trace.all.isEmpty, "nothing runs before the clock moves")
        time.advance(by: .milliseconds(20))
        #expect(trace.all.map(\.0) == ["d", "a", "b"])
        #expect(trace.all.map(\.1) == [.zero, .milliseconds(10), .milliseconds(10)])
        #expect(time.now - start == .milliseconds(20))
        time.advance(by: .milliseconds(20))
        #expect(trace.all.map(\.0) == ["d", "a", "b", "c"])
        #expect(trace.all.last?.1 == .milliseconds(30))
    }

    @Test func workScheduledByWorkRunsInTheSameAdvanceWhenDue() {
        let time = SimulatedTime()
        let trace = Trace<Int>()
        time.schedule(after: .milliseconds(5)) {
            trace.append(1)
            time.schedule(after: .milliseconds(5)) { trace.append(2) }
            time.schedule(after: .milliseconds(50)) { trace.append(3) }
        }
        time.advance(by: .milliseconds(10))
        #expect(trace.all == [1, 2])
        #expect(time.pending == 1)
    }

    @Test func cancelledWorkNeverRunsAndRepeatingWorkKeepsItsCadence() {
        let time = SimulatedTime()
        let start = time.now
        let ran = Trace<Int>()
        let cancelled = time.schedule(after: .milliseconds(5)) { ran.append(0) }
        cancelled.cancel()
        let ticks = Trace<Duration>()
        let repeating = time.scheduleRepeating(every: .milliseconds(50)) { ticks.append(time.now - start) }
        time.advance(by: .milliseconds(1_000))
        #expect(ran.all.isEmpty)
        #expect(ticks.all.count == 21)
        #expect(ticks.all == (0...20).map { .milliseconds(50 * $0) })
        repeating.cancel()
        time.advance(by: .seconds(1))
        #expect(ticks.all.count == 21)
    }

    @Test func runUntilStopsWhenTheConditionHoldsOrTheTimeoutPasses() {
        let time = SimulatedTime()
        let start = time.now
        let flag = Trace<Bool>()
        time.schedule(after: .milliseconds(235)) { flag.append(true) }
        #expect(time.runUntil(timeout: .seconds(1)) { !flag.all.isEmpty })
        #expect(time.now - start == .milliseconds(240), "checked every 10 ms step")
        #expect(!time.runUntil(timeout: .milliseconds(500)) { false })
        #expect(time.now - start == .milliseconds(740))
    }
}

@MainActor
@Suite struct VirtualNetworkTests {
    static func host(_ d: UInt8) -> SocketAddress { SocketAddress(ipv4: 127, 77, 1, d, port: 0) }

    /// An endpoint that records what it receives, with the simulated time of each arrival.
    final class Receiver {
        let port: VirtualDatagramPort
        let got = Trace<(bytes: [UInt8], from: SocketAddress, at: MonotonicTime)>()
        init(_ network: VirtualNetwork, _ address: SocketAddress, time: SimulatedTime) {
            port = network.bind(address)
            let got = self.got
            port.start(screen: nil) { bytes, from in got.append((bytes, from, time.now)) }
        }
        var address: SocketAddress { port.address }
    }

    @Test func aDatagramTakesExactlyTheLinksDelayAndSourcesKeepTheirAddress() {
        let time = SimulatedTime()
        let network = VirtualNetwork(time: time, defaultLink: ImpairmentModel.Settings(delayMilliseconds: 25))
        let a = Receiver(network, SocketAddress(Self.host(1), port: 5000), time: time)
        let b = Receiver(network, SocketAddress(Self.host(2), port: 6000), time: time)
        let sentAt = time.now
        a.port.send([1, 2, 3], to: b.address)
        time.advance(by: .milliseconds(24))
        #expect(b.got.all.isEmpty)
        time.advance(by: .milliseconds(1))
        #expect(b.got.all.map(\.bytes) == [[1, 2, 3]])
        #expect(b.got.all.first?.from == a.address)
        #expect(b.got.all.first.map { $0.at - sentAt } == .milliseconds(25))
        // Nobody at that port: counted, not delivered.
        a.port.send([9], to: SocketAddress(Self.host(2), port: 6001))
        time.advance(by: .milliseconds(30))
        #expect(network.counters.noListener == 1)
    }

    @Test func lossesRepeatForASeedAndDifferForAnother() {
        func delivered(seed: UInt64) -> [Int] {
            let time = SimulatedTime()
            var link = ImpairmentModel.Settings(delayMilliseconds: 5)
            link.loss = 0.1
            let network = VirtualNetwork(time: time, seed: seed, defaultLink: link)
            let a = Receiver(network, SocketAddress(Self.host(1), port: 5000), time: time)
            let b = Receiver(network, SocketAddress(Self.host(2), port: 6000), time: time)
            for i in 0..<1000 {
                a.port.send([UInt8(i & 0xFF), UInt8(i >> 8)], to: b.address)
                time.advance(by: .milliseconds(1))
            }
            time.advance(by: .milliseconds(10))
            return b.got.all.map { Int($0.bytes[0]) | Int($0.bytes[1]) << 8 }
        }
        let first = delivered(seed: 7), again = delivered(seed: 7), other = delivered(seed: 8)
        #expect(first == again)
        #expect(first != other)
        #expect((860...940).contains(first.count), "\(first.count) of 1000 with 10 % loss")
        #expect(first == first.sorted(), "no reordering configured")
    }

    @Test func aRateLimitedLinkSerialisesAndDropsWhatItsQueueCannotHold() {
        let time = SimulatedTime()
        var link = ImpairmentModel.Settings()
        link.rateBitsPerSecond = 80_000  // 10 kB/s: a 1,000-byte datagram takes 100 ms
        link.queueLimitMilliseconds = 250
        let network = VirtualNetwork(time: time, defaultLink: link)
        let a = Receiver(network, SocketAddress(Self.host(1), port: 5000), time: time)
        let b = Receiver(network, SocketAddress(Self.host(2), port: 6000), time: time)
        let start = time.now
        for _ in 0..<6 { a.port.send([UInt8](repeating: 0, count: 1000), to: b.address) }
        time.advance(by: .seconds(1))
        // Queued behind 0, 100, 200 ms of earlier datagrams: the 4th would wait 300 ms, over 250.
        #expect(b.got.all.map { $0.at - start } == [.milliseconds(100), .milliseconds(200), .milliseconds(300)])
        #expect(network.counters.lost == 3)
    }

    /// Two homes behind NATs of `kind`, a server outside: each sends to the server, learns its
    /// outside address from the source the server saw, then both send to each other's learned
    /// address (hole punching). Whether each got the other's datagram.
    func holePunch(_ kind: VirtualNetwork.NATBehaviour) -> (aGot: Bool, bGot: Bool, aOutside: SocketAddress, aToB: SocketAddress?)
    {
        let time = SimulatedTime()
        let network = VirtualNetwork(time: time)
        network.addNAT(publicHost: Self.host(101), behaviour: kind, insideHosts: [Self.host(1)])
        network.addNAT(publicHost: Self.host(102), behaviour: kind, insideHosts: [Self.host(2)])
        let server = Receiver(network, SocketAddress(Self.host(200), port: 3478), time: time)
        let a = Receiver(network, SocketAddress(Self.host(1), port: 5000), time: time)
        let b = Receiver(network, SocketAddress(Self.host(2), port: 5000), time: time)
        a.port.send([1], to: server.address)
        b.port.send([2], to: server.address)
        time.advance(by: .milliseconds(10))
        let seen = Dictionary(uniqueKeysWithValues: server.got.all.map { ($0.bytes[0], $0.from) })
        let aOutside = seen[1]!, bOutside = seen[2]!
        a.port.send([10], to: bOutside)
        b.port.send([20], to: aOutside)
        time.advance(by: .milliseconds(10))
        a.port.send([11], to: bOutside)
        b.port.send([21], to: aOutside)
        time.advance(by: .milliseconds(10))
        let aToB = b.got.all.first?.from
        return (!a.got.all.isEmpty, !b.got.all.isEmpty, aOutside, aToB)
    }

    @Test func holePunchingWorksBetweenConesAndFailsBetweenSymmetricNATs() {
        for kind in [VirtualNetwork.NATBehaviour.portPreservingCone, .addressRestricted, .portRestricted] {
            let r = holePunch(kind)
            #expect(r.aGot && r.bGot, "\(kind): both reach each other")
            #expect(r.aToB == r.aOutside, "\(kind): the same outside address toward every destination")
        }
        let cone = holePunch(.portPreservingCone)
        #expect(cone.aOutside.port == 5000, "the inside port is kept")
        let symmetric = holePunch(.symmetric)
        #expect(!symmetric.aGot && !symmetric.bGot, "a symmetric NAT maps each destination to a new port")
    }

    @Test func eachNATFiltersUnsolicitedTrafficAsItsKindSays() {
        // Inside host sends to server:3478; then the server's other port and a stranger try back.
        for kind in [VirtualNetwork.NATBehaviour.portPreservingCone, .addressRestricted, .portRestricted, .symmetric] {
            let time = SimulatedTime()
            let network = VirtualNetwork(time: time)
            network.addNAT(publicHost: Self.host(101), behaviour: kind, insideHosts: [Self.host(1)])
            let inside = Receiver(network, SocketAddress(Self.host(1), port: 5000), time: time)
            let server = Receiver(network, SocketAddress(Self.host(200), port: 3478), time: time)
            let serverOther = Receiver(network, SocketAddress(Self.host(200), port: 3479), time: time)
            let stranger = Receiver(network, SocketAddress(Self.host(201), port: 3478), time: time)
            inside.port.send([0], to: server.address)
            time.advance(by: .milliseconds(10))
            let outside = server.got.all[0].from
            server.port.send([1], to: outside)
            serverOther.port.send([2], to: outside)
            stranger.port.send([3], to: outside)
            time.advance(by: .milliseconds(10))
            let got = Set(inside.got.all.map { $0.bytes[0] })
            switch kind {
            case .portPreservingCone: #expect(got == [1, 2, 3], "\(kind)")
            case .addressRestricted: #expect(got == [1, 2], "\(kind)")
            case .portRestricted, .symmetric: #expect(got == [1], "\(kind)")
            }
            #expect(network.counters.filtered == 3 - got.count, "\(kind)")
        }
    }
}
