import Foundation
import MediaCore
import MediaTestSupport
import Synchronization
import Testing

@testable import RevueSession

#if canImport(Glibc)
    import Glibc
#endif

/// Sends `packets` (cycled) at `rate` datagrams a second for `seconds` from a detached thread;
/// `source(i)` gives each one's address (spoofed through a raw socket when `raw` is set).
final class Flood: Sendable {
    let sent = Atomic<Int>(0)
    let done = Atomic<Bool>(false)

    init(
        packets: [[UInt8]], rate: Double, seconds: Double, count: Int = .max, to target: SocketAddress,
        raw: RawUDPSender?, socket: SessionSocket?, source: @escaping @Sendable (Int) -> SocketAddress
    ) {
        let sentCounter = self
        Thread.detachNewThread {
            // The attacker is another machine in spirit: on these two shared cores its thread
            // yields to the peers under test (nice 19 for this thread only).
            setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)  // 0: the calling thread on Linux
            let start = MonotonicTime.now
            var i = 0
            while true {
                let elapsed = (MonotonicTime.now - start).inSeconds
                if elapsed >= seconds || i >= count { break }
                let due = min(count, Int(elapsed * rate))
                while i < due {
                    let p = packets[i % packets.count]
                    if let raw { raw.send(p, from: source(i), to: target) } else { socket?.send(p, to: target) }
                    i += 1
                }
                usleep(2_000)
            }
            sentCounter.sent.store(i, ordering: .relaxed)
            sentCounter.done.store(true, ordering: .releasing)
        }
    }

    var finished: Bool { done.load(ordering: .acquiring) }
}

/// Lines with their time since a start, from any thread.
final class TraceLog: Sendable {
    private let entries = Mutex<[String]>([])
    func add(_ start: MonotonicTime, _ line: String) {
        let ms = Double((MonotonicTime.now - start).inNanoseconds) / 1e6
        entries.withLock { if $0.count < 400 { $0.append(String(format: "%8.1f ms ", ms) + line) } }
    }
    var lines: [String] { entries.withLock { $0 } }
}

/// Load-heavy attacks: a spoofed handshake flood at 50,000 datagrams a second, and a million
/// fake registrations at a rendezvous node process. Each runs for seconds, on loopback only.
@MainActor
@Suite(.serialized) struct AttackLoadTests {
    // The read queue's screen drops a flood; the few datagrams that pass (a friend's handshake)
    // must reach the main queue at once, not when the flood stops. The socket never runs dry under
    // a flood faster than the screen, and a batch that waited for 64 passed datagrams or a dry
    // socket held a friend's initiations for seconds (reconnects of 4-5 s under 50,000 a second).
    @Test func aDatagramThatPassesTheScreenIsNotHeldBehindAFloodItDrops() async throws {
        let receiver = try SessionSocket(host: "127.0.0.1", port: 0)
        defer { receiver.close() }
        let delivered = Mutex<(copy: Int, at: MonotonicTime)?>(nil)
        let screened = Atomic<Int>(0)
        receiver.start(
            screen: { bytes, _ in
                guard bytes.first == 0xFF else { return true }
                // About what one flood initiation costs the real screen (mac1, a cookie, a reply):
                // at 40 us a datagram it reads 25,000 a second, half the flood.
                let until = MonotonicTime.now + .microseconds(40)
                while MonotonicTime.now < until {}
                screened.add(1, ordering: .relaxed)
                return false
            },
            onReceive: { bytes, _ in
                if bytes.first == 0x01, bytes.count > 1 {
                    let copy = Int(bytes[1])
                    delivered.withLock { $0 = $0 ?? (copy, MonotonicTime.now) }
                }
            })
        let target = SocketAddress(ip: 0x7F00_0001, port: receiver.localPort)
        let flooder = try SessionSocket(host: "127.0.0.1", port: 0)
        defer { flooder.close() }
        let flood = Flood(
            packets: [[0xFF] + RandomBytes.bytes(120)], rate: 50_000, seconds: 4, to: target, raw: nil, socket: flooder
        ) { _ in target }
        await settle(1)
        // The receive buffer is full while the flood outruns the screen, so the kernel drops about
        // half of what arrives, and a single datagram may be among them. Like a friend's
        // initiation, it goes again (every 100 ms, numbered) until a copy gets through; the wait
        // is timed from that copy's send.
        let friend = try SessionSocket(host: "127.0.0.1", port: 0)
        defer { friend.close() }
        var sentAt: [MonotonicTime] = []
        while delivered.withLock({ $0 }) == nil && !flood.finished && sentAt.count < 20 {
            sentAt.append(MonotonicTime.now)
            friend.send([0x01, UInt8(sentAt.count - 1)] + RandomBytes.bytes(119), to: target)
            for _ in 0..<10 where delivered.withLock({ $0 }) == nil && !flood.finished { await settle(0.01) }
        }
        while delivered.withLock({ $0 }) == nil && !flood.finished { await settle(0.01) }
        let arrival = delivered.withLock { $0 }
        let floodRunning = !flood.finished
        while !flood.finished { await settle(0.1) }
        let latency = arrival.map { ($0.at - sentAt[$0.copy]).inSeconds }
        print(
            "screened flood: \(flood.sent.load(ordering: .relaxed)) sent, \(screened.load(ordering: .relaxed)) screened; \(sentAt.count) copies sent; \(arrival.map { "copy \($0.copy)" } ?? "none") arrived after \(latency.map { String(format: "%.4f s", $0) } ?? "the flood")"
        )
        #expect(screened.load(ordering: .relaxed) > 10_000, "the screen saw the flood")
        // What is left is the wait behind the flood already in the socket's receive buffer
        // (about 0.35 s here: the buffer's datagrams at the screen's pace), not the flood's 3 s.
        #expect(floodRunning, "the passing datagram waited until the flood ended")
        #expect((latency ?? .infinity) < 2)
    }

