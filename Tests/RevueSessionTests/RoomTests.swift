import Foundation
import Testing

@testable import RevueSession

/// Rooms of in-process peers: the mesh, both delegate layers, messages, mute requests, tracks and
/// modes (revue-events.md, videosdk-roles.md, skyway-ios-tutorial.md's join/leave behaviour).
@MainActor
@Suite(.serialized) struct RoomTests {
    /// Invites `b` from `a` and waits until both see each other.
    func call(_ a: CallPeer, _ b: CallPeer) async throws { try await startCall(a, b) }

    @Test func fourPeersFormAMeshAndEveryoneSeesEveryoneJoinAndLeave() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let peers = try ["a", "b", "c", "d"].map { try CallPeer($0, node: node) }
        defer { for p in peers { p.peer.remove() } }
        try await makeFriends(peers)
        let (a, b, c, d) = (peers[0], peers[1], peers[2], peers[3])

        try await call(a, b)
        try await call(a, c)  // a invites more friends into the running call
        try await call(b, d)  // and so can any member
        for p in peers {
            await p.wait("full mesh") { p.room.remoteParticipants.count == 3 }
            #expect(Set(p.room.remoteParticipants.keys) == Set(peers.filter { $0 !== p }.map(\.id)))
            for (id, r) in p.room.remoteParticipants { #expect(r.identity == id) }
        }
        await settle(0.3)
        for p in peers {
            let connects = p.recorder.room.filter { $0.hasPrefix("connect") }
            #expect(connects.count == 3, "\(p.name): \(connects)")
        }

        // An in-call message reaches everyone on both layers; a mute request too.
        try await a.room.localParticipant.sendMessage("hello all", timeout: 1)  // clamped to 5 s
        for p in [b, c, d] {
            await p.waitRoom("message(a,hello all)")
            #expect(p.recorder.participant.contains("message(a,hello all)"))
        }
        #expect(c.room.remoteParticipants[d.id]!.sendMuteRequest(isMuted: true))
        await d.waitRoom("muteRequest(c,true)")
        #expect(d.recorder.participant.filter { $0 == "muteRequest(c,true)" }.count == 1)

        // Names follow the friend's, on both layers.
        c.revue.setSelfName("Carol")
        for p in [a, b, d] {
            await p.waitRoom("name(c,Carol)")
            #expect(p.recorder.participant.contains("name(c,Carol)"))
            #expect(p.room.remoteParticipants[c.id]?.name == "Carol")
        }
        await c.waitRoom("name(c,Carol)")  // "cover you as well"
        #expect(c.room.localParticipant.name == "Carol")

        // d leaves: everyone sees it; the rest stay connected.
        d.room.disconnectAll()
        for p in [a, b, c] {
            await p.waitRoom("disconnect(d,remoteHangUp)")
            #expect(p.recorder.participant.contains("disconnected(d,remoteHangUp)"))
            #expect(p.room.remoteParticipants.count == 2)
        }
        await d.wait("d alone") { d.room.remoteParticipants.isEmpty }
        #expect(d.recorder.room.filter { $0.hasPrefix("disconnect") }.count == 3)
        // b hangs up with a only: a and b part, c keeps both.
        b.room.remoteParticipants[a.id]!.disconnect()
        await a.wait("a without b") { a.room.remoteParticipants[b.id] == nil }
        #expect(a.room.remoteParticipants.keys.sorted() == [c.id])
        #expect(Set(c.room.remoteParticipants.keys) == [a.id, b.id])
        // And d can call in again, joining a and c through the mesh.
        try await call(d, c)
        await d.wait("d back with a, c, b") { d.room.remoteParticipants.count == 3 }
        a.room.disconnectAll(); b.room.disconnectAll(); c.room.disconnectAll(); d.room.disconnectAll()
        for p in peers { await p.wait("empty") { p.room.remoteParticipants.isEmpty } }
    }

