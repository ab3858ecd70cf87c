import Foundation
import Glibc
import MediaCore
import Synchronization

/// A real-time media sender for receive-side tests, built only from existing building blocks
/// (SyntheticVideo -> VPXEncoder -> VP8Packetizer -> SRTP -> UDP; SyntheticAudio -> Opus with
/// in-band FEC -> RTP -> SRTP -> UDP), with a `SendHistory` for NACK and an `RTCPSenderSession`
/// answering the receiver's RTCP. Runs on the calling thread in wall-clock time.
final class ReceiveTestSender: RTCPFeedbackHandler {
    let socket: UDPSocket
    var destination: SocketAddress
    let videoSSRC: UInt32 = 0x1111_2222
    let audioSSRC: UInt32 = 0x3333_4444
    let videoPT: UInt8 = 96
    let audioPT: UInt8 = 111
    let width: Int, height: Int
    let protect: SRTPContext?
    let rtcpIn: SRTPContext?
    let encoder: VPXEncoder
    let opus: OpusEncoder
    var packetizer = VP8Packetizer(pictureID: 100)
    let history = SendHistory(capacity: 2048, maxPacketSize: 1500)
    var session: RTCPSenderSession!
    var videoSeq: UInt16 = 1000
    var audioSeq: UInt16 = 5000
    var keyframePending = false
    var bitrateChanges: [Int] = []
    var keyframesSent = 0
    var packetsSent = 0
    var retransmissions = 0
    /// Video frames and audio packets the last `run` sent (fewer than asked when this machine
    /// cannot keep real time, e.g. under ThreadSanitizer).
    var videoFramesSent = 0
    var audioFramesSent = 0
    let frame: VideoFrame
    var audioSource = SyntheticAudio(pattern: .speech, sampleRate: 48_000)
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 16)
    let rx = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 16)

    init(
        to destination: SocketAddress, key: SRTPKeyMaterial?, rtcpKey: SRTPKeyMaterial? = nil,
        width: Int = 320, height: Int = 240, bitrate: Int = 400_000, audioFEC: Bool = true
    ) throws {
        socket = try UDPSocket(bindingTo: .loopbackIPv4(port: 0))
        self.destination = destination
        self.width = width; self.height = height
        if let key {
            protect = try SRTPContext(material: key, direction: .outbound)
            rtcpIn = try SRTPContext(material: rtcpKey ?? key, direction: .inbound)
        } else {
            protect = nil; rtcpIn = nil
        }
        var conf = VPXEncoderConfiguration(codec: .vp8, width: width, height: height)
        conf.bitrate = bitrate
        conf.keyframeInterval = 100_000
        encoder = try VPXEncoder(conf)
        opus = try OpusEncoder(sampleRate: .hz48000, channels: 1, application: .voip)
        opus.isInbandFECEnabled = audioFEC
        opus.expectedPacketLossPercent = audioFEC ? 10 : 0
        frame = VideoFrame(width: width, height: height)
        session = RTCPSenderSession(
            ssrcs: [videoSSRC, audioSSRC], handler: self, startBitrate: bitrate,
            minimumBitrate: 50_000, maximumBitrate: 2_000_000)
    }

    deinit { buffer.deallocate(); rx.deallocate() }

    // MARK: RTCPFeedbackHandler

    func retransmit(ssrc: UInt32, sequenceNumber: UInt16) -> SendHistory.Lookup {
        let r = history.retransmit(seq: sequenceNumber, now: .now, maxRetransmissions: 3) { (bytes: RawSpan) in
            _ = try? socket.send(bytes, to: destination)
        }
        if case .found = r { retransmissions += 1 }
        return r
    }
    func requestKeyframe(ssrc: UInt32) { if ssrc == videoSSRC { keyframePending = true } }
    func setTargetBitrate(_ bitsPerSecond: Int) {
        bitrateChanges.append(bitsPerSecond)
        if ProcessInfo.processInfo.environment["RECV_DEBUG"] != nil {
            print(
                "t=\(MonotonicTime.now.nanoseconds / 1_000_000 % 100_000) target \(bitsPerSecond) remb \(session.estimator.remb ?? -1) loss \(session.estimator.lastFractionLost) lossBased \(Int(session.estimator.lossBasedBitrate))"
            )
        }
        encoder.bitrate = max(50_000, bitsPerSecond)
    }

    // MARK: Sending

    private func send(_ length: Int, seq: UInt16, store: Bool) {
        var n = length
        var bufferSpan = buffer.mutableBytes
        if let protect { n = (try? protect.protect(&bufferSpan, length: length)) ?? 0 }
        guard n > 0 else { return }
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
        if store { history.store(seq: seq, packet: bytes, now: .now) }
        _ = try? socket.send(bytes, to: destination)
        packetsSent += 1
    }

    func sendVideoFrame(_ index: Int) throws {
        SyntheticVideo.render(frameIndex: index, into: frame)
        let pts = Int64(index) * 3000
        let force = keyframePending
        keyframePending = false
        try encoder.encode(frame.view, pts: pts, forceKeyframe: force) { encoded in
            if encoded.isKeyframe { keyframesSent += 1 }
            var header = RTPHeader(payloadType: videoPT, timestamp: UInt32(truncatingIfNeeded: pts), ssrc: videoSSRC)
            let packets = packetizer.packetize(frameSize: encoded.byteCount, maxPayloadSize: header.maxPayloadSize(mtu: 1200))
            for i in 0..<packets.count {
                header.sequenceNumber = videoSeq
                let n = buffer.appending { packets.writePacket(at: i, header: &header, of: encoded.data.bytes, into: &$0) }
                session.packetSent(ssrc: videoSSRC, payloadBytes: n - 12)
                send(n, seq: videoSeq, store: true)
                videoSeq &+= 1
            }
        }
    }

    func sendAudioFrame(_ index: Int) throws {
        let pcm = audioSource.int16s(frames: 960)
        var packet = [UInt8](repeating: 0, count: 1500)
        let size = try pcm.withUnsafeBufferPointer { p in
            try packet.withUnsafeMutableBytes { try opus.encode(p, into: $0) }
        }
        let header = RTPHeader(
            marker: index == 0, payloadType: audioPT, sequenceNumber: audioSeq,
            timestamp: UInt32(truncatingIfNeeded: index * 960), ssrc: audioSSRC)
        let n = buffer.appending {
            RTPPacket.marshal(header: header, payload: packet.span.bytes.extracting(0..<size), into: &$0)
        }
        send(n, seq: audioSeq, store: false)
        audioSeq &+= 1
    }

    func sendSenderReport(rtpTimestamp: UInt32) {
        let sr = session.senderReport(ssrc: videoSSRC, rtpTimestamp: rtpTimestamp)
        var n = buffer.appending { sr.marshal(into: &$0) }
        var bufferSpan = buffer.mutableBytes
        if let protect { n = (try? protect.protectRTCP(&bufferSpan, length: n)) ?? 0 }
        if n > 0 { _ = try? socket.send(UnsafeRawBufferPointer(rebasing: buffer[0..<n]), to: destination) }
    }

    /// Reads and handles every RTCP datagram queued on the socket.
    func pollRTCP() {
        while (try? socket.waitUntilReadable(timeoutMilliseconds: 0)) == true {
            guard let r = try? socket.receive(into: rx), r.count > 0 else { return }
            var n = r.count
            if let rtcpIn {
                var rxSpan = rx.mutableBytes
                guard let m = try? rtcpIn.unprotectRTCP(&rxSpan, length: n) else { continue }
                n = m
            }
            session.handle(UnsafeRawBufferPointer(rebasing: rx[0..<n]), now: .now)
        }
    }

    /// Sends `seconds` of 30 fps video (and 50 pps audio when `audio`) in real time, answering RTCP.
    func run(
        seconds: Double, video: Bool = true, audio: Bool = false, startFrame: Int = 0,
        onSecond: ((Int) -> Void)? = nil
    ) throws {
        let start = MonotonicTime.now.nanoseconds
        let end = start + UInt64(seconds * 1e9)
        var v = 0, a = 0, lastSR: UInt64 = 0
        while true {
            let now = MonotonicTime.now.nanoseconds
            if now >= end { break }
            let elapsed = now - start
            if video && elapsed >= UInt64(v) * 33_333_333 {
                try sendVideoFrame(startFrame + v)
                v += 1
            }
            if audio && elapsed >= UInt64(a) * 20_000_000 {
                try sendAudioFrame(a)
                a += 1
            }
            if now >= lastSR + 250_000_000 {
                lastSR = now
                sendSenderReport(rtpTimestamp: UInt32(truncatingIfNeeded: (startFrame + v) * 3000))
            }
            pollRTCP()
            usleep(1000)
        }
        pollRTCP()
        videoFramesSent = v
        audioFramesSent = a
    }
}

