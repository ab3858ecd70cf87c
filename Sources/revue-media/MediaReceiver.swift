// The receiving end of `receive` and `demo`: UDP on two ports (video on PORT, audio on PORT+2 by
// convention; any stream on either), RFC 7983 demultiplexing, SRTP unprotect, routing by payload
// type, VP8/VP9 depacketizing and decoding, Opus decoding with FEC/concealment, PLI feedback, and
// the output files (.ivf/.y4m, .ogg/.wav) finished cleanly at the end.
import MediaCore
import RevueCommandLine
import RevueSession
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// What the receiver expects on the wire.
struct ReceiveTracks {
    var video: (codec: VPXCodec, payloadType: UInt8)? = (.vp8, 96)
    var audio: (payloadType: UInt8, channels: Int)? = (111, 2)
}

/// Counters of a receiver (a value snapshot).
struct ReceiveCounters {
    var datagrams = 0
    var rtpPackets = 0
    var rtcpPackets = 0
    var rejectedPackets = 0
    var unknownPayloadType = 0
    var videoPackets = 0
    var videoBytes = 0
    var videoPacketsLost = 0
    var videoFramesAssembled = 0
    var videoFramesIncomplete = 0
    var videoFramesDecoded = 0
    var videoKeyframesDecoded = 0
    var videoFramesUndecodable = 0
    var videoFramesWritten = 0
    var pliSent = 0
    var audioPackets = 0
    var audioBytes = 0
    var audioPacketsLost = 0
    var audioPacketsRecoveredFEC = 0
    var audioPacketsConcealed = 0
    var audioSamplesDecoded = 0
    var videoSSRC: UInt32?
    var audioSSRC: UInt32?
    var firstPacketNs: UInt64?
    var lastPacketNs: UInt64?
}

/// Called with each decoded picture (engine thread): the view, its RTP timestamp and the
/// monotonic time its decoding finished.
typealias DecodedVideoHandler = (I420View, UInt32, UInt64) -> Void
/// Called with each stretch of decoded 48 kHz audio (interleaved Float) in playout order.
typealias DecodedAudioHandler = (UnsafeBufferPointer<Float>) -> Void

/// Sendable: the packet state is a `Locked<State>` (every field behind its lock) and `sockets` a `let`;
/// `receivers` is touched only by `start` and `stop`, from one controlling thread.
final class MediaReceiver: @unchecked Sendable {
    let sockets: [UDPSocket]
    private var receivers: [UDPReceiver] = []
    private let state: Locked<State>

    /// Everything the packet handler touches, behind one lock (packet rates are low, the two
    /// socket threads rarely contend).
    final class State {
        var counters = ReceiveCounters()
        let tracks: ReceiveTracks
        let srtp: SRTPContext?
        let srtcpOut: SRTPContext?
        let localSSRC = RandomBytes.ssrc()
        var buffer = [UInt8](repeating: 0, count: 2048)
        var rtcpBuffer = [UInt8](repeating: 0, count: 512)
        // video
        var vp8: VP8Depacketizer?
        var vp9: VP9Depacketizer?
        var videoDecoder: VPXDecoder?
        var ivf: IVFWriter?
        var ivfPath: String?
        var y4m: Y4MWriter?
        var y4mPath: String?
        var y4mRate = ContainerRational(30, 1)
        var y4mWritten = 0
        var lastIVFPts: Int64 = -1
        var scaled: VideoFrame?
        let converter = ColorConverter()
        var firstVideoTimestamp: UInt32?
        var videoTimestampUnwrapped: Int64 = 0
        var lastVideoTimestamp: UInt32 = 0
        var started = false
        var lastPLINs: UInt64 = 0
        var videoSource: SocketAddress?
        var videoSocket: UDPSocket?
        var onVideo: DecodedVideoHandler?
        // audio
        var opus: OpusDecoder?
        var ogg: OggOpusWriter?
        var oggPath: String?
        var wav: WAVWriter?
        var wavPath: String?
        var nextAudioSequence: UInt16?
        var lastTOC: UInt8 = 0
        var pcm: [Float] = []
        var onAudio: DecodedAudioHandler?
        var failure: Error?

        init(tracks: ReceiveTracks, key: SRTPKeyMaterial?) throws {
            self.tracks = tracks
            if let key {
                do {
                    srtp = try SRTPContext(material: key, direction: .inbound)
                    srtcpOut = try SRTPContext(material: key, direction: .outbound)
                } catch { throw InputError(description: "cannot set up SRTP (\(key.suite)): \(error)") }
            } else {
                srtp = nil; srtcpOut = nil
            }
        }
    }

