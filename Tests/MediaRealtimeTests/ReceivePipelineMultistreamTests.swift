// A receive pipeline that carries several participants' streams, as an SFU subscription does:
// one audio stream per SSRC up to a limit, all played on one clock thread into a sink that is
// told each stream's SSRC; and feedback that a server demultiplexing RTCP by the first report
// block (Janus) can attribute.
import Foundation
import MediaCore
import MediaTestSupport
import Synchronization
import Testing

/// Collects the PCM of each stream by SSRC.
final class PerStreamAudioSink: AudioStreamSink, Sendable {
    let streams = Mutex<[UInt32: [Int16]]>([:])
    func play(_ samples: Span<Int16>, sampleRate: Int, channels: Int, ssrc: UInt32) {
        streams.withLock { $0[ssrc, default: []] += copied(samples) }
    }
}

/// Power of the `frequency` component of `x` (48 kHz), by correlation with a sine and a cosine.
private func tonePower(_ x: ArraySlice<Int16>, _ frequency: Double) -> Double {
    var s = 0.0, c = 0.0
    for (i, v) in x.enumerated() {
        let w = 2 * Double.pi * frequency * Double(i) / 48_000
        s += Double(v) * sin(w)
        c += Double(v) * cos(w)
    }
    return (s * s + c * c) / Double(max(1, x.count))
}

@Suite(.serialized) struct ReceivePipelineMultistreamTests {
    /// Four senders' Opus tones (300, 500, 700, 900 Hz) on one socket; the pipeline takes three
    /// audio streams (`maxAudioStreams`), in order of arrival, and drops and counts the fourth.
    /// One playout clock plays all three, each into the sink under its own SSRC, each the tone
    /// its sender sent and none of the others'.
    @Test func severalAudioStreamsPlayOnOneClockEachUnderItsSSRC() throws {
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        var conf = ReceivePipelineConfiguration(remoteKey: nil)
        conf.audio = AudioReceiveSettings(payloadType: 111)
        conf.maxAudioStreams = 3
        conf.synchronizesAudioAndVideo = false
        let pipeline = try ReceivePipeline(socket: socket, configuration: conf, renderer: nil)
        let sink = PerStreamAudioSink()
        let clock = AudioPlayoutClock(pipeline: pipeline, sink: sink)
        pipeline.start()
        clock.start()
        defer {
            clock.stop()
            pipeline.stop()
        }

        let ssrcs: [UInt32] = [0x1111, 0x2222, 0x3333, 0x4444]
        let tones: [Double] = [300, 500, 700, 900]
        let encoders = try ssrcs.map { _ in try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .audio) }
        let sender = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let to = try socket.localAddress()
        var pcm = [Int16](repeating: 0, count: 960)
        var payload = [UInt8](repeating: 0, count: 1500)
        var packet = [UInt8](repeating: 0, count: 1600)
        let frames = 75  // 1.5 s of 20 ms frames
        for n in 0..<frames {
            for (k, ssrc) in ssrcs.enumerated() {
                for i in 0..<960 {
                    let t = Double(n * 960 + i) / 48_000
                    pcm[i] = Int16(8000 * sin(2 * Double.pi * tones[k] * t))
                }
                let size = try pcm.withUnsafeBufferPointer { p in
                    try payload.withUnsafeMutableBytes { try encoders[k].encode(p, into: $0) }
                }
                let header = RTPHeader(
                    payloadType: 111, sequenceNumber: UInt16(n), timestamp: UInt32(n * 960), ssrc: ssrc)
                let length = packet.withUnsafeMutableBytes {
                    $0.appending {
                        RTPPacket.marshal(header: header, payload: payload.span.bytes.extracting(0..<size), into: &$0)
                    }
                }
                try packet.withUnsafeBytes { _ = try sender.send(UnsafeRawBufferPointer(rebasing: $0[0..<length]), to: to) }
            }
            usleep(20_000)
        }
        usleep(300_000)

