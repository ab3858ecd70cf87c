# aiortc as a WebRTC peer for the JSEP and peer-connection interop tests
# (Tests/InteropTests/JSEPInteropTests.swift, PeerConnectionInteropTests.swift) and
# scripts/make-fuzz-corpus. One JSON command per line on stdin, one JSON reply per line on stdout.
#
# Signalling only: {"op": "offer"} (audio and video tracks), {"op": "answer", "sdp": offer},
# {"op": "remote-answer", "sdp": answer}, {"op": "quit"}.
#
# Media: {"op": "media-offer", ...} and {"op": "media-answer", "sdp": offer, ...} make an offer or
# an answer whose tracks send the frames of "y4m" (a 4:2:0 Y4M file, looped, at its frame rate)
# and a sine of "tone" Hz (both optional), and receive the peer's media: decoded video frames are
# written to "out_y4m" (at most "max_frames") and decoded audio is measured. {"op": "stats"}
# replies with the counts so far: {"state", "frames_sent", "frames_received", "audio_frames_sent",
# "audio_samples", "audio_rms", "audio_crossings_per_second", "sender_reports_for" (streams the
# peer sent RTCP sender reports for)} (numbers as strings).
#
# Replies: {"sdp": ...}, {"state": ...}, {"stats" fields} or {"error": ...}. Runs with
# .venv-interop/bin/python3 (scripts/install-deps).
import array, asyncio, fractions, json, math, sys
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import AudioStreamTrack, MediaStreamTrack, VideoStreamTrack
import av

