// A room of revue-node processes whose media goes through a real Janus (`--sfu`): every
// participant receives every other's media, each uplink carries one copy, and the figures (CPU per
// participant, Janus's CPU, join time, uplink bytes) are printed for docs/performance.md.
import Foundation
import MediaCore
import MediaTestSupport
import Testing

@testable import RevueSession

@Suite(.serialized, .enabled(if: NodeProcess.binary != nil, "revue-node is not built (swift build)"))
struct CallSFUNodeTests {
    /// Starts Janus and `count` nodes pointed at a fresh room of it, and forms the call from node
    /// 0 (every node with `tracks` subscribed tracks from every other). The caller stops both.
    func sfuRoom(count: Int, videoSize: String = "160x120", extra: [String] = [], tracks: Int, timeout: Double)
        async throws -> (janus: JanusServer, mesh: NodeMesh, joinTime: Double)
    {
        let janus = try await JanusServer.started()
        let mesh: NodeMesh
        do {
            let room = UInt64.random(in: 1...1_000_000)
            mesh = try await NodeMesh(
                count: count, videoSize: videoSize,
                extra: ["--sfu", "http://127.0.0.1:\(janus.port)/janus", "--sfu-room", "\(room)"] + extra)
        } catch {
            janus.stop()
            throw error
        }
        let started = MonotonicTime.now
        do {
            for i in 1..<count { try await mesh.invite(0, i) }
        } catch {
            mesh.stop()
            janus.stop()
            throw error
        }
        let formed = await mesh.waitForMesh(Array(0..<count), tracks: tracks, timeout: timeout)
        #expect(formed, "the SFU room did not complete")
        let joinTime = (MonotonicTime.now - started).inSeconds
        // Each join gives everyone a new frame key, which senders take a second later
        // (`Room.sfuKeySwitchDelay`), on each participant's own clock: until every sender uses
        // its newest key and every receiver holds it, the last to join decodes nothing of the
        // others. Wait for exactly that, as each node reports it (a fixed 1.3 s wait once left
        // every direction 40 % loud).
        let keyed = await mesh.waitForSFUSenders(Array(0..<count), timeout: 30)
        #expect(keyed, "not every participant holds every sender's key in use")
        return (janus, mesh, joinTime)
    }

    /// `REVUE_SFU_NODES` participants (4 by default; 10 pass with a release revue-node,
    /// `REVUE_NODE_BINARY`, docs/performance.md) encoding at 320x180 (`REVUE_SFU_VIDEO_SIZE`),
    /// 15 fps, with Opus, E2EE on. On failure, the first and last participants' view of every
    /// other one (sections, SSRCs, packets, decryption failures) is printed.
    @Test func everyNodeOfAnSFURoomReceivesEveryOtherOnce() async throws {
        let count = Int(ProcessInfo.processInfo.environment["REVUE_SFU_NODES"] ?? "") ?? 4
        let (janus, mesh, joinTime) = try await sfuRoom(
            count: count, videoSize: ProcessInfo.processInfo.environment["REVUE_SFU_VIDEO_SIZE"] ?? "320x180", tracks: 2,
            timeout: 60)
        defer { mesh.stop(); janus.stop() }
        let all = Array(0..<count)
        let janusCPU0 = janus.cpuSeconds
        let r = await mesh.checkMedia(all, seconds: 4)
        let janusCPU = janus.cpuSeconds - janusCPU0
        #expect(r.failures.isEmpty, "\(r.failures)")
        for n in [0, count - 1] where !r.failures.isEmpty {
            let st = await mesh.call(n, ["cmd": "media-stats"])
            for p in st?["participants"] as? [[String: Any]] ?? [] {
                let path = p["path"] as? [String: Any] ?? [:]
                print(
                    "CallSFUNodeTests: \(n) from \(mesh.ids.firstIndex(of: p["friendId"] as? String ?? "") ?? -1): frames \(p["videoFrames"] ?? "") loud \(p["loudSamples"] ?? "") mids \(path["mids"] ?? "") ssrcs \(path["ssrcs"] ?? "") packets \(path["packets"] ?? "") decfail \(path["decryptionFailures"] ?? "") dropped \(path["framesDropped"] ?? "") fwd \(path["forwarding"] ?? "") rcv \(path["received"] ?? "")"
                )
            }
        }
        // One copy up: a participant's uplink is about its own media once (~110 kB/s at this
        // size), not once per receiver.
        let perSecond = r.uplink.map { Double($0) / 4 }
        let most = perSecond.max() ?? 0
        #expect(most > 0 && most < 250_000, "uplink per participant: \(r.uplink)")
        print(
            "\(count)-participant SFU room: joined in \(String(format: "%.1f", joinTime)) s; "
                + "participants \(String(format: "%.2f", r.cpu / r.wall)) cores (\(String(format: "%.3f", r.cpu / r.wall / Double(count))) each), "
                + "Janus \(String(format: "%.2f", janusCPU / r.wall)) cores; uplink per participant while feeding 4 s: \(r.uplink.map { "\($0 / 1000) kB" })"
        )
        #expect(await mesh.hangUpAll())
        for n in mesh.nodes { n.quit() }
    }

