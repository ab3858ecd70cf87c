import Foundation
import MediaCore
import Testing

@testable import RevueSession

@MainActor
@Suite(.serialized) struct RendezvousNodeTests {
    @Test func spoofedAndReplayedRegistrationsCannotMoveAnEndpoint() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let bob = try TestPeer(rendezvous: node)
        defer { bob.remove() }
        var registrations: [[UInt8]] = []
        bob.revue.core!.environment.sendTap = { packet, _ in
            if packet.first == PacketType.rendezvousRegister.rawValue { registrations.append(packet) }
        }
        await bob.waitForEvent(.discoverable(true))
        await bob.wait("an authenticated registration") { registrations.count >= 2 }
        let key = requestTag(of: bob)
        let bobEndpoint = SocketAddress(ip: 0x7F00_0001, port: bob.revue.port)

        let asker = try RendezvousClient(nodePort: node.port)
        defer { asker.close() }
        #expect(await asker.register())
        #expect(await asker.lookup(key) == bobEndpoint)

        // A registration for Bob's registration key with a broken seal, one with a later
        // timestamp, and real ones replayed from another endpoint (whose cookie they do not carry).
        let refusedBefore = node.refusedRegistrations
        var forged = registrations.last!
        forged[forged.count - 1] ^= 1
        var later = registrations.last!
        later[41] = 0x7F  // a far-future timestamp, the seal no longer opens
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
        stranger.macKey = RandomBytes.bytes(32)
        #expect(await stranger.lookup(requestTag(of: bob)) == nil)
        #expect(node.droppedPackets >= 1)
        // The cookie round: the first registration is refused with a cookie, no X25519 spent.
        let agreements = node.keyAgreements
        stranger.macKey = nil
        #expect(await stranger.registerOnce() == false)
        #expect(node.keyAgreements == agreements)
        #expect(await stranger.registerOnce() == true)
        #expect(node.keyAgreements == agreements + 1)
        #expect(await stranger.lookup(requestTag(of: bob)) == SocketAddress(ip: 0x7F00_0001, port: bob.revue.port))
        // Every answer is no larger than its question.
        #expect(RendezvousAuth.registeredLength < RendezvousAuth.registerLength)
        #expect(RendezvousAuth.registeredUnsealedLength < RendezvousAuth.registerLength)
        for family in [SocketAddress.Family.ipv4, .ipv6] {
            #expect(RendezvousAuth.lookupReplyLength(family) < RendezvousAuth.lookupLength)
        }
        #expect(RendezvousAuth.lookupReplyLength(nil) < RendezvousAuth.lookupLength)
    }

    /// A nonblocking client socket and the node's address.
    static func stunClient(_ node: RendezvousNode) throws -> (UDPSocket, SocketAddress) {
        var options = UDPSocket.Options()
        options.nonBlocking = true
        return (
            try UDPSocket(bindingTo: .loopbackIPv4(port: 0), options: options), SocketAddress(ip: 0x7F00_0001, port: node.port)
        )
    }

    /// Every datagram waiting on `socket`, without blocking the main actor the node runs on.
    static func drain(_ socket: UDPSocket) -> [[UInt8]] {
        var out: [[UInt8]] = []
        var buffer = [UInt8](repeating: 0, count: 2048)
        while let got = try? buffer.withUnsafeMutableBytes({ try socket.receive(into: $0) }) {
            out.append(Array(buffer[0..<got.count]))
        }
        return out
    }

    /// A padded Binding request (a SOFTWARE attribute makes it as large as the answer).
    static func paddedBinding() -> [UInt8] {
        var m = STUNMessage(method: .binding, class: .request)
        m.appendText(STUNMessage.AttributeType.software, "revue padded request")
        return m.encode(fingerprint: true)
    }

    @Test func answersPaddedSTUNBindingRequestsOnlyWithTheObservedAddress() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let (client, nodeAddress) = try Self.stunClient(node)
        let request = Self.paddedBinding()
        _ = try request.withUnsafeBytes { try client.send($0, to: nodeAddress) }
        var replies: [[UInt8]] = []
        let deadline = MonotonicTime.now + .seconds(3)
        while replies.isEmpty && MonotonicTime.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
            replies = Self.drain(client)
        }
        let reply = try #require(replies.first, "no answer to a padded Binding request")
        let answer = try STUNMessage(parsing: reply)
        #expect(answer.method == .binding && answer.messageClass == .successResponse)
        #expect(answer.transactionID == (try STUNMessage(parsing: request)).transactionID)
        #expect(try answer.xorAddress(STUNMessage.AttributeType.xorMappedAddress) == (try client.localAddress()))
        #expect(STUNMessage.hasValidFingerprint(reply))
        #expect(reply.count <= request.count, "no amplification")
        #expect(node.bindingAnswers == 1)

        // Unpadded (20 and 28 bytes: the answer would be larger), a bad FINGERPRINT, a Binding
        // response and bytes that are not STUN: no answer, each counted.
        var badFingerprint = request
        badFingerprint[badFingerprint.count - 1] ^= 1
        let response = STUNMessage(
            method: .binding, class: .successResponse, attributes: [.init(type: 0x8022, value: Array(repeating: 0x41, count: 40))]
        )
        let unanswered: [[UInt8]] = [
            STUNMessage(method: .binding, class: .request).encode(),
            STUNMessage(method: .binding, class: .request).encode(fingerprint: true),
            badFingerprint,
            response.encode(fingerprint: true),
            [0x00, 0x01] + [UInt8](repeating: 0, count: 60),
        ]
        for bytes in unanswered { _ = try bytes.withUnsafeBytes { try client.send($0, to: nodeAddress) } }
        let wait = MonotonicTime.now + .seconds(3)
        while node.bindingDropped < unanswered.count && MonotonicTime.now < wait { try await Task.sleep(for: .milliseconds(10)) }
        #expect(node.bindingDropped == unanswered.count)
        try await Task.sleep(for: .milliseconds(100))
        #expect(Self.drain(client).isEmpty)
        #expect(node.bindingAnswers == 1)
    }

    @Test func aBindingFloodIsAnsweredOnlyUpToTheRateLimit() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let (client, nodeAddress) = try Self.stunClient(node)
        let flood = 200
        let start = MonotonicTime.now
        for _ in 0..<flood { _ = try Self.paddedBinding().withUnsafeBytes { try client.send($0, to: nodeAddress) } }
        let deadline = MonotonicTime.now + .seconds(5)
        while node.bindingAnswers + node.refusedForLimits < flood && MonotonicTime.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        let elapsed = (MonotonicTime.now - start).inSeconds
        #expect(node.bindingAnswers + node.refusedForLimits == flood)
        // The burst is answered; beyond it only what the rate refilled meanwhile.
        #expect(node.bindingAnswers >= Int(RendezvousNode.bindingBurstPerSource))
        #expect(
            Double(node.bindingAnswers) <= RendezvousNode.bindingBurstPerSource + RendezvousNode.bindingRatePerSource * elapsed
                + 1)
        try await Task.sleep(for: .milliseconds(100))
        #expect(Self.drain(client).count == node.bindingAnswers)
    }
}
