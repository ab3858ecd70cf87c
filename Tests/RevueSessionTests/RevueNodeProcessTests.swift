import Foundation
import MediaCore
import RevueNodeProtocol
import Synchronization
import Testing

@testable import RevueSession

#if canImport(Glibc)
    import Glibc
#endif

final class LineBuffer: Sendable {
    let lines = Mutex<[String]>([])
    let closed = Atomic<Bool>(false)
}

/// One revue-node process: JSON commands in, JSON event lines out (collected by a reader thread).
/// A revue-node process that did not behave as a test needs.
struct NodeProcessError: Error { var message: String }

final class NodeProcess: @unchecked Sendable {
    /// The revue-node next to the test binary (a debug build), or `REVUE_NODE_BINARY` (for
    /// figures with a release build).
    static var binary: String? {
        if let path = ProcessInfo.processInfo.environment["REVUE_NODE_BINARY"], FileManager.default.isExecutableFile(atPath: path)
        {
            return path
        }
        let dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for candidate in [
            dir, dir.deletingLastPathComponent(),
            URL(fileURLWithPath: FileManager.default.currentDirectoryPath + "/.build/debug"),
        ] {
            let path = candidate.appendingPathComponent("revue-node").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let buffer = LineBuffer()

    /// Starts revue-node with `arguments`, inside network namespace `namespace` when given, with
    /// `environment` added to this process's.
    init(_ arguments: [String], namespace: String? = nil, environment: [String: String] = [:]) throws {
        if let namespace {
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
            process.arguments = ["netns", "exec", namespace, Self.binary!] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: Self.binary!)
            process.arguments = arguments
        }
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let handle = output.fileHandleForReading
        let lines = self.buffer
        Thread.detachNewThread {
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty {
                    lines.closed.store(true, ordering: .releasing)
                    break
                }
                buffer += chunk
                while let nl = buffer.firstIndex(of: 0x0A) {
                    let line = String(decoding: buffer[buffer.startIndex..<nl], as: UTF8.self)
                    buffer = Data(buffer[(nl + 1)...])
                    lines.lines.withLock { $0.append(line) }
                }
            }
        }
    }

    /// Every output line so far, as written.
    var lines: [String] { buffer.lines.withLock { $0 } }

    /// Every output line so far read as a `NodeEvent` (a line that does not read is left out;
    /// `expectEveryLineIsANodeEvent` checks there is none).
    var nodeEvents: [NodeEvent] { lines.compactMap { try? NodeEvent(line: $0) } }

