import Foundation
import MediaCore
import MediaTestSupport
import MediaTools
import Testing

@Suite struct AudioBufferCapturerTests {
    @Test func dropsNewestBufferWhenRingFull() throws {
        var config = sendTestAudioConfiguration()
        config.ringCapacity = 4
        let sink = MemoryPacketSink()
        let stream = try AudioSendStream(configuration: config, sink: sink)
        stream.startWithoutWorker()
        // Four 20 ms buffers of tone, then six of silence, with nothing draining the ring.
        var tone = SyntheticAudio(pattern: .tone(frequency: 440), sampleRate: 48_000, amplitude: 0.5)
        let signal = tone.floats(frames: 3_840) + [Float](repeating: 0, count: 5_760)
        for k in 0..<10 {
            stream.capturer.capture(
                signal.span.extracting((k * 960)..<((k + 1) * 960)), sampleRate: 48_000, channels: 1,
                timeStampNs: Int64(k) * 20_000_000)
        }
        let s = stream.statistics.capture
        #expect(s.captured == 4 && s.droppedRingFull == 6)
        stream.pump()
        stream.stop()
        let rx = try sendTestReceiveAudio(sink.takePackets(), channels: 1, key: nil)
        #expect(rx.headers.count == 4)
        // The oldest (tone) buffers were kept: the decoded audio is loud, not silence.
        #expect(audioRMS(rx.pcm[960...]) > 0.2)
        #expect(stream.capturer.pool.available == stream.capturer.pool.count)
    }

    /// What the worker receives, sample for sample: Float copied, Int16 scaled by 1/32768,
    /// stereo averaged to mono, mono duplicated to stereo (checked against the plain formulas).
    @Test(arguments: [(1, 1), (1, 2), (2, 1), (2, 2)])
    func convertsAndMixesSamplesExactly(_ streamChannels: Int, _ inputChannels: Int) throws {
        let stream = try AudioSendStream(
            configuration: sendTestAudioConfiguration(channels: streamChannels), sink: MemoryPacketSink())
        stream.startWithoutWorker()
        defer { stream.stop() }
        let frames = AudioBufferCapturer.chunkFrames + 481  // two chunks, the second odd-sized
        let ints: [Int16] = (0..<(frames * inputChannels)).map { Int16(truncatingIfNeeded: $0 &* 7919 &- 30_000) }
        let floats: [Float] = ints.map { Float($0) / 32768 * 1.5 }  // beyond full scale too: passed as is
        for asInt in [false, true] {
            // Int16 through a lent `PCMBufferView`, Float through the span form of `capture`.
            if asInt {
                PCMBufferView.withInt16(ints.span, sampleRate: 48_000, channels: inputChannels, timeStampNs: 0) {
                    #expect($0.frameCount == frames)
                    stream.capturer.capture($0)
                }
            } else {
                stream.capturer.capture(floats.span, sampleRate: 48_000, channels: inputChannels, timeStampNs: 0)
            }
            func input(_ i: Int, _ c: Int) -> Float {
                asInt ? Float(ints[i * inputChannels + c]) * (1 / 32768) : floats[i * inputChannels + c]
            }
            var first = 0, mismatches = 0
            while first < frames {
                let chunk = try #require(stream.capturer.ring.tryPop())
                defer { stream.capturer.pool.release(chunk) }
                #expect(chunk.frameCount == min(AudioBufferCapturer.chunkFrames, frames - first))
                for i in 0..<chunk.frameCount {
                    for c in 0..<streamChannels {
                        let f = first + i
                        let want: Float =
                            inputChannels == streamChannels
                            ? input(f, c)
                            : inputChannels == 2 ? 0.5 * (input(f, 0) + input(f, 1)) : input(f, 0)
                        if chunk.float32Samples[i * streamChannels + c] != want { mismatches += 1 }
                    }
                }
                first += chunk.frameCount
            }
            #expect(mismatches == 0, "\(asInt ? "Int16" : "Float") \(inputChannels) ch into \(streamChannels) ch")
        }
    }

    @Test func rejectsMalformedBuffersAndCountsThem() throws {
        let stream = try AudioSendStream(configuration: sendTestAudioConfiguration(), sink: MemoryPacketSink())
        stream.startWithoutWorker()
        let samples = [Int16](repeating: 0, count: 961)
        let p = samples.span
        stream.capturer.capture(p, sampleRate: 7_999, channels: 1, timeStampNs: 0)  // rate too low
        stream.capturer.capture(p, sampleRate: 192_000, channels: 1, timeStampNs: 0)  // rate too high
        stream.capturer.capture(p, sampleRate: 48_000, channels: 3, timeStampNs: 0)  // 3 channels
        stream.capturer.capture(p, sampleRate: 48_000, channels: 2, timeStampNs: 0)  // 961 not whole frames
        stream.capturer.capture(p, sampleRate: 8_000, channels: 1, timeStampNs: 0)  // fine
        stream.stop()
        let s = stream.statistics.capture
        #expect(s.droppedInvalid == 4 && s.captured == 1)
    }

    @Test func splitsLongBuffersIntoPooledChunks() throws {
        var config = sendTestAudioConfiguration()
        config.ringCapacity = 64
        let stream = try AudioSendStream(configuration: config, sink: MemoryPacketSink())
        stream.startWithoutWorker()
        let samples = [Float](repeating: 0.1, count: 96_000)  // 1 s at 96 kHz in one call
        samples.withUnsafeBufferPointer { stream.capturer.capture($0, sampleRate: 96_000, channels: 1, timeStampNs: 0) }
        #expect(stream.statistics.capture.captured == 50)  // 1920-frame chunks
        stream.pump()
        stream.stop()
        #expect(stream.statistics.outbound.framesEncoded >= 49)
    }

    @Test func buffersBeforeStartAreInactive() throws {
        let stream = try AudioSendStream(configuration: sendTestAudioConfiguration(), sink: MemoryPacketSink())
        let samples = [Float](repeating: 0, count: 960)
        samples.withUnsafeBufferPointer { stream.capturer.capture($0, sampleRate: 48_000, channels: 1, timeStampNs: 0) }
        #expect(stream.statistics.capture.droppedInactive == 1)
    }
}
