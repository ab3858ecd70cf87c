import Glibc
import MediaCore
import MediaTools
import Synchronization
import Testing

private func ipv6LoopbackAvailable() -> Bool {
    (try? UDPSocket(bindingTo: .loopbackIPv6(port: 0))) != nil
}

private final class Inbox: Sendable {
    let entries = Mutex<[(bytes: [UInt8], source: SocketAddress?)]>([])
}

/// A loopback endpoint that records every datagram it receives (on a `UDPReceiver` thread).
private final class Endpoint: Sendable {
    let socket: UDPSocket
    let address: SocketAddress
    let inbox = Inbox()
    let receiver: UDPReceiver

    init(_ bind: SocketAddress = .loopbackIPv4(port: 0)) throws {
        var options = UDPSocket.Options()
        options.receiveBufferSize = 1 << 20
        socket = try UDPSocket(bindingTo: bind, options: options)
        address = try socket.localAddress()
        let inbox = self.inbox
        receiver = UDPReceiver(socket: socket, pollIntervalMilliseconds: 10) { d in
            let copy = [UInt8](d.bytes)
            inbox.entries.withLock { $0.append((copy, d.source)) }
        }
        receiver.start()
    }

    var count: Int { inbox.entries.withLock { $0.count } }
    var packets: [[UInt8]] { inbox.entries.withLock { $0.map(\.bytes) } }

    func send(_ bytes: [UInt8], to destination: SocketAddress) throws {
        _ = try bytes.withUnsafeBytes { try socket.send($0, to: destination) }
    }

    /// Returns as soon as `count` reaches `n`; otherwise once no datagram has arrived for `quiet`
    /// ms (the relay has nothing left in flight), or after 10 s.
    func settle(expecting n: Int = .max, quietMilliseconds quiet: UInt64 = 500) {
        let deadline = MonotonicTime.now.nanoseconds + 10_000_000_000
        var last = count
        var stableSince = MonotonicTime.now.nanoseconds
        while count < n && MonotonicTime.now.nanoseconds < deadline
            && MonotonicTime.now.nanoseconds - stableSince < quiet * 1_000_000
        {
            usleep(2000)
            if count != last { last = count; stableSince = MonotonicTime.now.nanoseconds }
        }
    }

    deinit { receiver.stop() }
}

/// Packet `seq` of `size` bytes: a 4-byte big-endian sequence number, then a pattern.
private func numbered(_ seq: Int, size: Int = 100) -> [UInt8] {
    var p = withUnsafeBytes(of: UInt32(seq).bigEndian) { [UInt8]($0) }
    p += (4..<max(4, size)).map { UInt8(truncatingIfNeeded: $0 &* 3 &+ seq) }
    return p
}

private func sequenceNumber(_ p: [UInt8]) -> Int {
    Int(p[0]) << 24 | Int(p[1]) << 16 | Int(p[2]) << 8 | Int(p[3])
}

/// Sends `count` numbered packets, `perTick` every `tickMicroseconds`, so socket buffers never overflow.
private func sendPaced(
    _ from: Endpoint, to: SocketAddress, count: Int, size: Int = 100,
    perTick: Int = 10, tickMicroseconds: UInt32 = 5000
) throws {
    for seq in 0..<count {
        try from.send(numbered(seq, size: size), to: to)
        if seq % perTick == perTick - 1 { usleep(tickMicroseconds) }
    }
}

@Suite struct ImpairmentRelayTests {
    @Test func withoutImpairmentForwardsBothDirectionsByteExact() throws {
        let sender = try Endpoint(), destination = try Endpoint()
        let relay = try ImpairmentRelay(configuration: .init(listen: .loopbackIPv4(port: 0), to: destination.address))
        relay.start()
        let sizes = [1500, 1200, 4, 700] + (0..<95).map { 4 + ($0 * 37) % 1300 }
        let forward = [[0x5a]] + sizes.enumerated().map { numbered($0.offset, size: $0.element) }
        for p in forward { try sender.send(p, to: relay.listenAddress) }
        destination.settle(expecting: 100)
        #expect(destination.packets == forward)
        // Replies go back through the relay to the sender, which sees them come from the listen port.
        let upstream = try #require(destination.inbox.entries.withLock { $0.first?.source })
        let backward = forward.reversed().map { Array($0.reversed()) }
        for p in backward { try destination.send(p, to: upstream) }
        sender.settle(expecting: 100)
        #expect(sender.packets == backward)
        #expect(sender.inbox.entries.withLock { $0.allSatisfy { $0.source == relay.listenAddress } })
        relay.stop()
        let stats = relay.statistics
        #expect(stats.forward.received == 100 && stats.forward.forwarded == 100)
        #expect(stats.reverse.received == 100 && stats.reverse.forwarded == 100)
        #expect(stats.forward.bytesForwarded == forward.reduce(0) { $0 + $1.count })
        #expect(stats.forward.droppedByLoss == 0 && stats.reverse.droppedWithoutPeer == 0)
    }

