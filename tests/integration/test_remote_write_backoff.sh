# Remote write against a receiver that answers 503 (a small python3
# http.server): the sender retries with back-off, min_backoff doubling to
# max_backoff, so the requests it makes in a measured window are bounded
# by that schedule; and neither of remote write's threads spins, so
# gpulsed's CPU over the window stays a small fraction of a core, while
# failing and once the receiver is healthy again. (A condition variable
# waited on with a deadline on the wrong clock times out at once: the
# batcher and the sender then loop, about two cores, and the sender
# retries thousands of times a second.)
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

MIN_MS=30
MAX_MS=5000
WINDOW_S=5
CPU_MAX=0.20   # of one core: gpulsed on one fake GPU needs a few percent

# The receiver: every POST's arrival (CLOCK_MONOTONIC, as time.monotonic
# reads it) appended to a file; 503 until the file "healthy" exists, then
# 204. It writes its port once it listens.
cat >"$WORK/recv.py" <<'PY'
import http.server, os, sys, time
work = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        with open(os.path.join(work, "posts"), "a") as f:
            f.write("%.6f\n" % time.monotonic())
        self.send_response(204 if os.path.exists(os.path.join(work, "healthy")) else 503)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(os.path.join(work, "port.tmp"), "w") as f:
    f.write(str(s.server_address[1]))
os.rename(os.path.join(work, "port.tmp"), os.path.join(work, "port"))
s.serve_forever()
PY
: >"$WORK/posts"
python3 "$WORK/recv.py" "$WORK" 2>"$WORK/recv.log" &
PIDS+=("$!")
wait_for '[ -s "$WORK/port" ]' || fail "the receiver did not start"
RPORT=$(cat "$WORK/port")

cat >"$WORK/gpulse.yml" <<YML
storage:
  path: $WORK/db
remote_write:
  - url: http://127.0.0.1:$RPORT/api/v1/write
    name: flaky
    queue_config:
      batch_send_deadline: 200ms
      min_backoff: ${MIN_MS}ms
      max_backoff: ${MAX_MS}ms
YML
export GPULSE_FAKE_NVML_RECORDING="$REC" GPULSE_FAKE_NVML_GPUS=1
start_daemon rw --config "$WORK/gpulse.yml" --nvml-library "$FAKE_NVML"
wait_for '[ -s "$WORK/posts" ]' || fail "no request reached the receiver"

TCK=$(getconf CLK_TCK)
# cpu_s: user + system CPU seconds of gpulsed, every thread
# (/proc/PID/stat fields 14 and 15, counted after the command's name).
cpu_s() { awk -v t="$TCK" '{ sub(/^.*\) /, ""); split($0, f, " "); printf "%.3f", (f[12] + f[13]) / t }' "/proc/$DAEMON_PID/stat"; }
now_s() { python3 -c 'import time; print("%.6f" % time.monotonic())'; }

# check_cpu LABEL C0 T0 C1 T1: the share of one core over the window.
check_cpu() {
	python3 - "$@" "$CPU_MAX" <<'PY' || fail "$1: gpulsed's CPU over the window"
import sys
label, c0, t0, c1, t1, cap = sys.argv[1], *map(float, sys.argv[2:])
share = (c1 - c0) / (t1 - t0)
print("%s: %.3f s CPU in %.2f s wall = %.1f%% of one core (at most %.0f%%)"
      % (label, c1 - c0, t1 - t0, 100 * share, 100 * cap))
sys.exit(0 if share <= cap else 1)
PY
}

# The failing receiver over a measured window.
c0=$(cpu_s); t0=$(now_s)
sleep "$WINDOW_S"
c1=$(cpu_s); t1=$(now_s)
cp "$WORK/posts" "$WORK/posts.503"

# The k-th retry comes no sooner than the sum of the k back-offs before it
# (min, 2 min, 4 min, ... capped at max), counted from the first request:
# in an elapsed time E at most 1 + K requests, K the largest k whose sum
# is <= E. Checked at every request, so at the end of the window too.
python3 - "$WORK/posts.503" "$MIN_MS" "$MAX_MS" "$t1" <<'PY' || fail "requests to the failing receiver outran the back-off"
import sys
posts = [float(l) for l in open(sys.argv[1]) if l.strip()]
lo, hi, end = float(sys.argv[2]) / 1000, float(sys.argv[3]) / 1000, float(sys.argv[4])
def allowed(elapsed):
    k, total, b = 0, 0.0, lo
    while total + b <= elapsed:
        total += b
        k += 1
        b = min(2 * b, hi)
    return 1 + k
first = posts[0]
for i, t in enumerate(posts):
    if i + 1 > allowed(t - first):
        sys.exit("request %d came %.3f s after the first: at most %d by then (%d requests in %.2f s)"
                 % (i + 1, t - first, allowed(t - first), len(posts), end - first))
print("%d requests in %.2f s since the first (the back-off allows %d)"
      % (len(posts), end - first, allowed(end - first)))
if len(posts) > allowed(end - first):
    sys.exit("too many requests")
PY

check_cpu "receiver answering 503" "$c0" "$t0" "$c1" "$t1"

# The receiver recovers: the queue drains, and the threads idle.
touch "$WORK/healthy"
wait_for '[ "$(metric prometheus_remote_storage_samples_total "remote_name=\"flaky\"")" != 0 ]' ||
	fail "nothing delivered after the receiver recovered"
c0=$(cpu_s); t0=$(now_s)
sleep "$WINDOW_S"
c1=$(cpu_s); t1=$(now_s)
check_cpu "healthy receiver" "$c0" "$t0" "$c1" "$t1"
echo "PASS"
