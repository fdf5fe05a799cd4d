# A closer look on trouble (issue 37, item 2): an alert of the evidence
# set fires on three GPUs of the fake NVML; the budget allows two an hour.
#  - the two GPUs within budget (0 and 1; GPU 2's alert waits 3 s) are raised to their ceiling and get
#    evidence (processes, the diagnosis of the window, the capture or why
#    none: GPU 0's process runs a stand-in of the injection library, and
#    is captured), served at /api/v1/evidence/ID and linked from the alert: the
#    delivered notice carries annotations.evidence = that URL;
#  - the third is refused by the budget: counted in
#    gpulse_evidence_budget_hits_total, said in the log and in the alert's
#    annotation, and it stays refused across resends (counted once);
#  - an alert outside the set takes no evidence;
#  - `gpulse alerts --evidence` lists the evidence;
#  - part 2: with no alert in the set, an anomaly score past
#    evidence.anomaly_score (the recording's idle-to-busy step) takes
#    evidence by itself, at once.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

mkdir -p "$WORK/rules" "$WORK/exec"
cat >"$WORK/hook.sh" <<SH
#!/bin/sh
n=\$(date +%s%N)
cat >"$WORK/exec/\$n.tmp" && mv "$WORK/exec/\$n.tmp" "$WORK/exec/\$n.json"
SH
chmod 700 "$WORK/hook.sh"
cat >"$WORK/rules/r.yml" <<'YML'
groups:
  - name: trouble
    interval: 1s
    rules:
      - alert: GPUTrouble
        expr: gpulse_gpu_power_watts{gpu!="2"} > 0
        for: 0s
        labels: {severity: warning}
        annotations: {summary: "GPU {{ $labels.gpu }} in trouble"}
      - alert: GPUTrouble
        expr: gpulse_gpu_power_watts{gpu="2"} > 0
        for: 3s
        labels: {severity: warning}
        annotations: {summary: "GPU {{ $labels.gpu }} in trouble"}
      - alert: GPUNoted
        expr: gpulse_gpu_power_watts{gpu="0"} > 0
        for: 0s
        labels: {severity: info}
YML
cat >"$WORK/g.yml" <<YML
sampling: {fast: 100ms, normal: 1s, slow: 5s}
rule_files: [rules/r.yml]
alerting:
  resend_delay: 1s
  exec:
    path: $WORK/hook.sh
    timeout: 5s
  group_by: [alertname, gpu]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
profiling:
  socket: "$WORK/run/inject.sock"
  idle_timeout: 1h
evidence:
  alerts: [GPUTrouble]
  capture_seconds: 1
  anomaly_score: 0
  raise_for: 1m
  settle: 2s
  per_gpu_per_hour: 1
  per_hour: 2
YML
# GPU 0's process: a stand-in of the injection library that answers a
# capture at once, started before gpulsed (the fake NVML is told its pid)
# and connecting once the socket is there (exec keeps the pid).
: "${GPULSE_BUILD_DIR:?}"
FAKE="$GPULSE_BUILD_DIR/tests/fake_inject_client"
[ -x "$FAKE" ] || fail "$FAKE is not built"
bash -c 'while [ ! -S "$1" ]; do sleep 0.05; done; exec "$2" "$1" basic' _ "$WORK/run/inject.sock" "$FAKE" \
	>"$WORK/client.out" 2>&1 &
CLIENT=$!
PIDS+=("$CLIENT")
export GPULSE_FAKE_NVML_PROCESSES="$CLIENT:2000:80:0"
export GPULSE_FAKE_NVML_RECORDING="$REC" GPULSE_FAKE_NVML_GPUS=3 GPULSE_FAKE_NVML_SPEED=1
start_daemon ev --config "$WORK/g.yml" --nvml-library "$FAKE_NVML"
wait_for '[ "$(metric gpulse_profile_clients)" = 1 ]' || fail "the stand-in did not connect"

# Two pieces of evidence, ready; the third GPU refused.
wait_list() {
	fetch /api/v1/evidence >"$WORK/list.json" 2>/dev/null &&
		python3 - "$WORK/list.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["data"]
ready = [e for e in d["evidence"] if e["state"] == "ready"]
sys.exit(0 if len(ready) == 2 else 1)
PY
}
for _ in $(seq 1 300); do wait_list && break; sleep 0.1; done
wait_list || fail "no two pieces of evidence ready: $(cat "$WORK/list.json")"
wait_for '[ "$(metric gpulse_evidence_budget_hits_total)" != "" ]' || fail "no budget hits family"
budget_hits() { fetch /metrics | awk '/^gpulse_evidence_budget_hits_total\{/ {s += $NF} END {print s + 0}'; }
# The third GPU's alert may fire after the first two are ready: waited for.
wait_for '[ "$(budget_hits)" -ge 1 ]' || fail "budget hits: $(budget_hits), want 1 (the third GPU, once)"
hits=$(budget_hits)
[ "$hits" = 1 ] || fail "budget hits: $hits, want 1 (the third GPU, once)"
[ "$(metric gpulse_evidence_captures_total 'result="taken"')" = 1 ] || fail "captures taken: $(metric gpulse_evidence_captures_total 'result="taken"')"
[ "$(metric gpulse_evidence_taken_total 'cause="alert"')" = 2 ] || fail "evidence taken: $(metric gpulse_evidence_taken_total 'cause="alert"')"
grep -q 'budget of 2 per hour is spent' "$WORK/ev.log" || fail "the budget hit was not said in the log"
# The raised GPUs read at their ceiling.
[ "$(metric gpulse_collector_moves_total 'cause="raise"')" -ge 2 ] || fail "no raise counted"
[ "$(metric gpulse_collector_gpus_moving)" -ge 2 ] || fail "the raised GPUs are not at their ceiling"

