# gpulse record through the fake NVML writes the recording format: it
# loads again (gpulsed --replay), has the right rows and values.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

head -n 40 "$REC" >"$WORK/src.csv"
export GPULSE_FAKE_NVML_RECORDING="$WORK/src.csv" GPULSE_FAKE_NVML_SPEED=0
"$GPULSE" record -o "$WORK/out.csv" --hz 10 --seconds 2 --nvml-library "$FAKE_NVML" 2>"$WORK/record.log" ||
	fail "gpulse record failed: $(cat "$WORK/record.log")"
python3 - "$WORK/src.csv" "$WORK/out.csv" <<'PY' || fail "recording content"
import csv, sys
src = next(csv.DictReader(open(sys.argv[1])))
rows = list(csv.DictReader(open(sys.argv[2])))
assert 12 <= len(rows) <= 25, f"{len(rows)} rows for 2 s at 10 Hz"
head = open(sys.argv[2]).readline().strip().split(",")
want = open(sys.argv[1]).readline().strip().split(",")
assert head == want, f"columns {head} != {want}"
ts = [float(r["t_s"]) for r in rows]
assert ts == sorted(ts)
last = rows[-1]
for k in ("gpu_util", "mem_used_mib", "power_w", "sm_clock_mhz", "temp_c", "pstate"):
    assert abs(float(last[k]) - float(src[k])) < 1e-6, (k, last[k], src[k])
# GPM needs two samples: every row after the first carries sm_util.
assert all(r["sm_util"] != "" for r in rows[1:]), "GPM columns missing"
PY
# The file replays.
start_daemon again --replay "$WORK/out.csv" --replay-speed 5
wait_for '[ -n "$(metric gpulse_gpu_power_watts gpu=\"0\")" ]' || fail "recorded file does not replay"
kill -TERM "$DAEMON_PID"
# No driver: a clear error, exit 1 and no file.
set +e
GPULSE_FAKE_NVML_FAULTS=nodriver "$GPULSE" record -o "$WORK/x.csv" --seconds 1 --nvml-library "$FAKE_NVML" 2>"$WORK/nd.log"
rc=$?
set -e
[ "$rc" = 1 ] || fail "record without driver: exit $rc"
grep -q 'driver is not loaded' "$WORK/nd.log" || fail "record without driver: $(cat "$WORK/nd.log")"
grep -q "x.csv not written" "$WORK/nd.log" || fail "record without driver does not say the file was not written: $(cat "$WORK/nd.log")"
# ... and leaves no file behind (an empty one would look like a recording).
[ ! -e "$WORK/x.csv" ] || fail "record without driver left $(wc -c <"$WORK/x.csv")-byte x.csv"
echo PASS