    @Test func tracksPublishSubscribeMuteAndModes() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])
        b.room.options.mode = .signallingOnly
        b.room.options.micEnabled = true
        b.room.options.cameraEnabled = false

        try await call(a, b)
        await a.waitRoom("publish(video)")
        await b.wait("b has a's tracks") { b.room.remoteParticipants[a.id]?.trackPublications.count == 2 }
        await settle(0.3)
        #expect(a.room.localParticipant.mode == .sendAndRecv)
        #expect(b.room.localParticipant.mode == .signallingOnly)
        #expect(a.room.remoteParticipants[b.id]?.mode == .signallingOnly)
        // signallingOnly: b publishes nothing and subscribes to nothing.
        #expect(b.room.localParticipant.trackPublications.isEmpty)
        #expect(b.room.remoteParticipants[a.id]!.remoteTrackPublications.allSatisfy { !$0.isSubscribed })
        #expect(!b.recorder.room.contains { $0.hasPrefix("subscribe") })

        // b's first switch to sendAndRecv uses the configured mic on / camera off.
        try await b.room.changeMode(.sendAndRecv)
        await b.waitRoom("subscribe(a,video)")
        await b.waitRoom("subscribe(a,audio)")
        await b.waitRoom("publish(audio)")
        await a.waitRoom("subscribe(b,audio)")
        await a.waitRoom("mode(b,sendAndRecv)")
        #expect(a.recorder.participant.contains("mode(b,sendAndRecv)"))
        #expect(b.recorder.room.contains("mode(b,sendAndRecv)"))
        #expect(b.room.localParticipant.trackPublications.keys.sorted() == ["audio"])
        await #expect(throws: RoomError.alreadyInRequestedState) { try await b.room.changeMode(.sendAndRecv) }

        // Mute: own mute on the TrackDelegate only, remote as didUpdateIsMuted on both layers.
        let audio = a.room.localParticipant.localTrackPublications.first { $0.kind == .audio }!
        audio.delegates.add(delegate: a.recorder)
        audio.mute()
        await b.waitRoom("muted(a,audio,true)")
        #expect(b.recorder.participant.contains("muted(a,audio,true)"))
        await a.wait("track delegate") { a.recorder.track == ["muted(audio,true)"] }
        #expect(!a.recorder.room.contains { $0.hasPrefix("muted") })
        audio.unmute()
        await b.waitRoom("muted(a,audio,false)")

        // Unsubscribe explicitly.
        b.room.remoteParticipants[a.id]!.trackPublications["video"].map { ($0 as! RemoteTrackPublication).setSubscribed(false) }
        await b.waitRoom("unsubscribe(a,video)")
        #expect(b.recorder.participant.contains("unsubscribe(a,video)"))

        // a to recvOnly: stops publishing; b sees both tracks go, and the mode change.
        try await a.room.changeMode(.recvOnly)
        await a.waitRoom("unpublish(audio)")
        await a.waitRoom("unpublish(video)")
        await b.waitRoom("unsubscribe(a,audio)")
        await b.waitRoom("mode(a,recvOnly)")
        #expect(a.room.localParticipant.trackPublications.isEmpty)
        // recvOnly still receives b's audio.
        #expect(a.room.remoteParticipants[b.id]!.remoteTrackPublications.map(\.isSubscribed) == [true])
        // Back to sendAndRecv: what was on before (mic and camera) comes back.
        try await a.room.changeMode(.sendAndRecv)
        await a.wait("republished") { a.room.localParticipant.trackPublications.count == 2 }
        await b.wait("b sees a's audio again") { b.room.remoteParticipants[a.id]?.trackPublications["audio"] != nil }
        // b to signallingOnly: unsubscribes everything, still gets messages.
        try await b.room.changeMode(.signallingOnly)
        await b.wait("nothing subscribed") {
            b.room.remoteParticipants[a.id]!.remoteTrackPublications.allSatisfy { !$0.isSubscribed }
        }
        try await a.room.localParticipant.sendMessage("still there?")
        await b.waitRoom("message(a,still there?)")
        a.room.disconnectAll()
        await b.wait("empty") { b.room.remoteParticipants.isEmpty }
    }
}