# Each piece of evidence: its GPU, the diagnosis windows, the capture's
# reason for being skipped (no process runs the injection library here).
python3 - "$URL" "$WORK/list.json" "$CLIENT" <<'PY' || fail "evidence documents"
import json, sys, urllib.request
url, lst = sys.argv[1], json.load(open(sys.argv[2]))["data"]["evidence"]
for e in lst:
    assert e["url"] == "/api/v1/evidence/" + e["id"], e
    with urllib.request.urlopen(url + e["url"], timeout=10) as r:
        d = json.load(r)["data"]
    assert d["id"] == e["id"] and d["gpu"] == e["gpu"] and d["cause"] == "alert", d
    assert d["detail"] == "GPUTrouble", d
    assert d["uuid"], d
    assert isinstance(d["diagnosis"]["windows"], list) and d["diagnosis"]["windows"], d["diagnosis"]
    assert d["diagnosis"]["windows"][0]["gpu"] == e["gpu"], d["diagnosis"]
    assert d["gather_seconds"] >= 2, d  # settle
    c = d["capture"]
    if d["gpu"] == 0:
        # The process owning the bottleneck, captured with the lasting
        # cost stated as `gpulse trace` states it.
        assert c["seconds"] == 1 and c["pid"] == int(sys.argv[3]), c
        assert "lasting_cost" in json.dumps(c["trace"]), c
        assert [p for p in d["processes"] if p["pid"] == c["pid"] and p["injected"]], d["processes"]
    else:
        assert "skipped" in c and "injection library" in c["skipped"] or c["skipped"] == "no process on the GPU", c
    print(e["id"], "gpu", d["gpu"], d["diagnosis"]["windows"][-1]["bottleneck"],
          json.dumps(c)[:120])
PY
code=$(curl -s -o /dev/null -w '%{http_code}' "$URL/api/v1/evidence/nope")
[ "$code" = 404 ] || fail "unknown evidence answered $code"

# The delivered notices link it: two with the URL, one with the budget's
# sentence; GPUNoted (not in the set) has no evidence annotation.
check_hook() {
	python3 - "$WORK/exec" "$WORK/list.json" <<'PY'
import glob, json, sys
ids = {str(e["gpu"]): e["id"] for e in json.load(open(sys.argv[2]))["data"]["evidence"]}
ann = {}
noted = None
for f in glob.glob(sys.argv[1] + "/*.json"):
    doc = json.load(open(f))
    for a in doc["alerts"]:
        if a["labels"]["alertname"] == "GPUNoted":
            noted = a["annotations"]
        elif a["status"] == "firing":
            ann[a["labels"]["gpu"]] = a["annotations"].get("evidence")
if len(ann) < 3 or noted is None:
    sys.exit(1)
assert "evidence" not in noted, noted
linked = {g: v for g, v in ann.items() if v and v.startswith("/api/v1/evidence/")}
refused = {g: v for g, v in ann.items() if v and "budget" in v}
assert len(linked) == 2 and len(refused) == 1 and "2" in refused, ann
for g, v in linked.items():
    assert v == "/api/v1/evidence/" + ids[g], (g, v, ids)
print("linked", linked, "refused", refused)
PY
}
for _ in $(seq 1 300); do check_hook && break; sleep 0.1; done
check_hook || fail "the delivered notices do not link the evidence: $(cat "$WORK"/exec/*.json)"

# The CLI lists it.
"$GPULSE" alerts --url "$URL" --evidence >"$WORK/cli.txt" || fail "gpulse alerts --evidence failed"
for id in $(python3 -c 'import json,sys; [print(e["id"]) for e in json.load(open(sys.argv[1]))["data"]["evidence"]]' "$WORK/list.json"); do
	grep -q "$id" "$WORK/cli.txt" || fail "gpulse alerts --evidence does not show $id: $(cat "$WORK/cli.txt")"
done
grep -q 'budget' "$WORK/cli.txt" || fail "gpulse alerts --evidence does not say the budget hit: $(cat "$WORK/cli.txt")"
kill "$DAEMON_PID"

# ---- part 2: an anomaly score alone -------------------------------------
cat >"$WORK/a.yml" <<YML
anomaly: {step: 200ms, halflife: 5s, warmup: 2s}
evidence:
  alerts: []
  anomaly_score: 6
  settle: 1s
  capture_seconds: 0
YML
unset GPULSE_FAKE_NVML_PROCESSES
export GPULSE_FAKE_NVML_GPUS=1
start_daemon an --config "$WORK/a.yml" --nvml-library "$FAKE_NVML"
for _ in $(seq 1 600); do
	[ "$(metric gpulse_evidence_taken_total 'cause="anomaly"')" = 1 ] && break
	sleep 0.1
done
[ "$(metric gpulse_evidence_taken_total 'cause="anomaly"')" = 1 ] ||
	fail "no evidence from the anomaly score: $(fetch /metrics | grep -E 'gpulse_anomaly_score|evidence')"
[ "$(metric gpulse_evidence_taken_total 'cause="alert"')" = 0 ] || fail "an alert took evidence with none in the set"
fetch /api/v1/evidence | python3 -c '
import json, sys
e = json.load(sys.stdin)["data"]["evidence"]
assert len(e) == 1 and e[0]["cause"] == "anomaly" and " score " in e[0]["detail"], e
print(e[0]["id"], e[0]["detail"])' || fail "the anomaly evidence entry"
[ "$(metric gpulse_collector_moves_total 'cause="raise"')" -ge 1 ] || fail "the anomaly did not raise the GPU"
echo PASS
