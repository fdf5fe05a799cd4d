# diagnosis.memory_pressure reaches the live diagnosis: with the threshold
# at 0.5, a GPU whose memory is 60 % used (below the 0.85 default) carries
# memory_pressure on /metrics and in /api/v1/diagnosis, whose evidence
# names the configured threshold; a value out of (0, 1] is refused with
# FILE:LINE:COL and exit status 2.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

# One row of the bf16 tensor phase, memory used set to 60 % of total.
python3 - "$REC" "$WORK/row.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head, body = rows[0], rows[1:]
t = head.index("t_s")
row = next(x for x in body if float(x[t]) >= 1795965322.0)
row[head.index("mem_used_mib")] = str(round(float(row[head.index("mem_total_mib")]) * 0.60, 3))
w = csv.writer(open(sys.argv[2], "w", newline=""), lineterminator="\n")
w.writerow(head); w.writerow(row)
PY

cat >"$WORK/bad.yml" <<'YML'
diagnosis:
  memory_pressure: 1.5
YML
rc=0
"$GPULSED" --config "$WORK/bad.yml" --print-config >/dev/null 2>"$WORK/bad.err" || rc=$?
[ "$rc" = 2 ] || fail "memory_pressure 1.5: exit $rc, want 2"
grep -qF "$WORK/bad.yml:2:20: diagnosis.memory_pressure: \"1.5\" is out of range (above 0 and at most 1)" \
	"$WORK/bad.err" || fail "memory_pressure 1.5: $(cat "$WORK/bad.err")"

cat >"$WORK/mp.yml" <<'YML'
diagnosis:
  window: 1s
  memory_pressure: 0.5
profiling:
  enabled: false
YML
export GPULSE_FAKE_NVML_RECORDING="$WORK/row.csv" GPULSE_FAKE_NVML_SPEED=0
start_daemon mp --config "$WORK/mp.yml" --nvml-library "$FAKE_NVML"
wait_for '[ "$(metric gpulse_gpu_diagnosis_finding finding=\"memory_pressure\")" = 1 ]' ||
	fail "no memory_pressure at 60 % with the threshold at 0.5: $(fetch /metrics | grep diagnosis_finding)"

fetch "/api/v1/diagnosis?gpu=0&since=30s" | python3 -c '
import json, sys
w = json.load(sys.stdin)["data"]["windows"]
hit = [x for x in w if "memory_pressure" in x["findings"]]
assert hit, [x["findings"] for x in w]
ev = [e for e in hit[-1]["evidence"] if e["name"] == "memory_used_over_total"]
assert ev and ev[0]["threshold"] == 0.5 and abs(ev[0]["value"] - 0.6) < 0.01, hit[-1]["evidence"]
' || fail "/api/v1/diagnosis: $(fetch "/api/v1/diagnosis?gpu=0&since=30s")"
echo "PASS"
