# GStreamer's webrtcbin (bundle-policy max-bundle) as a WebRTC peer for the JSEP and peer-connection
# interop tests and scripts/make-fuzz-corpus, through PyGObject (system python3).
# Same JSON-lines commands as aiortc_peer.py:
#
# Signalling only (Opus and VP8 test signals): offer, answer, remote-answer, quit.
#
# Media: {"op": "media-offer", ...} and {"op": "media-answer", "sdp": offer, ...} send the frames
# of "y4m" (a 4:2:0 Y4M file, paced at its frame rate by the pipeline clock) encoded with "codec"
# (VP8 or VP9) and a sine of "tone" Hz through Opus, and receive the peer's media: decoded video
# frames are written to "out_y4m" (at most "max_frames", by y4menc) and decoded audio is measured.
# {"op": "stats"} replies with {"state", "frames_sent", "frames_received", "audio_samples",
# "audio_rms", "audio_crossings_per_second", "sender_reports_for"} (numbers as strings), like
# aiortc_peer.py.
import array, json, math, sys, threading
import gi
gi.require_version("Gst", "1.0")
gi.require_version("GstWebRTC", "1.0")
gi.require_version("GstSdp", "1.0")
from gi.repository import Gst, GstWebRTC, GstSdp, GLib

Gst.init(None)

