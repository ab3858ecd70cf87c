// `revue-soak kill-test`: two revue-node peers in a call with media; one is SIGKILLed mid-call
// (the other must see it leave within the keepalive timeout), restarted on the same data
// directory (identity and friends intact), and SIGKILLed many times in the middle of profile writes.
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One revue-node process: JSON commands on stdin, event lines from stdout collected by a thread.
final class Node: @unchecked Sendable {
    let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let lines = Mutex<[(t: Double, text: String)]>([])
    private let closed = Atomic<Bool>(false)

    init(_ binary: String, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let handle = output.fileHandleForReading
        Thread.detachNewThread { [self] in
            var buffer = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { closed.store(true, ordering: .releasing); break }
                buffer += chunk
                while let nl = buffer.firstIndex(of: 0x0A) {
                    let line = Data(buffer[buffer.startIndex..<nl])
                    buffer = Data(buffer[(nl + 1)...])
                    let t = Probe.now(), text = String(decoding: line, as: UTF8.self)
                    lines.withLock { $0.append((t, text)) }
                }
            }
        }
    }

    func send(_ command: [String: Any]) {
        let data = try! JSONSerialization.data(withJSONObject: command)
        try? input.fileHandleForWriting.write(contentsOf: data + Data("\n".utf8))
    }

    /// The first line matching `match` after index `from` within `timeout`, with its arrival time.
    func wait(_ match: ([String: Any]) -> Bool) -> (t: Double, json: [String: Any])? { wait(10, match) }

    func wait(_ timeout: Double, _ match: ([String: Any]) -> Bool) -> (t: Double, json: [String: Any])? {
        let deadline = Probe.now() + timeout
        while Probe.now() < deadline {
            if let hit = parsed.first(where: { match($0.json) }) { return hit }
            usleep(5_000)
        }
        return nil
    }

    func all(_ match: ([String: Any]) -> Bool) -> [[String: Any]] { parsed.map(\.json).filter(match) }

    /// Every output line so far, parsed.
    var parsed: [(t: Double, json: [String: Any])] {
        lines.withLock { $0 }.compactMap { l in
            (try? JSONSerialization.jsonObject(with: Data(l.text.utf8)) as? [String: Any]).map { (l.t, $0) }
        }
    }

    func kill() {
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    func quit() {
        send(["cmd": "quit"])
        let deadline = Probe.now() + 3
        while process.isRunning && Probe.now() < deadline { usleep(10_000) }
        if process.isRunning { kill() }
    }
}

func ev(_ name: String, _ fields: [String: String] = [:]) -> ([String: Any]) -> Bool {
    { j in j["event"] as? String == name && fields.allSatisfy { j[$0.key] as? String == $0.value } }
}

enum KillCommand {
    /// How long a friend may stay silent before it is offline (`RevueTimeouts.connectionTimeout`
    /// 1.6 s) plus one keepalive interval (0.5 s) plus 0.9 s for scheduling on a loaded 2-core
    /// machine: the bound on seeing a SIGKILLed peer go offline.
    static let offlineBound = 3.0
    /// The call layer removes a participant the moment its friend goes offline
    /// (`RevueTimeouts.callLostTimeout` 0 by default, no grace period), so the participant leaves
    /// (`connectionLost`) within the same keepalive-timeout bound: the offline bound plus one
    /// 50 ms timer tick.
    static let leaveBound = offlineBound + 0.05

