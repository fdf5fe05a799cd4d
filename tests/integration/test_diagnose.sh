# gpulse diagnose --replay on the real recordings: the JSON has DESIGN.md's
# shape (seven keys per window, classes and findings from the contract's
# sets, windows aligned to the first sample), the table and summary print,
# several GPUs and missing GPM columns still get a diagnosis, bad flags
# exit 2 and a malformed file exits 1 naming file, line and column.
source "$(dirname "$0")/lib.sh"

check_json() { # FILE.json WINDOW_S [EXPECT_GPUS] [EXPECT_MISSING]
	python3 - "$@" <<'PY'
import json, math, sys
doc = json.load(open(sys.argv[1]))
win_s = float(sys.argv[2])
want_gpus = int(sys.argv[3]) if len(sys.argv) > 3 else 1
want_missing = sys.argv[4] if len(sys.argv) > 4 else ""
classes = {"idle", "compute_bound", "memory_bound", "pcie_bound", "launch_bound",
           "input_starved", "mixed"}
findings = {"memory_pressure", "power_capped", "thermal_throttled", "hw_slowdown",
            "ecc_errors", "xid"}
keys = {"start_s", "end_s", "gpu", "bottleneck", "findings", "evidence", "advice"}
ws = doc["windows"]
assert isinstance(ws, list) and ws, "no windows"
first = min(w["start_s"] for w in ws)
gpus = set()
for w in ws:
    assert keys <= set(w), f"missing keys {keys - set(w)}"
    assert isinstance(w["start_s"], (int, float)) and isinstance(w["end_s"], (int, float))
    assert abs(w["end_s"] - w["start_s"] - win_s) < 1e-6, (w["start_s"], w["end_s"])
    k = (w["start_s"] - first) / win_s
    assert abs(k - round(k)) < 1e-6, f"window not aligned: {w['start_s']}"
    assert isinstance(w["gpu"], int)
    gpus.add(w["gpu"])
    assert w["bottleneck"] in classes, w["bottleneck"]
    assert isinstance(w["findings"], list) and set(w["findings"]) <= findings, w["findings"]
    assert isinstance(w["evidence"], list) and w["evidence"], "no evidence"
    for e in w["evidence"]:
        assert isinstance(e["name"], str) and isinstance(e["value"], (int, float)), e
        if "op" in e:
            assert isinstance(e["threshold"], (int, float)), e
    assert isinstance(w["advice"], str) and w["advice"] and "\n" not in w["advice"]
    assert 0 <= w["confidence"] <= 1
    if want_missing:
        names = [m["evidence"] for m in w["missing_evidence"]]
        assert any(want_missing in n for n in names), names
        if w["bottleneck"] != "idle":
            assert w["confidence"] <= 0.5, w["confidence"]
assert len(gpus) == want_gpus, gpus
assert len(doc["summary"]) == want_gpus
for s in doc["summary"]:
    assert abs(sum(s["class_share"].values()) - 1) < 1e-6, s["class_share"]
PY
}

