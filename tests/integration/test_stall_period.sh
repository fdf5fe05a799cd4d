# A GPU whose NVML calls are slow or hang must not delay the others: with
# four fake GPUs recorded at 10 Hz (gpulse record, the collector's own
# lanes; deadline 2 s), GPU 1's power reads
#  - take 1.5 s each after 1.5 s (slow, under the deadline): GPUs 0, 2 and
#    3 keep their period, GPU 1 goes on at its own pace and is never
#    marked stale;
#  - hang for good after 1.5 s: GPUs 0, 2 and 3 keep their period, GPU 1
#    has no rows after the hang, and record still ends.
# "Keep their period": no gap between a GPU's rows reaches 1 s, half the
# deadline (before each lane handed its other GPUs on only at the
# deadline, every gap at a hang was 2 s or more).
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

export GPULSE_FAKE_NVML_RECORDING="$REC" GPULSE_FAKE_NVML_GPUS=4 GPULSE_FAKE_NVML_SPEED=1

run_case() {
	local name=$1 fault=$2
	GPULSE_FAKE_NVML_FAULTS="$fault" timeout 60 "$GPULSE" record -o "$WORK/$name.csv" --hz 10 \
		--seconds 6 --nvml-library "$FAKE_NVML" 2>"$WORK/$name.log" ||
		fail "$name: gpulse record failed: $(cat "$WORK/$name.log")"
	python3 - "$WORK/$name.csv" "$name" <<'PY' || fail "$name: periods"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
case = sys.argv[2]
t = {}
for r in rows:
    t.setdefault(int(r["gpu"]), []).append(float(r["t_s"]))
t0 = min(v[0] for v in t.values())
for g in (0, 2, 3):
    ts = t[g]
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    worst = max(gaps)
    assert worst < 1.0, f"GPU {g}: a {worst:.2f} s gap at {ts[gaps.index(worst)] - t0:.2f} s"
    assert ts[-1] - t0 > 5.0 and len(ts) > 30, f"GPU {g}: {len(ts)} rows, last at {ts[-1] - t0:.2f} s"
late = [x - t0 for x in t.get(1, []) if x - t0 > 2.5]
if case == "slow":
    assert late, "slow GPU 1 wrote no rows after its calls slowed"
else:
    assert not late, f"hung GPU 1 wrote rows after the hang: {late}"
PY
}
run_case slow "hang:nvmlDeviceGetPowerUsage:gpu=1:after=1.5:for=1.5"
run_case hung "hang:nvmlDeviceGetPowerUsage:gpu=1:after=1.5"
echo PASS
