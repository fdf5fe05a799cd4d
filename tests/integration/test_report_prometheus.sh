# gpulse report capacity --prometheus: Debian's prometheus scrapes two
# gpulsed (two "hosts", replaying the H200 recording at different speeds)
# every second; the report over it has one host per `instance`, each with
# its GPU and its model, and each GPU's busy percentiles and idle time
# agree with figures computed here from the samples Prometheus holds.
# Skipped when prometheus is not installed.
# test-clock: real (the Go server reads the system clock, which the
# shifted-clock stages of make test cannot move)
source "$(dirname "$0")/lib.sh"

need prometheus

start_daemon a --replay "$REC" --replay-speed 1
PORT_A=$PORT
start_daemon b --replay "$REC" --replay-speed 6
PORT_B=$PORT
PPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$WORK/prom.yml" <<YML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: gpulse
    static_configs:
      - targets: ["127.0.0.1:$PORT_A", "127.0.0.1:$PORT_B"]
YML
prometheus --config.file="$WORK/prom.yml" --storage.tsdb.path="$WORK/prom" \
	--web.listen-address="127.0.0.1:$PPORT" --log.level=warn 2>"$WORK/prometheus.log" &
PIDS+=("$!")
PROM="http://127.0.0.1:$PPORT"
wait_for 'curl -sf "$PROM/-/ready" >/dev/null' || fail "prometheus did not start"
wait_for '[ "$(curl -s "$PROM/api/v1/query?query=sum(up)" | python3 -c "import json,sys; r=json.load(sys.stdin)[\"data\"][\"result\"]; print(r[0][\"value\"][1] if r else 0)")" = 2 ]' ||
	fail "prometheus does not scrape both gpulsed"
sleep 9
T=$(($(date +%s) - 1))
SPAN=8
"$GPULSE" report capacity --prometheus "$PROM" --until "$T" --since "${SPAN}s" --step 1s --format json \
	>"$WORK/fleet.json" || fail "report --prometheus"
curl -sf "$PROM/api/v1/query?query=gpulse_gpu_sm_active_ratio%5B$((SPAN + 1))s%5D&time=$T" >"$WORK/sm.json"
curl -sf "$PROM/api/v1/query?query=gpulse_gpu_utilization_ratio%5B$((SPAN + 1))s%5D&time=$T" >"$WORK/util.json"
python3 - "$WORK/fleet.json" "$WORK/sm.json" "$WORK/util.json" "$T" "$SPAN" "$PORT_A" "$PORT_B" <<'PY' ||
import json, math, sys
rep = json.load(open(sys.argv[1]))
T, span = int(sys.argv[4]), int(sys.argv[5])
start = T - span
hosts = {"127.0.0.1:" + sys.argv[6], "127.0.0.1:" + sys.argv[7]}
assert rep["source"]["kind"] == "prometheus", rep["source"]
assert {h["host"] for h in rep["hosts"]} == hosts, rep["hosts"]
assert {(m["host"], m["model"]) for m in rep["models"]} == {(h, "NVIDIA H200") for h in hosts}, rep["models"]
assert "raw samples" in rep["resolution"], rep["resolution"]
def slots(path):
    out = {}
    for s in json.load(open(path))["data"]["result"]:
        b = {}
        for t, v in s["values"]:
            t = float(t)
            if start <= t < T:
                b.setdefault(int(math.floor(t - start)), []).append(float(v))
        out[s["metric"]["instance"]] = {k: sum(v) / len(v) for k, v in b.items()}
    return out
sm, util = slots(sys.argv[2]), slots(sys.argv[3])
def nr(v, p):
    v = sorted(v)
    return v[max(1, math.ceil(p / 100 * len(v))) - 1]
assert len(rep["gpus"]) == 2, rep["gpus"]
for g in rep["gpus"]:
    h = g["host"]
    assert h in hosts and g["gpm"], g
    assert g["busy"]["slots"] == len(sm[h]), (h, g["busy"]["slots"], len(sm[h]))
    for p in ("p50", "p95", "p99"):
        assert abs(g["busy"][p] - nr(list(sm[h].values()), int(p[1:]))) < 1e-9, (h, p, g["busy"])
    idle = sum(1 for k in util[h] if util[h][k] < 0.05)
    assert abs(g["idle_h"] * 3600 - idle) < 1e-6, (h, g["idle_h"] * 3600, idle)
PY
	fail "the fleet report: $(head -c 3000 "$WORK/fleet.json")"
"$GPULSE" report capacity --prometheus "$PROM" --until "$T" --since "${SPAN}s" --step 1s >"$WORK/fleet.txt" ||
	fail "text report --prometheus"
grep -q "127.0.0.1:$PORT_A" "$WORK/fleet.txt" && grep -q "127.0.0.1:$PORT_B" "$WORK/fleet.txt" ||
	fail "the text report does not name both hosts: $(cat "$WORK/fleet.txt")"
echo ok
