// STUN and TURN against a real coturn server on loopback, started from a generated configuration:
// our Binding requests get our address back, our long-term credentials are accepted (and a wrong
// password is not), and data sent through the allocation reaches a peer and comes back.
#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import MediaCore

/// A coturn `turnserver` for one test: listens on 127.0.0.1:`port`, relays on 127.0.0.1, one
/// long-term user. Stopped with `stop()`.
final class CoturnServer {
    static let realm = "revue.test", user = "alice", password = "wonderland"
    let port: Int
    let process: ToolProcess
    let dir = InteropTempDir()

    init() throws {
        port = cliFreePort()
        let relayBase = cliFreePort()
        let config = """
            listening-ip=127.0.0.1
            listening-port=\(port)
            relay-ip=127.0.0.1
            min-port=\(relayBase)
            max-port=\(relayBase + 3)
            realm=\(Self.realm)
            lt-cred-mech
            user=\(Self.user):\(Self.password)
            fingerprint
            allow-loopback-peers
            no-tls
            no-dtls
            no-cli
            no-tcp-relay
            log-file=stdout
            simple-log
            pidfile=\(dir.file("turnserver.pid"))
            userdb=\(dir.file("turndb"))
            """
        dir.write("turnserver.conf", Array(config.utf8))
        process = try ToolProcess("turnserver", ["-c", dir.file("turnserver.conf")], cwd: dir.path)
    }

    var address: SocketAddress { .loopbackIPv4(port: UInt16(port)) }

    func stop() -> ToolRun {
        process.signal(SIGTERM)
        let run = process.wait(timeout: 5)
        dir.remove()
        return run
    }
}

/// Sends `request` from `socket` to `server` and returns the response with its transaction ID
/// (raw bytes and parsed), retransmitting every 250 ms for up to `seconds`.
func stunTransaction(_ socket: UDPSocket, _ request: [UInt8], to server: SocketAddress, seconds: Double = 3) throws -> ([UInt8], STUNMessage)? {
    let sent = try STUNMessage(parsing: request)
    let deadline = Date().addingTimeInterval(seconds)
    var buffer = [UInt8](repeating: 0, count: 2048)
    while Date() < deadline {
        _ = try request.withUnsafeBytes { try socket.send($0, to: server) }
        let until = Date().addingTimeInterval(0.25)
        while Date() < until {
            guard try socket.waitUntilReadable(timeoutMilliseconds: 50) else { continue }
            let n = try buffer.withUnsafeMutableBytes { try socket.receive(into: $0).count }
            let bytes = Array(buffer[0..<n])
            if let m = try? STUNMessage(parsing: bytes), m.transactionID == sent.transactionID { return (bytes, m) }
        }
    }
    return nil
}

