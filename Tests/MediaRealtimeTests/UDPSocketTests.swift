import Glibc
import MediaCore
import Testing

/// Bytes of datagram `index` with `size` bytes: distinct per datagram and per position.
private func pattern(_ index: Int, size: Int) -> [UInt8] {
    (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index &* 7 &+ 1) }
}

/// Receives until `count` datagrams arrived or 5 s passed; returns copies and sources.
private func receiveAll(_ count: Int, on socket: UDPSocket, batch: UDPReceiveBatch) throws -> [([UInt8], SocketAddress?, Bool)] {
    var out: [([UInt8], SocketAddress?, Bool)] = []
    let deadline = MonotonicTime.now.nanoseconds + 5_000_000_000
    while out.count < count && MonotonicTime.now.nanoseconds < deadline {
        guard try socket.waitUntilReadable(timeoutMilliseconds: 100) else { continue }
        let n = try batch.receive(from: socket, wait: false)
        for i in 0..<n { out.append(([UInt8](batch[i].bytes), batch[i].source, batch[i].isTruncated)) }
    }
    return out
}

private func ipv6LoopbackAvailable() -> Bool {
    (try? UDPSocket(bindingTo: .loopbackIPv6(port: 0))) != nil
}

@Suite struct UDPSocketTests {
    @Test func sendmmsgBatchOf50ArrivesIntactThroughRecvmmsg() throws {
        var options = UDPSocket.Options()
        options.receiveBufferSize = 1 << 20
        let receiver = try UDPSocket(bindingTo: .loopbackIPv4(port: 0), options: options)
        let sender = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let destination = try receiver.localAddress()
        let sizes = [1, 1500] + (2..<50).map { ($0 * 97) % 1400 + 2 }
        let payloads = sizes.enumerated().map { pattern($0.offset, size: $0.element) }
        let batch = UDPSendBatch(capacity: 64)
        let result = withExtendedLifetime(payloads) { () -> UDPSendBatch.Result in
            for p in payloads { p.withUnsafeBytes { #expect(batch.append($0, to: destination)) } }
            return batch.send(on: sender)
        }
        #expect(result.sent == 50)
        #expect(result.dropped == 0)
        #expect(result.bytesSent == sizes.reduce(0, +))
        #expect(batch.count == 0)

        let got = try receiveAll(50, on: receiver, batch: UDPReceiveBatch(capacity: 64, bufferSize: 2048))
        #expect(got.count == 50)
        let senderAddress = try sender.localAddress()
        for (i, (bytes, source, truncated)) in got.enumerated() {
            #expect(bytes == payloads[i], "datagram \(i) differs (size \(bytes.count), sent \(sizes[i]))")
            #expect(source == senderAddress)
            #expect(!truncated)
        }
    }

    @Test func batchAppendRefusesBeyondCapacity() throws {
        let batch = UDPSendBatch(capacity: 2)
        let byte: [UInt8] = [1]
        byte.withUnsafeBytes { p in
            #expect(batch.append(p, to: .loopbackIPv4(port: 9)))
            #expect(batch.append(p, to: .loopbackIPv4(port: 9)))
            #expect(!batch.append(p, to: .loopbackIPv4(port: 9)))
        }
        #expect(batch.isFull)
        batch.removeAll()
        #expect(batch.count == 0)
    }

    @Test func truncatedDatagramIsFlaggedAndKeepsItsStart() throws {
        let receiver = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let sender = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let long = pattern(3, size: 300), short = pattern(4, size: 100)
        try long.withUnsafeBytes { _ = try sender.send($0, to: receiver.localAddress()) }
        try short.withUnsafeBytes { _ = try sender.send($0, to: receiver.localAddress()) }
        let got = try receiveAll(2, on: receiver, batch: UDPReceiveBatch(capacity: 4, bufferSize: 100))
        #expect(got.count == 2)
        #expect(got[0].2 == true)
        #expect(got[0].0 == Array(long[0..<100]))
        #expect(got[1].2 == false)
        #expect(got[1].0 == short)
    }

    @Test func singleDatagramSendAndReceiveOnConnectedSocket() throws {
        let a = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let b = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        try a.connect(to: b.localAddress())
        let payload = pattern(9, size: 1200)
        let sent = try payload.withUnsafeBytes { try a.send($0) }
        #expect(sent == 1200)
        #expect(try b.waitUntilReadable(timeoutMilliseconds: 5000))
        var buffer = [UInt8](repeating: 0, count: 2048)
        let (count, source, truncated) = try buffer.withUnsafeMutableBytes { try b.receive(into: $0) }
        #expect(count == 1200 && !truncated)
        #expect(Array(buffer[0..<count]) == payload)
        #expect(source == (try a.localAddress()))
    }

    /// The span forms a user of the engine sees: a datagram sent from a span arrives whole, one
    /// longer than the receiving span is clipped and flagged, the arrival address comes with
    /// `receiveWithDestination`, and a batch lends each datagram's bytes as a span.
    @Test func spanFormsSendReceiveAndLendDatagrams() throws {
        var options = UDPSocket.Options()
        options.receiveDestinations = true
        let receiver = try UDPSocket(bindingTo: .loopbackIPv4(port: 0), options: options)
        let sender = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let to = try receiver.localAddress(), from = try sender.localAddress()
        let long = pattern(5, size: 300), short = pattern(6, size: 80), third = pattern(7, size: 40)
        #expect(try sender.send(long.span.bytes, to: to) == 300)
        #expect(try sender.send(short.span.bytes, to: to, from: .loopbackIPv4(port: 0)) == 80)
        #expect(try sender.send(third.span.bytes, to: to, from: nil) == 40)

        var buffer = [UInt8](repeating: 0, count: 100)
        #expect(try receiver.waitUntilReadable(timeoutMilliseconds: 5000))
        var view = buffer.mutableSpan
        var bytes = view.mutableBytes
        let first = try receiver.receive(into: &bytes)
        #expect(first.count == 100 && first.truncated && first.source == from)
        #expect(buffer == Array(long[0..<100]))

        #expect(try receiver.waitUntilReadable(timeoutMilliseconds: 5000))
        var view2 = buffer.mutableSpan
        var bytes2 = view2.mutableBytes
        let second = try receiver.receiveWithDestination(into: &bytes2)
        #expect(second.count == 80 && !second.truncated && second.source == from)
        #expect(second.destination?.host == "127.0.0.1")
        #expect(Array(buffer[0..<80]) == short)

        let batch = UDPReceiveBatch(capacity: 4, bufferSize: 64)
        #expect(try receiver.waitUntilReadable(timeoutMilliseconds: 5000))
        #expect(try batch.receive(from: receiver, wait: false) == 1)
        let datagram = batch[0]
        #expect(datagram.byteCount == 40)
        let lent = datagram.withBytes { span in (0..<span.byteCount).map { span.unsafeLoad(fromByteOffset: $0, as: UInt8.self) } }
        #expect(lent == third)
    }

    @Test func receiveTimesOutWithWouldBlock() throws {
        let s = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        try s.setReceiveTimeout(nanoseconds: 20_000_000)
        var buffer = [UInt8](repeating: 0, count: 16)
        do {
            _ = try buffer.withUnsafeMutableBytes { try s.receive(into: $0) }
            Issue.record("receive returned without a datagram")
        } catch let error as SocketError {
            #expect(error.code == .wouldBlock)
            #expect(error.operation == "recvfrom")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func nonBlockingBatchReceiveReturnsZeroWhenEmpty() throws {
        var options = UDPSocket.Options()
        options.nonBlocking = true
        let s = try UDPSocket(bindingTo: .loopbackIPv4(port: 0), options: options)
        #expect(try UDPReceiveBatch(capacity: 8).receive(from: s, wait: true) == 0)
    }

    /// Datagrams read together carry the times they reached the socket (the kernel's stamps), not
    /// the time the batch was read: two sent 80 ms apart and read 80 ms later are stamped at
    /// their arrivals, in order, before the read.
    @Test func datagramsCarryTheirKernelArrivalTimes() throws {
        var options = UDPSocket.Options()
        options.nonBlocking = true
        let receiver = try UDPSocket(bindingTo: .loopbackIPv4(port: 0), options: options)
        let sender = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let batch = UDPReceiveBatch(capacity: 8)
        // Stamping is on from the socket's opening, before any batch reads it: the datagrams
        // queued before the first read are stamped too. (The kernel turns stamping on for the
        // whole host a moment after the first socket asks, a deferred switch; until then a
        // datagram gets the time it is read.)
        usleep(50_000)
        try expectKernelStamps(receiver, sender, batch)
        try expectKernelStamps(receiver, sender, batch)
    }

    private func expectKernelStamps(
        _ receiver: UDPSocket, _ sender: UDPSocket, _ batch: UDPReceiveBatch,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let to = try receiver.localAddress()
        let t0 = MonotonicTime.now.nanoseconds
        _ = try [UInt8](repeating: 1, count: 100).withUnsafeBytes { try sender.send($0, to: to) }
        usleep(80_000)
        let t1 = MonotonicTime.now.nanoseconds
        _ = try [UInt8](repeating: 2, count: 100).withUnsafeBytes { try sender.send($0, to: to) }
        usleep(80_000)
        let t2 = MonotonicTime.now.nanoseconds
        #expect(try batch.receive(from: receiver, wait: false) == 2, sourceLocation: sourceLocation)
        let a = batch[0].receivedAt.nanoseconds, b = batch[1].receivedAt.nanoseconds
        #expect(batch[0].bytes.first == 1 && batch[1].bytes.first == 2, sourceLocation: sourceLocation)
        #expect(a >= t0 && a < t1, "first stamped \(Int64(a) - Int64(t0)) ns after its send", sourceLocation: sourceLocation)
        #expect(b >= t1 && b < t2, "second stamped \(Int64(b) - Int64(t1)) ns after its send", sourceLocation: sourceLocation)
        #expect(batch.receivedAt.nanoseconds >= t2 && b < batch.receivedAt.nanoseconds, sourceLocation: sourceLocation)
    }

    @Test func bufferSizesAreApplied() throws {
        var options = UDPSocket.Options()
        options.receiveBufferSize = 65_536
        options.sendBufferSize = 65_536
        let s = try UDPSocket(family: .ipv4, options: options)
        // Linux doubles the request for its bookkeeping (socket(7)).
        #expect(try s.receiveBufferSize() == 131_072)
        #expect(try s.sendBufferSize() == 131_072)
    }

    @Test func bindingTwiceReportsAddressInUseWithAddress() throws {
        let a = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let taken = try a.localAddress()
        do {
            _ = try UDPSocket(bindingTo: taken)
            Issue.record("second bind succeeded")
        } catch {
            #expect(error.code == .addressInUse)
            #expect(error.operation == "bind")
            #expect(error.address == taken)
        }
    }

    @Test func closeMakesLaterCallsFail() throws {
        let s = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        s.close()
        s.close()
        #expect(throws: SocketError.self) { try s.localAddress() }
    }

    @Test(.enabled(if: ipv6LoopbackAvailable(), "::1 is not configured on this machine"))
    func ipv6LoopbackBatchRoundTrip() throws {
        let receiver = try UDPSocket(bindingTo: .loopbackIPv6(port: 0))
        let sender = try UDPSocket(bindingTo: .loopbackIPv6(port: 0))
        let payloads = (0..<10).map { pattern($0, size: 100 + $0) }
        let batch = UDPSendBatch(capacity: 16)
        let destination = try receiver.localAddress()
        #expect(destination.family == .ipv6)
        let result = withExtendedLifetime(payloads) { () -> UDPSendBatch.Result in
            for p in payloads { p.withUnsafeBytes { _ = batch.append($0, to: destination) } }
            return batch.send(on: sender)
        }
        #expect(result.sent == 10)
        let got = try receiveAll(10, on: receiver, batch: UDPReceiveBatch(capacity: 16))
        #expect(got.map(\.0) == payloads)
        #expect(got.allSatisfy { $0.1 == (try? sender.localAddress()) })
    }
}
