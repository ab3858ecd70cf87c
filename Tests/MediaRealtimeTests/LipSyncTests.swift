import Foundation
import Glibc
import Synchronization
import Testing

@testable import MediaCore

/// A UDP hop that delays one payload type's RTP more than the rest, as when audio and video take
/// different paths: datagrams from the sender go to `destination` after `delay(payloadType)`;
/// whatever the destination sends back goes to the sender at once. Order within a payload type
/// is kept (one fixed delay each).
private final class StreamDelayRelay: @unchecked Sendable {
    let socket: UDPSocket
    let destination: SocketAddress
    private let delays: [UInt8: UInt64]
    private let stopping = Atomic<Bool>(false)
    private var thread: TransportThread?

    init(to destination: SocketAddress, delayMilliseconds: [UInt8: Double]) throws {
        socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        self.destination = destination
        delays = delayMilliseconds.mapValues { UInt64($0 * 1e6) }
    }

    var address: SocketAddress { try! socket.localAddress() }

    func start() {
        thread = TransportThread(name: "StreamDelayRelay") { [self] in
            var sender: SocketAddress?
            var queue: [(due: UInt64, bytes: [UInt8])] = []
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 16)
            defer { buffer.deallocate() }
            while !stopping.load(ordering: .relaxed) {
                if (try? socket.waitUntilReadable(timeoutMilliseconds: 1)) == true,
                    let r = try? socket.receive(into: buffer), r.count > 0
                {
                    let bytes = Array(buffer[0..<r.count])
                    if r.source == destination {
                        if let sender { _ = bytes.withUnsafeBytes { try? socket.send($0, to: sender) } }
                    } else {
                        sender = r.source
                        // RTP (not RTCP, RFC 5761): the payload type is the low 7 bits of byte 1.
                        let pt = bytes.count > 1 && !(192...223).contains(bytes[1]) ? bytes[1] & 0x7F : 255
                        queue.append((MonotonicTime.now.nanoseconds + (delays[pt] ?? 0), bytes))
                    }
                }
                let now = MonotonicTime.now.nanoseconds
                var kept: [(due: UInt64, bytes: [UInt8])] = []
                for item in queue {
                    if item.due <= now {
                        _ = item.bytes.withUnsafeBytes { try? socket.send($0, to: destination) }
                    } else {
                        kept.append(item)
                    }
                }
                queue = kept
            }
        }
    }

    func stop() {
        stopping.store(true, ordering: .relaxed)
        thread?.join()
    }
}

/// Finds beep onsets in what the playout clock plays: the first loud sample after at least 30 ms
/// of quiet, timed as the pull that delivered it plus its offset in the block.
private final class BeepDetector: AudioSink, @unchecked Sendable {
    let onsets = Mutex<[UInt64]>([])
    private var quietSamples = 0

    func play(_ samples: Span<Int16>, sampleRate: Int, channels: Int) {
        let now = MonotonicTime.now.nanoseconds
        for i in samples.indices {
            if abs(Int(samples[i])) > 3_000 {
                if quietSamples >= sampleRate * 3 / 100 {
                    onsets.withLock { $0.append(now + UInt64(i) * 1_000_000_000 / UInt64(sampleRate)) }
                }
                quietSamples = 0
            } else {
                quietSamples += 1
            }
        }
    }
}

