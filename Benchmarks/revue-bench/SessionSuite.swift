// Session layer on loopback, two `Revue` instances in this process (befriended through an
// in-process rendezvous node): call setup time (sendInvitation until both sides have
// participantDidConnect, the invited side accepting from its didReceiveInvitation delegate) and
// friend message round trips per second (sendMessage awaiting the receipt, one at a time and with
// several in flight). The anchor is the floor under both: a raw UDP ping-pong on loopback against
// an echo thread, in the same run, interleaved (a call setup needs at least two one-way trips, a
// message with its receipt one round trip).
//
// The session API is @MainActor and its events arrive through the main dispatch queue, so this
// suite runs on the main thread (top-level code) and pumps the main run loop while it waits.
import Foundation
import RevueSession

#if canImport(Glibc)
    import Glibc
#endif

enum SessionSuite {
    static func run(_ reporter: Reporter, _ options: BenchOptions) throws {
        guard Thread.isMainThread else { throw BenchError(description: "the session suite must run on the main thread") }
        // The reporter is only ever used on this (the main) thread.
        nonisolated(unsafe) let mainReporter = reporter
        try MainActor.assumeIsolated { try runOnMain(mainReporter, options) }
    }

    @MainActor
    private static func runOnMain(_ reporter: Reporter, _ options: BenchOptions) throws {
        let node: RendezvousNode
        do { node = try RendezvousNode(host: "127.0.0.1") } catch { throw BenchError(description: "rendezvous node: \(error)") }
        defer { node.stop() }
        let a = try BenchPeer(node: node), b = try BenchPeer(node: node)
        defer { a.remove(); b.remove() }
        b.autoAccept = true
        try befriend(a, b)
        let udp = try UDPPingPong()
        defer { udp.stop() }

        // Call setup: a few calls per repetition, each hung up (and settled) before the next.
        let calls = max(3, Int(10 * options.scale))
        var setupTimes: [Double] = []
        try compare(
            reporter, options, suite: "session", case: "call setup (invite→connected both)", metric: "median ms", unit: "ms",
            higherIsBetter: false, anchorName: "UDP ping-pong RTT"
        ) {
            var times: [Double] = []
            for _ in 0..<calls { times.append(try callSetup(a, b)) }
            setupTimes += times
            return Summary(times).median
        } anchor: {
            udp.roundTrips(200).median / 1e6
        }
        record(
            reporter, options, suite: "session", case: "call setup p99 (all calls)", metric: "p99 ms", unit: "ms",
            higherIsBetter: false, values: [Summary(setupTimes).p99])

        // Messages: round trips per second, sequential and with `window` in flight.
        let messages = max(50, Int(400 * options.scale))
        for window in [1, 8] {
            try compare(
                reporter, options, suite: "session", case: "friend message round trips, \(window) in flight", metric: "msg/s",
                unit: "1/s",
                higherIsBetter: true, anchorName: window == 1 ? "UDP ping-pong" : "UDP ping-pong, \(window) in flight"
            ) {
                try messageRate(from: a, to: b, count: messages, window: window)
            } anchor: {
                udp.rate(count: messages * 10, window: window)
            }
        }
        // Where a message's time goes: the receiver acknowledges only once the message reached the
        // App and its stream position is on disk (an atomic profile write: temp file, fsync,
        // rename, fsync of the directory), one message at a time. That write, alone, on the same
        // disk, is reported next to the per-message time (no ratio: fsync time depends on what
        // else the disk is doing, so it explains rather than bounds).
        let profileSize =
            (try? FileManager.default.attributesOfItem(atPath: b.directory + "/profile.json")[.size] as? Int) ?? 1024
        let saves = max(20, Int(100 * options.scale))
        var perMessage: [Double] = [], perSave: [Double] = []
        for i in 0..<(options.warmup + options.repetitions) {
            let m = 1000 / (try messageRate(from: a, to: b, count: saves, window: 1))
            let w = try durableSaveMs(directory: a.directory, size: profileSize, count: saves)
            if i >= options.warmup { perMessage.append(m); perSave.append(w) }
        }
        record(
            reporter, options, suite: "session", case: "friend message round trip, 1 in flight", metric: "ms/msg", unit: "ms",
            higherIsBetter: false, values: perMessage)
        record(
            reporter, options, suite: "session", case: "atomic \(profileSize) B file save (2 fsync)", metric: "ms", unit: "ms",
            higherIsBetter: false, values: perSave)
    }

