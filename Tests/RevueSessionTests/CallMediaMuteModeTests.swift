import Foundation
import MediaCore
import Synchronization
import Testing

@testable import RevueSession

/// Counts decoded video frames and loud 10 ms audio chunks (peak above 1000) from one participant,
/// whatever publication they arrive through.
final class MediaCounter: VideoRenderer, AudioSink, @unchecked Sendable {
    let frames = Atomic<Int>(0), loud = Atomic<Int>(0)
    func render(_ frame: DecodedVideoFrame) { frames.add(1, ordering: .relaxed) }
    func play(_ s: Span<Int16>, sampleRate: Int, channels: Int) {
        if s.indices.contains(where: { abs(Int(s[$0])) > 1000 }) { loud.add(1, ordering: .relaxed) }
    }
    var counts: (frames: Int, loud: Int) { (frames.load(ordering: .relaxed), loud.load(ordering: .relaxed)) }
}

/// Attaches a `MediaCounter` to every track the receiver subscribes to (publications are new
/// objects after each republish).
@MainActor
final class CountingAttacher: RoomDelegate {
    let counter = MediaCounter()
    func room(_ room: Room, participant: RemoteParticipant, didSubscribeTrack publication: RemoteTrackPublication) {
        publication.renderer = counter
        publication.audioSink = counter
    }
}

/// A muted microphone or camera stays muted through `changeMode` round trips, as the receiver
/// hears and sees it, for every pair of modes.
@MainActor
@Suite(.serialized) struct CallMediaMuteModeTests {
    /// Feeds a's tracks for a second and returns what b decoded meanwhile.
    func window(_ a: CallPeer, _ counter: MediaCounter, start: inout Int) async -> (frames: Int, loud: Int) {
        let before = counter.counts
        let feed = CallMediaQualityTests.feed(
            a.room.localParticipant.localTrackPublications, tone: 440, seconds: 1.2, startFrame: start)
        start += 60
        await feed.value
        await settle(0.4)
        let after = counter.counts
        return (after.frames - before.frames, after.loud - before.loud)
    }

    @Test func muteSurvivesEveryModeRoundTripAsTheReceiverDecodesIt() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node) { _ in }, b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        a.room.options.videoWidth = 160
        a.room.options.videoHeight = 120
        try await makeFriends([a, b])
        let attacher = CountingAttacher()
        b.room.delegates.add(delegate: attacher)
        try await startCall(a, b)
        let local = a.room.localParticipant
        func remote(_ kind: TrackKind) -> TrackPublication? { b.room.remoteParticipants[a.id]?.trackPublications[kind.rawValue] }
        func subscribed() -> Bool {
            [TrackKind.audio, .video].allSatisfy { (remote($0) as? RemoteTrackPublication)?.isSubscribed == true }
                && a.room.legs[b.id]?.wants.count == 2
        }
        await b.wait("both of a's tracks subscribed") { subscribed() }
        var frame = 0
        // Unmuted, both flow.
        var w = await window(a, attacher.counter, start: &frame)
        #expect(w.frames > 10 && w.loud > 40, "unmuted: \(w)")

        // Every stream sent under the leg's key gets its own SSRC (AES-GCM IVs come from SSRC
        // and index), across every republish.
        var ssrcs = [a.room.localMedia[.audio]!.audio!.ssrc, a.room.localMedia[.video]!.video!.ssrc]
        let trips: [[ParticipantMode]] = [
            [.recvOnly], [.signallingOnly], [.recvOnly, .signallingOnly], [.signallingOnly, .recvOnly],
        ]
        for muted in [TrackKind.audio, .video] {
            let other: TrackKind = muted == .audio ? .video : .audio
            local.publication(muted)!.mute()
            local.publication(other)!.unmute()
            await b.wait("\(muted) muted at b") { remote(muted)?.isMuted == true && remote(other)?.isMuted == false }
            for trip in trips {
                for mode in trip + [.sendAndRecv] { try await a.room.changeMode(mode) }
                await a.wait("a publishes again after \(trip)") {
                    a.room.localMedia[.audio]?.audio != nil && a.room.localMedia[.video]?.video != nil
                }
                ssrcs += [a.room.localMedia[.audio]?.audio?.ssrc ?? 0, a.room.localMedia[.video]?.video?.ssrc ?? 0]
                // The same tracks come back with the same mute state, here and at b.
                #expect(local.publication(muted)?.isMuted == true, "\(muted) after \(trip)")
                #expect(local.publication(other)?.isMuted == false, "\(other) after \(trip)")
                await b.wait("republished after \(trip)") {
                    subscribed() && remote(muted)?.isMuted == true && remote(other)?.isMuted == false
                }
                w = await window(a, attacher.counter, start: &frame)
                if muted == .audio {
                    #expect(w.loud == 0 && w.frames > 10, "audio muted, after \(trip): \(w)")
                } else {
                    #expect(w.frames == 0 && w.loud > 40, "video muted, after \(trip): \(w)")
                }
            }
        }
        #expect(Set(ssrcs).count == ssrcs.count && ssrcs.count == 18)
        #expect(Set(ssrcs).isSubset(of: a.room.usedSSRCs))
        // Turning the track off and on starts it unmuted.
        local.setCamera(enabled: false)
        local.setCamera(enabled: true)
        #expect(local.publication(.video)?.isMuted == false)
        a.room.disconnectAll()
    }
}
