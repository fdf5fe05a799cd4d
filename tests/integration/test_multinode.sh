# A fleet on one machine (issue 18, item 8): three gpulsed on loopback
# ports, each on the fake NVML with its own recording and fault, every
# GPU frozen at one row. Host a: the phases recording's bf16 phase (busy),
# GPM unsupported on GPU 1; host b: the mixed recording, Xid 79 on GPU 1;
# host c: GPU 0 on the phases recording and lost, GPU 1 on a copy running
# 40 C hotter. One Debian Prometheus scrapes all three and evaluates the
# rule pack (deploy/rules/gpulse.rules.yml, unchanged: the alerts expected
# here have `for: 0s`); one Alertmanager sends to a webhook receiver.
# Asserted: every host's GPUs are present centrally (gpulse_gpu_info and
# gpulse_gpu_up per instance); GPUFallenOffBus (host b, GPU 1) and
# GPULost (host c, GPU 0) reach the receiver exactly once each and no
# other GPU gets either; `gpulse fleet --prometheus URL` lists every GPU
# with the faulted ones flagged (down; degraded with the Xid and the
# firing alert), a bottleneck class for each GPU that answers (host a is
# scraped without the diagnosis's verdicts: its GPUs are classified from
# their samples and must get the class gpulsed gives them live), and the
# outliers that the documented rule (robust z over the GPUs of one model,
# |z| > 3.5 and the minimum distance) gives on the same series, host a's
# busy GPUs' power among them.
# test-clock: real (Prometheus and Alertmanager are Go and read the system clock)
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}" "${GPULSE_SOURCE_DIR:?}"
command -v prometheus >/dev/null || fail "prometheus is not installed (scripts/install-deps.sh installs it)"
PACK="$GPULSE_SOURCE_DIR/deploy/rules/gpulse.rules.yml"
MIXED="$GPULSE_TEST_DATA/recordings/h200-mixed-10hz.csv"

# The webhook receiver: every POST body, one JSON line each.
cat >"$WORK/receiver.py" <<'PY'
import http.server, json, sys
out, portfile = sys.argv[1], sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(out, "a") as f:
            f.write(json.dumps(json.loads(body)) + "\n")
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(portfile, "w").write(str(s.server_address[1]))
s.serve_forever()
PY
python3 "$WORK/receiver.py" "$WORK/hook.jsonl" "$WORK/recv.port" 2>"$WORK/receiver.log" &
PIDS+=($!)
wait_for '[ -s "$WORK/recv.port" ]' || fail "the receiver did not start"
: >"$WORK/hook.jsonl"

# One notification per alert and GPU: grouped by them, sent at once,
# never repeated within the test.
cat >"$WORK/am.yml" <<YML
route:
  receiver: hook
  group_by: [alertname, instance, gpu]
  group_wait: 1s
  group_interval: 1h
  repeat_interval: 4h
receivers:
  - name: hook
    webhook_configs:
      - url: http://127.0.0.1:$(cat "$WORK/recv.port")/hook
YML
start_alertmanager "$WORK/am.yml"

# Three hosts, each GPU frozen at its first row (GPULSE_FAKE_NVML_SPEED=0:
# the outliers then do not depend on when the test looks). Fault times are
# real seconds after each gpulsed's NVML init.
# A GPU that runs hot: the phases recording 40 C warmer.
python3 - "$REC" "$WORK/hot.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
t = rows[0].index("temp_c")
for r in rows[1:]:
    r[t] = str(float(r[t]) + 40)
csv.writer(open(sys.argv[2], "w", newline=""), lineterminator="\n").writerows(rows)
PY
# Host a's GPUs frozen inside the recording's bf16 tensor phase, busy.
python3 - "$REC" "$WORK/busy.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
t = rows[0].index("t_s")
pick = [r for r in rows[1:] if 1795965320.0 <= float(r[t]) <= 1795965330.0]
assert pick, "no rows in the bf16 phase"
csv.writer(open(sys.argv[2], "w", newline=""), lineterminator="\n").writerows([rows[0]] + pick)
PY
host() { # NAME RECORDINGS GPUS FAULTS
	GPULSE_FAKE_NVML_RECORDING="$2" GPULSE_FAKE_NVML_GPUS=$3 GPULSE_FAKE_NVML_SPEED=0 \
		GPULSE_FAKE_NVML_FAULTS="$4" start_daemon "$1" --nvml-library "$FAKE_NVML"
	HOSTS+=("$1=127.0.0.1:$PORT")
}
HOSTS=()
host a "$WORK/busy.csv" 2 "notsup:gpm:gpu=1"
host b "$MIXED" 2 "xid:gpu=1:at=1:code=79"
host c "$REC,$WORK/hot.csv" 2 "lost:gpu=0:at=2"
targets=""
for h in "${HOSTS[@]:1}"; do
	targets+="      - targets: [\"${h#*=}\"]
        labels: {host: ${h%%=*}}
