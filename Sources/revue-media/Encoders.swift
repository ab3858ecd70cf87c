// The encode stages shared by `encode` and `demo`: frames to VP8/VP9, samples to Opus packets.
import MediaCore
import RevueCommandLine
import RevueSession

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Video encoder settings from the command line.
struct VideoEncodeOptions {
    var codec: VPXCodec = .vp8
    var bitrate = 1_500_000
    var speed: Int?
    var keyframeInterval: Int?
    var threads = 1
    var errorResilient = false

    func configuration(width: Int, height: Int, frameRate: ContainerRational) -> VPXEncoderConfiguration {
        var conf = VPXEncoderConfiguration(codec: codec, width: width, height: height)
        conf.frameRate = max(1, min(240, Int(frameRate.doubleValue.rounded())))
        conf.bitrate = bitrate
        if let speed { conf.speed = speed }
        if let keyframeInterval { conf.keyframeInterval = keyframeInterval }
        conf.threads = threads
        conf.errorResilient = errorResilient
        return conf
    }
}

/// Encodes frames from a source; frame `n` gets presentation time `n` in a time base of one frame
/// (`1/fps`), what IVF files from libvpx use, and `n * 90000 / fps` ticks inside the encoder.
/// Thread rule: one thread. Cost: the encoder's.
final class VideoStreamEncoder {
    let encoder: VPXEncoder
    let frameRate: ContainerRational
    private(set) var framesIn = 0

    init(options: VideoEncodeOptions, width: Int, height: Int, frameRate: ContainerRational) throws {
        self.frameRate = frameRate
        do { encoder = try VPXEncoder(options.configuration(width: width, height: height, frameRate: frameRate)) } catch {
            throw InputError(description: "cannot create the \(options.codec) encoder for \(width)x\(height): \(error)")
        }
    }

    /// 90 kHz ticks of frame `n`.
    func ticks(frame n: Int) -> Int64 {
        Int64(n) * 90_000 * Int64(frameRate.denominator) / Int64(frameRate.numerator)
    }

    /// Frame index of a 90 kHz presentation time produced by `ticks(frame:)`.
    func frameIndex(ticks: Int64) -> Int64 {
        let num = Int64(frameRate.numerator), den = Int64(frameRate.denominator)
        return (ticks * num + 45_000 * den) / (90_000 * den)
    }

    /// Encodes the next frame; `body` gets each encoded frame and its frame index.
    func encode(_ frame: I420View, forceKeyframe: Bool = false, _ body: (EncodedVideoFrame, Int64) throws -> Void) throws {
        let n = framesIn
        let pts = ticks(frame: n), duration = max(1, ticks(frame: n + 1) - pts)
        var failure: Error?
        do {
            try encoder.encode(frame, pts: pts, duration: duration, forceKeyframe: forceKeyframe) { out in
                do { try body(out, self.frameIndex(ticks: out.pts)) } catch { failure = error }
            }
        } catch {
            throw InputError(description: "frame \(n): the encoder failed: \(error)")
        }
        if let failure { throw failure }
        framesIn += 1
    }

    /// Drains the encoder.
    func flush(_ body: (EncodedVideoFrame, Int64) throws -> Void) throws {
        var failure: Error?
        try encoder.flush { out in
            do { try body(out, self.frameIndex(ticks: out.pts)) } catch { failure = error }
        }
        if let failure { throw failure }
    }
}

/// Audio encoder settings from the command line.
struct AudioEncodeOptions {
    var bitrate: Int?
    var complexity = 10
    var fec = false
    var dtx = false
    var frameDuration: OpusFrameDuration = .ms20
    var application: OpusApplication = .audio
}

/// Turns samples of any rate and 1-2 channels into Opus packets: rates libopus takes (8, 12, 16,
/// 24, 48 kHz) are encoded as they are, others are resampled to 48 kHz first; input is cut into
/// frames of `frameDuration` and the last one padded with silence. Keeps the counts an Ogg Opus
/// file needs: pre-skip and the original length at 48 kHz (RFC 7845 §4.2, §4.4).
/// Thread rule: one thread. Cost: the encoder's, plus the resampler's when one is needed.
final class OpusStreamEncoder {
    let encoder: OpusEncoder
    let inputRate: Int
    let channels: Int
    /// The rate fed to libopus.
    let codingRate: OpusSampleRate
    /// Samples per channel in one frame at `codingRate`.
    let frameSamples: Int
    /// Samples at 48 kHz in one frame.
    var frameSamples48k: Int { frameSamples * 48_000 / codingRate.rawValue }
    /// Encoder lookahead at 48 kHz: the Ogg pre-skip.
    var preSkip48k: Int { encoder.lookahead * 48_000 / codingRate.rawValue }
    private let resampler: Resampler?
    private var frame: [Float]
    private var filled = 0
    private var packet = [UInt8](repeating: 0, count: OpusEncoder.maxPacketByteCount)
    private var resampled: [Float]
    /// Input sample frames consumed so far.
    private(set) var inputFrames: Int64 = 0
    /// Packets produced so far.
    private(set) var packetCount = 0
    /// Bytes of packets produced so far.
    private(set) var packetBytes = 0

