# GStreamer's webrtcbin (bundle-policy max-bundle, Opus and VP8 test signals) as a WebRTC peer
# for the JSEP interop tests and scripts/make-fuzz-corpus, through PyGObject (system python3).
# Same JSON-lines commands as aiortc_peer.py: offer, answer, remote-answer, quit.
import json, sys
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

pipe = Gst.parse_launch(PIPELINE)
w = pipe.get_by_name("w")

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
pipe.set_state(Gst.State.NULL)
