# The real libgpulse-inject.so talking to a real gpulsed, without a GPU:
# tests/profile/fake_cuda_app loads the library against the CUPTI
# stand-in (tests/fake_cupti) and launches known kernels and copies.
# Checked: gpulsed's per-process and per-kernel series hold exactly what
# the application did; the process's own GPULSE_MODE and GPULSE_BUDGET
# outrank gpulsed's profiling defaults (full at 0.2% stays so, though
# gpulsed sends continuous at 0.5%); gpulse trace captures the running
# process as Chrome trace JSON; gpulse kernels lists the kernel; the
# library connects, reports its mode and leaves cleanly. What each
# process's figures are built from: the full-mode one is exact and,
# having traced kernels, reports their lasting cost (0.15); a second
# process, in continuous mode, reports census estimates and no lasting
# cost, and gpulse kernels says which is which. Skipped (77), and said
# so, where the library was not built (no CUPTI headers).
source "$(dirname "$0")/lib.sh"
: "${GPULSE_BUILD_DIR:?}"
APP="$GPULSE_BUILD_DIR/tests/fake_cuda_app"
LIB="$GPULSE_BUILD_DIR/src/inject/libgpulse-inject.so"
FAKE="$GPULSE_BUILD_DIR/tests/libfake_cupti.so"
if [ ! -x "$APP" ] || [ ! -f "$LIB" ] || [ ! -f "$FAKE" ]; then
	skip_or_fail "libgpulse-inject.so or the CUPTI stand-in was not built here (no CUPTI headers)"
fi

SOCK="$WORK/run/inject.sock"
cat >"$WORK/g.yml" <<YML
profiling:
  socket: "$SOCK"
  budget_percent: 0.5
YML
start_daemon a --config "$WORK/g.yml"
wait_for '[ -S "$SOCK" ]' || fail "no socket"

GPULSE_MODE=full GPULSE_BUDGET=0.2% GPULSE_SOCKET="$SOCK" GPULSE_INJECT_DUMP="$WORK/dump.json" \
	"$APP" "$FAKE" "$LIB" 4 >"$WORK/app.out" 2>"$WORK/app.log" &
APP_PID=$!
PIDS+=("$APP_PID")
P="pid=\"$APP_PID\""
# Beside it, the default mode: launch callbacks in census windows, no
# kernel tracing (no capture is asked of this one).
GPULSE_MODE=continuous GPULSE_SOCKET="$SOCK" \
	"$APP" "$FAKE" "$LIB" 3 >"$WORK/cont.out" 2>"$WORK/cont.log" &
CONT_PID=$!
PIDS+=("$CONT_PID")
C="pid=\"$CONT_PID\""
# A continuous-mode program of one second that migrates 256 MiB of
# managed memory before anything else: every byte reaches gpulsed (the
# counters go on at its first context, and its exit flushes them).
GPULSE_MODE=continuous GPULSE_SOCKET="$SOCK" \
	"$APP" "$FAKE" "$LIB" 1 uvm >"$WORK/uvm.out" 2>"$WORK/uvm.log" &
UVM_PID=$!
PIDS+=("$UVM_PID")
U="pid=\"$UVM_PID\""
# Long kernel names (the app's `names` mode): two whose names share their
# first 301 bytes, and one of 10 KB, from two processes (full and
# continuous mode).
GPULSE_MODE=full GPULSE_SOCKET="$SOCK" \
	"$APP" "$FAKE" "$LIB" 5 names >"$WORK/names.out" 2>"$WORK/names.log" &
NAMES_PID=$!
PIDS+=("$NAMES_PID")
GPULSE_MODE=continuous GPULSE_SOCKET="$SOCK" \
	"$APP" "$FAKE" "$LIB" 1 names >"$WORK/names2.out" 2>"$WORK/names2.log" &
