// `revue-media encode`: Y4M or a video pattern to VP8/VP9 in IVF; WAV or an audio pattern to Ogg Opus.
import MediaCore
import RevueCommandLine
import RevueSession

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

enum EncodeCommand: Command {
    static let name = "encode"
    static let summary = "encode a .y4m or .wav file (or a built-in pattern) to .ivf (VP8/VP9) or .ogg (Opus)"
    static let help = """
        usage: revue-media encode INPUT -o OUTPUT [options]
               revue-media encode --pattern NAME -o OUTPUT [options]

        INPUT is a .y4m (4:2:0) or .wav (16-bit PCM or 32-bit float, any rate, 1-2 channels) file.
        OUTPUT is .ivf (VP8 or VP9) for video, .ogg or .opus (Ogg Opus, RFC 7845) for audio.
        Numbers accept k and M suffixes (1500k, 1.5M). -o and --output are the same option.

        input:
          --pattern NAME     a built-in source instead of INPUT: video `moving` (a moving picture
                             with detail, frame number and bar code); audio `tone`, `speech`,
                             `noise` or `silence`
          --frames N         encode at most N video frames (pattern default: 5 s worth)
          --seconds S        encode at most S seconds (pattern default: 5)
          --size WxH         video size (pattern default 640x360; scales a .y4m input)
          --fps N            video frame rate (pattern default 30; overrides the .y4m header)
          --rate HZ          pattern audio sample rate (default 48000)
          --channels N       pattern audio channels, 1 or 2 (default 1)
        video:
          --codec vp8|vp9    (default vp8)
          --bitrate BPS      target bitrate (default 1500k video, 32k per channel audio)
          --speed N          libvpx cpu-used: vp8 -16...16 (negative: fixed speed), vp9 0...9
          --keyint N         a keyframe at least every N frames (default 3000)
          --threads N        encoder threads, 1...16 (default 1)
          --error-resilient  every frame decodable without earlier entropy state
        audio:
          --complexity N     Opus complexity 0...10 (default 10)
          --fec              in-band forward error correction
          --dtx              discontinuous transmission (tiny packets in silence)
          --frame-ms MS      Opus frame duration: 10, 20, 40 or 60 (default 20)
        output:
          --json             print the result as JSON
          --quiet, -q        no progress on stderr

        The output is written to a temporary name and renamed when complete; on error nothing is
        left behind; Ctrl-C stops early and finishes the file with what was encoded (exit 130).
        """

