import Foundation
import Testing

@testable import RevueSession

/// Connection quality follows the media that arrives, not only the friend channel: a participant
/// whose subscribed, unmuted tracks deliver nothing for 2 s is `.poor` even on loopback.
@MainActor
@Suite(.serialized) struct CallMediaStarvationTests {
    @Test func silentSubscribedTracksMakeQualityPoorAndMediaRestoresIt() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        b.room.options.cameraEnabled = false
        try await makeFriends([a, b])
        try await startCall(a, b)
        let remote = try #require(a.room.remoteParticipants[b.id])
        await a.wait("b's audio subscribed") {
            (remote.trackPublications["audio"] as? RemoteTrackPublication)?.isSubscribed == true
        }
        // b publishes a microphone but nothing is captured: no packet reaches a.
        await a.wait("poor without media", timeout: 5) { remote.connectionQuality == .poor }
        // The delegate hears it too (its event is delivered after the property changed).
        await a.wait("poor reported") { a.recorder.room.contains("quality(b,poor)") }
        // The friend channel itself is fine.
        let rtt = try #require(a.friends.getFriendPaths(friendId: b.id).paths.first?.roundTripTime)
        #expect(rtt < 0.3)
        // Audio flows: quality recovers.
        let audio = try #require(b.room.localParticipant.publication(.audio)?.audioCapturer)
        let feeding = CallMediaSendTests.feedSpeech(audio, chunks: 150, talking: 0..<150, seed: 3)
        await a.wait("excellent with media", timeout: 4) { remote.connectionQuality == .excellent }
        // Muted, nothing is expected: silence is not a bad connection.
        b.room.localParticipant.publication(.audio)!.mute()
        await a.wait("muted at a") { remote.trackPublications["audio"]?.isMuted == true }
        await settle(2.6)
        #expect(remote.connectionQuality == .excellent)
        feeding.cancel()
        a.room.disconnectAll()
    }
}