    static func run(node binary: String, writeKills: Int) throws -> Int32 {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-soak-kill-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var failures: [String] = []
        func check(_ ok: Bool, _ what: String) { if !ok { failures.append(what); out("FAIL: " + what) } }

        let rendezvous = try Node(binary, ["--rendezvous", "--host", "127.0.0.1"])
        defer { rendezvous.kill() }
        guard let rr = rendezvous.wait(ev("ready")) else { throw SoakFailure(description: "the rendezvous node did not start") }
        let rv = "127.0.0.1:\(rr.json["port"] as! Int)"
        func peer(_ name: String, _ extra: [String] = []) throws -> Node {
            try Node(binary, ["--data", dir + "/" + name, "--host", "127.0.0.1", "--rendezvous", rv] + extra)
        }
        let alice = try peer("alice", ["--name", "Alice"])
        var bob = try peer("bob", ["--name", "Bob"])
        defer { alice.kill(); bob.kill() }
        guard let ar = alice.wait(ev("ready")), let br = bob.wait(ev("ready")) else {
            throw SoakFailure(description: "revue-node did not start")
        }
        let aliceId = ar.json["revueId"] as! String, bobId = br.json["revueId"] as! String
        alice.send(["cmd": "add-friend", "address": br.json["address"] as! String, "message": "soak"])
        guard bob.wait(ev("didReceiveFriendRequest", ["friendId": aliceId])) != nil else {
            throw SoakFailure(description: "no friend request")
        }
        bob.send(["cmd": "accept", "friendId": aliceId])
        guard alice.wait({ $0["event"] as? String == "didUpdatePaths" && $0["isOnline"] as? Bool == true }) != nil else {
            throw SoakFailure(description: "Bob never came online for Alice")
        }
        // The call, with media both ways.
        alice.send(["cmd": "invite", "friendId": bobId, "message": "soak call"])
        guard bob.wait(ev("didReceiveInvitation", ["friendId": aliceId])) != nil else {
            throw SoakFailure(description: "no invitation")
        }
        bob.send(["cmd": "accept-call", "friendId": aliceId])
        guard alice.wait(ev("participantDidConnect", ["friendId": bobId])) != nil else {
            throw SoakFailure(description: "Bob did not join the call")
        }
        alice.send(["cmd": "feed", "seconds": 30, "id": "fa"])
        bob.send(["cmd": "feed", "seconds": 30, "id": "fb"])
        sleep(4)
        alice.send(["cmd": "media-stats", "id": "ms1"])
        let stats = alice.wait { $0["id"] as? String == "ms1" }?.json["participants"] as? [[String: Any]] ?? []
        let bobMedia = stats.first { $0["friendId"] as? String == bobId }
        let frames = bobMedia?["videoFrames"] as? Int ?? 0, samples = bobMedia?["audioSamples"] as? Int ?? 0
        out("== soak kill-test: revue-node peers Alice and Bob in a call over loopback, feeding media both ways")
        out("before the kill: Alice decoded \(frames) video frames and \(samples) audio samples from Bob in 4 s")
        check(frames > 0 && samples > 0, "no media from Bob before the kill")

        // SIGKILL Bob mid-call; then, while Alice still thinks Bob is there, fill her send queue.
        let killedAt = Probe.now()
        bob.kill()
        for i in 0..<80 { alice.send(["cmd": "message", "friendId": bobId, "message": "q\(i)", "id": "q\(i)", "timeout": 5]) }
        let left = alice.wait(20, ev("participantDidDisconnect", ["friendId": bobId]))
        let leave = left.map { $0.t - killedAt }
        let offline = alice.parsed.first {
            $0.t >= killedAt && $0.json["event"] as? String == "didUpdatePaths"
                && $0.json["friendId"] as? String == bobId && $0.json["isOnline"] as? Bool == false
        }.map { $0.t - killedAt }
        if ProcessInfo.processInfo.environment["SOAK_DEBUG"] != nil {
            for l in alice.parsed where l.t >= killedAt && l.json["cmd"] as? String != "message" {
                log(String(format: "+%.2f %@", l.t - killedAt, "\(l.json)"))
            }
        }
        out(
            String(
                format:
                    "SIGKILL mid-call: Alice saw Bob offline after %.2f s (bound %.1f s: connection timeout 1.6 s + keepalive 0.5 s + 0.9 s scheduling)",
                offline ?? -1, offlineBound))
        out(
            String(
                format:
                    "SIGKILL mid-call: Alice saw Bob leave the call after %.2f s (reason %@; %.2f s after offline; bound %.2f s: the offline bound + one 50 ms tick, callLostTimeout 0)",
                leave ?? -1, (left?.json["reason"] as? String) ?? "none", (leave ?? -1) - (offline ?? 0), leaveBound))
        check(offline != nil && offline! <= offlineBound, "the peer was not offline within \(offlineBound) s")
        check(
            leave != nil && leave! <= leaveBound && left?.json["reason"] as? String == "connectionLost",
            "the participant did not leave (connectionLost) within \(leaveBound) s")
        check(
            leave != nil && offline != nil && leave! >= offline!,
            "the participant left before the friend went offline")
        usleep(500_000)
        let queueFull = alice.all { $0["error"] as? String == "sendQueueFull" }.count
        let notReachable = alice.all { $0["error"] as? String == "friendNotReachable" }.count
        out(
            "full send queue: 80 messages to the killed Bob: \(queueFull) refused sendQueueFull (queue 64), \(notReachable) friendNotReachable once he was offline"
        )
        check(queueFull > 0 || notReachable == 80, "neither sendQueueFull nor friendNotReachable refused the excess messages")

        // Restart on the same data directory.
        let restartedAt = Probe.now()
        bob = try peer("bob")
        guard let again = bob.wait(ev("ready")) else { throw SoakFailure(description: "Bob did not restart") }
        bob.send(["cmd": "list", "id": "l1"])
        let friends = bob.wait { $0["id"] as? String == "l1" }?.json["friends"] as? [[String: Any]] ?? []
        let sameId = again.json["revueId"] as? String == bobId
        let hasAlice = friends.contains { $0["friendId"] as? String == aliceId }
        let back = bob.wait(10) {
            $0["event"] as? String == "didUpdatePaths" && $0["friendId"] as? String == aliceId && $0["isOnline"] as? Bool == true
        }
        out(
            "restart on the same data directory: revueId \(sameId ? "unchanged" : "CHANGED"), friends \(friends.count) (Alice \(hasAlice ? "present" : "MISSING")), "
                + (back.map {
                    String(
                        format: "ready %.3f s and online with Alice again %.3f s after the restart", again.t - restartedAt,
                        $0.t - restartedAt)
                } ?? "NOT online with Alice"))
        check(sameId && hasAlice && back != nil, "identity or friends lost after SIGKILL")
        bob.kill()

        // SIGKILL in the middle of profile writes, many times.
        var loads = 0, names = Set<String>()
        for k in 0..<writeKills {
            let b = try peer("bob")
            guard let r = b.wait(ev("ready")) else { check(false, "kill \(k): Bob's profile did not load"); b.kill(); break }
            if r.json["revueId"] as? String == bobId { loads += 1 } else { check(false, "kill \(k): revueId changed") }
            b.send(["cmd": "list", "id": "l"])
            let fl = b.wait { $0["id"] as? String == "l" }?.json["friends"] as? [[String: Any]] ?? []
            if !fl.contains(where: { $0["friendId"] as? String == aliceId }) { check(false, "kill \(k): friend Alice missing") }
            for i in 0..<40 { b.send(["cmd": "set-name", "name": "Bob-\(k)-\(i)", "id": "n\(i)"]) }
            // Kill after some of the writes were acknowledged, at a varying point.
            _ = b.wait(2) { $0["id"] as? String == "n\(k % 40)" }
            usleep(UInt32.random(in: 0...20_000))
            b.kill()
            b.all { $0["event"] as? String == "didUpdateName" && $0["friendId"] as? String == bobId }.forEach {
                names.insert($0["name"] as? String ?? "")
            }
        }
        let final = try peer("bob")
        let fr = final.wait(ev("ready"))
        final.send(["cmd": "list", "id": "lf"])
        let ff = final.wait { $0["id"] as? String == "lf" }?.json["friends"] as? [[String: Any]] ?? []
        final.quit()
        out(
            "SIGKILL during profile writes: \(writeKills) kills, each after a burst of 40 set-name commands; the profile loaded \(loads + (fr != nil ? 1 : 0))/\(writeKills + 1) times with the same revueId and Alice as friend (final: \(fr != nil ? "loaded" : "NOT loaded"), \(ff.count) friend)"
        )
        check(
            loads == writeKills && fr?.json["revueId"] as? String == bobId
                && ff.contains { $0["friendId"] as? String == aliceId },
            "the profile did not always load intact")
        out(failures.isEmpty ? "kill-test: PASS" : "kill-test: FAIL")
        return failures.isEmpty ? 0 : 1
    }
}
