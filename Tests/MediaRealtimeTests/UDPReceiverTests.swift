import Glibc
import MediaCore
import Synchronization
import Testing

/// What a test handler saw: copies of the datagrams with their metadata.
private final class Collected: Sendable {
    struct Entry {
        var bytes: [UInt8]
        var source: SocketAddress?
        var receivedAt: UInt64
        var truncated: Bool
        var onReceiverThread: Bool
    }
    let entries = Mutex<[Entry]>([])
    let testThread = pthread_self()

    func handle(_ d: UDPDatagram) {
        let entry = Entry(
            bytes: [UInt8](d.bytes), source: d.source, receivedAt: d.receivedAt.nanoseconds,
            truncated: d.isTruncated, onReceiverThread: pthread_equal(pthread_self(), testThread) == 0)
        entries.withLock { $0.append(entry) }
    }

    var count: Int { entries.withLock { $0.count } }

    /// Datagrams from `source` only (other tests' traffic may reach a reused ephemeral port).
    func count(from source: SocketAddress) -> Int { entries.withLock { $0.filter { $0.source == source }.count } }

    /// Waits up to 5 s for `n` datagrams.
    func wait(for n: Int) -> Bool {
        let deadline = MonotonicTime.now.nanoseconds + 5_000_000_000
        while count < n && MonotonicTime.now.nanoseconds < deadline { usleep(2000) }
        return count >= n
    }
}

@Suite struct UDPReceiverTests {
    @Test func handsEveryDatagramToTheHandlerOnItsOwnThread() throws {
        var options = UDPSocket.Options()
        options.receiveBufferSize = 1 << 20
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0), options: options)
        let collected = Collected()
        let receiver = UDPReceiver(socket: socket) { collected.handle($0) }
        receiver.start()
        #expect(receiver.isRunning)
        let sender = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let destination = try socket.localAddress()
        let before = MonotonicTime.now.nanoseconds
        var sent: [[UInt8]] = []
        for i in 0..<200 {
            let packet = (0..<(1 + i * 7)).map { UInt8(truncatingIfNeeded: $0 ^ i) }
            _ = try packet.withUnsafeBytes { try sender.send($0, to: destination) }
            sent.append(packet)
        }
        #expect(collected.wait(for: 200))
        receiver.stop()
        let after = MonotonicTime.now.nanoseconds
        let entries = collected.entries.withLock { $0 }
        #expect(entries.map(\.bytes) == sent)
        let senderAddress = try sender.localAddress()
        #expect(entries.allSatisfy { $0.source == senderAddress && !$0.truncated && $0.onReceiverThread })
        #expect(entries.allSatisfy { $0.receivedAt >= before && $0.receivedAt <= after })
        #expect(zip(entries, entries.dropFirst()).allSatisfy { $0.receivedAt <= $1.receivedAt })
        let stats = receiver.statistics
        #expect(stats.datagrams == 200)
        #expect(stats.bytes == sent.reduce(0) { $0 + $1.count })
        #expect(stats.truncated == 0 && stats.errors == 0)
        #expect(stats.batches >= 1 && stats.batches <= 200)
    }

    @Test func countsTruncatedDatagrams() throws {
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let collected = Collected()
        let receiver = UDPReceiver(socket: socket, batchCapacity: 4, bufferSize: 64) { collected.handle($0) }
        receiver.start()
        let sender = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        for size in [64, 65, 1500, 10] {
            _ = try [UInt8](repeating: 7, count: size).withUnsafeBytes { try sender.send($0, to: socket.localAddress()) }
        }
        #expect(collected.wait(for: 4))
        receiver.stop()
        let entries = collected.entries.withLock { $0 }
        #expect(entries.map(\.truncated) == [false, true, true, false])
        #expect(entries.map(\.bytes.count) == [64, 64, 64, 10])
        #expect(receiver.statistics.truncated == 2)
        #expect(receiver.statistics.datagrams == 4)
    }

    @Test func stopIsPromptJoinsAndEndsDelivery() throws {
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let collected = Collected()
        let receiver = UDPReceiver(socket: socket) { collected.handle($0) }
        receiver.start()
        usleep(30_000)
        let start = MonotonicTime.now.nanoseconds
        receiver.stop()
        let elapsed = MonotonicTime.now.nanoseconds - start
        #expect(elapsed < 1_000_000_000, "stop took \(elapsed / 1_000_000) ms")
        #expect(!receiver.isRunning)
        // After stop has joined, nothing reaches the handler any more.
        let sender = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        _ = try [UInt8]([1]).withUnsafeBytes { try sender.send($0, to: socket.localAddress()) }
        usleep(100_000)
        #expect(collected.count(from: try sender.localAddress()) == 0)
        receiver.stop()
        // The datagram is still queued in the socket for whoever reads next.
        let restarted = UDPReceiver(socket: socket) { collected.handle($0) }
        restarted.start()
        #expect(collected.wait(for: 1))
        restarted.stop()
    }

    @Test func releasingARunningReceiverStopsItsThread() throws {
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let collected = Collected()
        do {
            let receiver = UDPReceiver(socket: socket) { collected.handle($0) }
            receiver.start()
        }
        let sender = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        _ = try [UInt8]([1]).withUnsafeBytes { try sender.send($0, to: socket.localAddress()) }
        usleep(100_000)
        #expect(collected.count(from: try sender.localAddress()) == 0)
    }
}