def write(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

class Y4MFrames:
    """The frames of a 4:2:0 Y4M file, as (width, height, rate, [bytes])."""
    def __init__(self, path):
        data = open(path, "rb").read()
        end = data.index(b"\n")
        fields = data[:end].split(b" ")
        self.width = self.height = 0
        self.rate = 30.0
        for f in fields[1:]:
            if f[:1] == b"W": self.width = int(f[1:])
            elif f[:1] == b"H": self.height = int(f[1:])
            elif f[:1] == b"F":
                n, d = f[1:].split(b":")
                self.rate = int(n) / int(d)
        size = self.width * self.height + 2 * ((self.width + 1) // 2) * ((self.height + 1) // 2)
        self.frames = []
        pos = end + 1
        while pos < len(data):
            pos = data.index(b"\n", pos) + 1
            self.frames.append(data[pos:pos + size])
            pos += size

def fill_plane(plane, data, width, height):
    """Copies tightly packed rows into an av plane whose rows may be padded."""
    if plane.line_size == width:
        plane.update(data)
        return
    padded = bytearray(plane.line_size * height)
    for r in range(height):
        padded[r * plane.line_size:r * plane.line_size + width] = data[r * width:(r + 1) * width]
    plane.update(bytes(padded))

def plane_bytes(plane, width, height):
    raw = bytes(plane)
    if plane.line_size == width:
        return raw[:width * height]
    return b"".join(raw[r * plane.line_size:r * plane.line_size + width] for r in range(height))

class FileVideoTrack(VideoStreamTrack):
    """Sends the Y4M frames in a loop at the file's rate; frame i carries pts i."""
    def __init__(self, y4m, counters):
        super().__init__()
        self.y4m = y4m
        self.counters = counters
        self.index = 0
        self.start = None

    async def recv(self):
        loop = asyncio.get_running_loop()
        if self.start is None:
            self.start = loop.time()
        target = self.start + self.index / self.y4m.rate
        delay = target - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        w, h = self.y4m.width, self.y4m.height
        cw, ch = (w + 1) // 2, (h + 1) // 2
        data = self.y4m.frames[self.index % len(self.y4m.frames)]
        frame = av.VideoFrame(w, h, "yuv420p")
        fill_plane(frame.planes[0], data[:w * h], w, h)
        fill_plane(frame.planes[1], data[w * h:w * h + cw * ch], cw, ch)
        fill_plane(frame.planes[2], data[w * h + cw * ch:], cw, ch)
        frame.pts = int(self.index * 90000 / self.y4m.rate)
        frame.time_base = fractions.Fraction(1, 90000)
        self.index += 1
        self.counters["frames_sent"] += 1
        return frame

class ToneTrack(AudioStreamTrack):
    """A sine of `frequency` Hz at half scale, mono 48 kHz, in 20 ms frames at real time."""
    def __init__(self, frequency, counters):
        super().__init__()
        self.frequency = frequency
        self.counters = counters
        self.sample = 0
        self.start = None

    async def recv(self):
        loop = asyncio.get_running_loop()
        if self.start is None:
            self.start = loop.time()
        target = self.start + self.sample / 48000
        delay = target - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        samples = array.array("h", (int(16384 * math.sin(2 * math.pi * self.frequency * (self.sample + i) / 48000))
                                    for i in range(960)))
        frame = av.AudioFrame(format="s16", layout="mono", samples=960)
        frame.planes[0].update(samples.tobytes())
        frame.sample_rate = 48000
        frame.pts = self.sample
        frame.time_base = fractions.Fraction(1, 48000)
        self.sample += 960
        self.counters["audio_frames_sent"] += 1
        return frame

def first_channel(frame):
    """The first channel of an audio frame as floats in -1...1 (s16 or float, packed or planar)."""
    name = frame.format.name
    channels = len(frame.layout.channels)
    if name.startswith("s16"):
        data, scale = array.array("h", bytes(frame.planes[0])), 32768.0
    elif name.startswith("flt"):
        data, scale = array.array("f", bytes(frame.planes[0])), 1.0
    else:
        raise ValueError("audio format " + name)
    step = 1 if frame.format.is_planar else channels
    return [v / scale for v in data[0:frame.samples * step:step]]

class Receiver:
    """Consumes the peer's tracks: video frames to a Y4M file, audio measured."""
    def __init__(self, out_y4m, max_frames, counters):
        self.out_y4m = out_y4m
        self.max_frames = max_frames
        self.counters = counters
        self.file = None
        self.tasks = []
        self.sum_squares = 0.0
        self.crossings = 0
        self.last_sign = None

    def track(self, track):
        if track.kind == "video":
            self.tasks.append(asyncio.ensure_future(self.video(track)))
        else:
            self.tasks.append(asyncio.ensure_future(self.audio(track)))

    async def video(self, track):
        while True:
            try:
                frame = await track.recv()
            except Exception:
                return
            self.counters["frames_received"] += 1
            if self.out_y4m is None or self.counters["frames_received"] > self.max_frames:
                continue
            f = frame.reformat(format="yuv420p")
            w, h = f.width, f.height
            cw, ch = (w + 1) // 2, (h + 1) // 2
            if self.file is None:
                self.file = open(self.out_y4m, "wb")
                self.file.write(b"YUV4MPEG2 W%d H%d F30:1 Ip A1:1 C420jpeg\n" % (w, h))
            self.file.write(b"FRAME\n")
            self.file.write(plane_bytes(f.planes[0], w, h))
            self.file.write(plane_bytes(f.planes[1], cw, ch))
            self.file.write(plane_bytes(f.planes[2], cw, ch))
            self.file.flush()

    async def audio(self, track):
        while True:
            try:
                frame = await track.recv()
            except Exception:
                return
            samples = first_channel(frame)
            # Skip the first half second (jitter buffer start, the sender's first frames).
            self.counters["audio_samples_all"] += len(samples)
            if self.counters["audio_samples_all"] <= 24000:
                continue
            for s in samples:
                self.sum_squares += s * s
                sign = s >= 0
                if self.last_sign is not None and sign != self.last_sign:
                    self.crossings += 1
                self.last_sign = sign
            self.counters["audio_samples"] += len(samples)

    def stats(self):
        n = self.counters["audio_samples"]
        rms = math.sqrt(self.sum_squares / n) if n else 0.0
        per_second = self.crossings / (n / 48000) if n else 0.0
        return rms, per_second

def media_tracks(pc, cmd, counters, offer):
    """Our tracks; an offer without one still receives that kind (a recvonly transceiver)."""
    if cmd.get("y4m"):
        pc.addTrack(FileVideoTrack(Y4MFrames(cmd["y4m"]), counters))
    elif offer:
        pc.addTransceiver("video", direction="recvonly")
    if cmd.get("tone"):
        pc.addTrack(ToneTrack(float(cmd["tone"]), counters))
    elif offer:
        pc.addTransceiver("audio", direction="recvonly")

async def main():
    pc = RTCPeerConnection()
    counters = {"frames_sent": 0, "frames_received": 0, "audio_frames_sent": 0, "audio_samples": 0,
                "audio_samples_all": 0}
    receiver = None
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        cmd = json.loads(line)
        op = cmd["op"]
        try:
            if op == "quit":
                write({"state": "closed"})
                break
            if op == "offer":
                pc.addTrack(AudioStreamTrack())
                pc.addTrack(VideoStreamTrack())
                await pc.setLocalDescription(await pc.createOffer())
                write({"sdp": pc.localDescription.sdp})
            elif op == "answer":
                await pc.setRemoteDescription(RTCSessionDescription(cmd["sdp"], "offer"))
                pc.addTrack(AudioStreamTrack())
                pc.addTrack(VideoStreamTrack())
                await pc.setLocalDescription(await pc.createAnswer())
                write({"sdp": pc.localDescription.sdp})
            elif op == "remote-answer":
                await pc.setRemoteDescription(RTCSessionDescription(cmd["sdp"], "answer"))
                write({"state": pc.signalingState})
            elif op in ("media-offer", "media-answer"):
                receiver = Receiver(cmd.get("out_y4m"), int(cmd.get("max_frames", "300")), counters)
                pc.on("track", receiver.track)
                if op == "media-offer":
                    media_tracks(pc, cmd, counters, True)
                    await pc.setLocalDescription(await pc.createOffer())
                else:
                    await pc.setRemoteDescription(RTCSessionDescription(cmd["sdp"], "offer"))
                    # The offer's transceivers take the tracks (aiortc reuses them by kind).
                    media_tracks(pc, cmd, counters, False)
                    await pc.setLocalDescription(await pc.createAnswer())
                write({"sdp": pc.localDescription.sdp})
            elif op == "stats":
                rms, per_second = receiver.stats() if receiver else (0.0, 0.0)
                # Streams the peer sent RTCP sender reports for (remote-outbound-rtp statistics).
                reported = 0
                for r in pc.getReceivers():
                    report = await r.getStats()
                    reported += sum(1 for v in report.values() if v.type == "remote-outbound-rtp")
                write({"state": pc.connectionState,
                       "frames_sent": str(counters["frames_sent"]),
                       "frames_received": str(counters["frames_received"]),
                       "audio_frames_sent": str(counters["audio_frames_sent"]),
                       "audio_samples": str(counters["audio_samples"]),
                       "sender_reports_for": str(reported),
                       "audio_rms": "%.4f" % rms,
                       "audio_crossings_per_second": "%.1f" % per_second})
            else:
                write({"error": "unknown op " + op})
        except Exception as e:
            write({"error": type(e).__name__ + ": " + str(e)})
    if receiver and receiver.file:
        receiver.file.close()
    await pc.close()

asyncio.run(main())
