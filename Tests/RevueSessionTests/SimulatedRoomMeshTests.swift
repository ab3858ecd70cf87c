// The mesh of four on simulated time: joins by any member, in-call messages and mute requests on
// both delegate layers, names following the friend's, leaving and hanging up with one member,
// calling in again. Signalling only (the room's media legs are off), so the events come at the
// same simulated times in every run.
import Foundation
import MediaCore
import MediaTestSupport
import Testing

@testable import RevueSession

/// Where an in-call message's results land. Main actor.
@MainActor
final class RoomMessageOutcome {
    var results: [String: Result<UInt32, FriendMessageError>]?
}

@MainActor
@Suite struct SimulatedRoomMeshTests {
    @Test func fourPeersFormAMeshAndEveryoneSeesEveryoneJoinAndLeave() async throws {
        let world = SimulatedWorld(seed: 11)
        defer { world.close() }
        let peers = try world.addCallPeers(["a", "b", "c", "d"])
        #expect(try world.befriendAll(peers))
        let (a, b, c, d) = (peers[0], peers[1], peers[2], peers[3])
        let start = world.time.now

        #expect(try world.startCall(a, b))
        #expect(try world.startCall(a, c), "a invites more friends into the running call")
        #expect(try world.startCall(b, d), "and so can any member")
        #expect(world.run(until: .seconds(10)) { peers.allSatisfy { $0.room.remoteParticipants.count == 3 } }, "full mesh")
        let formed = world.time.now - start
        for p in peers {
            #expect(Set(p.room.remoteParticipants.keys) == Set(peers.filter { $0 !== p }.map(\.id)))
            for (id, r) in p.room.remoteParticipants { #expect(r.identity == id) }
        }
        world.run(for: .milliseconds(300))
        for p in peers {
            let connects = p.recorder.room.filter { $0.hasPrefix("connect") }
            #expect(connects.count == 3, "\(p.name): \(connects)")
        }

        // An in-call message reaches everyone on both layers; a mute request too.
        // The 1 s timeout is clamped to 5 s.
        let sent = RoomMessageOutcome()
        Task { @MainActor in sent.results = try? await a.room.localParticipant.sendMessage("hello all", timeout: 1) }
        #expect(
            await world.runYielding(until: .seconds(10)) {
                [b, c, d].allSatisfy { $0.recorder.room.contains("message(a,hello all)") }
            })
        for p in [b, c, d] { #expect(p.recorder.participant.contains("message(a,hello all)")) }
        #expect(await world.runYielding(until: .seconds(10)) { sent.results != nil })
        #expect(Set(sent.results?.keys ?? [:].keys) == [b.id, c.id, d.id])
        #expect(sent.results?.values.allSatisfy { if case .success = $0 { true } else { false } } == true)
        #expect(c.room.remoteParticipants[d.id]!.sendMuteRequest(isMuted: true))
        #expect(world.run(d, roomEvent: "muteRequest(c,true)"))
        #expect(d.recorder.participant.filter { $0 == "muteRequest(c,true)" }.count == 1)

        // Names follow the friend's, on both layers, the renamed one's own too.
        c.revue.setSelfName("Carol")
        for p in [a, b, d, c] {
            #expect(world.run(p, roomEvent: "name(c,Carol)"), "\(p.name)")
            #expect(p.recorder.participant.contains("name(c,Carol)") || p === c)
        }
        for p in [a, b, d] { #expect(p.room.remoteParticipants[c.id]?.name == "Carol") }
        #expect(c.room.localParticipant.name == "Carol")

        // d leaves: everyone sees it; the rest stay connected.
        d.room.disconnectAll()
        for p in [a, b, c] {
            #expect(world.run(p, roomEvent: "disconnect(d,remoteHangUp)"), "\(p.name)")
            #expect(p.recorder.participant.contains("disconnected(d,remoteHangUp)"))
            #expect(p.room.remoteParticipants.count == 2)
        }
        #expect(world.run(until: .seconds(10)) { d.room.remoteParticipants.isEmpty })
        #expect(d.recorder.room.filter { $0.hasPrefix("disconnect") }.count == 3)
        // b hangs up with a only: a and b part, c keeps both.
        b.room.remoteParticipants[a.id]!.disconnect()
        #expect(world.run(until: .seconds(10)) { a.room.remoteParticipants[b.id] == nil })
        #expect(a.room.remoteParticipants.keys.sorted() == [c.id])
        #expect(Set(c.room.remoteParticipants.keys) == [a.id, b.id])
        // And d can call in again, joining a and c through the mesh.
        #expect(try world.startCall(d, c))
        #expect(world.run(until: .seconds(10)) { d.room.remoteParticipants.count == 3 }, "d back with a, c, b")
        for p in peers { p.room.disconnectAll() }
        #expect(world.run(until: .seconds(10)) { peers.allSatisfy { $0.room.remoteParticipants.isEmpty } })
        // (Events about different participants come in the order of the room's participant
        // table, which follows their random identities: print what does not depend on it.)
        let kinds = Dictionary(grouping: a.recorder.room) { $0.prefix { $0 != "(" } }.mapValues(\.count)
        print("simulated mesh of four: formed in \(formed), events of a by kind: \(kinds.sorted { $0.key < $1.key })")
    }
}