    /// Median milliseconds of the write the receiver does before each receipt (ProfileStore.write).
    private static func durableSaveMs(directory: String, size: Int, count: Int) throws -> Double {
        let bytes = [UInt8](repeating: 0x7B, count: size)
        let path = directory + "/bench-save.json", tmp = path + ".tmp"
        defer { unlink(path) }
        var times: [Double] = []
        for _ in 0..<count {
            let t0 = nowNs()
            let fd = open(tmp, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw BenchError(description: "open \(tmp) failed") }
            _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            _ = fchmod(fd, 0o600)
            fsync(fd)
            close(fd)
            rename(tmp, path)
            let dfd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            if dfd >= 0 { fsync(dfd); close(dfd) }
            times.append(Double(nowNs() - t0) / 1e6)
        }
        return Summary(times).median
    }

    // MARK: Session side

    /// Seconds from sendInvitation until both rooms report the other participant connected.
    @MainActor
    private static func callSetup(_ a: BenchPeer, _ b: BenchPeer) throws -> Double {
        a.connectedAt = nil; b.connectedAt = nil
        let t0 = nowNs()
        do { try a.revue.friends.sendInvitation(friendId: b.id, message: "bench") } catch {
            throw BenchError(description: "sendInvitation: \(error)")
        }
        try pump("call connected", timeout: 10) { a.connectedAt != nil && b.connectedAt != nil }
        let ms = Double(max(a.connectedAt!, b.connectedAt!) - t0) / 1e6
        a.revue.room.remoteParticipants[b.id]?.disconnect()
        try pump("call ended", timeout: 10) {
            a.revue.room.remoteParticipants.isEmpty && b.revue.room.remoteParticipants.isEmpty && a.ended && b.ended
        }
        a.ended = false; b.ended = false
        return ms
    }

    /// Messages per second, `count` messages, at most `window` awaiting their receipt at once.
    @MainActor
    private static func messageRate(from a: BenchPeer, to b: BenchPeer, count: Int, window: Int) throws -> Double {
        let state = MessageRun(total: count)
        let t0 = nowNs()
        for _ in 0..<window {
            Task { @MainActor in
                while state.started < state.total, state.failure == nil {
                    state.started += 1
                    do { _ = try await a.revue.friends.sendMessage(friendId: b.id, message: "bench \(state.started)") } catch {
                        state.failure = "\(error)"
                    }
                    state.done += 1
                }
            }
        }
        try pump("messages", timeout: 60) { state.done >= state.total || state.failure != nil }
        if let f = state.failure { throw BenchError(description: "sendMessage: \(f)") }
        return Double(count) / (Double(nowNs() - t0) / 1e9)
    }

    @MainActor
    private final class MessageRun {
        let total: Int
        var started = 0, done = 0
        var failure: String?
        init(total: Int) { self.total = total }
    }

    /// a requests, b accepts; returns when both see the other online.
    @MainActor
    private static func befriend(_ a: BenchPeer, _ b: BenchPeer) throws {
        do { _ = try a.revue.friends.addFriend(address: b.revue.revueAddress, message: "bench") } catch {
            throw BenchError(description: "addFriend: \(error)")
        }
        try pump("friend request", timeout: 15) { b.requests.contains(a.id) }
        do { _ = try b.revue.friends.addFriendNorequest(friendId: a.id) } catch {
            throw BenchError(description: "addFriendNorequest: \(error)")
        }
        try pump("friends online", timeout: 15) {
            a.revue.friends.getFriendPaths(friendId: b.id).isOnline && b.revue.friends.getFriendPaths(friendId: a.id).isOnline
        }
    }

    /// Runs the main run loop (which drains the main dispatch queue, where session events arrive)
    /// until `condition` holds.
    @MainActor
    private static func pump(_ what: String, timeout: Double, _ condition: () -> Bool) throws {
        let deadline = nowNs() + UInt64(timeout * 1e9)
        while !condition() {
            if nowNs() > deadline { throw BenchError(description: "timed out waiting for \(what)") }
            _ = RunLoop.main.run(mode: .default, before: Date(timeIntervalSinceNow: 0.01))
        }
    }

