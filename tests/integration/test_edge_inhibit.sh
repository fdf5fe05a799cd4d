# The rule pack at the edge and centrally without double paging (issue 18,
# item 4; docs/ALERTS.md, "Edge and central"): gpulsed at the edge labels
# its alerts edge="true" (alerting.external_labels) and, by default,
# instance=HOSTNAME; a central Prometheus running the same pack sends the
# same alert with its scrape's instance and no edge label; Debian's
# Alertmanager, with the inhibit rule the docs give, suppresses the
# central copy of an alert the edge is sending (same alertname and uuid:
# a GPU's UUID is unique across the fleet) and lets a central alert the
# edge does not send through. Also: the annotation that reads
# $labels.instance says the host (not "on  is busy"), as the alert's
# labels do.
# test-clock: real (Alertmanager is Go and reads the system clock)
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

mkdir -p "$WORK/rules"
cat >"$WORK/am.yml" <<'YML'
route:
  receiver: none
  group_by: [alertname]
receivers:
  - name: none
inhibit_rules:
  # docs/ALERTS.md: the edge's alert silences the central copy.
  - source_matchers: ['edge="true"']
    target_matchers: ['edge!="true"']
    equal: [alertname, uuid]
YML
start_alertmanager "$WORK/am.yml"

cat >"$WORK/rules/busy.yml" <<'YML'
groups:
  - name: gpu
    interval: 1s
    rules:
      - alert: GPUBusy
        expr: gpulse_gpu_utilization_ratio > 0.5
        for: 0s
        annotations:
          summary: "GPU {{ $labels.gpu }} on {{ $labels.instance }} is busy"
YML
cat >"$WORK/cfg.yml" <<YML
rule_files: [rules/busy.yml]
alerting:
  resend_delay: 1s
  external_labels:
    edge: "true"
  alertmanagers:
    urls: ["$AM"]
  retry_backoff: 100ms
  max_retry_backoff: 1s
YML
export GPULSE_FAKE_NVML_RECORDING="$REC" GPULSE_FAKE_NVML_GPUS=2 GPULSE_FAKE_NVML_SPEED=8
start_daemon gpulsed --config "$WORK/cfg.yml" --nvml-library "$FAKE_NVML" --storage-path "$WORK/db"

am_alerts() { curl -sf --max-time 5 "$AM/api/v2/alerts"; }
for _ in $(seq 1 300); do
	n=$(am_alerts | python3 -c 'import json,sys; print(sum(1 for a in json.load(sys.stdin) if a["labels"].get("edge")=="true"))' 2>/dev/null || echo 0)
	[ "$n" = 2 ] && break
	sleep 0.1
done
[ "$n" = 2 ] || fail "Alertmanager holds $n edge alerts, wanted 2: $(am_alerts)"

python3 - "$AM" <<'PY' || fail "edge and central alerts are not as docs/ALERTS.md says: $(am_alerts)"
import datetime, json, socket, sys, time, urllib.request
am = sys.argv[1]
host = socket.gethostname()
def alerts():
    with urllib.request.urlopen(am + "/api/v2/alerts", timeout=5) as r:
        return json.load(r)
edge = [a for a in alerts() if a["labels"].get("edge") == "true"]
for a in edge:
    assert a["labels"]["instance"] == host, a["labels"]
    assert a["annotations"]["summary"] == f"GPU {a['labels']['gpu']} on {host} is busy", a["annotations"]
uuid = edge[0]["labels"]["uuid"]
# The central Prometheus's copy of the same alert, and one the edge does not send.
now = datetime.datetime.now(datetime.timezone.utc)
end = (now + datetime.timedelta(minutes=5)).isoformat()
central = [
    {"labels": {"alertname": "GPUBusy", "gpu": edge[0]["labels"]["gpu"], "uuid": uuid,
                "instance": host + ":9401", "job": "gpulse"}, "endsAt": end},
    {"labels": {"alertname": "GPUBusy", "gpu": "7", "uuid": "GPU-elsewhere",
                "instance": "other:9401", "job": "gpulse"}, "endsAt": end},
]
req = urllib.request.Request(am + "/api/v2/alerts", data=json.dumps(central).encode(),
                             headers={"Content-Type": "application/json"}, method="POST")
urllib.request.urlopen(req, timeout=5).read()
for _ in range(100):
    got = {a["labels"]["instance"]: a for a in alerts() if "edge" not in a["labels"]}
    if len(got) == 2 and got[host + ":9401"]["status"]["state"] == "suppressed":
        break
    time.sleep(0.1)
dup, other = got[host + ":9401"], got["other:9401"]
assert dup["status"]["state"] == "suppressed" and dup["status"]["inhibitedBy"], dup["status"]
assert other["status"]["state"] == "active" and not other["status"]["inhibitedBy"], other["status"]
for a in alerts():
    if a["labels"].get("edge") == "true":
        assert a["status"]["state"] == "active", a["status"]
print("central copy suppressed, edge alerts and the other central alert active")
PY
echo PASS
