# aiortc as a data channel peer for Tests/InteropTests/DataChannelInteropTests.swift. One JSON
# command per line on stdin, one JSON reply per line on stdout.
#
# {"op": "offer", "label": L, "count": N, "prefix": P}: an offer with a data channel L that aiortc
# opens; once open it sends the N text messages P0 .. P(N-1).
# {"op": "answer", "sdp": offer, "count": N, "prefix": P}: answers an offer; on each channel the
# peer opens, aiortc sends the N messages P0 .. P(N-1).
# {"op": "remote-answer", "sdp": answer}.
# {"op": "stats", "expect": Q, "count": M}: {"state", "labels" (channels seen, comma-separated),
# "received" (messages received), "in_order" ("1" when they are exactly Q0 .. Q(M-1)), "sent",
# "binary_bytes" (the length of the last binary message), "last"}.
# {"op": "echo-binary", "size": S}: sends S bytes (byte i is i % 251) on the first channel.
# {"op": "quit"}.
#
# Replies: {"sdp": ...}, {"state": ...}, the stats fields, or {"error": ...}. Runs with
# .venv-interop/bin/python3 (scripts/install-deps).
import asyncio, json, sys
from aiortc import RTCPeerConnection, RTCSessionDescription

def write(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

class Channels:
    def __init__(self):
        self.channels = []
        self.received = []
        self.binary_bytes = 0
        self.sent = 0

    def watch(self, channel, count, prefix):
        self.channels.append(channel)

        @channel.on("message")
        def on_message(message):
            if isinstance(message, str):
                self.received.append(message)
            else:
                self.binary_bytes = len(message)
                ok = all(b == i % 251 for i, b in enumerate(message))
                self.received.append("binary:%d:%s" % (len(message), "ok" if ok else "bad"))

        def send_all():
            for i in range(count):
                channel.send("%s%d" % (prefix, i))
                self.sent += 1

        if channel.readyState == "open":
            send_all()
        else:
            channel.on("open", send_all)

async def main():
    pc = RTCPeerConnection()
    channels = Channels()
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
            count, prefix = int(cmd.get("count", "0")), cmd.get("prefix", "m")
            if op == "offer":
                channels.watch(pc.createDataChannel(cmd.get("label", "aiortc")), count, prefix)
                await pc.setLocalDescription(await pc.createOffer())
                write({"sdp": pc.localDescription.sdp})
            elif op == "answer":
                pc.on("datachannel", lambda channel: channels.watch(channel, count, prefix))
                await pc.setRemoteDescription(RTCSessionDescription(cmd["sdp"], "offer"))
                await pc.setLocalDescription(await pc.createAnswer())
                write({"sdp": pc.localDescription.sdp})
            elif op == "remote-answer":
                await pc.setRemoteDescription(RTCSessionDescription(cmd["sdp"], "answer"))
                write({"state": pc.signalingState})
            elif op == "echo-binary":
                channels.channels[0].send(bytes(i % 251 for i in range(int(cmd["size"]))))
                write({"state": "sent"})
            elif op == "stats":
                expect, n = cmd.get("expect", ""), int(cmd.get("count", "0"))
                texts = [m for m in channels.received if not m.startswith("binary:")]
                in_order = texts == ["%s%d" % (expect, i) for i in range(n)]
                write({"state": pc.connectionState,
                       "labels": ",".join(c.label for c in channels.channels),
                       "received": str(len(channels.received)),
                       "in_order": "1" if in_order else "0",
                       "sent": str(channels.sent),
                       "binary_bytes": str(channels.binary_bytes),
                       "last": channels.received[-1] if channels.received else ""})
            else:
                write({"error": "unknown op " + op})
        except Exception as e:
            write({"error": type(e).__name__ + ": " + str(e)})
    await pc.close()

asyncio.run(main())