    /// Binds `listen` and `listen.port + 2` and prepares the outputs (created when the first
    /// usable media arrives). `outputs` are paths ending in .ivf/.y4m and .ogg/.wav.
    init(
        listen: SocketAddress, tracks: ReceiveTracks, key: SRTPKeyMaterial?, outputs: [String],
        videoFrameRate: ContainerRational = ContainerRational(30, 1)
    ) throws {
        let s = try State(tracks: tracks, key: key)
        for out in outputs {
            switch MediaFileKind(extensionOf: out) {
            case .ivf: s.ivfPath = out
            case .y4m: s.y4mPath = out
            case .ogg: s.oggPath = out
            case .wav: s.wavPath = out
            default:
                throw UsageError(
                    description: "-o \(out): unsupported output type (use .ivf or .y4m for video, .ogg or .wav for audio)")
            }
        }
        s.y4mRate = videoFrameRate
        if let v = tracks.video {
            if v.codec == .vp8 { s.vp8 = VP8Depacketizer() } else { s.vp9 = VP9Depacketizer() }
            do { s.videoDecoder = try VPXDecoder(codec: v.codec) } catch {
                throw InputError(description: "cannot create the \(v.codec) decoder: \(error)")
            }
        }
        if let a = tracks.audio {
            do { s.opus = try OpusDecoder(sampleRate: .hz48000, channels: a.channels) } catch {
                throw InputError(description: "cannot create the Opus decoder: \(error)")
            }
            s.pcm = [Float](repeating: 0, count: 5760 * a.channels)
        }
        var socks: [UDPSocket] = []
        for port in [listen.port, listen.port &+ 2] {
            var address = listen
            address.port = port
            var options = UDPSocket.Options()
            options.receiveBufferSize = 4 << 20
            do { socks.append(try UDPSocket(bindingTo: address, options: options)) } catch {
                throw InputError(description: "cannot listen on \(address): \(error)")
            }
        }
        sockets = socks
        state = Locked(s)
    }

    /// Sets the callbacks (before `start`).
    func setHandlers(video: DecodedVideoHandler?, audio: DecodedAudioHandler?) {
        state.withLock {
            $0.onVideo = video; $0.onAudio = audio
        }
    }

    func start() {
        for socket in sockets {
            let r = UDPReceiver(socket: socket, pollIntervalMilliseconds: 20) { [self] datagram in
                state.withLock { s in MediaReceiver.handle(s, datagram, socket: socket) }
            }
            receivers.append(r)
            r.start()
        }
    }

    func stop() { for r in receivers { r.stop() } }

    var counters: ReceiveCounters { state.withLock { $0.counters } }

    /// Finishes every output that received media; returns the paths written. Throws when no media
    /// at all arrived (nothing is written then), or for a write error.
    func finish() throws -> [String] {
        try state.withLock { s in
            if let failure = s.failure { abortAll(s); throw failure }
            var written: [String] = []
            do {
                if let w = s.ivf { try w.finish(); written.append(w.path) }
                if let w = s.y4m { try w.finish(); written.append(w.path) }
                if let w = s.ogg { try w.finish(); written.append(w.path) }
                if let w = s.wav { try w.finish(); written.append(w.path) }
            } catch { abortAll(s); throw error }
            return written
        }
    }

    private func abortAll(_ s: State) { s.ivf?.abort(); s.y4m?.abort(); s.ogg?.abort(); s.wav?.abort() }

    // MARK: packet path (receiver threads, under the lock)

    private static func handle(_ s: State, _ d: UDPDatagram, socket: UDPSocket) {
        s.counters.datagrams += 1
        let now = d.receivedAt.nanoseconds
        if s.counters.firstPacketNs == nil { s.counters.firstPacketNs = now }
        s.counters.lastPacketNs = now
        let kind = RTPDemultiplexer.classify(d.bytes.bytes)
        guard kind == .rtp || kind == .rtcp, d.bytes.count <= s.buffer.count else { s.counters.rejectedPackets += 1; return }
        s.buffer.withUnsafeMutableBytes { b in
            b.copyMemory(from: d.bytes)
            var length = d.bytes.count
            if kind == .rtcp {
                if let srtp = s.srtp {
                    var bSpan = b.mutableBytes
                    guard (try? srtp.unprotectRTCP(&bSpan, length: length)) != nil else {
                        s.counters.rejectedPackets += 1; return
                    }
                }
                s.counters.rtcpPackets += 1
                return
            }
            if let srtp = s.srtp {
                var bSpan = b.mutableBytes
                do { length = try srtp.unprotect(&bSpan, length: length) } catch { s.counters.rejectedPackets += 1; return }
            }
            let bytes = UnsafeRawBufferPointer(rebasing: b[0..<length])
            guard let packet = try? RTPPacket(parsing: bytes.bytes) else {
                s.counters.rejectedPackets += 1
                return
            }
            s.counters.rtpPackets += 1
            let pt = packet.header.payloadType
            if let v = s.tracks.video, pt == v.payloadType {
                s.videoSource = d.source
                s.videoSocket = socket
                video(s, packet, in: bytes, now: now)
            } else if let a = s.tracks.audio, pt == a.payloadType {
                audio(s, packet, in: bytes)
            } else {
                s.counters.unknownPayloadType += 1
            }
        }
    }

