import Foundation
import Testing
@testable import RevueSession
#if canImport(Glibc)
import Glibc
#endif

/// Call resume with a grace period (`--call-lost-timeout`): b's network goes away for 3 s (an
/// nftables rule in b's network namespace drops everything on its link), a sees b offline but
/// keeps it in the call, and b's media decodes again at a soon after b is back online (0.2 s
/// measured alone; the bound is 2 s for a loaded machine).
/// Needs root (ip netns, nft); skipped otherwise.
@Suite(.serialized, .enabled(if: getuid() == 0 && NodeProcess.binary != nil
    && FileManager.default.isExecutableFile(atPath: "/usr/sbin/nft"), "needs root, ip and nft (not root: skipped)"))
struct CallMediaResumeNamespaceTests {
    @Test func mediaResumesAfterAThreeSecondOutageWithinTheGrace() async throws {
        let p = "rvr\(getpid() % 100_000)"
        let setup = """
        set -e
        ip netns add \(p)a; ip netns add \(p)b; ip netns add \(p)r
        ip link add \(p)a0 type veth peer name \(p)a1
        ip link add \(p)b0 type veth peer name \(p)b1
        ip link set \(p)a0 netns \(p)r; ip link set \(p)a1 netns \(p)a
        ip link set \(p)b0 netns \(p)r; ip link set \(p)b1 netns \(p)b
        ip -n \(p)r addr add 10.78.1.1/24 dev \(p)a0; ip -n \(p)r link set \(p)a0 up
        ip -n \(p)r addr add 10.78.2.1/24 dev \(p)b0; ip -n \(p)r link set \(p)b0 up
        ip -n \(p)r link set lo up
        ip -n \(p)a addr add 10.78.1.2/24 dev \(p)a1; ip -n \(p)a link set \(p)a1 up; ip -n \(p)a link set lo up
        ip -n \(p)b addr add 10.78.2.2/24 dev \(p)b1; ip -n \(p)b link set \(p)b1 up; ip -n \(p)b link set lo up
        ip -n \(p)a route add default via 10.78.1.1
        ip -n \(p)b route add default via 10.78.2.1
        ip netns exec \(p)r sysctl -qw net.ipv4.ip_forward=1
        """
        let result = shell(setup)
        defer { shell("ip netns del \(p)a; ip netns del \(p)b; ip netns del \(p)r") }
        try #require(result.status == 0, "namespace setup failed: \(result.output)")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-resume-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }

        let rendezvous = try NodeProcess(["--rendezvous", "--port", "33401"], namespace: p + "r")
        defer { rendezvous.kill() }
        _ = try #require(await rendezvous.wait(event("ready")))
        let common = ["--call-lost-timeout", "10", "--video-size", "160x120"]
        let a = try NodeProcess(["--data", dir + "/a", "--rendezvous", "10.78.1.1:33401"] + common, namespace: p + "a")
        let b = try NodeProcess(["--data", dir + "/b", "--rendezvous", "10.78.2.1:33401"] + common, namespace: p + "b")
        defer { a.kill(); b.kill() }
        let aId = try #require(await a.wait(timeout: 10, event("ready")))["revueId"] as! String
        let bReady = try #require(await b.wait(timeout: 10, event("ready")))
        let bId = bReady["revueId"] as! String
        a.send(["cmd": "add-friend", "address": bReady["address"] as! String, "message": "hi"])
        _ = try #require(await b.wait(timeout: 10, event("didReceiveFriendRequest", ["friendId": aId])))
        b.send(["cmd": "accept", "friendId": aId])
        _ = try #require(await a.wait(timeout: 10) { $0["event"] as? String == "didUpdatePaths" && $0["friendId"] as? String == bId && $0["isOnline"] as? Bool == true })
        a.send(["cmd": "invite", "friendId": bId, "message": "call"])
        _ = try #require(await b.wait(timeout: 10, event("didReceiveInvitation", ["friendId": aId])))
        b.send(["cmd": "accept-call", "friendId": aId])
        _ = try #require(await a.wait(timeout: 10, event("participantDidConnect", ["friendId": bId])))
        _ = try #require(await a.wait(timeout: 10, nth: 2) { $0["event"] as? String == "didSubscribeTrack" && $0["friendId"] as? String == bId })

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
            a.events.filter { $0["event"] as? String == "didUpdatePaths" && $0["friendId"] as? String == bId && $0["isOnline"] as? Bool == true }.count
        }
        // b's link goes dark for 3 s.
        let cut = shell("""
        ip netns exec \(p)b nft add table inet cut
        ip netns exec \(p)b nft add chain inet cut in '{ type filter hook input priority 0; policy accept; }'
        ip netns exec \(p)b nft add chain inet cut out '{ type filter hook output priority 0; policy accept; }'
        ip netns exec \(p)b nft add rule inet cut in iifname \(p)b1 drop
        ip netns exec \(p)b nft add rule inet cut out oifname \(p)b1 drop
        """)
        try #require(cut.status == 0, "nft: \(cut.output)")
        let offline = await a.wait(timeout: 5) { $0["event"] as? String == "didUpdatePaths" && $0["friendId"] as? String == bId && $0["isOnline"] as? Bool == false }
        #expect(offline != nil, "a never saw b offline")
        try? await Task.sleep(for: .seconds(1.2))
        let during = await framesFromB()
        let onlineBefore = onlineEvents()
        shell("ip netns exec \(p)b nft delete table inet cut")

        // The first online event after the outage (paths may have changed before it, online too).
        let online = await a.wait(timeout: 10, nth: onlineBefore + 1) { $0["event"] as? String == "didUpdatePaths" && $0["friendId"] as? String == bId && $0["isOnline"] as? Bool == true }
        let backAt = monotonicNow()
        #expect(online != nil, "b never came back")
        let atReturn = await framesFromB()
        var resumedAfter = Double.infinity
        var last = atReturn
        while monotonicNow() - backAt < 8 {
            last = await framesFromB()
            if last >= atReturn + 3 { resumedAfter = monotonicNow() - backAt; break }
            try? await Task.sleep(for: .milliseconds(50))
        }
        print("resume: video decoded again \(String(format: "%.2f", resumedAfter)) s after b was back online")
        // Measured from outside (event polling and media-stats round trips through the node); it
        // runs alone in `make test` (beside the other call tests it measured up to 2.1 s), where
        // it measures 0.2-0.4 s.
        #expect(resumedAfter < 1.0, "video resumed \(resumedAfter) s after b was back online (frames \(before) before, \(during) during, \(atReturn) at return, \(last) last)")
        // b never left the call on either side.
        #expect(!a.events.contains(where: event("participantDidDisconnect")))
        #expect(!b.events.contains(where: event("participantDidDisconnect")))
        a.quit()
        b.quit()
    }
}