/// A renderer that records, for each decoded frame, the SyntheticVideo frame index it shows and
/// the PSNR against the frame the sender encoded.
final class IndexingRenderer: VideoRenderer, @unchecked Sendable {
    let lock = Mutex<[Int: Double]>([:])
    let reference: VideoFrame
    var packedFrames = 0
    init(width: Int, height: Int) { reference = VideoFrame(width: width, height: height) }

    func render(_ frame: DecodedVideoFrame) {
        guard let index = SyntheticVideo.frameIndex(in: frame.view) else {
            lock.withLock { $0[-1, default: 0] += 1 }
            return
        }
        var psnr = 0.0
        if frame.view.width == reference.width && frame.view.height == reference.height {
            SyntheticVideo.render(frameIndex: index, into: reference)
            psnr = Quality.psnr(reference.view, frame.view)
        }
        if frame.packed != nil { packedFrames += 1 }
        lock.withLock { $0[index] = psnr }
        renderTimes.withLock { $0[index] = frame.renderTime.nanoseconds }
    }

    /// Each frame's `renderTimeNs`, by index.
    let renderTimes = Mutex<[Int: UInt64]>([:])

    var indices: Set<Int> { lock.withLock { Set($0.keys.filter { $0 >= 0 }) } }
    var minimumPSNR: Double { lock.withLock { $0.filter { $0.key >= 0 }.values.min() ?? 0 } }
    var unreadable: Int { lock.withLock { Int($0[-1] ?? 0) } }
}
