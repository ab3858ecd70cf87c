// Privacy properties whose checks take time, on simulated time: friends that reach each other only
// through the rendezvous node's relay keep talking across an epoch change (new tags, new
// registration keys).
import Foundation
import MediaCore
import MediaTestSupport
import Testing

@testable import RevueSession

@MainActor
@Suite struct SimulatedPrivacyTests {
    @Test func relayedFriendsKeepTalkingAcrossAnEpochChange() async throws {
        let world = SimulatedWorld(seed: 8)
        defer { world.close() }
        let alice = try world.addPeer("alice"), bob = try world.addPeer("bob")
        let mid = (world.wallClock() / 3600).rounded(.down) * 3600 + 1800
        let epoch = SimulatedEpoch(mid)
        for p in [alice, bob] {
            p.core.environment.faults.dropDirectSends = true
            p.core.environment.wallClock = { epoch.seconds }
        }
        #expect(try world.befriend(alice, bob))
        #expect(alice.friends.getFriendPaths(friendId: bob.id).paths.first?.kind == .relayed)
        let tagsBefore = Set(alice.core.registrationTags() + bob.core.registrationTags())
        let keyBefore = alice.core.nodeStates[SimulatedWorld.nodeAddress]?.registrationKeys.publicKey
        epoch.seconds = mid + 3600
        world.run(for: .milliseconds(1500))
        let tagsAfter = Set(alice.core.registrationTags() + bob.core.registrationTags())
        let keyAfter = alice.core.nodeStates[SimulatedWorld.nodeAddress]?.registrationKeys.publicKey
        #expect(tagsBefore.isDisjoint(with: tagsAfter), "no tag survives into the next epoch")
        #expect(keyBefore != nil && keyAfter != nil && keyBefore != keyAfter, "a new registration key")
        let there = alice.send("next hour", to: bob)
        #expect(await world.runYielding(until: .seconds(10)) { there.result != nil && bob.messages.last?.text == "next hour" })
        let back = bob.send("and back", to: alice)
        #expect(await world.runYielding(until: .seconds(10)) { back.result != nil && alice.messages.last?.text == "and back" })
        #expect((try? there.result?.get()) != nil && (try? back.result?.get()) != nil)
        #expect(alice.friends.getFriendPaths(friendId: bob.id).paths.first?.kind == .relayed)
        #expect(bob.revue.counters.droppedForged == 0 && alice.revue.counters.droppedForged == 0)
        print(
            "simulated epoch change: \(tagsBefore.count) tags before, \(tagsAfter.count) after, relayed \(world.node.relayedPackets) packets"
        )
    }
}

/// The wall-clock reading a test moves by hand (seconds since 1970). Main actor.
@MainActor
final class SimulatedEpoch {
    var seconds: Double
    init(_ seconds: Double) { self.seconds = seconds }
}
