# Headless Chromium as a WebRTC peer for the JSEP interop tests and scripts/make-fuzz-corpus,
# driven over --remote-debugging-pipe (the DevTools protocol as NUL-terminated JSON on fds 3
# and 4), with a fake camera and microphone.
#   chromium_peer.py <profile directory> <page.html or http:// URL>
# One JSON command per line on stdin: {"op": name, "js": expression} evaluates the expression
# (awaited) in the page and replies {"sdp": its string value} or {"error": ...}; {"op": "quit"}.
# {"op": "screenshot", "path": file, "x", "y", "width", "height"} captures that part of the page
# as PNG into file and replies with its mean luma and the share of pixels that are not black,
# decoded here (zlib and the five PNG filters, 8-bit RGB or RGBA).
import base64, json, os, signal, struct, subprocess, sys, time, zlib
profile, page = sys.argv[1], sys.argv[2]
r_in, w_in = os.pipe()
r_out, w_out = os.pipe()
def child():
    a, b = os.dup(r_in), os.dup(w_out)
    os.dup2(a, 3)
    os.dup2(b, 4)
proc = subprocess.Popen(["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                         "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
                         "--autoplay-policy=no-user-gesture-required",
                         "--user-data-dir=" + profile, "about:blank"],
                        close_fds=False, preexec_fn=child, stdout=subprocess.DEVNULL, stderr=open(profile + ".log", "w"))
os.close(r_in)
os.close(w_out)
# Terminated (a test that timed out): take the browser along.
signal.signal(signal.SIGTERM, lambda *_: (proc.kill(), os._exit(1)))
wf, rf = os.fdopen(w_in, "wb"), os.fdopen(r_out, "rb")
buf, next_id = b"", 0

def write(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()

def call(method, params=None, session=None):
    global buf, next_id
    next_id += 1
    msg = {"id": next_id, "method": method, "params": params or {}}
    if session:
        msg["sessionId"] = session
    wf.write(json.dumps(msg).encode() + b"\0")
    wf.flush()
    while True:
        while b"\0" not in buf:
            chunk = rf.read1(65536)
            if not chunk:
                raise RuntimeError("chromium closed the pipe: " + open(profile + ".log").read()[-2000:])
            buf += chunk
        raw, buf = buf.split(b"\0", 1)
        m = json.loads(raw)
        if m.get("id") == next_id:
            if "error" in m:
                raise RuntimeError("DevTools error: " + json.dumps(m["error"]))
            return m["result"]

def png_pixels(data):
    # (width, height, channels, rows of bytes) of an 8-bit RGB or RGBA PNG without interlace.
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or color not in (2, 6) or interlace:
                raise RuntimeError("PNG depth %d colour %d interlace %d" % (depth, color, interlace))
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows, prev = zlib.decompress(idat), width * channels, [], bytearray(width * channels)
    for r in range(height):
        f, line = raw[r * (stride + 1)], bytearray(raw[r * (stride + 1) + 1:(r + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return width, height, channels, rows

def screenshot(cmd, session):
    clip = {k: float(cmd[k]) for k in ("x", "y", "width", "height")}
    clip["scale"] = 1
    png = base64.b64decode(call("Page.captureScreenshot", {"format": "png", "clip": clip}, session)["data"])
    with open(cmd["path"], "wb") as f:
        f.write(png)
    width, height, channels, rows = png_pixels(png)
    total, lit, count = 0.0, 0, width * height
    for line in rows:
        for i in range(0, len(line), channels):
            y = 0.299 * line[i] + 0.587 * line[i + 1] + 0.114 * line[i + 2]
            total += y
            lit += y > 16
    return {"mean_luma": "%.2f" % (total / count), "not_black": "%.4f" % (lit / count),
            "width": str(width), "height": str(height)}

try:
    targets = call("Target.getTargets")["targetInfos"]
    target = next(t for t in targets if t["type"] == "page")
    session = call("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})["sessionId"]
    url = page if page.startswith("http://") else "file://" + page
    call("Page.navigate", {"url": url}, session)
    for _ in range(200):
        state = call("Runtime.evaluate", {"expression": "location.protocol + document.readyState", "returnByValue": True}, session)
        if state["result"].get("value") == url.split("//")[0] + "complete":
            break
        time.sleep(0.05)
    else:
        raise RuntimeError("the page did not load")
except Exception as e:
    write({"error": str(e)})
    proc.kill()
    sys.exit(1)

for line in sys.stdin:
    cmd = json.loads(line)
    if cmd["op"] == "quit":
        write({"state": "closed"})
        break
    try:
        if cmd["op"] == "screenshot":
            write(screenshot(cmd, session))
            continue
        res = call("Runtime.evaluate", {"expression": cmd["js"], "awaitPromise": True, "returnByValue": True}, session)
        if "exceptionDetails" in res:
            write({"error": res["exceptionDetails"].get("exception", {}).get("description", json.dumps(res["exceptionDetails"]))})
        else:
            write({"sdp": str(res["result"].get("value"))})
    except Exception as e:
        write({"error": str(e)})
try:
    call("Browser.close")
except Exception:
    pass
proc.wait(timeout=10)
