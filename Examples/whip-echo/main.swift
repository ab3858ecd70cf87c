// whip-echo: a WebRTC bot written against `import RevueMedia` alone. It answers WHIP offers
// (POST an SDP offer to http://HOST:PORT/whip, get 201 Created, the answer and a Location) and
// sends back what each client sends it: the video with a white square moving over it, and the
// audio as it came. DELETE the Location to hang up.
//
//   whip-echo [--host 127.0.0.1] [--port 8080] [--size 640x360] [--token TOKEN]
//
// The video goes back at --size (the frames received are scaled to it). With --token, clients
// must send `Authorization: Bearer TOKEN`; a --host other than loopback needs one.
import Dispatch
import RevueMedia
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Writes `text` and a newline to standard output at once (also into a pipe).
func say(_ text: String) {
    var line = text + "\n"
    line.withUTF8 { _ = write(1, $0.baseAddress, $0.count) }
}

/// Receives the client's video, draws the moving square into a copy and sends the copy back.
/// Thread rule: `render` on the connection's receive thread only.
final class EchoVideo: VideoRenderer, @unchecked Sendable {
    // Sendable: `frame` and `count` are touched only by `render`, on the receive thread.
    let out: BufferCapturer
    var frame: VideoFrame?
    var count = 0

    init(out: BufferCapturer) { self.out = out }

    func render(_ decoded: DecodedVideoFrame) {
        if frame?.width != decoded.width || frame?.height != decoded.height {
            frame = VideoFrame(width: decoded.width, height: decoded.height)
        }
        guard let frame else { return }
        decoded.withView { copy($0, into: frame) }
        drawSquare(into: frame, at: count)
        count += 1
        frame.withView { out.capture(PixelBufferView($0)) }
    }

    /// Copies the three planes row by row (the strides may differ).
    func copy(_ view: I420View, into frame: VideoFrame) {
        view.withPlanes { y, u, v in
            frame.withMutablePlanes { oy, ou, ov in
                Self.copyPlane(y, view.strideY, into: &oy, frame.strideY, width: view.width, height: view.height)
                Self.copyPlane(u, view.strideU, into: &ou, frame.strideUV, width: view.chromaWidth, height: view.chromaHeight)
                Self.copyPlane(v, view.strideV, into: &ov, frame.strideUV, width: view.chromaWidth, height: view.chromaHeight)
            }
        }
    }

    static func copyPlane(
        _ from: Span<UInt8>, _ fromStride: Int, into to: inout MutableSpan<UInt8>, _ toStride: Int, width: Int, height: Int
    ) {
        for r in 0..<height {
            for c in 0..<width { to[r * toStride + c] = from[r * fromStride + c] }
        }
    }

    /// A white square, a sixth of the height, moving left to right, one loop every 4 s at 30 fps.
    func drawSquare(into frame: VideoFrame, at n: Int) {
        let side = max(frame.height / 6, 2)
        let x = (n * (frame.width - side) / 120) % max(frame.width - side, 1)
        let top = frame.height / 2 - side / 2
        frame.withMutablePlanes { y, _, _ in
            for r in top..<(top + side) {
                for c in x..<(x + side) { y[r * frame.strideY + c] = 235 }
            }
        }
    }
}

/// Sends the client's audio straight back, timed by the samples played so far.
/// Thread rule: `play` on the playout thread.
final class EchoAudio: AudioSink, Sendable {
    let out: AudioBufferCapturer
    let frames = Atomic<Int64>(0)
    init(out: AudioBufferCapturer) { self.out = out }
    func play(_ samples: Span<Int16>, sampleRate: Int, channels: Int) {
        let n = Int64(samples.count / max(channels, 1))
        let start = frames.add(n, ordering: .relaxed).oldValue
        out.capture(samples, sampleRate: sampleRate, channels: channels, timeStampNs: start * 1_000_000_000 / Int64(sampleRate))
    }
}

var host = "127.0.0.1"
var port: UInt16 = 8080
var size = (width: 640, height: 360)
var options = WHIPServerOptions()
var arguments = CommandLine.arguments.dropFirst()
while let flag = arguments.popFirst() {
    switch (flag, arguments.popFirst()) {
    case ("--host", let value?): host = value
    case ("--port", let value?) where UInt16(value) != nil: port = UInt16(value)!
    case ("--token", let value?): options.tokens = [value]
    case ("--size", let value?) where value.split(separator: "x").compactMap({ Int($0) }).count == 2:
        let wh = value.split(separator: "x").compactMap { Int($0) }
        size = (wh[0], wh[1])
    default:
        say("usage: whip-echo [--host IPV4] [--port PORT] [--size WxH] [--token TOKEN]")
        exit(2)
    }
}

let connections = Mutex<[String: RTCPeerConnection]>([:])
var configuration = RTCConfiguration()
configuration.localAddress = host == "127.0.0.1" ? "127.0.0.1" : "0.0.0.0"
configuration.videoWidth = size.width
configuration.videoHeight = size.height

let server: WHIPServer
do {
    server = try WHIPServer(host: host, port: port, options: options) { [configuration] offer, id in
        let pc = try RTCPeerConnection(configuration: configuration)
        let video = try pc.addTrack(.video)
        let audio = try pc.addTrack(.audio)
        pc.remoteVideoRenderer = EchoVideo(out: video.videoCapturer!)
        pc.remoteAudioSink = EchoAudio(out: audio.audioCapturer!)
        pc.onConnectionStateChange = { state in say("\(id): \(state.rawValue)") }
        try await pc.setRemoteDescription(offer)
        let answer = try await pc.createAnswer()
        try await pc.setLocalDescription(answer)
        connections.withLock { $0[id] = pc }
        return answer
    } end: { id in
        connections.withLock { $0.removeValue(forKey: id) }?.close()
        say("\(id): deleted")
    }
} catch {
    say("whip-echo: \(error)")
    exit(1)
}
say("whip-echo: POST offers to http://\(host):\(server.port)\(server.path)")
dispatchMain()
