import Foundation
import MediaCore
import Testing

@testable import RevueSession

#if canImport(Glibc)
    import Glibc
#endif

@MainActor
@Suite(.serialized) struct PersistenceTests {
    @Test func profileFileIsOwnerOnlyAndAtomicallyReplaced() async throws {
        let peer = try TestPeer()
        defer { peer.remove() }
        peer.revue.setSelfName("x")
        // The write happens off the main actor, soon after the change.
        await peer.wait("name on disk", timeout: 3) {
            (try? String(contentsOfFile: peer.directory + "/profile.json", encoding: .utf8))?.contains("\"name\" : \"x\"") == true
        }
        var st = stat()
        #expect(stat(peer.directory + "/profile.json", &st) == 0)
        #expect(st.st_mode & 0o777 == 0o600)
        #expect(!FileManager.default.fileExists(atPath: peer.directory + "/profile.json.tmp"))
        let text = try String(contentsOfFile: peer.directory + "/profile.json", encoding: .utf8)
        #expect(text.contains("\"name\" : \"x\""))
    }

    @Test func corruptProfileIsAnErrorNeverANewIdentity() throws {
        let peer = try TestPeer()
        let dir = peer.directory
        defer { try? FileManager.default.removeItem(atPath: dir) }
        peer.stop()
        let path = dir + "/profile.json"
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        for garbage in [
            Data("{\"format\":1,".utf8), Data(), original.prefix(original.count / 2),
            Data("{\"format\":1,\"secretKey\":\"zz\",\"nospam\":1}".utf8),
        ] {
            try garbage.write(to: URL(fileURLWithPath: path))
            let r = Revue()
            do {
                try r.initialize(RevueConfiguration(dataDirectory: dir))
                Issue.record("initialize accepted a corrupt profile")
                r.destroy()
            } catch {
                #expect(error.code == .corruptProfile, "\(error)")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == garbage, "the corrupt file is left as it was")
        }
    }

    @Test func twoInstancesCannotShareADataDirectory() throws {
        let peer = try TestPeer()
        defer { peer.remove() }
        let other = Revue()
        #expect(throws: RevueError.self) { try other.initialize(peer.configuration) }
        do { try other.initialize(peer.configuration) } catch { #expect(error.code == .dataDirectory) }
        #expect(throws: RevueError.self) { try peer.revue.initialize(peer.configuration) }
    }
}

/// The SDK's own messages on the friend stream (call signals) are handled as they arrive, not one
/// per disk write: a call's setup must not pay an fsync per signal. Their receipts still follow
/// the saves.
@MainActor
@Suite(.serialized) struct ReservedDeliveryTests {
    @Test func callSignalsAreNotHeldOneWritePerSignalOnASlowDisk() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let alice = try TestPeer(rendezvous: node), bob = try TestPeer(rendezvous: node)
        defer { alice.remove(); bob.remove() }
        try await befriend(alice, bob)
        let aliceCore = try #require(alice.revue.core), bobCore = try #require(bob.revue.core)
        await alice.wait("the stream to bob drained") { aliceCore.friends[bob.id]?.outbound.isEmpty == true }

        // Every queued write takes 0.4 s; eight signals one write each would take 3.2 s.
        bobCore.store.queuedWriteDelayForTesting = .milliseconds(400)
        var handled: [String] = []
        var writesWhenAllHandled: Int?
        bobCore.reservedMessageHandler = { _, body in
            guard SessionCore.isReserved(body) else { return false }
            handled.append(String(decoding: body, as: UTF8.self))
            if handled.count == 8 { writesWhenAllHandled = bobCore.store.queuedWritesCompleted }
            return true
        }
        let writesBefore = bobCore.store.queuedWritesCompleted
        let signals = (0..<8).map { #"{"op":"probe-\#($0)","type":"msg"}"# }
        for s in signals { #expect(aliceCore.sendReserved(friendId: bob.id, text: s)) }
        // An App message after them still waits for its own save before its receipt.
        let receipt = Task { @MainActor in
            try await alice.revue.friends.sendMessage(friendId: bob.id, message: "after", timeout: 20)
        }
        await bob.waitForEvent(.message(alice.id, "after"), timeout: 20)
        #expect(handled == signals)
        let writes = try #require(writesWhenAllHandled) - writesBefore
        #expect(writes <= 2, "the eighth signal waited for \(writes) writes")
        _ = try await receipt.value
        // Receipts came once saves covered them: alice holds nothing unacknowledged.
        await alice.wait("every signal acknowledged", timeout: 20) { aliceCore.friends[bob.id]?.outbound.isEmpty == true }
        #expect(bobCore.friends[alice.id]!.stored.inboundDelivered == aliceCore.friends[bob.id]!.nextSeq - 1)
    }
}
