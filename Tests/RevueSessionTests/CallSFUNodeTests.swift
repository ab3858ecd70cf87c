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

extension JanusServer {
    /// CPU seconds the server has used so far (user + system).
    var cpuSeconds: Double { NodeMesh.cpuSeconds(pid: process.process.processIdentifier) }
}
