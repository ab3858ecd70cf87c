// The friend flow on simulated time: befriending, profile updates in order on both sides, twenty
// messages in order with their receipts, reserved messages, round-trip times, presence from the
// rendezvous node, and deleting a friend, with every wait bounded in simulated time.
import Foundation
import MediaCore
import MediaTestSupport
import Testing

@testable import RevueSession

@MainActor
@Suite struct SimulatedFriendFlowTests {
    @Test func befriendRenameMessageAndDeleteInOrder() async throws {
        let world = SimulatedWorld(seed: 5)
        defer { world.close() }
        let alice = try world.addPeer("alice"), bob = try world.addPeer("bob")
        #expect(world.run(until: .seconds(5)) { alice.events.contains(.discoverable(true)) })

        try alice.friends.addFriend(address: bob.revue.revueAddress, message: "it's Alice")
        #expect(world.run(until: .seconds(10)) { bob.requests.contains(alice.id) })
        try bob.friends.addFriendNorequest(friendId: alice.id)
        #expect(world.run(until: .seconds(10)) { alice.isOnline(with: bob) && bob.isOnline(with: alice) })
        #expect(alice.friends.getFriendList() == [bob.id])
        #expect(bob.friends.getFriendList() == [alice.id])
        #expect(bob.friendEvents.first == .request(alice.id, "it's Alice"))
        let paths = alice.friends.getFriendPaths(friendId: bob.id)
        #expect(paths.isOnline && paths.paths.first?.kind == .directLAN, "\(paths)")

        alice.revue.setSelfName("Alice")
        alice.revue.setSelfStatusMessage("In the office until 6")
        alice.revue.setSelfStatus(.busy)
        #expect(world.run(until: .seconds(5)) { bob.events.contains(.status(alice.id, .busy)) })
        // (Path events are the connection's own business.)
        let profileEvents = bob.friendEvents.filter { if case .paths = $0 { false } else { true } }
        #expect(
            profileEvents.suffix(3) == [
                .name(alice.id, "Alice"), .statusMessage(alice.id, "In the office until 6"), .status(alice.id, .busy),
            ])
        // Own echo: exactly once each, with the own identity.
        #expect(world.run(until: .seconds(5)) { alice.events.contains(.status(alice.id, .busy)) })
        #expect(alice.friendEvents.filter { if case .name = $0 { true } else { false } } == [.name(alice.id, "Alice")])
        #expect(bob.friends.getFriendName(friendId: alice.id) == "Alice")
        #expect(bob.friends.getFriendStatusMessage(friendId: alice.id) == "In the office until 6")
        #expect(bob.friends.getFriendStatus(friendId: alice.id) == .busy)
        let eventsBefore = alice.events.count + bob.events.count
        alice.revue.setSelfName("Alice")  // unchanged: no event anywhere
        world.run(for: .milliseconds(500))
        #expect(alice.events.count + bob.events.count == eventsBefore, "\(alice.events.suffix(3)) \(bob.events.suffix(3))")

        let outcomes = (0..<20).map { alice.send("m\($0)", to: bob) }
        #expect(await world.runYielding(until: .seconds(10)) { outcomes.allSatisfy { $0.result != nil } })
        let ids = outcomes.compactMap { try? $0.result?.get() }
        #expect(ids.count == 20 && Set(ids).count == 20)
        let received = bob.friendEvents.compactMap { if case .message(let id, let m) = $0, id == alice.id { m } else { nil } }
        #expect(received == (0..<20).map { "m\($0)" })

        // The App cannot send the reserved format; one that arrives anyway (from another client)
        // reaches nothing but still gets a receipt.
        let swallowed = bob.revue.counters.reservedMessagesSwallowed
        let reserved = alice.send(#" {"type":"track","op":"publish"}"#, to: bob)
        #expect(await world.runYielding(until: .seconds(1)) { reserved.result != nil })
        #expect(reserved.result.map { if case .failure(.reservedFormat) = $0 { true } else { false } } == true)
        let raw = RawSendOutcome()
        let core = alice.core, bobID = bob.id
        Task { @MainActor in
            raw.result = await core.sendMessage(friendId: bobID, message: #"{"type":"msg","x":1}"#, timeout: .seconds(10))
        }
        let note = alice.send(#"{"kind":"chat","type":"note"}"#, to: bob)
        #expect(await world.runYielding(until: .seconds(10)) { raw.result != nil && note.result != nil })
        #expect((try? raw.result?.get()) != nil, "a receipt for the reserved message")
        #expect(bob.events.contains(.message(alice.id, #"{"kind":"chat","type":"note"}"#)))
        #expect(bob.revue.counters.reservedMessagesSwallowed == swallowed + 1)
        #expect(!bob.events.contains(.message(alice.id, #"{"type":"msg","x":1}"#)))

        // Keepalives measure each path's round-trip time: 2 ms on these 1 ms links.
        #expect(
            world.run(until: .seconds(5)) { alice.friends.getFriendPaths(friendId: bob.id).paths.first?.roundTripTime != nil })
        let rtt = alice.friends.getFriendPaths(friendId: bob.id).paths.first?.roundTripTime ?? -1
        #expect(rtt >= 0.002 && rtt < 0.01, "\(rtt)")

        // Presence comes from the rendezvous node.
        #expect(world.run(until: .seconds(5)) { alice.friends.getFriendPresenceStatus(friendId: bob.id) == .online })
        #expect(world.run(until: .seconds(5)) { bob.friends.getFriendPresenceStatus(friendId: alice.id) == .busy })

        let deletedAt = world.time.now
        try alice.friends.deleteFriend(friendId: bob.id)
        #expect(alice.friends.getFriendList().isEmpty)
        #expect(world.run(until: .seconds(2)) { bob.events.contains(.paths(alice.id, false)) }, "bob learns at once")
        let learned = world.time.now - deletedAt
        // The goodbye (on the friend's link), not the connection timeout.
        #expect(learned < .milliseconds(100), "\(learned)")
        #expect(throws: FriendDeleteError.notFound) { try alice.friends.deleteFriend(friendId: bob.id) }
        let late = bob.send("still there?", to: alice)
        #expect(await world.runYielding(until: .seconds(1)) { late.result != nil })
        #expect(late.result.map { if case .failure(.friendNotReachable) = $0 { true } else { false } } == true)
        world.run(for: .milliseconds(500))
        #expect(alice.friendEvents.filter { if case .message = $0 { true } else { false } }.isEmpty)
        #expect(alice.revue.counters.droppedNonFriend > 0 || alice.revue.counters.droppedUnknownSession > 0)
        print("simulated friend flow: rtt \(rtt) s, the deletion reached bob after \(learned)")
    }
}

/// Where a raw core send lands. Main actor.
@MainActor
final class RawSendOutcome {
    var result: Result<UInt32, FriendMessageError>?
}
