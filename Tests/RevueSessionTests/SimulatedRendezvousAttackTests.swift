// Attacks on a rendezvous node and on the peers' side of it, performed on simulated time and a
// virtual network, so every rate and time window is counted exactly and the figures printed are
// the same in every run: forged and replayed `registered` answers, networks flooding the caps,
// cookie-less registration floods, lookup floods and registrations moved into full networks.
import Foundation
import MediaCore
import MediaTestSupport
import Testing

@testable import RevueSession

/// A rendezvous node on its own simulated clock and virtual network, with the limits given.
/// Main actor (the clock runs the network's deliveries on the test's thread).
@MainActor
final class RendezvousLab {
    let time = SimulatedTime()
    let network: VirtualNetwork
    let node: RendezvousNode
    let nodeAddress: SocketAddress

    /// A node at `nodeAddress` (IPv4 127.77.0.100:33400 unless told) with `limits`.
    init(limits: RendezvousNode.Limits = RendezvousNode.Limits(), nodeAddress: SocketAddress? = nil) {
        network = VirtualNetwork(time: time)
        self.nodeAddress = nodeAddress ?? SocketAddress(ipv4: 127, 77, 0, 100, port: 33_400)
        node = RendezvousNode(socket: network.bind(self.nodeAddress), scheduler: time, limits: limits)
    }

    /// A client bound at `address`.
    func client(_ address: SocketAddress) -> SimulatedRendezvousClient {
        SimulatedRendezvousClient(lab: self, address: address)
    }

    /// Lets every datagram in flight arrive and be answered (links take 1 ms each way).
    func settle() { time.advance(by: .milliseconds(3)) }

    /// The production limits scaled down 64 times for entries and 16 times for tags, in the same
    /// proportions (a /24 or /56 holds a quarter of a /16 or /48, which holds a quarter of the
    /// node's registrations; a quarter of everything is kept for small networks), so that a flood
    /// filling them takes about a thousand X25519 instead of 65,536.
    static var scaledLimits: RendezvousNode.Limits {
        var l = RendezvousNode.Limits()
        l.maxEntries = 1024
        l.maxEntriesPerPrefix = 64
        l.maxEntriesPerWidePrefix = 256
        l.smallNetworkEntries = 4
        l.reservedEntries = 256
        l.maxTags = 16_384
        l.maxTagsPerPrefix = 4096
        l.maxTagsPerWidePrefix = 8192
        l.smallNetworkTags = 256
        l.reservedTags = 4096
        return l
    }
}

/// A hand-driven rendezvous client on a virtual port: the cookie round, registrations (its own
/// and floods of fresh keys), lookups, byte by byte. Main actor; each exchange runs the lab's
/// clock for a round trip.
@MainActor
final class SimulatedRendezvousClient: RendezvousRegistrationState {
    let lab: RendezvousLab
    private(set) var port: VirtualDatagramPort
    var keys = KeyPair()
    var nodeKey: [UInt8]?
    var macKey: [UInt8]?
    var cookie = [UInt8](repeating: 0, count: 16)
    var token: [UInt8]?
    var timestamp: UInt64 = 1
    var lookupNonce: UInt64 = 1000
    /// Tags sent with every registration.
    var tags: [[UInt8]] = []
    /// Every datagram received.
    private(set) var replies: [[UInt8]] = []

    init(lab: RendezvousLab, address: SocketAddress) {
        self.lab = lab
        port = lab.network.bind(address)
        listen()
    }

    var endpoint: SocketAddress { port.address }

    private func listen() {
        port.start(screen: nil) { [weak self] bytes, _ in MainActor.assumeIsolated { self?.replies.append(bytes) } }
    }

    /// Moves to `address` (a new port there), keeping keys, timestamps and the old cookie: a
    /// registration that moves.
    func move(to address: SocketAddress) {
        port.close()
        port = lab.network.bind(address)
        listen()
    }

