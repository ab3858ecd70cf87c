import Foundation
import MediaCore
import MediaTestSupport
import Synchronization
import Testing

@testable import RevueSession

/// Counts what reaches one call leg's media socket, unprotected with the key that came through the
/// encrypted friend channel. It reads the socket beside the leg's receive pipeline, so each gets
/// part of the packets: the pipeline NACKs what the tap took and the sender resends it, which the
/// tap then sees again (an SRTP replay, counted apart from real failures).
final class LegTap: @unchecked Sendable {
    let audio = Atomic<Int>(0), video = Atomic<Int>(0), failures = Atomic<Int>(0), replays = Atomic<Int>(0)
    let running = Atomic<Bool>(true)
    let done = Atomic<Bool>(false)

    init(socket: MediaCore.UDPSocket, key: SRTPKeyMaterial) throws {
        let context = try SRTPContext(material: key, direction: .inbound)
        try socket.setReceiveTimeout(nanoseconds: 50_000_000)
        Thread.detachNewThread { [self] in
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 16)
            defer { buffer.deallocate(); done.store(true, ordering: .releasing) }
            while running.load(ordering: .acquiring) {
                guard let r = try? socket.receive(into: buffer) else { continue }
                let n = r.count
                guard n >= 12, buffer[0] >> 6 == 2, (buffer[1] & 0x7F) < 64 || (buffer[1] & 0x7F) > 95 else { continue }
                var bufferSpan = buffer.mutableBytes
                do throws(SRTPError) { _ = try context.unprotect(&bufferSpan, length: n) } catch {
                    if error == .replayFail || error == .replayOld {
                        replays.add(1, ordering: .relaxed)
                    } else {
                        failures.add(1, ordering: .relaxed)
                    }
                    continue
                }
                switch buffer[1] & 0x7F {
                case 111: audio.add(1, ordering: .relaxed)
                case 96: video.add(1, ordering: .relaxed)
                default: break
                }
            }
        }
    }

    func stop() {
        running.store(false, ordering: .releasing)
        while !done.load(ordering: .acquiring) { usleep(5_000) }
    }
}

@MainActor
final class SpeakingRecorder: ParticipantDelegate {
    var speaking: [Bool] = []
    func participant(_ participant: Participant, didUpdateIsSpeaking isSpeaking: Bool) { speaking.append(isSpeaking) }
}

