import Dispatch
import Foundation
// The ICE layer on the media path: a call leg sends every packet through its `ICESendPath` (the
// selected pair, read under a lock per packet), against `sendto` on a bare socket to the same
// address. Both loops send the same 1200-byte datagram to a loopback socket nobody reads (the
// kernel drops them there), on one thread, measured in thread CPU time.
import MediaCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

enum ICEBenchSuite {
    static func threadCPUNs() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        let packets = max(2000, Int(200_000 * options.scale))
        let sink = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        defer { sink.close() }
        let destination = try sink.localAddress()
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        defer { socket.close() }
        let path = ICESendPath(.direct(destination, from: nil))
        let payload = [UInt8](repeating: 0x80, count: 1200)
        try payload.withUnsafeBytes { bytes in
            try compare(
                reporter, options, suite: "ice", case: "send 1200B via selected pair (direct)", metric: "packets/CPU-s",
                unit: "1/s", higherIsBetter: true, anchorName: "sendto on a bare socket"
            ) {
                let t0 = threadCPUNs()
                for _ in 0..<packets { path.send(bytes, on: socket) }
                return Double(packets) / (Double(threadCPUNs() - t0) / 1e9)
            } anchor: {
                let t0 = threadCPUNs()
                for _ in 0..<packets { _ = try? socket.send(bytes, to: destination) }
                return Double(packets) / (Double(threadCPUNs() - t0) / 1e9)
            }
        }
        // A leg bound to a wildcard address on a host where the kernel's route would pick another
        // source names the pair's local address on every packet (`sendmsg` with IP_PKTINFO),
        // against the kernel choosing it (`sendto`), same socket. Where the kernel's choice is the
        // pair's own address (one address per family), the agent does not name it.
        let wildcard = try UDPSocket(bindingTo: .anyIPv4(port: 0))
        defer { wildcard.close() }
        let pinned = ICESendPath(.direct(destination, from: .loopbackIPv4(port: 0)))
        let unpinned = ICESendPath(.direct(destination, from: nil))
        try payload.withUnsafeBytes { bytes in
            try compare(
                reporter, options, suite: "ice", case: "send 1200B from the pair's local address (wildcard socket)",
                metric: "packets/CPU-s", unit: "1/s", higherIsBetter: true, anchorName: "the kernel's choice of source"
            ) {
                let t0 = threadCPUNs()
                for _ in 0..<packets { pinned.send(bytes, on: wildcard) }
                return Double(packets) / (Double(threadCPUNs() - t0) / 1e9)
            } anchor: {
                let t0 = threadCPUNs()
                for _ in 0..<packets { unpinned.send(bytes, on: wildcard) }
                return Double(packets) / (Double(threadCPUNs() - t0) / 1e9)
            }
        }
        try webRTCSendPath(reporter, options, packets: packets, socket: socket, destination: destination)
        try TURNLatencyBench.run(reporter, options)
    }

    /// The per-packet cost of a `PeerConnection`'s media (the WebRTC path: the send stream's
    /// egress rewrites the negotiated payload type and protects in place with the keys DTLS gave,
    /// then the connection's sink sends on the selected pair) against the SDES path of a call leg
    /// (the same egress with keys from the start, then `sendto`). Both run the engine's real
    /// `RTPSendCore` egress (history included) on the same 1200-byte RTP packet with
    /// AES-CM-128-HMAC-SHA1-80, one thread, thread CPU time.
    static func webRTCSendPath(
        _ reporter: Reporter, _ options: BenchOptions, packets: Int, socket: UDPSocket, destination: SocketAddress
    ) throws {
        let material = SRTPKeyMaterial.random(for: .aesCM128HMACSHA1_80)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 16)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0x5A)
        var header = RTPHeader(payloadType: 96, ssrc: 0x1234_5678)
        let length = 1200 - SRTPSuite.aesCM128HMACSHA1_80.rtpOverhead
        func run(_ core: RTPSendCore) -> Double {
            let t0 = threadCPUNs()
            for i in 0..<packets {
                header.sequenceNumber = UInt16(truncatingIfNeeded: i)
                buffer.appending { header.marshal(into: &$0) }
                _ = core.egress(buffer, length: length, now: MonotonicTime(nanoseconds: UInt64(i) * 1_000_000), probeCluster: 0)
            }
            return Double(packets) / (Double(threadCPUNs() - t0) / 1e9)
        }
        func core(srtp: SRTPKeyMaterial?, late: LateSendProtection?, sink: PacketSink) throws -> RTPSendCore {
            try RTPSendCore(
                ssrc: 0x1234_5678, payloadType: 96, mtu: 1200, srtp: srtp, late: late, sink: sink, historyCapacity: 512)
        }
        try compare(
            reporter, options, suite: "ice", case: "1200B RTP via PeerConnection (WebRTC path)", metric: "packets/CPU-s",
            unit: "1/s", higherIsBetter: true, anchorName: "SDES path: same egress + sendto"
        ) {
            let sender = PeerConnectionRTPSender(socket: socket, protection: LateSendProtection())
            sender.activate(
                context: try SRTPContext(material: material, direction: .outbound), payloadType: 100,
                path: ICESendPath(.direct(destination, from: nil)))
            return run(try core(srtp: nil, late: sender.protection, sink: sender))
        } anchor: {
            run(try core(srtp: material, late: nil, sink: SendtoSink(socket: socket, destination: destination)))
        }
    }
}

