# gpulsed's scheduled silent-corruption screening (issue 38) on the fake
# NVML and the bench stand-in at the test sizes, with gpulsed's wall clock
# moved by libfaketime (the schedule is a day; the monotonic clock, and so
# the quiet-window rules, stay real):
#  - a quiet GPU is screened once it has been idle bench.idle_for; a
#    process that appears on it kills the screening, nothing is kept, and
#    it is tried again when the GPU is quiet;
#  - the next screening comes a screen.interval later, not before;
#  - a card that computes one tile wrong where only its own earlier
#    digests can see it (GPULSE_FAKE_BENCH_SCREEN_FAULT) and the test hook
#    (GPULSE_SCREEN_CORRUPT) each produce the mismatch metric naming the
#    test, the health score's drain with the test and tile in its reason,
#    and the pack's GPUSilentCorruption alert with its text;
#  - a mismatch stored before a restart is still the card's verdict after;
#  - a driver change starts a new reference: the run on the new driver is
#    not compared with the old one's digests, says so, and is the
#    reference of the next.
source "$(dirname "$0")/lib.sh"
: "${GPULSE_BUILD_DIR:?}" "${FAKE_NVML:?}" "${GPULSE_SOURCE_DIR:?}"
export GPULSE_CUDA_LIBRARY="$GPULSE_BUILD_DIR/fake_bench/libcuda.so.1"
export GPULSE_SCREEN_TEST_SIZES=1
[ -f "$GPULSE_CUDA_LIBRARY" ] || fail "tests/fake_bench is not built"
faketime_gpulsed
DAY=86400

# Recordings: idle for 4 s, then a process at 90% for 4 s, then idle
# (the fake NVML reports the process as gpulsed itself: another process
# than the screening's); and idle throughout, for the restart.
python3 - "$REC" "$WORK" <<'PY'
import sys
rows = open(sys.argv[1]).read().splitlines()
cols = rows[0].split(",")
base = rows[1].split(",")
t0 = float(base[0])
for name, busy in (("rec.csv", lambda t: 4 <= t < 8), ("idle.csv", lambda t: False)):
    out = [rows[0]]
    for i in range(6000):
        r = list(base)
        t = i / 10
        r[0] = "%.3f" % (t0 + t)
        r[cols.index("gpu_util")] = "90" if busy(t) else "0"
        r[cols.index("proc_count")] = "1" if busy(t) else "0"
        out.append(",".join(r))
    open(sys.argv[2] + "/" + name, "w").write("\n".join(out) + "\n")
PY
export GPULSE_FAKE_NVML_RECORDING="$WORK/rec.csv" GPULSE_FAKE_NVML_SPEED=1

# The command gpulsed runs (bench.command): the first screening sleeps
# until gpulsed kills it; later ones run gpulse with the card's fault and
# the test hook this test writes into files.
cat >"$WORK/gpulse-wrap" <<SH
#!/bin/sh
if [ ! -e "$WORK/held" ]; then : >"$WORK/held"; exec sleep 300; fi
[ -s "$WORK/fault" ] && export GPULSE_FAKE_BENCH_SCREEN_FAULT="\$(cat "$WORK/fault")"
[ -s "$WORK/corrupt" ] && export GPULSE_SCREEN_CORRUPT="\$(cat "$WORK/corrupt")"
exec "$GPULSE" "\$@"
SH
chmod +x "$WORK/gpulse-wrap"

# The pack's GPUSilentCorruption, evaluated every second.
python3 - "$GPULSE_SOURCE_DIR/deploy/rules/gpulse.rules.yml" "$WORK/rules.yml" <<'PY'
import sys, yaml
pack = yaml.safe_load(open(sys.argv[1]))
rule = [r for g in pack["groups"] for r in g["rules"] if r.get("alert") == "GPUSilentCorruption"]
assert len(rule) == 1, rule
yaml.safe_dump({"groups": [{"name": "screen", "interval": "1s", "rules": rule}]}, open(sys.argv[2], "w"))
PY
cat >"$WORK/g.yml" <<YML
bench:
  enabled: false
  idle_for: 1s
  retry_interval: 1s
  command: "$WORK/gpulse-wrap"
screen:
  interval: 24h
  variant: quick
rule_files:
  - "$WORK/rules.yml"
YML
start_daemon s1 --config "$WORK/g.yml" --nvml-library "$FAKE_NVML" --storage-path "$WORK/db"
LOG="$WORK/s1.log"