/// Real media through a call: the engine's send streams, SRTP keys per leg agreed in the encrypted
/// channel, speaking events from the engine's detector, mute stopping media.
@MainActor
@Suite(.serialized) struct CallMediaSendTests {
    @Test func sendStreamsCarrySRTPWithChannelKeysSpeakingFollowsTalkerMuteStopsMedia() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])
        b.room.options.mode = .recvOnly
        try a.friends.sendInvitation(friendId: b.id, message: "media")
        await b.wait("invited") { b.room.invitations[a.id] != nil }
        try b.friends.acceptInvitation(friendId: a.id)
        await a.wait("a publishes") { a.room.localParticipant.localTrackPublications.count == 2 }
        await b.wait("b subscribed") {
            b.room.remoteParticipants[a.id]?.remoteTrackPublications.filter(\.isSubscribed).count == 2
        }
        await b.wait("key from a") { b.room.legs[a.id]?.remoteKey != nil }
        let leg = try #require(b.room.legs[a.id])
        // The key B uses to read A's media is A's per-leg send key, received over the friend channel.
        #expect(leg.remoteKey == a.room.legs[b.id]?.sendKey)
        #expect(leg.sendKey != a.room.legs[b.id]?.sendKey)
        let tap = try LegTap(socket: leg.socket, key: try #require(leg.remoteKey))
        defer { tap.stop() }
        let remoteA = try #require(b.room.remoteParticipants[a.id])
        let speakingOnB = SpeakingRecorder()
        remoteA.delegates.add(delegate: speakingOnB)
        let speakingOnA = SpeakingRecorder()
        a.room.localParticipant.delegates.add(delegate: speakingOnA)

        let audioPub = try #require(a.room.localParticipant.localTrackPublications.first { $0.kind == .audio })
        let audio = try #require(audioPub.audioCapturer)
        let video = try #require(a.room.localParticipant.localTrackPublications.first { $0.kind == .video }?.videoCapturer)
        // 1 s near-silence, 2 s speech, 2 s near-silence at 48 kHz in 20 ms buffers; 15 fps video.
        // On a thread of its own: the feed sleeps between chunks, and a pool thread it held would
        // be missing for the tests beside it.
        let feeder = Task {
            await onOwnThread {
                let speech = SyntheticAudio(pattern: .speech, sampleRate: 48_000, amplitude: 0.5)
                let hiss = SyntheticAudio(pattern: .whiteNoise, sampleRate: 48_000, amplitude: 0.0005)
                var pcm = [Int16](repeating: 0, count: 960)
                let (w, h) = (320, 180)
                let bgra = UnsafeMutableRawPointer.allocate(byteCount: w * h * 4, alignment: 32)
                defer { bgra.deallocate() }
                let start = DispatchTime.now().uptimeNanoseconds
                for chunk in 0..<250 {
                    let talking = chunk >= 50 && chunk < 150
                    for i in 0..<960 {
                        let f = chunk * 960 + i
                        pcm[i] = Int16(32767 * (talking ? speech.sample(atFrame: f) : hiss.sample(atFrame: f)))
                    }
                    let ts = Int64(chunk) * 20_000_000
                    pcm.withUnsafeBufferPointer { audio.capture($0, sampleRate: 48_000, channels: 1, timeStampNs: ts) }
                    if chunk % 3 == 0 {
                        SyntheticVideo.renderBGRA(frameIndex: chunk / 3, width: w, height: h, into: bgra, stride: w * 4)
                        if let view = try? PixelBufferView.packed(
                            format: .bgra, width: w, height: h, data: UnsafeRawBufferPointer(start: bgra, count: w * h * 4),
                            stride: w * 4)
                        {
                            video.capture(view, timeStampNs: ts)
                        }
                    }
                    let due = start + UInt64(chunk + 1) * 20_000_000
                    let now = DispatchTime.now().uptimeNanoseconds
                    if due > now { usleep(UInt32((due - now) / 1000)) }
                }
            }
        }
        await b.wait("b hears a speaking", timeout: 15) { speakingOnB.speaking.first == true }
        await b.waitRoom("speakers(a)")  // RoomDelegate: the list, loudest first
        #expect(!b.recorder.participant.contains { $0.contains("Speaking") })
        await b.wait("a stops speaking", timeout: 15) { speakingOnB.speaking.count >= 2 }
        await feeder.value
        #expect(speakingOnB.speaking.prefix(2) == [true, false])
        #expect(speakingOnA.speaking.prefix(2) == [true, false])
        await b.wait("no speakers") { b.room.activeSpeakers.isEmpty }
        #expect(b.recorder.room.last { $0.hasPrefix("speakers") } == "speakers()")
        // The tap and the leg's receive pipeline read the same socket, so the kernel splits the
        // datagrams between them in no fixed share: count what both got. The tap must still see
        // some of each kind, decrypted with the channel key (failures == 0 below).
        let inbound = leg.pipeline?.inboundStats ?? []
        let pipelineAudio = inbound.filter { $0.kind == "audio" }.reduce(UInt64(0)) { $0 + $1.packetsReceived }
        let pipelineVideo = inbound.filter { $0.kind == "video" }.reduce(UInt64(0)) { $0 + $1.packetsReceived }
        let tapAudio = UInt64(tap.audio.load(ordering: .relaxed)), tapVideo = UInt64(tap.video.load(ordering: .relaxed))
        #expect(tapAudio > 0 && tapVideo > 0, "tap saw audio \(tapAudio), video \(tapVideo)")
        #expect(tapAudio + pipelineAudio > 150, "audio packets: tap \(tapAudio) + pipeline \(pipelineAudio)")
        #expect(tapVideo + pipelineVideo > 20, "video packets: tap \(tapVideo) + pipeline \(pipelineVideo)")
        #expect(tap.failures.load(ordering: .relaxed) == 0)
        // B is recvOnly: it sends A nothing.
        #expect(b.room.localParticipant.trackPublications.isEmpty)

        // Mute stops the audio and says so.
        audioPub.mute()
        await b.waitRoom("muted(a,audio,true)")
        try await Task.sleep(for: .milliseconds(200))
        let before = tap.audio.load(ordering: .relaxed)
        let pcm = [Int16](repeating: 1000, count: 960)
        for i in 0..<25 {
            pcm.withUnsafeBufferPointer {
                audio.capture($0, sampleRate: 48_000, channels: 1, timeStampNs: Int64(300 + i) * 20_000_000)
            }
        }
        try await Task.sleep(for: .milliseconds(800))
        #expect(tap.audio.load(ordering: .relaxed) == before)
        a.room.disconnectAll()
        await b.wait("ended") { b.room.remoteParticipants.isEmpty }
        #expect(a.room.localMedia.isEmpty && a.room.legs.isEmpty && b.room.legs.isEmpty)
    }
}

