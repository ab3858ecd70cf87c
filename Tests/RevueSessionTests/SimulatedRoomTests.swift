// Rooms formed on simulated time: every invitee of a large mesh call must end up connected to
// every other participant (through the host's introductions), on every participant, every run.
// The media legs are off (signalling only): the friend links and media sockets are real sockets.
import Foundation
import MediaCore
import MediaTestSupport
import Testing

@testable import RevueSession

@MainActor
@Suite struct SimulatedRoomTests {
    /// `count` peers, all friends; the first invites all the others at once, each accepts when the
    /// invitation arrives; returns, per peer, the participants it lacks when `timeout` ends.
    func formRoom(
        count: Int, link: ImpairmentModel.Settings, seed: UInt64, timeout: Duration,
        tweak: (inout RevueConfiguration) -> Void = { _ in }
    ) throws -> [String: [String]] {
        let world = SimulatedWorld(seed: seed, link: link)
        defer { world.close() }
        var peers: [SimulatedPeer] = []
        for n in 0..<count { peers.append(try world.addPeer("p\(n)", tweak: tweak)) }
        for p in peers { p.room.mediaLegsEnabled = false }
        #expect(try world.befriendAll(peers), "every pair online")
        let host = peers[0]
        for p in peers.dropFirst() { try host.friends.sendInvitation(friendId: p.id, message: "room") }
        var accepted = Set<String>()
        let everyone = Set(peers.map(\.id))
        world.run(until: timeout) {
            for p in peers.dropFirst() where !accepted.contains(p.id) && p.room.invitations[host.id] != nil {
                if (try? p.friends.acceptInvitation(friendId: host.id)) != nil { accepted.insert(p.id) }
            }
            return peers.allSatisfy { Set($0.room.remoteParticipants.keys).union([$0.id]) == everyone }
        }
        var missing: [String: [String]] = [:]
        for p in peers {
            let lacks = peers.filter { $0 !== p && p.room.remoteParticipants[$0.id] == nil }.map(\.name)
            if !lacks.isEmpty { missing[p.name] = lacks }
        }
        print("room of \(count), seed \(seed), \(link.delayMilliseconds) ms: formed at \(world.time.now), missing \(missing)")
        return missing
    }

    /// Links of 20 ms one way with 10 ms of jitter and 2 % loss, the default timeouts.
    @Test(arguments: [UInt64(1), 2])
    func aRoomOfTwentyFiveFormsCompletelyOnEveryParticipant(seed: UInt64) throws {
        var link = ImpairmentModel.Settings(delayMilliseconds: 20)
        link.jitterMilliseconds = 10
        link.loss = 0.02
        let missing = try formRoom(count: 25, link: link, seed: seed, timeout: .seconds(30)) {
            $0.timeouts = RevueTimeouts()
        }
        #expect(missing.isEmpty, "participants missing: \(missing)")
    }

    /// Round trips longer than the handshake retry interval (150 ms one way, retries every
    /// 200 ms): every pair's first handshakes cross.
    @Test func aRoomOfTwentyFiveFormsWhenHandshakesCross() throws {
        let missing = try formRoom(
            count: 25, link: ImpairmentModel.Settings(delayMilliseconds: 150), seed: 1, timeout: .seconds(30))
        #expect(missing.isEmpty, "participants missing: \(missing)")
    }
}