    // Handshake flood: friends reconnect within 3 s while 50,000 spoofed initiations a second (valid
    // mac1, random sources in 127/8) hit the responder.
    @Test func friendsConnectWithin3sDuringA50kppsSpoofedHandshakeFlood() async throws {
        guard let raw = RawUDPSender() else {
            print("skipped: spoofing sources needs a raw socket (root)")
            return
        }
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let alice = try TestPeer(rendezvous: node) {
            $0.timeouts = RevueTimeouts(); $0.timeouts.rendezvousInterval = 0.5
        }
        let bob = try TestPeer(rendezvous: node) {
            $0.timeouts = RevueTimeouts(); $0.timeouts.rendezvousInterval = 0.5
        }
        defer { alice.remove(); bob.remove() }
        try await befriend(alice, bob)
        let mac1Key = HandshakeMACs.mac1Key(bob.revue.core!.identity.publicKey)
        let packets = (0..<256).map { _ -> [UInt8] in
            var d = RandomBytes.bytes(111)
            d[0] = PacketType.handshakeInitiation.rawValue
            d[1] = revueProtocolVersion
            return d + Sodium.keyedBlake2b(key: mac1Key, d) + [UInt8](repeating: 0, count: 16)
        }
        let seconds = 6.0
        let kernelDrops0 = udpReceiveBufferErrors()
        let flood = Flood(
            packets: packets, rate: 50_000, seconds: seconds, to: SocketAddress(ip: 0x7F00_0001, port: bob.revue.port),
            raw: raw, socket: nil
        ) { i in
            SocketAddress(
                ip: 0x7F00_0000 | UInt32(truncatingIfNeeded: i &* 2_654_435_761) & 0x00FF_FFFF | 0x0001_0000,
                port: UInt16(truncatingIfNeeded: 1024 + i % 60_000))
        }
        await settle(1)
        // Alice restarts during the flood: a fresh handshake has to get through.
        alice.stop()
        let eventsBefore = bob.friendEvents.count
        await bob.wait("Bob sees Alice offline", timeout: 3) {
            bob.friendEvents.dropFirst(eventsBefore).contains(.paths(alice.id, false))
        }
        let restart = MonotonicTime.now
        try alice.start()
        let trace = TraceLog()
        let alicePort = alice.revue.port
        alice.revue.core!.environment.sendTap = { p, r in
            trace.add(restart, "Alice sends type \(p.first ?? 0), \(p.count) B, to \(r)")
        }
        bob.revue.core!.environment.sendTap = { p, r in
            var relayed = false
            if case .relay = r { relayed = true }
            if r.endpoint?.port == alicePort || relayed {
                trace.add(restart, "Bob sends type \(p.first ?? 0), \(p.count) B, to \(r)")
            }
        }
        await alice.wait("Alice online again", timeout: 10) { alice.revue.friends.getFriendPaths(friendId: bob.id).isOnline }
        let connectTime = (MonotonicTime.now - restart).inSeconds
        if connectTime >= 3 {
            let f = alice.revue.core!.friends[bob.id]!
            print(
                "slow reconnect; Alice: \(alice.revue.counters) cookie \(f.cookie as Any) attempts \(f.initiationAttempts) candidates \(f.candidates) stored \(f.storedRoute as Any)"
            )
            print("slow reconnect; Bob: \(bob.revue.counters)")
            print("slow reconnect; trace:\n  " + trace.lines.joined(separator: "\n  "))
        }
        _ = try await alice.revue.friends.sendMessage(friendId: bob.id, message: "through the flood")
        await bob.waitForEvent(.message(alice.id, "through the flood"))
        while !flood.finished { await settle(0.1) }
        let c = bob.revue.counters
        let sent = flood.sent.load(ordering: .relaxed)
        let kernelDrops = udpReceiveBufferErrors() - kernelDrops0
        print(
            "flood: \(sent) spoofed initiations in \(seconds) s (\(Int(Double(sent) / seconds))/s); reconnect took \(String(format: "%.3f", connectTime)) s; Bob: cookie replies \(c.cookieRepliesSent), rate-limited \(c.droppedRateLimited), forged \(c.droppedForged), overload drops \(c.droppedOverload); kernel drops \(kernelDrops)"
        )
        // The sender shares two cores with everything else; below half the rate the run proves little.
        #expect(Double(sent) >= 0.5 * 50_000 * seconds, "the flood ran at \(Double(sent) / seconds)/s")
        // Bob must read the flood as fast as it comes for the 3 s bound to mean anything. When the
        // kernel dropped any of it at a full receive buffer, Alice's initiations may have been
        // among the drops, and how long that costs depends on how the flood sender and Bob share
        // this machine's two cores, not on the handshake. Then only the reconnect itself (within
        // 10 s) is required, and the run says so. (Slow reconnects, 2-5 s with and without drops,
        // were the read queue holding the initiations that passed its screen until the flood
        // paused; since it hands them on within 64 reads, reconnects took 0.03-0.38 s in seven
        // runs, with up to 14,000 datagrams dropped.)
        if kernelDrops == 0 {
            #expect(connectTime < 3, "reconnect took \(connectTime) s")
        } else {
            print(
                "flood: the kernel dropped \(kernelDrops) of \(sent) datagrams (receiver slower than the flood): the 3 s bound is not checked"
            )
        }
        #expect(connectTime < 10)
        #expect(c.cookieRepliesSent > 10_000, "\(c)")
        #expect(bob.friendEvents.filter { if case .request = $0 { true } else { false } }.count == 1, "only the real request")
    }

