# gpulsed's profiling socket against a synthetic injection library
# (tests/profile/fake_inject_client.c, which sends known frames): exact
# values on /metrics and in the store, gpulse kernels, gpulse trace and its
# Chrome trace JSON, bad frames counted without harm, a HELLO that lies
# about its pid refused, the client and cardinality bounds, expiry, a
# second gpulsed on the same socket refused, a restarted gpulsed accepting
# connections again, and gpulse run's environment.
source "$(dirname "$0")/lib.sh"
: "${GPULSE_BUILD_DIR:?}"
FAKE="$GPULSE_BUILD_DIR/tests/fake_inject_client"
[ -x "$FAKE" ] || fail "$FAKE is not built"

SOCK="$WORK/run/inject.sock"
cat >"$WORK/g.yml" <<EOF
storage:
  path: "$WORK/db"
profiling:
  socket: "$SOCK"
  # Clients here go quiet after HELLO: never closed for it while the
  # test runs, however slowly (the 30 s default closed one on a loaded
  # machine, and it read as disconnected).
  idle_timeout: 1h
  kernels_per_process: 4
  max_clients: 4
  max_clients_per_uid: 4
  process_expiry: 2s
  store_interval: 1s
  budget_percent: 0.25
EOF
start_daemon a --config "$WORK/g.yml"
A_PID=$DAEMON_PID
URL_A=$URL
[ -S "$SOCK" ] || wait_for '[ -S "$SOCK" ]' || fail "no socket at $SOCK"
[ "$(stat -c %a "$SOCK")" = 666 ] || fail "socket mode $(stat -c %a "$SOCK"), want 666"
[ "$(metric gpulse_profile_socket_up)" = 1 ] || fail "gpulse_profile_socket_up not 1"

# ---- a well-behaved library: every statistic, twice, and a STATUS.
"$FAKE" "$SOCK" basic >"$WORK/basic.out" 2>"$WORK/basic.log" &
BASIC=$!
PIDS+=("$BASIC")
P="pid=\"$BASIC\""
wait_for '[ "$(metric gpulse_process_kernel_launches_total "$P" kernel=\"gemm_kernel\")" = 200 ]' ||
	fail "gemm_kernel launches: $(metric gpulse_process_kernel_launches_total "$P")"
grep -q "config mode=0 budget_ppm=2500" "$WORK/basic.out" ||
	fail "the client did not get the daemon's CONFIG: $(cat "$WORK/basic.out")"
check() { # NAME EXPECTED MATCH...
	local name=$1 want=$2 got
	shift 2
	got=$(metric "$name" "$P" "$@")
	[ -n "$got" ] || fail "$name $* missing"
	approx "$got" "$want" 1e-12 || fail "$name $* = $got, want $want"
}
check gpulse_process_kernel_seconds_total 0.004 'kernel="gemm_kernel"' 'gpu="0"'
check gpulse_process_kernel_launches_total 600 'kernel="softmax<float, '
check gpulse_process_kernel_seconds_total 0.0012 'kernel="softmax<float, '
check gpulse_process_copy_operations_total 20 'kind="h2d"' 'pinned="true"'
check gpulse_process_copy_bytes_total 20971520 'kind="h2d"' 'pinned="true"'
check gpulse_process_copy_seconds_total 0.002 'kind="h2d"' 'pinned="true"'
check gpulse_process_copy_bytes_total 8192 'kind="d2h"' 'pinned="false"'
check gpulse_process_copy_bytes_total 2048 'kind="memset"'
check gpulse_process_uvm_cpu_page_faults_total 14
check gpulse_process_uvm_gpu_page_faults_total 6
check gpulse_process_uvm_migrated_bytes_total 131072 'direction="h2d"'
check gpulse_process_uvm_thrashing_total 2
check gpulse_process_stream_gap_seconds_total 0.1
check gpulse_process_sync_wait_seconds_total 0.006
check gpulse_process_syncs_total 22
check gpulse_process_nvtx_ranges_total 6 'range="train_step"'
check gpulse_process_nvtx_range_seconds_total 0.6 'range="train_step"'
check gpulse_process_traced_seconds_total 2
check gpulse_inject_overhead_ratio 0.001234
check gpulse_inject_duty_ratio 0.25
check gpulse_inject_budget_ratio 0.005
check gpulse_inject_records_dropped_total 6
check gpulse_inject_frames_dropped_total 2
check gpulse_inject_connected 1
check gpulse_inject_stepped_aside 0 'reason="none"'
check gpulse_inject_info 1 'mode="continuous"' 'source="census"' 'lib_version="test-1"' "uid=\"$(id -u)\""
check gpulse_inject_lasting_cost_ratio 0
[ -n "$(metric gpulse_inject_info "$P" 'comm="fake_inject_cli"')" ] || fail "comm is not read from /proc"
[ "$(metric gpulse_profile_frames_total 'type="KERNELS"')" = 2 ] || fail "KERNELS frames not counted"
[ "$(metric gpulse_profile_clients)" = 1 ] || fail "gpulse_profile_clients not 1"

