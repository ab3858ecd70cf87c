// The sending end of `send` and `demo`: plays a video source and an audio source in real time into
// the engine's send pipelines (VideoSendStream, AudioSendStream: encode, packetize, SRTP, UDP),
// answering a receiver's PLI/FIR with a keyframe.
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

/// Wire settings of a sender.
struct SendWire {
    var destination: SocketAddress
    var key: SRTPKeyMaterial?
    var videoPayloadType: UInt8 = 96
    var audioPayloadType: UInt8 = 111
    var videoSSRC: UInt32 = RandomBytes.ssrc()
    var audioSSRC: UInt32 = RandomBytes.ssrc()
    var mtu = 1200
    var pcapPath: String?
    /// Audio goes to `destination.port + 2` when video is sent too (one port per m= line).
    var separateAudioPort = true
    /// RTCP sender reports on the RTP port (RFC 5761 multiplexing, as `demo`'s own receiver takes
    /// them); otherwise on the RTP port + 1 (RFC 3550 §11), as the SDP `send` writes (without
    /// `a=rtcp-mux`) tells a receiver.
    var rtcpMux = false
}

final class MediaSender {
    let socket: UDPSocket
    let video: VideoSource?
    let audio: AudioSource?
    let videoStream: RTPOutStream?
    let audioStream: RTPOutStream?
    let codec: VPXCodec
    let feedback: RTCPFeedbackListener
    /// Sender reports for both streams (what lets a receiver sync audio and video).
    let reporter: SenderReporter
    /// The engine's pcap sink, shared by both streams, when `--pcap` asked for one.
    let pcap: PcapPacketSink?
    /// Called after each video frame is captured: its index and the monotonic time of capture.
    var onVideoFrame: ((Int, UInt64) -> Void)?
    /// The engine's send pipelines (capturer -> ring -> encode worker -> RTP -> SRTP -> sink).
    let videoPipeline: VideoSendStream?
    let audioPipeline: AudioSendStream?

    init(
        video: VideoSource?, audio: AudioSource?, videoOptions: VideoEncodeOptions, audioOptions: AudioEncodeOptions,
        wire: SendWire
    ) throws {
        precondition(video != nil || audio != nil)
        self.video = video
        self.audio = audio
        codec = videoOptions.codec
        var options = UDPSocket.Options()
        options.sendBufferSize = 4 << 20
        let any: SocketAddress = wire.destination.family == .ipv4 ? .anyIPv4(port: 0) : .anyIPv6(port: 0)
        do { socket = try UDPSocket(bindingTo: any, options: options) } catch {
            throw InputError(description: "cannot open a UDP socket: \(error)")
        }
        if let path = wire.pcapPath {
            try checkOutputDirectory(path, option: "--pcap")
            do { pcap = try PcapPacketSink(path: path, source: PcapEndpoint((try? socket.localAddress()) ?? any)) } catch {
                throw InputError(description: "\(error)")
            }
        } else {
            pcap = nil
        }
        if video != nil {
            videoStream = RTPOutStream(destination: wire.destination, ssrc: wire.videoSSRC, payloadType: wire.videoPayloadType)
        } else {
            videoStream = nil
        }
        if audio != nil {
            var to = wire.destination
            if video != nil && wire.separateAudioPort { to.port = to.port &+ 2 }
            audioStream = RTPOutStream(destination: to, ssrc: wire.audioSSRC, payloadType: wire.audioPayloadType)
        } else {
            audioStream = nil
        }
        feedback = try RTCPFeedbackListener(socket: socket, key: wire.key, streams: [videoStream, audioStream].compactMap { $0 })
        if let video, let stream = videoStream {
            var conf = VideoSendStream.Configuration(codec: videoOptions.codec, width: video.width, height: video.height)
            conf.encoder = videoOptions.configuration(width: video.width, height: video.height, frameRate: video.frameRate)
            conf.ssrc = stream.ssrc
            conf.payloadType = stream.payloadType
            conf.mtu = wire.mtu
            conf.srtp = wire.key
            conf.ringCapacity = 8
            let sink = RecordingSink(socket: socket, destination: stream.destination, pcap: pcap)
            do { videoPipeline = try VideoSendStream(configuration: conf, sink: sink) } catch {
                throw InputError(description: "cannot create the video send pipeline: \(error)")
            }
        } else {
            videoPipeline = nil
        }
        if let audio, let stream = audioStream {
            var conf = AudioSendStream.Configuration()
            conf.channels = audio.channels
            conf.bitrate = audioOptions.bitrate ?? 32_000 * audio.channels
            conf.complexity = audioOptions.complexity
            conf.application = audioOptions.application
            conf.inbandFEC = audioOptions.fec
            conf.expectedPacketLossPercent = audioOptions.fec ? 10 : 0
            conf.dtx = audioOptions.dtx
            conf.frameDuration = audioOptions.frameDuration
            conf.ssrc = stream.ssrc
            conf.payloadType = stream.payloadType
            conf.mtu = wire.mtu
            conf.srtp = wire.key
            conf.ringCapacity = 64
            let sink = RecordingSink(socket: socket, destination: stream.destination, pcap: pcap)
            do { audioPipeline = try AudioSendStream(configuration: conf, sink: sink) } catch {
                throw InputError(description: "cannot create the audio send pipeline: \(error)")
            }
        } else {
            audioPipeline = nil
        }
        var reported: [(destination: SocketAddress, target: any RTPSendFeedbackTarget)] = []
        func rtcpDestination(_ rtp: SocketAddress) -> SocketAddress {
            var to = rtp
            if !wire.rtcpMux { to.port = to.port &+ 1 }
            return to
        }
        if let v = videoPipeline, let s = videoStream { reported.append((rtcpDestination(s.destination), v)) }
        if let a = audioPipeline, let s = audioStream { reported.append((rtcpDestination(s.destination), a)) }
        reporter = try SenderReporter(socket: socket, key: wire.key, cname: "revue-media", streams: reported)
        feedback.targets.withLock { t in
            if let v = videoPipeline { t[v.ssrc] = v }
            if let a = audioPipeline { t[a.ssrc] = a }
        }
    }

