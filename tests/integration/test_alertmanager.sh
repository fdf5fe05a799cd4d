# Alert delivery to a real Alertmanager (Debian's prometheus-alertmanager):
# gpulsed, reading GPUs through the fake NVML that replays the bundled
# H200 recording, evaluates a `for: 0s` rule on GPU utilization; the
# alerts must arrive in Alertmanager (read back through GET /api/v2/alerts)
# with the rule's labels, the external labels and the templated
# annotation, and Alertmanager must then see them resolve: its own
# webhook notification (to a local receiver) says "resolved" with an
# endsAt. The gpulse_notifications_* families count the deliveries.
# test-clock: real (the Go servers read the system clock, which the
# shifted-clock stages of make test cannot move)
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

AM_BIN=${ALERTMANAGER:-$(command -v prometheus-alertmanager || command -v alertmanager || true)}
[ -n "$AM_BIN" ] || fail "prometheus-alertmanager is not installed (scripts/install-deps.sh installs it)"

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# A webhook receiver for Alertmanager's own notifications: one JSON line
# per request, with the arrival time.
cat >"$WORK/receiver.py" <<'PY'
import http.server, json, sys, time
out, portfile = sys.argv[1], sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(out, "a") as f:
            f.write(json.dumps({"t": time.time(), "path": self.path, "body": json.loads(body)}) + "\n")
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(portfile, "w").write(str(s.server_address[1]))
s.serve_forever()
PY
python3 "$WORK/receiver.py" "$WORK/am-notifications.jsonl" "$WORK/recv.port" 2>"$WORK/receiver.log" &
PIDS+=($!)
wait_for '[ -s "$WORK/recv.port" ]' || fail "the receiver did not start"
RPORT=$(cat "$WORK/recv.port")

AMPORT=$(free_port)
mkdir -p "$WORK/am"
cat >"$WORK/am.yml" <<YML
route:
  receiver: hook
  group_by: [alertname]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: http://127.0.0.1:$RPORT/am
        send_resolved: true
YML
"$AM_BIN" --config.file="$WORK/am.yml" --storage.path="$WORK/am" \
	--web.listen-address="127.0.0.1:$AMPORT" --cluster.listen-address= --log.level=warn \
	2>"$WORK/alertmanager.log" &
PIDS+=($!)
AM="http://127.0.0.1:$AMPORT"
wait_for 'curl -sf --max-time 2 "$AM/-/ready" >/dev/null' || fail "Alertmanager did not become ready"

mkdir -p "$WORK/rules"
cat >"$WORK/rules/busy.yml" <<'YML'
groups:
  - name: gpu
    interval: 1s
    rules:
      - alert: GPUBusy
        expr: gpulse_gpu_utilization_ratio > 0.5
        for: 0s
        labels:
          severity: warning
        annotations:
          summary: "GPU {{ $labels.gpu }} is busy"
YML
cat >"$WORK/cfg.yml" <<YML
sampling:
  fast: 100ms
  normal: 200ms
  slow: 1s
rule_files: [rules/busy.yml]
alerting:
  resend_delay: 1s
  external_url: http://gpulse.test:9401
  external_labels:
    node: test-node
  alertmanagers:
    urls: ["$AM"]
    timeout: 2s
  retry_backoff: 100ms
  max_retry_backoff: 1s
YML

# At 8x, GPU utilization passes 50% about 3.7 s in and drops below it
# about 11 s in (the recording's phases: 29.6 s and 89.8 s).
export GPULSE_FAKE_NVML_RECORDING="$REC" GPULSE_FAKE_NVML_GPUS=2 GPULSE_FAKE_NVML_SPEED=8
start_daemon gpulsed --config "$WORK/cfg.yml" --nvml-library "$FAKE_NVML" --storage-path "$WORK/db"

