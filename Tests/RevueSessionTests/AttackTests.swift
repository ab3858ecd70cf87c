import Foundation
import MediaCore
import Testing

@testable import RevueSession

#if canImport(Glibc)
    import Glibc
#endif

/// Loopback sockets that count every byte they receive: endpoints an attacker names.
@MainActor
final class ByteCounters {
    let sockets: [SessionSocket]
    var bytes = 0
    var datagrams = 0

    init(count: Int) throws {
        sockets = try (0..<count).map { _ in try SessionSocket(host: "127.0.0.1", port: 0) }
        for s in sockets {
            s.start { [weak self] b, _ in
                MainActor.assumeIsolated {
                    self?.bytes += b.count; self?.datagrams += 1
                }
            }
        }
    }

    var ports: [UInt16] { sockets.map(\.localPort) }
    func close() { for s in sockets { s.close() } }
}

/// A LAN announcement carrying `tags` (padded with random ones to a multiple of 8) at `port`.
func announce(_ tags: [[UInt8]], port: UInt16) -> [UInt8] {
    var all = tags
    while all.count % 8 != 0 { all.append(RandomBytes.bytes(16)) }
    var w = ByteWriter()
    w.u8(PacketType.lanAnnounce.rawValue)
    w.u8(revueProtocolVersion)
    w.u16(port)
    w.u8(UInt8(all.count))
    for t in all { w.append(t) }
    return w.bytes
}

/// The LAN tag `owner` announces for `friend` (this epoch).
func lanTag(owner: KeyPair, friend: [UInt8]) -> [UInt8] {
    let k = PrivacyTags.pairKey(secret: owner.secret, peerPublic: friend)!
    return PrivacyTags.lan(pairKey: k, owner: owner.publicKey, epoch: PrivacyTags.epoch(Date().timeIntervalSince1970))
}

/// Attacks on the session layer, performed against running peers and nodes.
@MainActor
@Suite(.serialized) struct AttackTests {
    // Announce reflection, on the session socket: a real revue-node process with LAN discovery off
    // refuses every announcement and sends nothing toward the claimed endpoints.
    @Test(.enabled(if: NodeProcess.binary != nil, "revue-node is not built"))
    func lanAnnouncesOnTheSessionSocketReflectNothing() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-attack-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let victim = try NodeProcess(["--data", dir, "--host", "127.0.0.1"])
        defer { victim.kill() }
        let ready = try #require(await victim.wait(event("ready")))
        let port = UInt16(try #require(ready["port"] as? Int))
        let friend = KeyPair()
        victim.send(["cmd": "accept", "friendId": Hex.encode(friend.publicKey)])
        _ = await victim.wait(event("ok", ["cmd": "accept"]))
        let sinks = try ByteCounters(count: 40)
        defer { sinks.close() }
        let attacker = try SessionSocket(host: "127.0.0.1", port: 0)
        defer { attacker.close() }
        var sent = 0
        for p in sinks.ports {
            let a = announce([RandomBytes.bytes(16)], port: p)
            attacker.send(a, to: SocketAddress(ip: 0x7F00_0001, port: port))
            sent += a.count
        }
        await settle(2)
        victim.send(["cmd": "counters"])
        let counters = try #require(await victim.wait(event("ok", ["cmd": "counters"])))
        let factor = Double(sinks.bytes) / Double(sent)
        print("announce reflection via the session socket: \(sent) B sent, \(sinks.bytes) B reflected, factor \(factor)")
        #expect(counters["droppedAnnounces"] as? Int == 40, "\(counters)")
        #expect(sinks.bytes == 0 && factor <= 1)
    }

