import Foundation
import MediaCore
import MediaTools
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Several producer threads capture at once while the real worker threads run and a control thread
/// changes settings, requests keyframes, sends NACKs and reads statistics. Run under
/// ThreadSanitizer with `swift build --build-tests --sanitize=thread --scratch-path /tmp/tsan-send &&
/// swift test --skip-build --sanitize=thread --scratch-path /tmp/tsan-send --filter Send`.
@Suite struct SendPipelineStressTests {
    @Test func concurrentVideoProducersEveryFrameEncodedOrCountedOnceInOrder() throws {
        let producers = 4, perProducer = 40, w = 160, h = 120
        let key = SRTPKeyMaterial.random(for: .aeadAES128GCM)
        var config = sendTestVideoConfiguration(width: w, height: h, srtp: key)
        config.maxConcurrentCaptures = 2  // fewer converters than producers: exercises that drop path too
        config.encoder.bitrate = 2_000_000
        let sink = MemoryPacketSink()
        let stream = try VideoSendStream(configuration: config, sink: sink)
        // Producer p sends frames p * 1000 + i, i = 0..<perProducer (the bar code carries the index).
        let frames = (0..<producers).map { p in (0..<perProducer).map { sendTestFrame(p * 1000 + $0, width: w, height: h) } }
        let done = Atomic<Int>(0)
        stream.start()
        runOnThreads(producers + 1) { t in
            if t == producers {  // control thread
                var k = 0
                while done.load(ordering: .acquiring) < producers {
                    _ = stream.statistics
                    _ = stream.senderInfo
                    if k % 7 == 0 { stream.requestKeyframe() }
                    if k % 5 == 0 { stream.setTargetBitrate(k % 10 == 0 ? 1_000_000 : 2_000_000) }
                    if k % 3 == 0 { stream.handleNack([UInt16(truncatingIfNeeded: k), UInt16(truncatingIfNeeded: k &+ 1)]) }
                    if k % 11 == 0 { stream.handleEstimatedBitrate(3_000_000) }
                    k += 1
                    usleep(500)
                }
                return
            }
            for i in 0..<perProducer {
                sendTestCapture(stream.capturer, frames[t][i], timeStampNs: Int64(i) * 33_333_333 + Int64(t) * 1_000_000)
                usleep(UInt32(1_000 * (t + 1)))  // producers at different rates
            }
            done.add(1, ordering: .releasing)
        }
        stream.stop()

        let s = stream.statistics
        let calls = UInt64(producers * perProducer)
        #expect(
            s.capture.captured + s.capture.droppedPoolExhausted + s.capture.droppedInvalid + s.capture.droppedInactive == calls)
        #expect(s.capture.droppedInvalid == 0 && s.capture.droppedInactive == 0)
        #expect(s.capture.captured == s.outbound.framesEncoded + s.capture.droppedRingFull + s.outbound.framesDroppedByEncoder)
        #expect(s.outbound.framesDroppedByEncoder == 0)
        #expect(stream.capturer.availableFrames == stream.capturer.poolSize)

        // Decode what was sent (retransmissions are byte-identical duplicates: skip repeated sequence numbers).
        var seen = Set<UInt16>()
        let unique = sink.takePackets().filter { seen.insert(UInt16($0[2]) << 8 | UInt16($0[3])).inserted }
        let rx = try sendTestReceive(unique, codec: .vp8, key: key)
        #expect(UInt64(rx.frames.count) == s.outbound.framesEncoded)
        let codes = rx.frames.compactMap(\.barcode)
        #expect(codes.count == rx.frames.count, "every decoded frame shows a readable bar code")
        #expect(Set(codes).count == codes.count, "no frame encoded twice")
        for p in 0..<producers {
            let mine = codes.filter { $0 / 1000 == p }.map { $0 % 1000 }
            #expect(mine == mine.sorted(), "producer \(p) frames out of order: \(mine)")
            #expect(!mine.isEmpty)
        }
        print(
            "video stress: \(calls) captures, \(s.outbound.framesEncoded) encoded, \(s.capture.droppedRingFull) dropped oldest, \(s.capture.droppedPoolExhausted) dropped busy, \(s.outbound.keyFramesEncoded) keyframes"
        )
    }

    @Test func concurrentAudioProducersEverySampleEncodedOrCounted() throws {
        let producers = 3, buffers = 100
        var config = sendTestAudioConfiguration(srtp: .random())
        config.ringCapacity = 8
        let sink = MemoryPacketSink()
        let stream = try AudioSendStream(configuration: config, sink: sink)
        let events = Atomic<Int>(0)
        stream.onSpeakingEvent = { _ in events.add(1, ordering: .relaxed) }
        stream.start()
        runOnThreads(producers + 1) { t in
            if t == producers {
                for k in 0..<50 {
                    _ = stream.statistics
                    if k % 10 == 0 { stream.setTargetBitrate(k % 20 == 0 ? 24_000 : 48_000) }
                    stream.handleNack([UInt16(truncatingIfNeeded: 65_500 + k)])
                    usleep(1_000)
                }
                return
            }
            var gen = SyntheticAudio(pattern: .speech, sampleRate: 48_000, seed: UInt64(t + 1))
            let pcm = gen.int16s(frames: 480 * buffers)
            pcm.withUnsafeBufferPointer { all in
                for b in 0..<buffers {
                    stream.capturer.capture(
                        UnsafeBufferPointer(rebasing: all[(b * 480)..<((b + 1) * 480)]), sampleRate: 48_000,
                        channels: 1, timeStampNs: Int64(b) * 10_000_000)
                    if b % 8 == 0 { usleep(1_000) }
                }
            }
        }
        stream.stop()
        let s = stream.statistics
        #expect(s.capture.captured + s.capture.droppedRingFull + s.capture.droppedPoolExhausted == UInt64(producers * buffers))
        // Each accepted 10 ms buffer is half an Opus frame.
        #expect(s.outbound.framesEncoded == s.capture.captured / 2)
        #expect(stream.capturer.pool.available == stream.capturer.pool.count)
        var seen = Set<UInt16>()
        let unique = sink.takePackets().filter { seen.insert(UInt16($0[2]) << 8 | UInt16($0[3])).inserted }
        let rx = try sendTestReceiveAudio(unique, channels: 1, key: config.srtp)
        #expect(UInt64(rx.headers.count) == s.outbound.framesEncoded)
        for k in 1..<rx.headers.count {
            #expect(rx.headers[k].sequenceNumber == rx.headers[k - 1].sequenceNumber &+ 1)
        }
    }
}
