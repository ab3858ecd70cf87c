import Foundation
import MediaCore
import MediaTestSupport
import Synchronization
import Testing

@testable import RevueSession

/// Checks each decoded frame against the synthetic source frame it carries (its index is drawn in
/// the picture), on the receive thread.
final class CheckingRenderer: VideoRenderer, @unchecked Sendable {
    struct Result { var frames = 0; var unreadable = 0; var minPSNR = Double.infinity; var sumPSNR = 0.0 }
    let result = Mutex(Result())
    func render(_ frame: DecodedVideoFrame) {
        guard let (_, psnr) = syntheticFrameQuality(frame) else {
            result.withLock { $0.unreadable += 1 }
            return
        }
        result.withLock {
            $0.frames += 1; $0.minPSNR = min($0.minPSNR, psnr); $0.sumPSNR += psnr
        }
    }
    var frames: Int { result.withLock { $0.frames } }
}

/// The test video's frame index read from a decoded frame's bar code, and the frame's PSNR
/// against that frame rendered afresh; nil when no bar code can be read.
func syntheticFrameQuality(_ frame: DecodedVideoFrame) -> (index: Int, psnr: Double)? {
    guard let index = SyntheticVideo.frameIndex(in: frame.view) else { return nil }
    let reference = VideoFrame(width: frame.view.width, height: frame.view.height)
    SyntheticVideo.render(frameIndex: index, into: reference)
    return (index, Quality.psnr(reference.view, frame.view))
}

/// Collects decoded PCM.
final class CollectingSink: AudioSink, @unchecked Sendable {
    let samples = Mutex<[Int16]>([])
    func play(_ s: Span<Int16>, sampleRate: Int, channels: Int) { samples.withLock { $0 += copied(s) } }
}

/// SNR in dB of a pure tone at `frequency`: the least-squares sinusoid at that frequency against
/// everything else in the window (independent of the delay through the call).
func toneSNR(_ x: ArraySlice<Int16>, frequency: Double, sampleRate: Double = 48_000) -> Double {
    var ss = 0.0, cc = 0.0, sc = 0.0, xs = 0.0, xc = 0.0, total = 0.0
    for (i, v) in x.enumerated() {
        let w = 2 * Double.pi * frequency * Double(i) / sampleRate
        let s = sin(w), c = cos(w), d = Double(v)
        ss += s * s; cc += c * c; sc += s * c; xs += d * s; xc += d * c; total += d * d
    }
    let det = ss * cc - sc * sc
    let a = (xs * cc - xc * sc) / det, b = (xc * ss - xs * sc) / det
    let fitted = a * xs + b * xc
    return 10 * log10(fitted / max(total - fitted, 1e-9))
}

/// `toneSNR` of each whole `window` samples of `x`, from its start, sorted: its median tells
/// whether a tone is heard, whatever single jump in phase (the playout stretching to follow
/// jitter) lies in one window.
func windowedToneSNRs(_ x: ArraySlice<Int16>, frequency: Double, window: Int) -> [Double] {
    stride(from: x.startIndex, through: x.endIndex - window, by: window).map {
        toneSNR(x[$0..<$0 + window], frequency: frequency)
    }.sorted()
}

