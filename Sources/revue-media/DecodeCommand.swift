// `revue-media decode`: IVF (VP8/VP9) to Y4M, Ogg Opus to WAV.
import MediaCore
import RevueCommandLine
import RevueSession

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

enum DecodeCommand: Command {
    static let name = "decode"
    static let summary = "decode a .ivf (VP8/VP9) file to .y4m, or an Ogg Opus file to .wav"
    static let help = """
        usage: revue-media decode INPUT -o OUTPUT [options]

        INPUT .ivf (VP8 or VP9) -> OUTPUT .y4m; INPUT .ogg/.opus (Ogg Opus) -> OUTPUT .wav.
        The input's type is read from its first bytes, the output's from its extension.
        -o and --output are the same option.

        video:
          --fps N            frame rate written in the .y4m header (default: from the IVF time
                             base and timestamps); a gap in the timestamps repeats the last frame
          --size WxH         scale every frame to this size (default: the first frame's size)
        audio:
          --rate HZ          output sample rate (default: the original rate stored in the file
                             when it is 8, 12, 16, 24 or 48 kHz, else 48000)
          --float            write 32-bit float samples (default 16-bit PCM)
        output:
          --json             print the result as JSON
          --quiet, -q        no progress on stderr

        The output is written to a temporary name and renamed when complete; a corrupt input
        stops with an error naming the frame or packet and leaves nothing behind.
        """

