import Foundation
import MediaCore
import Testing

@testable import RevueSession

/// A revue-node in a call is SIGKILLed and started again on the same data and port quicker than
/// the connection timeout, so its friend never sees it offline: the new run's epoch ends the stale
/// participant with `.connectionLost` within the timeout, and a new call between them works.
@Suite(.serialized, .enabled(if: NodeProcess.binary != nil, "revue-node is not built (swift build)"))
struct CallNodeRestartTests {
    @Test func restartWithinTheConnectionTimeoutEndsTheStaleParticipantAndANewCallWorks() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-restart-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (rendezvous, node) = try await NodeProcess.rendezvous()
        defer { rendezvous.kill() }
        // Audio only: this suite runs beside the timing-sensitive session tests.
        let args = ["--host", "127.0.0.1", "--rendezvous", node, "--no-camera"]
        let a = try NodeProcess(["--data", dir + "/a"] + args)
        var b = try NodeProcess(["--data", dir + "/b"] + args)
        defer { a.kill(); b.kill() }
        let ra = try #require(await a.wait(timeout: 20, event("ready")))
        let rb = try #require(await b.wait(timeout: 20, event("ready")))
        let aId = ra["revueId"] as! String, bId = rb["revueId"] as! String
        let bPort = rb["port"] as! Int
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
        b = try NodeProcess(["--data", dir + "/b", "--port", "\(bPort)"] + args)
        _ = try #require(await b.wait(timeout: 5, event("ready")))
        let restartedAfter = (MonotonicTime.now - killedAt).inSeconds
        // Back before a could call b offline: what ends the leg below is the new epoch.
        #expect(restartedAfter < timeouts.connectionTimeout, "restarted after \(restartedAfter) s")
        let left = await a.wait(timeout: timeouts.connectionTimeout + 5, event("participantDidDisconnect", ["friendId": bId]))
        #expect(left?["reason"] as? String == "connectionLost")
        print("restarted node's old leg ended after \((MonotonicTime.now - killedAt).inSeconds) s")
        // a never saw b offline: the epoch, not the keepalive timeout, ended the leg.
        #expect(
            !a.events.contains {
                $0["event"] as? String == "didUpdatePaths" && $0["friendId"] as? String == bId && $0["isOnline"] as? Bool == false
            })
        #expect(a.events.filter(event("roomDidEndCall")).count == 1)

        // A new call: both connected, and b's audio reaches a. Whether the first call got as far
        // as a subscribing to b's audio depends on how soon after connecting b was killed, so the
        // subscription awaited below is the first one after those already seen.
        let subscribesToB: ([String: Any]) -> Bool = {
            $0["event"] as? String == "didSubscribeTrack" && $0["friendId"] as? String == bId && $0["kind"] as? String == "audio"
        }
        let earlierSubscriptions = a.events.filter(subscribesToB).count
        a.send(["cmd": "invite", "friendId": bId, "message": "again"])
        // Only this invitation rings: the first one, answered by b's previous run, is not replayed.
        _ = try #require(await b.wait(timeout: 20, event("didReceiveInvitation", ["friendId": aId, "message": "again"])))
        #expect(b.events.filter(event("didReceiveInvitation")).count == 1)
        b.send(["cmd": "accept-call", "friendId": aId])
        let reconnected = await a.wait(timeout: 20, nth: 2, event("participantDidConnect", ["friendId": bId]))
        if reconnected == nil {
            a.send(["cmd": "counters", "id": "c"])
            b.send(["cmd": "counters", "id": "c"])
            _ = await a.wait(timeout: 5) { $0["id"] as? String == "c" }
            _ = await b.wait(timeout: 5) { $0["id"] as? String == "c" }
            Issue.record("a never saw b connect again.\na: \(a.events)\nb: \(b.events)")
            return
        }
        _ = try #require(await b.wait(timeout: 20, event("participantDidConnect", ["friendId": aId])))
        let subscribed = await a.wait(timeout: 20, nth: earlierSubscriptions + 1, subscribesToB)
        if subscribed == nil {
            Issue.record("a never subscribed to b's audio again.\na: \(a.events)\nb: \(b.events)")
            return
        }
        try? await Task.sleep(for: .milliseconds(300))
        b.send(["cmd": "feed", "seconds": 1.5, "tone": 500, "id": "f"])
        _ = try #require(await b.wait(timeout: 20) { $0["event"] as? String == "ok" && $0["cmd"] as? String == "feed" })
        try? await Task.sleep(for: .milliseconds(500))
        a.send(["cmd": "media-stats", "id": "s"])
        let stats = try #require(await a.wait(timeout: 20) { $0["event"] as? String == "ok" && $0["id"] as? String == "s" })
        let fromB = (stats["participants"] as? [[String: Any]])?.first { $0["friendId"] as? String == bId }
        #expect((fromB?["loudSamples"] as? Int ?? 0) > 24_000, "\(stats)")
        a.quit()
        b.quit()
    }
}
