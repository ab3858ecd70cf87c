// `revue-media receive`: receives SRTP (VP8/VP9 + Opus) on HOST:PORT and writes files.
import MediaCore
import RevueCommandLine
import RevueSession

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

#if canImport(Glibc)
    import Glibc
#endif

enum ReceiveCommand: Command {
    static let name = "receive"
    static let summary = "receive SRTP (VP8/VP9 + Opus) on HOST:PORT into .ivf/.y4m and .ogg/.wav files"
    static let help = """
        usage: revue-media receive --listen HOST:PORT (--sdp FILE | --key BASE64 --suite S) -o OUT... [options]

        Listens on PORT (video and audio) and PORT+2 (audio), accepts any SSRC, and routes packets
        by payload type: from the SDP, or the defaults VP8 96, VP9 98 (with --codec vp9), Opus 111.
        Packets go through the engine's receive pipeline (SRTP, jitter buffer, NACK, PLI, decode,
        Opus FEC and concealment, 10 ms playout) and RTCP goes back to the sender. Decoded
        pictures go to .y4m, and re-encoded to .ivf; the played audio goes to .wav, and
        re-encoded to .ogg.
          --raw               keep the received bitstream instead: VP8/VP9 frames as they came go
                              to .ivf and Opus packets to .ogg (no jitter buffer or NACK; a frame
                              that cannot be decoded after loss sends a PLI)

          --listen HOST:PORT  where to receive (required)
          --sdp FILE          payload types, codecs and the SRTP key from an SDP (as send writes it)
          --key BASE64        the sender's inline key (with --suite); --suite none for plain RTP
          --suite S           aes-128-gcm (default), aes-256-gcm, aes-cm-128-hmac-sha1-80, ...
          --codec vp8|vp9     video codec without an SDP (default vp8)
          --pt N, --audio-pt N  payload types without an SDP (default 96 VP8 / 98 VP9, 111)
          --channels N        audio channels of a .wav output without an SDP (default 1)
          -o, --output OUT    an output file (repeat for video and audio)
          --duration S        stop after S seconds (default: until Ctrl-C)
          --fps N             frame rate of a .y4m output (default 30; gaps repeat frames)
          --json              print the result as JSON
          --quiet, -q         no progress on stderr

        The files are written to temporary names and renamed when the duration ends or on Ctrl-C.
        """

