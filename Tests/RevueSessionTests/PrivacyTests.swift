import Foundation
import MediaCore
import Testing

@testable import RevueSession

/// Whether `needle` occurs anywhere in `haystack`.
func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
    guard needle.count <= haystack.count else { return false }
    for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] {
        if Array(haystack[i..<(i + needle.count)]) == needle { return true }
    }
    return false
}

/// Privacy of the social graph, by performing the observation: a curious rendezvous node that
/// records every datagram it receives and sends, every plaintext it opens and everything it
/// stores; an observer socket on the LAN discovery group. docs/security.md, What an observer
/// still learns.
@MainActor
@Suite(.serialized) struct PrivacyTests {
    /// Tags depend on the pair, the direction and the epoch: two epochs, two pairs and the two
    /// directions of one pair give unrelated tags, and none is the key it stands for.
    @Test func tagsOfTwoEpochsPairsAndDirectionsAreUnlinkable() {
        let a = KeyPair(), b = KeyPair(), c = KeyPair()
        let ab = PrivacyTags.pairKey(secret: a.secret, peerPublic: b.publicKey)!
        #expect(ab == PrivacyTags.pairKey(secret: b.secret, peerPublic: a.publicKey)!, "both friends derive the same pair key")
        let ac = PrivacyTags.pairKey(secret: a.secret, peerPublic: c.publicKey)!
        let e: UInt32 = 493_000
        var all: [[UInt8]] = []
        for k in [ab, ac] {
            for epoch in [e, e + 1] {
                for owner in [a.publicKey, b.publicKey] {
                    all.append(PrivacyTags.rendezvous(pairKey: k, owner: owner, epoch: epoch))
                    all.append(PrivacyTags.lan(pairKey: k, owner: owner, epoch: epoch))
                }
            }
        }
        all.append(PrivacyTags.request(publicKey: a.publicKey, nospam: 1, epoch: e))
        all.append(PrivacyTags.request(publicKey: a.publicKey, nospam: 2, epoch: e))
        all.append(PrivacyTags.request(publicKey: a.publicKey, nospam: 1, epoch: e + 1))
        #expect(Set(all).count == all.count, "every tag differs")
        for t in all {
            #expect(t.count == 16)
            for key in [a.publicKey, b.publicKey, c.publicKey] {
                #expect(!contains(key, t) && !contains(t, Array(key.prefix(8))))
            }
        }
        // The neighbouring epoch is registered only near a boundary.
        #expect(PrivacyTags.epochs(3600 * 10 + 1800) == [10])
        #expect(PrivacyTags.epochs(3600 * 10 + 60) == [10, 9])
        #expect(PrivacyTags.epochs(3600 * 11 - 60) == [10, 11])
    }

    /// A curious rendezvous node: two friends befriend, talk directly, then only through its
    /// relay. Neither long-term key appears in any datagram the node receives or sends, in any
    /// plaintext it opens, or in anything it stores; it holds registration keys and tags only.
    @Test func aCuriousRendezvousNodeNeverSeesALongTermKey() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        var seen: [[UInt8]] = []
        node.receiveTap = { bytes, _ in seen.append(bytes) }
        node.sendTap = { bytes, _ in seen.append(bytes) }
        node.openedTap = { plain in seen.append(plain) }
        let alice = try TestPeer(rendezvous: node), bob = try TestPeer(rendezvous: node)
        defer { alice.remove(); bob.remove() }
        await alice.waitForEvent(.discoverable(true))
        try await befriend(alice, bob)
        _ = try await alice.revue.friends.sendMessage(friendId: bob.id, message: "direct")
        await bob.waitForEvent(.message(alice.id, "direct"))
        // Now only the relay: both drop direct sends and reconnect through the node.
        let relayedBefore = node.relayedPackets
        alice.revue.core!.environment.faults.dropDirectSends = true
        bob.revue.core!.environment.faults.dropDirectSends = true
        _ = try await alice.revue.friends.sendMessage(friendId: bob.id, message: "relayed")
        await bob.waitForEvent(.message(alice.id, "relayed"), timeout: 10)
        #expect(node.relayedPackets > relayedBefore, "the relay carried the friends' traffic")
        await settle(1.2)  // more registrations and lookups

