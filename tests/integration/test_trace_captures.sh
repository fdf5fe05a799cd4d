# Trace captures hold no HTTP thread (issue 14, item 3): /api/v1/trace
# is served with its connection suspended while the capture runs, so
# /metrics and /healthz answer at once while four captures wait on their
# processes (before: each held one of the 2 HTTP threads for seconds + 5);
# `gpulse trace` works unchanged meanwhile; a fifth capture gets 503
# "unavailable" at once; gpulsed stops promptly with captures running,
# answering each.
# The processes are tests/profile/fake_inject_client: `mute` ones never
# answer a capture (it waits its seconds plus 5), `basic` answers at once.
source "$(dirname "$0")/lib.sh"
: "${GPULSE_BUILD_DIR:?}"
FAKE="$GPULSE_BUILD_DIR/tests/fake_inject_client"
[ -x "$FAKE" ] || fail "$FAKE is not built"

SOCK="$WORK/run/inject.sock"
# The mute clients send nothing after HELLO: the idle timeout (30 s by
# default) must not close them while the test runs, however slowly (on a
# loaded machine it did, and the captures answered 200 early).
cat >"$WORK/g.yml" <<EOF
profiling:
  socket: "$SOCK"
  idle_timeout: 1h
EOF
start_daemon a --config "$WORK/g.yml"
A_PID=$DAEMON_PID
wait_for '[ -S "$SOCK" ]' || fail "no socket at $SOCK"
jcheck() { python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) else 1)"; }

"$FAKE" "$SOCK" basic >"$WORK/basic.out" 2>&1 &
BASIC=$!
PIDS+=("$BASIC")
HOLD=()
for i in 1 2 3 4 5; do
	"$FAKE" "$SOCK" mute >"$WORK/hold$i.out" 2>&1 &
	HOLD+=("$!")
	PIDS+=("$!")
done
wait_for '[ "$(metric gpulse_profile_clients)" = 6 ]' || fail "clients: $(metric gpulse_profile_clients)"

# capture PID SECONDS OUT: a capture in the background, its status code
# written to OUT.code.
capture() {
	(curl -s --max-time 120 -o "$3" -w '%{http_code}' "$URL/api/v1/trace?pid=$1&seconds=$2" \
		>"$3.code" || true) &
	PIDS+=("$!")
}

# quick PATH: fetched within 2 s, or fail.
worst=0
quick() {
	local t
	t=$(curl -sf -o /dev/null -w '%{time_total}' --max-time 2 "$URL$1") ||
		fail "$1 did not answer within 2 s while captures run"
	worst=$(python3 -c "print(max($worst, $t))")
}

# ---- three captures of 60 s: more than the 2 HTTP threads.
for i in 0 1 2; do
	capture "${HOLD[$i]}" 60 "$WORK/c$i.json"
done
wait_for '[ "$(metric gpulse_trace_captures_running)" = 3 ]' ||
	fail "captures running: $(metric gpulse_trace_captures_running), want 3"
for _ in $(seq 1 10); do quick /metrics; quick /healthz; done

# ---- a pid gpulsed does not know: said at once, with no word of cost or tracing.
rc=0
GPULSE_URL=$URL "$GPULSE" trace --pid 999999 --seconds 1 -o "$WORK/none.json" 2>"$WORK/none.log" || rc=$?
[ "$rc" = 1 ] || fail "gpulse trace --pid 999999: exit $rc, want 1: $(cat "$WORK/none.log")"
grep -q "knows no process 999999 running libgpulse-inject.so" "$WORK/none.log" &&
	! grep -qE "dearer|tracing pid" "$WORK/none.log" ||
	fail "gpulse trace --pid 999999 said: $(cat "$WORK/none.log")"
[ ! -e "$WORK/none.json" ] || fail "gpulse trace --pid 999999 wrote a file"

# ---- gpulse trace, unchanged, while they run: the fourth slot.
GPULSE_URL=$URL "$GPULSE" trace --pid "$BASIC" --seconds 1 -o "$WORK/t.json" 2>"$WORK/trace.log" ||
	fail "gpulse trace while 3 captures run: $(cat "$WORK/trace.log")"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["traceEvents"]) > 0 and d["otherData"]["complete"] is True, d["otherData"]' \
	"$WORK/t.json" || fail "trace JSON: $(head -c 1000 "$WORK/t.json")"

# ---- four running: a fifth is refused at once, and scrapes go on.
capture "${HOLD[3]}" 60 "$WORK/c3.json"
wait_for '[ "$(metric gpulse_trace_captures_running)" = 4 ]' ||
	fail "captures running: $(metric gpulse_trace_captures_running), want 4"
code=$(curl -s -o "$WORK/busy.json" -w '%{http_code}' --max-time 2 "$URL/api/v1/trace?pid=${HOLD[4]}&seconds=1") ||
	fail "the fifth capture was not answered within 2 s"
[ "$code" = 503 ] || fail "the fifth capture got $code: $(cat "$WORK/busy.json")"
jcheck 'd["status"]=="error" and d["errorType"]=="unavailable" and "4 captures are already running" in d["error"]' \
	<"$WORK/busy.json" || fail "fifth capture's answer: $(cat "$WORK/busy.json")"
[ "$(metric gpulse_trace_captures_rejected_total)" = 1 ] ||
	fail "gpulse_trace_captures_rejected_total $(metric gpulse_trace_captures_rejected_total), want 1"
# gpulse trace says why.
if GPULSE_URL=$URL "$GPULSE" trace --pid "$BASIC" --seconds 1 -o "$WORK/t2.json" 2>"$WORK/trace2.log"; then
	fail "a trace over the bound succeeded"
fi
grep -q "gpulsed answered 503: 4 captures are already running" "$WORK/trace2.log" ||
	fail "gpulse trace over the bound: $(cat "$WORK/trace2.log")"
for _ in $(seq 1 10); do quick /metrics; quick /healthz; done
echo "worst /metrics or /healthz latency while captures run: ${worst}s"
for i in 0 1 2 3; do [ ! -s "$WORK/c$i.json.code" ] || fail "capture $i answered early: $(cat "$WORK/c$i.json.code")"; done

# ---- SIGTERM with four captures waiting: they answer, gpulsed stops.
kill -TERM "$A_PID"
wait_for '! kill -0 "$A_PID" 2>/dev/null' || fail "gpulsed did not stop within 15 s of SIGTERM with captures running"
# Exit status 0: under the sanitizers, no leak or error at the stop either.
rc=0
wait "$A_PID" || rc=$?
[ "$rc" = 0 ] || fail "gpulsed exited $rc after SIGTERM"
# Each capture is answered before the server closes: 503, "gpulsed is
# stopping", as before captures left the HTTP threads.
for i in 0 1 2 3; do
	wait_for '[ -s "$WORK/c$i.json.code" ]' || fail "capture $i got no status"
	[ "$(cat "$WORK/c$i.json.code")" = 503 ] && grep -q "gpulsed is stopping" "$WORK/c$i.json" ||
		fail "capture $i at stop: $(cat "$WORK/c$i.json.code") $(cat "$WORK/c$i.json")"
done
echo "ok: 4 captures answered 503 at stop"
