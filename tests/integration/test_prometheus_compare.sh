# Conformance against a real Prometheus: Debian's `prometheus` scrapes
# gpulsed (replaying the H200 recording) every second for ~15 s, then the
# same query_range expressions go to both, and the answers must agree to
# a relative 1e-9.
#
# The two hold different samples of the same signal: gpulsed stores every
# update at its own time (10 Hz for the fast tier), Prometheus one scraped
# value per second at the scrape's time. So a step is compared only where
# both must hold the same value: gpulsed's raw samples of every metric the
# expression reads are constant from 2 s before the step to 0.5 s after it
# (covering the scrape's delay and /metrics' 50 ms cache), and Prometheus
# has a point there. Constant series (memory total, up) are compared at
# every step both answer. Labels are compared without job and instance,
# which only the scrape adds. Skipped when prometheus is not installed.
# test-clock: real (the Go servers read the system clock, which the
# shifted-clock stages of make test cannot move)
source "$(dirname "$0")/lib.sh"

need prometheus

start_daemon src --replay "$REC" --replay-speed 1 --storage-path "$WORK/db"
PPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$WORK/prom.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: gpulse
    static_configs:
      - targets: ["127.0.0.1:$PORT"]
YML
prometheus --config.file="$WORK/prom.yml" --storage.tsdb.path="$WORK/prom" \
	--web.listen-address="127.0.0.1:$PPORT" --log.level=warn 2>"$WORK/prometheus.log" &
PIDS+=("$!")
PROM="http://127.0.0.1:$PPORT"
wait_for 'curl -sf "$PROM/-/ready" >/dev/null' || fail "prometheus did not start"
wait_for '[ "$(curl -s "$PROM/api/v1/query?query=up" | python3 -c "import json,sys; r=json.load(sys.stdin)[\"data\"][\"result\"]; print(r[0][\"value\"][1] if r else 0)")" = 1 ]' ||
	fail "prometheus does not scrape gpulsed"
sleep 15

python3 - "$URL" "$PROM" <<'PY' || fail "gpulsed and Prometheus disagree"
import json, math, sys, time, urllib.parse, urllib.request
gp, pr = sys.argv[1], sys.argv[2]

def get(base, path, **params):
    url = base + path + "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as r:
        d = json.load(r)
    assert d["status"] == "success", (url, d)
    return d["data"]

end = math.floor(time.time()) - 1
start = end - 12
def key(m):
    return tuple(sorted((k, v) for k, v in m.items() if k not in ("job", "instance")))

# gpulsed's raw samples of each metric, to find the steps where it is constant.
raw = {}
def samples(metric):
    if metric not in raw:
        d = get(gp, "/api/v1/query", query=f"{metric}[30s]", time=end + 1)
        assert len(d["result"]) == 1, (metric, d)
        raw[metric] = [(float(t), float(v)) for t, v in d["result"][0]["values"]]
    return raw[metric]

def stable(metrics, t):
    for m in metrics:
        s = samples(m)
        before = [v for ts, v in s if ts <= t]
        win = [v for ts, v in s if t - 2 <= ts <= t + 0.5]
        if not before or len(set(win + before[-1:])) != 1:
            return False
    return True

cases = [
    # (expression, metrics it reads, compare only at stable steps)
    ("gpulse_gpu_memory_total_bytes", ["gpulse_gpu_memory_total_bytes"], False),
    ("sum by (gpu) (gpulse_gpu_memory_total_bytes) / 2^30", ["gpulse_gpu_memory_total_bytes"], False),
    ("count(gpulse_gpu_up)", ["gpulse_gpu_up"], False),
    ("max_over_time(gpulse_gpu_up[5s])", ["gpulse_gpu_up"], False),
    ("gpulse_gpu_temperature_celsius", ["gpulse_gpu_temperature_celsius"], True),
    ("gpulse_gpu_memory_used_bytes / gpulse_gpu_memory_total_bytes",
     ["gpulse_gpu_memory_used_bytes", "gpulse_gpu_memory_total_bytes"], True),
    ("gpulse_gpu_sm_clock_hertz / 1e6", ["gpulse_gpu_sm_clock_hertz"], True),
    ("avg by (model) (gpulse_gpu_power_watts) * 2", ["gpulse_gpu_power_watts"], True),
    ("clamp_max(gpulse_gpu_utilization_ratio, 0.5)", ["gpulse_gpu_utilization_ratio"], True),
]
total = 0
for expr, metrics, need_stable in cases:
    a = get(gp, "/api/v1/query_range", query=expr, start=start, end=end, step="1s")
    b = get(pr, "/api/v1/query_range", query=expr, start=start, end=end, step="1s")
    ga = {key(s["metric"]): dict((float(t), float(v)) for t, v in s["values"]) for s in a["result"]}
    pb = {key(s["metric"]): dict((float(t), float(v)) for t, v in s["values"]) for s in b["result"]}
    assert set(ga) == set(pb), (expr, list(ga), list(pb))
    n = 0
    for k, pts in pb.items():
        for t, v in pts.items():
            if t not in ga[k] or (need_stable and not stable(metrics, t)):
                continue
            w = ga[k][t]
            assert abs(v - w) <= 1e-9 * max(abs(v), abs(w), 1e-12), (expr, k, t, v, w)
            n += 1
    if not need_stable:
        assert n >= 8, (expr, n)
    print(f"{expr}: {n} steps agree")
    total += n
assert total >= 40, total
PY
echo PASS
