# Headless Chromium as a WebRTC peer for the JSEP interop tests and scripts/make-fuzz-corpus,
# driven over --remote-debugging-pipe (the DevTools protocol as NUL-terminated JSON on fds 3
# and 4), with a fake camera and microphone.
#   chromium_peer.py <profile directory> <page.html>
# One JSON command per line on stdin: {"op": name, "js": expression} evaluates the expression
# (awaited) in the page and replies {"sdp": its string value} or {"error": ...}; {"op": "quit"}.
import json, os, signal, subprocess, sys, time
profile, page = sys.argv[1], sys.argv[2]
r_in, w_in = os.pipe()
r_out, w_out = os.pipe()
def child():
    a, b = os.dup(r_in), os.dup(w_out)
    os.dup2(a, 3)
    os.dup2(b, 4)
proc = subprocess.Popen(["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                         "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
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

try:
    targets = call("Target.getTargets")["targetInfos"]
    target = next(t for t in targets if t["type"] == "page")
    session = call("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})["sessionId"]
    call("Page.navigate", {"url": "file://" + page}, session)
    for _ in range(200):
        state = call("Runtime.evaluate", {"expression": "location.protocol + document.readyState", "returnByValue": True}, session)
        if state["result"].get("value") == "file:complete":
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