    @Test func repliesBeforeAnySenderAreDroppedAndCounted() throws {
        let sender = try Endpoint(), destination = try Endpoint()
        let relay = try ImpairmentRelay(configuration: .init(listen: .loopbackIPv4(port: 0), to: destination.address))
        relay.start()
        #expect(relay.upstreamAddress.family == .ipv4 && relay.upstreamAddress.port != 0)
        try destination.send([1, 2, 3], to: relay.upstreamAddress)
        let deadline = MonotonicTime.now.nanoseconds + 5_000_000_000
        while relay.statistics.reverse.droppedWithoutPeer == 0 && MonotonicTime.now.nanoseconds < deadline { usleep(2000) }
        #expect(relay.statistics.reverse.droppedWithoutPeer == 1)
        // Once the sender has spoken, replies reach it.
        try sender.send([9], to: relay.listenAddress)
        destination.settle(expecting: 1)
        try destination.send([4, 5], to: relay.upstreamAddress)
        sender.settle(expecting: 1)
        #expect(sender.packets == [[4, 5]])
        #expect(destination.packets == [[9]])
    }

    @Test(.enabled(if: ipv6LoopbackAvailable(), "::1 is not configured on this machine"))
    func relaysOverIPv6Loopback() throws {
        let sender = try Endpoint(.loopbackIPv6(port: 0)), destination = try Endpoint(.loopbackIPv6(port: 0))
        let relay = try ImpairmentRelay(configuration: .init(listen: .loopbackIPv6(port: 0), to: destination.address))
        relay.start()
        let packets = (0..<20).map { numbered($0, size: 50 + $0) }
        for p in packets { try sender.send(p, to: relay.listenAddress) }
        destination.settle(expecting: 20)
        #expect(destination.packets == packets)
        #expect(relay.listenAddress.family == .ipv6)
    }

    @Test func tenPercentLossOver2000PacketsMatchesTheModel() throws {
        let sender = try Endpoint(), destination = try Endpoint()
        let settings = ImpairmentModel.Settings(loss: 0.1)
        let relay = try ImpairmentRelay(
            configuration: .init(
                listen: .loopbackIPv4(port: 0), to: destination.address,
                impairment: settings, seed: 2024))
        relay.start()
        try sendPaced(sender, to: relay.listenAddress, count: 2000)
        destination.settle()
        relay.stop()
        let stats = relay.statistics.forward
        let received = destination.count
        #expect(received == stats.forwarded)
        #expect(abs(received - 1800) <= 90, "received \(received) of 2000 at 10 % loss")
        #expect(stats.droppedByLoss + stats.forwarded == stats.received)
        // Loss depends only on the seed and the packet's position, so when the kernel dropped
        // nothing on the way in, the relay lost exactly the packets the model loses offline.
        if stats.received == 2000 {
            var model = ImpairmentModel(settings: settings, seed: 2024)
            let expectedLost = (0..<2000).filter { model.decide(arrival: UInt64($0), size: 100) == .drop(.loss) }
            let seen = Set(destination.packets.map(sequenceNumber))
            #expect(Set(0..<2000).subtracting(seen) == Set(expectedLost))
        }
    }