    private static func video(_ s: State, _ packet: RTPPacket, in bytes: UnsafeRawBufferPointer, now: UInt64) {
        s.counters.videoPackets += 1
        s.counters.videoBytes += bytes.count
        s.counters.videoSSRC = packet.header.ssrc
        let result: RTPDepacketizeResult
        do {
            if let vp8 = s.vp8 {
                result = try vp8.push(packet, in: bytes.bytes)
            } else if let vp9 = s.vp9 {
                result = try vp9.push(packet, in: bytes.bytes)
            } else {
                return
            }
        } catch { s.counters.rejectedPackets += 1; return }
        s.counters.videoPacketsLost += result.lostPackets
        if result.incompleteFrames > 0 {
            s.counters.videoFramesIncomplete += result.incompleteFrames
            s.videoDecoder?.frameLost()
            requestKeyframe(s, now: now)
        }
        guard let frame = result.frame, let decoder = s.videoDecoder else { return }
        s.counters.videoFramesAssembled += 1
        if !s.started {
            guard frame.isKeyframe else { requestKeyframe(s, now: now); return }
            s.started = true
            s.firstVideoTimestamp = frame.timestamp
            s.lastVideoTimestamp = frame.timestamp
        }
        // Unwrap the 32-bit timestamp relative to the first frame.
        s.videoTimestampUnwrapped += Int64(Int32(bitPattern: frame.timestamp &- s.lastVideoTimestamp))
        s.lastVideoTimestamp = frame.timestamp
        let pts = s.videoTimestampUnwrapped
        var ok = false
        do {
            _ = try decoder.decode(frame.data) { image -> Void in
                ok = true
                s.counters.videoFramesDecoded += 1
                if frame.isKeyframe { s.counters.videoKeyframesDecoded += 1 }
                writeY4M(s, image, pts: pts)
                s.onVideo?(image, frame.timestamp, MonotonicTime.now.nanoseconds)
            }
            ok = true
        } catch {
            s.counters.videoFramesUndecodable += 1
            requestKeyframe(s, now: now)
        }
        guard ok, s.ivfPath != nil, pts >= 0 else { return }
        // IVF in frames of the nominal rate (what libvpx and ffmpeg expect of the header's count).
        let slot = max(Int64((Double(pts) * s.y4mRate.doubleValue / 90_000).rounded()), s.lastIVFPts + 1)
        s.lastIVFPts = slot
        do {
            if s.ivf == nil, let path = s.ivfPath {
                let info = try? VPXDecoder.peekStreamInfo(frame.data, codec: s.tracks.video!.codec)
                let w = max(1, info?.width ?? 0), h = max(1, info?.height ?? 0)
                s.ivf = try IVFWriter(
                    path: path, codec: s.tracks.video!.codec == .vp8 ? .vp8 : .vp9, width: w, height: h,
                    timeBase: ContainerRational(s.y4mRate.denominator, s.y4mRate.numerator))
            }
            try s.ivf?.write(frame.data.bytes, pts: slot)
            s.counters.videoFramesWritten += 1
        } catch { s.failure = s.failure ?? error }
    }

    private static func writeY4M(_ s: State, _ image: I420View, pts: Int64) {
        guard let path = s.y4mPath else { return }
        do {
            if s.y4m == nil { s.y4m = try Y4MWriter(path: path, width: image.width, height: image.height, frameRate: s.y4mRate) }
            guard let w = s.y4m else { return }
            var view = image
            if image.width != w.header.width || image.height != w.header.height {
                if s.scaled == nil { s.scaled = VideoFrame(width: w.header.width, height: w.header.height) }
                try s.converter.scale(image, into: s.scaled!, filter: .box)
                view = s.scaled!.view
            }
            // Constant frame rate: a gap in the timestamps repeats this frame (at most 10 s).
            let slot = Int((Double(pts) * s.y4mRate.doubleValue / 90_000).rounded())
            let gap = min(slot - s.y4mWritten, Int(s.y4mRate.doubleValue * 10))
            if s.y4mWritten > 0 && gap > 0 { for _ in 0..<gap { try w.write(view); s.y4mWritten += 1 } }
            if s.y4mWritten == 0 || slot >= s.y4mWritten - 1 { try w.write(view); s.y4mWritten += 1 }
        } catch { s.failure = s.failure ?? error }
    }

