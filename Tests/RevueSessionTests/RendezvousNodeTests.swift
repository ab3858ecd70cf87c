import Foundation
import Testing
@testable import RevueSession
import MediaCore

@MainActor
@Suite(.serialized) struct RendezvousNodeTests {
    /// Asks the node where `key` is, from a raw socket; returns the endpoint it reports.
    func lookup(_ key: [UInt8], node: RendezvousNode, from socket: SessionSocket, replies: @escaping () -> [[UInt8]]) async -> SocketAddress? {
        var w = ByteWriter()
        w.u8(PacketType.rendezvousLookup.rawValue)
        w.u8(revueProtocolVersion)
        w.append(key)
        let before = replies().count
        socket.send(w.bytes, to: SocketAddress(ip: 0x7F00_0001, port: node.port))
        let deadline = monotonicNow() + 2
        while replies().count == before && monotonicNow() < deadline { await settle(0.01) }
        guard let reply = replies().last, replies().count > before else { return nil }
        var r = ByteReader(reply, offset: 2)
        guard r.take(32) == key, r.u8() == 1, let ip = r.u32(), let port = r.u16() else { return nil }
        return SocketAddress(ip: ip, port: port)
    }

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

        let attacker = try SessionSocket(host: "127.0.0.1", port: 0)
        defer { attacker.close() }
        var replies: [[UInt8]] = []
        attacker.start { bytes, _ in MainActor.assumeIsolated { if bytes.first == PacketType.rendezvousLookupReply.rawValue { replies.append(bytes) } } }
        #expect(await lookup(key, node: node, from: attacker) { replies } == bobEndpoint)

        // A registration for Bob's key with a made-up MAC, and the newest real one replayed.
        let refusedBefore = node.refusedRegistrations
        var forged = registrations.last!
        forged[forged.count - 1] ^= 1
        var later = registrations.last!
        later[35] = 0xFF  // a far-future timestamp, MAC no longer matches
        for packet in [forged, later, registrations.last!, registrations.first!] {
            attacker.send(packet, to: SocketAddress(ip: 0x7F00_0001, port: node.port))
        }
        await bob.wait("refusals") { node.refusedRegistrations - refusedBefore >= 4 }
        #expect(await lookup(key, node: node, from: attacker) { replies } == bobEndpoint)
    }
}