    @Test func lossPerStreamLosesTheSamePacketsOfAStreamHoweverTheLinkIsShared() throws {
        /// An RTP packet of `ssrc` with sequence number `seq` (payload type 96, 60 bytes of payload).
        func rtp(ssrc: UInt32, seq: Int) -> [UInt8] {
            var p = [UInt8](repeating: 0xAB, count: 72)
            _ = p.withUnsafeMutableBytes {
                $0.appending {
                    RTPHeader(payloadType: 96, sequenceNumber: UInt16(truncatingIfNeeded: seq), timestamp: 0, ssrc: ssrc)
                        .marshal(into: &$0)
                }
            }
            return p
        }
        let rtcp: [UInt8] = [0x80, 200, 0, 6] + [UInt8](repeating: 0, count: 24)
        let audio: UInt32 = 0x3333_4444, video: UInt32 = 0x1111_2222
        let settings = ImpairmentModel.Settings(loss: 0.1, burst: 2)
        /// Sends 300 packets of `audio` with `company` other datagrams after each, and returns the
        /// audio sequence numbers that arrived (nil when the kernel dropped some on the way in).
        func run(perStream: Bool, company: Int, shift: Int) throws -> Set<Int>? {
            let sender = try Endpoint(), destination = try Endpoint()
            var configuration = ImpairmentRelay.Configuration(
                listen: .loopbackIPv4(port: 0), to: destination.address, impairment: settings, seed: 99)
            configuration.lossPerStream = perStream
            let relay = try ImpairmentRelay(configuration: configuration)
            relay.start()
            var sent = 0
            for seq in 0..<300 {
                try sender.send(rtp(ssrc: audio, seq: seq), to: relay.listenAddress)
                for k in 0..<company {
                    let other = (seq + k + shift) % 4 == 0 ? rtcp : rtp(ssrc: video, seq: seq * company + k)
                    try sender.send(other, to: relay.listenAddress)
                }
                sent += 1 + company
                if seq % 10 == 9 { usleep(3000) }
            }
            destination.settle()
            relay.stop()
            let stats = relay.statistics.forward
            #expect(stats.droppedByLoss + stats.forwarded == stats.received)
            #expect(stats.droppedByLoss > 0)
            guard stats.received == sent else { return nil }
            return Set(
                destination.packets.compactMap { bytes in
                    let header = try? RTPPacket(parsing: bytes.span.bytes).header
                    return header.flatMap { $0.ssrc == audio ? Int($0.sequenceNumber) : nil }
                })
        }
        let alone = try run(perStream: true, company: 0, shift: 0)
        let crowded = try run(perStream: true, company: 3, shift: 1)
        let shifted = try run(perStream: true, company: 2, shift: 2)
        print(
            "audio packets arriving of 300, own loss model: \([alone, crowded, shifted].map { $0.map { "\($0.count)" } ?? "kernel drop" })"
        )
        if let alone, let crowded, let shifted {
            #expect(alone.count < 300 && alone.count > 200, "\(300 - alone.count) of 300 audio packets lost at 10 %")
            #expect(crowded == alone && shifted == alone)
        }
        // With one model for the direction, the audio's losses depend on what shares the link.
        if let shared1 = try run(perStream: false, company: 3, shift: 1),
            let shared2 = try run(perStream: false, company: 2, shift: 2)
        {
            print("audio packets arriving of 300, shared loss model: \(shared1.count), \(shared2.count)")
            #expect(shared1 != shared2)
        }
    }

    @Test func lossPerStreamBoundsItsStreamsAndCountsEveryLoss() throws {
        let sender = try Endpoint(), destination = try Endpoint()
        var configuration = ImpairmentRelay.Configuration(
            listen: .loopbackIPv4(port: 0), to: destination.address, impairment: .init(loss: 0.2), seed: 5)
        configuration.lossPerStream = true
        let relay = try ImpairmentRelay(configuration: configuration)
        relay.start()
        // A stranger cycling through 64 SSRCs, and datagrams too short to be RTP.
        for i in 0..<1280 {
            var p: [UInt8] = [0x80, 96, 0, UInt8(truncatingIfNeeded: i), 0, 0, 0, 0, 0, 0, 0, UInt8(i % 64)]
            if i % 16 == 15 { p = [0x80, 96, 0] }
            try sender.send(p + [UInt8](repeating: 1, count: 40), to: relay.listenAddress)
            if i % 10 == 9 { usleep(3000) }
        }
        destination.settle()
        relay.stop()
        let stats = relay.statistics.forward
        #expect(stats.droppedByLoss + stats.forwarded == stats.received)
        #expect(destination.count == stats.forwarded)
        // About 20 % lost, whichever model drew the loss.
        #expect(abs(Double(stats.droppedByLoss) / Double(stats.received) - 0.2) < 0.05, "\(stats)")
    }

    @Test func reorderingIsObservedAtTheDestination() throws {
        let sender = try Endpoint(), destination = try Endpoint()
        let relay = try ImpairmentRelay(
            configuration: .init(
                listen: .loopbackIPv4(port: 0), to: destination.address,
                impairment: .init(delayMilliseconds: 5, reorder: 0.1, reorderDelayMilliseconds: 30), seed: 5))
        relay.start()
        try sendPaced(sender, to: relay.listenAddress, count: 600, perTick: 5, tickMicroseconds: 2000)
        destination.settle(expecting: 600)
        relay.stop()
        let order = destination.packets.map(sequenceNumber)
        #expect(Set(order) == Set(0..<600), "every packet arrives once")
        var highest = -1, late = 0
        for s in order { if s < highest { late += 1 } else { highest = s } }
        let reordered = relay.statistics.forward.reordered
        #expect(abs(Double(reordered) / 600 - 0.1) < 0.05, "\(reordered) held back")
        // Held packets are overtaken unless the sender stalled for the whole 30 ms hold.
        #expect(late >= reordered / 2 && late <= reordered, "\(late) arrived after a later packet")
    }

