// A room of revue-node processes whose media goes through a real Janus (`--sfu`): every
// participant receives every other's media, each uplink carries one copy, and the figures (CPU per
// participant, Janus's CPU, join time, uplink bytes) are printed for docs/performance.md.
import Foundation
import MediaTestSupport
import Testing

@testable import RevueSession

@Suite(.serialized, .enabled(if: NodeProcess.binary != nil, "revue-node is not built (swift build)"))
struct CallSFUNodeTests {
    /// `REVUE_SFU_NODES` participants (4 by default: 6 and 10 need more than this 2-core
    /// machine's CPU, docs/performance.md) encoding at 320x180 (`REVUE_SFU_VIDEO_SIZE`), 15 fps,
    /// with Opus, E2EE on.
    @Test func everyNodeOfAnSFURoomReceivesEveryOtherOnce() async throws {
        let count = Int(ProcessInfo.processInfo.environment["REVUE_SFU_NODES"] ?? "") ?? 4
        let janus = try JanusServer()
        defer { janus.stop() }
        do {
            try await janus.waitUntilReady(seconds: 15)
        } catch {
            Issue.record("Janus did not start: \(error)")
            throw error
        }
        let room = UInt64.random(in: 1...1_000_000)
        let mesh = try await NodeMesh(
            count: count, videoSize: ProcessInfo.processInfo.environment["REVUE_SFU_VIDEO_SIZE"] ?? "320x180",
            extra: ["--sfu", "http://127.0.0.1:\(janus.port)/janus", "--sfu-room", "\(room)"])
        defer { mesh.stop() }
        let all = Array(0..<count)
        let started = monotonicNow()
        for i in 1..<count { try await mesh.invite(0, i) }
        let formed = await mesh.waitForMesh(all, timeout: 60)
        let joinTime = monotonicNow() - started
        #expect(formed, "the SFU room did not complete")
        let janusCPU0 = NodeMesh.cpuSeconds(pid: janus.process.process.processIdentifier)
        let r = await mesh.checkMedia(all, seconds: 4)
        let janusCPU = NodeMesh.cpuSeconds(pid: janus.process.process.processIdentifier) - janusCPU0
        #expect(r.failures.isEmpty, "\(r.failures)")
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
}
