import MediaCore

extension FuzzEntries {
    nonisolated(unsafe) private static let opusDecoder = try! OpusDecoder(sampleRate: .hz48000, channels: 2)
    nonisolated(unsafe) private static let opusPCM = UnsafeMutableBufferPointer<Int16>.allocate(capacity: 5760 * 2)

    /// Opus TOC handling (RFC 6716 §3.1-§3.2): our own TOC arithmetic (`OpusPacketInfo`,
    /// `OpusPayload.sampleCount`) must agree with libopus (`OpusPacket`) on every packet libopus
    /// accepts, and decoding must produce exactly that many samples.
    @Sendable public static func opus(_ data: UnsafeRawBufferPointer) {
        fuzzScratch.withLock { _ in opusUnlocked(data) }
    }

    private static func opusUnlocked(_ data: UnsafeRawBufferPointer) {
        let info = OpusPacketInfo.sampleCount(data.bytes)
        let payload = try? OpusPayload.sampleCount(packet: data.bytes)
        _ = OpusPacketInfo.frameCount(data.bytes)
        if let toc = data.first { _ = OpusPacketInfo.frameSamples(toc: toc) }
        guard let frames = try? OpusPacket.validate(data.bytes) else { return }
        fuzzRequire((try? OpusPacket.frameCount(data.bytes)) == frames, "libopus frame counts disagree")
        fuzzRequire(
            OpusPacketInfo.frameCount(data.bytes) == frames,
            "OpusPacketInfo.frameCount \(String(describing: OpusPacketInfo.frameCount(data.bytes))) != libopus \(frames)")
        let samples = try? OpusPacket.sampleCount(data.bytes, sampleRate: .hz48000)
        fuzzRequire(
            info == samples, "OpusPacketInfo.sampleCount \(String(describing: info)) != libopus \(String(describing: samples))")
        fuzzRequire(
            payload == samples, "OpusPayload.sampleCount \(String(describing: payload)) != libopus \(String(describing: samples))"
        )
        for rate in OpusSampleRate.allCases { _ = try? OpusPacket.samplesPerFrame(data.bytes, sampleRate: rate) }
        _ = try? OpusPacket.bandwidth(data.bytes)
        _ = try? OpusPacket.channelCount(data.bytes)
        _ = try? OpusPacket.mode(data.bytes)
        var pcm = opusPCM.mutableSpan
        if let decoded = try? opusDecoder.decode(data.bytes, into: &pcm) {
            fuzzRequire(decoded == samples, "decoded \(decoded) samples, TOC says \(String(describing: samples))")
        }
    }
}
