// The sending end of `send` and `demo`: plays a video source and an audio source in real time,
// encodes (VP8/VP9, Opus), packetizes (RFC 7741 / RFC 9628 / RFC 7587) and sends SRTP over UDP,
// answering a receiver's PLI/FIR with a keyframe.
import RevueSDK
import Foundation
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
}

final class MediaSender {
    let socket: UDPSocket
    let video: VideoSource?
    let audio: AudioSource?
    let videoStream: RTPOutStream?
    let audioStream: RTPOutStream?
    let videoEncoder: VideoStreamEncoder?
    let audioEncoder: OpusStreamEncoder?
    let codec: VPXCodec
    let feedback: RTCPFeedbackListener
    let pcap: PcapRecorder?
    private var vp8 = VP8Packetizer()
    private var vp9 = VP9Packetizer()
    /// Called after each video frame is sent: its index and the monotonic time it was captured.
    var onVideoFrame: ((Int, UInt64) -> Void)?

    init(video: VideoSource?, audio: AudioSource?, videoOptions: VideoEncodeOptions, audioOptions: AudioEncodeOptions,
         wire: SendWire) throws {
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
            pcap = try PcapRecorder(path: path, source: (try? socket.localAddress()) ?? any)
        } else { pcap = nil }
        if let video {
            videoEncoder = try VideoStreamEncoder(options: videoOptions, width: video.width, height: video.height, frameRate: video.frameRate)
            videoStream = try RTPOutStream(socket: socket, destination: wire.destination, ssrc: wire.videoSSRC,
                                           payloadType: wire.videoPayloadType, clockRate: 90_000, mtu: wire.mtu, key: wire.key, pcap: pcap)
        } else { videoEncoder = nil; videoStream = nil }
        if let audio {
            audioEncoder = try OpusStreamEncoder(options: audioOptions, inputRate: audio.sampleRate, channels: audio.channels)
            var to = wire.destination
            if video != nil && wire.separateAudioPort { to.port = to.port &+ 2 }
            audioStream = try RTPOutStream(socket: socket, destination: to, ssrc: wire.audioSSRC,
                                           payloadType: wire.audioPayloadType, clockRate: 48_000, mtu: wire.mtu, key: wire.key, pcap: pcap)
        } else { audioEncoder = nil; audioStream = nil }
        feedback = try RTCPFeedbackListener(socket: socket, key: wire.key, streams: [videoStream, audioStream].compactMap { $0 })
    }

    /// Plays both sources in real time until they end or `shouldStop()`; returns whether it was stopped.
    @discardableResult
    func run(shouldStop: () -> Bool, progress: ((Double) -> Void)? = nil) throws -> Bool {
        feedback.start()
        defer { feedback.stop() }
        let start = UDPSocket.monotonicNanoseconds()
        let frame = video.map { VideoFrame(width: $0.width, height: $0.height) }
        var videoIndex = 0, videoDone = video == nil
        var audioTicks48k: Int64 = 0, audioChunks = 0, audioDone = audio == nil
        let chunkFrames = audio.map { max(1, $0.sampleRate / 50) } ?? 0  // 20 ms of input
        var pcm = [Float](repeating: 0, count: chunkFrames * (audio?.channels ?? 1))
        var firstAudioPacket = true
        var stopped = false

        func videoDue() -> UInt64 {
            guard let v = video else { return .max }
            return start + UInt64(Double(videoIndex) * 1e9 / v.frameRate.doubleValue)
        }
        func audioDue() -> UInt64 { start + UInt64(audioChunks) * 20_000_000 }

        while !(videoDone && audioDone) {
            if shouldStop() { stopped = true; break }
            let due = min(videoDone ? .max : videoDue(), audioDone ? .max : audioDue())
            let now = UDPSocket.monotonicNanoseconds()
            if due > now {
                let wait = min(due - now, 50_000_000)
                var ts = timespec(tv_sec: Int(wait / 1_000_000_000), tv_nsec: Int(wait % 1_000_000_000))
                nanosleep(&ts, nil)
                continue
            }
            if !videoDone && videoDue() <= due, let video, let frame, let encoder = videoEncoder, let stream = videoStream {
                guard try video.next(into: frame) else { videoDone = true; continue }
                let captured = UDPSocket.monotonicNanoseconds()
                let key = feedback.takeKeyframeRequest()
                try encoder.encode(frame.view, forceKeyframe: key) { out, _ in
                    self.sendVideo(out, stream: stream)
                }
                onVideoFrame?(videoIndex, captured)
                videoIndex += 1
                progress?(Double(captured - start) / 1e9)
            } else if let audio, let encoder = audioEncoder, let stream = audioStream {
                let n = try pcm.withUnsafeMutableBufferPointer { try audio.read(into: $0) }
                audioChunks += 1
                if n == 0 { audioDone = true; continue }
                try pcm.withUnsafeBufferPointer { p in
                    try encoder.feed(UnsafeBufferPointer(rebasing: p[0..<(n * audio.channels)])) { packet, samples in
                        let payloads = OpusPayload.packetize(frame: packet, maxPayloadSize: stream.maxPayloadSize)
                        stream.send(payloads, timestamp: stream.timestamp(ticks: audioTicks48k), marker: firstAudioPacket)
                        stream.counters.frames.add(1, ordering: .relaxed)
                        firstAudioPacket = false
                        audioTicks48k += Int64(samples)
                    }
                }
            }
        }
        return stopped
    }

    private func sendVideo(_ out: EncodedVideoFrame, stream: RTPOutStream) {
        let ts = stream.timestamp(ticks: out.pts)
        let max = stream.maxPayloadSize
        if codec == .vp8 {
            stream.send(vp8.packetize(frame: out.data, maxPayloadSize: max), timestamp: ts)
        } else {
            stream.send(vp9.packetize(frame: out.data, maxPayloadSize: max, keyframe: out.isKeyframe,
                                      width: out.width, height: out.height), timestamp: ts)
        }
        stream.counters.frames.add(1, ordering: .relaxed)
        if out.isKeyframe { stream.counters.keyframes.add(1, ordering: .relaxed) }
    }

    func finish() throws { try pcap?.finish() }
}
