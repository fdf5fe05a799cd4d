#!/usr/bin/env bash
# Alert latency: from the first sample that meets a `for: 0s` condition
# to Alertmanager's receipt of the alert, over several trials, for gpulsed
# evaluating at 1 s with a real Alertmanager (Debian's
# prometheus-alertmanager) on loopback. The GPUs are the fake NVML
# replaying the bundled H200 recording at 4x on 8 GPUs (each shifted in
# time), so utilization crosses 50 % every few seconds. Each GPU gives
# only its first few trials: the engine's flap detection holds an alert
# that toggles more than 4 times in 10 minutes (by design), so later
# edges of that GPU raise no new alert and are not counted. Receipt is Alertmanager's own clock: the updatedAt it
# stamps on an alert when a POST delivers it (the first one, before any
# resend). The first qualifying sample is read back from gpulsed's store
# (the samples of gpulse_gpu_utilization_ratio, stamped when collected).
# Anchor, same run: the round trip of one POST /api/v2/alerts to the same
# Alertmanager (curl). Also printed: the delivery part alone (gpulsed's
# gpulse_notifications_latency_seconds: engine hands over -> 2xx) and the
# documented dcgm-exporter + Prometheus path computed from its intervals.
# Usage: bench/alert_latency.sh [BUILD_DIR] [TRIALS]
set -euo pipefail
BUILD=${1:-build}
TRIALS=${2:-10}
SRC=$(cd "$(dirname "$0")/.." && pwd)
REC=${GPULSE_RECORDING:-$SRC/data/recordings/h200-phases-10hz.csv}
GPULSED=$BUILD/gpulsed
FAKE=$BUILD/fake_nvml/libnvidia-ml.so.1
AM_BIN=$(command -v prometheus-alertmanager || command -v alertmanager || true)
[ -x "$GPULSED" ] && [ -f "$FAKE" ] || { echo "build first: $GPULSED, $FAKE" >&2; exit 1; }
[ -n "$AM_BIN" ] || { echo "prometheus-alertmanager not found" >&2; exit 1; }
WORK=$(mktemp -d /tmp/gpulse-alert-latency.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

AMPORT=$(free_port)
printf 'route: {receiver: "null"}\nreceivers: [{name: "null"}]\n' >"$WORK/am.yml"
"$AM_BIN" --config.file="$WORK/am.yml" --storage.path="$WORK/am" --web.listen-address="127.0.0.1:$AMPORT" \
	--cluster.listen-address= --log.level=warn 2>"$WORK/am.log" &
PIDS+=($!)
AM=http://127.0.0.1:$AMPORT
for _ in $(seq 1 100); do curl -sf "$AM/-/ready" >/dev/null && break; sleep 0.1; done

mkdir -p "$WORK/rules"
cat >"$WORK/rules/busy.yml" <<'YML'
groups:
  - name: latency
    rules:
      - alert: GPUBusy
        expr: gpulse_gpu_utilization_ratio > 0.5
        for: 0s
YML
cat >"$WORK/cfg.yml" <<YML
rule_files: [rules/busy.yml]
rule_evaluation_interval: 1s
alerting:
  alertmanagers:
    urls: ["$AM"]
YML
START=$(date +%s.%N)
: >"$WORK/gpulsed.log"
GPULSE_FAKE_NVML_RECORDING="$REC" GPULSE_FAKE_NVML_GPUS=8 GPULSE_FAKE_NVML_SPEED=4 \
	"$GPULSED" --listen 127.0.0.1:0 --config "$WORK/cfg.yml" --nvml-library "$FAKE" \
	--storage-path "$WORK/db" 2>"$WORK/gpulsed.log" &
PIDS+=($!)
PORT=""
for _ in $(seq 1 100); do
	PORT=$(sed -n 's/.*serving http:\/\/.* port \([0-9]*\) .*/\1/p' "$WORK/gpulsed.log" | head -n1)
	[ -n "$PORT" ] && break
	sleep 0.1
done
[ -n "$PORT" ] || { cat "$WORK/gpulsed.log" >&2; exit 1; }

# Anchor: 20 direct POSTs of one alert to the same Alertmanager.
anchor=$(for i in $(seq 1 20); do
	curl -s -o /dev/null -w '%{time_total}\n' -H 'Content-Type: application/json' \
		--data "[{\"labels\":{\"alertname\":\"Anchor\",\"i\":\"$i\"}}]" "$AM/api/v2/alerts"
done | sort -n | sed -n 10p)

python3 - "$AM" "http://127.0.0.1:$PORT" "$TRIALS" "$anchor" "$START" <<'PY'
import json, sys, time, urllib.request, urllib.parse, datetime, statistics
am, gp, trials, anchor = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
start = float(sys.argv[5])
def get(url):
    return json.load(urllib.request.urlopen(url, timeout=5))
def ts(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
seen, rows = set(), []
deadline = time.time() + 60 + trials * 15
while len(rows) < trials and time.time() < deadline:
    for a in get(am + "/api/v2/alerts?filter=" + urllib.parse.quote('alertname="GPUBusy"')):
        key = (a["fingerprint"], a["startsAt"])
        if key in seen or a["status"]["state"] != "active":
            continue
        seen.add(key)
        receipt = ts(a["updatedAt"])
        q = urllib.parse.quote('gpulse_gpu_utilization_ratio{gpu="%s"}[60s]' % a["labels"]["gpu"])
        vals = get(gp + "/api/v1/query?query=" + q + "&time=%.3f" % receipt)["data"]["result"][0]["values"]
        first = None
        for t, v in vals:                      # the first sample of the last run above 0.5
            if float(v) > 0.5:
                first = t if first is None else first
            else:
                first = None
        if first is None or first < start + 3:  # the daemon's first seconds: not a clean trial
            continue
        rows.append((receipt - first, ts(a["startsAt"]) - first, receipt - ts(a["startsAt"])))
        print("trial %2d (gpu %s): sample -> Alertmanager %.3f s (sample -> evaluation time %.3f s, "
              "evaluation time -> receipt %.3f s)" % (len(rows), a["labels"]["gpu"], *rows[-1]))
    time.sleep(0.01)
if not rows:
    sys.exit("no trials")
lat = [r[0] for r in rows]
m = {}
for line in urllib.request.urlopen(gp + "/metrics").read().decode().splitlines():
    if line.startswith("gpulse_notifications_latency_seconds_sum") or line.startswith("gpulse_notifications_latency_seconds_count"):
        m[line.split("{")[0]] = float(line.split()[-1])
deliv = m.get("gpulse_notifications_latency_seconds_sum", 0) / max(m.get("gpulse_notifications_latency_seconds_count", 1), 1)
print()
print("trials %d: median %.3f s, max %.3f s, min %.3f s" % (len(lat), statistics.median(lat), max(lat), min(lat)))
print("goal: <= evaluation interval + 100 ms = 1.100 s; median/goal %.2f, max/goal %.2f" %
      (statistics.median(lat) / 1.1, max(lat) / 1.1))
print("delivery alone (engine hands over -> Alertmanager 2xx, mean of %d): %.4f s" %
      (m.get("gpulse_notifications_latency_seconds_count", 0), deliv))
print("anchor: one POST /api/v2/alerts round trip (median of 20): %.4f s; delivery/anchor %.1f" %
      (anchor, deliv / anchor if anchor > 0 else float("nan")))
for name, c, s, e in (("dcgm-exporter + Prometheus defaults", 30, 60, 60),
                      ("dcgm-exporter + Prometheus typical (15 s)", 30, 15, 15)):
    print("%s: collect %d s, scrape %d s, evaluate %d s -> expected %.1f s, worst %d s; "
          "ratio to gpulse median %.0fx, worst/max %.0fx" %
          (name, c, s, e, (c + s + e) / 2, c + s + e, (c + s + e) / 2 / statistics.median(lat),
           (c + s + e) / max(lat)))
PY
echo
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) cores, $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