fetch /metrics >"$WORK/m.txt"
promtool check metrics <"$WORK/m.txt" >"$WORK/pt.log" 2>&1 || fail "promtool: $(cat "$WORK/pt.log")"
curl -sf -H 'Accept: application/openmetrics-text; version=1.0.0' "$URL/metrics" >"$WORK/om.txt"
grep -q '^# TYPE gpulse_process_kernel_launches counter$' "$WORK/om.txt" || fail "OpenMetrics family name"
tail -n1 "$WORK/om.txt" | grep -q '^# EOF$' || fail "OpenMetrics does not end with # EOF"

# ---- the store: the same series, appended every store_interval.
wait_for '[ "$(fetch "/api/v1/query?query=gpulse_process_kernel_launches_total%7Bkernel%3D%22gemm_kernel%22%7D" | python3 -c "import json,sys; r=json.load(sys.stdin)[\"data\"][\"result\"]; print(r[0][\"value\"][1] if r else 0)")" = 200 ]' ||
	fail "gpulse_process_kernel_launches_total not in the store"
[ "$(metric gpulse_profile_store_samples_total 'result="refused"')" = 0 ] || fail "the store refused samples"

# ---- /api/v1/processes and gpulse kernels.
fetch /api/v1/processes | python3 -c '
import json, sys
d = json.load(sys.stdin)["data"]
assert d["profiling"]["serving"] is True, d
p = [x for x in d["processes"] if x["pid"] == int(sys.argv[1])]
assert p, d
p = p[0]
assert p["connected"] and p["mode"] == "continuous" and p["lib_version"] == "test-1", p
assert p["overhead_ratio"] == 0.001234 and p["records_total"] == 12345, p
assert p["source"] == "census" and p["observed_ratio"] == 0.25 and p["lasting_cost_ratio"] == 0, p
assert p["gpus"][0]["kernel_launches"] == 800, p
' "$BASIC" || fail "/api/v1/processes"
GPULSE_URL=$URL "$GPULSE" kernels >"$WORK/k.txt" || fail "gpulse kernels failed"
grep -Eq "^$BASIC +fake_inject_cli +0 +76\.9% +4 ms +200 +20 us +50 us +gemm_kernel$" "$WORK/k.txt" ||
	fail "gpulse kernels: $(cat "$WORK/k.txt")"
grep -Eq "23\.1% .* 600 .*softmax<float, \"fast\">$" "$WORK/k.txt" || fail "gpulse kernels softmax: $(cat "$WORK/k.txt")"
# What the figures are built from: the STATUS said census, 25% observed.
grep -Fxq "$BASIC fake_inject_cli: estimated from launch callbacks over 25% of the time, GPU time from event-timed samples (1 launch in 32)" "$WORK/k.txt" ||
	fail "gpulse kernels source line: $(cat "$WORK/k.txt")"
GPULSE_URL=$URL "$GPULSE" kernels --pid "$BASIC" --json | python3 -c '
import json, sys
k = json.load(sys.stdin)["data"]["kernels"]
assert [x["kernel"] for x in k] == ["gemm_kernel", "softmax<float, \"fast\">"], k
assert k[0]["grid"] == [128, 1, 1] and k[0]["registers"] == 32, k[0]
assert abs(k[0]["p50_seconds"] - 19660.8e-9) < 1e-15, k[0]
' || fail "gpulse kernels --json"
GPULSE_URL=$URL "$GPULSE" kernels --pid 1 | grep -q "No kernels traced" || fail "kernels of an untraced pid"