@MainActor
@Suite(.serialized) struct CallMediaQualityTests {
    /// Feeds one participant's capturers in real time: a tone and the synthetic video at 15 fps.
    /// Each feed has a thread of its own: several fed at once must not wait for a free thread of
    /// the cooperative pool (two on this machine), as blocking tasks would.
    static func feed(_ pubs: [LocalTrackPublication], tone: Double, seconds: Double, startFrame: Int) -> Task<Void, Never> {
        let audio = pubs.first { $0.kind == .audio }?.audioCapturer
        let video = pubs.first { $0.kind == .video }?.videoCapturer
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            defer { done.signal() }
            let (w, h) = (320, 180)
            let frame = VideoFrame(width: w, height: h)
            var pcm = [Int16](repeating: 0, count: 960)
            let start = DispatchTime.now().uptimeNanoseconds
            let chunks = Int(seconds * 50)
            for chunk in 0..<chunks {
                for i in 0..<960 {
                    pcm[i] = Int16(12_000 * sin(2 * Double.pi * tone * Double((startFrame + chunk) * 960 + i) / 48_000))
                }
                let ts = Int64(startFrame + chunk) * 20_000_000
                pcm.withUnsafeBufferPointer { audio?.capture($0, sampleRate: 48_000, channels: 1, timeStampNs: ts) }
                if chunk % 3 == 0, let video {
                    SyntheticVideo.render(frameIndex: (startFrame + chunk) / 3, into: frame)
                    let view = PixelBufferView(frame.view)
                    video.capture(view, timeStampNs: ts)
                }
                let due = start + UInt64(chunk + 1) * 20_000_000
                let now = DispatchTime.now().uptimeNanoseconds
                if due > now { usleep(UInt32((due - now) / 1000)) }
            }
        }
        thread.start()
        return Task.detached {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async {
                    done.wait()
                    c.resume()
                }
            }
        }
    }

    @Test func tenSecondCallBothWaysDecodesVideoAndAudioAboveBoundsAndModesGateMedia() async throws {
        let node = try RendezvousNode(host: "127.0.0.1")
        defer { node.stop() }
        let a = try CallPeer("a", node: node), b = try CallPeer("b", node: node)
        defer { a.peer.remove(); b.peer.remove() }
        try await makeFriends([a, b])
        for p in [a, b] { p.room.options.videoWidth = 320; p.room.options.videoHeight = 180 }
        try a.friends.sendInvitation(friendId: b.id, message: "10 s")
        await b.wait("invited") { b.room.invitations[a.id] != nil }
        try b.friends.acceptInvitation(friendId: a.id)
        let renderers = [CheckingRenderer(), CheckingRenderer()], sinks = [CollectingSink(), CollectingSink()]
        for (i, (me, other)) in [(a, b), (b, a)].enumerated() {
            await me.wait("subscribed") {
                me.room.remoteParticipants[other.id]?.remoteTrackPublications.filter(\.isSubscribed).count == 2
            }
            await me.wait("pipeline") { me.room.legs[other.id]?.pipeline != nil && other.room.legs[me.id]?.destination != nil }
            let pubs = me.room.remoteParticipants[other.id]!.remoteTrackPublications
            pubs.first { $0.kind == .video }!.renderer = renderers[i]
            pubs.first { $0.kind == .audio }!.audioSink = sinks[i]
        }
        await a.wait("a's targets") { a.room.localMedia.values.allSatisfy { _ in true } }
        let kernelDropsBefore = udpReceiveBufferErrors()
        let feedA = Self.feed(a.room.localParticipant.localTrackPublications, tone: 440, seconds: 10, startFrame: 0)
        let feedB = Self.feed(b.room.localParticipant.localTrackPublications, tone: 660, seconds: 10, startFrame: 0)
        await feedA.value
        await feedB.value
        try await Task.sleep(for: .milliseconds(500))
        // a hears b's 660 Hz tone and sees b's video; b hears a's 440 Hz tone.
        for (i, tone) in [660.0, 440.0].enumerated() {
            let r = renderers[i].result.withLock { $0 }
            #expect(r.frames >= 100, "side \(i): \(r.frames) of 166 frames decoded, \(r.unreadable) unreadable")
            #expect(r.minPSNR >= 28, "side \(i): min PSNR \(r.minPSNR) dB")
            #expect(
                r.frames > 0 && r.sumPSNR / Double(r.frames) >= 32,
                "side \(i): mean PSNR \(r.sumPSNR / Double(max(1, r.frames))) dB")
            let pcm = sinks[i].samples.withLock { $0 }
            #expect(pcm.count >= 8 * 48_000, "side \(i): \(pcm.count) samples")
            // 0.5 s windows from the middle of the call (after the jitter buffer settled).
            let middle = pcm[min(3 * 48_000, pcm.count)..<min(pcm.count, 9 * 48_000)]
            let snrs = windowedToneSNRs(middle, frequency: tone, window: 24_000)
            #expect(!snrs.isEmpty && snrs[snrs.count / 2] >= 20, "side \(i): tone SNR \(snrs)")
        }
        // Statistics arrive on the room with W3C names, inbound for b's tracks, outbound for a's.
        await a.wait("inbound stats") { (a.recorder.statistics["b/video"]?.framesDecoded ?? 0) > 100 }
        await a.wait("outbound stats") { (a.recorder.statistics["a/video"]?.framesEncoded ?? 0) > 100 }
        #expect((a.recorder.statistics["b/audio"]?.packetsReceived ?? 0) > 400)
        // Loopback loses nothing of its own. What the kernel dropped from a full receive buffer
        // meanwhile (machine-wide; a receive thread starved while this phase's ten calls encode at
        // once: 3 audio packets once) may be missing too, and on a quiet machine that is none.
        let kernelDrops = udpReceiveBufferErrors() - kernelDropsBefore
        let lost = a.recorder.statistics["b/audio"]?.packetsLost
        #expect(
            lost != nil && lost! <= Int64(kernelDrops),
            "b's audio: \(lost ?? -1) lost, \(kernelDrops) datagrams dropped by the kernel")
        #expect((a.recorder.statistics["a/audio"]?.packetsSent ?? 0) > 400)
        // Loopback, no loss, sub-millisecond RTT: excellent.
        await a.waitRoom("quality(b,excellent)")

        // b to signallingOnly: b neither sends nor receives; a still does its part, nothing flows.
        try await b.room.changeMode(.signallingOnly)
        await a.waitRoom("mode(b,signallingOnly)")
        await a.wait("b's tracks gone") { a.room.remoteParticipants[b.id]!.trackPublications.isEmpty }
        await a.wait("b unsubscribed") { a.room.legs[b.id]!.wants.isEmpty }
        let before = (renderers[0].frames, renderers[1].frames)
        let more = Self.feed(a.room.localParticipant.localTrackPublications, tone: 440, seconds: 1.5, startFrame: 600)
        await more.value
        try await Task.sleep(for: .milliseconds(300))
        #expect(renderers[1].frames == before.1, "b received video in signallingOnly")
        #expect(renderers[0].frames == before.0)
        // b to recvOnly: receives a again (a renderer attached to the new subscription), sends nothing.
        try await b.room.changeMode(.recvOnly)
        await b.wait("b subscribed again") {
            b.room.remoteParticipants[a.id]!.remoteTrackPublications.filter(\.isSubscribed).count == 2
        }
        let again = CheckingRenderer()
        b.room.remoteParticipants[a.id]!.remoteTrackPublications.first { $0.kind == .video }!.renderer = again
        await a.wait("a sends to b again") { a.room.legs[b.id]!.wants.count == 2 }
        let third = Self.feed(a.room.localParticipant.localTrackPublications, tone: 440, seconds: 2, startFrame: 700)
        await third.value
        try await Task.sleep(for: .milliseconds(300))
        #expect(
            again.frames >= 10,
            "recvOnly b decoded \(again.frames) frames, \(again.result.withLock { $0.unreadable }) unreadable; \(b.room.legs[a.id]!.pipeline!.inboundStats)"
        )
        #expect(b.room.localParticipant.trackPublications.isEmpty)
        a.room.disconnectAll()
        await b.wait("ended") { b.room.remoteParticipants.isEmpty }
    }
}