@Suite(.serialized) struct CoturnTests {
    @Test func bindingAllocationAndRelayThroughCoturn() throws {
        let server = try CoturnServer()
        var stopped: ToolRun?
        defer { if stopped == nil { _ = server.stop() } }
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let local = try socket.localAddress()

        // Binding: the server sees us at our own address (no NAT on loopback) and signs the
        // answer with a FINGERPRINT we can check.
        let binding = STUNMessage(method: .binding, class: .request).encode(fingerprint: true)
        guard let (bindingBytes, bound) = try stunTransaction(socket, binding, to: server.address, seconds: 8) else {
            let run = server.stop(); stopped = run
            Issue.record("coturn did not answer a Binding request on 127.0.0.1:\(server.port): \(run.stdout.suffix(2000)) \(run.stderr.suffix(2000))")
            return
        }
        #expect(bound.messageClass == .successResponse)
        #expect(try bound.xorAddress(STUNMessage.AttributeType.xorMappedAddress) == local)
        #expect(STUNMessage.hasValidFingerprint(bindingBytes))

        // Allocate without credentials: 401 with the realm and a nonce (RFC 8656 §7.2, RFC 8489 §9.2).
        func allocate(username: String?, password: String?, realm: String?, nonce: String?) throws -> ([UInt8], STUNMessage) {
            var m = STUNMessage(method: .allocate, class: .request)
            m.appendUInt32(STUNMessage.AttributeType.requestedTransport, 17 << 24)  // UDP
            var key: [UInt8]?
            if let username, let password, let realm, let nonce {
                m.appendText(STUNMessage.AttributeType.username, username)
                m.appendText(STUNMessage.AttributeType.realm, realm)
                m.appendText(STUNMessage.AttributeType.nonce, nonce)
                key = STUNMessage.longTermKey(username: username, realm: realm, password: password)
            }
            return try #require(try stunTransaction(socket, m.encode(integrity: key, fingerprint: true), to: server.address))
        }
        let (_, challenge) = try allocate(username: nil, password: nil, realm: nil, nonce: nil)
        #expect(challenge.messageClass == .errorResponse && challenge.errorCode?.code == 401)
        let realm = try #require(challenge.text(STUNMessage.AttributeType.realm))
        let nonce = try #require(challenge.text(STUNMessage.AttributeType.nonce))
        #expect(realm == CoturnServer.realm)

        // A wrong password is refused.
        let (_, refused) = try allocate(username: CoturnServer.user, password: "not-it", realm: realm, nonce: nonce)
        #expect(refused.messageClass == .errorResponse && refused.errorCode?.code == 401)

        // The right one gets an allocation, and coturn's answer carries a MAC under our key.
        let key = STUNMessage.longTermKey(username: CoturnServer.user, realm: realm, password: CoturnServer.password)
        let (allocatedBytes, allocated) = try allocate(username: CoturnServer.user, password: CoturnServer.password, realm: realm, nonce: nonce)
        #expect(allocated.messageClass == .successResponse, "\(allocated.errorCode.map { "\($0.code) \($0.reason)" } ?? "")")
        #expect(STUNMessage.hasValidIntegrity(allocatedBytes, key: key))
        let relayed = try #require(try allocated.xorAddress(STUNMessage.AttributeType.xorRelayedAddress))
        #expect(relayed.addressBytes == [127, 0, 0, 1] && relayed.port != 0)
        #expect((allocated.uint32(STUNMessage.AttributeType.lifetime) ?? 0) > 0)
        #expect(try allocated.xorAddress(STUNMessage.AttributeType.xorMappedAddress) == local)

        // A permission for a peer, then data through the relay both ways (Send and Data indications).
        let peer = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let peerAddress = try peer.localAddress()
        var permission = STUNMessage(method: .createPermission, class: .request)
        permission.appendXORAddress(STUNMessage.AttributeType.xorPeerAddress, peerAddress)
        permission.appendText(STUNMessage.AttributeType.username, CoturnServer.user)
        permission.appendText(STUNMessage.AttributeType.realm, realm)
        permission.appendText(STUNMessage.AttributeType.nonce, nonce)
        let (_, permitted) = try #require(try stunTransaction(socket, permission.encode(integrity: key, fingerprint: true), to: server.address))
        #expect(permitted.messageClass == .successResponse, "\(permitted.errorCode.map { "\($0.code) \($0.reason)" } ?? "")")

        let payload = Array("media through a real TURN relay".utf8)
        var send = STUNMessage(method: .send, class: .indication)
        send.appendXORAddress(STUNMessage.AttributeType.xorPeerAddress, peerAddress)
        send.attributes.append(.init(type: STUNMessage.AttributeType.data, value: payload))
        _ = try send.encode(fingerprint: true).withUnsafeBytes { try socket.send($0, to: server.address) }
        var buffer = [UInt8](repeating: 0, count: 2048)
        #expect(try peer.waitUntilReadable(timeoutMilliseconds: 3000))
        let got = try buffer.withUnsafeMutableBytes { try peer.receive(into: $0) }
        #expect(Array(buffer[0..<got.count]) == payload)
        #expect(got.source == relayed, "the peer sees the relayed address, not ours")

        let reply = Array("and back".utf8)
        _ = try reply.withUnsafeBytes { try peer.send($0, to: relayed) }
        #expect(try socket.waitUntilReadable(timeoutMilliseconds: 3000))
        let n = try buffer.withUnsafeMutableBytes { try socket.receive(into: $0).count }
        let data = try STUNMessage(parsing: Array(buffer[0..<n]))
        #expect(data.method == .data && data.messageClass == .indication)
        #expect(try data.xorAddress(STUNMessage.AttributeType.xorPeerAddress) == peerAddress)
        #expect(data.value(STUNMessage.AttributeType.data) == reply)
    }
}