        let keys = [alice.revue.core!.identity.publicKey, bob.revue.core!.identity.publicKey]
        #expect(seen.count > 20)
        for bytes in seen {
            for key in keys { #expect(!contains(bytes, key), "a long-term key in what the node saw: \(Hex.encode(bytes))") }
        }
        let state = node.storedState
        #expect(state.count == 2)
        for entry in state {
            #expect(!keys.contains(entry.key), "a registration keyed by a long-term key")
            for tag in entry.tags { for key in keys { #expect(!contains(key, tag)) } }
        }
        // Each registration holds the request tag and one tag per friend (two near a boundary).
        #expect(state.allSatisfy { (2...4).contains($0.tags.count) }, "\(state.map(\.tags.count))")
        // The two directions of the pair are different tags.
        let aliceTags = Set(alice.revue.core!.registrationTags()), bobTags = Set(bob.revue.core!.registrationTags())
        #expect(aliceTags.isDisjoint(with: bobTags))
        // The registration keys differ from node to node and from the long-term key.
        let other = SessionCore.NodeState()
        #expect(other.registrationKeys.publicKey != alice.revue.core!.nodeStates.values.first!.registrationKeys.publicKey)
    }

    /// The next epoch: every tag a peer registers and its registration key change (the node
    /// cannot link the two hours by tag or key), and lookups by the new tags still find the
    /// friend at the node.
    @Test func tagsRotateWithTheEpochAndLookupsStillFindTheFriend() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let alice = try TestPeer(rendezvous: node), bob = try TestPeer(rendezvous: node)
        defer { alice.remove(); bob.remove() }
        try await befriend(alice, bob)
        let mid = (Date().timeIntervalSince1970 / 3600).rounded(.down) * 3600 + 1800
        for p in [alice, bob] { p.revue.core!.environment.wallClock = { mid } }
        let before = Set(alice.revue.core!.registrationTags() + bob.revue.core!.registrationTags())
        await settle(1.3)  // a registration in the shifted epoch: its registration key
        let nodeAddress = SocketAddress(ip: 0x7F00_0001, port: node.port)
        let keyBefore = alice.revue.core!.nodeStates[nodeAddress]!.registrationKeys.publicKey
        for p in [alice, bob] { p.revue.core!.environment.wallClock = { mid + 3600 } }
        let after = Set(alice.revue.core!.registrationTags() + bob.revue.core!.registrationTags())
        #expect(before.isDisjoint(with: after), "no tag survives into the next epoch")
        #expect(Set(alice.revue.core!.lanAnnouncements().flatMap { Array($0.dropFirst(5)) }).count > 0)
        // At the node, the next epoch's tags lead to each peer: a stranger registered there that
        // learned one (it cannot, but a curious node can) gets Bob's endpoint for Alice's tag.
        await settle(1.3)  // a registration interval with the new tags
        // A new registration key too: the node cannot link the two hours by key (only by address).
        let keyAfter = alice.revue.core!.nodeStates[nodeAddress]!.registrationKeys.publicKey
        #expect(keyAfter != keyBefore)
        #expect(node.storedState.contains { $0.key == keyAfter })
        #expect(alice.revue.core!.nodeStates[nodeAddress]!.tokenKey == keyAfter, "the new key accepted, with its relay token")
        let k = alice.revue.core!.pairKey(alice.revue.core!.friends[bob.id]!)!
        let e = PrivacyTags.epoch(mid + 3600)
        let asker = try RendezvousClient(nodePort: node.port)
        defer { asker.close() }
        #expect(await asker.register())
        let bobEndpoint = SocketAddress(ip: 0x7F00_0001, port: bob.revue.port)
        #expect(
            await asker.lookup(PrivacyTags.rendezvous(pairKey: k, owner: bob.revue.core!.identity.publicKey, epoch: e))
                == bobEndpoint)
        // And Alice's own lookup by the new tag brings Bob's endpoint back as a candidate.
        let f = alice.revue.core!.friends[bob.id]!
        f.candidates = [:]
        f.lastLookup = nil
        await alice.wait("a candidate from the next epoch's lookup", timeout: 5) { f.candidates[.direct(bobEndpoint)] != nil }
    }
}