    /// Sends a PLI (RFC 4585 §6.3.1) in a compound with an empty RR, at most every 250 ms.
    private static func requestKeyframe(_ s: State, now: UInt64) {
        guard now &- s.lastPLINs > 250_000_000, let ssrc = s.counters.videoSSRC, let to = s.videoSource,
            let socket = s.videoSocket
        else { return }
        s.lastPLINs = now
        let packets: [RTCPPacket] = [
            .receiverReport(RTCPReceiverReport(ssrc: s.localSSRC)),
            .pictureLossIndication(RTCPPictureLossIndication(senderSSRC: s.localSSRC, mediaSSRC: ssrc)),
        ]
        s.rtcpBuffer.withUnsafeMutableBytes { b in
            var length = b.appending { RTCPCompound.marshal(packets, into: &$0) }
            var bSpan = b.mutableBytes
            if let out = s.srtcpOut { guard let l = try? out.protectRTCP(&bSpan, length: length) else { return }; length = l }
            if (try? socket.send(UnsafeRawBufferPointer(rebasing: b[0..<length]), to: to)) != nil { s.counters.pliSent += 1 }
        }
    }

    private static func audio(_ s: State, _ packet: RTPPacket, in bytes: UnsafeRawBufferPointer) {
        guard let decoder = s.opus, let channels = s.tracks.audio?.channels else { return }
        let payload: UnsafeRawBufferPointer
        do { payload = UnsafeRawBufferPointer(rebasing: bytes[try OpusPayload.depacketize(packet)]) } catch {
            s.counters.rejectedPackets += 1
            return
        }
        guard let samples = OpusPacketInfo.sampleCount(payload.bytes) else { s.counters.rejectedPackets += 1; return }
        let seq = packet.header.sequenceNumber
        var lost = 0
        if let expected = s.nextAudioSequence {
            let delta = Int16(bitPattern: seq &- expected)
            if delta < 0 { return }  // late or duplicate: playout has moved on
            lost = min(Int(delta), 50)
        }
        s.nextAudioSequence = seq &+ 1
        s.counters.audioPackets += 1
        s.counters.audioBytes += bytes.count
        s.counters.audioSSRC = packet.header.ssrc
        s.counters.audioPacketsLost += lost
        do {
            if s.ogg == nil, let path = s.oggPath {
                s.ogg = try OggOpusWriter(
                    path: path, channelCount: channels, preSkip: 312, vendor: "Revue revue-media",
                    comments: ["ENCODER=revue-media receive"])
            }
            if s.wav == nil, let path = s.wavPath {
                s.wav = try WAVWriter(path: path, sampleRate: 48_000, channelCount: channels, format: .int16)
            }
            let frameSize = decoder.lastPacketDuration > 0 ? decoder.lastPacketDuration : samples
            for i in 0..<lost {
                // The packet after a loss carries the lost frame in its FEC (RFC 7587 §3.3); older
                // losses are concealed.
                let n: Int
                if i == lost - 1,
                    let r = try? s.pcm.withUnsafeMutableBufferPointer({
                        var out = $0.mutableSpan
                        return try decoder.decodeFEC(nextPacket: payload.bytes, into: &out, frameSize: frameSize)
                    })
                {
                    n = r
                    s.counters.audioPacketsRecoveredFEC += 1
                } else {
                    n =
                        (try? s.pcm.withUnsafeMutableBufferPointer {
                            var out = $0.mutableSpan
                            return try decoder.concealLoss(into: &out, frameSize: frameSize)
                        }) ?? 0
                    s.counters.audioPacketsConcealed += 1
                }
                try emitAudio(s, count: n * channels)
                // Keep the Ogg timeline: a TOC-only packet (a zero-length frame) tells decoders to conceal.
                try s.ogg?.write([s.lastTOC & 0xFC], sampleCount: frameSize)
            }
            let n = try s.pcm.withUnsafeMutableBufferPointer { (pcm) throws(OpusError) in
                var out = pcm.mutableSpan
                return try decoder.decode(payload.bytes, into: &out)
            }
            try emitAudio(s, count: n * channels)
            try s.ogg?.write(payload.bytes, sampleCount: samples)
            s.lastTOC = payload[0]
        } catch {
            if error is OpusError { s.counters.rejectedPackets += 1 } else { s.failure = s.failure ?? error }
        }
    }

    private static func emitAudio(_ s: State, count: Int) throws {
        guard count > 0 else { return }
        try s.pcm.withUnsafeBufferPointer { p in
            let slice = UnsafeBufferPointer(rebasing: p[0..<count])
            s.counters.audioSamplesDecoded += count / max(1, s.tracks.audio?.channels ?? 1)
            try s.wav?.write(slice.span)
            s.onAudio?(slice)
        }
    }
}