# ---- gpulse trace: a capture through the socket, as Chrome trace JSON.
GPULSE_URL=$URL "$GPULSE" trace --pid "$BASIC" --seconds 1 -o "$WORK/t.json" 2>"$WORK/trace.log" ||
	fail "gpulse trace: $(cat "$WORK/trace.log")"
grep -q "^capture [0-9]* 1$" "$WORK/basic.out" || fail "the client saw no CAPTURE: $(cat "$WORK/basic.out")"
python3 - "$WORK/t.json" "$BASIC" <<'PY' || fail "trace JSON: $(head -c 2000 "$WORK/t.json")"
import json, sys
doc = json.load(open(sys.argv[1]))
pid = int(sys.argv[2])
ev = doc["traceEvents"]
x = [e for e in ev if e["ph"] == "X"]
assert len(x) == 5, x
assert all(e["pid"] == pid for e in ev)
names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
assert names[7] == "stream 7, gpu 0" and names[8] == "stream 8, gpu 0", names
assert [e["ts"] for e in x] == sorted(e["ts"] for e in x)
k = [e for e in x if e["cat"] == "kernel"]
assert k[0]["name"] == "gemm_kernel" and k[0]["ts"] == 1.0 and k[0]["dur"] == 20.0 and k[0]["tid"] == 7, k
assert k[1]["name"] == 'softmax<float, "fast"> \\ tab\t', k[1]
c = [e for e in x if e["cat"] == "copy"][0]
assert c["args"]["bytes"] == 1048576 and abs(c["args"]["bandwidth_gbps"] - 10.48576) < 1e-9, c
assert c["name"] == "memcpy HtoD" and c["tid"] == 8, c
r = [e for e in x if e["cat"] == "nvtx"][0]
assert r["name"] == "train_step" and r["ts"] == 0 and r["dur"] == 1000.0, r
m = doc["otherData"]
assert m["events"] == 5 and m["complete"] is True and m["cap_hit"] is False, m
assert "traced kernels exactly" in m["gpulse_lasting_cost"] and "15% dearer until it exits" in m["gpulse_lasting_cost"], m
PY
# Said before the capture, on stderr, with nothing to confirm.
grep -q "a capture traces kernels exactly: on CUPTI 13.0 pid $BASIC's kernel launches then stay about 15% dearer until it exits" "$WORK/trace.log" ||
	fail "gpulse trace's warning: $(cat "$WORK/trace.log")"
if GPULSE_URL=$URL "$GPULSE" trace --pid 1 --seconds 1 -o "$WORK/none.json" 2>"$WORK/trace1.log"; then
	fail "a trace of a pid with no library succeeded"
fi
# Said before any word of cost or tracing: gpulse trace asks gpulsed first.
grep -q "knows no process 1 running libgpulse-inject.so" "$WORK/trace1.log" &&
	! grep -q "dearer" "$WORK/trace1.log" || fail "trace error: $(cat "$WORK/trace1.log")"
# gpulsed's own answer for a pid it does not know, asked directly.
code=$(curl -s -o "$WORK/t404.json" -w '%{http_code}' "$URL/api/v1/trace?pid=1&seconds=1")
[ "$code" = 404 ] && grep -q "no process with pid 1" "$WORK/t404.json" ||
	fail "/api/v1/trace?pid=1: $code $(cat "$WORK/t404.json")"
[ ! -e "$WORK/none.json" ] || fail "a failed trace wrote its file"

# ---- bad frames are counted, a bad header ends the connection, the
# daemon goes on.
"$FAKE" "$SOCK" bad >"$WORK/bad.out" 2>&1 || fail "bad client: $(cat "$WORK/bad.out")"
grep -q refused "$WORK/bad.out" || fail "a bad magic did not end the connection"
for r in invalid_payload unknown_type wrong_direction duplicate_hello unknown_capture bad_header; do
	wait_for '[ "$(metric gpulse_profile_bad_frames_total "reason=\"$r\"")" = 1 ]' ||
		fail "bad frames $r: $(metric gpulse_profile_bad_frames_total "reason=\"$r\"")"
done
fetch /healthz >/dev/null || fail "gpulsed died of bad frames"