    /// Sends one registration with the current cookie and tags and reads its answer; whether it
    /// was accepted.
    @discardableResult
    func registerOnce() -> Bool {
        timestamp += 1
        let before = replies.count
        port.send(
            RendezvousClient.registration(keys: keys, timestamp: timestamp, cookie: cookie, macKey: macKey, tags: tags),
            to: lab.nodeAddress)
        lab.settle()
        guard let reply = replies.dropFirst(before).last(where: { $0.first == PacketType.rendezvousRegistered.rawValue })
        else { return false }
        return read(reply, timestamp: timestamp)
    }

    /// The cookie round then the real registration; whether it was accepted.
    func register() -> Bool {
        for _ in 0..<3 where !registerOnce() {}
        return token != nil
    }

    /// Registers `count` fresh keys from this endpoint with its cookie, each carrying `tagsEach`
    /// random tags (at most 32), without waiting for answers: a flood of genuine registrations.
    func floodFreshKeys(_ count: Int, tagsEach: Int) {
        guard let nodeKey else { return }
        for _ in 0..<count {
            let k = KeyPair()
            let mac = RendezvousAuth.key(secret: k.secret, peerPublic: nodeKey)!
            port.send(
                RendezvousClient.registration(
                    keys: k, timestamp: 9, cookie: cookie, macKey: mac, tags: (0..<tagsEach).map { _ in RandomBytes.bytes(16) }),
                to: lab.nodeAddress)
        }
        lab.settle()
    }

    /// A lookup datagram for `tag` with the next nonce.
    func lookupDatagram(_ tag: [UInt8]) -> [UInt8] {
        lookupNonce += 1
        var w = ByteWriter()
        w.u8(PacketType.rendezvousLookup.rawValue)
        w.u8(revueProtocolVersion)
        w.append(keys.publicKey)
        w.u64(lookupNonce)
        w.append(Sodium.seal(key: macKey ?? [UInt8](repeating: 0, count: 32), nonce: lookupNonce, ad: w.bytes, plaintext: tag))
        return w.bytes
    }

    /// Lookup answers received so far.
    var lookupAnswers: Int { replies.count { $0.first == PacketType.rendezvousLookupReply.rawValue } }

    /// Asks where the holder of `tag` is: nil when unanswered, else the endpoint it names (nil
    /// inside when not found).
    func lookup(_ tag: [UInt8]) -> SocketAddress?? {
        let before = replies.count
        let datagram = lookupDatagram(tag)
        port.send(datagram, to: lab.nodeAddress)
        lab.settle()
        guard let macKey,
            let reply = replies.dropFirst(before).last(where: { $0.first == PacketType.rendezvousLookupReply.rawValue }),
            let plain = Sodium.open(key: macKey, nonce: lookupNonce | 1 << 63, ad: Array(reply[0..<10]), ciphertext: reply[10...])
        else { return nil }
        var r = ByteReader(plain)
        guard r.take(16) == tag, let found = r.u8(), r.u8() != nil, r.u16() != nil else { return nil }
        return .some(found == 1 ? r.endpoint() : nil)
    }
}

@MainActor
@Suite(.serialized) struct SimulatedRendezvousAttackTests {
    /// An attacker that sees a peer's registrations (or guesses their timestamps) races the node
    /// with forged `registered` answers from the node's address: a sealed one it cannot seal, a
    /// real sealed answer captured before (a replay), unsealed ones carrying the node's key or
    /// another with a cookie of its own, and the old 67-byte layout with a relay token of its
    /// own. Each arrives a millisecond before the node's real answer: the peer's relay token,
    /// cookie and registration time are unchanged, each forgery is counted, and the real answer
    /// right after is still taken, as is a new cookie the node hands out after its secret turns.
    @Test func forgedRegisteredAnswersChangeNothingAndRealOnesStillWork() throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let bob = try world.addPeer("bob")
        let node = SimulatedWorld.nodeAddress
        var sealedToBob: [[UInt8]] = []
        world.node.sendTap = { bytes, _ in
            if bytes.first == PacketType.rendezvousRegistered.rawValue, bytes[2] == RendezvousAuth.registeredSealed {
                sealedToBob.append(bytes)
            }
        }
        let core = bob.core
        #expect(world.run(until: .seconds(5)) { core.nodeStates[node]?.token != nil && sealedToBob.count >= 2 })
        #expect(bob.revue.isDiscoverable)