    // Rendezvous state: a million fake registrations leave the node's memory bounded (resident set
    // grows by less than 16 MB) and its registrations capped, and it still serves.
    @Test(.enabled(if: NodeProcess.binary != nil, "revue-node is not built"))
    func aMillionFakeRegistrationsKeepTheRendezvousNodeBounded() async throws {
        let (process, address) = try await NodeProcess.rendezvous()
        defer { process.kill() }
        let port = UInt16(address.split(separator: ":").last!)!
        let pid = process.process.processIdentifier
        let warm = try RendezvousClient(nodePort: port)
        defer { warm.close() }
        #expect(await warm.register())
        await settle(0.3)
        let before = try #require(residentKilobytes(pid: pid))

        let attacker = try RendezvousClient(nodePort: port)
        defer { attacker.close() }
        #expect(await attacker.register())
        let cookie = attacker.cookie, nodeKey = try #require(attacker.nodeKey)
        // 2,000 real key pairs (valid seals, 32 new tags each time), the rest random keys with and
        // without our cookie.
        let real = (0..<2000).map { _ in KeyPair() }
        let macKeys = real.map { RendezvousAuth.key(secret: $0.secret, peerPublic: nodeKey)! }
        var packets: [[UInt8]] = []
        packets.reserveCapacity(4096)
        for i in 0..<4096 {
            switch i % 8 {
            case 0:
                let k = i / 8 % real.count
                // Each with a full datagram of fresh tags.
                let tags = (0..<RendezvousAuth.maxTagsPerRegistration).map { _ in RandomBytes.bytes(16) }
                packets.append(
                    RendezvousClient.registration(
                        keys: real[k], timestamp: UInt64(i + 10), cookie: cookie, macKey: macKeys[k], tags: tags))
            case 1, 2, 3:
                packets.append(
                    RendezvousClient.registration(
                        keys: KeyPair(secret: RandomBytes.bytes(32)), timestamp: 5, cookie: cookie, macKey: RandomBytes.bytes(32))
                )
            default:
                packets.append(
                    RendezvousClient.registration(
                        keys: KeyPair(secret: RandomBytes.bytes(32)), timestamp: 5, cookie: RandomBytes.bytes(16), macKey: nil))
            }
        }
        let total = 1_000_000, rate = 100_000.0
        let source = attacker.endpoint
        // The count is what the bound is about; the time allowed is four times what the rate
        // needs, because a busy 2-core machine sends at a quarter of it (24,500/s seen in a full
        // `make test` run).
        let flood = Flood(
            packets: packets, rate: rate, seconds: 4 * Double(total) / rate, count: total, to: attacker.node, raw: nil,
            socket: attacker.socket
        ) { _ in source }
        var peak = before
        while !flood.finished {
            await settle(0.25)
            peak = max(peak, residentKilobytes(pid: pid) ?? 0)
        }
        await settle(0.5)
        let after = try #require(residentKilobytes(pid: pid))
        peak = max(peak, after)
        let sent = flood.sent.load(ordering: .relaxed)
        print(
            "rendezvous: \(sent) fake registrations; RSS \(before) kB before, \(peak) kB peak, \(after) kB after (bound: +16384 kB)"
        )
        #expect(sent >= total)
        #expect(peak - before < 16_384)
        // Still serving: a client from another /24 registers and finds the warm one.
        let late = try RendezvousClient(nodePort: port, host: "127.1.0.1")
        defer { late.close() }
        #expect(await late.register())
        warm.tags = [RandomBytes.bytes(16)]
        #expect(await warm.register())
        #expect(await warm.registerOnce())
        #expect(await late.lookup(warm.tags[0]) == warm.endpoint)
    }
}