"
done
cat >"$WORK/prom.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [$PACK]
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["${AM#http://}"]
scrape_configs:
  - job_name: gpulse
    static_configs:
$targets
  # Host a as an older gpulsed would be scraped: no diagnosis verdicts,
  # so gpulse fleet classifies its GPUs from their samples.
  - job_name: gpulse-nodiag
    static_configs:
      - targets: ["${HOSTS[0]#*=}"]
        labels: {host: a}
    metric_relabel_configs:
      - source_labels: [__name__]
        regex: gpulse_gpu_bottleneck|gpulse_gpu_diagnosis_finding
        action: drop
YML
start_prometheus "$WORK/prom.yml"

pq() { # EXPR -> the answer's result, as JSON
	curl -sf --max-time 5 --get --data-urlencode "query=$1" "$PROM/api/v1/query" |
		python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["data"]["result"]))'
}
# Every host's two GPUs, centrally.
wait_for '[ "$(pq "count by (instance) (gpulse_gpu_info)" | python3 -c "import json,sys; r=json.load(sys.stdin); print(sorted(int(x[\"value\"][1]) for x in r))")" = "[2, 2, 2]" ]' ||
	fail "Prometheus does not hold two GPUs from each of three hosts: $(pq 'count by (instance) (gpulse_gpu_info)')"
pq 'gpulse_gpu_up' | python3 -c '
import json, sys
r = json.load(sys.stdin)
hosts = {}
for s in r:
    hosts.setdefault(s["metric"]["host"], set()).add(s["metric"]["gpu"])
assert hosts == {"a": {"0", "1"}, "b": {"0", "1"}, "c": {"0", "1"}}, hosts
' || fail "gpulse_gpu_up is not there for every GPU of every host"

# The two alerts, each once, on the GPU that has the fault.
notified() { # ALERTNAME -> "host:gpu" of each firing notification, sorted
	python3 - "$WORK/hook.jsonl" "$1" <<'PY'
import json, sys
got = []
for line in open(sys.argv[1]):
    doc = json.loads(line)
    for a in doc["alerts"]:
        if a["status"] == "firing" and a["labels"]["alertname"] == sys.argv[2]:
            got.append(a["labels"]["host"] + ":" + a["labels"]["gpu"])
print(" ".join(sorted(got)))
PY
}
for _ in $(seq 1 300); do
	[ "$(notified GPUFallenOffBus)" = "b:1" ] && [ "$(notified GPULost)" = "c:0" ] && break
	sleep 0.1
done
[ "$(notified GPUFallenOffBus)" = "b:1" ] || fail "GPUFallenOffBus notified for [$(notified GPUFallenOffBus)], wanted b:1"
[ "$(notified GPULost)" = "c:0" ] || fail "GPULost notified for [$(notified GPULost)], wanted c:0"
# Prometheus resends firing alerts every evaluation: still once each
# after several more.
sleep 4
[ "$(notified GPUFallenOffBus)" = "b:1" ] || fail "GPUFallenOffBus notified again: [$(notified GPUFallenOffBus)]"
[ "$(notified GPULost)" = "c:0" ] || fail "GPULost notified again: [$(notified GPULost)]"

# gpulse fleet, as text and JSON, against the central Prometheus, once
# the diagnosis's first verdicts of hosts b and c have been scraped.
wait_for '[ "$(pq "count(gpulse_gpu_bottleneck{host=~\"b|c\", gpu!=\"0\"} == 1 or gpulse_gpu_bottleneck{host=\"b\"} == 1)" | python3 -c "import json,sys; r=json.load(sys.stdin); print(r[0][\"value\"][1] if r else 0)")" = 3 ]' ||
	fail "no diagnosis verdicts from hosts b and c: $(pq 'gpulse_gpu_bottleneck == 1')"
"$GPULSE" fleet --prometheus "$PROM" --since 30s >"$WORK/fleet.txt" 2>"$WORK/fleet.err" ||
	fail "gpulse fleet: $(cat "$WORK/fleet.err")"
"$GPULSE" fleet --prometheus "$PROM" --since 30s --json >"$WORK/fleet.json" 2>>"$WORK/fleet.err" ||
	fail "gpulse fleet --json: $(cat "$WORK/fleet.err")"
