// Invitations sent the moment two peers become friends, on simulated time: the race that lost
// such an invitation under load (each side's first handshakes crossing, so one side kept a session
// the other had already replaced) is played out deterministically by a link slower than the
// handshake retry interval.
import Foundation
import MediaCore
import MediaTestSupport
import MediaTools
import Testing

@testable import RevueSession

@MainActor
@Suite struct SimulatedInvitationTests {
    /// One world: befriend over links of `oneWayMs`, invite at once, report what happened.
    func inviteRightAfterBefriending(oneWayMs: Double, seed: UInt64) throws -> (received: Bool, description: String) {
        let world = SimulatedWorld(seed: seed, link: ImpairmentModel.Settings(delayMilliseconds: oneWayMs))
        defer { world.close() }
        let a = try world.addPeer("a") { $0.timeouts.invitationTimeout = 3 }
        let b = try world.addPeer("b") { $0.timeouts.invitationTimeout = 3 }
        guard try world.befriend(a, b) else { return (false, "never befriended") }
        let befriendedAt = world.time.now
        try a.friends.sendInvitation(friendId: b.id, message: "video")
        let received = world.run(until: .seconds(3)) { b.calls.contains("received(a,video)") }
        let took = world.time.now - befriendedAt
        let ca = a.core.counters, cb = b.core.counters
        return (
            received,
            "\(oneWayMs) ms one way, seed \(seed): received \(received) after \(took); a \(a.calls) b \(b.calls); "
                + "a handshakes \(ca.handshakesCompleted) unknown-session drops \(ca.droppedUnknownSession); "
                + "b handshakes \(cb.handshakesCompleted) unknown-session drops \(cb.droppedUnknownSession)"
        )
    }

    @Test(arguments: [1.0, 60, 120, 150, 250, 400, 700])
    func anInvitationSentTheMomentFriendsConnectArrives(oneWayMs: Double) throws {
        var failures: [String] = []
        for seed in UInt64(1)...4 {
            let r = try inviteRightAfterBefriending(oneWayMs: oneWayMs, seed: seed)
            print(r.description)
            if !r.received { failures.append(r.description) }
        }
        #expect(failures.isEmpty, "\(failures)")
    }
}
