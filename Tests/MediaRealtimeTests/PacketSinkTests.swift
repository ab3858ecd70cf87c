import Glibc
import MediaCore
import MediaTools
import Testing

/// Receives up to `count` datagrams (or until 5 s pass) and returns copies in arrival order.
private func drain(_ count: Int, from socket: UDPSocket) throws -> [[UInt8]] {
    let batch = UDPReceiveBatch(capacity: 64, bufferSize: 2048)
    var out: [[UInt8]] = []
    let deadline = MonotonicTime.now.nanoseconds + 5_000_000_000
    while out.count < count && MonotonicTime.now.nanoseconds < deadline {
        guard try socket.waitUntilReadable(timeoutMilliseconds: 100) else { continue }
        let n = try batch.receive(from: socket, wait: false)
        for i in 0..<n { out.append([UInt8](batch[i].bytes)) }
    }
    return out
}

@Suite struct PacketSinkTests {
    @Test func memorySinkKeepsCopiesNotTheCallersBuffer() {
        let sink = MemoryPacketSink()
        var buffer: [UInt8] = [1, 2, 3]
        sink.write(buffer)
        buffer[0] = 99
        sink.write(buffer)
        sink.flush()
        #expect(sink.packets == [[1, 2, 3], [99, 2, 3]])
        #expect(sink.flushCount == 1)
        #expect(sink.flushedPacketCount == 2)
    }

    @Test func memorySinkDropsOldestWhenFullAtEveryWrapPosition() {
        for capacity in 1...5 {
            for written in 0...12 {
                let sink = MemoryPacketSink(capacity: capacity)
                for i in 0..<written { sink.write([UInt8(i)]) }
                let kept = max(0, written - capacity)..<written
                #expect(sink.packets == kept.map { [UInt8($0)] }, "capacity \(capacity), written \(written)")
                #expect(sink.droppedCount == max(0, written - capacity))
                #expect(sink.writtenCount == written)
            }
        }
    }

    @Test func memorySinkTakeEmptiesButKeepsCounters() {
        let sink = MemoryPacketSink(capacity: 2)
        sink.send([1], [2], [3])
        #expect(sink.takePackets() == [[2], [3]])
        #expect(sink.packets.isEmpty)
        sink.write([4])
        #expect(sink.packets == [[4]])
        #expect(sink.writtenCount == 4 && sink.droppedCount == 1 && sink.flushCount == 1)
    }

    @Test func memorySinkIsReadableWhileAnotherThreadWrites() async {
        let sink = MemoryPacketSink(capacity: 1000)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { for i in 0..<5000 { sink.write([UInt8(truncatingIfNeeded: i)]); if i % 10 == 9 { sink.flush() } } }
            group.addTask { for _ in 0..<200 { _ = sink.packets.count; _ = sink.droppedCount } }
        }
        #expect(sink.writtenCount == 5000)
        #expect(sink.packets.count == 1000)
        #expect(sink.droppedCount == 4000)
        #expect(sink.flushCount == 500)
    }

    @Test func udpSinkSendsFramesInBatchesIntactAndInOrder() throws {
        var options = UDPSocket.Options()
        options.receiveBufferSize = 1 << 20
        let receiver = try UDPSocket(bindingTo: .loopbackIPv4(port: 0), options: options)
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let sink = UDPPacketSink(socket: socket, destination: try receiver.localAddress(), batchCapacity: 8)
        // One scratch buffer reused for every packet, as a packetizer would.
        var scratch = [UInt8](repeating: 0, count: 1200)
        var expected: [[UInt8]] = []
        for frame in 0..<10 {
            for k in 0..<12 {
                let n = 1 + (frame * 12 + k) * 10
                for j in 0..<n { scratch[j] = UInt8(truncatingIfNeeded: frame &* 13 &+ k &* 7 &+ j) }
                scratch.withUnsafeBytes { sink.write(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                expected.append(Array(scratch[0..<n]))
            }
            sink.flush()
        }
        let got = try drain(120, from: receiver)
        #expect(got == expected)
        let stats = sink.statistics
        #expect(stats.packetsSent == 120)
        #expect(stats.bytesSent == expected.reduce(0) { $0 + $1.count })
        #expect(stats.packetsDropped == 0)
        // 12 packets per frame with batches of 8: one full batch and one flush per frame.
        #expect(stats.batchesSent == 20)
    }

    @Test func udpSinkCountsOversizePacketsAndKeepsGoing() throws {
        let receiver = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        try socket.connect(to: receiver.localAddress())
        let sink = UDPPacketSink(socket: socket, maxPacketSize: 100)
        sink.send([UInt8](repeating: 1, count: 101), [UInt8](repeating: 2, count: 100))
        #expect(try drain(1, from: receiver) == [[UInt8](repeating: 2, count: 100)])
        #expect(sink.statistics.oversizePackets == 1)
        #expect(sink.statistics.packetsSent == 1)
    }

    @Test func udpSinkCountsRefusedSendsAsDropsWithoutThrowing() throws {
        // A peer that went away: loopback answers with ICMP port unreachable, which the connected
        // socket reports as ECONNREFUSED on a later send.
        let gone = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let address = try gone.localAddress()
        gone.close()
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        try socket.connect(to: address)
        let sink = UDPPacketSink(socket: socket)
        // Stop at the first refusal: the closed port may soon be reused by another test's socket.
        var attempts = 0
        while attempts < 20 && sink.statistics.packetsDropped == 0 {
            sink.write([1, 2, 3])
            sink.flush()
            attempts += 1
            usleep(1000)
        }
        let stats = sink.statistics
        #expect(stats.packetsSent + stats.packetsDropped == attempts)
        #expect(stats.packetsDropped >= 1)
        #expect(stats.lastError == .connectionRefused)
    }
}