    // Announce reflection, on the LAN discovery socket (LAN discovery on, attacker on a local subnet):
    // new claimed endpoints start at most one round a second and the candidate table stays at 8,
    // so the victim sends fewer bytes toward them than the attacker spends.
    @Test func lanAnnounceFloodIsRateLimitedBelowAmplificationOne() async throws {
        let lanPort = testLANPort(Int.random(in: 10...149))
        let victim = try TestPeer { c in
            c.lanDiscovery = true
            c.lanDiscoveryPort = lanPort
            c.timeouts = RevueTimeouts()  // the defaults: one handshake round a second
        }
        defer { victim.remove() }
        let friend = KeyPair()
        try victim.revue.friends.addFriendNorequest(friendId: Hex.encode(friend.publicKey))
        // The friend's tag, as a LAN attacker replaying its announcements with other ports has it.
        let tag = lanTag(owner: friend, friend: victim.revue.core!.identity.publicKey)
        let sinks = try ByteCounters(count: 40)
        defer { sinks.close() }
        let attacker = try SessionSocket(host: "127.0.0.1", port: 0)
        defer { attacker.close() }
        await settle(0.2)
        let baseline = sinks.bytes
        var sent = 0
        // 40 announces a second for 3 s, every one naming a new port.
        for round in 0..<120 {
            let a = announce([tag], port: sinks.ports[round % 40])
            attacker.send(a, to: SocketAddress(ip: 0x7F00_0001, port: lanPort))
            sent += a.count
            await settle(0.025)
        }
        await settle(1.5)
        let reflected = sinks.bytes - baseline
        let factor = Double(reflected) / Double(sent)
        let c = victim.revue.counters
        print("announce reflection via the LAN socket: \(sent) B sent, \(reflected) B reflected, factor \(factor); \(c)")
        #expect(factor <= 1, "\(c)")
        #expect(c.initiationsThrottled > 50 && c.candidatesDropped > 50, "\(c)")
        #expect(victim.revue.core!.friends[Hex.encode(friend.publicKey)]!.candidates.count <= SessionCore.maxCandidates)
    }

    // Announcements go out once a second only for the first three after start or a new friend,
    // then every 5-10 s (jittered) while someone may be looking (eager window, or a friend
    // offline), else every 15 s.
    @Test func lanAnnouncementsSlowDownWhenEveryFriendIsConnected() async throws {
        let lanPort = testLANPort(Int.random(in: 150...299))
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let alice = try TestPeer(rendezvous: node) {
            $0.lanDiscovery = true; $0.lanDiscoveryPort = lanPort
        }
        let bob = try TestPeer(rendezvous: node)
        defer { alice.remove(); bob.remove() }
        let core = alice.revue.core!
        #expect(core.lanFastLeft > 0 && core.announceInterval(now: MonotonicTime.now) == .seconds(1), "fast after start")
        await alice.wait("the fast announcements done", timeout: 5) { core.lanFastLeft == 0 }
        #expect(SessionCore.lanEagerGap.contains(core.announceInterval(now: MonotonicTime.now)), "then eager, jittered")
        core.lanEagerWindow = .zero
        core.lanEagerUntil = .zero
        #expect(core.announceInterval(now: MonotonicTime.now) == SessionCore.lanQuietInterval, "no friend: quiet")
        try await befriend(alice, bob)
        core.lanEagerUntil = .zero
        core.lanFastLeft = 0
        #expect(core.announceInterval(now: MonotonicTime.now) == SessionCore.lanQuietInterval, "every friend connected: quiet")
        bob.stop()
        await alice.waitForEvent(.paths(bob.id, false))
        #expect(SessionCore.lanEagerGap.contains(core.announceInterval(now: MonotonicTime.now)), "a friend offline: eager")
    }

    @Test func localSubnetTest() {
        #expect(SocketAddress(ip: 0x7F00_0001, port: 1).isOnLocalSubnet)
        #expect(!SocketAddress(ip: 0x0808_0808, port: 1).isOnLocalSubnet)
        #expect(SocketAddress(ip: 0xC0A8_0101, port: 1).isPrivateOrLoopback)
        #expect(!SocketAddress(ip: 0xC633_6407, port: 1).isPrivateOrLoopback)
    }