status() { fetch "/api/v1/bench/status?gpu=0"; }
runs() { metric gpulse_gpu_screen_runs_total "outcome=\"$1\""; }
# alert_summary TEST : the firing GPUSilentCorruption's summary for TEST.
alert_summary() {
	fetch /api/v1/alerts | python3 -c '
import json, sys
for a in json.load(sys.stdin)["data"]["alerts"]:
    if a["labels"].get("alertname") == "GPUSilentCorruption" and a["labels"].get("test") == sys.argv[1] \
       and a["state"] == "firing":
        print(a["annotations"]["summary"])' "$1"
}
# reason : the health score's drain reason and its evidence.
reason() {
	fetch /api/v1/gpus | python3 -c '
import json, sys
g = json.load(sys.stdin)["data"]["gpus"][0]["health_score"]
ev = [r["evidence"] for r in g["reasons"] if r["reason"] == "silent_corruption"]
print("%s|%s|%s" % (g["drain"], g["reason"], ev[0] if ev else ""))'
}

# 1. The first quiet window: the screening starts, the process at 4 s
# kills it, nothing is kept; quiet again from 8 s, the retry is kept.
wait_for 'grep -q "screen: GPU 0: quick screening 1 started (idle window)" "$LOG"' ||
	fail "no scheduled screening"
wait_for '[ "$(metric gpulse_gpu_screen_running)" = 1 ]' || fail "not shown running"
for _ in 1 2; do # the process comes at 4 s of the recording
	wait_for 'grep -q "process [0-9]* appeared on GPU 0: screening aborted, nothing kept" "$LOG"' && break
done
grep -q "process [0-9]* appeared on GPU 0: screening aborted, nothing kept" "$LOG" ||
	fail "the screening was not aborted when a process appeared"
[ "$(runs aborted)" = 1 ] || fail "aborted not counted: $(runs aborted)"
[ -z "$(metric gpulse_gpu_screen_passed)" ] || fail "an aborted screening published a result"
for _ in 1 2; do
	wait_for '[ "$(runs passed)" = 1 ]' && break
done
[ "$(runs passed)" = 1 ] || fail "the retry was not kept"
grep -q "screen: GPU 0: quick screening 2 started (idle window)" "$LOG" || fail "the retry's log line"
[ "$(metric gpulse_gpu_screen_passed)" = 1 ] || fail "passed gauge"
[ "$(metric gpulse_gpu_screen_mismatches 'test="gemm_f64"')" = 0 ] || fail "gemm_f64 mismatches"
[ "$(fetch /metrics | grep -c '^gpulse_gpu_screen_mismatches{')" = 8 ] || fail "not one series per test"
[ "$(metric gpulse_gpu_screen_running)" = "" ] || fail "still shown running"
status >"$WORK/st1.json" || fail "status"
python3 - "$WORK/st1.json" <<'PY' || fail "status after the first screening: $(cat "$WORK/st1.json")"
import json, sys, datetime
d = json.load(open(sys.argv[1]))["data"]
s = d["screen"]
assert d["kind"] == "screen" and d["state"] == "done" and d["id"] == 2, d
assert s["scheduled"] and s["variant"] == "quick" and s["runs"]["passed"] == 1 and s["runs"]["aborted"] == 1, s
last = s["last"]
assert last["passed"] and last["driver"] == "580.159.04" and all(v == 0 for v in last["mismatches"].values()), last
assert "this run is its first reference" in last["notes"], last
t = lambda x: datetime.datetime.strptime(x[:19], "%Y-%m-%dT%H:%M:%S")
due = (t(s["next_due"]) - t(last["time"])).total_seconds()
assert 86400 <= due <= 86400 + 60, due
PY
stored=$(curl -sf "$URL/api/v1/query" --data-urlencode 'query=gpulse_gpu_screen_passed' -G)
grep -q '"value":\[[0-9.]*,"1"\]' <<<"$stored" || fail "the store has no gpulse_gpu_screen_passed: $stored"

# 2. A day later, on schedule: the card now computes tile 3 of the
# reduction wrong, a tile the CPU does not check, every repetition alike:
# only its own digests of yesterday see it.
echo sum_u64:3 >"$WORK/fault"
[ "$(runs passed)" = 1 ] || fail "screened again before the interval"
faketime_offset $((DAY + 3600))
wait_for '[ "$(runs mismatch)" = 1 ]' || fail "no screening a day later: $(status)"
[ "$(metric gpulse_gpu_screen_passed)" = 0 ] || fail "passed gauge after a mismatch"
[ "$(metric gpulse_gpu_screen_mismatches 'test="sum_u64"')" = 1 ] || fail "sum_u64 mismatches"
[ "$(metric gpulse_gpu_screen_mismatches 'test="gemm_f64"')" = 0 ] || fail "gemm_f64 mismatches"
grep -q "screen: GPU 0 (GPU-[0-9a-f-]*): 1 mismatch: sum_u64 tile 3: its digest differs from this card.s reference (the run of " "$LOG" ||
	fail "no mismatch in the log"
