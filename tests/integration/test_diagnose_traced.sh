# The live diagnosis refined by kernel traces: the fake NVML serves the
# cpu_starved phase of the real recording (the counters alone say
# input_starved); a synthetic injection library on the profiling socket
# reports 40 000 launches a second of an 8 us kernel for the same GPU.
# gpulsed's windows must become launch_bound by the trace rule, with the
# trace evidence, and the bottleneck's owner must be the traced process;
# with the library gone, the counters decide again.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}" "${GPULSE_BUILD_DIR:?}"
FAKE="$GPULSE_BUILD_DIR/tests/fake_inject_client"
[ -x "$FAKE" ] || fail "$FAKE is not built"

python3 - "$REC" "$WORK/starved.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head, body = rows[0], rows[1:]
t = head.index("t_s")
# Inside the cpu_starved phase (1795965390.8 .. 1795965402.8), off its edges.
pick = [x for x in body if 1795965392.0 <= float(x[t]) <= 1795965401.5]
w = csv.writer(open(sys.argv[2], "w", newline=""), lineterminator="\n")
w.writerow(head); w.writerows(pick)
PY
SOCK="$WORK/run/inject.sock"
cat >"$WORK/g.yml" <<EOF
sampling:
  fast: 100ms
  normal: 500ms
diagnosis:
  window: 2s
  history: 1m
profiling:
  socket: "$SOCK"
EOF
export GPULSE_FAKE_NVML_RECORDING="$WORK/starved.csv" GPULSE_FAKE_NVML_SPEED=1
start_daemon traced --config "$WORK/g.yml" --nvml-library "$FAKE_NVML"
wait_for '[ -S "$SOCK" ]' || fail "no socket at $SOCK"

verdicts() { # the classes of the full windows of the last $1
	fetch "/api/v1/diagnosis?gpu=0&since=$1" | python3 -c '
import json, sys
w = json.load(sys.stdin)["data"]["windows"]
print(" ".join(x["bottleneck"] for x in w if abs(x["end_s"] - x["start_s"] - 2) < 1e-6))'
}
wait_for '[ -n "$(verdicts 10s)" ]' || fail "no windows"
case " $(verdicts 10s) " in
*" launch_bound "*) fail "launch_bound before any trace: $(verdicts 10s)" ;;
esac

"$FAKE" "$SOCK" launchy >"$WORK/launchy.out" 2>"$WORK/launchy.log" &
LAUNCHY=$!
PIDS+=("$LAUNCHY")
wait_for '[ "$(metric gpulse_gpu_bottleneck class=\"launch_bound\")" = 1 ]' ||
	fail "no launch_bound verdict with the trace: $(verdicts 20s)"
fetch "/api/v1/diagnosis?gpu=0&since=4s" | python3 -c '
import json, sys
d = json.load(sys.stdin)["data"]
w = [x for x in d["windows"] if x["bottleneck"] == "launch_bound"]
assert w, [x["bottleneck"] for x in d["windows"]]
x = w[-1]
names = {e["name"]: e for e in x["evidence"]}
assert "injection library" in x["rule"], x["rule"]
m = names["trace_mean_kernel_s"]
assert abs(m["value"] - 8e-6) < 1e-9 and m["holds"], m
r = names["trace_launches_per_s"]
assert 30000 < r["value"] < 45000 and r["holds"], r
o = d["owners"]
assert len(o) == 1 and o[0]["basis"] == "traced_kernel_share", o
assert o[0]["pid"] == int(sys.argv[1]) and abs(o[0]["value"] - 1) < 1e-9, o
' "$LAUNCHY" || fail "launch_bound window or owner"

kill -TERM "$LAUNCHY"
wait "$LAUNCHY" 2>/dev/null || true
# Once the trace has aged out of the window, the counters decide again.
wait_for '[ "$(metric gpulse_gpu_bottleneck class=\"launch_bound\")" = 0 ]' ||
	fail "still launch_bound without a trace"
kill -TERM "$DAEMON_PID"
echo PASS
