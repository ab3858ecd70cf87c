// Opus in-band FEC on the send pipeline follows the receiver: off until the peer's description
// asks for it, and then spent only when the receiver reports loss (RFC 7587 §3.3, RFC 3550
// §6.4.1). Judged on what a receiver recovers: a lost frame decoded from the next packet's FEC
// data against the same frame decoded from its own packet.
import MediaCore
import MediaTestSupport
import MediaTools
import Testing

@Suite struct AudioSendFECTests {
    /// The Opus payloads of one second of speech-like audio through a driven stream with the
    /// default settings (a PeerConnection's), after `prepare` ran on it.
    static func packets(_ prepare: (AudioSendStream) -> Void) throws -> [[UInt8]] {
        let sink = MemoryPacketSink()
        var c = AudioSendStream.Configuration()
        c.srtp = nil  // as a PeerConnection's track: protected later, on its transport
        let stream = try AudioSendStream(configuration: c, sink: sink)
        stream.startWithoutWorker()
        prepare(stream)
        var source = SyntheticAudio(pattern: .speech, sampleRate: 48_000, channels: 1, amplitude: 0.5)
        let signal = source.floats(frames: 48_000)
        for start in stride(from: 0, to: signal.count, by: 960) {
            signal.withUnsafeBufferPointer { all in
                stream.capturer.capture(
                    UnsafeBufferPointer(rebasing: all[start..<(start + 960)]), sampleRate: 48_000, channels: 1,
                    timeStampNs: 1_000_000_000 + Int64(start) * 1_000_000 / 48)
            }
            stream.pump()
        }
        stream.stop()
        return try sink.takePackets().map { bytes in
            let packet = try RTPPacket(parsing: bytes.span.bytes)
            return Array(bytes[try OpusPayload.depacketize(packet)])
        }
    }

    /// Mean SNR, over every fifth frame from the tenth, of the frame recovered from the next
    /// packet's FEC data against the frame decoded from its own packet.
    static func recoveredSNR(_ payloads: [[UInt8]]) throws -> Double {
        let lost = Set(stride(from: 10, to: payloads.count - 1, by: 5))
        func decode(recovering: Bool) throws -> [Float] {
            let decoder = try OpusDecoder(sampleRate: .hz48000, channels: 1)
            var out: [Float] = []
            var pcm = [Float](repeating: 0, count: decoder.maxFrameSize)
            for (i, payload) in payloads.enumerated() {
                var span = pcm.mutableSpan
                let n: Int
                if recovering && lost.contains(i) {
                    let next = payloads[i + 1]
                    n = try decoder.decodeFEC(nextPacket: next.span.bytes, into: &span, frameSize: 960)
                } else {
                    n = try decoder.decode(payload.span.bytes, into: &span)
                }
                out += pcm[0..<n]
            }
            return out
        }
        let clean = try decode(recovering: false), recovered = try decode(recovering: true)
        let snrs = lost.sorted().map { i in
            Quality.snr(
                reference: Array(clean[(i * 960)..<((i + 1) * 960)]), decoded: Array(recovered[(i * 960)..<((i + 1) * 960)])
            )
            .snr
        }
        return snrs.reduce(0, +) / Double(snrs.count)
    }

    @Test func fecIsSpentOnlyWhenAskedForAndTheReceiverReportsLoss() throws {
        func run(_ prepare: (AudioSendStream) -> Void) throws -> (bytes: Double, snr: Double) {
            let payloads = try Self.packets(prepare)
            return (Double(payloads.map(\.count).reduce(0, +)) / Double(payloads.count), try Self.recoveredSNR(payloads))
        }
        let none = try run { _ in }
        let askedNoLoss = try run { $0.setInbandFEC(true) }
        let lossNotAsked = try run { $0.handleReceiverLoss(fractionLost: 0.1) }
        // Three reports of 10 % loss, as a receiver sends them about once a second.
        let askedWithLoss = try run {
            $0.setInbandFEC(true)
            for _ in 0..<3 {
                $0.handleReceiverLoss(fractionLost: 0.1)
                $0.pump()
            }
        }
        print(
            "AudioSendFECTests: bytes per packet and recovered-frame SNR: no FEC \(none), FEC without loss \(askedNoLoss), loss without FEC \(lossNotAsked), FEC with 10 % loss reported \(askedWithLoss)"
        )
        // No FEC data: the same packets, and the decoder conceals (a guess: below 0 dB here).
        #expect(askedNoLoss.bytes == none.bytes && lossNotAsked.bytes == none.bytes)
        #expect(none.snr < 0 && askedNoLoss.snr < 0 && lossNotAsked.snr < 0)
        // FEC data costs bytes and recovers the lost frame (measured: 64.6 -> 74.5 bytes a packet,
        // -5.9 -> +1.6 dB after three reports of 10 %, protected for 10 %: SILK's low-rate copy,
        // not the frame itself).
        #expect(askedWithLoss.bytes > none.bytes * 1.1, "\(askedWithLoss) against \(none)")
        #expect(askedWithLoss.snr > none.snr + 5, "\(askedWithLoss) against \(none)")
    }
}
