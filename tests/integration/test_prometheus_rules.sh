# The rule pack in a real Prometheus (issue 4, item 8 b): Debian's
# `prometheus` scrapes gpulsed every second with deploy/rules/gpulse.rules.yml
# loaded, while gpulsed serves three GPUs through the fake NVML from one
# recorded row that crosses thresholds (memory 96 % full), with faults: XID
# 79, 48 and 13 on GPU 0, GPU 1 lost, and a call to GPU 2 stuck. Prometheus's /api/v1/alerts must
# show the pack's alerts for them, with the pack's labels, and no alert
# that the data does not call for.
#
# When gpulsed evaluates alerting rules itself (/api/v1/alerts answers), the
# same rule file loaded there must fire the same alert names and labels
# (Prometheus's job and instance aside) for the alerts whose inputs
# gpulsed keeps in its store (listed below). Skipped when prometheus is
# not installed.
# test-clock: real (the Go servers read the system clock, which the
# shifted-clock stages of make test cannot move)
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}" "${GPULSE_SOURCE_DIR:?}"

need prometheus
PACK="$GPULSE_SOURCE_DIR/deploy/rules/gpulse.rules.yml"

# One row of the bf16 tensor phase, memory used raised to 96 % of total.
python3 - "$REC" "$WORK/row.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head, body = rows[0], rows[1:]
t = head.index("t_s"); u = head.index("gpu_util")
row = next(x for x in body if float(x[t]) >= 1795965322.0 and float(x[u]) >= 90)
row[head.index("mem_used_mib")] = str(round(float(row[head.index("mem_total_mib")]) * 0.96, 3))
w = csv.writer(open(sys.argv[2], "w", newline=""), lineterminator="\n")
w.writerow(head); w.writerow(row)
PY

export GPULSE_FAKE_NVML_RECORDING="$WORK/row.csv" GPULSE_FAKE_NVML_SPEED=0 GPULSE_FAKE_NVML_GPUS=3
export GPULSE_FAKE_NVML_FAULTS="xid:gpu=0:at=1:code=79;xid:gpu=0:at=1:code=48;xid:gpu=0:at=1:code=13;lost:gpu=1:at=2;hang:nvmlDeviceGetPowerUsage:gpu=2:after=2"
cat >"$WORK/gpulse.yml" <<YML
rule_files: ["$PACK"]
rule_evaluation_interval: 1s
anomaly:
  warmup: 2s
YML
start_daemon src --config "$WORK/gpulse.yml" --nvml-library "$FAKE_NVML" --storage-path "$WORK/db"
wait_for '[ "$(metric gpulse_gpu_up gpu=\"1\")" = 0 ]' || fail "GPU 1 is not lost"
wait_for '[ "$(metric gpulse_gpu_stale gpu=\"2\")" = 1 ]' || fail "GPU 2 is not stuck"

PPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$WORK/prom.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ["$PACK"]
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

# Every rule of the pack loads and evaluates without error in Prometheus.
python3 - "$PROM" <<'PY' || fail "Prometheus did not load the pack cleanly"
import json, sys, time, urllib.request
prom = sys.argv[1]
deadline = time.time() + 60
while True:
    d = json.load(urllib.request.urlopen(prom + "/api/v1/rules", timeout=5))["data"]["groups"]
    rules = [r for g in d for r in g["rules"]]
    bad = [(r["name"], r.get("lastError")) for r in rules if r.get("health") == "err"]
    # Groups every minute first run at an offset of up to a minute: wait
    # only for the faster ones to have run.
    unknown = [r["name"] for g in d if g["interval"] < 60 for r in g["rules"]
               if r.get("health") == "unknown"]
    assert not bad, bad
    if len(rules) >= 50 and not unknown:
        break
    assert time.time() < deadline, ("rules never all evaluated", unknown)
    time.sleep(1)
print(f"prometheus: {len(rules)} rules in {len(d)} groups, all healthy")
PY

# The expected alerts: (name, labels that must match, allowed states).
cat >"$WORK/expect.py" <<'PY'
EXPECT = [
    ("GPUFallenOffBus", {"gpu": "0", "xid": "79", "severity": "critical"}, {"firing"}),
    ("GPUXidMemoryError", {"gpu": "0", "xid": "48", "severity": "critical"}, {"firing"}),
    ("GPUXidApplicationFault", {"gpu": "0", "xid": "13", "severity": "warning"}, {"firing"}),
    ("GPULost", {"gpu": "1", "severity": "critical"}, {"firing"}),
    # for: 30s: pending at first.
    ("GPUDown", {"gpu": "2", "severity": "critical"}, {"pending", "firing"}),
    # for: 2m and 1m: pending within the test's time, firing later.
    ("GPUMemoryHigh", {"gpu": "0", "severity": "warning"}, {"pending", "firing"}),
    ("GPUMemoryCritical", {"gpu": "0", "severity": "critical"}, {"pending", "firing"}),
]
# Alerts the data must not raise: GPU 1 is lost, not stuck; GPU 2 is
# stuck, not lost (and down, so not merely stale); GPU 0 answers.
FORBID = [("GPUDown", {"gpu": "0"}), ("GPUDown", {"gpu": "1"}), ("GPULost", {"gpu": "0"}),
          ("GPULost", {"gpu": "2"}), ("GPUXidError", {}), ("GPUXidHardwareError", {}),
          ("GPUTelemetryStale", {})]
PY

