import Glibc
import MediaCore
import Testing

/// Whether this host can join an IPv4 multicast group (needs a multicast route).
private func multicastJoinable() -> Bool {
    guard let s = try? UDPSocket(bindingTo: .anyIPv4(port: 0)) else { return false }
    return (try? s.joinMulticastGroup(SocketAddress(ipv4: 239, 255, 77, 79, port: 0))) != nil
}

/// Waits up to 2 s for one datagram on `socket`; its bytes, or nil.
private func receiveOne(_ socket: UDPSocket) throws -> [UInt8]? {
    guard try socket.waitUntilReadable(timeoutMilliseconds: 2_000) else { return nil }
    var buffer = [UInt8](repeating: 0, count: 64)
    let r = try buffer.withUnsafeMutableBytes { try socket.receive(into: $0) }
    return Array(buffer[0..<r.count])
}

/// The LAN-discovery additions: IPv4 addresses as numbers, broadcast, port sharing, multicast.
@Suite struct UDPSocketMulticastTests {
    @Test func ipv4AddressIsTheNumberInHostByteOrder() throws {
        let a = SocketAddress(ipv4Address: 0xC0A8_0114, port: 5004)
        #expect(a == (try SocketAddress(parsing: "192.168.1.20:5004")))
        #expect(a.ipv4Address == 0xC0A8_0114)
        #expect(SocketAddress.loopbackIPv4(port: 1).ipv4Address == 0x7F00_0001)
        #expect(SocketAddress.loopbackIPv6(port: 1).ipv4Address == nil)
        // Through the kernel and back.
        let s = try UDPSocket(bindingTo: SocketAddress(ipv4Address: 0x7F00_0001, port: 0))
        #expect(try s.localAddress().ipv4Address == 0x7F00_0001)
    }

    @Test func broadcastSendsNeedSetBroadcast() throws {
        let receiver = try UDPSocket(bindingTo: .anyIPv4(port: 0))
        let port = try receiver.localAddress().port
        let loopbackBroadcast = SocketAddress(ipv4: 127, 255, 255, 255, port: port)
        let sender = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let payload: [UInt8] = [1, 2, 3]
        let refused = payload.withUnsafeBytes { b in
            Result { () throws(SocketError) in try sender.send(b, to: loopbackBroadcast) }
        }
        guard case .failure(let error) = refused else {
            Issue.record("a broadcast send without SO_BROADCAST succeeded")
            return
        }
        #expect(error.code == SocketErrno(rawValue: EACCES))
        try sender.setBroadcast(true)
        try payload.withUnsafeBytes { _ = try sender.send($0, to: loopbackBroadcast) }
        #expect(try receiveOne(receiver) == payload)
    }

    @Test(.enabled(if: multicastJoinable(), "no IPv4 multicast route on this host"))
    func socketsSharingAPortEachHearTheGroup() throws {
        let group = SocketAddress(ipv4: 239, 255, 77, 79, port: 0)
        func member(port: UInt16) throws -> UDPSocket {
            var options = UDPSocket.Options()
            options.reuseAddress = true
            let s = try UDPSocket(family: .ipv4, options: options)
            try s.setReusePort(true)
            try s.bind(to: .anyIPv4(port: port))
            try s.joinMulticastGroup(group, loopback: true, timeToLive: 1)
            return s
        }
        let first = try member(port: 0)
        let port = try first.localAddress().port
        let second = try member(port: port)
        #expect(try second.localAddress().port == port)
        // The sender is a member too: loopback delivers its own datagram to everyone on this host.
        let payload: [UInt8] = Array("announce".utf8)
        var destination = group
        destination.port = port
        try payload.withUnsafeBytes { _ = try first.send($0, to: destination) }
        #expect(try receiveOne(first) == payload)
        #expect(try receiveOne(second) == payload)
    }
}