    // Spoofed lookup answers: lookup answers spoofed from the node's address are dropped (no MAC), and a
    // public node naming a private endpoint is not believed unless the lab flag says so.
    @Test func spoofedAndPrivateLookupRepliesAreIgnored() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let alice = try TestPeer(rendezvous: node), bob = try TestPeer(rendezvous: node)
        defer { alice.remove(); bob.remove() }
        try bob.revue.friends.addFriendNorequest(friendId: alice.id)
        await bob.waitForEvent(.discoverable(true))
        let sinks = try ByteCounters(count: 1)
        defer { sinks.close() }
        // Off-path: a lookup answer with the node's source address (raw socket) and no valid MAC.
        if let raw = RawUDPSender() {
            // An open lookup's nonce (seen on path would be the best case for the attacker), an
            // answer sealed under a key it does not have.
            var w = ByteWriter()
            w.u8(PacketType.rendezvousLookupReply.rawValue); w.u8(revueProtocolVersion)
            w.u64((bob.revue.core!.nodeStates.values.first!.pendingLookups.last?.nonce ?? 0) | 1 << 63)
            var plain = ByteWriter()
            plain.append(bob.revue.core!.nodeStates.values.first!.pendingLookups.last?.tag ?? RandomBytes.bytes(16))
            plain.u8(1); plain.u8(1); plain.u16(0); plain.endpoint(SocketAddress(ip: 0x7F00_0001, port: sinks.ports[0]))
            w.append(Sodium.seal(key: RandomBytes.bytes(32), nonce: 1, ad: w.bytes, plaintext: plain.bytes))
            for _ in 0..<20 {
                raw.send(
                    w.bytes, from: SocketAddress(ip: 0x7F00_0001, port: node.port),
                    to: SocketAddress(ip: 0x7F00_0001, port: bob.revue.port))
            }
            await bob.wait("spoofed answers counted") { bob.revue.counters.droppedLookupReplies >= 20 }
            await settle(0.5)
            #expect(sinks.bytes == 0, "no handshake went to the claimed endpoint")
        } else {
            print("skipped the spoofed-source part: raw sockets need root")
        }
        // A public node (TEST-NET address) naming a private endpoint, correctly MAC'd.
        for lab in [false, true] {
            let peer = try TestPeer { c in
                c.rendezvousNodes = ["203.0.113.5:9"]
                c.acceptPrivateEndpointsFromPublicNodes = lab
            }
            defer { peer.remove() }
            let core = peer.revue.core!
            let nodeAddress = SocketAddress(ip: 0xCB00_7105, port: 9)
            let macKey = RandomBytes.bytes(32)
            let friend = KeyPair()
            let tag = RandomBytes.bytes(16)
            core.nodeStates[nodeAddress] = SessionCore.NodeState(
                nodeKey: RandomBytes.bytes(32), macKey: SecretKeyBytes(macKey), token: RandomBytes.bytes(16),
                pendingLookups: [7, 8].map { .init(nonce: $0, tag: tag, friendId: Hex.encode(friend.publicKey)) })
            try peer.revue.friends.addFriendNorequest(friendId: Hex.encode(friend.publicKey))
            for (nonce, ip): (UInt64, UInt32) in [(7, 0xC0A8_0107), (8, 0xC633_6407)] {
                var w = ByteWriter()
                w.u8(PacketType.rendezvousLookupReply.rawValue); w.u8(revueProtocolVersion); w.u64(nonce | 1 << 63)
                var plain = ByteWriter()
                plain.append(tag)
                plain.u8(1); plain.u8(1); plain.u16(0); plain.endpoint(SocketAddress(ip: ip, port: 4000))
                w.append(Sodium.seal(key: macKey, nonce: nonce | 1 << 63, ad: w.bytes, plaintext: plain.bytes))
                core.handle(w.bytes, from: nodeAddress)
            }
            let candidates = Set(core.friends[Hex.encode(friend.publicKey)]!.candidates.keys.compactMap(\.endpoint?.ip))
            #expect(candidates.contains(0xC633_6407))
            #expect(candidates.contains(0xC0A8_0107) == lab)
            #expect(core.counters.droppedLookupReplies == (lab ? 0 : 1))
        }
    }

    // Registrations and tags that expire and are swept, the key-agreement rate and the tag cap
    // per registration: `SimulatedRendezvousAttackTests`, on the simulated clock.

    // Tags per /24: registrations of one /24 hold at most `maxTagsPerPrefix` tags together, and
    // a registration from another /24 still gets its tags in.
    @Test func rendezvousTagsAreCappedPerPrefix() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        var clients: [RendezvousClient] = []
        defer { for c in clients { c.close() } }
        let needed = RendezvousNode.maxTagsPerPrefix / RendezvousNode.maxTagsPerEntry + 2
        for _ in 0..<needed {
            let c = try RendezvousClient(nodePort: node.port)
            clients.append(c)
            #expect(await c.register())
            for _ in 0..<(RendezvousNode.maxTagsPerEntry / RendezvousAuth.maxTagsPerRegistration) {
                c.tags = (0..<RendezvousAuth.maxTagsPerRegistration).map { _ in RandomBytes.bytes(16) }
                c.timestamp += 1
                c.socket.send(
                    RendezvousClient.registration(
                        keys: c.keys, timestamp: c.timestamp, cookie: c.cookie, macKey: c.macKey,
                        tags: c.tags), to: c.node)
            }
            await settle(0.05)
        }
        await clients[0].wait { node.tagCount >= RendezvousNode.maxTagsPerPrefix }
        #expect(node.tagCount == RendezvousNode.maxTagsPerPrefix)
        let other = try RendezvousClient(nodePort: node.port, host: "127.1.0.1")
        defer { other.close() }
        other.tags = [RandomBytes.bytes(16)]
        #expect(await other.register())
        #expect(await other.registerOnce())
        #expect(node.tagCount == RendezvousNode.maxTagsPerPrefix + 1)
    }

    // Tag takeover: an attacker that saw a friend's tag (relay sends carry tags in clear) and
    // registers it from another address does not move it: lookups still name the friend.
    @Test func aTagSeenOnPathCannotBeTakenOverFromAnotherAddress() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let alice = try TestPeer(rendezvous: node), bob = try TestPeer(rendezvous: node)
        defer { alice.remove(); bob.remove() }
        try await befriend(alice, bob)
        await settle(0.5)  // Bob registers his tag for Alice (he added her just now)
        let tag = try #require(alice.revue.core!.relayTags(for: bob.revue.core!.identity.publicKey)).target
        let attacker = try RendezvousClient(nodePort: node.port, host: "127.0.0.2")
        defer { attacker.close() }
        attacker.tags = [tag]
        let refused = node.refusedForLimits
        #expect(await attacker.register())
        for _ in 0..<3 { #expect(await attacker.registerOnce()) }
        #expect(node.refusedForLimits > refused, "the takeover refused")
        let asker = try RendezvousClient(nodePort: node.port)
        defer { asker.close() }
        #expect(await asker.register())
        #expect(await asker.lookup(tag) == SocketAddress(ip: 0x7F00_0001, port: bob.revue.port))
        // Once Bob stops registering it (he went away), the tag may move.
        bob.stop()
        await settle(RendezvousNode.tagTakeoverAge + 1.2)
        #expect(await attacker.registerOnce())
        #expect(await asker.lookup(tag) == attacker.endpoint)
    }

    // A spoofed "registered" answer with another node key does not make a registered peer switch
    // keys (and so stop being accepted).
    @Test func spoofedNodeKeyIsIgnoredWhileTheNodeAcceptsUs() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let bob = try TestPeer(rendezvous: node)
        defer { bob.remove() }
        await bob.waitForEvent(.discoverable(true))
        let core = bob.revue.core!
        let nodeAddress = SocketAddress(ip: 0x7F00_0001, port: node.port)
        let known = try #require(core.nodeStates[nodeAddress]?.nodeKey)
        var w = ByteWriter()
        w.u8(PacketType.rendezvousRegistered.rawValue); w.u8(revueProtocolVersion); w.u8(RendezvousAuth.registeredUnsealed)
        w.append(KeyPair().publicKey); w.append(RandomBytes.bytes(16))
        let forged = core.counters.droppedForged
        core.handle(w.bytes, from: nodeAddress)
        #expect(core.nodeStates[nodeAddress]?.nodeKey == known)
        #expect(core.counters.droppedForged == forged + 1)
        await settle(0.5)
        #expect(bob.revue.isDiscoverable)
    }

    // A node that really restarted (new key) stops accepting us; after three registration
    // intervals without acceptance its new key is adopted and we are registered again.
    @Test func aRestartedNodeIsAdoptedAfterItStopsAcceptingUs() async throws {
        var node = try RendezvousNode(host: "127.0.0.1")
        let port = node.port
        let bob = try TestPeer(rendezvous: node)
        defer { bob.remove() }
        await bob.waitForEvent(.discoverable(true))
        let nodeAddress = SocketAddress(ip: 0x7F00_0001, port: port)
        let oldKey = try #require(bob.revue.core!.nodeStates[nodeAddress]?.nodeKey)
        node.stop()
        var restarted: RendezvousNode?
        for _ in 0..<50 where restarted == nil {
            await settle(0.05)
            restarted = try? RendezvousNode(host: "127.0.0.1", port: port)
        }
        node = try #require(restarted)
        defer { node.stop() }
        await bob.wait("registered with the new key", timeout: 5) {
            bob.revue.core!.nodeStates[nodeAddress]?.nodeKey != oldKey && node.entryCount == 1
        }
    }

    // Relay hijack: an attacker registering its key with a spoofed source equal to Alice's
    // endpoint, and relay sends spoofed from there, change nothing: Alice's relayed packets still
    // arrive under her tag.
    @Test func spoofedRegistrationAndRelaySendCannotHijackARelayedFriend() async throws {
        guard let raw = RawUDPSender() else {
            print("skipped: raw sockets need root")
            return
        }
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let alice = try TestPeer(rendezvous: node), bob = try TestPeer(rendezvous: node)
        defer { alice.remove(); bob.remove() }
        alice.revue.core!.environment.faults.dropDirectSends = true
        bob.revue.core!.environment.faults.dropDirectSends = true
        try await befriend(alice, bob)
        #expect(alice.revue.friends.getFriendPaths(friendId: bob.id).paths.first?.kind == .relayed)
        let aliceEndpoint = SocketAddress(ip: 0x7F00_0001, port: alice.revue.port)
        let nodeAddress = SocketAddress(ip: 0x7F00_0001, port: node.port)
        // The attacker does the cookie round for its own endpoint, then replays its registration
        // (and a zero-cookie one) with Alice's endpoint as the source.
        let attacker = try RendezvousClient(nodePort: node.port)
        defer { attacker.close() }
        #expect(await attacker.register())
        let refused = node.refusedRegistrations, dropped = node.droppedPackets
        for cookie in [attacker.cookie, [UInt8](repeating: 0, count: 16)] {
            attacker.timestamp += 1
            let r = RendezvousClient.registration(
                keys: attacker.keys, timestamp: attacker.timestamp, cookie: cookie, macKey: attacker.macKey)
            raw.send(r, from: aliceEndpoint, to: nodeAddress)
        }
        // Relay sends claiming Alice's registration key and her tags from her endpoint (all seen on
        // path by a stronger attacker), with a guessed token.
        let aliceCore = alice.revue.core!
        let tags = try #require(aliceCore.relayTags(for: bob.revue.core!.identity.publicKey))
        var w = ByteWriter()
        w.u8(PacketType.relaySend.rawValue); w.u8(revueProtocolVersion)
        w.append(aliceCore.nodeStates[nodeAddress]!.registrationKeys.publicKey); w.append(RandomBytes.bytes(16))
        w.append(tags.target); w.append(tags.source)
        w.append([PacketType.transportData.rawValue] + RandomBytes.bytes(40))
        for _ in 0..<10 { raw.send(w.bytes, from: aliceEndpoint, to: nodeAddress) }
        await bob.wait("refused and dropped") { node.refusedRegistrations - refused >= 2 && node.droppedPackets - dropped >= 10 }
        // Alice's relayed traffic still reaches Bob as hers.
        _ = try await alice.revue.friends.sendMessage(friendId: bob.id, message: "still me")
        await bob.waitForEvent(.message(alice.id, "still me"))
        #expect(bob.revue.counters.droppedForged == 0)
    }

    // Handshake replay: an initiation captured before a restart is refused after it (the handshake
    // timestamp is on disk).
    @Test func replayedInitiationAfterRestartIsRefused() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let alice = try TestPeer(rendezvous: node), bob = try TestPeer(rendezvous: node)
        defer { alice.remove(); bob.remove() }
        try await befriend(alice, bob)
        var captured: [[UInt8]] = []
        alice.revue.core!.environment.sendTap = { p, route in
            if case .direct = route, p.first == PacketType.handshakeInitiation.rawValue { captured.append(p) }
        }
        alice.revue.core!.initiate(alice.revue.core!.friends[bob.id]!, now: MonotonicTime.now)
        await alice.wait("an initiation captured") { !captured.isEmpty }
        await bob.wait("the rekey answered") { bob.revue.core!.friends[alice.id]!.lastHandshakeTimestamp > 0 }
        await settle(0.3)
        alice.stop()
        bob.stop()
        try bob.start()
        let attacker = try SessionSocket(host: "127.0.0.1", port: 0)
        defer { attacker.close() }
        for p in captured { attacker.send(p, to: SocketAddress(ip: 0x7F00_0001, port: bob.revue.port)) }
        await bob.wait("replays refused") { bob.revue.counters.droppedReplayed >= captured.count }
        #expect(bob.revue.counters.handshakesCompleted == 0)
        #expect(bob.revue.core!.friends[alice.id]!.next == nil, "no session answered for the replay")
    }

    // Handshake replay across a crash: a revue-node process answers a friend's initiation and is
    // killed with SIGKILL the moment its answer arrives; restarted, it refuses the captured
    // initiation (the timestamp was on disk before the answer left) and answers nothing.
    @Test(.enabled(if: NodeProcess.binary != nil, "revue-node is not built"))
    func initiationReplayedAfterASigkillRightAfterItsAnswerIsRefused() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-attack-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var victim = try NodeProcess(["--data", dir, "--host", "127.0.0.1"])
        defer { victim.kill() }
        let ready = try #require(await victim.wait(event("ready")))
        let port = UInt16(try #require(ready["port"] as? Int))
        let victimId = try #require(ready["revueId"] as? String)
        let victimKey = try #require(Hex.decode(victimId))
        let friend = KeyPair()
        victim.send(["cmd": "accept", "friendId": Hex.encode(friend.publicKey)])
        _ = await victim.wait(event("ok", ["cmd": "accept"]))
        // The friend's initiation, as a peer writes it (timestamp: now, in nanoseconds).
        func initiation(index: UInt32) -> [UInt8] {
            var header = ByteWriter()
            header.u8(PacketType.handshakeInitiation.rawValue); header.u8(revueProtocolVersion); header.u32(index)
            var hs = NoiseIKHandshake(initiator: true, prologue: header.bytes, localStatic: friend, remoteStatic: victimKey)
            var payload = ByteWriter()
            payload.u8(HandshakeKind.connect.rawValue)
            payload.u64(UInt64(Date().timeIntervalSince1970 * 1e9))
            let body = header.bytes + hs.writeMessage1(payload: payload.bytes)!
            return body + Sodium.keyedBlake2b(key: HandshakeMACs.mac1Key(victimKey), body) + [UInt8](repeating: 0, count: 16)
        }
        let socket = try MediaCore.UDPSocket(bindingTo: MediaCore.SocketAddress(parsing: "127.0.0.1", defaultPort: 0))
        defer { socket.close() }
        func send(_ p: [UInt8], to port: UInt16) throws {
            let target = try MediaCore.SocketAddress(parsing: "127.0.0.1", defaultPort: port)
            _ = try p.withUnsafeBytes { try socket.send($0, to: target) }
        }
        // Polls without blocking: this suite runs on the main actor, which every peer of the
        // process shares, and a blocking wait of 500 ms stalled them all (their ticks, their
        // packets) for that long.
        func answered(within ms: Int) async throws -> Bool {
            let deadline = MonotonicTime.now + .milliseconds(ms)
            var buffer = [UInt8](repeating: 0, count: 2048)
            while try !socket.waitUntilReadable(timeoutMilliseconds: 0) {
                guard MonotonicTime.now < deadline else { return false }
                try await Task.sleep(for: .milliseconds(5))
            }
            let n = try buffer.withUnsafeMutableBytes { try socket.receive(into: $0).count }
            return n > 0 && buffer[0] == PacketType.handshakeResponse.rawValue
        }
        let captured = initiation(index: 0x5100)
        try send(captured, to: port)
        #expect(try await answered(within: 3000), "the initiation is answered")
        victim.kill()
        victim = try NodeProcess(["--data", dir, "--host", "127.0.0.1"])
        let again = try #require(await victim.wait(event("ready")))
        let newPort = UInt16(try #require(again["port"] as? Int))
        try send(captured, to: newPort)
        #expect(try await !answered(within: 500), "the replay after the crash is not answered")
        // The price of writing once per `handshakeReservation`: after a crash the friend's own new
        // initiations are refused too until its clock passes the reservation (ours to it are not).
        try send(initiation(index: 0x5101), to: newPort)
        #expect(try await !answered(within: 500))
        victim.send(["cmd": "counters"])
        let counters = try #require(await victim.wait(event("ok", ["cmd": "counters"])))
        #expect(counters["droppedReplayed"] as? Int == 2, "\(counters)")
        #expect(counters["handshakesCompleted"] as? Int == 0)
    }

    // Session lifetime: keys have a hard lifetime. With a message limit the session is rekeyed at half
    // of it and traffic goes on; with a lifetime shorter than the rekey interval the keys are
    // dropped when it passes and a new handshake brings the friend back.
    @Test func sessionsAreRekeyedBeforeTheirHardLimitAndRefusedAfterIt() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let alice = try TestPeer(rendezvous: node), bob = try TestPeer(rendezvous: node)
        defer { alice.remove(); bob.remove() }
        try await befriend(alice, bob)
        for p in [alice, bob] { p.revue.core!.environment.faults.sessionMessageLimit = 60 }
        let before = alice.revue.counters.handshakesCompleted
        for i in 0..<40 { _ = try await alice.revue.friends.sendMessage(friendId: bob.id, message: "m\(i)") }
        await bob.waitForEvent(.message(alice.id, "m39"))
        #expect(alice.revue.counters.handshakesCompleted > before, "rekeyed at half the limit")
        for s in [alice.revue.core!.friends[bob.id]!.current!] { #expect(s.sendCounter < 60) }

        let eventsBefore = alice.friendEvents.count
        let core = alice.revue.core!, f = core.friends[bob.id]!
        for p in [alice, bob] {
            p.revue.core!.environment.faults.sessionMessageLimit = 1 << 60
            p.revue.core!.environment.faults.sessionLifetime = .microseconds(100)
        }
        // Before the next tick drops it: a send on the expired session is refused.
        let sentBefore = f.current!.sendCounter
        core.sendPing(f, route: f.bestRoute(now: MonotonicTime.now, timeout: .seconds(2))!, now: MonotonicTime.now)
        #expect(core.counters.droppedExpired == 1 && f.current?.sendCounter == sentBefore)
        await alice.wait("offline when the keys expire", timeout: 3) {
            alice.friendEvents.dropFirst(eventsBefore).contains(.paths(bob.id, false))
        }
        for p in [alice, bob] { p.revue.core!.environment.faults.sessionLifetime = nil }
        await alice.wait("back online with new keys", timeout: 3) {
            alice.revue.friends.getFriendPaths(friendId: bob.id).isOnline
        }
        _ = try await alice.revue.friends.sendMessage(friendId: bob.id, message: "fresh keys")
        await bob.waitForEvent(.message(alice.id, "fresh keys"))
    }

    // Key hygiene: keys live in zeroing storage and no hex copy of the secret stays in memory.
    @Test func keysAreHeldInZeroingStorage() async throws {
        let peer = try TestPeer()
        defer { peer.remove() }
        let id = peer.id
        #expect(peer.revue.core!.profile.secretKey.isEmpty, "new profile: no hex secret kept")
        peer.stop()
        try peer.start()
        #expect(peer.id == id, "the secret was written from the zeroing storage")
        #expect(peer.revue.core!.profile.secretKey.isEmpty, "loaded profile: no hex secret kept")
        var source = RandomBytes.bytes(32)
        let copy = source
        let key = SecretKeyBytes(wiping: &source)
        #expect(source.allSatisfy { $0 == 0 } && key.exposedCopy == copy)
        key.wipe()
        #expect(key.isZero)
        // DH results and chaining keys are wiped by MixKey.
        var symmetric = NoiseSymmetricState(protocolName: NoiseIKHandshake.protocolName)
        var dh = RandomBytes.bytes(32)
        symmetric.mixKey(&dh)
        #expect(dh.allSatisfy { $0 == 0 })

        // Rendezvous MAC keys (peer and node side), pair keys of tags and cookie secrets (the
        // handshake gate's and the node's) are SecretKeyBytes too, the right keys, and released
        // (so zeroed) when their owner goes.
        weak var weakPair: SecretKeyBytes?, weakMac: SecretKeyBytes?, weakGate: SecretKeyBytes?, weakNode: SecretKeyBytes?
        do {
            let node = try RendezvousNode(host: "127.0.0.1")
            let alice = try TestPeer(rendezvous: node), bob = try TestPeer(rendezvous: node)
            try await befriend(alice, bob)
            let core = alice.revue.core!
            let pair: SecretKeyBytes = try #require(core.pairKey(core.friends[bob.id]!))
            #expect(pair == PrivacyTags.pairKey(secret: bob.revue.core!.identity.secret, peerPublic: core.identity.publicKey))
            await alice.wait("registered at the node") { core.nodeStates.values.contains { $0.macKey != nil && $0.token != nil } }
            let state = try #require(core.nodeStates.values.first { $0.macKey != nil })
            let mac: SecretKeyBytes = try #require(state.macKey)
            let nodeSecrets: [SecretKeyBytes] = node.heldSecrets
            // The node holds alice's and bob's registration keys, the very key alice seals with.
            #expect(nodeSecrets.count >= 4 && nodeSecrets.contains { $0 == mac })
            let gateSecrets: [SecretKeyBytes] = core.gate.cookieSecrets
            #expect(gateSecrets.count == 2 && !gateSecrets[0].isZero && !(gateSecrets[0] == gateSecrets[1]))
            // A rotation replaces the current secret with a fresh one.
            core.gate.rotate()
            #expect(core.gate.cookieSecrets[1] === gateSecrets[0])
            weakPair = pair; weakMac = mac; weakGate = gateSecrets[1]; weakNode = nodeSecrets.last
            alice.remove(); bob.remove()
            node.stop()
        }
        await settle(0.2)
        #expect(weakPair == nil && weakMac == nil && weakGate == nil && weakNode == nil, "released, so zeroed")
    }

    // Hostile friend: what a friend can make us queue is bounded.
    @Test func perFriendQueuesAreBounded() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let alice = try TestPeer(rendezvous: node), bob = try TestPeer(rendezvous: node)
        defer { alice.remove(); bob.remove() }
        try await befriend(alice, bob)
        bob.revue.abandonForTesting()  // never acknowledges again
        let core = alice.revue.core!
        var accepted = 0
        for i in 0..<200 where core.sendReserved(friendId: bob.id, text: "{\"type\":\"msg\",\"n\":\(i)}") { accepted += 1 }
        #expect(accepted <= SessionCore.reservedQueueCapacity)
        for i in 0..<50 { core.setSelfName("name \(i)") }
        let f = core.friends[bob.id]!
        #expect(f.outbound.count { $0.kind == .profile } <= 2)
        #expect(f.outbound.count <= SessionCore.sendQueueCapacity + SessionCore.reservedQueueCapacity + 2)
        // Inbound: items far past what was delivered are not kept.
        core.handleReliable(f, epoch: 99, seq: SessionCore.inboundWindow + 5, kind: .message, body: Array("far".utf8))
        #expect(f.inboundBuffer.isEmpty && f.deliveryQueue.isEmpty)
        core.handleReliable(f, epoch: 99, seq: 3, kind: .message, body: Array("near".utf8))
        #expect(f.inboundBuffer.count == 1)
    }
}
