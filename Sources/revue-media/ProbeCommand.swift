// `revue-media probe`: what a media file holds (codec, size, rate, duration, counts, bitrate).
import MediaCore
import RevueCommandLine
import RevueSession

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

enum ProbeCommand: Command {
    static let name = "probe"
    static let summary = "show codec, size, frame rate, duration, frame/packet count and bitrate of a file"
    static let help = """
        usage: revue-media probe FILE [--json]

        FILE is a .ivf (VP8/VP9), Ogg Opus, .y4m, .wav or .sdp file (recognised by its first
        bytes). Every frame or packet is read, so counts and durations are exact and damage is
        reported (exit status 1) with the frame or packet it is in.

          --json     print the result as JSON
        """

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments(argv, valueOptions: [], flagOptions: ["--json", "--quiet", "-q"])
        guard args.positional.count == 1 else {
            throw UsageError(
                description: args.positional.isEmpty ? "missing FILE" : "expected one FILE, got \(args.positional.count)")
        }
        let path = args.positional[0]
        let fields: [(String, JSON)]
        switch try MediaFileKind.sniff(path) {
        case .ivf: fields = try probeIVF(path)
        case .ogg: fields = try probeOgg(path)
        case .y4m: fields = try probeY4M(path)
        case .wav: fields = try probeWAV(path)
        case .sdp: fields = try probeSDP(path)
        case .pcap: throw InputError(description: "\(path): a pcap capture; read it with tshark")
        case nil: throw InputError(description: "\(path): unknown file type (not IVF, Ogg, Y4M, WAV or SDP)")
        }
        if args.flag("--json") {
            Console.out(JSON.object([("file", .string(path))] + fields).rendered())
        } else {
            var lines = ["\(path):"]
            for (key, value) in fields {
                let text: String
                switch value {
                case .string(let s): text = s
                case .array(let items): text = items.map { $0.rendered(compact: true) }.joined(separator: "; ")
                default: text = value.rendered(compact: true)
                }
                lines.append("  " + (key + ":").padded(to: 14) + text)
            }
            Console.out(lines.joined(separator: "\n"))
        }
        return 0
    }

    static func probeIVF(_ path: String) throws -> [(String, JSON)] {
        let reader = try IVFReader(path: path)
        let codec: VPXCodec = reader.header.codec == .vp8 ? .vp8 : .vp9
        var payload = [UInt8]()
        var count = 0, bytes = 0, keyframes = 0
        var firstPts: Int64?, lastPts: Int64 = 0
        var width = reader.header.width, height = reader.header.height
        while let h = try reader.readFrame(into: &payload) {
            let info: VPXStreamInfo
            do { info = try payload.withUnsafeBytes { try VPXDecoder.peekStreamInfo($0, codec: codec) } } catch {
                throw InputError(description: "\(path): frame \(count) (pts \(h.pts)) is not a \(codec) frame: \(error)")
            }
            if info.isKeyframe {
                keyframes += 1
                if keyframes == 1, info.width > 0 { width = info.width; height = info.height }
            }
            if firstPts == nil { firstPts = h.pts }
            lastPts = h.pts
            count += 1
            bytes += h.size
        }
        let rate = DecodeCommand.frameRate(of: path, header: reader.header)
        let tb = reader.header.timeBase
        let step = Double(tb.denominator) / (Double(tb.numerator) * rate.doubleValue)
        let duration = count == 0 ? 0 : (Double(lastPts - (firstPts ?? 0)) + step) * tb.doubleValue
        return [
            ("format", .string("ivf")), ("codec", .string(codec.rawValue)), ("width", .int(width)), ("height", .int(height)),
            ("frameRate", .string(Format.rate(rate))), ("timeBase", .string(tb.description)), ("frames", .int(count)),
            ("keyframes", .int(keyframes)), ("duration", JSON.rounded(duration, 6)), ("bytes", .int(bytes)),
            ("bitrate", .int(duration > 0 ? Int((Double(bytes * 8) / duration).rounded()) : 0)),
        ]
    }

    static func probeOgg(_ path: String) throws -> [(String, JSON)] {
        let reader = try OggOpusReader(path: path)
        var packet = [UInt8]()
        var bytes = 0, samples = 0, maxPacket = 0
        while let p = try reader.readPacket(into: &packet) {
            bytes += p.byteCount
            samples += p.outputSampleCount
            maxPacket = max(maxPacket, p.byteCount)
        }
        let duration = Double(samples) / 48_000
        return [
            ("format", .string("ogg")), ("codec", .string("opus")), ("channels", .int(reader.head.channelCount)),
            ("inputRate", .int(reader.head.inputSampleRate)), ("preSkip", .int(reader.head.preSkip)),
            ("packets", .int(reader.packetsRead)), ("samples", .int(samples)), ("duration", JSON.rounded(duration, 6)),
            ("bytes", .int(bytes)), ("bitrate", .int(duration > 0 ? Int((Double(bytes * 8) / duration).rounded()) : 0)),
            ("vendor", .string(reader.tags.vendor)),
        ]
    }

    static func probeY4M(_ path: String) throws -> [(String, JSON)] {
        let reader = try Y4MReader(path: path)
        let frame = reader.makeFrame()
        while try reader.readFrame(into: frame) {}
        let rate = reader.frameRate
        let duration = rate.doubleValue > 0 ? Double(reader.framesRead) / rate.doubleValue : 0
        let bytes = reader.framesRead * reader.header.frameByteCount
        return [
            ("format", .string("y4m")), ("codec", .string("rawvideo i420")), ("width", .int(reader.width)),
            ("height", .int(reader.height)),
            ("frameRate", .string(Format.rate(rate))), ("chroma", .string(reader.header.chroma.rawValue)),
            ("frames", .int(reader.framesRead)), ("duration", JSON.rounded(duration, 6)), ("bytes", .int(bytes)),
            ("bitrate", .int(duration > 0 ? Int((Double(bytes * 8) / duration).rounded()) : 0)),
        ]
    }

    static func probeWAV(_ path: String) throws -> [(String, JSON)] {
        let reader = try WAVReader(path: path)
        var buffer = [Float](repeating: 0, count: 8192 * reader.channelCount)
        var frames: Int64 = 0
        while true {
            var span = buffer.mutableSpan
            let n = try reader.read(into: &span)
            if n == 0 { break }
            frames += Int64(n)
        }
        if let declared = reader.frameCount, declared != frames {
            throw InputError(description: "\(path): the data chunk declares \(declared) sample frames but holds \(frames)")
        }
        let duration = Double(frames) / Double(reader.sampleRate)
        let bits = reader.sampleFormat.bytesPerSample * 8
        return [
            ("format", .string("wav")), ("codec", .string(reader.sampleFormat == .int16 ? "pcm_s16le" : "pcm_f32le")),
            ("sampleRate", .int(reader.sampleRate)), ("channels", .int(reader.channelCount)),
            ("samples", .int(Int(frames))), ("duration", JSON.rounded(duration, 6)),
            ("bitrate", .int(reader.sampleRate * reader.channelCount * bits)),
        ]
    }

    static func probeSDP(_ path: String) throws -> [(String, JSON)] {
        let sdp = try SDPSessionDescription.read(path: path)
        let media: [JSON] = sdp.media.map { m in
            let pt = m.payloadTypes.first
            let map = pt.flatMap { m.rtpMap(for: $0) }
            let address = m.connection?.address ?? sdp.connection?.address ?? "?"
            return JSON.object([
                ("type", .string(m.type)), ("address", .string(address)), ("port", .int(m.port)), ("proto", .string(m.proto)),
                ("payloadType", pt.map { .int($0) } ?? .null),
                ("codec", map.map { .string("\($0.encoding)/\($0.clockRate)" + ($0.channels.map { "/\($0)" } ?? "")) } ?? .null),
                ("crypto", m.crypto.first.map { .string($0.suite) } ?? .null),
            ])
        }
        return [("format", .string("sdp")), ("session", .string(sdp.sessionName)), ("media", .array(media))]
    }
}
