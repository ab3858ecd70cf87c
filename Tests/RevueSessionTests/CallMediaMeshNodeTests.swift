import Foundation
import MediaCore
import Testing

@testable import RevueSession

#if canImport(Glibc)
    import Glibc
#endif

/// A room of `revue-node` processes on loopback, all friends of each other, driven from the test
/// the way a script drives them: `invite`, `accept-call`, `feed`, `media-stats`.
final class NodeMesh: @unchecked Sendable {
    let rendezvous: NodeProcess
    let nodes: [NodeProcess]
    var ids: [String] = []
    let dir: String

    /// Starts `count` peers (encoding video at `videoSize`) and makes every pair friends.
    init(count: Int, videoSize: String = "160x120", extra: [String] = [], befriend: Bool = true) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("revue-mesh-\(UUID().uuidString)").path
        self.dir = dir
        let (rendezvous, address) = try await NodeProcess.rendezvous()
        self.rendezvous = rendezvous
        nodes = try (0..<count).map {
            try NodeProcess(
                [
                    "--data", "\(dir)/\($0)", "--host", "127.0.0.1", "--name", "n\($0)", "--rendezvous", address,
                    "--video-size", videoSize,
                ] + extra)
        }
        var addresses: [String] = []
        for n in nodes {
            guard let r = await n.wait(timeout: 20, event("ready")) else {
                throw NodeProcessError(message: "a peer did not start")
            }
            ids.append(r["revueId"] as! String)
            addresses.append(r["address"] as! String)
        }
        guard befriend else { return }
        for i in 0..<count {
            for j in (i + 1)..<count {
                nodes[i].send(["cmd": "add-friend", "address": addresses[j], "message": "hi"])
                guard await nodes[j].wait(timeout: 20, event("didReceiveFriendRequest", ["friendId": ids[i]])) != nil else {
                    throw NodeProcessError(message: "no friend request \(i) -> \(j)")
                }
                nodes[j].send(["cmd": "accept", "friendId": ids[i]])
            }
        }
        for i in 0..<count {
            for j in 0..<count where i != j {
                guard
                    await nodes[i].wait(
                        timeout: 20,
                        {
                            $0["event"] as? String == "didUpdatePaths" && $0["friendId"] as? String == self.ids[j]
                                && $0["isOnline"] as? Bool == true
                        }) != nil
                else {
                    throw NodeProcessError(message: "\(j) never online at \(i)")
                }
            }
        }
    }

    func stop() {
        for n in nodes { n.kill() }
        rendezvous.kill()
        try? FileManager.default.removeItem(atPath: dir)
    }

    private var serial = 0
    /// Sends a command with a fresh id and waits for its `ok` (nil on error or timeout).
    func call(_ i: Int, _ command: [String: Any], timeout: Double = 20) async -> [String: Any]? {
        serial += 1
        let tag = "t\(serial)"
        nodes[i].send(command.merging(["id": tag]) { $1 })
        let reply = await nodes[i].wait(timeout: timeout) {
            ($0["event"] as? String == "ok" || $0["event"] as? String == "error") && $0["id"] as? String == tag
        }
        return reply?["event"] as? String == "ok" ? reply : nil
    }

    /// `inviter` invites `invitee`, who accepts once the invitation arrived.
    func invite(_ inviter: Int, _ invitee: Int) async throws {
        let before = nodes[invitee].events.filter(event("didReceiveInvitation", ["friendId": ids[inviter]])).count
        guard await call(inviter, ["cmd": "invite", "friendId": ids[invitee], "message": "join"]) != nil,
            await nodes[invitee].wait(timeout: 20, nth: before + 1, event("didReceiveInvitation", ["friendId": ids[inviter]]))
                != nil,
            await call(invitee, ["cmd": "accept-call", "friendId": ids[inviter]]) != nil
        else {
            throw NodeProcessError(message: "invitation \(inviter) -> \(invitee) failed")
        }
    }

    /// Looks every 200 ms until `look` says yes (true) or `timeout` seconds pass (false).
    func poll(timeout: Double, _ look: () async -> Bool) async -> Bool {
        let deadline = MonotonicTime.now + .seconds(timeout)
        while MonotonicTime.now < deadline {
            if await look() { return true }
            try? await Task.sleep(for: .milliseconds(200))
        }
        return false
    }

    /// Member `i`'s `media-stats` per participant (nil when it did not answer).
    func legs(_ i: Int) async -> [[String: Any]]? {
        (await call(i, ["cmd": "media-stats"]))?["participants"] as? [[String: Any]]
    }

    /// Waits until each of `members` has every other member as a participant with both tracks
    /// subscribed, and a media route (an ICE pair that answered) to each of them.
    func waitForMesh(_ members: [Int], tracks: Int = 2, timeout: Double = 30) async -> Bool {
        await poll(timeout: timeout) {
            for i in members {
                guard let room = await call(i, ["cmd": "room"]), let ps = room["participants"] as? [[String: Any]] else {
                    return false
                }
                let want = Set(members.filter { $0 != i }.map { ids[$0] })
                let subscribed = ps.filter { p in
                    let list = p["tracks"] as? [[String: Any]] ?? []
                    return list.count == tracks && list.allSatisfy { $0["isSubscribed"] as? Bool == true }
                }
                if Set(subscribed.compactMap { $0["friendId"] as? String }) != want || ps.count != want.count {
                    return false
                }
                guard let legs = await legs(i) else { return false }
                // A mesh leg has an ICE route; through an SFU, a connected subscription.
                let routed = legs.filter {
                    let path = $0["path"] as? [String: Any]
                    return path?["route"] as? String != nil
                        || (path?["subscribed"] as? Bool == true && path?["state"] as? String == "connected")
                }
                if Set(routed.compactMap { $0["friendId"] as? String }) != want { return false }
            }
            return true
        }
    }

    /// Waits until, through an SFU with end-to-end encryption, every member's publishing
    /// connection is up, its senders use the newest frame key IDs it announced, and every other
    /// member holds them (`media-stats`' path fields `publisherState`, `ownKeyIDs`,
    /// `ownKeysInUse` and `keyIDs`), twice in a row 200 ms apart, so that a rotation that begins
    /// just after one look is caught by the next.
    func waitForSFUSenders(_ members: [Int], timeout: Double = 30) async -> Bool {
        var settledLooks = 0
        return await poll(timeout: timeout) {
            var own: [String: Set<String>] = [:]
            var held: [String: [String: Set<String>]] = [:]  // receiver -> sender -> IDs
            var settled = true
            for i in members {
                guard let ps = await legs(i) else { settled = false; break }
                for p in ps {
                    guard let path = p["path"] as? [String: Any], let sender = p["friendId"] as? String else {
                        settled = false; continue
                    }
                    if path["publisherState"] as? String != "connected" { settled = false }
                    // Without end-to-end encryption there are no key fields and nothing to wait for.
                    guard let ownIDs = path["ownKeyIDs"] as? [String] else { continue }
                    if path["ownKeysInUse"] as? Bool != true { settled = false }
                    own[ids[i]] = Set(ownIDs)
                    held[ids[i], default: [:]][sender] = Set(path["keyIDs"] as? [String] ?? [])
                }
            }
            if settled {
                for r in members {
                    for s in members where s != r {
                        guard let sent = own[ids[s]] else { continue }
                        guard !sent.isEmpty, sent.isSubset(of: held[ids[r]]?[ids[s]] ?? [])
                        else { settled = false; break }
                    }
                }
            }
            settledLooks = settled ? settledLooks + 1 : 0
            return settledLooks >= 2
        }
    }

    /// Decoded video frames and loud audio samples per friend ID, as `media-stats` reports them.
    func mediaStats(_ i: Int) async -> [String: (frames: Int, loud: Int)] {
        guard let ps = await legs(i) else { return [:] }
        var out: [String: (Int, Int)] = [:]
        for p in ps { out[p["friendId"] as! String] = (p["videoFrames"] as? Int ?? 0, p["loudSamples"] as? Int ?? 0) }
        return out
    }

    /// Every member feeds `seconds` of tone and test video at once; then every member must have
    /// decoded >= 90 % of the frames each other member encoded and heard it (loud samples for at
    /// least half the fed time), and each sender must have encoded at least half the frames it was
    /// fed. The two video bounds keep apart what the call carries and what a sender's capture
    /// keeps: on a starved machine the capture ring drops frames the encoder could not take in
    /// time (it keeps the newest), as it would with a camera. Returns the failures (empty when
    /// every pair carried media both ways) and the CPU seconds (user + system) the members used
    /// during the feed.
    func checkMedia(_ members: [Int], seconds: Double = 3, video: Bool = true, senders: [Int]? = nil) async -> (
        failures: [String], cpu: Double, wall: Double, uplink: [Int]
    ) {
        let senders = senders ?? members
        var before: [Int: [String: (frames: Int, loud: Int)]] = [:]
        for i in members { before[i] = await mediaStats(i) }
        var uplink0: [Int] = []
        for i in members { uplink0.append(await uplinkBytes(i)) }
        var send0: [Int: [String: Int]] = [:]
        for i in senders { send0[i] = await videoSend(i) }
        let cpu0 = members.map { cpuSeconds(nodes[$0]) }.reduce(0, +)
        let t0 = MonotonicTime.now
        var tags: [Int: String] = [:]
        for i in senders {
            serial += 1
            tags[i] = "feed\(serial)"
            nodes[i].send(["cmd": "feed", "seconds": seconds, "tone": 300 + 100 * i, "id": tags[i]!])
        }
        var fed: [Int: (frames: Int, samples: Int)] = [:]
        var lagMs: [Int: Int] = [:]
        for i in senders {
            let done = await nodes[i].wait(timeout: seconds + 30) {
                $0["event"] as? String == "ok" && $0["id"] as? String == tags[i]
            }
            fed[i] = (done?["videoFramesFed"] as? Int ?? -1, done?["audioSamplesFed"] as? Int ?? -1)
            lagMs[i] = done?["maxLagMilliseconds"] as? Int ?? -1
        }
        // Let the last frames through the jitter buffers.
        try? await Task.sleep(for: .milliseconds(1000))
        let wall = (MonotonicTime.now - t0).inSeconds
        let cpu = members.map { cpuSeconds(nodes[$0]) }.reduce(0, +) - cpu0
        var failures: [String] = []
        var uplink: [Int] = []
        for (k, i) in members.enumerated() { uplink.append(await uplinkBytes(i) - uplink0[k]) }
        // A sender whose estimate fell (on a starved machine, late packets read as a queue) paces
        // what it encoded more slowly, up to the pacer's 2 s queue limit: wait, up to 3 s more,
        // until no receiver's frame count moves for half a second. The CPU and uplink figures above
        // stay those of the feed and 1 s.
        var lastTotal = -1, still = 0
        let drainEnd = MonotonicTime.now + .seconds(3)
        while still < 2 && MonotonicTime.now < drainEnd {
            var total = 0
            for i in members { total += (await mediaStats(i)).values.reduce(0) { $0 + $1.frames } }
            still = total == lastTotal ? still + 1 : 0
            lastTotal = total
            try? await Task.sleep(for: .milliseconds(250))
        }
        var encoded: [Int: Int] = [:]
        for j in senders where video {
            let e = (await videoSend(j))["framesEncoded"].map { $0 - (send0[j]?["framesEncoded"] ?? 0) } ?? -1
            encoded[j] = e
            if e * 2 < fed[j]!.frames { failures.append("sender \(j): encoded \(e) of \(fed[j]!.frames) fed frames") }
        }
        for i in members {
            let after = await mediaStats(i)
            for j in senders where j != i {
                let id = ids[j]
                let frames = (after[id]?.frames ?? 0) - (before[i]?[id]?.frames ?? 0)
                let loud = (after[id]?.loud ?? 0) - (before[i]?[id]?.loud ?? 0)
                let sent = encoded[j] ?? 0
                let needFrames = Int((Double(sent) * 0.9).rounded(.up))
                let needLoud = fed[j]!.samples / 2
                if (video && (sent <= 0 || frames < needFrames)) || loud < needLoud {
                    failures.append(
                        "\(i) from \(j): \(frames) of \(sent) encoded frames, \(loud) loud of \(fed[j]!.samples) samples")
                }
            }
        }
        if !failures.isEmpty {
            // Where a sender's frames went: its capture and encoder over the feed, and how far its
            // feed fell behind the clock (a starved feed catches up in a burst that the capture
            // ring, which keeps the newest frames, partly drops).
            for j in senders {
                let after = await videoSend(j)
                let delta = after.keys.sorted().map { k in
                    k == "targetBitrate" ? "\(k) \(after[k]!)" : "\(k) +\(after[k]! - (send0[j]?[k] ?? 0))"
                }
                failures.append("sender \(j): feed fell behind by up to \(lagMs[j] ?? -1) ms; \(delta.joined(separator: ", "))")
            }
        }
        return (failures, cpu, wall, uplink)
    }

    /// The member's video send counters (`media-stats` `videoSend`): captured, dropped by reason,
    /// encoded, the target bitrate and pacer overflows; empty without a video track.
    func videoSend(_ i: Int) async -> [String: Int] {
        (await call(i, ["cmd": "media-stats"]))?["videoSend"] as? [String: Int] ?? [:]
    }

    /// Media bytes the member has sent in this call (`media-stats` `uplinkBytes`).
    func uplinkBytes(_ i: Int) async -> Int {
        (await call(i, ["cmd": "media-stats"]))?["uplinkBytes"] as? Int ?? 0
    }

    /// Everyone hangs up; waits until every room is empty.
    func hangUpAll() async -> Bool {
        for i in nodes.indices { _ = await call(i, ["cmd": "hangup"]) }
        return await poll(timeout: 20) {
            for i in nodes.indices {
                let room = await call(i, ["cmd": "room"])
                if (room?["participants"] as? [Any])?.isEmpty != true { return false }
            }
            return true
        }
    }

    /// User + system CPU seconds of a process so far (/proc/PID/stat fields 14 and 15).
    func cpuSeconds(_ node: NodeProcess) -> Double { Self.cpuSeconds(pid: node.process.processIdentifier) }

    /// User + system CPU seconds of process `pid` so far.
    static func cpuSeconds(pid: Int32) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // Fields after the command: state is field 3, so utime (14) is at index 11, stime at 12.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}