am_alerts() { curl -sf --max-time 5 "$AM/api/v2/alerts"; }
# Both GPUs' alerts, as Alertmanager holds them.
for _ in $(seq 1 300); do
	n=$(am_alerts | python3 -c 'import json,sys; print(sum(1 for a in json.load(sys.stdin) if a["labels"].get("alertname")=="GPUBusy"))' 2>/dev/null || echo 0)
	[ "$n" = 2 ] && break
	sleep 0.1
done
[ "$n" = 2 ] || fail "Alertmanager holds $n GPUBusy alerts, wanted 2: $(am_alerts)"
am_alerts | python3 -c '
import json, sys, datetime
alerts = [a for a in json.load(sys.stdin) if a["labels"]["alertname"] == "GPUBusy"]
gpus = sorted(a["labels"]["gpu"] for a in alerts)
assert gpus == ["0", "1"], gpus
for a in alerts:
    l = a["labels"]
    assert l["severity"] == "warning", l
    assert l["node"] == "test-node", l                    # external label
    assert l["uuid"].startswith("GPU-"), l                # the series labels
    assert "__name__" not in l, l
    assert a["annotations"]["summary"] == "GPU %s is busy" % l["gpu"], a["annotations"]
    assert a["status"]["state"] == "active", a["status"]
    start = datetime.datetime.fromisoformat(a["startsAt"].replace("Z", "+00:00"))
    end = datetime.datetime.fromisoformat(a["endsAt"].replace("Z", "+00:00"))
    assert end > start, (start, end)                      # firing: endsAt ahead
    assert a.get("generatorURL", "").startswith("http://gpulse.test:9401/"), a
' || fail "GPUBusy alerts in Alertmanager are not as expected: $(am_alerts)"

# Resolution: Alertmanager notifies its receiver that the alerts resolved.
resolved() {
	python3 -c '
import json, sys
n = 0
for line in open(sys.argv[1]):
    b = json.loads(line)["body"]
    for a in b["alerts"]:
        if a["labels"].get("alertname") == "GPUBusy" and a["status"] == "resolved" and not a["endsAt"].startswith("0001"):
            n += 1
print(n)' "$WORK/am-notifications.jsonl" 2>/dev/null || echo 0
}
for _ in $(seq 1 400); do
	[ "$(resolved)" -ge 2 ] && break
	sleep 0.1
done
[ "$(resolved)" -ge 2 ] || fail "no resolved notification from Alertmanager: $(cat "$WORK/am-notifications.jsonl" 2>/dev/null)"
python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
firing = [l for l in lines if l["body"]["status"] == "firing"]
resolved = [l for l in lines if l["body"]["status"] == "resolved"]
assert firing and resolved, lines
assert firing[0]["t"] < resolved[-1]["t"]
assert firing[0]["body"]["commonLabels"]["node"] == "test-node"
' "$WORK/am-notifications.jsonl" || fail "Alertmanager notifications out of order"
# Resolved alerts leave Alertmanager's active list.
wait_for '[ "$(am_alerts | python3 -c "import json,sys; print(sum(1 for a in json.load(sys.stdin) if a[\"labels\"][\"alertname\"]==\"GPUBusy\"))")" = 0 ]' ||
	fail "resolved alerts still listed: $(am_alerts)"

sent=$(metric gpulse_notifications_sent_total 'type="alertmanager"')
[ -n "$sent" ] && [ "$sent" -ge 4 ] || fail "gpulse_notifications_sent_total: '$sent'"
[ "$(metric gpulse_notifications_dropped_total 'type="alertmanager"')" = 0 ] || fail "alerts dropped"
[ "$(metric gpulse_notifications_alertmanagers_discovered)" = 1 ] || fail "alertmanagers_discovered"
[ -n "$(metric gpulse_notifications_latency_seconds_count 'type="alertmanager"')" ] || fail "no latency histogram"
if command -v promtool >/dev/null; then
	fetch /metrics | promtool check metrics || fail "promtool check metrics"
fi
echo ok