/// The SDES call leg's last step: `sendto` per packet. Thread rule: one writer. Cost: a system call.
final class SendtoSink: PacketSink, @unchecked Sendable {
    let socket: UDPSocket
    let destination: SocketAddress
    init(socket: UDPSocket, destination: SocketAddress) {
        self.socket = socket
        self.destination = destination
    }
    func write(_ packet: RawSpan) { _ = try? socket.send(packet, to: destination) }
    func flush() {}
}

/// The added one-way latency of relaying through TURN: a peer echoes 200-byte datagrams with us
/// straight over loopback (the anchor), and through our allocation on a real coturn started here
/// on loopback (ChannelData both ways on our side, plain UDP from the relayed address on the
/// peer's). One-way = half the round trip, median of each repetition's samples.
enum TURNLatencyBench {
    final class Coturn {
        let process = Process()
        let directory: String
        let port: UInt16

        init() throws {
            directory = NSTemporaryDirectory() + "revue-bench-coturn-\(getpid())"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let probe = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
            port = try probe.localAddress().port
            probe.close()
            let relayBase = 40_000 + Int(port % 10_000)
            let config = """
                listening-ip=127.0.0.1
                listening-port=\(port)
                relay-ip=127.0.0.1
                min-port=\(relayBase)
                max-port=\(relayBase + 9)
                realm=bench.revue
                lt-cred-mech
                user=bench:bench
                fingerprint
                allow-loopback-peers
                cli-password=bench
                no-tls
                no-dtls
                no-cli
                no-tcp
                log-file=\(directory)/turn.log
                pidfile=\(directory)/turnserver.pid
                userdb=\(directory)/turndb
                """
            try config.write(toFile: directory + "/turnserver.conf", atomically: true, encoding: .utf8)
            process.executableURL = URL(fileURLWithPath: "/usr/bin/turnserver")
            process.arguments = ["-c", directory + "/turnserver.conf"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
        }

        func stop() {
            process.terminate()
            process.waitUntilExit()
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    /// Reads `socket` for up to `ms` milliseconds, handing each datagram to `body`; true when
    /// `done()` became true.
    static func pump(
        _ socket: UDPSocket, ms: Int, _ body: (UnsafeRawBufferPointer, SocketAddress) -> Void, until done: () -> Bool
    ) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 2048)
        let deadline = nowNs() + UInt64(ms) * 1_000_000
        while nowNs() < deadline {
            if done() { return true }
            guard (try? socket.waitUntilReadable(timeoutMilliseconds: 5)) == true else { continue }
            // One datagram per wake-up: the socket blocks.
            if let r = try? buffer.withUnsafeMutableBytes({ try socket.receive(into: $0) }), let source = r.source {
                buffer.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[0..<r.count]), source) }
            }
        }
        return done()
    }

    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/turnserver") else {
            throw BenchError(description: "coturn's turnserver is not installed (scripts/install-deps installs it)")
        }
        let coturn = try Coturn()
        defer { coturn.stop() }
        let ours = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let peer = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        defer { ours.close(); peer.close() }
        let server = ICEServer(kind: .turn, address: .loopbackIPv4(port: coturn.port), username: "bench", password: "bench")
        let client = TURNClient(server: server, socket: ours, queue: DispatchQueue(label: "bench.turn"))
        defer { client.close() }
        let peerAddress = try peer.localAddress()
        // Our side echoes what the peer sends, on the path it came: relayed data back through the
        // channel, direct data straight back.
        client.onPeerData = { _, payload in
            _ = client.sendChannelData(payload, channel: client.channel(for: peerAddress)?.number ?? 0)
        }
        @Sendable func serve(_ bytes: UnsafeRawBufferPointer, _ from: SocketAddress) {
            if client.handleDatagram(bytes, from: from) { return }
            _ = try? ours.send(bytes, to: from)
        }
        // coturn takes a moment to open its port: allocate until it answers.
        var relayed: SocketAddress?
        for _ in 0..<20 where relayed == nil {
            client.allocate()
            _ = pump(ours, ms: 500, serve) { if case .allocated = client.state { return true } else { return false } }
            if case .allocated(let r, _) = client.state { relayed = r }
        }
        guard let relayed else {
            throw BenchError(description: "no allocation from coturn on 127.0.0.1:\(coturn.port): \(client.state)")
        }
        _ = client.bindChannel(peerAddress)
        guard pump(ours, ms: 3000, serve, until: { client.channel(for: peerAddress)?.confirmed == true }) else {
            throw BenchError(description: "coturn did not confirm the channel")
        }
        // The echo runs on its own thread; the peer measures on this one.
        let stop = Atomic<Bool>(false)
        let echo = Thread {
            while !stop.load(ordering: .relaxed) { _ = pump(ours, ms: 50, serve) { false } }
        }
        echo.start()
        defer { stop.store(true, ordering: .relaxed); usleep(100_000) }
        let samples = max(200, Int(2000 * options.scale))
        func oneWayMedianMs(to destination: SocketAddress) throws -> Double {
            var payload = [UInt8](repeating: 0x80, count: 200)
            var buffer = [UInt8](repeating: 0, count: 2048)
            var rtts: [Double] = []
            for i in 0..<samples {
                payload[1] = UInt8(truncatingIfNeeded: i)
                let t0 = nowNs()
                _ = try payload.withUnsafeBytes { try peer.send($0, to: destination) }
                var got = false
                while !got, nowNs() - t0 < 200_000_000 {
                    guard (try? peer.waitUntilReadable(timeoutMilliseconds: 50)) == true else { continue }
                    if let r = try? buffer.withUnsafeMutableBytes({ try peer.receive(into: $0) }),
                        r.count == 200 && buffer[1] == payload[1]
                    {
                        got = true
                    }
                }
                if got { rtts.append(Double(nowNs() - t0) / 1e6) }
            }
            guard rtts.count > samples / 2 else {
                throw BenchError(description: "only \(rtts.count) of \(samples) echoes came back from \(destination)")
            }
            return Summary(rtts).median / 2
        }
        try compare(
            reporter, options, suite: "ice", case: "one-way latency through coturn (loopback, 200 B)", metric: "ms p50",
            unit: "ms", higherIsBetter: false, anchorName: "direct over loopback"
        ) {
            try oneWayMedianMs(to: relayed)
        } anchor: {
            try oneWayMedianMs(to: try ours.localAddress())
        }
    }
}