    static let valueOptions: Set<String> = ["-o", "--output", "--fps", "--size", "--rate"]
    static let flagOptions: Set<String> = ["--float", "--json", "--quiet", "-q"]

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments(argv, valueOptions: valueOptions, flagOptions: flagOptions)
        guard let output = args.string("-o") ?? args.string("--output") else {
            throw UsageError(description: "missing -o OUTPUT")
        }
        guard args.positional.count == 1 else {
            throw UsageError(
                description: args.positional.isEmpty
                    ? "missing INPUT (a .ivf or .ogg file)" : "expected one INPUT, got \(args.positional.count)")
        }
        let input = args.positional[0]
        guard let outKind = MediaFileKind(extensionOf: output), [.y4m, .wav].contains(outKind) else {
            throw UsageError(description: "-o \(output): unsupported output type (use .y4m for video, .wav for audio)")
        }
        let inKind = try MediaFileKind.sniff(input)
        switch (inKind, outKind) {
        case (.ivf, .y4m):
            for option in ["--rate"] where args.string(option) != nil {
                throw UsageError(description: "\(option) applies to audio; \(input) is video")
            }
            if args.flag("--float") { throw UsageError(description: "--float applies to audio; \(input) is video") }
            return try decodeVideo(args, input: input, output: output)
        case (.ogg, .wav):
            for option in ["--fps", "--size"] where args.string(option) != nil {
                throw UsageError(description: "\(option) applies to video; \(input) is audio")
            }
            return try decodeAudio(args, input: input, output: output)
        case (.ivf, _):
            throw UsageError(description: "-o \(output): \(input) is video (IVF): use a .y4m output")
        case (.ogg, _):
            throw UsageError(description: "-o \(output): \(input) is audio (Ogg): use a .wav output")
        case (.some(let k), _):
            throw InputError(description: "\(input): a .\(k.rawValue) file cannot be decoded (decode reads .ivf and Ogg Opus)")
        case (nil, _):
            throw InputError(description: "\(input): not an IVF or Ogg file (unknown magic bytes)")
        }
    }

    // MARK: video

    /// The frame rate of an IVF stream: one frame per smallest pts step of the first frames.
    static func frameRate(of path: String, header: IVFHeader) -> ContainerRational {
        var step = Int64.max, last: Int64?
        if let scan = try? IVFReader(path: path) {
            for _ in 0..<16 {
                guard let h = try? scan.nextFrameHeader() else { break }
                try? scan.skipPayload()
                if let last, h.pts > last { step = min(step, h.pts - last) }
                last = h.pts
            }
        }
        if step == .max { step = 1 }
        var num = header.timeBase.denominator, den = header.timeBase.numerator * Int(step)
        let g = gcd(num, den)
        num /= g; den /= g
        guard num > 0, den > 0, Double(num) / Double(den) <= 1000 else { return ContainerRational(30, 1) }
        return ContainerRational(num, den)
    }

    static func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? max(a, 1) : gcd(b, a % b) }

    static func decodeVideo(_ args: Arguments, input: String, output: String) throws -> Int32 {
        let reader = try IVFReader(path: input)
        let codec: VPXCodec = reader.header.codec == .vp8 ? .vp8 : .vp9
        let rate =
            try args.int("--fps", range: 1...240).map { ContainerRational($0, 1) } ?? frameRate(of: input, header: reader.header)
        let size = try args.size("--size")
        try checkOutputDirectory(output)
        let decoder: VPXDecoder
        do { decoder = try VPXDecoder(codec: codec) } catch {
            throw InputError(description: "cannot create the \(codec) decoder: \(error)")
        }
        // pts units per output frame, in the file's time base.
        let step = Double(reader.header.timeBase.denominator) / (Double(reader.header.timeBase.numerator) * rate.doubleValue)
        var writer: Y4MWriter?
        var scaled: VideoFrame?
        let converter = ColorConverter()
        var payload = [UInt8]()
        var written = 0, repeated = 0, frameIndex = 0
        var firstPts: Int64?
        var failure: Error?
        var interrupted = false
        let progress = Progress(
            label: "decode \(input)", total: reader.header.declaredFrameCount > 0 ? Int(reader.header.declaredFrameCount) : nil,
            unit: "frames", quiet: args.quiet)
        do {
            while let h = try reader.readFrame(into: &payload) {
                let index = frameIndex
                frameIndex += 1
                let origin = firstPts ?? h.pts
                firstPts = origin
                // The output frame this one belongs at; gaps repeat the last frame.
                let slot = Int((Double(h.pts - origin) / step).rounded())
                let shown: Bool? = try payload.withUnsafeBytes { bytes in
                    do {
                        return try decoder.decode(bytes) { image -> Bool in
                            do {
                                if writer == nil {
                                    let w = size?.width ?? image.width, hh = size?.height ?? image.height
                                    writer = try Y4MWriter(path: output, width: w, height: hh, frameRate: rate)
                                }
                                guard let writer else { return false }
                                var view = image
                                if image.width != writer.header.width || image.height != writer.header.height {
                                    if scaled == nil {
                                        scaled = VideoFrame(width: writer.header.width, height: writer.header.height)
                                    }
                                    try converter.scale(image, into: scaled!, filter: .box)
                                    view = scaled!.view
                                }
                                // A gap in the timestamps (lost or dropped frames) is filled with
                                // this frame, so the output keeps the input's duration (at most 10 s).
                                let gap = min(slot - written, Int(rate.doubleValue * 10))
                                if written > 0 && gap > 0 {
                                    for _ in 0..<gap { try writer.write(view); written += 1; repeated += 1 }
                                }
                                try writer.write(view)
                                written += 1
                            } catch { failure = error }
                            return true
                        }
                    } catch {
                        throw InputError(description: "\(input): frame \(index) (pts \(h.pts), \(h.size) bytes): \(error)")
                    }
                }
                if let failure { throw failure }
                _ = shown
                progress.update(index + 1)
                if Interrupt.requested { interrupted = true; break }
            }
            guard let writer else {
                throw InputError(description: "\(input): no frames to decode")
            }
            try writer.finish()
        } catch {
            writer?.abort()
            progress.finish()
            throw error
        }
        progress.finish()
        let w = writer!
        let duration = Double(written) / rate.doubleValue
        if args.flag("--json") {
            Console.out(
                JSON.object([
                    ("output", .string(output)), ("input", .string(input)), ("codec", .string(codec.rawValue)),
                    ("width", .int(w.header.width)), ("height", .int(w.header.height)), ("frameRate", .string(rate.description)),
                    ("framesDecoded", .int(decoder.decodedFrameCount)), ("framesWritten", .int(written)),
                    ("framesRepeated", .int(repeated)), ("duration", JSON.rounded(duration, 6)),
                    ("interrupted", .bool(interrupted)),
                ]).rendered())
        } else {
            Console.out(
                "\(output): \(w.header.width)x\(w.header.height) \(Format.rate(rate)) fps, \(written) frames"
                    + (repeated > 0 ? " (\(repeated) repeated over gaps)" : "") + ", \(Format.seconds(duration))"
                    + (interrupted ? " (interrupted)" : ""))
        }
        return interrupted ? 130 : 0
    }

    // MARK: audio

    static func decodeAudio(_ args: Arguments, input: String, output: String) throws -> Int32 {
        let reader = try OggOpusReader(path: input)
        let channels = reader.head.channelCount
        let original = reader.head.inputSampleRate
        let outRate =
            try args.int("--rate", range: 8_000...192_000)
            ?? (OpusSampleRate(hertz: original) != nil ? original : 48_000)
        let decodeRate = OpusSampleRate(hertz: outRate) ?? .hz48000
        try checkOutputDirectory(output)
        let decoder: OpusDecoder
        do { decoder = try OpusDecoder(sampleRate: decodeRate, channels: channels) } catch {
            throw InputError(description: "cannot create the Opus decoder: \(error)")
        }
        var resampler: Resampler?
        if decodeRate.rawValue != outRate {
            do {
                resampler = try Resampler(
                    channels: channels, inputRate: decodeRate.rawValue, outputRate: outRate, quality: .desktop)
                resampler?.skipLatency()
            } catch { throw InputError(description: "cannot resample to \(outRate) Hz: \(error)") }
        }
        let writer = try WAVWriter(
            path: output, sampleRate: outRate, channelCount: channels, format: args.flag("--float") ? .float32 : .int16)
        var packet = [UInt8]()
        var pcm = [Float](repeating: 0, count: decoder.maxFrameSize * channels)
        var resampled = [Float](repeating: 0, count: 8192 * channels)
        var decodedFrames: Int64 = 0  // at the decode rate, after trimming
        let scale = decodeRate.rawValue / 48_000 == 1 ? 1.0 : Double(decodeRate.rawValue) / 48_000
        var interrupted = false
        let progress = Progress(label: "decode \(input)", total: nil, unit: "packets", quiet: args.quiet)

        func emit(_ samples: UnsafeBufferPointer<Float>) throws {
            guard let resampler else { return try writer.write(samples.span) }
            var offset = 0
            while offset < samples.count {
                let (consumed, produced) = resampled.withUnsafeMutableBufferPointer {
                    resampler.process(UnsafeBufferPointer(rebasing: samples[offset...]), into: $0)
                }
                offset += consumed * channels
                try writer.write(resampled.span.extracting(0..<(produced * channels)))
                if consumed == 0 && produced == 0 { break }
            }
        }

        do {
            while let p = try reader.readPacket(into: &packet) {
                let n: Int
                do {
                    var out = pcm.mutableSpan
                    n = try decoder.decode(packet.span.bytes.extracting(0..<p.byteCount), into: &out)
                } catch {
                    throw InputError(description: "\(input): packet \(reader.packetsRead - 1): \(error)")
                }
                let start = min(n, Int((Double(p.discardStart) * scale).rounded()))
                let end = max(start, n - Int((Double(p.discardEnd) * scale).rounded()))
                try pcm.withUnsafeBufferPointer {
                    try emit(UnsafeBufferPointer(rebasing: $0[(start * channels)..<(end * channels)]))
                }
                decodedFrames += Int64(end - start)
                progress.update(reader.packetsRead)
                if Interrupt.requested { interrupted = true; break }
            }
            if let resampler {
                // Flush the filter: push silence until the output length matches the input's.
                let wanted = (decodedFrames * Int64(outRate) + Int64(decodeRate.rawValue / 2)) / Int64(decodeRate.rawValue)
                let zeros = [Float](repeating: 0, count: 256 * channels)
                var rounds = 0
                while writer.framesWritten < wanted && rounds < 1000 {
                    rounds += 1
                    let (_, produced) = zeros.withUnsafeBufferPointer { z in
                        resampled.withUnsafeMutableBufferPointer { resampler.process(z, into: $0) }
                    }
                    let keep = Int(min(Int64(produced), wanted - writer.framesWritten))
                    try writer.write(resampled.span.extracting(0..<(keep * channels)))
                }
            }
            try writer.finish()
        } catch {
            writer.abort()
            progress.finish()
            throw error
        }
        progress.finish()
        let duration = Double(writer.framesWritten) / Double(outRate)
        if args.flag("--json") {
            Console.out(
                JSON.object([
                    ("output", .string(output)), ("input", .string(input)), ("codec", .string("opus")),
                    ("sampleRate", .int(outRate)), ("channels", .int(channels)), ("packets", .int(reader.packetsRead)),
                    ("samples", .int(Int(writer.framesWritten))), ("duration", JSON.rounded(duration, 6)),
                    ("format", .string(args.flag("--float") ? "f32" : "s16")), ("interrupted", .bool(interrupted)),
                ]).rendered())
        } else {
            Console.out(
                "\(output): \(outRate) Hz \(channels == 1 ? "mono" : "stereo"), \(writer.framesWritten) samples, "
                    + "\(Format.seconds(duration)) from \(reader.packetsRead) packets" + (interrupted ? " (interrupted)" : ""))
        }
        return interrupted ? 130 : 0
    }
}
