import Foundation
import Testing

@testable import RevueSession

/// Rooms of in-process peers: the mesh, both delegate layers, messages, mute requests, tracks,
/// participant modes and the join and leave events.
@MainActor
@Suite(.serialized) struct RoomTests {
    /// Invites `b` from `a` and waits until both see each other.
    func call(_ a: CallPeer, _ b: CallPeer) async throws { try await startCall(a, b) }

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