    /// Copies the pipelines' W3C counters into the streams' counters (what the commands report).
    func collectPipelineStatistics() {
        if let p = videoPipeline, let c = videoStream?.counters {
            let o = p.statistics.outbound
            c.frames.store(Int(o.framesEncoded), ordering: .relaxed)
            c.keyframes.store(Int(o.keyFramesEncoded), ordering: .relaxed)
            c.packets.store(Int(o.packetsSent), ordering: .relaxed)
            c.bytes.store(Int(o.bytesSent + o.headerBytesSent), ordering: .relaxed)
            c.keyframeRequests.store(Int(o.pliCount + o.firCount), ordering: .relaxed)
        }
        if let p = audioPipeline, let c = audioStream?.counters {
            let o = p.statistics.outbound
            c.frames.store(Int(o.framesEncoded), ordering: .relaxed)
            c.packets.store(Int(o.packetsSent), ordering: .relaxed)
            c.bytes.store(Int(o.bytesSent + o.headerBytesSent), ordering: .relaxed)
        }
    }

    /// Plays both sources in real time until they end or `shouldStop()`; returns whether it was stopped.
    @discardableResult
    func run(shouldStop: () -> Bool, progress: ((Double) -> Void)? = nil) throws -> Bool {
        feedback.start()
        videoPipeline?.start()
        audioPipeline?.start()
        defer {
            videoPipeline?.stop()
            audioPipeline?.stop(flushPartialFrame: true)
            feedback.stop()
            collectPipelineStatistics()
        }
        let start = MonotonicTime.now.nanoseconds
        let frame = video.map { VideoFrame(width: $0.width, height: $0.height) }
        var videoIndex = 0, videoDone = video == nil
        var audioChunks = 0, audioDone = audio == nil
        let chunkFrames = audio.map { max(1, $0.sampleRate / 50) } ?? 0  // 20 ms of input
        var pcm = [Float](repeating: 0, count: chunkFrames * (audio?.channels ?? 1))
        var stopped = false

        func videoDue() -> UInt64 {
            guard let v = video else { return .max }
            return start + UInt64(Double(videoIndex) * 1e9 / v.frameRate.doubleValue)
        }
        func audioDue() -> UInt64 { start + UInt64(audioChunks) * 20_000_000 }

        while !(videoDone && audioDone) {
            if shouldStop() { stopped = true; break }
            let due = min(videoDone ? .max : videoDue(), audioDone ? .max : audioDue())
            let now = MonotonicTime.now.nanoseconds
            reporter.sendDue(now: MonotonicTime(nanoseconds: now))
            if due > now {
                let wait = min(due - now, 50_000_000)
                var ts = timespec(tv_sec: Int(wait / 1_000_000_000), tv_nsec: Int(wait % 1_000_000_000))
                nanosleep(&ts, nil)
                continue
            }
            if !videoDone && videoDue() <= due, let video, let frame, let pipeline = videoPipeline {
                guard try video.next(into: frame) else { videoDone = true; continue }
                let captured = MonotonicTime.now.nanoseconds
                if feedback.takeKeyframeRequest() { pipeline.handlePictureLossIndication() }
                pipeline.capturer.capture(PixelBufferView(frame.view), timeStampNs: Int64(captured))
                onVideoFrame?(videoIndex, captured)
                videoIndex += 1
                progress?(Double(captured - start) / 1e9)
            } else if let audio, let pipeline = audioPipeline {
                let n = try pcm.withUnsafeMutableBufferPointer { try audio.read(into: $0) }
                audioChunks += 1
                if n == 0 { audioDone = true; continue }
                let captured = Int64(start) + Int64(audioChunks - 1) * 20_000_000
                pcm.withUnsafeBufferPointer { p in
                    pipeline.capturer.capture(
                        UnsafeBufferPointer(rebasing: p[0..<(n * audio.channels)]), sampleRate: audio.sampleRate,
                        channels: audio.channels, timeStampNs: captured)
                }
            } else {
                // A source without its pipeline cannot happen (both are made together); stop it.
                videoDone = videoDone || videoPipeline == nil
                audioDone = audioDone || audioPipeline == nil
            }
        }
        return stopped
    }

    func finish() throws {
        do { try pcap?.finish() } catch { throw InputError(description: "\(error)") }
    }
}

/// The send pipelines' sink: UDP in `sendmmsg` batches, each packet also recorded to the pcap
/// file when `--pcap` asked for one.
/// Thread rule: `write`/`flush` from one pipeline worker. Cost: the UDP sink's copy, plus the pcap copy.
final class RecordingSink: PacketSink, Sendable {
    private let udp: UDPPacketSink
    private let pcap: PcapPacketSink?
    private let pcapDestination: PcapEndpoint
    private let destination: SocketAddress

    init(socket: UDPSocket, destination: SocketAddress, pcap: PcapPacketSink?) {
        udp = UDPPacketSink(socket: socket, destination: destination)
        self.pcap = pcap
        self.destination = destination
        pcapDestination = PcapEndpoint(destination)
    }

    /// Sends `packet` and, when recording, appends it to the capture.
    func write(_ packet: RawSpan) {
        packet.withUnsafeBytes { packet in
            udp.write(packet)
            pcap?.write(packet, to: pcapDestination)
        }
    }

    func flush() { udp.flush() }
}