        final class Box: @unchecked Sendable {
            var snapshot: (token: [UInt8]?, cookie: [UInt8], registered: MonotonicTime?)?
            var attackedAt: MonotonicTime?
        }
        let box = Box()
        let before = (core.nodeStates[node]!.token, core.nodeStates[node]!.cookie)
        let nodeKey = core.nodeStates[node]!.nodeKey!
        let captured = sealedToBob[0]
        let network = world.network, time = world.time
        let forgedBefore = core.counters.droppedForged, malformedBefore = core.counters.droppedMalformed
        core.environment.sendTap = { packet, _ in
            guard box.attackedAt == nil, packet.first == PacketType.rendezvousRegister.rawValue,
                packet.count > RendezvousAuth.registerLength
            else { return }
            let now = time.now
            box.attackedAt = now
            let timestamp = packet[34..<42].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            var sealed = ByteWriter()
            sealed.u8(PacketType.rendezvousRegistered.rawValue); sealed.u8(revueProtocolVersion)
            sealed.u8(RendezvousAuth.registeredSealed); sealed.u64(timestamp | RendezvousAuth.registeredNonceBits)
            sealed.append(RandomBytes.bytes(33 + 16))
            var sameKey = ByteWriter()
            sameKey.u8(PacketType.rendezvousRegistered.rawValue); sameKey.u8(revueProtocolVersion)
            sameKey.u8(RendezvousAuth.registeredUnsealed); sameKey.append(nodeKey); sameKey.append(RandomBytes.bytes(16))
            var otherKey = ByteWriter()
            otherKey.u8(PacketType.rendezvousRegistered.rawValue); otherKey.u8(revueProtocolVersion)
            otherKey.u8(RendezvousAuth.registeredUnsealed); otherKey.append(KeyPair().publicKey)
            otherKey.append(RandomBytes.bytes(16))
            var oldLayout = ByteWriter()
            oldLayout.u8(PacketType.rendezvousRegistered.rawValue); oldLayout.u8(revueProtocolVersion); oldLayout.u8(1)
            oldLayout.append(nodeKey); oldLayout.append(RandomBytes.bytes(16)); oldLayout.append(RandomBytes.bytes(16))
            for forged in [sealed.bytes, captured, sameKey.bytes, otherKey.bytes, oldLayout.bytes] {
                // From the node's address, arriving a millisecond before the node's answer.
                network.inject(forged, from: node, to: SocketAddress(SimulatedWorld.host(0), port: 40_000))
            }
            // Just after the forgeries arrived, before the node's answer: what the peer holds.
            time.schedule(after: .microseconds(1500)) {
                MainActor.assumeIsolated {
                    box.snapshot = (core.nodeStates[node]?.token, core.nodeStates[node]?.cookie ?? [], core.lastRegistered[node])
                }
            }
        }
        let registeredBefore = core.lastRegistered[node]
        #expect(world.run(until: .seconds(2)) { box.snapshot != nil })
        let snapshot = try #require(box.snapshot)
        let forged = core.counters.droppedForged - forgedBefore, malformed = core.counters.droppedMalformed - malformedBefore
        #expect(snapshot.token == before.0 && snapshot.cookie == before.1)
        #expect(snapshot.registered == registeredBefore, "registration time moved by a forgery")
        #expect(forged == 4 && malformed == 1, "forged \(forged), malformed \(malformed)")
        // The node's real answer, a millisecond later, is taken.
        world.run(for: .milliseconds(5))
        let attackedAt = try #require(box.attackedAt)
        let registeredAfter = try #require(core.lastRegistered[node])
        #expect(registeredAfter > attackedAt && core.nodeStates[node]?.token == before.0)
        #expect(core.counters.droppedForged - forgedBefore == 4)
        // After the node's cookie secret turns (every 120 s), a real answer brings a new cookie.
        world.run(for: .seconds(121))
        let cookieAfter = core.nodeStates[node]?.cookie
        #expect(cookieAfter != before.1 && bob.revue.isDiscoverable)
        #expect(world.time.now - core.lastRegistered[node]! < .milliseconds(250))
        print(
            "forged registered answers: \(forged) dropped as forged, \(malformed) as malformed; token, cookie and "
                + "registration time unchanged; the real answer \((registeredAfter - attackedAt).inSeconds * 1000) ms after "
                + "the attack accepted; a new cookie taken after the secret turned; answers sealed "
                + "\(RendezvousAuth.registeredLength) B, unsealed \(RendezvousAuth.registeredUnsealedLength) B, "
                + "register \(RendezvousAuth.registerLength)+ B")
    }

    /// Sixteen IPv4 /16s (four /24s each, two sources per /24) flood registrations of fresh keys
    /// with 32 tags each up to their per-network caps; then 64 more /16s register four each, so
    /// the node is full. A peer from a fresh network still registers (the heaviest network loses
    /// a registration and tags to it), and another fresh peer looks it up. Scaled limits
    /// (`RendezvousLab.scaledLimits`).
    @Test func networksFloodingTheCapsCannotLockOutAFreshNetwork() throws {
        let limits = RendezvousLab.scaledLimits
        let lab = RendezvousLab(limits: limits)
        let node = lab.node
        var attempts = 0
        for wide in 0..<16 {
            for narrow in 0..<4 {
                for source in 0..<2 {
                    let c = lab.client(SocketAddress(ipv4: 127, UInt8(101 + wide), UInt8(narrow), UInt8(1 + source), port: 5000))
                    c.registerOnce()  // the cookie round
                    c.floodFreshKeys(32, tagsEach: 32)
                    attempts += 32
                }
            }
        }
        let afterBig = (entries: node.entryCount, tags: node.tagCount)
        // Past their small share the sixteen share only what is not reserved.
        #expect(afterBig.entries <= limits.maxEntries - limits.reservedEntries + 16 * limits.smallNetworkEntries)
        for wide in 0..<16 {
            let a = SocketAddress(ipv4: 127, UInt8(101 + wide), 0, 1, port: 0)
            #expect(node.entries(inWideNetworkOf: a) <= limits.maxEntriesPerWidePrefix)
            #expect(node.entries(inNetworkOf: a) <= limits.maxEntriesPerPrefix)
            #expect(node.tags(inWideNetworkOf: a) <= limits.maxTagsPerWidePrefix)
        }
        // Sixty-four more networks take the reserve: the node is full.
        for wide in 0..<64 {
            let c = lab.client(SocketAddress(ipv4: 127, UInt8(121 + wide), 0, 1, port: 5000))
            c.registerOnce()
            c.floodFreshKeys(4, tagsEach: 32)
            attempts += 4
        }
        #expect(node.entryCount == limits.maxEntries)
        #expect(node.tagCount <= limits.maxTags)
        let evictedBefore = (node.evictedEntries, node.evictedTags)
        // A peer from a fresh network, and another that looks it up.
        let bob = lab.client(SocketAddress(ipv4: 127, 200, 0, 1, port: 5000))
        let bobTag = RandomBytes.bytes(16)
        bob.tags = [bobTag, RandomBytes.bytes(16)]
        #expect(bob.register())
        let alice = lab.client(SocketAddress(ipv4: 127, 201, 0, 1, port: 5000))
        #expect(alice.register())
        #expect(alice.lookup(bobTag) == .some(bob.endpoint))
        #expect(node.entryCount == limits.maxEntries && node.tagCount <= limits.maxTags)
        #expect(node.evictedEntries > evictedBefore.0 && node.evictedTags > evictedBefore.1)
        let heaviest = (0..<16).map { node.entries(inWideNetworkOf: SocketAddress(ipv4: 127, UInt8(101 + $0), 0, 1, port: 0)) }
        print(
            "IPv4 flood: \(attempts) registrations from 80 /16s; after the 16 big networks \(afterBig.entries) "
                + "registrations and \(afterBig.tags) tags held (caps \(limits.maxEntries) and \(limits.maxTags)); full: "
                + "\(node.entryCount) and \(node.tagCount), the 16 holding \(heaviest.min()!)-\(heaviest.max()!) each; "
                + "\(node.evictedEntries) registrations and \(node.evictedTags) tags evicted, \(node.refusedForLimits) refused; "
                + "a fresh network registered and was found")
    }

    /// One IPv6 /48 floods registrations of fresh keys from sixteen of its /56s (two /64s each,
    /// up to each /56's cap): it keeps at most the /48's cap, a quarter of the node (before, the
    /// 256 /56s of one /48 could fill it), and a peer from another /48 registers and is found.
    /// Scaled limits.
    @Test func oneIPv6Slash48CannotFillTheNode() throws {
        let limits = RendezvousLab.scaledLimits
        let lab = RendezvousLab(
            limits: limits,
            nodeAddress: SocketAddress(
                ipv6: [0x20, 0x01, 0x0D, 0xB8, 0, 0xFF] + [UInt8](repeating: 0, count: 9) + [1], port: 33_400))
        let node = lab.node
        func address(_ site: UInt8, _ slash56: UInt8, _ slash64: UInt8) -> SocketAddress {
            SocketAddress(
                ipv6: [0x20, 0x01, 0x0D, 0xB8, 0, site, slash56, slash64] + [UInt8](repeating: 0, count: 7) + [1], port: 5000)
        }
        var attempts = 0
        for slash56 in 0..<16 {
            for slash64 in 0..<2 {
                let c = lab.client(address(1, UInt8(slash56), UInt8(slash64)))
                c.registerOnce()
                c.floodFreshKeys(32, tagsEach: 32)
                attempts += 32
            }
        }
        let held = node.entries(inWideNetworkOf: address(1, 0, 0))
        #expect(held == limits.maxEntriesPerWidePrefix)
        #expect(node.entryCount == held)
        for slash56 in 0..<16 { #expect(node.entries(inNetworkOf: address(1, UInt8(slash56), 0)) <= limits.maxEntriesPerPrefix) }
        let bob = lab.client(address(2, 0, 0))
        let bobTag = RandomBytes.bytes(16)
        bob.tags = [bobTag]
        #expect(bob.register())
        let alice = lab.client(address(3, 0, 0))
        #expect(alice.register())
        #expect(alice.lookup(bobTag) == .some(bob.endpoint))
        print(
            "IPv6 flood: \(attempts) registrations from 16 /56s of one /48: \(held) held (its cap; the node holds "
                + "\(limits.maxEntries)), \(node.refusedForLimits) refused; a peer of another /48 registered and was found")
    }

    /// Registrations without a cookie (anyone can send them, with any source address) from one
    /// source, one a millisecond for a second: answered only at the per-source rate, so a
    /// spoofed victim receives a few hundred bytes; another source is still answered; then six
    /// thousand spoofed sources in half a second get no more than the total rate allows.
    @Test func cookielessRegistrationFloodsAreAnsweredOnlyAtTheRate() {
        let lab = RendezvousLab()
        let node = lab.node
        let l = node.limits
        let attacker = lab.client(SocketAddress(ipv4: 127, 88, 0, 1, port: 5000))
        let request = RendezvousClient.registration(
            keys: attacker.keys, timestamp: 1, cookie: [UInt8](repeating: 0, count: 16), macKey: nil)
        let flood = 1000
        for _ in 0..<flood {
            attacker.port.send(request, to: lab.nodeAddress)
            lab.time.advance(by: .milliseconds(1))
        }
        lab.settle()
        let answers = attacker.replies.count
        let span = Double(flood - 1) / 1000
        #expect(answers == node.cookieAnswers)
        #expect(Double(answers) <= l.cookieAnswerBurstPerSource + l.cookieAnswerRatePerSource * span + 1)
        #expect(Double(answers) >= l.cookieAnswerBurstPerSource + l.cookieAnswerRatePerSource * span - 1)
        #expect(node.unansweredRegistrations == flood - answers)
        #expect(node.refusedRegistrations == flood)
        #expect(attacker.replies.allSatisfy { $0.count == RendezvousAuth.registeredUnsealedLength })
        let bytesIn = flood * request.count, bytesOut = answers * RendezvousAuth.registeredUnsealedLength
        let unanswered = node.unansweredRegistrations
        // Another source is answered meanwhile.
        let other = lab.client(SocketAddress(ipv4: 127, 88, 0, 2, port: 5000))
        other.registerOnce()
        #expect(other.nodeKey != nil)
        // Spoofed sources, one datagram each: the total rate and the source table bound the answers.
        let answeredBefore = node.cookieAnswers
        let spoofed = 6000
        for i in 0..<spoofed {
            lab.network.inject(
                request, from: SocketAddress(ipv4: 127, 89, UInt8(i / 256), UInt8(i % 256), port: 6000), to: lab.nodeAddress)
            if i % 12 == 11 { lab.time.advance(by: .milliseconds(1)) }
        }
        lab.settle()
        let spoofedAnswers = node.cookieAnswers - answeredBefore
        #expect(Double(spoofedAnswers) <= l.cookieAnswerBurst + l.cookieAnswerRate * 0.5 + 1)
        #expect(spoofedAnswers <= l.maxCookieAnswerSources)
        #expect(node.unansweredRegistrations - unanswered == spoofed - spoofedAnswers)
        print(
            "cookie-less flood: \(flood) registrations (\(bytesIn) B) from one source in \(span) s drew \(answers) "
                + "answers (\(bytesOut) B, \(String(format: "%.3f", Double(bytesOut) / Double(bytesIn)))x; an answer is "
                + "\(String(format: "%.2f", Double(RendezvousAuth.registeredUnsealedLength) / Double(request.count)))x its "
                + "request), \(unanswered) unanswered and counted; \(spoofed) spoofed sources in 0.5 s "
                + "drew \(spoofedAnswers) (the total burst is \(Int(l.cookieAnswerBurst)), the source table \(l.maxCookieAnswerSources))"
        )
    }

    /// Registrations expire after `expiry` and a sweep (at most once a second, run by a datagram)
    /// removes them; a client with a
    /// valid cookie that floods registrations of fresh keys (good MACs) gets X25519 work only at
    /// the per-source key rate, the rest refused and counted, and its /24 keeps at most
    /// `maxEntriesPerPrefix` registrations.
    @Test func registrationsAreSweptAndFreshKeysAreCheckedOnlyAtTheKeyRate() {
        let lab = RendezvousLab()
        let node = lab.node
        node.expiry = 0.5
        let clients = (0..<5).map { lab.client(SocketAddress(ipv4: 127, 88, 1, UInt8(1 + $0), port: 5000)) }
        for c in clients { #expect(c.register()) }
        #expect(node.entryCount == 5)
        // The sweep runs at most once a second, on the first datagram after that.
        lab.time.advance(by: .milliseconds(1600))
        clients[0].registerOnce()
        #expect(node.sweptEntries == 5 && node.entryCount == 1, "swept \(node.sweptEntries), left \(node.entryCount)")
        let sweptAt = node.entryCount
        // One client floods 400 fresh keys at once, then 400 more a second later.
        let flooder = clients[1]
        var agreements: [Int] = []
        let refusedBefore = node.refusedForLimits
        for _ in 0..<2 {
            let before = node.keyAgreements
            flooder.floodFreshKeys(400, tagsEach: 0)
            agreements.append(node.keyAgreements - before)
            lab.time.advance(by: .seconds(1))
        }
        let burst = Int(RendezvousNode.keyBurst), perSecond = Int(RendezvousNode.keyRate)
        #expect(agreements == [burst, perSecond], "\(agreements)")
        #expect(node.refusedForLimits - refusedBefore >= 800 - agreements.reduce(0, +) - 5)
        #expect(node.entryCount <= RendezvousNode.maxEntriesPerPrefix)
        print(
            "rendezvous sweep and key rate: 5 registrations swept after 1.6 s (\(sweptAt) left); 400 fresh keys at once "
                + "drew \(agreements[0]) X25519 (burst \(burst)), 400 more a second later \(agreements[1]) (rate \(perSecond)/s); "
                + "\(node.entryCount) entries kept")
    }

    /// A registered client that sends 32 new tags with each of 20 registrations keeps at most
    /// `maxTagsPerEntry`, the rest refused and counted; a registration with more than 32 tags is
    /// dropped unread; tags not registered again within the expiry are swept.
    @Test func tagsAreCappedPerRegistrationAndSwept() {
        let lab = RendezvousLab()
        let node = lab.node
        node.expiry = 1
        let c = lab.client(SocketAddress(ipv4: 127, 88, 2, 1, port: 5000))
        #expect(c.register())
        let refused = node.refusedForLimits
        for _ in 0..<20 {
            c.tags = (0..<RendezvousAuth.maxTagsPerRegistration).map { _ in RandomBytes.bytes(16) }
            #expect(c.registerOnce())
        }
        #expect(node.tagCount == RendezvousNode.maxTagsPerEntry)
        #expect(node.refusedForLimits - refused == 20 * RendezvousAuth.maxTagsPerRegistration - RendezvousNode.maxTagsPerEntry)
        let dropped = node.droppedPackets
        c.timestamp += 1
        let big = RendezvousClient.registration(
            keys: c.keys, timestamp: c.timestamp, cookie: c.cookie, macKey: c.macKey,
            tags: (0...RendezvousAuth.maxTagsPerRegistration).map { _ in RandomBytes.bytes(16) })
        c.port.send(big, to: lab.nodeAddress)
        lab.settle()
        #expect(node.droppedPackets == dropped + 1)
        // Registering without those tags: they expire and go.
        c.tags = []
        for _ in 0..<4 {
            lab.time.advance(by: .milliseconds(600))
            #expect(c.registerOnce())
        }
        #expect(node.tagCount == 0 && node.entryCount == 1)
    }

    /// A registered client floods lookups, five a millisecond for a second: answered only up to
    /// the per-registration rate (the rest counted); a captured lookup replayed is not answered
    /// again (counted), while two lookups that arrive out of order are both answered.
    @Test func lookupsAreLimitedPerRegistrationAndAnsweredOncePerNonce() {
        let lab = RendezvousLab()
        let node = lab.node
        let l = node.limits
        let target = lab.client(SocketAddress(ipv4: 127, 67, 0, 1, port: 5000))
        let tag = RandomBytes.bytes(16)
        target.tags = [tag]
        #expect(target.register())
        let asker = lab.client(SocketAddress(ipv4: 127, 66, 0, 1, port: 5000))
        #expect(asker.register())
        let refusedBefore = node.refusedForLimits
        let flood = 5000
        for _ in 0..<(flood / 5) {
            for _ in 0..<5 { asker.port.send(asker.lookupDatagram(tag), to: lab.nodeAddress) }
            lab.time.advance(by: .milliseconds(1))
        }
        lab.settle()
        let answers = asker.lookupAnswers
        let span = Double(flood / 5 - 1) / 1000
        #expect(Double(answers) <= l.lookupBurst + l.lookupRate * span + 1)
        #expect(Double(answers) >= l.lookupBurst + l.lookupRate * span - 6)
        #expect(node.refusedForLimits - refusedBefore == flood - answers)
        // A second later the bucket has refilled: a lookup is answered, its replay is not.
        lab.time.advance(by: .seconds(1))
        let droppedBefore = node.droppedPackets
        let captured = asker.lookupDatagram(tag)
        asker.port.send(captured, to: lab.nodeAddress)
        lab.settle()
        asker.port.send(captured, to: lab.nodeAddress)
        lab.settle()
        #expect(asker.lookupAnswers == answers + 1)
        #expect(node.droppedPackets == droppedBefore + 1)
        // Two lookups out of order: both answered.
        let first = asker.lookupDatagram(tag), second = asker.lookupDatagram(tag)
        asker.port.send(second, to: lab.nodeAddress)
        asker.port.send(first, to: lab.nodeAddress)
        lab.settle()
        #expect(asker.lookupAnswers == answers + 3)
        print(
            "lookup flood: \(flood) lookups from one registration in \(span) s, \(answers) answered (burst "
                + "\(Int(l.lookupBurst)), \(Int(l.lookupRate))/s), \(flood - answers) refused and counted; a replayed "
                + "lookup dropped and counted")
    }

    /// A registration moved into a network that is full: re-registered from an address in a /24
    /// at its cap, from a /24 of a /16 at its cap, the move is refused (the registration stays
    /// where it was, and lookups still find it there); moved into a /24 whose tags are at their
    /// cap, it moves but its tags do not; moved into a network with room, it moves with its tags.
    /// Scaled limits.
    @Test func registrationsCannotMoveIntoFullNetworks() {
        let limits = RendezvousLab.scaledLimits
        let lab = RendezvousLab(limits: limits)
        let node = lab.node
        // A /24 at its registration cap, and a /16 at its cap through four other /24s.
        for source in 0..<2 {
            let c = lab.client(SocketAddress(ipv4: 127, 90, 1, UInt8(1 + source), port: 5000))
            c.registerOnce()
            c.floodFreshKeys(32, tagsEach: 1)
        }
        for narrow in 0..<4 {
            for source in 0..<2 {
                let c = lab.client(SocketAddress(ipv4: 127, 91, UInt8(narrow), UInt8(1 + source), port: 5000))
                c.registerOnce()
                c.floodFreshKeys(32, tagsEach: 1)
            }
        }
        let fullNarrow = SocketAddress(ipv4: 127, 90, 1, 200, port: 5000)
        let fullWide = SocketAddress(ipv4: 127, 91, 9, 1, port: 5000)
        #expect(node.entries(inNetworkOf: fullNarrow) == limits.maxEntriesPerPrefix)
        #expect(node.entries(inWideNetworkOf: fullWide) == limits.maxEntriesPerWidePrefix)
        // A /24 whose registrations hold its tag cap (eight of 512 tags each).
        for n in 0..<(limits.maxTagsPerPrefix / limits.maxTagsPerEntry) {
            let c = lab.client(SocketAddress(ipv4: 127, 92, 1, UInt8(1 + n), port: 5000))
            #expect(c.register())
            for _ in 0..<(limits.maxTagsPerEntry / RendezvousAuth.maxTagsPerRegistration) {
                c.tags = (0..<RendezvousAuth.maxTagsPerRegistration).map { _ in RandomBytes.bytes(16) }
                #expect(c.registerOnce())
            }
        }
        let fullTags = SocketAddress(ipv4: 127, 92, 1, 100, port: 5000)
        #expect(node.tags(inWideNetworkOf: fullTags) == limits.maxTagsPerPrefix)
        // The registration that moves, and one that looks it up.
        let mover = lab.client(SocketAddress(ipv4: 127, 80, 1, 1, port: 5000))
        let tag = RandomBytes.bytes(16)
        mover.tags = [tag]
        #expect(mover.register())
        let home = mover.endpoint
        let asker = lab.client(SocketAddress(ipv4: 127, 81, 1, 1, port: 5000))
        #expect(asker.register())
        #expect(asker.lookup(tag) == .some(home))
        var refusedMoves = 0
        for full in [fullNarrow, fullWide] {
            mover.move(to: full)
            // No cookie for the new endpoint yet: a sealed answer brings one.
            #expect(!mover.registerOnce())
            let refused = node.refusedForLimits
            #expect(!mover.registerOnce(), "moved into a full network")
            refusedMoves += node.refusedForLimits - refused
            #expect(asker.lookup(tag) == .some(home))
        }
        #expect(refusedMoves == 2)
        #expect(node.entries(inNetworkOf: fullNarrow) == limits.maxEntriesPerPrefix)
        #expect(node.entries(inWideNetworkOf: fullWide) == limits.maxEntriesPerWidePrefix)
        // Into the /24 whose tags are full: the registration moves, its tag does not come along.
        mover.move(to: fullTags)
        #expect(!mover.registerOnce())
        #expect(mover.registerOnce())
        #expect(asker.lookup(tag) == .some(nil))
        #expect(node.tags(inWideNetworkOf: fullTags) == limits.maxTagsPerPrefix)
        // Into a network with room: it moves with its tag.
        let roomy = SocketAddress(ipv4: 127, 95, 1, 1, port: 5000)
        mover.move(to: roomy)
        #expect(!mover.registerOnce())
        #expect(mover.registerOnce())
        #expect(asker.lookup(tag) == .some(roomy))
        print(
            "moves: into a /24 at \(limits.maxEntriesPerPrefix) registrations and a /16 at "
                + "\(limits.maxEntriesPerWidePrefix) refused (\(refusedMoves) counted, still found at home); into a /24 at "
                + "\(limits.maxTagsPerPrefix) tags moved without its tag; into a fresh network moved with it")
    }
}