    /// Every parsed output line so far.
    var events: [[String: Any]] {
        buffer.lines.withLock { $0 }.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    func send(_ command: [String: Any]) {
        let data = try! JSONSerialization.data(withJSONObject: command)
        input.fileHandleForWriting.write(data + Data("\n".utf8))
    }

    /// Waits for the `nth` (1-based) line matching `match`; nil after `timeout`.
    func wait(timeout: Double = 5, nth: Int = 1, _ match: @escaping ([String: Any]) -> Bool) async -> [String: Any]? {
        let deadline = MonotonicTime.now + .seconds(timeout)
        while MonotonicTime.now < deadline {
            let hits = events.filter(match)
            if hits.count >= nth { return hits[nth - 1] }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// Kills the process and waits until everything it wrote has been read.
    /// Starts a rendezvous node on loopback and waits for it: the process and its "host:port".
    static func rendezvous() async throws -> (NodeProcess, String) {
        let process = try NodeProcess(["--rendezvous", "--host", "127.0.0.1"])
        guard let ready = await process.wait(event("ready")), let port = ready["port"] as? Int else {
            process.kill()
            throw NodeProcessError(message: "the rendezvous node did not report ready")
        }
        return (process, "127.0.0.1:\(port)")
    }

    func kill() {
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        let deadline = MonotonicTime.now + .seconds(2)
        while !buffer.closed.load(ordering: .acquiring) && MonotonicTime.now < deadline { usleep(5_000) }
    }

    func quit() {
        send(["cmd": "quit"])
        let deadline = MonotonicTime.now + .seconds(3)
        while process.isRunning && MonotonicTime.now < deadline { usleep(10_000) }
        if process.isRunning { kill() }
    }
}

/// Checks that every line `process` wrote so far reads as a `NodeEvent` and is written back
/// byte for byte: what revue-node prints is what RevueNodeProtocol describes.
func expectEveryLineIsANodeEvent(_ process: NodeProcess, sourceLocation: SourceLocation = #_sourceLocation) {
    for line in process.lines {
        let event = try? NodeEvent(line: line)
        #expect(event?.line == line, "not a NodeEvent: \(line)", sourceLocation: sourceLocation)
    }
}

func event(_ name: String, _ fields: [String: String] = [:]) -> ([String: Any]) -> Bool {
    { e in e["event"] as? String == name && fields.allSatisfy { e[$0.key] as? String == $0.value } }
}

/// Two revue-node peers and a revue-node rendezvous node on loopback.
@Suite(.serialized, .enabled(if: NodeProcess.binary != nil, "revue-node is not built (swift build)"))
struct RevueNodeProcessTests {
    @Test func twoPeersBefriendAndExchangeMessagesThroughRendezvous() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-node-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (rendezvous, node) = try await NodeProcess.rendezvous()
        defer { rendezvous.kill() }
        let alice = try NodeProcess(["--data", dir + "/alice", "--host", "127.0.0.1", "--name", "Alice", "--rendezvous", node])
        var bob = try NodeProcess(["--data", dir + "/bob", "--host", "127.0.0.1", "--name", "Bob", "--rendezvous", node])
        defer { alice.kill(); bob.kill() }
        let aliceReady = try #require(await alice.wait(event("ready")))
        let bobReady = try #require(await bob.wait(event("ready")))
        let aliceId = aliceReady["revueId"] as! String, bobId = bobReady["revueId"] as! String

        alice.send(["cmd": "add-friend", "address": bobReady["address"] as! String, "message": "hello Bob"])
        #expect(await alice.wait(event("ok", ["cmd": "add-friend", "friendId": bobId])) != nil)
        #expect(await bob.wait(event("didReceiveFriendRequest", ["friendId": aliceId, "message": "hello Bob"])) != nil)
        bob.send(["cmd": "accept", "friendId": aliceId])
        #expect(await alice.wait(event("didUpdateName", ["friendId": bobId, "name": "Bob"])) != nil)
        #expect(await bob.wait(event("didUpdateName", ["friendId": aliceId, "name": "Alice"])) != nil)
        #expect(await alice.wait { $0["event"] as? String == "didUpdatePaths" && $0["isOnline"] as? Bool == true } != nil)

        for i in 0..<5 { alice.send(["cmd": "message", "friendId": bobId, "message": "m\(i)", "id": i]) }
        for i in 0..<5 {
            #expect(
                await alice.wait { $0["event"] as? String == "ok" && $0["cmd"] as? String == "message" && $0["id"] as? Int == i }
                    != nil)
        }
        var received = bob.events.filter(event("didReceiveMessage")).map { $0["message"] as! String }
        #expect(received == (0..<5).map { "m\($0)" })

        // Bob is killed and restarted with the same data directory.
        bob.kill()
        #expect(
            await alice.wait(timeout: 3) { $0["event"] as? String == "didUpdatePaths" && $0["isOnline"] as? Bool == false } != nil
        )
        // Online again means an online event after the offline one (the paths can change while
        // online too: the friends' link appearing is an event of its own).
        let online = { (e: [String: Any]) in e["event"] as? String == "didUpdatePaths" && e["isOnline"] as? Bool == true }
        let onlineBefore = alice.events.filter(online).count
        bob = try NodeProcess(["--data", dir + "/bob", "--host", "127.0.0.1", "--rendezvous", node])
        let again = try #require(await bob.wait(event("ready")))
        #expect(again["revueId"] as? String == bobId)
        #expect(await alice.wait(timeout: 5, nth: onlineBefore + 1, online) != nil)
        alice.send(["cmd": "message", "friendId": bobId, "message": "after restart", "id": 99])
        let sent = await alice.wait { $0["event"] as? String == "ok" && $0["id"] as? Int == 99 }
        if sent == nil {
            for p in [alice, bob] { p.send(["cmd": "counters", "id": "diag"]) }
            _ = await alice.wait { $0["id"] as? String == "diag" }
            _ = await bob.wait { $0["id"] as? String == "diag" }
            Issue.record(
                "the message after the restart got no receipt.\nalice: \(alice.events.suffix(12))\nbob: \(bob.events.suffix(12))")
        }
        #expect(await bob.wait(event("didReceiveMessage", ["message": "after restart"])) != nil)
        received = bob.events.filter(event("didReceiveMessage")).map { $0["message"] as! String }
        #expect(received == ["after restart"], "nothing from before the restart is delivered again")

        bob.send(["cmd": "list"])
        let list = try #require(await bob.wait(event("ok", ["cmd": "list"])))
        let friends = list["friends"] as? [[String: Any]] ?? []
        #expect(friends.count == 1 && friends.first?["name"] as? String == "Alice")
        alice.quit()
        bob.quit()
        for p in [rendezvous, alice, bob] { expectEveryLineIsANodeEvent(p) }
    }

