# aiortc as a WebRTC peer for the JSEP interop tests (Tests/InteropTests/JSEPInteropTests.swift)
# and scripts/make-fuzz-corpus. One JSON command per line on stdin, one JSON reply per line on
# stdout: {"op": "offer"} (audio and video tracks), {"op": "answer", "sdp": offer},
# {"op": "remote-answer", "sdp": answer}, {"op": "quit"}. Replies: {"sdp": ...}, {"state": ...}
# or {"error": ...}. Runs with .venv-interop/bin/python3 (scripts/install-deps).
import asyncio, json, sys
from aiortc import RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import AudioStreamTrack, VideoStreamTrack

def write(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

async def main():
    pc = RTCPeerConnection()
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
            else:
                write({"error": "unknown op " + op})
        except Exception as e:
            write({"error": type(e).__name__ + ": " + str(e)})
    await pc.close()

asyncio.run(main())