/// Lip sync end to end: our send pipelines capture a beep and a marked video frame (index a
/// multiple of 30) at the same instant each second; one of the two streams reaches the receiver
/// 150 ms later than the other. The receiver plays the beeps through a playout clock and renders
/// the frames; each beep's play time is compared with its frame's render time.
@Suite(.serialized) struct LipSyncTests {
    /// Plays 9 s; returns, for each second whose beep and frame both played, the beep's play time
    /// minus the frame's render time in milliseconds, and the pipeline's lip-sync state.
    private func run(videoDelayMs: Double, audioDelayMs: Double, lipSync: Bool) throws -> (
        offsets: [Int: Double], state: ReceivePipeline.AudioVideoSyncState?
    ) {
        let call = try EndToEndCall(lipSync: lipSync)
        let relay = try StreamDelayRelay(
            to: try call.receiver.socket.localAddress(), delayMilliseconds: [96: videoDelayMs, 111: audioDelayMs])
        relay.start()
        let detector = BeepDetector()
        let clock = AudioPlayoutClock(stream: call.receiver.audio!, sink: detector)
        clock.start()
        call.start(sendingTo: relay.address)
        call.capture(frames: 0..<270, beeps: true)
        usleep(400_000)
        let state = call.receiver.audioVideoSync
        clock.stop()
        call.stop()
        relay.stop()
        let renders = call.renderer.renderTimes.withLock { $0 }
        let onsets = detector.onsets.withLock { $0 }
        var offsets: [Int: Double] = [:]
        for second in 0..<9 {
            guard let frame = renders[second * 30] else { continue }
            // The beep of that second: the onset nearest the frame (beeps are 1 s apart).
            guard let onset = onsets.min(by: { abs(Double($0) - Double(frame)) < abs(Double($1) - Double(frame)) }),
                abs(Double(onset) - Double(frame)) < 500_000_000
            else { continue }
            offsets[second] = (Double(onset) - Double(frame)) / 1e6
        }
        print(
            "lip sync \(lipSync ? "on" : "off"), video +\(videoDelayMs) ms, audio +\(audioDelayMs) ms: beep minus frame "
                + "\(offsets.sorted { $0.key < $1.key }.map { "\($0.key)s \(Int($0.value.rounded()))" }), state \(String(describing: state))"
        )
        return (offsets, state)
    }

    @Test(arguments: [(150.0, 0.0), (0.0, 150.0)])
    func audioAndVideoPlayInStepWhenOnePathIsSlower(videoDelayMs: Double, audioDelayMs: Double) throws {
        let (offsets, state) = try run(videoDelayMs: videoDelayMs, audioDelayMs: audioDelayMs, lipSync: true)
        // Sync starts once both streams have had a sender report and played (about the second
        // second) and moves half the way each second: from the fourth second on it has settled.
        let settled = offsets.filter { $0.key >= 4 }
        try #require(settled.count >= 4, "beeps and frames matched: \(offsets)")
        // ITU-R BT.1359: detectable beyond +45 ms (audio early) / -125 ms (audio late); we hold
        // both sides to 45 ms. The bound is on what a viewer would see, a lasting offset: every
        // settled second but one within 45 ms, the one within 90 ms. One second's measure alone can
        // be off by a late render or pull on a busy machine (a run beside two other test
        // processes had one second at -57 ms between -21 and 0).
        let outside = settled.filter { abs($0.value) > 45 }
        #expect(outside.count <= 1, "seconds beyond 45 ms: \(outside.sorted { $0.key < $1.key }) of \(settled.count)")
        for (second, ms) in settled { #expect(abs(ms) <= 90, "second \(second): beep \(ms) ms after its frame") }
        let s = try #require(state)
        if videoDelayMs > audioDelayMs {
            #expect(s.audioDelayMilliseconds > 50 && s.videoDelayMilliseconds < 20, "audio waits for video: \(s)")
        } else {
            #expect(s.videoDelayMilliseconds > 50 && s.audioDelayMilliseconds < 20, "video waits for audio: \(s)")
        }
    }

    @Test func withoutLipSyncTheSlowerPathShows() throws {
        let (offsets, state) = try run(videoDelayMs: 150, audioDelayMs: 0, lipSync: false)
        let settled = offsets.filter { $0.key >= 4 }
        try #require(settled.count >= 4, "beeps and frames matched: \(offsets)")
        let mean = settled.values.reduce(0, +) / Double(settled.count)
        #expect(mean < -100, "the beep plays well before its frame: \(settled)")
        #expect(state == nil)
    }
}