    static let valueOptions: Set<String> = [
        "-o", "--output", "--pattern", "--frames", "--seconds", "--size", "--fps",
        "--rate", "--channels", "--codec", "--bitrate", "--speed", "--keyint",
        "--threads", "--complexity", "--frame-ms",
    ]
    static let flagOptions: Set<String> = ["--fec", "--dtx", "--error-resilient", "--json", "--quiet", "-q"]

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments(argv, valueOptions: valueOptions, flagOptions: flagOptions)
        guard let output = args.string("-o") ?? args.string("--output") else {
            throw UsageError(description: "missing -o OUTPUT")
        }
        guard let outKind = MediaFileKind(extensionOf: output), [.ivf, .ogg].contains(outKind) else {
            throw UsageError(description: "-o \(output): unsupported output type (use .ivf for video, .ogg or .opus for audio)")
        }
        let pattern = args.string("--pattern")
        if pattern != nil && !args.positional.isEmpty {
            throw UsageError(description: "give either INPUT or --pattern, not both")
        }
        if pattern == nil && args.positional.count != 1 {
            throw UsageError(
                description: args.positional.isEmpty
                    ? "missing INPUT (a .y4m or .wav file, or --pattern NAME)"
                    : "expected one INPUT, got \(args.positional.count)")
        }
        let seconds = try args.double("--seconds", range: 0.001...86_400)
        if outKind == .ivf {
            return try encodeVideo(args, output: output, pattern: pattern, seconds: seconds)
        } else {
            return try encodeAudio(args, output: output, pattern: pattern, seconds: seconds)
        }
    }

    // MARK: video

    static func videoOptions(_ args: Arguments) throws -> VideoEncodeOptions {
        var o = VideoEncodeOptions()
        if let c = args.string("--codec") {
            guard let codec = VPXCodec(rawValue: c.lowercased()) else {
                throw UsageError(description: "--codec \(c): expected vp8 or vp9")
            }
            o.codec = codec
        }
        o.bitrate = try args.int("--bitrate", range: 8_000...100_000_000) ?? o.bitrate
        o.speed = try args.int("--speed", range: o.codec == .vp8 ? -16...16 : 0...9)
        o.keyframeInterval = try args.int("--keyint", range: 1...100_000)
        o.threads = try args.int("--threads", range: 1...16) ?? 1
        o.errorResilient = args.flag("--error-resilient")
        return o
    }

    static func rejectAudioOptions(_ args: Arguments) throws {
        for option in ["--complexity", "--frame-ms", "--rate", "--channels"] where args.string(option) != nil {
            throw UsageError(description: "\(option) applies to audio; the output is video")
        }
        for option in ["--fec", "--dtx"] where args.flag(option) {
            throw UsageError(description: "\(option) applies to audio; the output is video")
        }
    }

    static func encodeVideo(_ args: Arguments, output: String, pattern: String?, seconds: Double?) throws -> Int32 {
        try rejectAudioOptions(args)
        let options = try videoOptions(args)
        let size = try args.size("--size")
        let fps = try args.int("--fps", range: 1...240)
        let frames = try args.int("--frames", range: 1...100_000_000)
        let source: VideoSource
        if let pattern {
            guard VideoPatternName.isVideo(pattern) else {
                let hint = SyntheticAudio.Pattern(name: pattern) != nil ? " (an audio pattern: use a .ogg output)" : ""
                throw UsageError(
                    description:
                        "--pattern \(pattern): unknown video pattern\(hint); video patterns: \(VideoPatternName.names.joined(separator: ", "))"
                )
            }
            let rate = ContainerRational(fps ?? 30, 1)
            let count = frames ?? Int(((seconds ?? 5) * rate.doubleValue).rounded())
            let s = size ?? (640, 360)
            source = PatternVideoSource(
                name: pattern, width: s.width, height: s.height, frameRate: rate,
                frames: min(count, seconds.map { Int(($0 * rate.doubleValue).rounded()) } ?? count))
        } else {
            let input = args.positional[0]
            let kind = try MediaFileKind.sniff(input)
            guard kind == .y4m else {
                if kind == .wav { throw UsageError(description: "\(input) is audio (WAV): use a .ogg or .opus output") }
                throw InputError(
                    description: "\(input): not a YUV4MPEG2 (.y4m) file" + (kind.map { " (it is \($0.rawValue))" } ?? ""))
            }
            let y4m = try Y4MVideoSource(path: input, size: size, frameRate: fps.map { ContainerRational($0, 1) }, limit: frames)
            if let seconds { y4m.limit = min(frames ?? .max, Int((seconds * y4m.frameRate.doubleValue).rounded())) }
            source = y4m
        }
        try checkOutputDirectory(output)

        let encoder = try VideoStreamEncoder(
            options: options, width: source.width, height: source.height, frameRate: source.frameRate)
        let writer = try IVFWriter(
            path: output, codec: options.codec == .vp8 ? .vp8 : .vp9, width: source.width,
            height: source.height,
            timeBase: ContainerRational(source.frameRate.denominator, source.frameRate.numerator))
        var bytes = 0, keyframes = 0
        let progress = Progress(label: "encode \(output)", total: source.frameCount, unit: "frames", quiet: args.quiet)
        let frame = VideoFrame(width: source.width, height: source.height)
        let write: (EncodedVideoFrame, Int64) throws -> Void = { out, index in
            try writer.write(out.data.bytes, pts: index)
            bytes += out.size
            if out.isKeyframe { keyframes += 1 }
        }
        var interrupted = false
        do {
            while try source.next(into: frame) {
                try encoder.encode(frame.view, write)
                progress.update(encoder.framesIn)
                if Interrupt.requested { interrupted = true; break }
            }
            try encoder.flush(write)
            try writer.finish()
        } catch {
            writer.abort()
            progress.finish()
            throw error
        }
        progress.finish()
        let n = writer.framesWritten
        let duration = Double(n) / source.frameRate.doubleValue
        let bitrate = duration > 0 ? Double(bytes * 8) / duration : 0
        if args.flag("--json") {
            Console.out(
                JSON.object([
                    ("output", .string(output)), ("input", .string(source.name)), ("codec", .string(options.codec.rawValue)),
                    ("width", .int(source.width)), ("height", .int(source.height)),
                    ("frameRate", .string(source.frameRate.description)), ("frames", .int(n)), ("keyframes", .int(keyframes)),
                    ("duration", JSON.rounded(duration, 6)), ("bytes", .int(bytes)), ("bitrate", .int(Int(bitrate.rounded()))),
                    ("interrupted", .bool(interrupted)),
                ]).rendered())
        } else {
            Console.out(
                "\(output): \(options.codec.rawValue.uppercased()) \(source.width)x\(source.height) \(Format.rate(source.frameRate)) fps, "
                    + "\(n) frames (\(keyframes) key), \(Format.seconds(duration)), \(Format.bitrate(bitrate))"
                    + (interrupted ? " (interrupted)" : ""))
        }
        return interrupted ? 130 : 0
    }

    // MARK: audio

    static func encodeAudio(_ args: Arguments, output: String, pattern: String?, seconds: Double?) throws -> Int32 {
        for option in ["--codec", "--speed", "--keyint", "--threads", "--size", "--fps", "--frames"]
        where args.string(option) != nil {
            throw UsageError(description: "\(option) applies to video; the output is audio")
        }
        if args.flag("--error-resilient") {
            throw UsageError(description: "--error-resilient applies to video; the output is audio")
        }
        var options = AudioEncodeOptions()
        options.bitrate = try args.int("--bitrate", range: OpusBitrate.validRange)
        options.complexity = try args.int("--complexity", range: 0...10) ?? 10
        options.fec = args.flag("--fec")
        options.dtx = args.flag("--dtx")
        if let ms = try args.int("--frame-ms", range: 10...60) {
            guard let d = OpusFrameDuration(rawValue: ms * 1000) else {
                throw UsageError(description: "--frame-ms \(ms): expected 10, 20, 40 or 60")
            }
            options.frameDuration = d
        }
        let source: AudioSource
        if let pattern {
            guard let p = SyntheticAudio.Pattern(name: pattern) else {
                let hint = VideoPatternName.isVideo(pattern) ? " (a video pattern: use a .ivf output)" : ""
                throw UsageError(
                    description:
                        "--pattern \(pattern): unknown audio pattern\(hint); audio patterns: tone, speech, noise, silence")
            }
            let rate = try args.int("--rate", range: 8_000...192_000) ?? 48_000
            let channels = try args.int("--channels", range: 1...2) ?? 1
            source = PatternAudioSource(
                pattern: p, name: pattern, sampleRate: rate, channels: channels,
                frames: Int64(((seconds ?? 5) * Double(rate)).rounded()))
        } else {
            for option in ["--rate", "--channels"] where args.string(option) != nil {
                throw UsageError(description: "\(option) applies to --pattern; a WAV input has its own")
            }
            let input = args.positional[0]
            let kind = try MediaFileKind.sniff(input)
            guard kind == .wav else {
                if kind == .y4m { throw UsageError(description: "\(input) is video (Y4M): use a .ivf output") }
                throw InputError(description: "\(input): not a WAV file" + (kind.map { " (it is \($0.rawValue))" } ?? ""))
            }
            let probe = try WAVReader(path: input)
            source = try WAVAudioSource(path: input, limit: seconds.map { Int64(($0 * Double(probe.sampleRate)).rounded()) })
        }
        try checkOutputDirectory(output)

        let encoder = try OpusStreamEncoder(options: options, inputRate: source.sampleRate, channels: source.channels)
        let writer = try OggOpusWriter(
            path: output, channelCount: source.channels, preSkip: encoder.preSkip48k,
            inputSampleRate: source.sampleRate, vendor: "Revue revue-media",
            comments: ["ENCODER=revue-media"])
        let progress = Progress(
            label: "encode \(output)", total: source.frameCount.map { Int($0) }, unit: "samples", quiet: args.quiet)
        var buffer = [Float](repeating: 0, count: 4800 * source.channels)
        let write: (UnsafeRawBufferPointer, Int) throws -> Void = { packet, samples in
            try writer.write(packet.bytes, sampleCount: samples)
        }
        var interrupted = false
        do {
            while true {
                let n = try buffer.withUnsafeMutableBufferPointer { try source.read(into: $0) }
                if n == 0 { break }
                try buffer.withUnsafeBufferPointer {
                    try encoder.feed(UnsafeBufferPointer(rebasing: $0[0..<(n * source.channels)]), write)
                }
                progress.update(Int(encoder.inputFrames))
                if Interrupt.requested { interrupted = true; break }
            }
            try encoder.finish(write)
            try writer.finish(originalSampleCount: encoder.originalSampleCount48k)
        } catch {
            writer.abort()
            progress.finish()
            throw error
        }
        progress.finish()
        let duration = Double(encoder.originalSampleCount48k) / 48_000
        let bitrate = duration > 0 ? Double(encoder.packetBytes * 8) / duration : 0
        if args.flag("--json") {
            Console.out(
                JSON.object([
                    ("output", .string(output)), ("input", .string(source.name)), ("codec", .string("opus")),
                    ("sampleRate", .int(source.sampleRate)), ("channels", .int(source.channels)),
                    ("preSkip", .int(encoder.preSkip48k)), ("packets", .int(encoder.packetCount)),
                    ("samples", .int(Int(encoder.inputFrames))), ("duration", JSON.rounded(duration, 6)),
                    ("bytes", .int(encoder.packetBytes)), ("bitrate", .int(Int(bitrate.rounded()))),
                    ("interrupted", .bool(interrupted)),
                ]).rendered())
        } else {
            Console.out(
                "\(output): Opus \(source.channels == 1 ? "mono" : "stereo") from \(source.sampleRate) Hz, "
                    + "\(encoder.packetCount) packets, \(Format.seconds(duration)), \(Format.bitrate(bitrate))"
                    + (interrupted ? " (interrupted)" : ""))
        }
        return interrupted ? 130 : 0
    }
}