    @Test func sigkillWhileSavingLosesNothingAcknowledged() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-node-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (rendezvous, node) = try await NodeProcess.rendezvous()
        defer { rendezvous.kill() }
        let alice = try NodeProcess(["--data", dir + "/alice", "--host", "127.0.0.1", "--rendezvous", node])
        var bob = try NodeProcess(["--data", dir + "/bob", "--host", "127.0.0.1", "--rendezvous", node])
        defer { alice.kill(); bob.kill() }
        let bobReady = try #require(await bob.wait(event("ready")))
        let aliceId = try #require(await alice.wait(event("ready")))["revueId"] as! String
        let bobId = bobReady["revueId"] as! String
        alice.send(["cmd": "add-friend", "address": bobReady["address"] as! String, "message": "x"])
        _ = await bob.wait(event("didReceiveFriendRequest"))
        bob.send(["cmd": "accept", "friendId": aliceId])
        _ = await alice.wait { $0["event"] as? String == "didUpdatePaths" && $0["isOnline"] as? Bool == true }

        // Every message makes Bob write his profile; kill him while that goes on.
        let count = 40
        for i in 0..<count { alice.send(["cmd": "message", "friendId": bobId, "message": "k\(i)", "id": i, "timeout": 30]) }
        _ = await bob.wait(timeout: 5, nth: 8, event("didReceiveMessage"))
        bob.kill()
        let firstRun = bob.events.filter(event("didReceiveMessage")).map { $0["message"] as! String }
        let ackedBeforeKill = Set(
            alice.events.filter { $0["event"] as? String == "ok" && $0["cmd"] as? String == "message" }.map { $0["id"] as! Int })
        bob = try NodeProcess(["--data", dir + "/bob", "--host", "127.0.0.1", "--rendezvous", node])
        #expect(await bob.wait(event("ready")) != nil, "the profile written during the kill still loads")
        for i in 0..<count {
            #expect(await alice.wait(timeout: 10) { $0["cmd"] as? String == "message" && $0["id"] as? Int == i } != nil)
        }
        let secondRun = bob.events.filter(event("didReceiveMessage")).map { $0["message"] as! String }
        let acked = alice.events.filter { $0["event"] as? String == "ok" && $0["cmd"] as? String == "message" }.map {
            $0["id"] as! Int
        }
        #expect(acked.count == count, "every message gets its receipt after the restart")
        let all = firstRun + secondRun
        for i in ackedBeforeKill { #expect(firstRun.contains("k\(i)"), "acknowledged k\(i) had been delivered") }
        for i in 0..<count { #expect(all.contains("k\(i)"), "k\(i) delivered") }
        // In order within each run; a duplicate is only possible for the one message in flight
        // between delivery and the save the kill interrupted.
        #expect(all.count <= count + 1, "\(all)")
        alice.quit()
        bob.quit()
    }
}

/// Runs a shell script; returns its exit status and output.
@discardableResult
func shell(_ script: String) -> (status: Int32, output: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/bin/sh")
    p.arguments = ["-c", script]
    let out = Pipe()
    p.standardOutput = out
    p.standardError = out
    do { try p.run() } catch { return (-1, "\(error)") }
    let data = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// Alice and Bob in two homes of a `NetworkLab` (no NAT, routed addresses), the rendezvous node
/// in its internet namespace, whose forward chain drops UDP between the two homes, so the only
/// path between them is the rendezvous node's relay. Needs root (ip netns, nft); skipped otherwise.
@Suite(.serialized, .enabled(if: networkLabAvailable, "needs root, ip and nft (not root: skipped)"))
struct RelayNamespaceTests {
    @Test func blockedDirectPathFallsBackToRelay() async throws {
        let lab = try await NetworkLab(.init(home1: .none, home2: .none, turn: false))
        defer { lab.teardown() }
        try lab.killDirectPath()
        let alice = try lab.peer(home: 1, name: "alice")
        let bob = try lab.peer(home: 2, name: "bob")
        defer { alice.kill(); bob.kill() }
        let aliceId = try #require(await alice.wait(event("ready")))["revueId"] as! String
        let bobReady = try #require(await bob.wait(event("ready")))
        let bobId = bobReady["revueId"] as! String

        alice.send(["cmd": "add-friend", "address": bobReady["address"] as! String, "message": "across namespaces"])
        #expect(
            await bob.wait(timeout: 8, event("didReceiveFriendRequest", ["friendId": aliceId, "message": "across namespaces"]))
                != nil)
        bob.send(["cmd": "accept", "friendId": aliceId])
        let online = await alice.wait(timeout: 8) {
            $0["event"] as? String == "didUpdatePaths" && $0["isOnline"] as? Bool == true
        }
        let paths = (online?["paths"] as? [[String: Any]]) ?? []
        #expect(paths.map { $0["kind"] as? String } == ["relayed"], "\(String(describing: online))")
        alice.send(["cmd": "message", "friendId": bobId, "message": "via relay", "id": 1])
        #expect(await alice.wait(timeout: 8) { $0["event"] as? String == "ok" && $0["id"] as? Int == 1 } != nil)
        #expect(await bob.wait(event("didReceiveMessage", ["friendId": aliceId, "message": "via relay"])) != nil)
        let dropped = lab.directPathDrops()
        #expect(dropped > 0, "the direct path was tried and blocked: \(lab.counters(in: lab.internet, table: "labobs"))")
    }
}
