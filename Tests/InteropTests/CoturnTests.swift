internal import CMediaShims
import Foundation
import MediaCore
import Testing

// STUN and TURN against a real coturn server on loopback, started from a generated configuration:
// our Binding requests get our address back, our long-term credentials are accepted (and a wrong
// password is not), and data sent through the allocation reaches a peer and comes back.
#if canImport(Glibc)
    import Glibc
#endif

/// Sends `request` from `socket` to `server` and returns the response with its transaction ID
/// (raw bytes and parsed), retransmitting every 250 ms for up to `seconds`.
func stunTransaction(_ socket: UDPSocket, _ request: [UInt8], to server: SocketAddress, seconds: Double = 3) throws -> (
    [UInt8], STUNMessage
)? {
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

/// What a TURN client sees of `server` from `socket`, and what `peer` (a socket the relay can
/// reach) receives: a Binding answer (our address as the server sees it), a 401 challenge, a
/// refused wrong password, an allocation under the right one, a permission, and data both ways.
/// Returns the server-reflexive address.
@discardableResult
func exerciseTURN(_ server: CoturnServer, from socket: UDPSocket, peer: UDPSocket) throws -> SocketAddress? {
    // Binding: the server signs its answer with a FINGERPRINT we can check.
    let binding = STUNMessage(method: .binding, class: .request).encode(fingerprint: true)
    guard let (bindingBytes, bound) = try stunTransaction(socket, binding, to: server.address, seconds: 8) else {
        let run = server.stop()
        Issue.record(
            "coturn did not answer a Binding request on \(server.ip):\(server.port): \(run.stdout.suffix(2000)) \(run.stderr.suffix(2000))"
        )
        return nil
    }
    #expect(bound.messageClass == .successResponse)
    #expect(STUNMessage.hasValidFingerprint(bindingBytes))
    let reflexive = try #require(try bound.xorAddress(STUNMessage.AttributeType.xorMappedAddress))

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
    let (allocatedBytes, allocated) = try allocate(
        username: CoturnServer.user, password: CoturnServer.password, realm: realm, nonce: nonce)
    #expect(allocated.messageClass == .successResponse, "\(allocated.errorCode.map { "\($0.code) \($0.reason)" } ?? "")")
    #expect(STUNMessage.hasValidIntegrity(allocatedBytes, key: key))
    let relayed = try #require(try allocated.xorAddress(STUNMessage.AttributeType.xorRelayedAddress))
    #expect(relayed.addressBytes == server.address.addressBytes && relayed.port != 0)
    #expect((allocated.uint32(STUNMessage.AttributeType.lifetime) ?? 0) > 0)
    #expect(try allocated.xorAddress(STUNMessage.AttributeType.xorMappedAddress) == reflexive)

    // A permission for the peer, then data through the relay both ways (Send and Data indications).
    let peerAddress = try peer.localAddress()
    var permission = STUNMessage(method: .createPermission, class: .request)
    permission.appendXORAddress(STUNMessage.AttributeType.xorPeerAddress, peerAddress)
    permission.appendText(STUNMessage.AttributeType.username, CoturnServer.user)
    permission.appendText(STUNMessage.AttributeType.realm, realm)
    permission.appendText(STUNMessage.AttributeType.nonce, nonce)
    let (_, permitted) = try #require(
        try stunTransaction(socket, permission.encode(integrity: key, fingerprint: true), to: server.address))
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
    return reflexive
}

/// Runs `body` on a thread that has entered the network namespace `name` (made with `ip netns
/// add`): sockets it creates live in that namespace and keep working from any thread.
func inNetworkNamespace<T: Sendable>(_ name: String, _ body: @escaping @Sendable () throws -> T) throws -> T {
    nonisolated(unsafe) var result: Result<T, Error>?
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        defer { done.signal() }
        let fd = open("/var/run/netns/\(name)", O_RDONLY)
        guard fd >= 0, cms_setns_net(fd) == 0 else {
            result = .failure(NamespaceEntryError(message: "cannot enter network namespace \(name): errno \(errno)"))
            return
        }
        close(fd)
        result = Result { try body() }
    }
    thread.start()
    done.wait()
    return try result!.get()
}

