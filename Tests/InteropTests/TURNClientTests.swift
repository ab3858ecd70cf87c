import Foundation
import MediaCore
import MediaTestSupport
import Synchronization
import Testing

// TURNClient against a real coturn on loopback: allocations over UDP, TCP and TLS (and the
// certificates it must refuse), data with a peer
// through the relay both ways (Send/Data indications and ChannelData), a wrong password, a forged
// response, and close deleting the allocation.
#if canImport(Glibc)
    import Glibc
#endif

/// Reads a UDP socket on its own thread and hands every datagram to `handle` (by default the
/// client's `handleDatagram`), until `stop()`.
final class TURNDatagramPump: @unchecked Sendable {
    private let socket: UDPSocket
    private let stopping = Atomic<Bool>(false)
    private let done = DispatchSemaphore(value: 0)
    /// Datagrams read so far.
    let count = Atomic<Int>(0)
    /// The first bytes of the last datagram (for failure messages).
    let last = Mutex<[UInt8]>([])

    init(_ socket: UDPSocket, handle: @escaping @Sendable ([UInt8], SocketAddress) -> Void) {
        self.socket = socket
        let thread = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 70_000)
            while !stopping.load(ordering: .relaxed) {
                guard (try? socket.waitUntilReadable(timeoutMilliseconds: 20)) == true,
                    let got = try? buffer.withUnsafeMutableBytes({ try socket.receive(into: $0) }), let source = got.source
                else { continue }
                count.add(1, ordering: .relaxed)
                last.withLock { $0 = Array(buffer[0..<min(got.count, 24)]) }
                handle(Array(buffer[0..<got.count]), source)
            }
            done.signal()
        }
        thread.start()
    }

    func stop() {
        stopping.store(true, ordering: .relaxed)
        done.wait()
    }
}

/// What a test records from a client's callbacks.
final class TURNRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var _states: [TURNClient.State] = []
    private var _data: [(SocketAddress, [UInt8])] = []

    var states: [TURNClient.State] { lock.withLock { _states } }
    var data: [(SocketAddress, [UInt8])] { lock.withLock { _data } }

    func attach(_ client: TURNClient) {
        client.onStateChange = { [self] s in lock.withLock { _states.append(s) } }
        client.onPeerData = { [self] peer, bytes in
            let copy = Array(bytes)
            lock.withLock { _data.append((peer, copy)) }
        }
    }
}

/// Polls `condition` every 10 ms for up to `seconds`; its last value.
func eventually(_ seconds: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        usleep(10_000)
    }
    return condition()
}

@Suite(.serialized) struct TURNClientTests {
    static func turnServer(
        _ coturn: CoturnServer, transport: ICEServer.Transport = .udp, password: String = CoturnServer.password,
        tls: ICEServer.TLSVerification = .init()
    ) -> ICEServer {
        ICEServer(
            kind: .turn, address: transport == .tls ? coturn.tlsAddress : coturn.address, username: CoturnServer.user,
            password: password, transport: transport, tls: tls)
    }

    /// Waits until `client` is allocated or failed (up to `seconds`); its state then.
    static func settled(_ client: TURNClient, seconds: Double = 10) -> TURNClient.State {
        _ = eventually(seconds) {
            switch client.state {
            case .allocated, .failed: return true
            default: return false
            }
        }
        return client.state
    }

    static func relayed(_ client: TURNClient) -> (relayed: SocketAddress, mapped: SocketAddress)? {
        if case .allocated(let r, let m) = client.state { return (r, m) }
        return nil
    }

    /// Receives one datagram on `peer` within `milliseconds`: its bytes and source.
    static func receive(_ peer: UDPSocket, milliseconds: Int = 3000) throws -> ([UInt8], SocketAddress)? {
        guard try peer.waitUntilReadable(timeoutMilliseconds: milliseconds) else { return nil }
        var buffer = [UInt8](repeating: 0, count: 70_000)
        let got = try buffer.withUnsafeMutableBytes { try peer.receive(into: $0) }
        return (Array(buffer[0..<got.count]), got.source!)
    }

