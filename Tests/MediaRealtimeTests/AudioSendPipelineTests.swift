import Foundation
import MediaCore
import MediaTestSupport
import MediaTools
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A plain-RTP (or SRTP) audio stream configuration for tests.
func sendTestAudioConfiguration(channels: Int = 1, srtp: SRTPKeyMaterial? = nil) -> AudioSendStream.Configuration {
    var c = AudioSendStream.Configuration()
    c.channels = channels
    c.srtp = srtp
    c.bitrate = 64_000
    c.initialSequenceNumber = 65_500
    return c
}

/// Feeds `signal` (interleaved Float) to `stream` in `chunk`-frame buffers at `rate`, pumping the
/// pipeline on this thread after each, with capture times following the samples from `startNs`.
func sendTestFeed(
    _ stream: AudioSendStream, _ signal: [Float], rate: Int, channels: Int, chunk: Int,
    startNs: Int64 = 1_000_000_000
) {
    var offset = 0
    while offset < signal.count / channels {
        let n = min(chunk, signal.count / channels - offset)
        signal.withUnsafeBufferPointer { all in
            let part = UnsafeBufferPointer(rebasing: all[(offset * channels)..<((offset + n) * channels)])
            stream.capturer.capture(
                part, sampleRate: rate, channels: channels,
                timeStampNs: startNs + Int64(offset) * 1_000_000_000 / Int64(rate))
        }
        stream.pump()
        offset += n
    }
}

/// What a receiver makes of an audio stream's packets.
struct SendTestAudioReceived {
    var headers: [RTPHeader] = []
    var payloadSamples: [Int] = []
    var pcm: [Float] = []
}

func sendTestReceiveAudio(_ packets: [[UInt8]], channels: Int, key: SRTPKeyMaterial?) throws -> SendTestAudioReceived {
    var out = SendTestAudioReceived()
    let srtp = try key.map { try SRTPContext(material: $0, direction: .inbound) }
    let decoder = try OpusDecoder(sampleRate: .hz48000, channels: channels)
    var pcm = [Float](repeating: 0, count: decoder.maxFrameSize * channels)
    for var bytes in packets {
        if let srtp {
            let n = try bytes.withUnsafeMutableBytes {
                var span = $0.mutableBytes
                return try srtp.unprotect(&span, length: span.byteCount)
            }
            bytes.removeLast(bytes.count - n)
        }
        try bytes.withUnsafeBytes { raw in
            let packet = try RTPPacket(parsing: raw.bytes)
            out.headers.append(packet.header)
            let payload = UnsafeRawBufferPointer(rebasing: raw[try OpusPayload.depacketize(packet)])
            out.payloadSamples.append(try OpusPayload.sampleCount(packet: payload.bytes))
            let n = try pcm.withUnsafeMutableBufferPointer {
                var out = $0.mutableSpan; return try decoder.decode(payload.bytes, into: &out)
            }
            out.pcm += pcm[0..<(n * channels)]
        }
    }
    return out
}

