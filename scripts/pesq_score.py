# Wideband PESQ (ITU-T P.862.2) of a degraded recording against its reference, for the speech
# playout tests: run with .venv-interop's python (numpy and pesq, from scripts/install-deps).
#   pesq_score.py REFERENCE DEGRADED MAX_DELAY_MS
# Both files are raw 16-bit little-endian mono PCM at 48 kHz. Each is low-passed (a Kaiser-windowed
# sinc, cut-off 7.6 kHz) and decimated by 3 to 16 kHz. The degraded one is then aligned: the lag
# (0 to MAX_DELAY_MS) at which it best matches the reference (cross-correlation) is cut from its
# start, and it is cut or padded with silence to the reference's length. PESQ itself follows the
# delay changes within the recording (time stretching) utterance by utterance.
# Prints one JSON line: {"pesq": score, "delay_ms": the lag cut}. Exits 1 with the reason on stderr.
import json, sys

try:
    import numpy as np
    from pesq import pesq
except ImportError as e:
    sys.exit("pesq_score.py: %s (run scripts/install-deps, which installs numpy and pesq into .venv-interop)" % e)


def to_16k(x):
    n = np.arange(-120, 121)
    cutoff = 7600.0 / 48000.0
    h = 2 * cutoff * np.sinc(2 * cutoff * n) * np.kaiser(len(n), 8.6)
    h /= h.sum()
    return np.convolve(x, h, mode="same")[::3]


ref_path, deg_path, max_delay_ms = sys.argv[1], sys.argv[2], float(sys.argv[3])
ref = to_16k(np.fromfile(ref_path, dtype="<i2").astype(np.float64))
deg = to_16k(np.fromfile(deg_path, dtype="<i2").astype(np.float64))
if len(ref) == 0 or len(deg) == 0:
    sys.exit("pesq_score.py: empty input (reference %d, degraded %d samples)" % (len(ref), len(deg)))
size = 1 << int(np.ceil(np.log2(len(ref) + len(deg))))
correlation = np.fft.irfft(np.fft.rfft(deg, size) * np.conj(np.fft.rfft(ref, size)), size)
max_lag = min(int(max_delay_ms * 16), len(deg) - 1)
lag = int(np.argmax(correlation[: max_lag + 1]))
deg = deg[lag : lag + len(ref)]
if len(deg) < len(ref):
    deg = np.concatenate([deg, np.zeros(len(ref) - len(deg))])
try:
    score = pesq(16000, ref.astype(np.float32), deg.astype(np.float32), "wb")
except Exception as e:
    sys.exit("pesq_score.py: PESQ failed: %s: %s" % (type(e).__name__, e))
print(json.dumps({"pesq": float(score), "delay_ms": lag / 16.0}))
