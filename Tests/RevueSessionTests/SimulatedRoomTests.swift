// Rooms formed on simulated time: every invitee of a large mesh call must end up connected to
// every other participant (through the host's introductions), on every participant, every run.
// The media legs are off (signalling only): the friend links and media sockets are real sockets.
import Foundation
import MediaCore
import MediaTestSupport
import MediaTools
import Testing

@testable import RevueSession

@MainActor
@Suite struct SimulatedRoomTests {
    /// `count` peers, all friends; the first invites all the others at once, each accepts when the
    /// invitation arrives; returns, per peer, the participants it lacks when `timeout` ends.
    func formRoom(
        count: Int, link: ImpairmentModel.Settings, seed: UInt64, timeout: Duration,
        diskDelay: Duration = .zero, tweak: (inout RevueConfiguration) -> Void = { _ in }
    ) throws -> [String: [String]] {
        let world = SimulatedWorld(seed: seed, link: link)
        defer { world.close() }
        var peers: [SimulatedPeer] = []
        for n in 0..<count { peers.append(try world.addPeer("p\(n)", tweak: tweak)) }
        for p in peers {
            p.room.environment.mediaLegs = false
            p.core.store.queuedWriteDelayForTesting = diskDelay
        }
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
        let refused = peers.map { $0.core.counters.callSignalsRefused }.reduce(0, +)
        print(
            "room of \(count), seed \(seed), \(link.delayMilliseconds) ms, disk \(diskDelay): formed at \(world.time.now), "
                + "refused signals \(refused), missing \(missing)")
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

    /// Every receipt waits 300 ms for the receiver's disk, so each friend's stream holds many
    /// unacknowledged call signals while 24 newcomers are introduced to each other.
    @Test func aRoomOfTwentyFiveFormsOnSlowDisks() throws {
        var link = ImpairmentModel.Settings(delayMilliseconds: 20)
        link.loss = 0.02
        let missing = try formRoom(count: 25, link: link, seed: 4, timeout: .seconds(30), diskDelay: .milliseconds(300)) {
            $0.timeouts = RevueTimeouts()
        }
        #expect(missing.isEmpty, "participants missing: \(missing)")
    }

    /// `count` peers, all friends, with the default timeouts and a 10 s call lost timeout, media
    /// legs off; the first invites every other but the last, and all but the last form a call.
    func callOfAllButTheLast(_ world: SimulatedWorld, count: Int) throws -> [SimulatedPeer] {
        var peers: [SimulatedPeer] = []
        for n in 0..<count {
            peers.append(
                try world.addPeer("p\(n)") {
                    $0.timeouts = RevueTimeouts()
                    $0.timeouts.callLostTimeout = 10
                })
        }
        for p in peers { p.room.environment.mediaLegs = false }
        #expect(try world.befriendAll(peers))
        let host = peers[0], members = peers[1..<(count - 1)]
        for p in members { try host.friends.sendInvitation(friendId: p.id, message: "room") }
        #expect(
            world.run(until: .seconds(10)) {
                for p in members where p.room.invitations[host.id] != nil {
                    _ = try? p.friends.acceptInvitation(friendId: host.id)
                }
                return peers.dropLast().allSatisfy { $0.room.remoteParticipants.count == count - 2 }
            })
        return peers
    }

    /// The host (the first peer) invites the last one, which accepts; runs until they are in call.
    func letTheLastJoinTheHost(_ world: SimulatedWorld, _ peers: [SimulatedPeer]) throws {
        let host = peers[0], late = peers[peers.count - 1]
        try host.friends.sendInvitation(friendId: late.id, message: "room")
        #expect(world.run(until: .seconds(5)) { late.room.invitations[host.id] != nil })
        try late.friends.acceptInvitation(friendId: host.id)
        #expect(world.run(until: .seconds(5)) { late.room.remoteParticipants[host.id] != nil })
    }

    /// Runs until every peer has every other as a participant, or `timeout`; whether it did, and
    /// the participant count of each peer that lacks some.
    func runUntilFull(_ world: SimulatedWorld, _ peers: [SimulatedPeer], timeout: Duration) -> (Bool, [String]) {
        let full = peers.count - 1
        let formed = world.run(until: timeout) { peers.allSatisfy { $0.room.remoteParticipants.count == full } }
        let lacking = peers.filter { $0.room.remoteParticipants.count < full }.map {
            "\($0.name): \($0.room.remoteParticipants.count)"
        }
        return (formed, lacking)
    }

    /// A newcomer loses its network for 2.5 s (longer than the connection timeout, shorter than
    /// the call's 10 s lost timeout) right after it joined the host, while the host introduces it
    /// to the 23 others: once it is back, it must still join every one of them.
    @Test func aNewcomerCutOffWhileBeingIntroducedStillJoinsEveryone() throws {
        let world = SimulatedWorld(seed: 5, link: ImpairmentModel.Settings(delayMilliseconds: 20))
        defer { world.close() }
        let peers = try callOfAllButTheLast(world, count: 25)
        try letTheLastJoinTheHost(world, peers)
        world.network.setCut(SimulatedWorld.host(24), true)
        world.run(for: .milliseconds(2500))
        world.network.setCut(SimulatedWorld.host(24), false)
        let (formed, lacking) = runUntilFull(world, peers, timeout: .seconds(30))
        print("newcomer cut for 2.5 s: formed \(formed) at \(world.time.now), lacking \(lacking)")
        #expect(formed, "lacking: \(lacking)")
    }

    /// A member of the call is cut off for 3 s (offline for everyone, but inside the call's 10 s
    /// lost timeout) while a newcomer joins and the host introduces it: once the member is back,
    /// the newcomer and the member must still join each other.
    @Test func aMemberOfflineWhileANewcomerIsIntroducedStillJoinsIt() throws {
        let world = SimulatedWorld(seed: 6, link: ImpairmentModel.Settings(delayMilliseconds: 20))
        defer { world.close() }
        let peers = try callOfAllButTheLast(world, count: 6)
        let away = peers[2], late = peers[5]
        world.network.setCut(SimulatedWorld.host(2), true)
        world.run(for: .seconds(2))
        try letTheLastJoinTheHost(world, peers)
        world.run(for: .seconds(1))
        world.network.setCut(SimulatedWorld.host(2), false)
        let (formed, lacking) = runUntilFull(world, peers, timeout: .seconds(20))
        print("member cut for 3 s while a newcomer joined: formed \(formed) at \(world.time.now), lacking \(lacking)")
        #expect(formed, "lacking: \(lacking)")
        #expect(away.room.remoteParticipants[late.id] != nil && late.room.remoteParticipants[away.id] != nil)
    }
}