    /// A Revue instance on loopback with a temporary data directory.
    @MainActor
    private final class BenchPeer: RevueDelegate, RoomDelegate {
        let revue = Revue()
        let directory: String
        let id: String
        var autoAccept = false
        var requests: Set<String> = []
        var connectedAt: UInt64?
        var ended = false

        init(node: RendezvousNode) throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("revue-bench-\(UUID().uuidString)").path
            var c = RevueConfiguration(dataDirectory: directory)
            c.bindHost = "127.0.0.1"
            c.rendezvousNodes = ["127.0.0.1:\(node.port)"]
            c.timeouts.rendezvousInterval = 0.2
            c.timeouts.handshakeRetryInterval = 0.2
            do { try revue.initialize(c) } catch { throw BenchError(description: "Revue.initialize: \(error)") }
            id = revue.revueId
            revue.delegates.add(delegate: self)
            revue.room.delegates.add(delegate: self)
        }

        func remove() {
            revue.destroy()
            try? FileManager.default.removeItem(atPath: directory)
        }

        func revue(_ revue: Revue, didReceiveFriendRequest friendId: String, message: String) { requests.insert(friendId) }
        func revue(_ revue: Revue, friend friendId: String, didReceiveInvitation message: String?) {
            if autoAccept { try? revue.friends.acceptInvitation(friendId: friendId) }
        }
        func room(_ room: Room, participantDidConnect participant: RemoteParticipant) { connectedAt = nowNs() }
        func room(_ room: Room, participantDidDisconnect participant: RemoteParticipant) { ended = true }
    }

    // MARK: Anchor: raw UDP ping-pong on loopback

    /// Two UDP sockets on 127.0.0.1; an echo thread answers every datagram on one of them.
    final class UDPPingPong: @unchecked Sendable {
        private let client: Int32, server: Int32
        private var serverAddress = sockaddr_in()
        private var thread: Thread?

        init() throws {
            client = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            server = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            guard client >= 0, server >= 0 else { throw BenchError(description: "socket() failed") }
            for fd in [client, server] {
                var addr = sockaddr_in()
                addr.sin_family = sa_family_t(AF_INET)
                addr.sin_addr.s_addr = inet_addr("127.0.0.1")
                let rc = withUnsafePointer(to: &addr) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
                guard rc == 0 else { throw BenchError(description: "bind() failed") }
            }
            var len = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &serverAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(server, $0, &len) }
            }
            let echoFd = self.server
            let t = Thread {
                var buf = [UInt8](repeating: 0, count: 1500)
                var from = sockaddr_storage()
                while true {
                    var fromLen = socklen_t(MemoryLayout<sockaddr_storage>.size)
                    let n = withUnsafeMutablePointer(to: &from) { p in
                        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(echoFd, &buf, buf.count, 0, $0, &fromLen) }
                    }
                    if n <= 0 { return }
                    if n == 1 && buf[0] == 0xFF { return }
                    _ = withUnsafePointer(to: &from) { p in
                        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(echoFd, buf, n, 0, $0, fromLen) }
                    }
                }
            }
            t.start()
            thread = t
        }

        private func send(_ bytes: [UInt8]) {
            _ = withUnsafePointer(to: &serverAddress) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(client, bytes, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }

        private func receive(_ buf: inout [UInt8]) { _ = recv(client, &buf, buf.count, 0) }

        /// Round-trip times in nanoseconds of `count` sequential 64-byte pings.
        func roundTrips(_ count: Int) -> Summary {
            let ping = [UInt8](repeating: 0x42, count: 64)
            var buf = [UInt8](repeating: 0, count: 1500)
            var times: [Double] = []
            for _ in 0..<count {
                let t0 = nowNs()
                send(ping)
                receive(&buf)
                times.append(Double(nowNs() - t0))
            }
            return Summary(times)
        }

        /// Round trips per second with `window` pings in flight.
        func rate(count: Int, window: Int) -> Double {
            let ping = [UInt8](repeating: 0x42, count: 64)
            var buf = [UInt8](repeating: 0, count: 1500)
            let t0 = nowNs()
            var sent = 0, received = 0
            while sent < min(window, count) { send(ping); sent += 1 }
            while received < count {
                receive(&buf); received += 1
                if sent < count { send(ping); sent += 1 }
            }
            return Double(count) / (Double(nowNs() - t0) / 1e9)
        }

        func stop() {
            send([0xFF])
            close(client)
        }

        deinit { close(server) }
    }
}
