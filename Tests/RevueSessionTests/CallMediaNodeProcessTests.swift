import Foundation
import RevueNodeProtocol
import Testing

@testable import RevueSession

/// Calls scripted from the shell: three revue-node peers and a rendezvous node on loopback run the
/// invitation matrix and a three-way mesh, each side's event sequence asserted.
@Suite(.serialized, .enabled(if: NodeProcess.binary != nil, "revue-node is not built (swift build)"))
struct CallMediaNodeProcessTests {
    /// Invitation and room events of one node as short strings, in order (read as `NodeEvent`s).
    static func callEvents(_ node: NodeProcess, names: [String: String]) -> [String] {
        node.nodeEvents.compactMap { e -> String? in
            func who(_ id: String) -> String { names[id] ?? "?" }
            switch e {
            case .didSendInvitation(let id, _): return "sent(\(who(id)))"
            case .didReceiveInvitation(let id, _): return "received(\(who(id)))"
            case .didEndInvitation(let id, let reason): return "ended(\(who(id)),\(reason))"
            case .room(.participantDidConnect(let p, _)): return "connect(\(who(p.friendId)))"
            case .room(.participantDidDisconnect(let p, let reason)):
                return "disconnect(\(who(p.friendId)),\(reason.map { "\($0)" } ?? ""))"
            default: return nil
            }
        }
    }