grep -q '^6 GPUs on 3 hosts' "$WORK/fleet.txt" || fail "fleet summary: $(tail -n1 "$WORK/fleet.txt")"
python3 - "$WORK/fleet.json" "$WORK/fleet.txt" "$PROM" "${HOSTS[@]}" <<'PY' || fail "gpulse fleet is wrong: $(cat "$WORK/fleet.txt")"
import json, sys, urllib.parse, urllib.request
doc = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
prom = sys.argv[3]
inst = dict(h.split("=", 1) for h in sys.argv[4:])
gpus = {(g["instance"], g["gpu"]): g for g in doc["gpus"]}
want = {(inst[h], i) for h in "abc" for i in "01"}
assert set(gpus) == want, sorted(gpus)
# Every GPU is a row of the text too, with its full UUID.
for g in doc["gpus"]:
    assert any(g["instance"] in l and g["uuid"] in l for l in text.splitlines()), g["uuid"]
lost, xid = gpus[(inst["c"], "0")], gpus[(inst["b"], "1")]
assert lost["health"] == "down" and lost["up"] is False, lost
assert "down" in lost["problems"] and "GPULost" in lost["alerts"], lost
assert xid["health"] == "degraded" and "xid_79" in xid["problems"], xid
assert "GPUFallenOffBus" in xid["alerts"], xid
for k, g in gpus.items():
    if k not in ((inst["c"], "0"), (inst["b"], "1")):
        assert "GPULost" not in g["alerts"] and "GPUFallenOffBus" not in g["alerts"], g
        assert g["up"] is True, g
        assert g["bottleneck"] in ("idle", "compute_bound", "memory_bound", "pcie_bound",
                                   "launch_bound", "input_starved", "mixed"), g
# Outliers: the documented rule on the same series, asked of Prometheus
# here. The two answers are a moment apart, so only clear cases must
# agree (|z| away from 3.5 by 1, distance away from the minimum by 10%).
def q(e):
    u = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": e})
    return json.load(urllib.request.urlopen(u, timeout=10))["data"]["result"]
figs = {"utilization": ("gpulse_gpu_utilization_ratio", 0.10), "power": ("gpulse_gpu_power_watts", 25),
        "sm_clock": ("gpulse_gpu_sm_clock_hertz", 100e6), "temperature": ("gpulse_gpu_temperature_celsius", 5)}
def median(v):
    v = sorted(v); n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
checked = 0
for name, (metric, min_abs) in figs.items():
    vals = {(s["metric"]["instance"], s["metric"]["gpu"]): float(s["value"][1])
            for s in q(f"avg_over_time({metric}[30s])")}
    if len(vals) < 3:
        continue
    med = median(vals.values())
    dev = [abs(x - med) for x in vals.values()]
    mad = median(dev)
    scale = mad / 0.6745 if mad > 0 else 1.2533 * sum(dev) / len(dev)
    for k, x in vals.items():
        z = (x - med) / scale if scale > 0 else 0
        mine = abs(z) > 3.5 and abs(x - med) >= min_abs
        clear = abs(abs(z) - 3.5) > 1 and abs(abs(x - med) - min_abs) > 0.1 * min_abs
        theirs = any(o["metric"] == name for o in gpus[k]["outliers"])
        if clear:
            checked += 1
            assert mine == theirs, (name, k, x, med, z, gpus[k]["outliers"])
assert checked >= 12, checked
# Host a's two busy GPUs among four idle ones draw far more power.
for i in "01":
    o = [x for x in gpus[(inst["a"], i)]["outliers"] if x["metric"] == "power"]
    assert o and o[0]["z"] > 3.5 and o[0]["value"] > o[0]["median"] + 25, gpus[(inst["a"], i)]
    assert "power" in [l for l in text.splitlines() if inst["a"] in l and l.split()[1] == i][0]
# Host a's GPUs: classified from their samples by the same diagnosis
# that gpulsed runs live (the recording is frozen, so the verdicts agree).
live = {}
for line in urllib.request.urlopen("http://" + inst["a"] + "/metrics", timeout=10).read().decode().splitlines():
    if line.startswith("gpulse_gpu_bottleneck{") and line.endswith(" 1"):
        lab = dict(kv.split("=", 1) for kv in line[line.index("{") + 1:line.rindex("}")].split(",") if "=" in kv)
        live[lab["gpu"].strip('"')] = lab["class"].strip('"')
for i in "01":
    g = gpus[(inst["a"], i)]
    assert g["bottleneck_source"] == "samples", g
    assert g["bottleneck"] == live[i], (g, live)
for h in "bc":
    for i in "01":
        g = gpus[(inst[h], i)]
        assert g["bottleneck_source"] == ("diagnosis" if g["up"] else None), g
print(f"fleet: 6 GPUs, faults flagged, {checked} outlier verdicts agree")
PY
cat "$WORK/fleet.txt"
echo PASS