NAMES2_PID=$!
PIDS+=("$NAMES2_PID")
# While it runs: connected, in its own mode and budget.
wait_for '[ "$(metric gpulse_inject_connected "$P")" = 1 ]' || fail "the library did not connect"
wait_for '[ -n "$(metric gpulse_inject_info "$P" mode=\"full\")" ]' ||
	fail "mode: $(fetch /metrics | grep "^gpulse_inject_info{$P")"
wait_for '[ "$(metric gpulse_inject_budget_ratio "$P")" = 0.002 ]' ||
	fail "budget: $(metric gpulse_inject_budget_ratio "$P")"
# gpulse trace while it runs: a capture by the library, as Chrome trace
# JSON (10 kernels of 50 us every 10 ms, one stream).
GPULSE_URL=$URL "$GPULSE" trace --pid "$APP_PID" --seconds 1 -o "$WORK/t.json" 2>"$WORK/trace.log" ||
	fail "gpulse trace: $(cat "$WORK/trace.log")"
grep -q "a capture traces kernels exactly: on CUPTI 13.0 pid $APP_PID's kernel launches then stay about 15% dearer until it exits" "$WORK/trace.log" ||
	fail "gpulse trace's warning: $(cat "$WORK/trace.log")"
python3 - "$WORK/t.json" "$APP_PID" <<'PY' || fail "trace JSON: $(head -c 1500 "$WORK/t.json")"
import json, sys
doc = json.load(open(sys.argv[1]))
pid = int(sys.argv[2])
x = [e for e in doc["traceEvents"] if e["ph"] == "X"]
k = [e for e in x if e["cat"] == "kernel"]
assert 500 <= len(k) <= 1100, len(k)  # 1 s of 1000 launches/s, give or take a burst
assert all(e["name"] == "k_e2e(float*)" and e["dur"] == 50.0 and e["tid"] == 7 and e["pid"] == pid for e in k), k[:3]
assert [e["ts"] for e in x] == sorted(e["ts"] for e in x)
m = doc["otherData"]
assert m["complete"] is True and m["cap_hit"] is False and m["events"] == len(x), m
assert "15% dearer until it exits" in m["gpulse_lasting_cost"], m
PY
# The long-names process, traced while it runs.
N="pid=\"$NAMES_PID\""
wait_for '[ "$(metric gpulse_inject_connected "$N")" = 1 ]' || fail "names: did not connect"
GPULSE_URL=$URL "$GPULSE" trace --pid "$NAMES_PID" --seconds 1 -o "$WORK/names-trace.json" 2>"$WORK/names-trace.log" ||
	fail "gpulse trace (names): $(cat "$WORK/names-trace.log")"
wait "$APP_PID" || fail "the application failed: $(cat "$WORK/app.log")"
read -r _ KERNELS _ COPIES <"$WORK/app.out"
[ "$KERNELS" -gt 0 ] || fail "app output: $(cat "$WORK/app.out")"
# After its exit flush: every launch and copy, exactly.
wait_for '[ "$(metric gpulse_process_kernel_launches_total "$P" kernel=\"k_e2e\(float\*\)\")" = "$KERNELS" ]' ||
	fail "launches: $(metric gpulse_process_kernel_launches_total "$P") of $KERNELS"
want_s=$(awk -v n="$KERNELS" 'BEGIN { printf "%.6f", n * 50e-6 }')
got_s=$(metric gpulse_process_kernel_seconds_total "$P" 'kernel="k_e2e(float*)"')
approx "$got_s" "$want_s" 1e-9 || fail "kernel seconds $got_s, want $want_s"
[ "$(metric gpulse_process_copy_bytes_total "$P" 'kind="h2d"' 'pinned="true"')" = $((COPIES * 1048576)) ] ||
	fail "h2d bytes: $(metric gpulse_process_copy_bytes_total "$P")"
[ "$(metric gpulse_inject_records_dropped_total "$P")" = 0 ] || fail "records dropped"
GPULSE_URL=$URL "$GPULSE" kernels --pid "$APP_PID" >"$WORK/kernels.txt" 2>&1 || fail "gpulse kernels: $(cat "$WORK/kernels.txt")"
grep -q "k_e2e(float\*)" "$WORK/kernels.txt" || fail "gpulse kernels: $(cat "$WORK/kernels.txt")"
# Exact, and dearer for the rest of its life: the library's STATUS said
# so (the series exists only once a STATUS came).
[ "$(metric gpulse_inject_lasting_cost_ratio "$P")" = 0.15 ] ||
	fail "lasting cost: $(fetch /metrics | grep "^gpulse_inject_lasting_cost_ratio")"
[ -n "$(metric gpulse_inject_info "$P" 'source="trace"')" ] ||
	fail "source: $(fetch /metrics | grep "^gpulse_inject_info{$P")"
grep -Fxq "$APP_PID fake_cuda_app: exact (kernel activity trace); this process's launches stay about 15% dearer until it exits (CUPTI 13.0)" "$WORK/kernels.txt" ||
	fail "gpulse kernels, exact line: $(cat "$WORK/kernels.txt")"
wait_for '[ "$(metric gpulse_inject_connected "$P")" = 0 ]' || fail "still connected after exit"
# The library's own account agrees.
grep -q '"mode": "full"' "$WORK/dump.json" || fail "dump mode: $(head -c 300 "$WORK/dump.json")"
# One line is expected: full mode says what exact tracing costs the process.
! grep "gpulse-inject:" "$WORK/app.log" | grep -qv "exact kernel tracing is on" ||
	fail "the library complained: $(cat "$WORK/app.log")"

# ---- The continuous-mode process: estimates, and nothing lasting.
wait "$CONT_PID" || fail "the continuous application failed: $(cat "$WORK/cont.log")"
wait_for '[ "$(metric gpulse_inject_connected "$C")" = 0 ]' || fail "continuous: still connected after exit"
[ "$(metric gpulse_inject_lasting_cost_ratio "$C")" = 0 ] ||
	fail "continuous lasting cost: $(fetch /metrics | grep "^gpulse_inject_lasting_cost_ratio")"
[ -n "$(metric gpulse_inject_info "$C" 'mode="continuous"' 'source="census"')" ] ||
	fail "continuous source: $(fetch /metrics | grep "^gpulse_inject_info{$C")"
fetch /api/v1/processes | python3 -c '
import json, sys
p = [x for x in json.load(sys.stdin)["data"]["processes"] if x["pid"] == int(sys.argv[1])][0]
assert p["source"] == "census" and p["lasting_cost_ratio"] == 0, p
assert 0 < p["observed_ratio"] <= 1, p
' "$CONT_PID" || fail "/api/v1/processes, continuous: $(fetch /api/v1/processes)"
[ "$(metric gpulse_process_kernel_launches_total "$C" 'kernel="k_e2e(float*)"')" -gt 0 ] ||
	fail "continuous: no launches estimated: $(fetch /metrics | grep "^gpulse_process_kernel_launches_total")"
GPULSE_URL=$URL "$GPULSE" kernels --pid "$CONT_PID" >"$WORK/kernels-cont.txt" 2>&1 ||
	fail "gpulse kernels: $(cat "$WORK/kernels-cont.txt")"
grep -Eq "^$CONT_PID fake_cuda_app: estimated from launch callbacks over [0-9]+% of the time, GPU time from event-timed samples \(1 launch in 32\)$" "$WORK/kernels-cont.txt" ||
	fail "gpulse kernels, census line: $(cat "$WORK/kernels-cont.txt")"
! grep -q "exact kernel tracing is on" "$WORK/cont.log" || fail "continuous mode traced kernels: $(cat "$WORK/cont.log")"

# ---- The one-second continuous program's unified memory, exactly.
wait "$UVM_PID" || fail "the uvm application failed: $(cat "$WORK/uvm.log")"
read -r _ UK _ UC _ UH _ UD <"$WORK/uvm.out"
[ "$UH" = $((256 << 20)) ] && [ "$UD" = $((64 << 20)) ] || fail "uvm app output: $(cat "$WORK/uvm.out")"
wait_for '[ "$(metric gpulse_inject_connected "$U")" = 0 ]' || fail "uvm: still connected after exit"
[ "$(metric gpulse_process_uvm_migrated_bytes_total "$U" 'direction="h2d"')" = "$UH" ] ||
	fail "uvm h2d bytes: $(fetch /metrics | grep "^gpulse_process_uvm_migrated_bytes_total{$U")"
[ "$(metric gpulse_process_uvm_migrated_bytes_total "$U" 'direction="d2h"')" = "$UD" ] ||
	fail "uvm d2h bytes: $(fetch /metrics | grep "^gpulse_process_uvm_migrated_bytes_total{$U")"
[ "$(metric gpulse_process_copy_bytes_total "$U" 'kind="h2d"' 'pinned="true"')" = $((UC * 1048576)) ] ||
	fail "uvm program's h2d copy bytes: $(fetch /metrics | grep "^gpulse_process_copy_bytes_total{$U")"
[ -n "$(metric gpulse_inject_info "$U" 'mode="continuous"')" ] ||
	fail "uvm program's mode: $(fetch /metrics | grep "^gpulse_inject_info{$U")"

# ---- Long kernel names: two rows wherever kernels are listed, the whole
# name where it is shown, a stable id of the 10 KB one across processes.
wait "$NAMES_PID" || fail "the names application failed: $(cat "$WORK/names.log")"
wait "$NAMES2_PID" || fail "the second names application failed: $(cat "$WORK/names2.log")"
wait_for '[ "$(metric gpulse_inject_connected "$N")" = 0 ]' || fail "names: still connected after exit"
wait_for '[ "$(metric gpulse_inject_connected "pid=\"$NAMES2_PID\"")" = 0 ]' || fail "names 2: still connected after exit"
read -r _ _ _ _ _ BURSTS <"$WORK/names.out"
[ "$BURSTS" -gt 0 ] || fail "names app output: $(cat "$WORK/names.out")"
fetch /metrics >"$WORK/names-metrics.txt" || fail "no /metrics"
fetch "/api/v1/kernels?pid=$NAMES_PID&limit=100" >"$WORK/names-api.json" || fail "no /api/v1/kernels"
fetch "/api/v1/kernels?pid=$NAMES2_PID&limit=100" >"$WORK/names2-api.json" || fail "no /api/v1/kernels (2)"
GPULSE_URL=$URL "$GPULSE" kernels --pid "$NAMES_PID" --limit 100 >"$WORK/names-kernels.txt" 2>&1 ||
	fail "gpulse kernels (names): $(cat "$WORK/names-kernels.txt")"
python3 - "$WORK" "$NAMES_PID" "$BURSTS" <<'PY' || fail "long names: see above"
import json, re, sys
work, pid, bursts = sys.argv[1], sys.argv[2], int(sys.argv[3])
def fnv(b):
    h = 0xcbf29ce484222325
    for c in b:
        h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff
    return h
def fit(name, bound):
    b = name.encode()
    if len(b) <= bound:
        return name
    tail = "...#%016x" % fnv(b)
    return b[:bound - len(tail)].decode() + tail
n1 = "x" * 301 + "<1>(float*)" + "1" * 88
n2 = "x" * 301 + "<2>(float*)" + "2" * 88
n3 = fit("L" * 10239, 4096)
want = {n1: bursts, n2: 2 * bursts, n3: 3 * bursts}
# /metrics: one series per kernel, by kernel_id, its label the name (fitted to 1024 bytes).
got = {}
for line in open(work + "/names-metrics.txt"):
    if line.startswith("gpulse_process_kernel_launches_total{") and 'pid="%s"' % pid in line:
        kid = re.search(r'kernel_id="([0-9a-f]{16})"', line).group(1)
        label = re.search(r'kernel="([^"]*)"', line).group(1)
        got[kid] = (label, float(line.rsplit(" ", 1)[1]))
for name, n in want.items():
    kid = "%016x" % fnv(name.encode())
    assert kid in got, (kid, sorted(got))
    assert got[kid] == (fit(name, 1024), n), (name[:40], got[kid][0][:40], got[kid][1], n)
# /api/v1/kernels: the whole name, its id.
rows = {r["kernel"]: r for r in json.load(open(work + "/names-api.json"))["data"]["kernels"]}
for name, n in want.items():
    assert name in rows, (name[:40], [k[:40] for k in rows])
    assert rows[name]["launches"] == n and rows[name]["kernel_id"] == "%016x" % fnv(name.encode()), rows[name]
assert len(n3.encode()) == 4096
# The 10 KB name's id is the same from the other process (continuous mode).
rows2 = {r["kernel"]: r for r in json.load(open(work + "/names2-api.json"))["data"]["kernels"]}
assert n3 in rows2 and rows2[n3]["kernel_id"] == rows[n3]["kernel_id"], [k[:40] for k in rows2]
# gpulse kernels prints each whole.
text = open(work + "/names-kernels.txt").read()
for name in want:
    assert re.search(r"  " + re.escape(name) + r"$", text, re.M), name[:40]
# The capture: the three as three names.
doc = json.load(open(work + "/names-trace.json"))
names = {e["name"] for e in doc["traceEvents"] if e.get("ph") == "X" and e["cat"] == "kernel"}
assert {n1, n2, n3} <= names, [n[:40] for n in names]
PY
echo "ok"