    @Test func invitationMatrixAndThreeWayCallBetweenProcesses() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-call-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (rendezvous, node) = try await NodeProcess.rendezvous()
        defer { rendezvous.kill() }
        let nodes = try ["a", "b", "c"].map {
            try NodeProcess([
                "--data", dir + "/" + $0, "--host", "127.0.0.1", "--name", $0, "--rendezvous", node, "--invitation-timeout", "5",
            ])
        }
        defer { for n in nodes { n.kill() } }
        var ids: [String] = []
        var addresses: [String] = []
        for n in nodes {
            let r = try #require(await n.wait(timeout: 20, event("ready")))
            ids.append(r["revueId"] as! String)
            addresses.append(r["address"] as! String)
        }
        let names = Dictionary(uniqueKeysWithValues: zip(ids, ["a", "b", "c"]))
        let (a, b, c) = (nodes[0], nodes[1], nodes[2])
        // Everyone befriends everyone.
        for i in 0..<3 {
            for j in (i + 1)..<3 {
                nodes[i].send(["cmd": "add-friend", "address": addresses[j], "message": "hi"])
                #expect(await nodes[j].wait(timeout: 20, event("didReceiveFriendRequest", ["friendId": ids[i]])) != nil)
                nodes[j].send(["cmd": "accept", "friendId": ids[i]])
            }
        }
        for i in 0..<3 {
            for j in 0..<3 where i != j {
                #expect(
                    await nodes[i].wait(timeout: 20) {
                        $0["event"] as? String == "didUpdatePaths" && $0["friendId"] as? String == ids[j]
                            && $0["isOnline"] as? Bool == true
                    } != nil)
            }
        }

        // Cancel, reject, timeout between a and b.
        a.send(["cmd": "invite", "friendId": ids[1], "message": "1"])
        #expect(await b.wait(timeout: 20, event("didReceiveInvitation", ["friendId": ids[0]])) != nil)
        a.send(["cmd": "cancel-call", "friendId": ids[1]])
        #expect(await b.wait(timeout: 20, event("didEndInvitation", ["reason": "finished"])) != nil)
        a.send(["cmd": "cancel-call", "friendId": ids[1], "id": "again"])
        #expect(
            await a.wait(timeout: 20) {
                $0["event"] as? String == "error" && $0["id"] as? String == "again" && $0["error"] as? String == "invalidState"
            } != nil)

        a.send(["cmd": "invite", "friendId": ids[1], "message": "2"])
        #expect(await b.wait(timeout: 20, nth: 2, event("didReceiveInvitation", ["friendId": ids[0]])) != nil)
        b.send(["cmd": "reject-call", "friendId": ids[0]])
        #expect(await a.wait(timeout: 20, event("didEndInvitation", ["reason": "finished"])) != nil)

        a.send(["cmd": "invite", "friendId": ids[1], "message": "3"])
        #expect(await a.wait(timeout: 20, event("didEndInvitation", ["reason": "timeout"])) != nil)
        #expect(await b.wait(timeout: 20, nth: 2, event("didEndInvitation", ["reason": "finished"])) != nil)

        // Accept, then c joins: a three-way mesh.
        a.send(["cmd": "invite", "friendId": ids[1], "message": "4"])
        #expect(await b.wait(timeout: 20, nth: 4, event("didReceiveInvitation", ["friendId": ids[0]])) != nil)
        b.send(["cmd": "accept-call", "friendId": ids[0]])
        #expect(await a.wait(timeout: 20, event("participantDidConnect", ["friendId": ids[1]])) != nil)
        a.send(["cmd": "invite", "friendId": ids[2], "message": "5"])
        #expect(await c.wait(timeout: 20, event("didReceiveInvitation", ["friendId": ids[0]])) != nil)
        c.send(["cmd": "accept-call", "friendId": ids[0]])
        #expect(await c.wait(timeout: 20, event("participantDidConnect", ["friendId": ids[1]])) != nil)
        #expect(await b.wait(timeout: 20, event("participantDidConnect", ["friendId": ids[2]])) != nil)
        c.send(["cmd": "call-message", "message": "hello from c", "id": "m"])
        #expect(await c.wait(timeout: 20) { $0["event"] as? String == "ok" && $0["id"] as? String == "m" } != nil)
        for n in [a, b] {
            #expect(
                await n.wait(timeout: 20) {
                    $0["event"] as? String == "didReceiveMessage" && $0["layer"] as? String == "room"
                        && $0["message"] as? String == "hello from c"
                } != nil)
        }
        // Media from the shell: a feeds 2 s of tone and test video; b and c decode both.
        a.send(["cmd": "feed", "seconds": 2, "tone": 440, "id": "f"])
        #expect(await a.wait(timeout: 30) { $0["event"] as? String == "ok" && $0["cmd"] as? String == "feed" } != nil)
        try? await Task.sleep(for: .milliseconds(500))
        for (n, tag) in [(b, "sb"), (c, "sc")] {
            n.send(["cmd": "media-stats", "id": tag])
            let stats = try #require(await n.wait(timeout: 20) { $0["event"] as? String == "ok" && $0["id"] as? String == tag })
            let fromA = (stats["participants"] as? [[String: Any]])?.first { $0["friendId"] as? String == ids[0] }
            #expect((fromA?["videoFrames"] as? Int ?? 0) > 5, "\(tag): \(stats)")
            #expect((fromA?["loudSamples"] as? Int ?? 0) > 48_000, "\(tag): \(stats)")
        }
        // b leaves; a and c see it and stay together.
        b.send(["cmd": "hangup"])
        #expect(
            await a.wait(timeout: 20, event("participantDidDisconnect", ["friendId": ids[1], "reason": "remoteHangUp"])) != nil)
        #expect(
            await c.wait(timeout: 20, event("participantDidDisconnect", ["friendId": ids[1], "reason": "remoteHangUp"])) != nil)
        a.send(["cmd": "room", "id": "r"])
        let room = try #require(await a.wait(timeout: 20) { $0["event"] as? String == "ok" && $0["id"] as? String == "r" })
        #expect((room["participants"] as? [[String: Any]])?.compactMap { $0["friendId"] as? String } == [ids[2]])
        c.send(["cmd": "hangup", "friendId": ids[0]])
        #expect(
            await a.wait(timeout: 20, event("participantDidDisconnect", ["friendId": ids[2], "reason": "remoteHangUp"])) != nil)
        try? await Task.sleep(for: .milliseconds(300))

        #expect(
            Self.callEvents(a, names: names) == [
                "sent(b)", "ended(b,cancelled)", "sent(b)", "ended(b,finished)", "sent(b)", "ended(b,timeout)",
                "sent(b)", "connect(b)", "sent(c)", "connect(c)", "disconnect(b,remoteHangUp)", "disconnect(c,remoteHangUp)",
            ])
        let bEvents = Self.callEvents(b, names: names)
        #expect(
            bEvents.prefix(9) == [
                "received(a)", "ended(a,finished)", "received(a)", "ended(a,rejected)", "received(a)", "ended(a,finished)",
                "received(a)", "connect(a)", "connect(c)",
            ])
        // hangup without a friend is disconnectAll: both, in either order.
        #expect(Set(bEvents.dropFirst(9)) == ["disconnect(a,localHangUp)", "disconnect(c,localHangUp)"] && bEvents.count == 11)
        #expect(
            Self.callEvents(c, names: names) == [
                "received(a)", "connect(a)", "connect(b)", "disconnect(b,remoteHangUp)", "disconnect(a,localHangUp)",
            ])
        for n in nodes { n.quit() }
        for n in nodes + [rendezvous] { expectEveryLineIsANodeEvent(n) }
    }
}