wait_for '[ "$(reason)" = "True|silent_corruption|screening: sum_u64 tile 3 differs (reference)" ]' ||
	fail "health: $(reason)"
wait_for '[ -n "$(alert_summary sum_u64)" ]' || fail "no GPUSilentCorruption: $(fetch /api/v1/alerts)"
[ "$(alert_summary sum_u64)" = "GPU 0 computed wrong results: 1 tile(s) of its sum_u64 screening" ] ||
	fail "alert text: $(alert_summary sum_u64)"
status | python3 -c '
import json, sys
s = json.load(sys.stdin)["data"]["screen"]["last"]
assert not s["passed"] and s["mismatches"]["sum_u64"] == 1, s
assert s["first_mismatch"].startswith("sum_u64 tile 3: its digest differs from this card"), s
' || fail "status after the mismatch: $(status)"

# 3. Another day: the test hook corrupts one element of gemm_f64's tile 3
# in the run's first repetition: the CPU and the repetitions see it.
echo gemm_f64:3:1023 >"$WORK/corrupt"
: >"$WORK/fault"
faketime_offset $((2 * DAY + 7200))
wait_for '[ "$(runs mismatch)" = 2 ]' || fail "no screening two days later: $(status)"
[ "$(metric gpulse_gpu_screen_mismatches 'test="gemm_f64"')" -ge 2 ] || fail "gemm_f64 mismatches"
[ "$(metric gpulse_gpu_screen_mismatches 'test="sum_u64"')" = 0 ] || fail "sum_u64 mismatches"
# The reason names the run's first mismatch: the repetitions' or the CPU's.
HOOKED='^True\|silent_corruption\|screening: gemm_f64 tile 3 differs \((repeat|cpu)\), and more$'
wait_for '[[ "$(reason)" =~ $HOOKED ]]' || fail "health after the hook: $(reason)"
wait_for '[ -n "$(alert_summary gemm_f64)" ]' || fail "no GPUSilentCorruption for gemm_f64"
wait_for '[ -z "$(alert_summary sum_u64)" ]' || fail "sum_u64's alert outlived its mismatch"

# 4. Restart on a new driver, the card still wrong in the reduction's
# tile 3. The stored mismatch is the card's verdict until the next run.
: >"$WORK/corrupt"
echo sum_u64:3 >"$WORK/fault"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "gpulsed did not stop cleanly"
export GPULSE_FAKE_NVML_DRIVER_VERSION=590.10 GPULSE_FAKE_NVML_RECORDING="$WORK/idle.csv"
start_daemon s2 --config "$WORK/g.yml" --nvml-library "$FAKE_NVML" --storage-path "$WORK/db"
LOG="$WORK/s2.log"
wait_for '[ "$(metric gpulse_gpu_screen_passed)" = 0 ]' || fail "the stored mismatch was not restored"
wait_for '[[ "$(reason)" =~ $HOOKED ]]' || fail "health after the restart: $(reason)"
[ "$(runs passed)" = 0 ] || fail "screened before it was due"
# Due a day after the last run: the new driver's first run is not
# compared with the old driver's digests, and says so.
faketime_offset $((3 * DAY + 10800))
wait_for '[ "$(runs passed)" = 1 ]' || fail "no screening on the new driver: $(status)"
[ "$(metric gpulse_gpu_screen_passed)" = 1 ] || fail "passed gauge on the new driver"
wait_for '[ "$(reason)" = "False|None|" ]' || fail "the drain was not cleared: $(reason)"
status | python3 -c '
import json, sys
s = json.load(sys.stdin)["data"]["screen"]["last"]
assert s["passed"] and s["driver"] == "590.10", s
assert "reference not compared: driver 580.159.04" in s["notes"] and "this run starts a new reference" in s["notes"], s
' || fail "status on the new driver: $(status)"
# The next day it is the reference: the same card, the same digests.
faketime_offset $((4 * DAY + 14400))
wait_for '[ "$(runs passed)" = 2 ]' || fail "no second screening on the new driver: $(status)"
status | python3 -c '
import json, sys
s = json.load(sys.stdin)["data"]["screen"]["last"]
assert s["passed"] and "reference" not in s["notes"], s
' || fail "the new driver's first run is not the reference: $(status)"
# A clean stop (under ASan: no leak in the restored state).
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "gpulsed did not stop cleanly after the restart"
echo PASS