@Suite struct AudioSendPipelineTests {
    @Test func toneRoundTripsWithRTPAndAudioLevelExtensions() throws {
        let key = SRTPKeyMaterial.random(for: .aeadAES128GCM)
        let config = sendTestAudioConfiguration(srtp: key)
        let sink = MemoryPacketSink()
        let stream = try AudioSendStream(configuration: config, sink: sink)
        stream.startWithoutWorker()
        var gen = SyntheticAudio(pattern: .tone(frequency: 440), sampleRate: 48_000, amplitude: 0.5)
        let signal = gen.floats(frames: 48_000)  // 1 s
        sendTestFeed(stream, signal, rate: 48_000, channels: 1, chunk: 480)  // 10 ms buffers
        stream.stop()
        let packets = sink.takePackets()
        #expect(packets.count == 50)
        let rx = try sendTestReceiveAudio(packets, channels: 1, key: key)
        for (i, h) in rx.headers.enumerated() {
            #expect(h.ssrc == config.ssrc && h.payloadType == 111)
            #expect(h.sequenceNumber == UInt16(truncatingIfNeeded: 65_500 + i))
            #expect(h.marker == (i == 0))  // RFC 3551 §4.1: first packet of the talkspurt only
            if i > 0 { #expect(h.timestamp &- rx.headers[i - 1].timestamp == 960) }
            // RFC 6464: a 0.5-amplitude sine has RMS 0.354 = -9 dBov.
            let level = h.extensions.audioLevel(id: 1)
            #expect(level.map { (8...10).contains($0.level) } == true)
            #expect(h.extensions.absSendTime(id: 3) != nil)
            #expect(h.extensions.effectiveForm == .oneByte)
        }
        #expect(rx.payloadSamples.allSatisfy { $0 == 960 })
        // Opus at 64 kbit/s reproduces the tone: measured ~25 dB; bound 15 dB (lag = codec delay).
        let snr = Quality.snr(reference: Array(signal[4800..<43_200]), decoded: Array(rx.pcm[4800...]), maxLag: 960)
        #expect(snr.snr > 15, "SNR \(snr.snr) at lag \(snr.lag)")
        let s = stream.statistics
        #expect(s.outbound.framesEncoded == 50 && s.outbound.packetsSent == 50)
        #expect(abs(s.source.totalSamplesDuration - 1.0) < 1e-9)
        #expect(abs(s.source.audioLevel - 0.3536) < 0.01)
        #expect(abs(s.source.totalAudioEnergy - 0.125) < 0.005)  // RMS² x 1 s
        #expect(s.capture.captured == 100 && s.capture.dropped == 0)
        #expect(stream.senderInfo.packetCount == 50 && stream.senderInfo.lastRTPTimestamp == rx.headers.last!.timestamp)
    }

    @Test func resamples44100StereoInt16ToOpus48k() throws {
        let sink = MemoryPacketSink()
        let stream = try AudioSendStream(configuration: sendTestAudioConfiguration(channels: 2), sink: sink)
        stream.startWithoutWorker()
        var gen = SyntheticAudio(pattern: .tone(frequency: 1000), sampleRate: 44_100, channels: 2, amplitude: 0.5)
        let ints = gen.int16s(frames: 44_100)
        var offset = 0
        while offset < 44_100 {  // odd-sized buffers, one of them longer than a pooled chunk
            let n = min([441, 3000, 1023][offset % 3], 44_100 - offset)
            ints.withUnsafeBufferPointer { all in
                stream.capturer.capture(
                    UnsafeBufferPointer(rebasing: all[(offset * 2)..<((offset + n) * 2)]),
                    sampleRate: 44_100, channels: 2, timeStampNs: Int64(offset) * 1_000_000_000 / 44_100)
            }
            stream.pump()
            offset += n
        }
        stream.stop()
        let rx = try sendTestReceiveAudio(sink.takePackets(), channels: 2, key: nil)
        #expect(rx.headers.count >= 49 && rx.headers.count <= 50)
        // 1 kHz survives resampling: 2000 zero crossings per second on each channel.
        let left = audioChannel(rx.pcm, channel: 0, of: 2), right = audioChannel(rx.pcm, channel: 1, of: 2)
        let crossings = audioZeroCrossings(left[4800..<43_200])
        #expect(abs(crossings - 1600) <= 4, "\(crossings) zero crossings in 0.8 s")
        #expect(abs(audioRMS(left[4800..<43_200]) - 0.354) < 0.05)
        #expect(abs(audioRMS(right[4800..<43_200]) - 0.354) < 0.05)
    }

    @Test(arguments: [(OpusFrameDuration.ms10, 480), (.ms40, 1920), (.ms60, 2880)])
    func frameDurationsSetTimestampSteps(_ duration: OpusFrameDuration, _ step: Int) throws {
        var config = sendTestAudioConfiguration()
        config.frameDuration = duration
        let sink = MemoryPacketSink()
        let stream = try AudioSendStream(configuration: config, sink: sink)
        stream.startWithoutWorker()
        var gen = SyntheticAudio(pattern: .tone(frequency: 300), sampleRate: 16_000)
        sendTestFeed(stream, gen.floats(frames: 16_000), rate: 16_000, channels: 1, chunk: 160)
        stream.stop()
        let rx = try sendTestReceiveAudio(sink.takePackets(), channels: 1, key: nil)
        #expect(rx.headers.count >= 48_000 / step - 1)
        #expect(rx.payloadSamples.allSatisfy { $0 == step })
        for k in 1..<rx.headers.count { #expect(rx.headers[k].timestamp &- rx.headers[k - 1].timestamp == UInt32(step)) }
    }

    @Test func dtxSkipsSilenceAndMarksTheNextTalkspurt() throws {
        var config = sendTestAudioConfiguration()
        config.dtx = true
        let sink = MemoryPacketSink()
        let stream = try AudioSendStream(configuration: config, sink: sink)
        stream.startWithoutWorker()
        var tone = SyntheticAudio(pattern: .tone(frequency: 440), sampleRate: 48_000)
        let signal = tone.floats(frames: 24_000) + [Float](repeating: 0, count: 96_000) + tone.floats(frames: 24_000)
        sendTestFeed(stream, signal, rate: 48_000, channels: 1, chunk: 960)
        stream.stop()
        let rx = try sendTestReceiveAudio(sink.takePackets(), channels: 1, key: nil)
        let s = stream.statistics
        #expect(s.outbound.framesEncoded == 150)
        #expect(s.dtxFramesSkipped > 60)
        #expect(UInt64(rx.headers.count) + s.dtxFramesSkipped == 150)
        // Marker on the first packet, and on the first one after each skipped stretch.
        for k in 1..<rx.headers.count {
            let gap = rx.headers[k].timestamp &- rx.headers[k - 1].timestamp
            #expect(rx.headers[k].marker == (gap > 960), "packet \(k) gap \(gap)")
        }
        #expect(rx.headers[0].marker)
    }

    @Test func captureGapAdvancesTimestampAndSetsMarker() throws {
        let sink = MemoryPacketSink()
        let stream = try AudioSendStream(configuration: sendTestAudioConfiguration(), sink: sink)
        stream.startWithoutWorker()
        var gen = SyntheticAudio(pattern: .tone(frequency: 440), sampleRate: 48_000)
        sendTestFeed(stream, gen.floats(frames: 9_600), rate: 48_000, channels: 1, chunk: 960, startNs: 0)
        // The caller pauses for 500 ms.
        sendTestFeed(stream, gen.floats(frames: 9_600), rate: 48_000, channels: 1, chunk: 960, startNs: 700_000_000)
        stream.stop()
        let rx = try sendTestReceiveAudio(sink.takePackets(), channels: 1, key: nil)
        #expect(rx.headers.count == 20)
        #expect(rx.headers[10].timestamp &- rx.headers[9].timestamp == 960 + 24_000)
        #expect(
            rx.headers.map(\.marker) == [true] + [Bool](repeating: false, count: 9) + [true] + [Bool](repeating: false, count: 9))
    }

    /// Runs `signal` through a stream and returns the speaking events (via both the callback and
    /// the AsyncStream) with the 20 ms frame index they came at.
    static func speakingEvents(_ signal: [Float]) async throws -> [(frame: Int, speaking: Bool)] {
        let stream = try AudioSendStream(configuration: sendTestAudioConfiguration(), sink: MemoryPacketSink())
        let fromCallback = Mutex<[SpeakingEvent]>([])
        stream.onSpeakingEvent = { e in fromCallback.withLock { $0.append(e) } }
        stream.startWithoutWorker()
        sendTestFeed(stream, signal, rate: 48_000, channels: 1, chunk: 960, startNs: 0)
        stream.stop()
        let callbackEvents = fromCallback.withLock { $0 }
        var streamed: [SpeakingEvent] = []
        for await e in stream.speakingEvents.prefix(callbackEvents.count) { streamed.append(e) }
        #expect(streamed == callbackEvents)
        #expect(callbackEvents.allSatisfy { $0.ssrc == stream.ssrc })
        return callbackEvents.map { (Int($0.captureNs / 20_000_000), $0.isSpeaking) }
    }

    @Test func speakingDetectorEventsOnSpeechBursts() async throws {
        // 1 s silence, 3 s synthetic speech (syllables with pauses), 2 s silence.
        var speech = SyntheticAudio(pattern: .speech, sampleRate: 48_000, amplitude: 0.4, seed: 7)
        let signal = [Float](repeating: 0, count: 48_000) + speech.floats(frames: 144_000) + [Float](repeating: 0, count: 96_000)
        let events = try await Self.speakingEvents(signal)
        #expect(events.map(\.speaking) == [true, false], "\(events)")
        if events.count == 2 {
            #expect(events[0].frame >= 50 && events[0].frame <= 65)  // within ~300 ms of the first syllable
            #expect(events[1].frame >= 200 && events[1].frame <= 240)  // hangover after the last syllable
        }
    }

    @Test func silenceAndSteadyNoiseAreNotSpeech() async throws {
        #expect(try await Self.speakingEvents([Float](repeating: 0, count: 96_000)).isEmpty)
        var noise = SyntheticAudio(pattern: .whiteNoise, sampleRate: 48_000, amplitude: 0.1, seed: 3)
        let events = try await Self.speakingEvents(noise.floats(frames: 48_000 * 5))
        // The floor catches up with a step into noise: at most one short start/stop pair, never stays on.
        #expect(events.count <= 2)
        if let last = events.last { #expect(!last.speaking) }
    }

    @Test func nackResendsAudioPackets() throws {
        let sink = MemoryPacketSink()
        let stream = try AudioSendStream(configuration: sendTestAudioConfiguration(srtp: .random()), sink: sink)
        stream.startWithoutWorker()
        var gen = SyntheticAudio(pattern: .tone(frequency: 440), sampleRate: 48_000)
        sendTestFeed(stream, gen.floats(frames: 4_800), rate: 48_000, channels: 1, chunk: 960)
        let sent = sink.takePackets()
        stream.handleNack([UInt16(truncatingIfNeeded: 65_502)])
        stream.pump()
        #expect(sink.takePackets() == [sent[2]])
        stream.stop()
        #expect(stream.statistics.outbound.retransmittedPacketsSent == 1)
    }
}
