import Foundation
import MediaCore
import Testing

/// Dual-stack sockets and answering from the address a datagram arrived at, on real loopback
/// sockets (no clock, no threads: each datagram is already queued when it is read).
@Suite struct SocketAddressFamilyTests {
    /// A blocking socket bound to `address` that gives up after 2 s.
    static func socket(_ address: SocketAddress, dualStack: Bool = false, destinations: Bool = false) throws -> UDPSocket {
        var options = UDPSocket.Options()
        options.dualStack = dualStack
        options.receiveDestinations = destinations
        let s = try UDPSocket(bindingTo: address, options: options)
        try s.setReceiveTimeout(nanoseconds: 2_000_000_000)
        return s
    }

    /// One datagram's bytes and source, or nil after the receive timeout.
    static func receive(_ s: UDPSocket) -> ([UInt8], SocketAddress?)? {
        var buffer = [UInt8](repeating: 0, count: 256)
        guard let r = try? buffer.withUnsafeMutableBytes({ try s.receive(into: $0) }) else { return nil }
        return (Array(buffer[0..<r.count]), r.source)
    }

    /// A socket bound to "::" with dual stack on hears an IPv4 peer and an IPv6 peer; the IPv4
    /// one appears as a plain IPv4 address (never as ::ffff:a.b.c.d), so the same peer has one
    /// address on every socket, and answers to that IPv4 address arrive, singly and in a batch.
    @Test func aDualStackSocketCarriesBothFamiliesAndShowsIPv4AsIPv4() throws {
        let dual = try Self.socket(.anyIPv6(port: 0), dualStack: true)
        #expect(dual.isDualStack && dual.carries(.ipv4) && dual.carries(.ipv6))
        let port = try dual.localAddress().port
        let v4 = try Self.socket(.loopbackIPv4(port: 0)), v6 = try Self.socket(.loopbackIPv6(port: 0))
        let v4Address = try v4.localAddress(), v6Address = try v6.localAddress()

        _ = try [UInt8]([4]).withUnsafeBytes { try v4.send($0, to: .loopbackIPv4(port: port)) }
        _ = try [UInt8]([6]).withUnsafeBytes { try v6.send($0, to: .loopbackIPv6(port: port)) }
        let first = try #require(Self.receive(dual)), second = try #require(Self.receive(dual))
        #expect(first.0 == [4] && first.1 == v4Address && first.1?.family == .ipv4)
        #expect(second.0 == [6] && second.1 == v6Address)

        // Answers to both, one by one and through one sendmmsg batch.
        _ = try [UInt8]([40]).withUnsafeBytes { try dual.send($0, to: v4Address) }
        _ = try [UInt8]([60]).withUnsafeBytes { try dual.send($0, to: v6Address) }
        let batch = UDPSendBatch(capacity: 4)
        let bytes: [UInt8] = [41, 61]
        let result = bytes.withUnsafeBytes { b in
            batch.append(UnsafeRawBufferPointer(rebasing: b[0..<1]), to: v4Address)
            batch.append(UnsafeRawBufferPointer(rebasing: b[1..<2]), to: v6Address)
            return batch.send(on: dual)
        }
        #expect(result.sent == 2 && result.dropped == 0)
        #expect(Self.receive(v4)?.0 == [40] && Self.receive(v4)?.0 == [41])
        #expect(Self.receive(v6)?.0 == [60] && Self.receive(v6)?.0 == [61])

        // A recvmmsg batch reports the IPv4 source as IPv4 too.
        _ = try [UInt8]([7]).withUnsafeBytes { try v4.send($0, to: .loopbackIPv4(port: port)) }
        let receiveBatch = UDPReceiveBatch(capacity: 4, bufferSize: 64)
        #expect(try receiveBatch.receive(from: dual, wait: true) == 1)
        #expect(receiveBatch[0].source == v4Address)
    }

    /// Without dual stack an IPv6 socket speaks IPv6 only: it refuses an IPv4 destination and
    /// an IPv4 peer cannot reach it.
    @Test func anIPv6OnlySocketRefusesIPv4() throws {
        let only6 = try Self.socket(.anyIPv6(port: 0))
        #expect(!only6.isDualStack && !only6.carries(.ipv4))
        let v4 = try Self.socket(.loopbackIPv4(port: 0))
        #expect(throws: SocketError.self) { try [UInt8]([1]).withUnsafeBytes { try only6.send($0, to: try v4.localAddress()) } }
        try v4.setReceiveTimeout(nanoseconds: 200_000_000)
        try only6.setReceiveTimeout(nanoseconds: 200_000_000)
        _ = try [UInt8]([1]).withUnsafeBytes { try v4.send($0, to: .loopbackIPv4(port: try only6.localAddress().port)) }
        #expect(Self.receive(only6) == nil)
    }

