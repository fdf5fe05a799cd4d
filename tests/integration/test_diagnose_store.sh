# The diagnosis kept in the store: gpulsed with storage writes every live
# window's verdict as gpulse_gpu_bottleneck{class} (and findings, headroom)
# into the store, where PromQL reads it; asked for more than the live
# history holds, /api/v1/diagnosis answers from the stored verdicts, with
# the class changes and their evidence; the verdicts survive a restart;
# too many windows are refused with the window that would do.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

cat >"$WORK/diag.yml" <<YML
sampling:
  fast: 100ms
  normal: 500ms
diagnosis:
  window: 1s
  history: 10s
storage:
  path: $WORK/store.db
  flush_interval: 1s
YML
export GPULSE_FAKE_NVML_RECORDING="$REC" GPULSE_FAKE_NVML_SPEED=1
started=$(date +%s.%N)
start_daemon store --config "$WORK/diag.yml" --nvml-library "$FAKE_NVML"

# Verdicts reach the store: exactly one class is 1 at any time.
wait_for '[ "$(fetch "/api/v1/query?query=count(gpulse_gpu_bottleneck)" | python3 -c "import json,sys; r=json.load(sys.stdin)[\"data\"][\"result\"]; print(r[0][\"value\"][1] if r else 0)")" = 7 ]' ||
	fail "no stored gpulse_gpu_bottleneck: $(fetch '/api/v1/query?query=gpulse_gpu_bottleneck')"
# More than the 10 s held in memory: from the store.
sleep 14
check_store() {
	fetch "/api/v1/diagnosis?gpu=0&since=$1&window=$2" | python3 -c '
import json, sys
d = json.load(sys.stdin)["data"]
assert d["source"] == "store", d["source"]
w = d["windows"]
assert len(w) >= int(sys.argv[1]), len(w)
classes = {"idle", "compute_bound", "memory_bound", "pcie_bound", "launch_bound", "input_starved", "mixed"}
for x in w:
    for k in ("start_s", "end_s", "gpu", "bottleneck", "findings", "evidence", "advice"):
        assert k in x, k
    assert x["bottleneck"] in classes, x["bottleneck"]
    # A window is cut to its data, never longer than asked.
    assert 0 < x["end_s"] - x["start_s"] <= float(sys.argv[2]) + 1e-6, x
    assert x["samples"] is None and x["stored_windows"] >= 1, x
    assert x["evidence"], "no evidence"
    shares = [e["value"] for e in x["evidence"] if e["stat"] == "share_of_windows" and e["name"] in classes]
    assert abs(sum(shares) - 1) < 1e-9, shares
t = d["transitions"]
assert t and t[0]["gpu"] == 0 and t[0]["windows"], t
for x in t[0]["windows"]:
    assert x["bottleneck"] in classes and x["evidence"]
' "$3" "$2" || fail "/api/v1/diagnosis since=$1 window=$2"
}
check_store 20s 5 2
check_store 30s 1 10

# The stored verdicts agree with the live ones over the live history.
live=$(fetch "/api/v1/diagnosis?gpu=0&since=8s&window=1" | python3 -c '
import json, sys
d = json.load(sys.stdin)["data"]
assert d["source"] == "memory"
print(" ".join("%d:%s" % (round(x["end_s"]), x["bottleneck"]) for x in d["windows"]))')
stored=$(fetch "/api/v1/diagnosis?gpu=0&since=12s&window=1" | python3 -c '
import json, sys
d = json.load(sys.stdin)["data"]
print(" ".join("%d:%s" % (round(x["end_s"]), x["bottleneck"]) for x in d["windows"]))')
agree=0
for v in $live; do
	case " $stored " in *" $v "*) agree=$((agree + 1)) ;; esac
done
[ "$agree" -ge 3 ] || fail "stored verdicts do not match the live ones: live [$live] stored [$stored]"

code=$(curl -s -o "$WORK/bad.json" -w '%{http_code}' "$URL/api/v1/diagnosis?since=30d&window=1s")
[ "$code" = 400 ] || fail "too many windows gave HTTP $code"
grep -q 'ask for a window of at least' "$WORK/bad.json" || fail "too many windows: $(cat "$WORK/bad.json")"

# A range far wider than the history: the windows keep to the data (none
# starts before gpulsed did or ends after the request), the summary's
# seconds are the history's, and each window's numbers are its class's.
asked=$(date +%s.%N)
fetch "/api/v1/diagnosis?gpu=0&since=1d" >"$WORK/day.json"
python3 - "$WORK/day.json" "$started" "$asked" <<'PY' || fail "since=1d: $(head -c 3000 "$WORK/day.json")"
import json, sys, time
d = json.load(open(sys.argv[1]))["data"]
started, asked, answered = float(sys.argv[2]), float(sys.argv[3]), time.time()
w = d["windows"]
assert d["source"] == "store" and d["window_s"] == 120 and w, (d["source"], d["window_s"])
assert w[0]["start_s"] >= started - 1.5, (w[0]["start_s"], started)  # a 1-s live window
assert w[-1]["end_s"] <= answered, (w[-1]["end_s"], answered)
span = sum(x["end_s"] - x["start_s"] for x in w)
assert span <= answered - started + 1, (span, answered - started)
assert d["summary"][0]["seconds"] <= answered - started + 1, d["summary"]
for x in w:
    # All of its stored windows are counted, none twice.
    assert x["stored_windows"] <= (x["end_s"] - x["start_s"]) / 1 + 1, x
    if x["bottleneck"] == "idle":
        assert "nothing runs" in x["advice"], x["advice"]
PY
"$GPULSE" diagnose --url "$URL" --gpu 0 --since 10m >"$WORK/cli10m.txt" || fail "gpulse diagnose --since 10m"
python3 - "$WORK/cli10m.txt" <<'PY' || fail "CLI --since 10m: $(cat "$WORK/cli10m.txt")"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
rows = [l for l in lines if re.match(r"^(\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d", l)]
assert rows and all(re.search(r"\(\d+ windows?\)$", l) for l in rows), rows
assert not any("samples" in l for l in rows), rows
PY
"$GPULSE" diagnose --url "$URL" --gpu 0 --since 30s >"$WORK/cli.txt" || fail "gpulse diagnose --since 30s"
grep -q "stored diagnosis" "$WORK/cli.txt" || fail "CLI: $(cat "$WORK/cli.txt")"
grep -Eq "^GPU 0 over [0-9]+ s: [a-z_]+ [0-9]+%" "$WORK/cli.txt" || fail "CLI summary: $(cat "$WORK/cli.txt")"

# A restart keeps what was stored.
before=$(date +%s)
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "gpulsed did not exit cleanly"
export GPULSE_FAKE_NVML_RECORDING="$REC"
start_daemon store2 --config "$WORK/diag.yml" --nvml-library "$FAKE_NVML"
fetch "/api/v1/diagnosis?gpu=0&since=60s&window=2" | python3 -c '
import json, sys
d = json.load(sys.stdin)["data"]
assert d["source"] == "store"
old = [x for x in d["windows"] if x["end_s"] <= float(sys.argv[1])]
assert len(old) >= 5, len(old)
' "$before" || fail "stored diagnosis lost over a restart"
kill -TERM "$DAEMON_PID"
echo PASS