    /// Three revue-node processes, nobody's friends, meet in a room by link from the command
    /// line: the host's `create-link` answers the link, the others `join-link` it under their
    /// names, each lists the other two by link with their names, every one decodes and hears
    /// every other, the host's `hangup` of a participant removes it, and `revoke-link` turns
    /// the next newcomer away.
    @Test func strangersMeetInARoomByLinkFromTheCommandLine() async throws {
        let janus = try await JanusServer.started()
        defer { janus.stop() }
        let mesh = try await NodeMesh(
            count: 4,
            extra: ["--sfu", "http://127.0.0.1:\(janus.port)/janus", "--sfu-room", "\(UInt64.random(in: 1...1_000_000))"],
            befriend: false)
        defer { mesh.stop() }
        let link = try #require(await mesh.call(0, ["cmd": "create-link", "name": "Host"])?["link"] as? String)
        #expect(link.hasPrefix("revue-room://") && link.contains("#k1."))
        // A link that is not one is refused by name; then two join under their names.
        mesh.nodes[1].send(["cmd": "join-link", "link": "revue-room://nowhere", "name": "Gil", "id": "bad"])
        let refused = await mesh.nodes[1].wait(timeout: 10) { $0["event"] as? String == "error" && $0["id"] as? String == "bad" }
        #expect(refused?["error"] as? String == "missingSecret", "\(refused ?? [:])")
        for i in 1...2 { #expect(await mesh.call(i, ["cmd": "join-link", "link": link, "name": "Guest \(i)"]) != nil) }

        // Everyone lists the other two by link, with the names they gave; their link identities
        // stand in for friend IDs from here on.
        var linkIds = [String](repeating: "", count: 3)
        let listed = await mesh.poll(timeout: 40) {
            for i in 0..<3 {
                guard let room = await mesh.call(i, ["cmd": "room"]), let ps = room["participants"] as? [[String: Any]],
                    ps.count == 2, ps.allSatisfy({ $0["byLink"] as? Bool == true })
                else { return false }
                for p in ps {
                    let name = p["name"] as? String ?? ""
                    guard let j = ["Host", "Guest 1", "Guest 2"].firstIndex(of: name), j != i else { return false }
                    linkIds[j] = p["friendId"] as? String ?? ""
                }
            }
            return true
        }
        try #require(listed, "the room by link did not form")
        let friendIds = mesh.ids
        mesh.ids = linkIds + [friendIds[3]]
        #expect(await mesh.waitForMesh([0, 1, 2], tracks: 2, timeout: 30), "not every subscription is up")
        // Every sender uses the host's latest epoch's keys, which every receiver holds.
        let keyed = await mesh.poll(timeout: 20) {
            var epochs: Set<String> = []
            for i in 0..<3 {
                for p in await mesh.legs(i) ?? [] {
                    let path = p["path"] as? [String: Any] ?? [:]
                    epochs.insert(path["linkEpoch"] as? String ?? "-")
                    epochs.insert(path["linkEpochInUse"] as? String ?? "-")
                }
            }
            return epochs.count == 1 && !epochs.contains("-") && !epochs.contains("0")
        }
        #expect(keyed, "the participants are not all sending under the host's latest epoch")
        let r = await mesh.checkMedia([0, 1, 2], seconds: 3)
        #expect(r.failures.isEmpty, "\(r.failures)")

        // The host hangs up on guest 2: it is removed (its room empties), the others stay.
        #expect(await mesh.call(0, ["cmd": "hangup", "friendId": linkIds[2]]) != nil)
        let removed = await mesh.poll(timeout: 20) {
            let counts = await [0, 1, 2].asyncMap { ((await mesh.call($0, ["cmd": "room"]))?["participants"] as? [Any])?.count }
            return counts == [1, 1, 0]
        }
        #expect(removed, "after the removal")
        // Revoked: a newcomer with the same link is not let in.
        #expect(await mesh.call(0, ["cmd": "revoke-link", "link": link]) != nil)
        #expect(await mesh.call(3, ["cmd": "join-link", "link": link, "name": "Late"]) != nil)
        let turnedAway = await mesh.nodes[3].wait(timeout: 30) { $0["event"] as? String == "callDidFailWithError" }
        #expect(turnedAway?["error"] as? String == "mediaSetupFailed", "\(turnedAway ?? [:])")
        #expect(((await mesh.call(0, ["cmd": "room"]))?["participants"] as? [Any])?.count == 1)
        mesh.ids = friendIds
        #expect(await mesh.hangUpAll())
        for n in mesh.nodes { n.quit() }
    }

    /// `REVUE_SFU_AUDIO_NODES` participants (6 by default; 25 pass with a release revue-node,
    /// docs/performance.md), audio only, E2EE on: every participant hears every other (speaking
    /// in turns of `REVUE_SFU_SPEAKERS`), and when one speaks alone every other participant's
    /// speaking list names that one.
    @Test func everyNodeOfALargeAudioRoomHearsEveryOtherAndSeesWhoSpeaks() async throws {
        let count = Int(ProcessInfo.processInfo.environment["REVUE_SFU_AUDIO_NODES"] ?? "") ?? 6
        let (janus, mesh, joinTime) = try await sfuRoom(count: count, extra: ["--no-camera"], tracks: 1, timeout: 120)
        defer { mesh.stop(); janus.stop() }
        let all = Array(0..<count)
        // Participants speak in turns of `REVUE_SFU_SPEAKERS` (6 by default), as in a meeting;
        // every other participant must hear each one.
        let turn = max(1, Int(ProcessInfo.processInfo.environment["REVUE_SFU_SPEAKERS"] ?? "") ?? 6)
        let janusCPU0 = janus.cpuSeconds
        var failures: [String] = [], cpu = 0.0, wall = 0.0, uplink: [Int] = []
        for start in stride(from: 0, to: count, by: turn) {
            let speakers = Array(start..<min(count, start + turn))
            let r = await mesh.checkMedia(all, seconds: 3, video: false, senders: speakers)
            failures += r.failures
            cpu += r.cpu
            wall += r.wall
            uplink += speakers.map { r.uplink[$0] }
        }
        let janusCPU = janus.cpuSeconds - janusCPU0
        #expect(failures.isEmpty, "\(failures.count) directions failed: \(failures.prefix(10))")
        print(
            "\(count)-participant SFU audio room: joined in \(String(format: "%.1f", joinTime)) s; speaking in turns of \(turn): "
                + "participants \(String(format: "%.2f", cpu / wall)) cores, Janus \(String(format: "%.2f", janusCPU / wall)) cores; "
                + "uplink per speaker while speaking 3 s: \(Set(uplink.map { $0 / 1000 }).sorted()) kB")

        // One speaks alone: everyone else's latest speaking list is that one.
        let speaker = count / 2
        let marks = all.map { mesh.nodes[$0].events.count }
        // Quiet first, as from a microphone: the speaking detector's noise floor comes down.
        _ = await mesh.call(speaker, ["cmd": "feed", "seconds": 2.5, "tone": 0], timeout: 30)
        _ = await mesh.call(speaker, ["cmd": "feed", "seconds": 2, "tone": 440], timeout: 30)
        for i in all where i != speaker {
            let lists = mesh.nodes[i].events.dropFirst(marks[i]).filter {
                $0["event"] as? String == "didUpdateSpeakingParticipants"
            }
            .map { $0["speakers"] as? [String] ?? [] }
            #expect(
                lists.contains([mesh.ids[speaker]]),
                "\(i) saw speakers \(lists); events: \(mesh.nodes[i].events.dropFirst(marks[i]).map { $0["event"] as? String ?? "?" })"
            )
        }
        #expect(await mesh.hangUpAll())
        for n in mesh.nodes { n.quit() }
    }
}

extension Array {
    /// `transform` of each element, one after the other.
    func asyncMap<T>(_ transform: (Element) async -> T) async -> [T] {
        var out: [T] = []
        for e in self { out.append(await transform(e)) }
        return out
    }
}

extension JanusServer {
    /// CPU seconds the server has used so far (user + system).
    var cpuSeconds: Double { NodeMesh.cpuSeconds(pid: process.process.processIdentifier) }
}
