// `revue-media send`: plays files or patterns in real time as SRTP over UDP, with an SDP that
// ffmpeg or GStreamer can receive with.
import MediaCore
import RevueCommandLine
import RevueSession

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

enum SendCommand: Command {
    static let name = "send"
    static let summary = "stream files or patterns in real time as SRTP (VP8/VP9 + Opus) to HOST:PORT"
    static let help = """
        usage: revue-media send INPUT... --to HOST:PORT [options]
               revue-media send --pattern moving --pattern speech --to HOST:PORT [options]

        Plays at most one video (.y4m or a video pattern) and one audio input (.wav or an audio
        pattern) in real time. Video goes to PORT, audio to PORT+2 (PORT when sent alone). The
        sender listens on its socket for RTCP feedback: a PLI or FIR gets a keyframe.

        stream:
          --to HOST:PORT     where to send (required)
          --suite S          aes-128-gcm (default), aes-256-gcm, aes-cm-128-hmac-sha1-80,
                             aes-cm-128-hmac-sha1-32, or none (plain RTP); ffmpeg only takes the
                             aes-cm suites
          --key BASE64       RFC 4568 inline key: base64 of master key + salt (generated and
                             printed when absent)
          --sdp FILE         write an SDP (RFC 8866, a=crypto per RFC 4568) for the receiver
          --pt N             video payload type (default 96 for VP8, 98 for VP9); --audio-pt N (default 111)
          --ssrc N           video SSRC (default random); --audio-ssrc N
          --mtu N            largest datagram (default 1200)
          --pcap FILE        also record the sent packets to a pcap file
        input:
          --pattern NAME     video `moving`, audio `tone`, `speech`, `noise`, `silence` (repeatable)
          --seconds S        stop after S seconds (patterns run until Ctrl-C by default)
          --size WxH --fps N --rate HZ --channels N   as for encode
        encoding:
          --codec vp8|vp9 --bitrate BPS --audio-bitrate BPS --speed N --keyint N --threads N
          --complexity N --fec --dtx
        output:
          --json             print the result as JSON
          --quiet, -q        no progress on stderr

        Ctrl-C stops sending and prints what was sent.
        """

    static let valueOptions: Set<String> = [
        "--to", "--suite", "--key", "--sdp", "--pt", "--audio-pt", "--ssrc", "--audio-ssrc",
        "--mtu", "--pcap", "--pattern", "--seconds", "--size", "--fps", "--rate", "--channels",
        "--codec", "--bitrate", "--audio-bitrate", "--speed", "--keyint", "--threads", "--complexity",
    ]
    static let flagOptions: Set<String> = ["--fec", "--dtx", "--json", "--quiet", "-q"]

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments(argv, valueOptions: valueOptions, flagOptions: flagOptions)
        guard let toText = args.string("--to") else { throw UsageError(description: "missing --to HOST:PORT") }
        let destination: SocketAddress
        do { destination = try SocketAddress(parsing: toText) } catch {
            throw UsageError(description: "--to \(toText): \(error.reason)")
        }
        let seconds = try args.double("--seconds", range: 0.01...86_400)
        let suite = try StreamOptions.suite(args.string("--suite") ?? "aes-128-gcm")
        var key: SRTPKeyMaterial?
        var generated = false
        if let suite {
            if let text = args.string("--key") {
                key = try StreamOptions.key(text, suite: suite)
            } else {
                key = .random(for: suite)
                generated = true
            }
        } else if args.string("--key") != nil {
            throw UsageError(description: "--key needs an SRTP suite (not --suite none)")
        }

        var videoOptions = VideoEncodeOptions()
        if let c = args.string("--codec") {
            guard let codec = VPXCodec(rawValue: c.lowercased()) else {
                throw UsageError(description: "--codec \(c): expected vp8 or vp9")
            }
            videoOptions.codec = codec
        }
        videoOptions.bitrate = try args.int("--bitrate", range: 8_000...100_000_000) ?? 1_000_000
        videoOptions.speed = try args.int("--speed", range: videoOptions.codec == .vp8 ? -16...16 : 0...9)
        videoOptions.keyframeInterval = try args.int("--keyint", range: 1...100_000) ?? 300
        videoOptions.threads = try args.int("--threads", range: 1...16) ?? 1
        var audioOptions = AudioEncodeOptions()
        audioOptions.bitrate = try args.int("--audio-bitrate", range: OpusBitrate.validRange)
        audioOptions.complexity = try args.int("--complexity", range: 0...10) ?? 10
        audioOptions.fec = args.flag("--fec")
        audioOptions.dtx = args.flag("--dtx")

        // Inputs: files and patterns, at most one of each kind.
        var video: VideoSource?, audio: AudioSource?
        let size = try args.size("--size")
        let fps = try args.int("--fps", range: 1...240)
        for input in args.positional {
            switch try MediaFileKind.sniff(input) {
            case .y4m:
                guard video == nil else { throw UsageError(description: "\(input): only one video input") }
                let y4m = try Y4MVideoSource(path: input, size: size, frameRate: fps.map { ContainerRational($0, 1) }, limit: nil)
                if let seconds { y4m.limit = Int((seconds * y4m.frameRate.doubleValue).rounded()) }
                video = y4m
            case .wav:
                guard audio == nil else { throw UsageError(description: "\(input): only one audio input") }
                let probe = try WAVReader(path: input)
                audio = try WAVAudioSource(path: input, limit: seconds.map { Int64(($0 * Double(probe.sampleRate)).rounded()) })
            default:
                throw InputError(description: "\(input): not a .y4m or .wav file")
            }
        }
        for name in args.strings("--pattern") {
            if VideoPatternName.isVideo(name) {
                guard video == nil else { throw UsageError(description: "--pattern \(name): only one video input") }
                let rate = ContainerRational(fps ?? 30, 1)
                let s = size ?? (640, 360)
                video = PatternVideoSource(
                    name: name, width: s.width, height: s.height, frameRate: rate,
                    frames: seconds.map { Int(($0 * rate.doubleValue).rounded()) })
            } else if let p = SyntheticAudio.Pattern(name: name) {
                guard audio == nil else { throw UsageError(description: "--pattern \(name): only one audio input") }
                let rate = try args.int("--rate", range: 8_000...96_000) ?? 48_000
                audio = PatternAudioSource(
                    pattern: p, name: name, sampleRate: rate, channels: try args.int("--channels", range: 1...2) ?? 1,
                    frames: seconds.map { Int64(($0 * Double(rate)).rounded()) })
            } else {
                throw UsageError(
                    description: "--pattern \(name): unknown pattern (video: moving; audio: tone, speech, noise, silence)")
            }
        }
        guard video != nil || audio != nil else {
            throw UsageError(description: "missing INPUT (a .y4m or .wav file, or --pattern NAME)")
        }

