# The live diagnosis in gpulsed: on the fake NVML serving the bf16 tensor
# phase of the real recording, every complete window is compute_bound with
# power_capped, exported as gpulse_gpu_bottleneck{class} and served on
# /api/v1/diagnosis; `gpulse diagnose` shows it; bad arguments are refused.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

python3 - "$REC" "$WORK/bf16.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head, body = rows[0], rows[1:]
t = head.index("t_s")
# Inside the compute_bf16_tensor phase (1795965318.6 .. 1795965330.6),
# away from its edges.
pick = [x for x in body if 1795965320.0 <= float(x[t]) <= 1795965329.0]
w = csv.writer(open(sys.argv[2], "w", newline=""), lineterminator="\n")
w.writerow(head); w.writerows(pick)
PY
cat >"$WORK/diag.yml" <<'YML'
sampling:
  fast: 100ms
  normal: 500ms
diagnosis:
  window: 2s
  history: 1m
YML
export GPULSE_FAKE_NVML_RECORDING="$WORK/bf16.csv" GPULSE_FAKE_NVML_SPEED=1
started_s=$(date +%s)
start_daemon live --config "$WORK/diag.yml" --nvml-library "$FAKE_NVML"
wait_for '[ "$(metric gpulse_gpu_bottleneck class=\"compute_bound\")" = 1 ]' ||
	fail "no compute_bound verdict: $(fetch /metrics | grep bottleneck)"
[ "$(metric gpulse_gpu_bottleneck 'class="memory_bound"')" = 0 ] || fail "other classes must read 0"
[ "$(metric gpulse_gpu_diagnosis_finding 'finding="power_capped"')" = 1 ] || fail "power_capped finding missing"
fetch /metrics >"$WORK/m.txt"
promtool check metrics <"$WORK/m.txt" >"$WORK/pt.log" 2>&1 || fail "promtool: $(cat "$WORK/pt.log")"

fetch "/api/v1/diagnosis?gpu=0&since=30s" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["status"] == "success", d
data = d["data"]
w = data["windows"]
assert w, "no windows"
for x in w:
    for k in ("start_s", "end_s", "gpu", "bottleneck", "findings", "evidence", "advice"):
        assert k in x, k
assert data["window_s"] == 2, data["window_s"]
# Every full window (2 s) after the first is the tensor workload.
full = [x for x in w if abs(x["end_s"] - x["start_s"] - 2) < 1e-6]
assert full and all(x["bottleneck"] == "compute_bound" for x in full[1:]), [x["bottleneck"] for x in full]
# The fake NVML reports the calling process (gpulsed itself) as the one
# process on the GPU, with the recorded SM utilization.
o = data["owners"]
assert len(o) == 1 and o[0]["gpu"] == 0 and o[0]["comm"] == "gpulsed", o
assert o[0]["basis"] == "sm_utilization_ratio" and o[0]["value"] > 0.5, o
' || fail "/api/v1/diagnosis"
code=$(curl -s -o "$WORK/bad.json" -w '%{http_code}' "$URL/api/v1/diagnosis?since=soon")
[ "$code" = 400 ] || fail "bad since gave HTTP $code"
grep -q '"errorType":"bad_data"' "$WORK/bad.json" || fail "bad since: no Prometheus error body"

"$GPULSE" diagnose --url "$URL" --gpu 0 >"$WORK/cli.txt" || fail "gpulse diagnose (daemon) failed"
grep -q compute_bound "$WORK/cli.txt" || fail "gpulse diagnose shows no compute_bound: $(cat "$WORK/cli.txt")"
grep -q "owner is pid [0-9]* (gpulsed)" "$WORK/cli.txt" || fail "gpulse diagnose names no owner: $(cat "$WORK/cli.txt")"
# The table: local wall-clock times (never raw Unix seconds), the deciding
# numbers in the evidence column (not the advice), and a header that says
# the span the windows cover, which cannot exceed the daemon's uptime by
# more than its partial windows (before, it said the history it could
# hold: a minute).
elapsed_s=$(( $(date +%s) - started_s ))
python3 - "$WORK/cli.txt" "$elapsed_s" <<'PY' || fail "gpulse diagnose table: $(cat "$WORK/cli.txt")"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
elapsed = int(sys.argv[2])
m = re.match(r"^http://\S+: live diagnosis, 2 s windows over (\d+) s, "
             r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d to (\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d "
             r"\(UTC[+-]\d\d:\d\d\)$", lines[0])
assert m, lines[0]
span = int(m.group(1))
# The first and the last window may be partial, and whole seconds of
# uptime round down: at most two windows and a second over.
assert span % 2 == 0 and 2 <= span <= elapsed + 2 * 2 + 1, (span, elapsed)
# Then each GPU's yardsticks, with the limit the (fake) driver reports.
assert re.match(r"^GPU 0: NVIDIA H200, .*power limit 700 W \(device\)", lines[1]), lines[1]
assert re.match(r"^start +end +gpu +bottleneck +findings +evidence$", lines[2]), lines[2]
rows = [l for l in lines[2:] if re.match(r"^(\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d ", l)]
assert rows, "no window rows"
assert len(rows) == span // 2, (len(rows), span)
for l in rows:
    assert not re.search(r"\d{10}", l), "raw Unix time: " + l
    assert re.search(r"\(\d+ samples", l), "no evidence numbers: " + l
    assert "math units" not in l and "release the GPU" not in l, "advice in evidence: " + l
# A whole window (20 samples; the first and the last may be partial, and a
# partial one may precede the first GPM read) shows the GPM numbers.
full = [l for l in rows if int(re.search(r"\((\d+) samples", l).group(1)) >= 15]
assert full and all(" compute_bound " in l and re.search(r"busy \d+% sm [\d.]+% tensor \d+%", l)
                    for l in full), full
# The advice on a line of its own under the first window of each run.
i = lines.index(rows[0])
assert lines[i + 1].startswith("    advice: ") and len(lines[i + 1]) > 20, lines[i + 1]
PY
"$GPULSE" diagnose --url "$URL" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert "windows" in d' ||
	fail "gpulse diagnose --json (daemon)"
set +e
"$GPULSE" diagnose --url "$URL" --since 'x&y' 2>/dev/null; rc=$?
set -e
[ "$rc" = 2 ] || fail "bad --since: exit $rc, want 2"
# A GPU the daemon does not have is an error, not "no complete window yet"
# (the host has one GPU), with --json too.
for fmt in "" --json; do
	set +e
	"$GPULSE" diagnose --url "$URL" --gpu 3 $fmt >"$WORK/g3.out" 2>"$WORK/g3.err"; rc=$?
	set -e
	[ "$rc" = 1 ] || fail "--gpu 3 $fmt: exit $rc, want 1: $(cat "$WORK/g3.out")"
	grep -q "no GPU 3 .*its GPUs: 0" "$WORK/g3.err" || fail "--gpu 3 $fmt: $(cat "$WORK/g3.err")"
	[ ! -s "$WORK/g3.out" ] || fail "--gpu 3 $fmt printed: $(cat "$WORK/g3.out")"
done
kill -TERM "$DAEMON_PID"
echo PASS
