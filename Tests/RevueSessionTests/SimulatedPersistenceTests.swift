// Messages across a friend's crash and across an outage, on simulated time: the reliable stream
// keeps what was sent until the friend can take it, and the sender gets its receipt then. Each
// test prints its figures, which are the same in every run.
import Foundation
import MediaCore
import MediaTestSupport
import Testing

@testable import RevueSession

@MainActor
@Suite struct SimulatedPersistenceTests {
    /// A message sent while the friend is down (crashed, not yet offline for the sender) arrives
    /// once he is back, and the sender's `sendMessage` returns with the receipt, well within its
    /// 10 s timeout.
    /// Bob crashes and comes back: the same identity and friend, Alice's name known, and no
    /// replay of the messages he already acknowledged; Alice restarts cleanly and keeps her own
    /// profile.
    @Test func identityProfileAndFriendsSurviveRestartAndMessagesAreNotRedelivered() async throws {
        let world = SimulatedWorld(seed: 3)
        defer { world.close() }
        let alice = try world.addPeer("alice"), bob = try world.addPeer("bob")
        #expect(try world.befriend(alice, bob))
        alice.revue.setSelfName("Alice")
        #expect(world.run(until: .seconds(5)) { bob.events.contains(.name(alice.id, "Alice")) })
        let address = bob.revue.revueAddress
        let before = (0..<3).map { alice.send("before \($0)", to: bob) }
        #expect(await world.runYielding(until: .seconds(10)) { before.allSatisfy { $0.result != nil } })
        #expect(bob.messages.map(\.text) == ["before 0", "before 1", "before 2"])

        bob.revue.abandonForTesting()
        bob.clearEvents()
        world.run(for: .milliseconds(300))
        try bob.restart()
        #expect(bob.revue.revueAddress == address)
        #expect(bob.friends.getFriendList() == [alice.id])
        #expect(bob.friends.getFriendName(friendId: alice.id) == "Alice")
        #expect(world.run(until: .seconds(5)) { bob.events.contains(.paths(alice.id, true)) })
        let after = (0..<3).map { alice.send("after \($0)", to: bob) }
        #expect(await world.runYielding(until: .seconds(10)) { after.allSatisfy { $0.result != nil } })
        world.run(for: .milliseconds(500))
        #expect(bob.messages.map(\.text) == ["after 0", "after 1", "after 2"])
        #expect(!bob.friendEvents.contains(.name(alice.id, "Alice")), "an unchanged name is not announced again")

        alice.revue.destroy()
        world.run(for: .milliseconds(100))
        try alice.restart()
        #expect(alice.revue.selfName == "Alice")
        #expect(alice.friends.getFriendList() == [bob.id])
    }

    @Test func aMessageInFlightWhenTheFriendCrashesArrivesAfterItsRestart() async throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let alice = try world.addPeer("alice"), bob = try world.addPeer("bob")
        #expect(try world.befriend(alice, bob))
        bob.revue.abandonForTesting()
        let outcome = alice.send("while you were out", to: bob, timeout: 10)
        await world.runYielding(until: .milliseconds(300)) { false }
        let restartedAt = world.time.now
        try bob.restart()
        #expect(await world.runYielding(until: .seconds(5)) { bob.messages.map(\.text) == ["while you were out"] })
        let arrivedAfter = world.time.now - restartedAt
        #expect(await world.runYielding(until: .seconds(5)) { outcome.result != nil })
        print("message in flight: arrived \(arrivedAfter) after the restart, receipt after \(world.time.now - restartedAt)")
        if case .success = outcome.result {
        } else {
            Issue.record("expected a receipt, got \(String(describing: outcome.result))")
        }
        #expect(arrivedAfter <= .milliseconds(200), "arrived after \(arrivedAfter)")
    }

    /// No rendezvous node, so no relay: the friends know each other's endpoint only from the
    /// request and the handshake. An outage (every direct send dropped) takes Bob offline for
    /// Alice while three messages wait; when the path works again they all arrive, in order, and
    /// each sender gets its receipt.
    @Test func anOutageLosesNoQueuedMessage() async throws {
        let world = SimulatedWorld()
        defer { world.close() }
        let alice = try world.addPeer("alice") { $0.rendezvousNodes = [] }
        let bob = try world.addPeer("bob") { $0.rendezvousNodes = [] }
        try alice.friends.addFriend(address: bob.revue.revueAddress, message: "hi")
        alice.core.friends[bob.id]!.candidates[.direct(SocketAddress(SimulatedWorld.host(1), port: bob.revue.port))] =
            world.time.now
        #expect(world.run(until: .seconds(5)) { bob.requests.contains(alice.id) })
        try bob.friends.addFriendNorequest(friendId: alice.id)
        #expect(world.run(until: .seconds(5)) { alice.isOnline(with: bob) && bob.isOnline(with: alice) })
        alice.core.environment.faults.dropDirectSends = true
        bob.core.environment.faults.dropDirectSends = true
        let outageAt = world.time.now
        let outcomes = (0..<3).map { alice.send("o\($0)", to: bob, timeout: 10) }
        #expect(await world.runYielding(until: .seconds(3)) { !alice.isOnline(with: bob) })
        let offlineAfter = world.time.now - outageAt
        alice.core.environment.faults.dropDirectSends = false
        bob.core.environment.faults.dropDirectSends = false
        let restoredAt = world.time.now
        #expect(await world.runYielding(until: .seconds(6)) { outcomes.allSatisfy { $0.result != nil } })
        print("outage: offline after \(offlineAfter), every receipt \(world.time.now - restoredAt) after the path came back")
        #expect(outcomes.allSatisfy { (try? $0.result?.get()) != nil }, "\(outcomes.map { String(describing: $0.result) })")
        #expect(bob.messages.map(\.text) == ["o0", "o1", "o2"])
    }
}