        var wire = SendWire(destination: destination, key: key)
        wire.videoPayloadType = UInt8(try args.int("--pt", range: 0...127) ?? (videoOptions.codec == .vp8 ? 96 : 98))
        wire.audioPayloadType = UInt8(try args.int("--audio-pt", range: 0...127) ?? 111)
        if let s = try args.int("--ssrc", range: 0...Int(UInt32.max)) { wire.videoSSRC = UInt32(s) }
        if let s = try args.int("--audio-ssrc", range: 0...Int(UInt32.max)) { wire.audioSSRC = UInt32(s) }
        if video == nil, args.string("--pt") != nil, args.string("--audio-pt") == nil {
            wire.audioPayloadType = wire.videoPayloadType
        }
        wire.mtu = try args.int("--mtu", range: 200...9000) ?? 1200
        wire.pcapPath = args.string("--pcap")

        let sender = try MediaSender(
            video: video, audio: audio, videoOptions: videoOptions, audioOptions: audioOptions, wire: wire)
        if let path = args.string("--sdp") {
            try checkOutputDirectory(path, option: "--sdp")
            let sdp = StreamOptions.sdp(
                destination: destination,
                video: sender.videoStream.map { (videoOptions.codec, $0.payloadType, $0.ssrc) },
                audio: sender.audioStream.map { ($0.payloadType, $0.ssrc, audio?.channels ?? 1) },
                audioPort: sender.audioStream?.destination.port ?? destination.port, key: key)
            try sdp.write(to: path)
        }
        if let key, generated, !args.flag("--json") {
            Console.out("key: \(key.suite.sdpName) inline:\(StreamOptions.keyText(key))")
        }
        if !args.quiet {
            let what = [
                video.map { "\($0.name) \($0.width)x\($0.height) \(videoOptions.codec.rawValue) -> \(destination)" },
                audio.map { "\($0.name) opus -> \(sender.audioStream!.destination)" },
            ].compactMap { $0 }
            Console.error("send: " + what.joined(separator: ", ") + (key.map { " (SRTP \($0.suite))" } ?? " (plain RTP)"))
        }
        let progress = Progress(label: "send", total: seconds.map { Int($0) }, unit: "s", quiet: args.quiet)
        let started = Date()
        let stopped = try sender.run(shouldStop: { Interrupt.requested }, progress: { progress.update(Int($0)) })
        progress.finish()
        try sender.finish()
        let elapsed = Date().timeIntervalSince(started)
        var fields: [(String, JSON)] = [
            ("to", .string(destination.description)), ("seconds", JSON.rounded(elapsed, 3)),
            ("suite", .string(key?.suite.sdpName ?? "none")),
        ]
        if let key, generated { fields.append(("key", .string(StreamOptions.keyText(key)))) }
        for (label, stream) in [("video", sender.videoStream), ("audio", sender.audioStream)] {
            guard let stream else { continue }
            let c = stream.counters
            fields.append(
                (
                    label,
                    .object([
                        ("ssrc", .int(Int(stream.ssrc))), ("payloadType", .int(Int(stream.payloadType))),
                        ("frames", .int(c.frames.load(ordering: .relaxed))),
                        ("keyframes", .int(c.keyframes.load(ordering: .relaxed))),
                        ("packets", .int(c.packets.load(ordering: .relaxed))), ("bytes", .int(c.bytes.load(ordering: .relaxed))),
                        ("bitrate", .int(elapsed > 0 ? Int(Double(c.bytes.load(ordering: .relaxed) * 8) / elapsed) : 0)),
                        ("keyframeRequests", .int(c.keyframeRequests.load(ordering: .relaxed))),
                        ("nacks", .int(c.nacks.load(ordering: .relaxed))),
                        ("sendErrors", .int(c.sendErrors.load(ordering: .relaxed))),
                    ])
                ))
        }
        fields.append(("interrupted", .bool(stopped)))
        if args.flag("--json") {
            Console.out(JSON.object(fields).rendered())
        } else {
            var lines = ["sent to \(destination) for \(elapsed.fixed(1)) s"]
            for (label, stream) in [("video", sender.videoStream), ("audio", sender.audioStream)] {
                guard let stream else { continue }
                let c = stream.counters
                lines.append(
                    "  \(label): \(c.frames.load(ordering: .relaxed)) frames, \(c.packets.load(ordering: .relaxed)) packets, "
                        + "\(Format.bitrate(elapsed > 0 ? Double(c.bytes.load(ordering: .relaxed) * 8) / elapsed : 0)), "
                        + "\(c.keyframeRequests.load(ordering: .relaxed)) keyframe requests")
            }
            Console.out(lines.joined(separator: "\n"))
        }
        return 0
    }
}
