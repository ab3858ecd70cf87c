import Foundation
import MediaCore
import Testing

@testable import RevueSession

#if canImport(Glibc)
    import Glibc
#endif

/// Call resume with a grace period (`--call-lost-timeout`): b's network goes away for 3 s (an
/// nftables rule in b's network namespace drops everything on its link), a sees b offline but
/// keeps it in the call, and b's media decodes again at a soon after b is back online (0.2 s
/// measured alone; the bound is 2 s for a loaded machine). a and b live in two homes of a
/// `NetworkLab` (no NAT, routed addresses). Needs root (ip netns, nft); skipped otherwise.
@Suite(.serialized, .enabled(if: networkLabAvailable, "needs root, ip and nft (not root: skipped)"))
struct CallMediaResumeNamespaceTests {
    @Test func mediaResumesAfterAThreeSecondOutageWithinTheGrace() async throws {
        let lab = try await NetworkLab(.init(home1: .none, home2: .none, turn: false))
        defer { lab.teardown() }
        let common = ["--call-lost-timeout", "10", "--video-size", "160x120"]
        let a = try lab.peer(home: 1, name: "a", common)
        let b = try lab.peer(home: 2, name: "b", common)
        defer { a.kill(); b.kill() }
        let aId = try #require(await a.wait(timeout: 10, event("ready")))["revueId"] as! String
        let bReady = try #require(await b.wait(timeout: 10, event("ready")))
        let bId = bReady["revueId"] as! String
        a.send(["cmd": "add-friend", "address": bReady["address"] as! String, "message": "hi"])
        _ = try #require(await b.wait(timeout: 10, event("didReceiveFriendRequest", ["friendId": aId])))
        b.send(["cmd": "accept", "friendId": aId])
        _ = try #require(
            await a.wait(timeout: 10) {
                $0["event"] as? String == "didUpdatePaths" && $0["friendId"] as? String == bId && $0["isOnline"] as? Bool == true
            })
        a.send(["cmd": "invite", "friendId": bId, "message": "call"])
        _ = try #require(await b.wait(timeout: 10, event("didReceiveInvitation", ["friendId": aId])))
        b.send(["cmd": "accept-call", "friendId": aId])
        _ = try #require(await a.wait(timeout: 10, event("participantDidConnect", ["friendId": bId])))
        _ = try #require(
            await a.wait(timeout: 10, nth: 2) {
                $0["event"] as? String == "didSubscribeTrack" && $0["friendId"] as? String == bId
            })

        var serial = 0
        func framesFromB() async -> Int {
            serial += 1
            a.send(["cmd": "media-stats", "id": "s\(serial)"])
            let stats = await a.wait(timeout: 5) { $0["event"] as? String == "ok" && $0["id"] as? String == "s\(serial)" }
            let fromB = (stats?["participants"] as? [[String: Any]])?.first { $0["friendId"] as? String == bId }
            return fromB?["videoFrames"] as? Int ?? -1
        }

        b.send(["cmd": "feed", "seconds": 40, "tone": 500, "id": "f"])  // outlasts the test (quit ends it)
        try? await Task.sleep(for: .seconds(2))
        let before = await framesFromB()
        #expect(before > 10, "media before the outage: \(before) frames")

        func onlineEvents() -> Int {
            a.events.filter {
                $0["event"] as? String == "didUpdatePaths" && $0["friendId"] as? String == bId && $0["isOnline"] as? Bool == true
            }.count
        }
        // b's link goes dark for 3 s.
        try lab.cutLink(home: 2)
        let offline = await a.wait(timeout: 5) {
            $0["event"] as? String == "didUpdatePaths" && $0["friendId"] as? String == bId && $0["isOnline"] as? Bool == false
        }
        #expect(offline != nil, "a never saw b offline")
        try? await Task.sleep(for: .seconds(1.2))
        let during = await framesFromB()
        let onlineBefore = onlineEvents()
        try lab.restoreLink(home: 2)

        // The first online event after the outage (paths may have changed before it, online too).
        let online = await a.wait(timeout: 10, nth: onlineBefore + 1) {
            $0["event"] as? String == "didUpdatePaths" && $0["friendId"] as? String == bId && $0["isOnline"] as? Bool == true
        }
        let backAt = MonotonicTime.now
        #expect(online != nil, "b never came back")
        let atReturn = await framesFromB()
        var resumedAfter = Double.infinity
        var last = atReturn
        while MonotonicTime.now - backAt < .seconds(8) {
            last = await framesFromB()
            if last >= atReturn + 3 { resumedAfter = (MonotonicTime.now - backAt).inSeconds; break }
            try? await Task.sleep(for: .milliseconds(50))
        }
        print("resume: video decoded again \(String(format: "%.2f", resumedAfter)) s after b was back online")
        // Measured from outside (event polling and media-stats round trips through the node); it
        // runs alone in `make test` (beside the other call tests it measured up to 2.1 s), where
        // it measures 0.2-0.4 s.
        #expect(
            resumedAfter < 1.0,
            "video resumed \(resumedAfter) s after b was back online (frames \(before) before, \(during) during, \(atReturn) at return, \(last) last)"
        )
        // b never left the call on either side.
        #expect(!a.events.contains(where: event("participantDidDisconnect")))
        #expect(!b.events.contains(where: event("participantDidDisconnect")))
        a.quit()
        b.quit()
    }
}