extension CallMediaSendTests {
    /// Feeds 20 ms buffers in real time: speech in `talking` (chunk indices), faint hiss elsewhere.
    nonisolated static func feedSpeech(_ audio: AudioBufferCapturer, chunks: Int, talking: Range<Int>, seed: UInt64) -> Task<
        Void, Never
    > {
        Task {
            await onOwnThread {
                let speech = SyntheticAudio(pattern: .speech, sampleRate: 48_000, amplitude: 0.5, seed: seed)
                let hiss = SyntheticAudio(pattern: .whiteNoise, sampleRate: 48_000, amplitude: 0.0005, seed: seed)
                var pcm = [Int16](repeating: 0, count: 960)
                let start = DispatchTime.now().uptimeNanoseconds
                for chunk in 0..<chunks {
                    for i in 0..<960 {
                        let f = chunk * 960 + i
                        pcm[i] = Int16(32767 * (talking.contains(chunk) ? speech.sample(atFrame: f) : hiss.sample(atFrame: f)))
                    }
                    pcm.withUnsafeBufferPointer {
                        audio.capture($0, sampleRate: 48_000, channels: 1, timeStampNs: Int64(chunk) * 20_000_000)
                    }
                    let due = start + UInt64(chunk + 1) * 20_000_000
                    let now = DispatchTime.now().uptimeNanoseconds
                    if due > now { usleep(UInt32((due - now) / 1000)) }
                }
            }
        }
    }

    @Test func speakingEventsFollowWhoTalks() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])
        for p in [a, b] { p.room.options.cameraEnabled = false }
        try a.friends.sendInvitation(friendId: b.id, message: "talk")
        await b.wait("invited") { b.room.invitations[a.id] != nil }
        try b.friends.acceptInvitation(friendId: a.id)
        for (me, other) in [(a, b), (b, a)] {
            await me.wait("audio published") { me.room.localParticipant.localTrackPublications.first?.audioCapturer != nil }
            await me.wait("other subscribed") { other.room.legs[me.id]?.wants.contains(.audio) == true }
        }
        let audioA = a.room.localParticipant.localTrackPublications.first!.audioCapturer!
        let audioB = b.room.localParticipant.localTrackPublications.first!.audioCapturer!
        // 1 s quiet, a talks 2 s, 1.5 s quiet, b talks 2 s, 1.5 s quiet (chunks of 20 ms).
        let fa = Self.feedSpeech(audioA, chunks: 400, talking: 50..<150, seed: 1)
        let fb = Self.feedSpeech(audioB, chunks: 400, talking: 225..<325, seed: 2)
        await fa.value
        await fb.value
        await a.wait("quiet at the end") { a.room.activeSpeakers.isEmpty && b.room.activeSpeakers.isEmpty }
        for p in [a, b] {
            // Every list the room reported, collapsed: a alone, then nobody, then b alone, then nobody.
            var lists = p.recorder.room.filter { $0.hasPrefix("speakers(") }
            lists = lists.enumerated().filter { $0.offset == 0 || lists[$0.offset - 1] != $0.element }.map(\.element)
            #expect(lists == ["speakers(a)", "speakers()", "speakers(b)", "speakers()"], "\(p.name): \(lists)")
        }
    }
}