struct NamespaceEntryError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

@Suite(.serialized) struct CoturnTests {
    @Test func bindingAllocationAndRelayThroughCoturn() throws {
        let server = try CoturnServer()
        defer { _ = server.stop() }
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let peer = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let reflexive = try exerciseTURN(server, from: socket, peer: peer)
        // No NAT on loopback: the server sees our own address.
        #expect(reflexive == (try socket.localAddress()))
    }
}

/// A client behind a NAT: namespace `c` (10.88.1.2) reaches the "internet" 198.51.100.0/24 through
/// namespace `r`, which masquerades it as 198.51.100.1; coturn and a peer live in namespace `s`.
/// The client learns its public address from coturn and relays through it. Root only.
@Suite(
    .serialized,
    .enabled(
        if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/nft"),
        "needs root, ip and nft (not root: skipped)"))
struct CoturnNATNamespaceTests {
    @discardableResult
    static func sh(_ script: String) -> (status: Int32, output: String) { runShell(script) }

    @Test func aClientBehindANATLearnsItsPublicAddressAndRelaysThroughCoturn() throws {
        let p = "rvst\(getpid() % 10_000)"
        let setup = Self.sh(
            """
            set -e
            ip netns add \(p)c; ip netns add \(p)r; ip netns add \(p)s
            ip link add \(p)c0 type veth peer name \(p)c1
            ip link add \(p)s0 type veth peer name \(p)s1
            ip link set \(p)c0 netns \(p)r; ip link set \(p)c1 netns \(p)c
            ip link set \(p)s0 netns \(p)r; ip link set \(p)s1 netns \(p)s
            ip -n \(p)r addr add 10.88.1.1/24 dev \(p)c0; ip -n \(p)r link set \(p)c0 up
            ip -n \(p)r addr add 198.51.100.1/24 dev \(p)s0; ip -n \(p)r link set \(p)s0 up
            ip -n \(p)c addr add 10.88.1.2/24 dev \(p)c1; ip -n \(p)c link set \(p)c1 up; ip -n \(p)c link set lo up
            ip -n \(p)c route add default via 10.88.1.1
            ip -n \(p)s addr add 198.51.100.2/24 dev \(p)s1; ip -n \(p)s addr add 198.51.100.3/24 dev \(p)s1
            ip -n \(p)s link set \(p)s1 up; ip -n \(p)s link set lo up
            ip netns exec \(p)r sysctl -qw net.ipv4.ip_forward=1
            ip netns exec \(p)r nft add table ip nat
            ip netns exec \(p)r nft add chain ip nat post '{ type nat hook postrouting priority 100; }'
            ip netns exec \(p)r nft add rule ip nat post oifname \(p)s0 masquerade
            """)
        defer { Self.sh("ip netns del \(p)c; ip netns del \(p)r; ip netns del \(p)s") }
        try #require(setup.status == 0, "namespace setup failed: \(setup.output)")

        let server = try CoturnServer(ip: "198.51.100.2", namespace: "\(p)s")
        defer { _ = server.stop() }
        let client = try inNetworkNamespace("\(p)c") { try UDPSocket(bindingTo: SocketAddress(ipv4: 10, 88, 1, 2, port: 0)) }
        let peer = try inNetworkNamespace("\(p)s") { try UDPSocket(bindingTo: SocketAddress(ipv4: 198, 51, 100, 3, port: 0)) }
        let reflexive = try #require(try exerciseTURN(server, from: client, peer: peer))
        // The server saw the NAT's public address, not the client's private one.
        #expect(reflexive.addressBytes == [198, 51, 100, 1], "\(reflexive)")
        #expect(reflexive != (try client.localAddress()))
    }
}