    static let valueOptions: Set<String> = [
        "--listen", "--sdp", "--key", "--suite", "--codec", "--pt", "--audio-pt", "--channels",
        "-o", "--output", "--duration", "--fps",
    ]
    static let flagOptions: Set<String> = ["--json", "--quiet", "-q", "--raw"]

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments(argv, valueOptions: valueOptions, flagOptions: flagOptions)
        guard args.positional.isEmpty else { throw UsageError(description: "unexpected argument \(args.positional[0])") }
        guard let listenText = args.string("--listen") else { throw UsageError(description: "missing --listen HOST:PORT") }
        let listen: SocketAddress
        do {
            if let port = UInt16(listenText) {
                listen = .anyIPv4(port: port)
            } else {
                listen = try SocketAddress(parsing: listenText)
            }
        } catch { throw UsageError(description: "--listen \(listenText): \(error.reason)") }
        let outputs = args.strings("-o") + args.strings("--output")
        guard !outputs.isEmpty else { throw UsageError(description: "missing -o OUT (a .ivf or .y4m, and/or a .ogg or .wav)") }
        for out in outputs {
            guard let k = MediaFileKind(extensionOf: out), [.ivf, .y4m, .ogg, .wav].contains(k) else {
                throw UsageError(
                    description: "-o \(out): unsupported output type (use .ivf or .y4m for video, .ogg or .wav for audio)")
            }
            try checkOutputDirectory(out)
        }
        let duration = try args.double("--duration", range: 0.01...86_400)
        var tracks = ReceiveTracks()
        var key: SRTPKeyMaterial?
        if let sdp = args.string("--sdp") {
            if args.string("--key") != nil { throw UsageError(description: "give either --sdp or --key, not both") }
            (tracks, key) = try StreamOptions.tracks(fromSDP: sdp)
        } else {
            let suite = try StreamOptions.suite(args.string("--suite") ?? "aes-128-gcm")
            if let suite {
                guard let text = args.string("--key") else { throw UsageError(description: "missing --sdp FILE or --key BASE64") }
                key = try StreamOptions.key(text, suite: suite)
            }
            let codec =
                try args.string("--codec").map { c -> VPXCodec in
                    guard let v = VPXCodec(rawValue: c.lowercased()) else {
                        throw UsageError(description: "--codec \(c): expected vp8 or vp9")
                    }
                    return v
                } ?? .vp8
            tracks.video = (codec, UInt8(try args.int("--pt", range: 0...127) ?? (codec == .vp8 ? 96 : 98)))
            tracks.audio = (
                UInt8(try args.int("--audio-pt", range: 0...127) ?? 111), try args.int("--channels", range: 1...2) ?? 1
            )
        }
        let fps = try args.int("--fps", range: 1...240) ?? 30
        if !args.flag("--raw") {
            return try runPipeline(args, listen: listen, tracks: tracks, key: key, outputs: outputs, fps: fps, duration: duration)
        }
        let receiver = try MediaReceiver(
            listen: listen, tracks: tracks, key: key, outputs: outputs, videoFrameRate: ContainerRational(fps, 1))
        receiver.start()
        if !args.quiet {
            Console.error(
                "receive: listening on \(receiver.sockets.compactMap { try? $0.localAddress() }.map { $0.description }.joined(separator: " and "))"
            )
        }
        let started = Date()
        var lastReport = Date()
        while !Interrupt.requested {
            if let duration, Date().timeIntervalSince(started) >= duration { break }
            usleep(20_000)
            if !args.quiet && Date().timeIntervalSince(lastReport) >= 3 {
                lastReport = Date()
                let c = receiver.counters
                Console.error("receive: \(c.videoFramesDecoded) video frames, \(c.audioPackets) audio packets")
            }
        }
        receiver.stop()
        let c = receiver.counters
        if c.videoFramesWritten == 0 && c.audioPackets == 0 && c.videoFramesDecoded == 0 {
            _ = try? receiver.finish()
            throw InputError(
                description: "no media received on \(listen) (\(c.datagrams) datagrams, \(c.rejectedPackets) rejected"
                    + (c.rejectedPackets > 0 ? ": wrong key or suite?" : "") + ")")
        }
        let written = try receiver.finish()
        let elapsed = Date().timeIntervalSince(started)
        let fields: [(String, JSON)] = [
            ("listen", .string(listen.description)), ("seconds", JSON.rounded(elapsed, 3)),
            ("outputs", .array(written.map { .string($0) })),
            (
                "video",
                .object([
                    ("packets", .int(c.videoPackets)), ("packetsLost", .int(c.videoPacketsLost)),
                    ("framesDecoded", .int(c.videoFramesDecoded)), ("keyframesDecoded", .int(c.videoKeyframesDecoded)),
                    ("framesIncomplete", .int(c.videoFramesIncomplete)), ("framesWritten", .int(c.videoFramesWritten)),
                    ("pliSent", .int(c.pliSent)),
                ])
            ),
            (
                "audio",
                .object([
                    ("packets", .int(c.audioPackets)), ("packetsLost", .int(c.audioPacketsLost)),
                    ("recoveredFEC", .int(c.audioPacketsRecoveredFEC)), ("concealed", .int(c.audioPacketsConcealed)),
                    ("samples", .int(c.audioSamplesDecoded)),
                ])
            ),
            ("rejectedPackets", .int(c.rejectedPackets)),
        ]
        if args.flag("--json") {
            Console.out(JSON.object(fields).rendered())
        } else {
            Console.out(
                """
                received on \(listen) for \(elapsed.fixed(1)) s: \(written.joined(separator: ", "))
                  video: \(c.videoPackets) packets (\(c.videoPacketsLost) lost), \(c.videoFramesDecoded) frames decoded, \(c.pliSent) PLI sent
                  audio: \(c.audioPackets) packets (\(c.audioPacketsLost) lost, \(c.audioPacketsRecoveredFEC) recovered by FEC)
                """)
        }
        return 0
    }

    /// Receives through the engine's receive pipeline (the default).
    static func runPipeline(
        _ args: Arguments, listen: SocketAddress, tracks: ReceiveTracks, key: SRTPKeyMaterial?, outputs: [String],
        fps: Int, duration: Double?
    ) throws -> Int32 {
        let receiver = try PipelineFileReceiver(
            listen: listen, tracks: tracks, key: key, outputs: outputs,
            frameRate: ContainerRational(fps, 1))
        receiver.start()
        if !args.quiet {
            Console.error(
                "receive: listening on \(receiver.pipelines.compactMap { try? $0.socket.localAddress() }.map { $0.description }.joined(separator: " and "))"
            )
        }
        let started = Date()
        var lastReport = Date()
        while !Interrupt.requested {
            if let duration, Date().timeIntervalSince(started) >= duration { break }
            usleep(20_000)
            if !args.quiet && Date().timeIntervalSince(lastReport) >= 3 {
                lastReport = Date()
                let v = receiver.inbound.first { $0.kind == "video" }, a = receiver.inbound.filter { $0.kind == "audio" }
                Console.error(
                    "receive: \(v?.framesDecoded ?? 0) video frames, \(a.reduce(0) { $0 + $1.packetsReceived }) audio packets")
            }
        }
        receiver.stop()
        let inbound = receiver.inbound
        let v = inbound.first { $0.kind == "video" } ?? InboundRTPStreamStats()
        let a = inbound.filter { $0.kind == "audio" }.max { $0.packetsReceived < $1.packetsReceived } ?? InboundRTPStreamStats()
        let socket = receiver.pipelines.map { $0.statistics }
        if v.packetsReceived == 0 && a.packetsReceived == 0 {
            for s in receiver.sinks { s.abort() }
            _ = try? receiver.finish()
            let datagrams = socket.reduce(0) { $0 + $1.datagrams },
                rejected = socket.reduce(0) { $0 + $1.authFailures + $1.srtpErrors }
            throw InputError(
                description: "no media received on \(listen) (\(datagrams) datagrams, \(rejected) rejected"
                    + (rejected > 0 ? ": wrong key or suite?" : "") + ")")
        }
        let written = try receiver.finish()
        let elapsed = Date().timeIntervalSince(started)
        let fields: [(String, JSON)] = [
            ("listen", .string(listen.description)), ("seconds", JSON.rounded(elapsed, 3)),
            ("outputs", .array(written.map { .string($0) })),
            (
                "video",
                .object([
                    ("packets", .int(Int(v.packetsReceived))), ("packetsLost", .int(Int(v.packetsLost))),
                    ("framesDecoded", .int(Int(v.framesDecoded))), ("keyframesDecoded", .int(Int(v.keyFramesDecoded))),
                    ("framesDropped", .int(Int(v.framesDropped))), ("freezeCount", .int(Int(v.freezeCount))),
                    ("nackSent", .int(Int(v.nackCount))), ("pliSent", .int(Int(v.pliCount))),
                    ("framesWritten", .int(receiver.renderer.frames)),
                ])
            ),
            (
                "audio",
                .object([
                    ("packets", .int(Int(a.packetsReceived))), ("packetsLost", .int(Int(a.packetsLost))),
                    ("concealedSamples", .int(Int(a.concealedSamples))), ("samples", .int(Int(a.totalSamplesReceived))),
                    ("removedSamplesForAcceleration", .int(Int(a.removedSamplesForAcceleration))),
                    ("insertedSamplesForDeceleration", .int(Int(a.insertedSamplesForDeceleration))),
                ])
            ),
            ("rejectedPackets", .int(socket.reduce(0) { $0 + $1.authFailures + $1.replays + $1.srtpErrors + $1.malformed })),
        ]
        if args.flag("--json") {
            Console.out(JSON.object(fields).rendered())
        } else {
            Console.out(
                """
                received on \(listen) for \(elapsed.fixed(1)) s: \(written.joined(separator: ", "))
                  video: \(v.packetsReceived) packets (\(v.packetsLost) lost), \(v.framesDecoded) frames decoded, \(v.nackCount) NACK and \(v.pliCount) PLI sent
                  audio: \(a.packetsReceived) packets (\(a.packetsLost) lost), \(a.concealedSamples) samples concealed
                """)
        }
        return 0
    }
}