        let streams = pipeline.audioStreams
        #expect(streams.map(\.ssrc) == Array(ssrcs.prefix(3)), "\(streams.map(\.ssrc))")
        #expect(streams.first?.stream === pipeline.audio)
        #expect(pipeline.statistics.unknownStream >= frames - 2, "\(pipeline.statistics)")
        let inbound = pipeline.inboundStats.filter { $0.kind == "audio" }
        #expect(Set(inbound.map(\.ssrc)) == Set(ssrcs.prefix(3)))
        #expect(inbound.allSatisfy { $0.packetsReceived >= UInt64(frames - 2) }, "\(inbound.map(\.packetsReceived))")

        let played = sink.streams.withLock { $0 }
        #expect(played[ssrcs[3]] == nil, "the stream past the limit was played")
        for k in 0..<3 {
            let samples = try #require(played[ssrcs[k]])
            // The last half second, well after the prebuffer.
            let tail = samples.suffix(24_000)
            #expect(tail.count == 24_000)
            let own = tonePower(tail, tones[k])
            for j in 0..<4 where j != k {
                let other = tonePower(tail, tones[j])
                #expect(own > 100 * other, "stream \(k): \(own) at \(tones[k]) Hz against \(other) at \(tones[j]) Hz")
            }
        }
    }

    /// With `feedbackLedByReportBlock`, a keyframe request for the only video stream leaves in a
    /// compound whose receiver report has one block, that stream's (Janus drops feedback after
    /// a report without blocks); without it, the request follows a report without blocks.
    @Test(arguments: [true, false])
    func aKeyframeRequestIsLedByItsStreamsReportBlock(led: Bool) throws {
        let socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        var conf = ReceivePipelineConfiguration(remoteKey: nil)
        conf.video = [VideoReceiveSettings(codec: .vp8, payloadType: 96)]
        conf.feedbackLedByReportBlock = led
        conf.reportIntervalMilliseconds = 60_000  // no regular report in the way
        conf.synchronizesAudioAndVideo = false
        let pipeline = try ReceivePipeline(socket: socket, configuration: conf, renderer: nil)
        pipeline.start()
        defer { pipeline.stop() }

        // Delta frames with no keyframe before them: the stream keeps asking for one.
        let sender = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        let to = try socket.localAddress()
        let videoSSRC: UInt32 = 0xCAFE
        let vp8: [UInt8] = [0x10, 0x01, 0x00, 0x00] + [UInt8](repeating: 0x55, count: 40)
        var packet = [UInt8](repeating: 0, count: 200)
        var buffer = [UInt8](repeating: 0, count: 2048)
        var withPLI: [[RTCPPacket]] = []
        for n in 0..<40 {
            let header = RTPHeader(
                marker: true, payloadType: 96, sequenceNumber: UInt16(n), timestamp: UInt32(n * 6000), ssrc: videoSSRC)
            let length = packet.withUnsafeMutableBytes {
                $0.appending { RTPPacket.marshal(header: header, payload: vp8.span.bytes, into: &$0) }
            }
            try packet.withUnsafeBytes { _ = try sender.send(UnsafeRawBufferPointer(rebasing: $0[0..<length]), to: to) }
            // What came back meanwhile: the compounds that carry a PLI.
            while (try? sender.waitUntilReadable(timeoutMilliseconds: 50)) == true {
                let got = try buffer.withUnsafeMutableBytes { try sender.receive(into: $0).count }
                let compound = try buffer.withUnsafeBytes {
                    try RTCPCompound.parse($0.bytes.extracting(0..<got))
                }
                if compound.contains(where: { if case .pictureLossIndication = $0 { true } else { false } }) {
                    withPLI.append(compound)
                }
            }
        }
        // The first request comes with the first regular report; the later ones show the rule.
        #expect(withPLI.count >= 2, "\(withPLI.count) compounds with a PLI")
        let blocks: [[UInt32]] = withPLI.map { compound in
            guard case .receiverReport(let rr) = compound.first else { return [0] }
            return rr.reports.map(\.ssrc)
        }
        if led {
            #expect(blocks.allSatisfy { $0 == [videoSSRC] }, "\(blocks)")
        } else {
            let later = blocks.dropFirst()
            #expect(later.allSatisfy { $0.isEmpty }, "\(blocks)")
        }
    }
}