for rec in "$GPULSE_TEST_DATA"/recordings/*-10hz.csv; do
	name=$(basename "$rec" .csv)
	"$GPULSE" diagnose --replay "$rec" --json >"$WORK/$name.json" 2>"$WORK/$name.log" ||
		fail "diagnose $name: $(cat "$WORK/$name.log")"
	check_json "$WORK/$name.json" 5 || fail "JSON shape of $name"
done

# Another window length; the table and the summary.
"$GPULSE" diagnose --replay "$REC" --window 2 --json >"$WORK/w2.json" || fail "--window 2"
check_json "$WORK/w2.json" 2 || fail "JSON shape with --window 2"
"$GPULSE" diagnose --replay "$REC" >"$WORK/table.txt" || fail "table"
grep -q 'compute_bound .*power_capped' "$WORK/table.txt" || fail "table: $(head -n 20 "$WORK/table.txt")"
grep -q 'time by class:' "$WORK/table.txt" || fail "no summary"
grep -q 'top finding: power_capped' "$WORK/table.txt" || fail "no top finding"
grep -q 'PCIe gen5 x16' "$WORK/table.txt" || fail "device file not read"
# The one line of advice the help promises, in the table too: under the
# window that starts a run of windows sharing it, never repeated in a row.
python3 - "$WORK/table.txt" <<'PY' || fail "table advice: $(head -n 30 "$WORK/table.txt")"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
rows = [i for i, l in enumerate(lines) if re.match(r"^ +[\d.]+ +[\d.]+ +\d+  [a-z_]+ ", l)]
adv = [i for i, l in enumerate(lines) if l.startswith("    advice: ")]
assert rows and adv, (len(rows), len(adv))
assert adv[0] == rows[0] + 1, "the first window has no advice under it"
assert all(lines[i - 1] in [lines[r] for r in rows] for i in adv), "advice not under a window"
texts = [lines[i] for i in adv]
assert all(a != b for a, b in zip(texts, texts[1:])), "the same advice twice in a row"
assert len(adv) < len(rows), "advice repeated for every window"
assert any("fuse" in t or "precision" in t or "nothing runs" in t for t in texts), texts
PY

# Two GPUs in one file (a gpu column), no device file beside it, and the
# same recording without its GPM columns.
python3 - "$REC" "$WORK/multi-10hz.csv" "$WORK/nogpm-10hz.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
head, data = rows[0], rows[1:]
with open(sys.argv[2], "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow([head[0], "gpu"] + head[1:])
    for r in data:
        for g in (0, 1):
            w.writerow([r[0], str(g)] + r[1:])
gpm = {"sm_util", "sm_occupancy", "tensor_util", "dram_bw_util", "fp64_util", "fp32_util",
       "fp16_util", "integer_util", "graphics_util", "pcie_tx_mbps", "pcie_rx_mbps"}
keep = [i for i, c in enumerate(head) if c not in gpm]
with open(sys.argv[3], "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    for r in rows:
        w.writerow([r[i] for i in keep])
PY
"$GPULSE" diagnose --replay "$WORK/multi-10hz.csv" --json >"$WORK/multi.json" || fail "multi-GPU"
check_json "$WORK/multi.json" 5 2 || fail "multi-GPU JSON"
"$GPULSE" diagnose --replay "$WORK/multi-10hz.csv" >"$WORK/multi.txt" || fail "multi-GPU table"
grep -q 'PCIe link unknown' "$WORK/multi.txt" || fail "unknown link not said"
"$GPULSE" diagnose --replay "$WORK/nogpm-10hz.csv" --json >"$WORK/nogpm.json" || fail "no GPM"
check_json "$WORK/nogpm.json" 5 1 sm_util || fail "no-GPM JSON"

# Usage errors exit 2; unreadable and malformed files exit 1 with the
# parser's FILE:LINE:COL.
expect_exit() { # CODE ARGS...
	local want=$1 rc=0
	shift
	"$GPULSE" diagnose "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
	[ "$rc" = "$want" ] || fail "diagnose $*: exit $rc, want $want: $(cat "$WORK/err.txt")"
}
expect_exit 2 --bogus
# Without --replay it asks gpulsed: unreachable here is a runtime failure;
# daemon options do not mix with --replay.
expect_exit 1 --json --url http://127.0.0.1:9
grep -q "cannot reach gpulsed" "$WORK/err.txt" || fail "unreachable daemon: $(cat "$WORK/err.txt")"
expect_exit 2 --replay "$REC" --since 10m
expect_exit 2 --replay "$REC" --window 0
expect_exit 2 --replay "$REC" --window abc
expect_exit 2 --replay "$REC" extra
expect_exit 1 --replay "$WORK/does-not-exist.csv"
# An explicit --device must exist: an error, no diagnosis printed.
expect_exit 1 --replay "$REC" --device "$WORK/no-such-device.csv"
grep -q "no-such-device.csv: no such file" "$WORK/err.txt" || fail "missing --device: $(cat "$WORK/err.txt")"
[ ! -s "$WORK/out.txt" ] || fail "output with a missing --device"
expect_exit 0 --replay "$REC" --device "$GPULSE_TEST_DATA/recordings/h200-device.csv"
printf 't_s,gpu_util,power_w\n1.0,5,100\n2.0,5,1e\n' >"$WORK/bad.csv"
expect_exit 1 --replay "$WORK/bad.csv" --json
grep -q "$WORK/bad.csv:3:3:" "$WORK/err.txt" || fail "malformed: $(cat "$WORK/err.txt")"
[ ! -s "$WORK/out.txt" ] || fail "output on a malformed file"
# Negative and nan values are read as absent, negative ones with a warning
# naming the first one's line and column (nan is a recorder's word for no
# value: no warning); the diagnosis goes on. A negative time is refused.
printf 't_s,gpu_util,power_w\n1.0,5,100\n2.0,-5,nan\n3.0,5,-1\n' >"$WORK/neg.csv"
expect_exit 0 --replay "$WORK/neg.csv"
grep -q "warning: $WORK/neg.csv:3:2: negative value -5 in column gpu_util, read as absent (and 1 more such cell)" \
	"$WORK/err.txt" || fail "negative values: $(cat "$WORK/err.txt")"
printf 't_s,gpu_util\n-1.0,5\n' >"$WORK/negt.csv"
expect_exit 1 --replay "$WORK/negt.csv"
grep -q "negt.csv:2:1: negative time" "$WORK/err.txt" || fail "negative time: $(cat "$WORK/err.txt")"
# A header without rows is refused, with the parser's message (gpulsed
# --replay says the same).
head -n 1 "$REC" >"$WORK/header.csv"
expect_exit 1 --replay "$WORK/header.csv"
grep -q "header.csv:2:1: no samples after the header" "$WORK/err.txt" || fail "header only: $(cat "$WORK/err.txt")"
[ ! -s "$WORK/out.txt" ] || fail "output on a header-only file: $(cat "$WORK/out.txt")"
"$GPULSE" help diagnose | grep -q -- '--window' || fail "help"
echo PASS