    /// A wildcard socket on a host with several addresses (loopback holds all of 127/8): a
    /// datagram sent to 127.0.0.2 is reported as arriving there, and the answer sent from that
    /// address reaches a client that only accepts datagrams from 127.0.0.2 (a connected socket,
    /// as a NAT or firewall behaves). The kernel's own choice of source (127.0.0.1) does not.
    /// Checked on an IPv4 socket and on a dual-stack one.
    @Test(arguments: [false, true])
    func anAnswerLeavesFromTheAddressItsQuestionArrivedAt(dualStack: Bool) throws {
        let server = try Self.socket(dualStack ? .anyIPv6(port: 0) : .anyIPv4(port: 0), dualStack: dualStack, destinations: true)
        let port = try server.localAddress().port
        let asked = SocketAddress(ipv4: 127, 0, 0, 2, port: port)
        let client = try Self.socket(.loopbackIPv4(port: 0))
        try client.connect(to: asked)
        try client.setReceiveTimeout(nanoseconds: 300_000_000)
        _ = try [UInt8]([1]).withUnsafeBytes { try client.send($0) }

        var buffer = [UInt8](repeating: 0, count: 64)
        let r = try buffer.withUnsafeMutableBytes { try server.receiveWithDestination(into: $0) }
        let source = try #require(r.source)
        let destination = try #require(r.destination)
        let clientAddress = try client.localAddress()
        #expect(r.count == 1 && source == clientAddress)
        #expect(destination.family == .ipv4 && destination.addressBytes == [127, 0, 0, 2])

        // The kernel's choice of source: the connected client never sees it.
        _ = try [UInt8]([2]).withUnsafeBytes { try server.send($0, to: source) }
        #expect(Self.receive(client) == nil)
        // From the address it asked: it arrives.
        _ = try [UInt8]([3]).withUnsafeBytes { try server.send($0, to: source, from: destination) }
        #expect(Self.receive(client)?.0 == [3])
    }

    /// The same over IPv6: the destination of a datagram to ::1 is ::1 with its interface.
    @Test func anIPv6DestinationIsReported() throws {
        let server = try Self.socket(.anyIPv6(port: 0), destinations: true)
        let client = try Self.socket(.loopbackIPv6(port: 0))
        _ = try [UInt8]([9]).withUnsafeBytes { try client.send($0, to: .loopbackIPv6(port: try server.localAddress().port)) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let r = try buffer.withUnsafeMutableBytes { try server.receiveWithDestination(into: $0) }
        let destination = try #require(r.destination)
        #expect(destination.addressBytes == SocketAddress.loopbackIPv6(port: 0).addressBytes && destination.scopeID != 0)
        let source = try #require(r.source)
        _ = try [UInt8]([10]).withUnsafeBytes { try server.send($0, to: source, from: destination) }
        #expect(Self.receive(client)?.0 == [10])
    }

    /// A source this host does not have (any more: a renumbered host) sends from the kernel's
    /// choice instead of failing, so the peer sees the new address; a socket without
    /// `receiveDestinations` reports no destination.
    @Test func aSourceThatIsNotOursFallsBackToTheKernelsChoice() throws {
        let server = try Self.socket(.anyIPv4(port: 0))
        let client = try Self.socket(.loopbackIPv4(port: 0))
        let notOurs = SocketAddress(ipv4: 192, 0, 2, 77, port: 0)
        _ = try [UInt8]([5]).withUnsafeBytes { try server.send($0, to: try client.localAddress(), from: notOurs) }
        let arrived = try #require(Self.receive(client))
        #expect(arrived.0 == [5] && arrived.1?.addressBytes == [127, 0, 0, 1])
        _ = try [UInt8]([1]).withUnsafeBytes { try client.send($0, to: .loopbackIPv4(port: try server.localAddress().port)) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let r = try buffer.withUnsafeMutableBytes { try server.receiveWithDestination(into: $0) }
        #expect(r.count == 1 && r.destination == nil)
    }

    /// The source the kernel's route picks: toward 127.0.0.2 it is 127.0.0.1 (what `ip route get`
    /// says on Linux), which is why an answer to a question sent to 127.0.0.2 must name its
    /// source; a dual-stack socket reports IPv4 sources as IPv4.
    @Test func theKernelsRouteSourceIsReported() throws {
        let v4 = try Self.socket(.anyIPv4(port: 0))
        #expect(v4.routeSource(toward: SocketAddress(ipv4: 127, 0, 0, 2, port: 9)) == SocketAddress.loopbackIPv4(port: 0))
        let dual = try Self.socket(.anyIPv6(port: 0), dualStack: true)
        #expect(dual.routeSource(toward: .loopbackIPv6(port: 9)) == SocketAddress.loopbackIPv6(port: 0))
        #expect(dual.routeSource(toward: .loopbackIPv4(port: 9)) == SocketAddress.loopbackIPv4(port: 0))
        let only6 = try Self.socket(.anyIPv6(port: 0))
        #expect(only6.routeSource(toward: .loopbackIPv4(port: 9)) == nil)
    }

    /// The kernel's v4-mapped form reads as the IPv4 address it stands for; the wildcard test.
    @Test func v4MappedAddressesReadAsIPv4() throws {
        var sin6 = sockaddr_in6()
        sin6.sin6_family = sa_family_t(AF_INET6)
        sin6.sin6_port = UInt16(5000).bigEndian
        withUnsafeMutableBytes(of: &sin6.sin6_addr) { b in
            for (i, v) in [0xFF, 0xFF, 192, 0, 2, 9].enumerated() { b[10 + i] = UInt8(v) }
        }
        let read = withUnsafePointer(to: &sin6) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress(sockaddr: $0) }
        }
        #expect(read == SocketAddress(ipv4: 192, 0, 2, 9, port: 5000))
        #expect(SocketAddress.anyIPv4(port: 1).isUnspecified && SocketAddress.anyIPv6(port: 1).isUnspecified)
        #expect(!SocketAddress.loopbackIPv4(port: 1).isUnspecified && !SocketAddress.loopbackIPv6(port: 1).isUnspecified)
    }
}