# ---- a HELLO that names another pid is refused.
"$FAKE" "$SOCK" lie >"$WORK/lie.out" 2>&1 || fail "lying client was not refused: $(cat "$WORK/lie.out")"
wait_for '[ "$(metric gpulse_profile_connections_total result=\"pid_mismatch\")" = 1 ]' || fail "pid_mismatch not counted"

# ---- cardinality: 10 kernels into a table of 4; the heaviest stay.
"$FAKE" "$SOCK" kernels 10 >"$WORK/kern.out" 2>&1 &
KERN=$!
PIDS+=("$KERN")
KP="pid=\"$KERN\""
wait_for '[ "$(metric gpulse_process_kernel_launches_total "$KP" kernel=\"other\")" = 21 ]' ||
	fail "other launches: $(metric gpulse_process_kernel_launches_total "$KP" 'kernel="other"')"
[ "$(metric gpulse_process_kernel_launches_total "$KP" 'kernel="k_9"')" = 10 ] || fail "k_9 is not kept"
[ -z "$(metric gpulse_process_kernel_launches_total "$KP" 'kernel="k_0"')" ] || fail "k_0 was not folded"
[ "$(fetch /metrics | grep -c "^gpulse_process_kernel_launches_total{pid=\"$KERN\"")" = 5 ] ||
	fail "more than 4 named kernels and other"
[ "$(metric gpulse_profile_series_folded_total 'kind="kernel"')" = 6 ] || fail "folded kernels not counted"
[ "$(metric gpulse_profile_kernel_series)" = 6 ] || fail "kernel series: $(metric gpulse_profile_kernel_series)"

# ---- at most max_clients (4) connections: the fifth is closed at once.
"$FAKE" "$SOCK" hold >"$WORK/h1.out" 2>&1 &
PIDS+=("$!")
"$FAKE" "$SOCK" hold >"$WORK/h2.out" 2>&1 &
PIDS+=("$!")
wait_for '[ "$(metric gpulse_profile_clients)" = 4 ]' || fail "clients: $(metric gpulse_profile_clients)"
timeout 10 "$FAKE" "$SOCK" silent >"$WORK/over.out" 2>&1 || fail "fifth client: $(cat "$WORK/over.out")"
grep -q eof "$WORK/over.out" || fail "the fifth client was not closed"
wait_for '[ "$(metric gpulse_profile_connections_total result=\"max_clients\")" = 1 ]' || fail "max_clients not counted"

# ---- processes expire after their library disconnects (2 s here).
wait_for '[ "$(metric gpulse_profile_processes_expired_total)" -ge 1 ]' || fail "no process expired"

# ---- a second gpulsed cannot take the socket.
printf 'profiling:\n  socket: "%s"\n' "$SOCK" >"$WORK/b.yml"
start_daemon b --config "$WORK/b.yml"
[ "$(metric gpulse_profile_socket_up)" = 0 ] || fail "a second gpulsed serves the same socket"
grep -q "another gpulsed serves" "$WORK/b.log" || fail "no warning: $(cat "$WORK/b.log")"
if GPULSE_URL=$URL "$GPULSE" kernels >/dev/null 2>"$WORK/kb.err"; then fail "kernels without a socket succeeded"; fi
grep -q "does not serve the profiling socket: profiling.socket: another gpulsed" "$WORK/kb.err" ||
	fail "kernels error: $(cat "$WORK/kb.err")"
kill "$DAEMON_PID"

# ---- a trace is a write action: no token and not loopback: refused.
printf 'profiling:\n  socket: "%s"\nhttp:\n  allow_insecure_remote: true\n' "$WORK/run2/inject.sock" >"$WORK/d.yml"
start_daemon d --config "$WORK/d.yml" --listen 0.0.0.0:0
[ "$(curl -s -o /dev/null -w '%{http_code}' "$URL/api/v1/trace?pid=$BASIC&seconds=1")" = 403 ] ||
	fail "a trace without a token off loopback was not refused"
kill "$DAEMON_PID"
URL=$URL_A
[ -S "$SOCK" ] || fail "the second gpulsed removed the first one's socket"

# ---- gpulse run: the environment the library reads, then exec.
touch "$WORK/libfake-inject.so"
GPULSE_INJECT_LIB="$WORK/libfake-inject.so" GPULSE_URL=$URL_A \
	"$GPULSE" run --focus nvtx:train_step --budget 0.2% -- env >"$WORK/env.txt" || fail "gpulse run -- env"
grep -qx "CUDA_INJECTION64_PATH=$(realpath "$WORK/libfake-inject.so")" "$WORK/env.txt" || fail "CUDA_INJECTION64_PATH"
grep -qx "GPULSE_MODE=nvtx:train_step" "$WORK/env.txt" || fail "GPULSE_MODE"
grep -qx "GPULSE_BUDGET=0.2%" "$WORK/env.txt" || fail "GPULSE_BUDGET"
grep -qx "GPULSE_SOCKET=$SOCK" "$WORK/env.txt" || fail "GPULSE_SOCKET not asked from gpulsed"
set +e
GPULSE_INJECT_LIB="$WORK/missing.so" "$GPULSE" run -- true 2>"$WORK/run.err"
[ $? = 1 ] || fail "a missing library should exit 1"
grep -q "libgpulse-inject.so not found" "$WORK/run.err" || fail "run error: $(cat "$WORK/run.err")"
GPULSE_INJECT_LIB="$WORK/libfake-inject.so" "$GPULSE" run --budget 200% -- true 2>/dev/null
[ $? = 2 ] || fail "a bad --budget should exit 2"
GPULSE_INJECT_LIB="$WORK/libfake-inject.so" GPULSE_URL=$URL_A "$GPULSE" run -- "$WORK/no-such-program" 2>/dev/null
[ $? = 127 ] || fail "a missing program should exit 127"
set -e

# ---- gpulsed killed and restarted: its stale socket is replaced and a
# library connects again.
kill -9 "$A_PID"
wait_for '! kill -0 "$A_PID" 2>/dev/null' || fail "first gpulsed did not die"
[ -S "$SOCK" ] || fail "the killed gpulsed's socket should still be there"
start_daemon c --config "$WORK/g.yml"
[ "$(metric gpulse_profile_socket_up)" = 1 ] || fail "restarted gpulsed does not serve: $(cat "$WORK/c.log")"
"$FAKE" "$SOCK" basic >"$WORK/basic2.out" 2>&1 &
B2=$!
PIDS+=("$B2")
wait_for '[ "$(metric gpulse_process_kernel_launches_total "pid=\"$B2\"" kernel=\"gemm_kernel\")" = 200 ]' ||
	fail "no statistics after the restart"
[ "$(metric gpulse_profile_connections_total 'result="accepted"')" = 1 ] || fail "accepted after restart"

# ---- a process in its own pid namespace (as in a container) says it is
# pid 1; gpulsed checks that against /proc and keeps it under the pid it
# sees (the one NVML reports). Needs pid namespaces (root or user
# namespaces); skipped, and said so, where unshare cannot make one.
if unshare --pid --fork true 2>/dev/null; then
	unshare --pid --fork "$FAKE" "$SOCK" kernels 3 >"$WORK/ns.out" 2>&1 &
	NSU=$!
	PIDS+=("$NSU")
	wait_for '[ -n "$(pgrep -P "$NSU")" ]' || fail "the namespaced client is gone (refused?): $(cat "$WORK/ns.out")"
	NSP=$(pgrep -P "$NSU")
	grep -Eq '^NSpid:[[:space:]]+'"$NSP"'[[:space:]]+1$' "/proc/$NSP/status" ||
		fail "the client is not pid 1 in its namespace: $(grep NSpid "/proc/$NSP/status")"
	wait_for '[ "$(metric gpulse_process_kernel_launches_total "pid=\"$NSP\"" kernel=\"k_2\")" = 3 ]' ||
		fail "a namespaced process's kernels: $(fetch /metrics | grep 'kernel="k_2"')"
	[ -n "$(metric gpulse_inject_info "pid=\"$NSP\"" 'comm="fake_inject_cli"')" ] || fail "namespaced comm"
	[ -z "$(metric gpulse_inject_info 'pid="1"')" ] || fail "series under the namespace's pid 1"
	[ "$(metric gpulse_profile_connections_total 'result="pid_mismatch"')" = "" ] ||
		[ "$(metric gpulse_profile_connections_total 'result="pid_mismatch"')" = 0 ] || fail "namespaced pid refused"
else
	[ "${CI:-}" != true ] || fail "pid namespaces are not available under CI: the container case was not run"
	echo "skip: pid namespaces are not available here; the container case was not run"
fi
echo "ok"