    init(options: AudioEncodeOptions, inputRate: Int, channels: Int) throws {
        self.inputRate = inputRate
        self.channels = channels
        if let direct = OpusSampleRate(hertz: inputRate) {
            codingRate = direct
            resampler = nil
        } else {
            codingRate = .hz48000
            guard Resampler.rateRange.contains(inputRate) else {
                throw InputError(
                    description:
                        "sample rate \(inputRate) Hz is outside \(Resampler.rateRange.lowerBound)...\(Resampler.rateRange.upperBound) Hz"
                )
            }
            do {
                let r = try Resampler(channels: channels, inputRate: inputRate, outputRate: 48_000, quality: .desktop)
                r.skipLatency()
                resampler = r
            } catch { throw InputError(description: "cannot resample \(inputRate) Hz to 48 kHz: \(error)") }
        }
        do { encoder = try OpusEncoder(sampleRate: codingRate, channels: channels, application: options.application) } catch {
            throw InputError(description: "cannot create the Opus encoder: \(error)")
        }
        encoder.complexity = options.complexity
        let bitrate = options.bitrate ?? 32_000 * channels
        encoder.bitrate = OpusBitrate(bitsPerSecond: bitrate)
        if options.fec {
            encoder.isInbandFECEnabled = true
            encoder.expectedPacketLossPercent = 10
        }
        encoder.isDTXEnabled = options.dtx
        frameSamples = options.frameDuration.samples(at: codingRate)
        frame = [Float](repeating: 0, count: frameSamples * channels)
        resampled = [Float](repeating: 0, count: 4096 * channels)
    }

    /// The length of the input at 48 kHz, what the decoded file should hold.
    var originalSampleCount48k: Int64 {
        (inputFrames * 48_000 + Int64(inputRate / 2)) / Int64(inputRate)
    }

    /// Samples at the coding rate that the input so far should become.
    private var codingSamplesWanted: Int64 {
        (inputFrames * Int64(codingRate.rawValue) + Int64(inputRate / 2)) / Int64(inputRate)
    }
    private var codingSamplesFed: Int64 = 0

    /// Feeds interleaved samples; `body` gets each packet (bytes, duration at 48 kHz).
    func feed(_ samples: UnsafeBufferPointer<Float>, _ body: (UnsafeRawBufferPointer, Int) throws -> Void) throws {
        inputFrames += Int64(samples.count / channels)
        guard let resampler else { return try push(samples, body) }
        var offset = 0
        while offset < samples.count {
            let (consumed, produced) = resampled.withUnsafeMutableBufferPointer { out in
                resampler.process(UnsafeBufferPointer(rebasing: samples[offset...]), into: out)
            }
            offset += consumed * channels
            try resampled.withUnsafeBufferPointer { try push(UnsafeBufferPointer(rebasing: $0[0..<(produced * channels)]), body) }
            if consumed == 0 && produced == 0 { break }
        }
    }

    /// Flushes the resampler's tail and encodes the last, padded frame.
    func finish(_ body: (UnsafeRawBufferPointer, Int) throws -> Void) throws {
        if let resampler {
            // Push silence through the filter until the output has caught up with the input.
            let zeros = [Float](repeating: 0, count: 256 * channels)
            var guardCount = 0
            while codingSamplesFed < codingSamplesWanted && guardCount < 1000 {
                guardCount += 1
                let missing = Int(codingSamplesWanted - codingSamplesFed)
                let (_, produced) = zeros.withUnsafeBufferPointer { z in
                    resampled.withUnsafeMutableBufferPointer { out in resampler.process(z, into: out) }
                }
                let keep = min(produced, missing)
                try resampled.withUnsafeBufferPointer { try push(UnsafeBufferPointer(rebasing: $0[0..<(keep * channels)]), body) }
            }
        }
        // The decoder's output lags by the lookahead (the pre-skip it drops): feed that much
        // silence so the last input samples come out before the end of the stream.
        let tail = [Float](repeating: 0, count: encoder.lookahead * channels)
        try tail.withUnsafeBufferPointer { try push($0, body) }
        if filled > 0 {
            for i in filled..<frame.count { frame[i] = 0 }
            filled = frame.count
            try encodeFrame(body)
        }
    }

    private func push(_ samples: UnsafeBufferPointer<Float>, _ body: (UnsafeRawBufferPointer, Int) throws -> Void) throws {
        codingSamplesFed += Int64(samples.count / channels)
        var offset = 0
        while offset < samples.count {
            let n = min(frame.count - filled, samples.count - offset)
            frame.withUnsafeMutableBufferPointer { f in
                for i in 0..<n { f[filled + i] = samples[offset + i] }
            }
            filled += n
            offset += n
            if filled == frame.count { try encodeFrame(body) }
        }
    }

    private func encodeFrame(_ body: (UnsafeRawBufferPointer, Int) throws -> Void) throws {
        filled = 0
        let length: Int
        do {
            length = try frame.withUnsafeBufferPointer { pcm in
                try packet.withUnsafeMutableBytes { out in try encoder.encode(pcm, into: out) }
            }
        } catch { throw InputError(description: "the Opus encoder failed: \(error)") }
        packetCount += 1
        packetBytes += length
        try packet.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[0..<length]), frameSamples48k) }
    }
}
