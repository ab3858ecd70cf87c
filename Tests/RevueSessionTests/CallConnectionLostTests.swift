import Foundation
import MediaCore
import Testing

@testable import RevueSession

/// A participant whose friend connection is lost leaves the call with `.connectionLost`, here with
/// real processes: a revue-node in a call is SIGKILLed; the other sees it offline, then leave the
/// call, within the default connection timeout. (SimulatedCallTimingTests has the in-process
/// version, with its exact times.)
@Suite(.serialized, .enabled(if: NodeProcess.binary != nil, "revue-node is not built (swift build)"))
struct CallNodeKillTests {
    @Test func sigkilledNodeLeavesTheCallWithinTheConnectionTimeout() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-kill-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (rendezvous, node) = try await NodeProcess.rendezvous()
        defer { rendezvous.kill() }
        let a = try NodeProcess(["--data", dir + "/a", "--host", "127.0.0.1", "--rendezvous", node])
        let b = try NodeProcess(["--data", dir + "/b", "--host", "127.0.0.1", "--rendezvous", node])
        defer { a.kill(); b.kill() }
        let ra = try #require(await a.wait(timeout: 20, event("ready")))
        let rb = try #require(await b.wait(timeout: 20, event("ready")))
        let aId = ra["revueId"] as! String, bId = rb["revueId"] as! String
        a.send(["cmd": "add-friend", "address": rb["address"] as! String, "message": "hi"])
        _ = try #require(await b.wait(timeout: 20, event("didReceiveFriendRequest", ["friendId": aId])))
        b.send(["cmd": "accept", "friendId": aId])
        a.send(["cmd": "invite", "friendId": bId, "message": "call"])
        _ = try #require(await b.wait(timeout: 20, event("didReceiveInvitation", ["friendId": aId])))
        b.send(["cmd": "accept-call", "friendId": aId])
        _ = try #require(await a.wait(timeout: 20, event("participantDidConnect", ["friendId": bId])))

        let timeouts = RevueTimeouts()  // revue-node runs with the defaults
        let killedAt = MonotonicTime.now
        b.kill()
        let left = await a.wait(timeout: timeouts.connectionTimeout + 5, event("participantDidDisconnect", ["friendId": bId]))
        #expect(left?["reason"] as? String == "connectionLost")
        // The wait is the time bound, no tighter: a session whose own timer stalled (a loaded
        // machine) gives its friends two more keepalive intervals before it calls them offline.
        print("killed node left after \((MonotonicTime.now - killedAt).inSeconds) s")
        // Offline first (the friend layer's didUpdatePaths), then the leave.
        let lines = a.events.compactMap { e -> String? in
            guard e["friendId"] as? String == bId, let name = e["event"] as? String else { return nil }
            if name == "didUpdatePaths" { return "paths(\(e["isOnline"] as? Bool ?? true))" }
            return name == "participantDidDisconnect" ? "disconnect" : nil
        }
        #expect(lines.suffix(2) == ["paths(false)", "disconnect"])
        a.quit()
    }
}
