import MediaCore
// Helpers shared by the audio codec tests (Opus, Resampler, AudioProcessor, SyntheticAudio).
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// One Opus configuration exercised by round-trip tests.
struct OpusSetting: CustomTestStringConvertible, Sendable {
    var sampleRate: OpusSampleRate
    var channels: Int
    var application: OpusApplication
    var bitrate: OpusBitrate
    var frame: OpusFrameDuration = .ms20
    var testDescription: String { "\(sampleRate.hertz / 1000)k \(channels)ch \(application) \(bitrate) \(frame)" }
}

/// Interleaves equal-length mono signals.
func audioInterleave(_ signals: [[Float]]) -> [Float] {
    var out = [Float](repeating: 0, count: signals[0].count * signals.count)
    for (c, signal) in signals.enumerated() { for i in signal.indices { out[i * signals.count + c] = signal[i] } }
    return out
}

/// SNR (dB) of mono `decoded` against `reference` when `decoded` lags by `delay` samples, ignoring
/// the first `skip` reference samples (codec start-up); also searches `slack` samples around the
/// delay and returns the lag found.
func audioSNR(reference: [Float], decoded: [Float], delay: Int, skip: Int, slack: Int = 0) -> (snr: Double, lag: Int) {
    let start = skip, lagStart = max(0, delay - slack)
    let ref = Array(reference[start..<(reference.count - delay - slack)])
    let dec = Array(decoded[(start + lagStart)...])
    let result = Quality.snr(reference: ref, decoded: dec, maxLag: 2 * slack)
    return (result.snr, result.lag + lagStart)
}

/// Encodes `signal` (interleaved Float) frame by frame and returns the packets (through the span
/// API).
func opusEncodeAll(_ signal: [Float], encoder: OpusEncoder, frame: OpusFrameDuration = .ms20) throws -> [[UInt8]] {
    let step = frame.samples(at: encoder.sampleRate) * encoder.channels
    var packets: [[UInt8]] = []
    var buffer = [UInt8](repeating: 0, count: OpusEncoder.maxPacketByteCount)
    var offset = 0
    while offset + step <= signal.count {
        let pcm = signal.span.extracting(offset..<(offset + step))
        let n = try buffer.withUnsafeMutableBytes { raw in
            var packet = OutputRawSpan(buffer: raw, initializedCount: 0)
            return try encoder.encode(pcm, into: &packet)
        }
        packets.append(Array(buffer[0..<n]))
        offset += step
    }
    return packets
}

/// Decodes `packets` one after the other into one interleaved Float signal (through the span API).
func opusDecodeAll(_ packets: [[UInt8]], decoder: OpusDecoder) throws -> [Float] {
    var out: [Float] = []
    var pcm = [Float](repeating: 0, count: decoder.maxFrameSize * decoder.channels)
    for packet in packets {
        var output = pcm.mutableSpan
        let n = try decoder.decode(packet.span.bytes, into: &output)
        out.append(contentsOf: pcm[0..<(n * decoder.channels)])
    }
    return out
}