check_alerts() { # BASE WHO
	python3 - "$1" "$2" "$WORK" <<'PY'
import json, sys, time, urllib.request
base, who, work = sys.argv[1], sys.argv[2], sys.argv[3]
exec(open(work + "/expect.py").read())
deadline = time.time() + 90
def match(a, name, labels):
    return a["labels"].get("alertname") == name and all(a["labels"].get(k) == v for k, v in labels.items())
while True:
    alerts = json.load(urllib.request.urlopen(base + "/api/v1/alerts", timeout=5))["data"]["alerts"]
    missing = [(n, l) for n, l, states in EXPECT
               if not any(match(a, n, l) and a["state"] in states for a in alerts)]
    if not missing:
        break
    if time.time() > deadline:
        print(f"{who}: missing {missing}; got:", file=sys.stderr)
        for a in alerts:
            print("  ", a["state"], a["labels"], file=sys.stderr)
        sys.exit(1)
    time.sleep(1)
for n, l in FORBID:
    extra = [a for a in alerts if match(a, n, l)]
    assert not extra, (who, "unexpected", extra)
for a in alerts:
    lab = a["labels"]
    # The pack's contract: every alert says how bad it is and which GPU.
    assert lab.get("severity") in ("critical", "warning", "info"), (who, lab)
    assert "gpu" in lab and "uuid" in lab, (who, lab)
    assert a["annotations"].get("summary") and a["annotations"].get("runbook"), (who, a)
    assert "{{" not in a["annotations"]["summary"], (who, a["annotations"])
print(f"{who}: {len(alerts)} alerts, all expected ones present")
PY
}

check_alerts "$PROM" prometheus || fail "Prometheus did not fire the pack's alerts"

# The anomaly detector's scores: on /metrics for the GPU that answers (a
# frozen row: nothing unusual, so no GPUAnomaly above), in gpulsed's store
# for the edge's rules, and scraped by Prometheus under the same labels.
wait_for '[ -n "$(metric gpulse_anomaly_score gpu=\"0\" metric=\"power\")" ]' ||
	fail "no gpulse_anomaly_score on /metrics"
[ -z "$(metric gpulse_anomaly_score gpu=\"1\")" ] || fail "a score for the lost GPU 1 on /metrics"
# Its counters: values judged, scores stored, none refused.
[ "$(metric gpulse_anomaly_ticks_total)" -gt 0 ] || fail "gpulse_anomaly_ticks_total is not counting"
[ "$(metric gpulse_anomaly_scores_stored_total)" -gt 0 ] || fail "no anomaly score stored"
[ "$(metric gpulse_anomaly_store_errors_total)" = 0 ] || fail "the store refused anomaly scores"
python3 - "$URL" "$PROM" <<'PY' || fail "anomaly scores missing from the store or Prometheus"
import json, sys, time, urllib.parse, urllib.request
def q(base, expr):
    u = base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    return json.load(urllib.request.urlopen(u, timeout=5))["data"]["result"]
deadline = time.time() + 30
want = {"utilization", "power", "memory_used", "sm_clock", "temperature"}
while True:
    g = {r["metric"]["metric"] for r in q(sys.argv[1], 'gpulse_anomaly_score{gpu="0"}')}
    p = {r["metric"]["metric"] for r in q(sys.argv[2], 'gpulse_anomaly_score{gpu="0"}')}
    if g >= want and p >= want:
        break
    assert time.time() < deadline, ("store", g, "prometheus", p)
    time.sleep(1)
print("anomaly scores: in gpulsed's store and in Prometheus for", sorted(want))
PY

# gpulsed's own alert engine, on the same rule file: the expected alerts
# and none of the forbidden ones (its store holds what /metrics shows:
# gpulse_gpu_up 0 for the lost GPU, XID counters, throttle reasons), then
# the same names and labels as Prometheus for every expected alert.
check_alerts "$URL" gpulsed || fail "gpulsed did not fire the pack's alerts"
	python3 - "$URL" "$PROM" <<'PY' || fail "gpulsed and Prometheus fire different alerts"
import json, sys, time, urllib.request
url, prom = sys.argv[1], sys.argv[2]
names = ("GPUMemoryHigh", "GPUMemoryCritical", "GPUUtilizationHigh", "GPUFallenOffBus",
         "GPUXidMemoryError", "GPUXidApplicationFault", "GPULost", "GPUDown")
# GPUUtilizationHigh only on GPU 0: gpulsed stored 10 Hz samples of GPUs 1
# and 2 before they failed, where Prometheus scraped one or two, so their
# 5-minute averages differ by design.
pick = lambda labels: labels.get("alertname") in names and not (
    labels.get("alertname") == "GPUUtilizationHigh" and labels.get("gpu") != "0")
def alerts(base):
    got = json.load(urllib.request.urlopen(base + "/api/v1/alerts", timeout=5))["data"]["alerts"]
    return {tuple(sorted((k, v) for k, v in a["labels"].items() if k not in ("job", "instance")))
            for a in got if pick(a["labels"])}
# Both sides are polled until they agree (groups run at their own
# offsets, so one may be a few seconds behind the other).
deadline = time.time() + 60
while True:
    g, p = alerts(url), alerts(prom)
    if g == p and {dict(a)["alertname"] for a in g} >= set(names) - {"GPUUtilizationHigh"}:
        break
    assert time.time() < deadline, ("gpulsed", sorted(g), "prometheus", sorted(p))
    time.sleep(1)
print(f"gpulsed: the same {len(g)} alerts as Prometheus: {sorted(dict(a)['alertname'] for a in g)}")
PY
echo PASS