    @Test func duplicatesArriveTwice() throws {
        let sender = try Endpoint(), destination = try Endpoint()
        let relay = try ImpairmentRelay(
            configuration: .init(
                listen: .loopbackIPv4(port: 0), to: destination.address, impairment: .init(duplicate: 0.2), seed: 9))
        relay.start()
        try sendPaced(sender, to: relay.listenAddress, count: 300)
        let duplicated = { relay.statistics.forward.duplicated }
        destination.settle()
        relay.stop()
        let counts = Dictionary(grouping: destination.packets.map(sequenceNumber), by: { $0 }).mapValues(\.count)
        #expect(counts.count == 300)
        #expect(counts.values.filter { $0 == 2 }.count == duplicated())
        #expect(abs(Double(duplicated()) / 300 - 0.2) < 0.08)
    }

    @Test func rateLimitDeliversAboutTheConfiguredBitRate() throws {
        let sender = try Endpoint(), destination = try Endpoint()
        let relay = try ImpairmentRelay(
            configuration: .init(
                listen: .loopbackIPv4(port: 0), to: destination.address,
                impairment: .init(rateBitsPerSecond: 1_000_000, queueLimitMilliseconds: 100), seed: 1))
        relay.start()
        // Offer 5 Mbit/s: 1250-byte packets, 5 every 10 ms, for about a second.
        let start = MonotonicTime.now.nanoseconds
        var seq = 0
        while MonotonicTime.now.nanoseconds - start < 1_000_000_000 {
            let tick = start + UInt64(seq / 5) * 10_000_000
            let now = MonotonicTime.now.nanoseconds
            if now < tick { usleep(UInt32((tick - now) / 1000)) }
            try sender.send(numbered(seq, size: 1250), to: relay.listenAddress)
            seq += 1
        }
        let offeredSeconds = Double(MonotonicTime.now.nanoseconds - start) / 1e9
        destination.settle()
        relay.stop()
        let stats = relay.statistics.forward
        let deliveredBits = Double(destination.count * 1250 * 8)
        // What a 1 Mbit/s link carries while traffic is offered, plus its 100 ms queue draining after.
        let expected = 1_000_000 * (offeredSeconds + 0.1)
        #expect(
            abs(deliveredBits - expected) <= 0.2 * expected,
            "\(deliveredBits) bits delivered over \(offeredSeconds) s, \(seq) packets offered")
        #expect(stats.droppedByQueue > 0)
        #expect(stats.received == stats.forwarded + stats.droppedByQueue)
    }

    @Test func updateChangesTheImpairmentWhileRunningAndKeepsTheCounters() throws {
        let sender = try Endpoint(), destination = try Endpoint()
        let relay = try ImpairmentRelay(configuration: .init(listen: .loopbackIPv4(port: 0), to: destination.address))
        relay.start()
        func burst(_ range: Range<Int>) throws { for i in range { try sender.send(numbered(i), to: relay.listenAddress) } }
        try burst(0..<50)
        destination.settle(expecting: 50)
        #expect(destination.count == 50)
        var lossy = relay.configuration
        lossy.forward = ImpairmentModel.Settings(loss: 1)
        relay.update(configuration: lossy)
        // Wait until the relay thread has taken the new model: a probe is lost once it has.
        var probes = 0
        while relay.statistics.forward.droppedByLoss == 0 && probes < 500 {
            try sender.send([0xff], to: relay.listenAddress); probes += 1; usleep(2000)
        }
        let droppedByProbes = relay.statistics.forward.droppedByLoss
        #expect(droppedByProbes >= 1)
        destination.settle(quietMilliseconds: 100)
        let beforeLoss = destination.count
        try burst(50..<100)
        destination.settle(quietMilliseconds: 200)
        #expect(destination.count == beforeLoss, "nothing passes at 100 % loss")
        relay.update(configuration: relay.configuration)
        // Wait until a probe gets through again (the relay thread took the clean model).
        probes = 0
        while destination.count == beforeLoss && probes < 500 {
            try sender.send([0xfe], to: relay.listenAddress); probes += 1; usleep(2000)
        }
        destination.settle(quietMilliseconds: 100)
        let beforeClean = destination.count
        #expect(beforeClean > beforeLoss)
        try burst(100..<150)
        destination.settle(expecting: beforeClean + 50)
        relay.stop()
        #expect(destination.count == beforeClean + 50)
        #expect(destination.packets.suffix(50) == (100..<150).map { numbered($0) })
        let stats = relay.statistics.forward
        #expect(stats.droppedByLoss >= droppedByProbes + 50, "the lossy model's drops survive the change back")
        #expect(stats.received == stats.forwarded + stats.droppedByLoss && stats.forwarded == destination.count)
    }

    @Test func stopIsPromptWithPacketsStillScheduled() throws {
        let sender = try Endpoint(), destination = try Endpoint()
        let relay = try ImpairmentRelay(
            configuration: .init(
                listen: .loopbackIPv4(port: 0), to: destination.address, impairment: .init(delayMilliseconds: 10_000)))
        relay.start()
        for seq in 0..<10 { try sender.send(numbered(seq), to: relay.listenAddress) }
        let deadline = MonotonicTime.now.nanoseconds + 5_000_000_000
        while relay.statistics.forward.queued < 10 && MonotonicTime.now.nanoseconds < deadline { usleep(2000) }
        #expect(relay.statistics.forward.queued == 10)
        let begin = MonotonicTime.now.nanoseconds
        relay.stop()
        #expect(MonotonicTime.now.nanoseconds - begin < 1_000_000_000)
        #expect(destination.count == 0)
    }

    @Test func configurationParsesTheCommandLineOptions() throws {
        let c = try ImpairmentRelay.Configuration(arguments: [
            "--listen", "5000", "--to", "127.0.0.1:6000", "--loss", "0.02", "--burst", "3", "--delay", "40",
            "--jitter", "15", "--reorder", "0.01", "--duplicate", "0.005", "--rate", "2000000", "--seed", "77",
        ])
        #expect(c.listen == .anyIPv4(port: 5000))
        #expect(c.to == .loopbackIPv4(port: 6000))
        #expect(
            c.forward
                == ImpairmentModel.Settings(
                    loss: 0.02, burst: 3, delayMilliseconds: 40, jitterMilliseconds: 15,
                    reorder: 0.01, duplicate: 0.005, rateBitsPerSecond: 2_000_000))
        #expect(c.reverse == c.forward)
        #expect(c.seed == 77)
        let oneWay = try ImpairmentRelay.Configuration(arguments: [
            "--listen", "[::1]:5000", "--to", "[::1]:6000",
            "--loss", "0.1", "--forward-only",
        ])
        #expect(oneWay.listen == .loopbackIPv6(port: 5000))
        #expect(oneWay.reverse.isTransparent && oneWay.forward.loss == 0.1)
        #expect(!c.lossPerStream && !oneWay.lossPerStream)
        let perStream = try ImpairmentRelay.Configuration(arguments: [
            "--listen", "5000", "--to", "127.0.0.1:6000", "--loss", "0.1", "--loss-per-stream",
        ])
        #expect(perStream.lossPerStream && perStream.forward.loss == 0.1)
        // Every option the parser accepts is in the help text.
        for option in [
            "--listen", "--to", "--loss", "--burst", "--delay", "--jitter", "--reorder", "--reorder-delay",
            "--duplicate", "--rate", "--queue", "--seed", "--forward-only", "--loss-per-stream",
        ] {
            #expect(ImpairmentRelay.Configuration.usage.contains(option))
        }
    }

    @Test func configurationErrorsNameTheOption() {
        let cases: [([String], String)] = [
            (["--to", "127.0.0.1:1"], "--listen"),
            (["--listen", "1"], "--to"),
            (["--listen", "1", "--to", "127.0.0.1:1", "--loss", "lots"], "--loss"),
            (["--listen", "1", "--to", "127.0.0.1:1", "--loss", "2"], "impairment"),
            (["--listen", "1", "--to", "nowhere"], "--to"),
            (["--listen", "1", "--to", "127.0.0.1:1", "--jitter"], "--jitter"),
            (["--listen", "1", "--to", "127.0.0.1:1", "--wobble", "3"], "--wobble"),
        ]
        for (arguments, option) in cases {
            do {
                _ = try ImpairmentRelay.Configuration(arguments: arguments)
                Issue.record("\(arguments) parsed")
            } catch {
                #expect(error.option == option, "\(arguments): \(error)")
            }
        }
    }
}
