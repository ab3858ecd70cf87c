#if canImport(Glibc)
    import Testing
    import Foundation
    import Glibc
    @testable import MediaCore

    /// The system layer under files and sockets: `Errno`, `FileDescriptor` and `TCPSocket` on
    /// loopback.
    @Suite struct SystemLayerTests {
        static func freshDirectory() -> String {
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("syslayer-\(UUID().uuidString)").path
            try! FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            return dir
        }

        static func contents(_ dir: String) -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted()
        }

        @Test func errnoReadsLikeTheSystem() {
            #expect(Errno(rawValue: ENOENT).description == String(cString: strerror(ENOENT)))
            #expect(Errno.wouldBlock.isWouldBlock)
            #expect(!Errno.interrupted.isWouldBlock)
        }

        @Test func retryingOnInterruptReportsTheError() {
            var calls = 0
            #expect(throws: Errno.noSuchFile) {
                try retryingOnInterrupt { () -> Int32 in
                    calls += 1
                    errno = calls < 3 ? EINTR : ENOENT
                    return -1
                }
            }
            #expect(calls == 3, "retried after each EINTR")
        }

        @Test func fileDescriptorOptionsRefuseWhatIsThere() throws {
            let dir = Self.freshDirectory()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let path = dir + "/f"
            let fd = try FileDescriptor.open(
                path, .readWrite, options: [.create, .exclusiveCreate, .closeOnExec], permissions: 0o600)
            try [UInt8]("hello world".utf8).withUnsafeBytes { try fd.writeAll($0) }
            try [UInt8]("W".utf8).withUnsafeBytes { try fd.writeAll($0, toAbsoluteOffset: 6) }
            var back = [UInt8](repeating: 0, count: 11)
            let n = try back.withUnsafeMutableBytes { try fd.read(fromAbsoluteOffset: 0, into: $0) }
            #expect(n == 11 && String(decoding: back, as: UTF8.self) == "hello World")
            try fd.sync()
            try fd.close()
            #expect(throws: Errno.fileExists) { try FileDescriptor.open(path, .writeOnly, options: [.create, .exclusiveCreate]) }
            #expect(symlink(path, dir + "/link") == 0)
            #expect(throws: Errno.tooManySymbolicLinks) {
                try FileDescriptor.open(dir + "/link", .readOnly, options: [.noFollow])
            }
        }

        @Test func tcpSocketsCarryBytesOnLoopback() throws {
            let listener = try TCPSocket.listen(on: .loopbackIPv4(port: 0))
            defer { listener.close() }
            let port = try listener.localAddress().port
            let client = try TCPSocket.connect(to: .loopbackIPv4(port: port), deadline: .now + .seconds(5))
            defer { client.close() }
            try listener.wait(for: .readable, deadline: .now + .seconds(5))
            let accepted = try #require(try listener.accept())
            defer { accepted.close() }
            let message = [UInt8](repeating: 7, count: 300_000)
            let reader = Thread {
                var got = 0
                var chunk = [UInt8](repeating: 0, count: 65_536)
                while got < message.count {
                    guard (try? accepted.wait(for: .readable, deadline: .now + .seconds(5))) != nil else { return }
                    let received = chunk.withUnsafeMutableBytes { raw in
                        Result { () throws(Errno) in try accepted.receive(into: raw) }
                    }
                    guard case .success(let count) = received else { return }
                    guard let n = count else { continue }
                    if n == 0 { return }
                    got += n
                }
                accepted.shutdown(.write)
            }
            reader.start()
            try message.withUnsafeBytes { try client.sendAll($0, deadline: .now + .seconds(5)) }
            client.shutdown(.write)
            // The reader saw everything and ended its side: the end of the stream.
            var byte = [UInt8](repeating: 0, count: 1)
            try client.wait(for: .readable, deadline: .now + .seconds(5))
            #expect(try byte.withUnsafeMutableBytes { try client.receive(into: $0) } == 0)
        }

        @Test func tcpConnectToAClosedPortIsRefused() throws {
            let listener = try TCPSocket.listen(on: .loopbackIPv4(port: 0))
            let port = try listener.localAddress().port
            listener.close()
            #expect(throws: Errno(rawValue: ECONNREFUSED)) {
                try TCPSocket.connect(to: .loopbackIPv4(port: port), deadline: .now + .seconds(5))
            }
        }

        @Test func tcpConnectCanBeCancelled() throws {
            // A non-routable address (TEST-NET-1): the connect never ends by itself where there is a
            // route; without one it fails at once.
            let start = MonotonicTime.now
            do throws(Errno) {
                _ = try TCPSocket.connect(to: SocketAddress(ipv4: 192, 0, 2, 1, port: 9), deadline: .now + .seconds(10)) {
                    MonotonicTime.now - start > .milliseconds(150)
                }
                Issue.record("connected to a non-routable address")
            } catch {
                #expect(error != .timedOut)
                #expect(MonotonicTime.now - start < .seconds(2))
            }
        }
    }
#endif