/// The LAN observer: a socket in the discovery group records every announcement while two
/// friends find each other there.
@MainActor
@Suite(.serialized, .enabled(if: multicastAvailable(), "no IPv4 multicast route on this host"))
struct LANPrivacyTests {
    @Test func aLANObserverNeverSeesALongTermKey() async throws {
        let lanPort = testLANPort(2)
        let observer = try SessionSocket(host: "0.0.0.0", port: lanPort, reusePort: true)
        defer { observer.close() }
        #expect(observer.joinMulticast(group: SocketAddress(ip: SessionCore.lanGroup, port: lanPort)))
        var seen: [[UInt8]] = []
        observer.start { bytes, _ in MainActor.assumeIsolated { seen.append(bytes) } }
        func lan(_ c: inout RevueConfiguration) {
            c.bindHost = "0.0.0.0"
            c.lanDiscovery = true
            c.lanDiscoveryPort = lanPort
        }
        let alice = try TestPeer(tweak: lan), bob = try TestPeer(tweak: lan)
        defer { alice.remove(); bob.remove() }
        let start = MonotonicTime.now
        try await befriend(alice, bob)
        print("LAN friends found each other in \((MonotonicTime.now - start).inSeconds) s")
        #expect(alice.revue.friends.getFriendPaths(friendId: bob.id).paths.first?.kind == .directLAN)
        await settle(1.2)
        let keys = [alice.revue.core!.identity.publicKey, bob.revue.core!.identity.publicKey]
        let announcements = seen.filter { $0.first == PacketType.lanAnnounce.rawValue }
        #expect(announcements.count >= 2)
        for bytes in seen {
            for key in keys { #expect(!contains(bytes, key), "a long-term key on the LAN: \(Hex.encode(bytes))") }
        }
        // Tag counts are padded to a multiple of 8.
        #expect(announcements.allSatisfy { $0.count >= 5 && Int($0[4]) % 8 == 0 && $0.count == 5 + 16 * Int($0[4]) })
        // Alice's tag for Bob is in her announcements and changes with the epoch.
        let core = alice.revue.core!
        let k = core.pairKey(core.friends[bob.id]!)!
        let e = PrivacyTags.epoch(core.wallNow())
        let tag = PrivacyTags.lan(pairKey: k, owner: core.identity.publicKey, epoch: e)
        #expect(announcements.contains { contains($0, tag) })
        #expect(
            !announcements.contains { contains($0, PrivacyTags.lan(pairKey: k, owner: core.identity.publicKey, epoch: e + 2)) })
    }

    /// Two peers long past their fast announcements (every 5-10 s now): a friend request still
    /// finds the other within about 2 s, as the requester's announcements carry the other's
    /// request tag, which makes it announce itself at once.
    @Test func aRequestOnTheLANIsFoundWithinTwoSecondsAfterTheFastAnnouncements() async throws {
        func lan(_ c: inout RevueConfiguration) {
            c.bindHost = "0.0.0.0"
            c.lanDiscovery = true
            c.lanDiscoveryPort = testLANPort(3)
        }
        let alice = try TestPeer(tweak: lan), bob = try TestPeer(tweak: lan)
        defer { alice.remove(); bob.remove() }
        await alice.wait("the fast announcements done", timeout: 6) {
            alice.revue.core!.lanFastLeft == 0 && bob.revue.core!.lanFastLeft == 0
        }
        await settle(1.1)
        let start = MonotonicTime.now
        try alice.revue.friends.addFriend(address: bob.revue.revueAddress, message: "on the LAN")
        await bob.waitForEvent(.request(alice.id, "on the LAN"), timeout: 4)
        let elapsed = (MonotonicTime.now - start).inSeconds
        print("a LAN request reached its peer \(elapsed) s after it was made")
        #expect(elapsed < 2.5)
    }
}
