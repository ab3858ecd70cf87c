import Foundation
import Testing
@testable import RevueSession
import MediaCore

@MainActor
@Suite(.serialized) struct RendezvousNodeTests {
    @Test func spoofedAndReplayedRegistrationsCannotMoveAnEndpoint() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let bob = try TestPeer(rendezvous: node)
        defer { bob.remove() }
        var registrations: [[UInt8]] = []
        bob.revue.core!.sendTap = { packet, _ in
            if packet.first == PacketType.rendezvousRegister.rawValue { registrations.append(packet) }
        }
        await bob.waitForEvent(.discoverable(true))
        await bob.wait("an authenticated registration") { registrations.count >= 2 }
        let key = bob.revue.core!.identity.publicKey
        let bobEndpoint = SocketAddress(ip: 0x7F00_0001, port: bob.revue.port)

        let asker = try RendezvousClient(nodePort: node.port)
        defer { asker.close() }
        #expect(await asker.register())
        #expect(await asker.lookup(key) == bobEndpoint)

        // A registration for Bob's key with a made-up MAC, one with a later timestamp, and real
        // ones replayed from another endpoint (whose cookie they do not carry).
        let refusedBefore = node.refusedRegistrations
        var forged = registrations.last!
        forged[forged.count - 1] ^= 1
        var later = registrations.last!
        later[35] = 0xFF  // a far-future timestamp, MAC no longer matches
        for packet in [forged, later, registrations.last!, registrations.first!] {
            asker.socket.send(packet, to: asker.node)
        }
        await bob.wait("refusals") { node.refusedRegistrations - refusedBefore >= 4 }
        #expect(await asker.lookup(key) == bobEndpoint)
    }

    @Test func lookupsNeedARegistrationAndAnswerNoMoreThanAsked() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let bob = try TestPeer(rendezvous: node)
        defer { bob.remove() }
        await bob.waitForEvent(.discoverable(true))
        let stranger = try RendezvousClient(nodePort: node.port)
        defer { stranger.close() }
        // Unregistered: no MAC key, and a lookup with a made-up one gets no answer.
        stranger.macKey = Sodium.random(32)
        #expect(await stranger.lookup(bob.revue.core!.identity.publicKey) == nil)
        #expect(node.droppedPackets >= 1)
        // The cookie round: the first registration is refused with a cookie, no X25519 spent.
        let agreements = node.keyAgreements
        stranger.macKey = nil
        #expect(await stranger.registerOnce() == false)
        #expect(node.keyAgreements == agreements)
        #expect(await stranger.registerOnce() == true)
        #expect(node.keyAgreements == agreements + 1)
        #expect(await stranger.lookup(bob.revue.core!.identity.publicKey) == SocketAddress(ip: 0x7F00_0001, port: bob.revue.port))
        // Every answer is no larger than its question.
        #expect(RendezvousAuth.registeredLength <= RendezvousAuth.registerLength)
        #expect(RendezvousAuth.lookupReplyLength <= RendezvousAuth.lookupLength)
    }
}