/// Media on every leg of a mesh of real processes, however the mesh formed: each peer feeds a
/// tone and test video, and every peer must decode >= 90 % of the frames every other peer encoded
/// and hear its tone (`NodeMesh.checkMedia`).
@Suite(.serialized, .enabled(if: NodeProcess.binary != nil, "revue-node is not built (swift build)"))
struct CallMediaMeshNodeTests {
    /// The three ways a mesh of `mesh.nodes` forms, each followed by the media check on every leg
    /// and a hang-up: the host invites everyone; a member who is not the host invites the last
    /// newcomer; two running calls (the first half and the second half) merge. Returns the CPU
    /// cores the first formation used (for the figure in docs/session.md).
    @discardableResult
    static func everyFormationCarriesMedia(_ mesh: NodeMesh, seconds: Double) async throws -> Double {
        let n = mesh.nodes.count
        let all = Array(0..<n)

        // 1. The host invites everyone.
        for i in 1..<n { try await mesh.invite(0, i) }
        #expect(await mesh.waitForMesh(all), "host invites all: the mesh did not complete")
        var r = await mesh.checkMedia(all, seconds: seconds)
        #expect(r.failures.isEmpty, "host invites all: \(r.failures)")
        let cores = r.cpu / r.wall
        print("\(n)-peer mesh: uplink per peer while feeding \(seconds) s: \(r.uplink.map { "\($0 / 1000) kB" })")
        #expect(await mesh.hangUpAll())

        // 2. A member who is not the host invites a newcomer.
        for i in 1..<(n - 1) { try await mesh.invite(0, i) }
        #expect(await mesh.waitForMesh(Array(0..<(n - 1))))
        try await mesh.invite(1, n - 1)
        #expect(await mesh.waitForMesh(all), "member invites: the mesh did not complete")
        r = await mesh.checkMedia(all, seconds: seconds)
        #expect(r.failures.isEmpty, "member invites: \(r.failures)")
        #expect(await mesh.hangUpAll())

        // 3. Two running calls merge: 0 hosts the first half, h the second, then 0 invites h.
        let h = n / 2
        for i in 1..<h { try await mesh.invite(0, i) }
        for i in (h + 1)..<n { try await mesh.invite(h, i) }
        #expect(await mesh.waitForMesh(Array(0..<h)))
        #expect(await mesh.waitForMesh(Array(h..<n)))
        try await mesh.invite(0, h)
        #expect(await mesh.waitForMesh(all), "merge: the mesh did not complete")
        r = await mesh.checkMedia(all, seconds: seconds)
        #expect(r.failures.isEmpty, "merge: \(r.failures)")
        #expect(await mesh.hangUpAll())
        return cores
    }

    @Test func fourPeersCarryMediaOnEveryLegHoweverTheMeshFormed() async throws {
        let mesh = try await NodeMesh(count: 4)
        defer { mesh.stop() }
        try await Self.everyFormationCarriesMedia(mesh, seconds: 3)
        for n in mesh.nodes { n.quit() }
    }

    @Test func sixPeersCarryMediaOnEveryLegHoweverTheMeshFormed() async throws {
        // REVUE_MESH_VIDEO_SIZE (for example 320x180, the feed's own size) measures another size.
        let size = ProcessInfo.processInfo.environment["REVUE_MESH_VIDEO_SIZE"] ?? "160x120"
        let mesh = try await NodeMesh(count: 6, videoSize: size)
        defer { mesh.stop() }
        let cores = try await Self.everyFormationCarriesMedia(mesh, seconds: 4)
        // The figure docs/session.md quotes: CPU of the six processes over the feed, in cores.
        print("six-peer room at \(size): \(String(format: "%.2f", cores)) cores while every peer feeds")
        for n in mesh.nodes { n.quit() }
    }
}