def write(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

PIPELINE = (
    "webrtcbin name=w bundle-policy=max-bundle "
    "audiotestsrc is-live=true ! audioconvert ! audioresample ! opusenc ! rtpopuspay pt=111 ! "
    "application/x-rtp,media=audio,encoding-name=OPUS,payload=111 ! w. "
    "videotestsrc is-live=true ! video/x-raw,width=160,height=120 ! vp8enc deadline=1 ! rtpvp8pay pt=96 ! "
    "application/x-rtp,media=video,encoding-name=VP8,payload=96 ! w. ")

pipe = None
w = None
lock = threading.Lock()
counters = {"frames_sent": 0, "frames_received": 0, "audio_samples": 0, "audio_samples_all": 0,
            "sum_squares": 0.0, "crossings": 0, "last_sign": None}

def start(description):
    global pipe, w
    if pipe is None:
        pipe = Gst.parse_launch(description)
        if not isinstance(pipe, Gst.Pipeline):
            # A lone webrtcbin: parse_launch gives the element itself.
            w = pipe
            pipe = Gst.Pipeline.new("peer")
            pipe.add(w)
        w = pipe.get_by_name("w")

def media_sources(cmd, video_pt=96, audio_pt=111, video_pad="w.", audio_pad="w."):
    """The sending chains: the Y4M file paced by the clock through GStreamer's VP8 or VP9
    encoder, and the tone through Opus, into the given webrtcbin pads."""
    codec = cmd.get("codec", "VP8").upper()
    encoder = ("vp8enc deadline=1 target-bitrate=800000 keyframe-max-dist=60 error-resilient=partitions"
               if codec == "VP8" else
               "vp9enc deadline=1 target-bitrate=800000 keyframe-max-dist=60 cpu-used=8")
    payloader = "rtpvp8pay" if codec == "VP8" else "rtpvp9pay"
    text = ""
    if cmd.get("y4m"):
        text += ("filesrc location=%s ! y4mdec ! clocksync ! videoconvert ! queue ! %s ! identity name=vsent ! "
                 "%s pt=%d mtu=1200 ! application/x-rtp,media=video,encoding-name=%s,payload=%d ! %s "
                 % (cmd["y4m"], encoder, payloader, video_pt, codec, video_pt, video_pad))
    if cmd.get("tone"):
        text += ("audiotestsrc is-live=true wave=sine volume=0.5 freq=%s ! audio/x-raw,rate=48000,channels=1 ! "
                 "audioconvert ! audioresample ! opusenc ! rtpopuspay pt=%d ! "
                 "application/x-rtp,media=audio,encoding-name=OPUS,payload=%d ! %s "
                 % (cmd["tone"], audio_pt, audio_pt, audio_pad))
    return text

def offered_payload_types(sdp, codec):
    """For each m-line of an offer: (index, kind, the payload type of `codec` or OPUS)."""
    ok, msg = GstSdp.SDPMessage.new_from_text(sdp)
    found = []
    for i in range(msg.medias_len()):
        m = msg.get_media(i)
        want = codec if m.get_media() == "video" else "OPUS"
        for j in range(m.attributes_len()):
            a = m.get_attribute(j)
            if a.key == "rtpmap" and a.value.split(" ")[1].split("/")[0].upper() == want:
                found.append((i, m.get_media(), int(a.value.split(" ")[0])))
                break
    return found

def count_sent(pad, info):
    with lock:
        counters["frames_sent"] += 1
    return Gst.PadProbeReturn.OK

def count_received(pad, info):
    with lock:
        counters["frames_received"] += 1
        if counters["frames_received"] > max_frames:
            return Gst.PadProbeReturn.DROP
    return Gst.PadProbeReturn.OK

def measure_audio(pad, info):
    buf = info.get_buffer()
    ok, m = buf.map(Gst.MapFlags.READ)
    if not ok:
        return Gst.PadProbeReturn.OK
    samples = array.array("h", bytes(m.data))
    buf.unmap(m)
    with lock:
        counters["audio_samples_all"] += len(samples)
        # Skip the first half second (jitter buffer start, the sender's first frames).
        if counters["audio_samples_all"] <= 24000:
            return Gst.PadProbeReturn.OK
        for v in samples:
            s = v / 32768.0
            counters["sum_squares"] += s * s
            sign = s >= 0
            if counters["last_sign"] is not None and sign != counters["last_sign"]:
                counters["crossings"] += 1
            counters["last_sign"] = sign
        counters["audio_samples"] += len(samples)
    return Gst.PadProbeReturn.OK

out_y4m = None
max_frames = 300

def decoded(element, pad):
    caps = pad.get_current_caps() or pad.query_caps(None)
    name = caps.get_structure(0).get_name()
    if name.startswith("video/"):
        if out_y4m:
            # Through NV12 and back (lossless): y4menc writes a buffer as it is, and vp9dec's
            # I420 buffers have padded rows that a passthrough conversion would keep.
            chain = ("videoconvert ! video/x-raw,format=NV12 ! videoconvert ! video/x-raw,format=I420 ! "
                     "y4menc ! filesink location=%s" % out_y4m)
        else:
            chain = "fakesink"
        tail = Gst.parse_bin_from_description("queue ! " + chain, True)
        sink = tail.get_static_pad("sink")
        sink.add_probe(Gst.PadProbeType.BUFFER, count_received)
    elif name.startswith("audio/"):
        tail = Gst.parse_bin_from_description(
            "queue ! audioconvert ! audioresample ! audio/x-raw,format=S16LE,rate=48000,channels=1 ! fakesink name=pcm",
            True)
        tail.get_by_name("pcm").get_static_pad("sink").add_probe(Gst.PadProbeType.BUFFER, measure_audio)
    else:
        return
    pipe.add(tail)
    tail.sync_state_with_parent()
    pad.link(tail.get_static_pad("sink"))

def depayloader_added(bin, sub_bin, element):
    # As a browser does: decode from a keyframe on and ask for one (RTCP PLI) when a frame is
    # missing, instead of decoding deltas against nothing.
    factory = element.get_factory()
    if factory is not None and factory.get_name() in ("rtpvp8depay", "rtpvp9depay"):
        element.set_property("wait-for-keyframe", True)
        element.set_property("request-keyframe", True)

def incoming(element, pad):
    if pad.get_direction() != Gst.PadDirection.SRC:
        return
    decode = Gst.ElementFactory.make("decodebin")
    decode.connect("pad-added", decoded)
    decode.connect("deep-element-added", depayloader_added)
    pipe.add(decode)
    decode.sync_state_with_parent()
    pad.link(decode.get_static_pad("sink"))

def start_media(cmd, answering):
    """Links the sending chains to webrtcbin; an answerer payloads with the payload types the
    offer gave the codecs (webrtcbin sends what its pads carry)."""
    global out_y4m, max_frames
    out_y4m = cmd.get("out_y4m")
    max_frames = int(cmd.get("max_frames", "300"))
    video_pt, audio_pt = 96, 111
    if answering:
        codec = cmd.get("codec", "VP8").upper()
        for _, kind, pt in offered_payload_types(cmd["sdp"], codec):
            if kind == "video":
                video_pt = pt
            else:
                audio_pt = pt
    start("webrtcbin name=w bundle-policy=max-bundle " + media_sources(cmd, video_pt, audio_pt))
    w.connect("pad-added", incoming)
    sent = pipe.get_by_name("vsent")
    if sent is not None:
        sent.get_static_pad("src").add_probe(Gst.PadProbeType.BUFFER, count_sent)

def stats():
    reported = 0
    state = "new"
    if w is not None:
        state = w.get_property("connection-state").value_nick
        p = Gst.Promise.new()
        w.emit("get-stats", None, p)
        reply = wait(p)
        # Streams the peer sent RTCP sender reports for (remote-outbound-rtp statistics).
        def visit(field, value, _):
            nonlocal reported
            if isinstance(value, Gst.Structure) and value.has_field("type"):
                kind = value.get_value("type")
                if kind == GstWebRTC.WebRTCStatsType.REMOTE_OUTBOUND_RTP:
                    reported += 1
            return True
        if reply is not None:
            reply.foreach(visit, None)
    with lock:
        n = counters["audio_samples"]
        rms = math.sqrt(counters["sum_squares"] / n) if n else 0.0
        per_second = counters["crossings"] / (n / 48000) if n else 0.0
        return {"state": state,
                "frames_sent": str(counters["frames_sent"]),
                "frames_received": str(counters["frames_received"]),
                "audio_samples": str(n),
                "sender_reports_for": str(reported),
                "audio_rms": "%.4f" % rms,
                "audio_crossings_per_second": "%.1f" % per_second}

def wait(promise):
    promise.wait()
    reply = promise.get_reply()
    if reply is not None and reply.has_field("error"):
        raise RuntimeError(str(reply.get_value("error")))
    return reply

def description(kind, text):
    ok, msg = GstSdp.SDPMessage.new_from_text(text)
    if ok != GstSdp.SDPResult.OK:
        raise RuntimeError("GStreamer cannot parse the SDP")
    return GstWebRTC.WebRTCSessionDescription.new(kind, msg)

def gathered():
    for _ in range(300):
        if w.get_property("ice-gathering-state") == GstWebRTC.WebRTCICEGatheringState.COMPLETE:
            return
        GLib.usleep(10000)

def handle(cmd):
    op = cmd["op"]
    if op == "stats":
        return stats()
    if op == "media-offer":
        start_media(cmd, False)
        op = "offer"
    elif op == "media-answer":
        start_media(cmd, True)
        op = "answer"
    else:
        start(PIPELINE)
    if op == "offer":
        pipe.set_state(Gst.State.PLAYING)
        reply = wait_create("create-offer")
        offer = reply.get_value("offer")
        p = Gst.Promise.new(); w.emit("set-local-description", offer, p); wait(p)
        gathered()
        return {"sdp": w.get_property("local-description").sdp.as_text()}
    if op == "remote-answer":
        p = Gst.Promise.new(); w.emit("set-remote-description", description(GstWebRTC.WebRTCSDPType.ANSWER, cmd["sdp"]), p); wait(p)
        return {"state": w.get_property("signaling-state").value_nick}
    if op == "answer":
        pipe.set_state(Gst.State.PLAYING)
        p = Gst.Promise.new(); w.emit("set-remote-description", description(GstWebRTC.WebRTCSDPType.OFFER, cmd["sdp"]), p); wait(p)
        reply = wait_create("create-answer")
        answer = reply.get_value("answer")
        p = Gst.Promise.new(); w.emit("set-local-description", answer, p); wait(p)
        gathered()
        return {"sdp": w.get_property("local-description").sdp.as_text()}
    raise RuntimeError("unknown op " + op)

def wait_create(signal):
    p = Gst.Promise.new()
    w.emit(signal, None, p)
    return wait(p)

for line in sys.stdin:
    cmd = json.loads(line)
    if cmd["op"] == "quit":
        write({"state": "closed"})
        break
    try:
        write(handle(cmd))
    except Exception as e:
        write({"error": type(e).__name__ + ": " + str(e)})
if pipe is not None:
    pipe.set_state(Gst.State.NULL)