    /// The whole life of one allocation with a peer: permission and indications both ways, a
    /// channel and ChannelData both ways (odd sizes, so TCP padding is exercised), then close.
    /// Over TLS the server presents a certificate from a test CA, which the client is given.
    func exchange(transport: ICEServer.Transport) throws {
        let certificates = transport == .tls ? try TURNTLSCertificates() : nil
        defer { certificates?.remove() }
        let coturn = try CoturnServer(tls: certificates.map { ($0.serverCertificate, $0.serverKey) })
        defer { coturn.stop() }
        try coturn.waitUntilReady()
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let peer = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let peerAddress = try peer.localAddress()
        let verification = ICEServer.TLSVerification(certificateAuthorityFile: certificates?.caFile)
        let client = TURNClient(
            server: Self.turnServer(coturn, transport: transport, tls: verification), socket: socket,
            queue: DispatchQueue(label: "turn.test"))
        let recorder = TURNRecorder()
        recorder.attach(client)
        let declined = Mutex<[[UInt8]]>([])
        let pump = TURNDatagramPump(socket) { bytes, from in
            if !bytes.withUnsafeBytes({ client.handleDatagram($0, from: from) }) { declined.withLock { $0.append(bytes) } }
        }
        defer { pump.stop() }

        client.allocate()
        #expect(eventually { Self.relayed(client) != nil }, "state \(client.state)")
        let (relayed, mapped) = try #require(Self.relayed(client))
        #expect(relayed.addressBytes == [127, 0, 0, 1] && relayed.port != coturn.address.port)
        if transport == .udp {
            #expect(mapped == (try socket.localAddress()), "no NAT on loopback: the server sees our socket")
        } else {
            #expect(mapped.addressBytes == [127, 0, 0, 1])
        }
        #expect(eventually { recorder.states.contains(.allocated(relayed: relayed, mapped: mapped)) })
        #expect(recorder.states.first == .allocating)

        // Send indications to the peer (the permission is installed on the way), Data back.
        client.createPermission(peerAddress)
        #expect(eventually { client.hasPermission(for: peerAddress) })
        let hello = Array("through coturn by Send indication".utf8)
        #expect(client.send(hello, to: peerAddress))
        let got = try #require(try Self.receive(peer))
        #expect(got.0 == hello)
        #expect(got.1 == relayed, "the peer sees the relayed address as the source")
        let back = (0..<333).map { UInt8(truncatingIfNeeded: $0 * 7) }
        _ = try back.withUnsafeBytes { try peer.send($0, to: relayed) }
        #expect(eventually { recorder.data.count == 1 })
        #expect(recorder.data.first?.0 == peerAddress)
        #expect(recorder.data.first?.1 == back)

        // A channel: ChannelData both ways once the server confirmed it.
        let channel = try #require(client.bindChannel(peerAddress))
        #expect(TURNChannelData.channelRange.contains(channel))
        #expect(client.bindChannel(peerAddress) == channel)
        #expect(eventually { client.channel(for: peerAddress)?.confirmed == true })
        let sentBefore = client.statistics.channelDataSent
        for size in [1, 2, 3, 4, 5, 1001, 1200] {
            let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ size) }
            let ok = payload.withUnsafeBytes { client.sendChannelData($0, channel: channel) }
            #expect(ok)
            let r = try #require(try Self.receive(peer), "ChannelData of \(size) bytes did not arrive")
            #expect(r.0 == payload && r.1 == relayed)
        }
        #expect(client.statistics.channelDataSent == sentBefore + 7)
        // The hot path allocates nothing: 20 sends of 1001 bytes (padded over TCP), all delivered.
        let media = [UInt8](repeating: 0xAB, count: 1001)
        let allocations = media.withUnsafeBytes { p in
            AllocationCounter.count { for _ in 0..<20 { _ = client.sendChannelData(p, channel: channel) } }
        }
        // Over TLS, OpenSSL 3's record encryption allocates twice per record (ours: nothing).
        #expect(allocations <= (transport == .tls ? 40 : 0), "\(transport): \(allocations) allocations in 20 ChannelData sends")
        print("TURN over \(transport): 20 ChannelData sends of 1001 bytes made \(allocations) heap allocations")
        for _ in 0..<20 { #expect(try Self.receive(peer)?.0 == media) }
        for size in [7, 998] {
            let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 ^ 0x5A) }
            _ = try payload.withUnsafeBytes { try peer.send($0, to: relayed) }
            #expect(eventually { recorder.data.last?.1 == payload }, "\(size) bytes from the peer")
            #expect(recorder.data.last?.0 == peerAddress)
        }
        #expect(recorder.data.count == 3)
        if transport == .udp {
            // Receiving ChannelData allocates nothing either: the bytes coturn sends for the
            // channel, handed in as the socket reader would, to a callback that only counts.
            let frame = TURNChannelData.encode(channel: channel, data: [UInt8](repeating: 7, count: 900), padded: false)
            let calls = Atomic<Int>(0)
            client.onPeerData = { _, payload in calls.add(payload.count == 900 ? 1 : 0, ordering: .relaxed) }
            let server = coturn.address
            let receiving = frame.withUnsafeBytes { f in
                AllocationCounter.count { for _ in 0..<20 { _ = client.handleDatagram(f, from: server) } }
            }
            #expect(receiving == 0)
            #expect(calls.load(ordering: .relaxed) == 20)
            recorder.attach(client)
        }
        // An unknown channel is refused.
        #expect([UInt8](repeating: 1, count: 8).withUnsafeBytes { client.sendChannelData($0, channel: 0x4FFF) } == false)
        // Another component's Binding transaction with the same server on the same socket: the
        // client leaves its answer to the caller.
        if transport == .udp {
            let binding = STUNMessage(method: .binding, class: .request)
            _ = try binding.encode(fingerprint: true).withUnsafeBytes { try socket.send($0, to: coturn.address) }
            #expect(
                eventually {
                    declined.withLock { $0.contains { (try? STUNMessage(parsing: $0))?.transactionID == binding.transactionID } }
                })
            #expect(client.statistics.unmatchedResponses == 1)
        }
        let stats = client.statistics
        #expect(stats.forgedResponses == 0 && stats.malformed == 0 && stats.timeouts == 0)
        #expect(stats.received == stats.receivedByKind)

        // Close: Refresh with lifetime 0. The peer's next datagram is not relayed any more.
        let accepted = client.statistics.responsesAccepted
        client.close()
        #expect(client.state == .closed)
        if transport == .udp {
            #expect(
                eventually { client.statistics.responsesAccepted > accepted && client.pendingTransactions == 0 },
                "the deallocation was answered")
        }
        // coturn removes a zero-lifetime allocation on its next one-second timer.
        usleep(1_500_000)
        let datagrams = pump.count.load(ordering: .relaxed)
        _ = try [UInt8]([1, 2, 3]).withUnsafeBytes { try peer.send($0, to: relayed) }
        usleep(700_000)
        #expect(pump.count.load(ordering: .relaxed) == datagrams, "\(pump.last.withLock { $0 })")
        #expect(recorder.data.count == 3)
        #expect(eventually { recorder.states.last == .closed })
        #expect(client.send([1], to: peerAddress) == false)
    }

    @Test func allocationOverUDPRelaysWithIndicationsAndChannels() throws {
        try exchange(transport: .udp)
    }

    @Test func allocationOverTCPRelaysWithIndicationsAndChannels() throws {
        try exchange(transport: .tcp)
    }

    /// TURN over TLS (`turns:`): coturn presents a certificate for 127.0.0.1 signed by a test CA
    /// made at test time; the client checks it against that CA before anything else is sent.
    @Test func allocationOverTLSRelaysWithIndicationsAndChannels() throws {
        try exchange(transport: .tls)
    }

    /// Every certificate the client must not trust fails the allocation with the reason, before a
    /// single TURN request is sent: a chain to another CA, a certificate for another name (checked
    /// as a DNS name and as the server's IP address), a fingerprint that is not the pinned one. The
    /// right pin alone (no CA) allocates.
    @Test func aWrongServerCertificateFailsTheTLSAllocation() throws {
        let certificates = try TURNTLSCertificates()
        defer { certificates.remove() }
        let coturn = try CoturnServer(tls: (certificates.serverCertificate, certificates.serverKey))
        defer { coturn.stop() }
        try coturn.waitUntilReady()
        let elsewhere = try CoturnServer(tls: (certificates.elsewhereCertificate, certificates.elsewhereKey))
        defer { elsewhere.stop() }
        try elsewhere.waitUntilReady()
        let rightPin = try certificates.sha256(of: certificates.serverCertificate)
        let wrongPin = try certificates.sha256(of: certificates.elsewhereCertificate)
        let cases: [(String, CoturnServer, ICEServer.TLSVerification, expected: String?)] = [
            (
                "another CA", coturn, .init(certificateAuthorityFile: certificates.otherCAFile),
                "unable to get local issuer certificate"
            ),
            (
                "another DNS name", coturn,
                .init(serverName: "elsewhere.revue.test", certificateAuthorityFile: certificates.caFile),
                "hostname mismatch"
            ),
            (
                "a certificate for another name", elsewhere, .init(certificateAuthorityFile: certificates.caFile),
                "IP address mismatch"
            ),
            ("a wrong pin", coturn, .init(sha256Fingerprint: wrongPin), "not the pinned one"),
            ("the right CA", coturn, .init(certificateAuthorityFile: certificates.caFile), nil),
            (
                "the right DNS name", coturn, .init(serverName: "turn.revue.test", certificateAuthorityFile: certificates.caFile),
                nil
            ),
            ("the right pin", coturn, .init(sha256Fingerprint: rightPin), nil),
        ]
        for (name, server, verification, expected) in cases {
            let client = TURNClient(
                server: Self.turnServer(server, transport: .tls, tls: verification),
                socket: try UDPSocket(bindingTo: .loopbackIPv4(port: 0)), queue: DispatchQueue(label: "turn.test"))
            client.allocate()
            let state = Self.settled(client)
            print("TURN over TLS with \(name): \(state)")
            if let expected {
                guard case .failed(let reason) = state else {
                    Issue.record("\(name): \(state), expected a refusal")
                    client.close()
                    continue
                }
                #expect(reason.contains("certificate was refused") && reason.contains(expected), "\(name): \(reason)")
                #expect(client.statistics.requestsSent == 0, "\(name): nothing is sent to a server we do not trust")
            } else {
                #expect(Self.relayed(client) != nil, "\(name): \(state)")
            }
            client.close()
        }
    }

    /// Permission, a Send indication, Data back and ChannelData both ways between `client`
    /// (allocated) and `peer`; true when every datagram arrived with the relayed address of
    /// `relayed`'s family as the peer's source.
    static func relays(_ client: TURNClient, recorder: TURNRecorder, to peer: UDPSocket, via relayed: SocketAddress) throws
        -> Bool
    {
        let peerAddress = try peer.localAddress()
        client.createPermission(peerAddress)
        guard eventually(5, { client.hasPermission(for: peerAddress) }) else { return false }
        let hello = Array("to \(peerAddress) by Send indication".utf8)
        guard client.send(hello, to: peerAddress), let got = try receive(peer), got.0 == hello, got.1 == relayed else {
            return false
        }
        let before = recorder.data.count
        _ = try [UInt8]([9, 8, 7]).withUnsafeBytes { try peer.send($0, to: relayed) }
        guard eventually(5, { recorder.data.count == before + 1 }), recorder.data.last?.0 == peerAddress else { return false }
        guard let channel = client.bindChannel(peerAddress),
            eventually(5, { client.channel(for: peerAddress)?.confirmed == true })
        else { return false }
        let payload = [UInt8](repeating: 0x66, count: 501)
        guard payload.withUnsafeBytes({ client.sendChannelData($0, channel: channel) }), let r = try receive(peer),
            r.0 == payload,
            r.1 == relayed
        else { return false }
        _ = try payload.withUnsafeBytes { try peer.send($0, to: relayed) }
        return eventually { recorder.data.count == before + 2 && recorder.data.last?.1 == payload }
    }

    /// REQUESTED-ADDRESS-FAMILY IPv6 (RFC 8656 §18.8) to coturn on ::1: the relayed address is
    /// IPv6 and data flows both ways with an IPv6 peer.
    @Test func anIPv6RelayedAddressCarriesDataToAnIPv6Peer() throws {
        let coturn = try CoturnServer(ip: "::1")
        defer { coturn.stop() }
        try coturn.waitUntilReady()
        let socket = try UDPSocket(bindingTo: .loopbackIPv6(port: 0))
        let client = TURNClient(server: Self.turnServer(coturn), socket: socket, queue: DispatchQueue(label: "turn.test"))
        client.relayFamilies = .ipv6
        let recorder = TURNRecorder()
        recorder.attach(client)
        let pump = TURNDatagramPump(socket) { bytes, from in _ = bytes.withUnsafeBytes { client.handleDatagram($0, from: from) } }
        defer { pump.stop() }
        client.allocate()
        let state = Self.settled(client)
        print("IPv6 relay from coturn on ::1: \(state)")
        let (relayed, _) = try #require(Self.relayed(client), "\(state)")
        #expect(relayed.family == .ipv6 && relayed.host == "::1", "\(relayed)")
        #expect(client.relayedAddresses == [relayed])
        let peer = try UDPSocket(bindingTo: .loopbackIPv6(port: 0))
        #expect(try Self.relays(client, recorder: recorder, to: peer, via: relayed))
        #expect(client.statistics.forgedResponses == 0 && client.statistics.addressFamiliesRefused == 0)
        client.close()
    }

    /// ADDITIONAL-ADDRESS-FAMILY (RFC 8656 §18.11) to coturn relaying from 127.0.0.1 and ::1: one
    /// allocation with an IPv4 and an IPv6 relayed address, each carrying data to a peer of its family.
    @Test func aDualAllocationRelaysToIPv4AndIPv6Peers() throws {
        let coturn = try CoturnServer(ip: "::1", relayIPs: ["127.0.0.1", "::1"])
        defer { coturn.stop() }
        try coturn.waitUntilReady()
        let socket = try UDPSocket(bindingTo: .loopbackIPv6(port: 0))
        let client = TURNClient(server: Self.turnServer(coturn), socket: socket, queue: DispatchQueue(label: "turn.test"))
        client.relayFamilies = .both
        let recorder = TURNRecorder()
        recorder.attach(client)
        let pump = TURNDatagramPump(socket) { bytes, from in _ = bytes.withUnsafeBytes { client.handleDatagram($0, from: from) } }
        defer { pump.stop() }
        client.allocate()
        let state = Self.settled(client)
        let all = client.relayedAddresses
        print(
            "dual allocation from coturn: \(state), relayed \(all), refused \(client.statistics.lastAddressFamilyRefusal ?? "none")"
        )
        let v4 = try #require(all.first { $0.family == .ipv4 }, "\(all) \(state)")
        let v6 = try #require(all.first { $0.family == .ipv6 }, "\(all) \(state)")
        #expect(all.count == 2 && Self.relayed(client)?.relayed == all[0])
        #expect(try Self.relays(client, recorder: recorder, to: try UDPSocket(bindingTo: .loopbackIPv4(port: 0)), via: v4))
        #expect(try Self.relays(client, recorder: recorder, to: try UDPSocket(bindingTo: .loopbackIPv6(port: 0)), via: v6))
        client.close()
    }

    /// coturn relaying from 127.0.0.1 only: asked for IPv6 alone it answers 440 and the allocation
    /// fails with that reason; asked for both, the allocation goes on with IPv4 and the refusal is
    /// counted.
    @Test func aServerWithoutIPv6RelaysRefusesTheFamilyCleanly() throws {
        let coturn = try CoturnServer()
        defer { coturn.stop() }
        try coturn.waitUntilReady()
        for families in [TURNClient.RelayFamilies.ipv6, .both] {
            let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
            let client = TURNClient(server: Self.turnServer(coturn), socket: socket, queue: DispatchQueue(label: "turn.test"))
            client.relayFamilies = families
            let pump = TURNDatagramPump(socket) { bytes, from in
                _ = bytes.withUnsafeBytes { client.handleDatagram($0, from: from) }
            }
            client.allocate()
            let state = Self.settled(client)
            let stats = client.statistics
            print(
                "\(families) from coturn without IPv6 relays: \(state), relayed \(client.relayedAddresses); refused: "
                    + (stats.lastAddressFamilyRefusal ?? "none"))
            if families == .ipv6 {
                guard case .failed(let reason) = state else {
                    Issue.record("\(state)")
                    pump.stop()
                    continue
                }
                #expect(reason.hasPrefix("440") && reason.contains("IPv6"), "\(reason)")
            } else {
                #expect(Self.relayed(client)?.relayed.family == .ipv4, "\(state)")
                #expect(client.relayedAddresses.count == 1 && stats.addressFamiliesRefused == 1)
            }
            #expect(stats.timeouts == 0 && stats.forgedResponses == 0)
            client.close()
            pump.stop()
        }
    }

    /// coturn is killed and started again on the same ports while we relay to an echoing peer:
    /// the allocation is gone, nothing tells the client. Sending into silence, it checks with a
    /// Refresh (`silenceBeforeProbe`, 4 s), learns the allocation is gone (437 or no answer), makes a
    /// new one, installs the permission and channel again, and the echoes come back, within 15 s
    /// of the restart. Over TCP the lost connection says it at once.
    func lostAllocationIsMadeAgain(transport: ICEServer.Transport) throws {
        let coturn = try CoturnServer()
        defer { coturn.stop() }
        try coturn.waitUntilReady()
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let peer = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let peerAddress = try peer.localAddress()
        let client = TURNClient(
            server: Self.turnServer(coturn, transport: transport), socket: socket, queue: DispatchQueue(label: "turn.test"))
        let echoes = Atomic<Int>(0)
        client.onPeerData = { _, _ in echoes.add(1, ordering: .relaxed) }
        let pump = TURNDatagramPump(socket) { bytes, from in _ = bytes.withUnsafeBytes { client.handleDatagram($0, from: from) } }
        defer { pump.stop() }
        let echo = TURNDatagramPump(peer) { bytes, from in _ = bytes.withUnsafeBytes { try? peer.send($0, to: from) } }
        defer { echo.stop() }
        let channel = try #require(client.bindChannel(peerAddress))
        client.allocate()
        #expect(eventually { client.channel(for: peerAddress)?.confirmed == true }, "\(client.state)")
        let first = try #require(Self.relayed(client))
        let stopping = Atomic<Bool>(false)
        let sender = Thread {
            let media = [UInt8](repeating: 0x42, count: 200)
            while !stopping.load(ordering: .relaxed) {
                _ = media.withUnsafeBytes { client.sendChannelData($0, channel: channel) }
                usleep(50_000)
            }
        }
        sender.start()
        defer { stopping.store(true, ordering: .relaxed) }
        #expect(eventually { echoes.load(ordering: .relaxed) >= 10 }, "echoes before the restart")

        let restartedAt = Date()
        try coturn.restart()
        try coturn.waitUntilReady()
        #expect(eventually(20) { client.statistics.allocationsLost == 1 }, "\(client.statistics)")
        let lostAfter = Date().timeIntervalSince(restartedAt)
        #expect(eventually(15) { client.channel(for: peerAddress)?.confirmed == true && Self.relayed(client) != nil })
        let before = echoes.load(ordering: .relaxed)
        #expect(eventually(15) { echoes.load(ordering: .relaxed) >= before + 10 }, "echoes through the new allocation")
        let flowingAfter = Date().timeIntervalSince(restartedAt)
        let second = try #require(Self.relayed(client))
        let stats = client.statistics
        print(
            "TURN over \(transport), coturn restarted: allocation found lost after \(String(format: "%.1f", lostAfter)) s "
                + "(\(stats.lastAllocationLoss ?? "?")), echoes again after \(String(format: "%.1f", flowingAfter)) s; "
                + "relayed \(first.relayed) then \(second.relayed); probes \(stats.livenessProbes), lost \(stats.allocationsLost)"
        )
        #expect(flowingAfter < 15)
        #expect(stats.allocationsLost == 1 && stats.forgedResponses == 0)
        if transport == .udp { #expect(stats.livenessProbes >= 1) }
        client.close()
    }

    @Test func aLostAllocationOverUDPIsMadeAgainAndDataFlows() throws {
        try lostAllocationIsMadeAgain(transport: .udp)
    }

    @Test func aLostAllocationOverTCPIsMadeAgainAndDataFlows() throws {
        try lostAllocationIsMadeAgain(transport: .tcp)
    }

    @Test func aWrongPasswordFailsWithTheReason() throws {
        let coturn = try CoturnServer()
        defer { coturn.stop() }
        try coturn.waitUntilReady()
        for transport in [ICEServer.Transport.udp, .tcp] {
            let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
            let client = TURNClient(
                server: Self.turnServer(coturn, transport: transport, password: "not-it"), socket: socket,
                queue: DispatchQueue(label: "turn.test"))
            let recorder = TURNRecorder()
            recorder.attach(client)
            let pump = TURNDatagramPump(socket) { bytes, from in
                _ = bytes.withUnsafeBytes { client.handleDatagram($0, from: from) }
            }
            defer { pump.stop() }
            client.allocate()
            #expect(
                eventually {
                    if case .failed = client.state { return true }
                    return false
                }, "\(transport): \(client.state)")
            guard case .failed(let reason) = client.state else { continue }
            #expect(reason.contains("401"), "\(reason)")
            #expect(eventually { recorder.states.last == .failed(reason) })
            #expect(
                client.bindChannel(SocketAddress.loopbackIPv4(port: 9)) != nil, "a channel can be reserved, but nothing is sent")
            #expect([UInt8](repeating: 0, count: 4).withUnsafeBytes { client.sendChannelData($0, channel: 0x4000) } == false)
            client.close()
        }
    }

    /// A response with the right transaction ID but a MAC under another key, one with a broken
    /// FINGERPRINT and one with an unknown transaction ID, each delivered just before coturn's
    /// real answer: dropped, counted, no effect; the real answer then allocates.
    @Test func forgedResponsesAreDroppedAndCounted() throws {
        let coturn = try CoturnServer()
        defer { coturn.stop() }
        try coturn.waitUntilReady()
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let client = TURNClient(server: Self.turnServer(coturn), socket: socket, queue: DispatchQueue(label: "turn.test"))
        let forgedSeen = Mutex<[String]>([])
        let pump = TURNDatagramPump(socket) { bytes, from in
            if let m = try? STUNMessage(parsing: bytes), m.method == .allocate, m.messageClass == .successResponse {
                let before = client.statistics
                // 1: same transaction, another relayed address, signed with a wrong key.
                var forged = STUNMessage(method: .allocate, class: .successResponse, transactionID: m.transactionID)
                forged.appendXORAddress(STUNMessage.AttributeType.xorRelayedAddress, SocketAddress(ipv4: 10, 9, 9, 9, port: 9999))
                forged.appendXORAddress(STUNMessage.AttributeType.xorMappedAddress, SocketAddress(ipv4: 10, 9, 9, 9, port: 9999))
                forged.appendUInt32(STUNMessage.AttributeType.lifetime, 600)
                let wrongKey = STUNMessage.longTermKey(username: CoturnServer.user, realm: CoturnServer.realm, password: "guess")
                let a = forged.encode(integrity: wrongKey, fingerprint: true)
                // 2: the real answer with one byte of its FINGERPRINT changed.
                var b = bytes
                b[b.count - 1] ^= 0x01
                // 3: the real answer with another transaction ID.
                var c = bytes
                c[19] ^= 0xFF
                // 4: the real answer unsigned (MESSAGE-INTEGRITY and FINGERPRINT removed).
                let d = STUNMessage(
                    method: .allocate, class: .successResponse, transactionID: m.transactionID,
                    attributes: m.attributes
                ).encode()
                var consumed: [Bool] = []
                for forgedBytes in [a, b, c, d] {
                    consumed.append(forgedBytes.withUnsafeBytes { client.handleDatagram($0, from: from) })
                }
                let after = client.statistics
                forgedSeen.withLock {
                    $0.append(
                        "consumed \(consumed) forged +\(after.forgedResponses - before.forgedResponses) unmatched +\(after.unmatchedResponses - before.unmatchedResponses) accepted +\(after.responsesAccepted - before.responsesAccepted) state \(client.state)"
                    )
                }
            }
            _ = bytes.withUnsafeBytes { client.handleDatagram($0, from: from) }
        }
        defer { pump.stop() }
        client.allocate()
        #expect(eventually { Self.relayed(client) != nil }, "\(client.state)")
        let seen = forgedSeen.withLock { $0 }
        #expect(seen == ["consumed [true, true, false, true] forged +3 unmatched +1 accepted +0 state allocating"])
        let (relayed, _) = try #require(Self.relayed(client))
        #expect(relayed.addressBytes == [127, 0, 0, 1], "the forged relayed address was never used")
        let stats = client.statistics
        #expect(stats.forgedResponses == 3 && stats.unmatchedResponses == 1)
        #expect(stats.received == stats.receivedByKind)
        client.close()
    }

    /// Short refresh intervals: permissions and channels are refreshed again and again and the
    /// channel keeps working.
    @Test func permissionsAndChannelsAreRefreshed() throws {
        let coturn = try CoturnServer()
        defer { coturn.stop() }
        try coturn.waitUntilReady()
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let peer = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let peerAddress = try peer.localAddress()
        let client = TURNClient(server: Self.turnServer(coturn), socket: socket, queue: DispatchQueue(label: "turn.test"))
        var timing = TURNClientTiming()
        timing.permissionRefresh = 0.3
        timing.channelRefresh = 0.3
        client.timing = timing
        let pump = TURNDatagramPump(socket) { bytes, from in
            _ = bytes.withUnsafeBytes { client.handleDatagram($0, from: from) }
        }
        defer { pump.stop() }
        // Before the allocation: queued, sent once it is made.
        let channel = try #require(client.bindChannel(peerAddress))
        client.allocate()
        #expect(eventually { client.channel(for: peerAddress)?.confirmed == true }, "\(client.state)")
        let first = client.statistics.responsesAccepted
        #expect(eventually { client.statistics.responsesAccepted >= first + 6 }, "refreshes answered")
        let (relayed, _) = try #require(Self.relayed(client))
        let payload = Array("still bound".utf8)
        #expect(payload.withUnsafeBytes { client.sendChannelData($0, channel: channel) })
        let got = try #require(try Self.receive(peer))
        #expect(got.0 == payload && got.1 == relayed)
        #expect(client.statistics.timeouts == 0 && client.statistics.forgedResponses == 0)
        client.close()
    }

    /// The allocation (coturn answers the first Allocate with the 4 s cap) is refreshed before it
    /// ends, and a permission refreshed every 0.5 s goes on working through nonces that go stale
    /// every 2 s (438, then the same request with the new nonce).
    @Test func theAllocationIsRefreshedThroughStaleNonces() throws {
        let coturn = try CoturnServer(extraConfiguration: ["max-allocate-lifetime=4", "stale-nonce=2"])
        defer { coturn.stop() }
        try coturn.waitUntilReady()
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let peer = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let peerAddress = try peer.localAddress()
        let client = TURNClient(server: Self.turnServer(coturn), socket: socket, queue: DispatchQueue(label: "turn.test"))
        var timing = TURNClientTiming()
        timing.permissionRefresh = 0.5
        client.timing = timing
        let pump = TURNDatagramPump(socket) { bytes, from in
            _ = bytes.withUnsafeBytes { client.handleDatagram($0, from: from) }
        }
        defer { pump.stop() }
        client.createPermission(peerAddress)
        client.allocate()
        #expect(eventually { Self.relayed(client) != nil }, "\(client.state)")
        #expect(
            eventually(8) { client.statistics.allocationRefreshes >= 1 && client.statistics.staleNonceRetries >= 2 },
            "\(client.statistics)")
        let (relayed, _) = try #require(Self.relayed(client))
        let payload = Array("after stale nonces".utf8)
        #expect(client.send(payload, to: peerAddress))
        let got = try #require(try Self.receive(peer))
        #expect(got.0 == payload && got.1 == relayed)
        #expect(client.statistics.timeouts == 0 && client.statistics.forgedResponses == 0)
        client.close()
    }

    /// Over TCP the allocation lives with the connection: when the server goes away, the client
    /// tries a new connection once, and fails with both reasons when that is refused.
    @Test func tcpConnectionLossFailsTheAllocation() throws {
        let coturn = try CoturnServer()
        defer { coturn.stop() }
        try coturn.waitUntilReady()
        let client = TURNClient(
            server: Self.turnServer(coturn, transport: .tcp), socket: try UDPSocket(bindingTo: .loopbackIPv4(port: 0)),
            queue: DispatchQueue(label: "turn.test"))
        var timing = TURNClientTiming()
        timing.reconnectWindow = 1.5
        client.timing = timing
        client.allocate()
        #expect(eventually { Self.relayed(client) != nil }, "\(client.state)")
        coturn.stop()
        #expect(
            eventually {
                if case .failed = client.state { return true }
                return false
            }, "\(client.state)")
        if case .failed(let reason) = client.state {
            #expect(reason.contains("TCP") && reason.contains("connecting again"), "\(reason)")
        }
        #expect(client.statistics.allocationsLost == 1)
        client.close()
        #expect(client.state == .closed)
    }
}
