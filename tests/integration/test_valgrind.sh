# gpulsed under valgrind's memcheck (issue 14): a replay with a store,
# recording and alerting rules and a webhook that refuses connections;
# /metrics, the query API (instant, range, series, labels, values), the
# rules and alerts APIs, gpulse status, a SIGHUP reload and a SIGTERM. The
# daemon must exit 0 (valgrind's --error-exitcode makes any memory error
# or definite leak exit 99), and valgrind's log must show no error.
#
# Deterministic by design: nothing waits a fixed time for work to
# happen; every wait is for a condition, with a generous bound (the daemon
# runs 20-50 times slower under memcheck). Skipped (77), and said so,
# where valgrind is missing or gpulsed was built with a sanitizer (the
# ASan stage: the two cannot share a process). VALGRIND=1 in lib.sh runs
# any integration test's daemon this way.
source "$(dirname "$0")/lib.sh"

need valgrind
if grep -q '^GPULSE_\(SANITIZE\|TSAN\):BOOL=ON' "${GPULSE_BUILD_DIR:-/nonexistent}/CMakeCache.txt" 2>/dev/null; then
	echo "SKIP: gpulsed is built with a sanitizer, which cannot run under valgrind"
	exit 77
fi

q() { curl -s --max-time 30 "$URL$1"; }
enc() { python3 -c 'import sys,urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
jcheck() { python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) else 1)"; }
# vwait SECONDS CMD...: wait_for with a bound for memcheck's pace.
vwait() {
	local n=$(($1 * 10))
	shift
	for _ in $(seq 1 "$n"); do
		if eval "$*"; then return 0; fi
		sleep 0.1
	done
	return 1
}

mkdir -p "$WORK/rules"
cat >"$WORK/rules/r.yml" <<'YML'
groups:
  - name: power
    interval: 1s
    rules:
      - record: job:power:avg5s
        expr: avg_over_time(gpulse_gpu_power_watts[5s])
      - alert: PowerSeen
        expr: gpulse_gpu_power_watts > 0
        labels:
          severity: info
        annotations:
          summary: 'GPU {{ $labels.gpu }} draws {{ $value | humanize }} W'
YML
# Port 1 refuses: delivery fails and is retried, the path that frees the
# most.
cat >"$WORK/cfg.yml" <<'YML'
rule_files:
  - rules/r.yml
rule_evaluation_delay: 0s
alerting:
  group_wait: 0s
  webhooks:
    urls: ["http://127.0.0.1:1/hook"]
    timeout: 1s
YML
# A profiling socket of its own (lib.sh's start_daemon does this for the
# daemons it starts).
printf 'profiling:\n  socket: "%s"\n' "$WORK/inject.sock" >>"$WORK/cfg.yml"

: >"$WORK/vg.log"
: >"$WORK/daemon.log"
valgrind "${VG_OPTS[@]}" --error-exitcode=99 --log-file="$WORK/vg.log" \
	"$GPULSED" --listen 127.0.0.1:0 --replay "$REC" --replay-speed 5 \
	--storage-path "$WORK/db" --config "$WORK/cfg.yml" 2>"$WORK/daemon.log" &
DAEMON_PID=$!
PIDS+=("$DAEMON_PID")
PORT=""
vwait 180 '[ -n "$(sed -n "s/.*serving http[s]*:\/\/.* port \([0-9]*\) .*/\1/p" "$WORK/daemon.log" | head -n1)" ] || ! kill -0 $DAEMON_PID 2>/dev/null' ||
	fail "gpulsed under valgrind did not start serving in 180 s"
kill -0 "$DAEMON_PID" 2>/dev/null || fail "gpulsed under valgrind exited early: $(tail -n 40 "$WORK/vg.log")"
PORT=$(sed -n 's/.*serving http[s]*:\/\/.* port \([0-9]*\) .*/\1/p' "$WORK/daemon.log" | head -n1)
URL="http://127.0.0.1:$PORT"

vwait 120 '[ -n "$(metric gpulse_gpu_power_watts gpu=\"0\")" ]' || fail "no replayed values"
vwait 120 'q "/api/v1/query?query=$(enc job:power:avg5s)" | jcheck "len(d[\"data\"][\"result\"])>=1"' ||
	fail "no recorded series: $(q "/api/v1/query?query=job:power:avg5s")"
vwait 120 'q /api/v1/alerts | jcheck "any(a[\"state\"]==\"firing\" for a in d[\"data\"][\"alerts\"])"' ||
	fail "the alert does not fire: $(q /api/v1/alerts)"
vwait 120 '[ "$(metric gpulse_notifications_errors_total)" != "" ] && [ "$(metric gpulse_notifications_errors_total)" != 0 ]' ||
	fail "the refused webhook is not counted: $(q /metrics | grep notifications_errors)"

now=$(date +%s)
q "/api/v1/query_range?query=$(enc 'rate(gpulse_gpu_energy_joules_total[10s]) or gpulse_gpu_power_watts')&start=$((now - 60))&end=$now&step=2" |
	jcheck 'd["status"]=="success"' || fail "query_range"
q "/api/v1/series?match[]=$(enc 'gpulse_gpu_power_watts')" | jcheck 'd["status"]=="success" and d["data"]' ||
	fail "series"
q /api/v1/labels | jcheck '"gpu" in d["data"]' || fail "labels"
q /api/v1/label/gpu/values | jcheck '"0" in d["data"]' || fail "label values"
q "/api/v1/query?query=$(enc 'sum by (gpu) (avg_over_time(gpulse_gpu_power_watts[30s]))')" |
	jcheck 'd["status"]=="success"' || fail "instant query"
q "/api/v1/query?query=$(enc 'sum(')" | jcheck 'd["status"]=="error"' || fail "a bad query is not an error"
q /api/v1/rules | jcheck 'len(d["data"]["groups"])==1' || fail "rules"
# The body whole first: `q | grep -q` let curl die of SIGPIPE when grep
# left early, failing the pipeline under pipefail (once in a CI rehearsal).
body=$(q /metrics)
grep -q '^gpulse_rule_evaluations_total' <<<"$body" || fail "/metrics lacks the rule families"
"$GPULSE" status --url "$URL" --no-color >"$WORK/status.txt" || fail "gpulse status"

# A reload (SIGHUP) replaces the rules; counted once it is done.
kill -HUP "$DAEMON_PID"
vwait 120 '[ "$(metric gpulse_config_reloads_total result=\"success\")" = 1 ]' ||
	fail "the reload is not counted: $(tail -n 5 "$WORK/daemon.log")"
q /api/v1/rules | jcheck 'len(d["data"]["groups"])==1' || fail "rules after the reload"

kill -TERM "$DAEMON_PID"
set +e
wait "$DAEMON_PID"
rc=$?
set -e
PIDS=()
grep -q 'ERROR SUMMARY: 0 errors' "$WORK/vg.log" && [ "$rc" = 0 ] || {
	echo "--- valgrind's log" >&2
	cat "$WORK/vg.log" >&2
	fail "gpulsed under valgrind exited $rc (99: memcheck found errors)"
}
grep -E 'lost:|reachable:|heap blocks were freed|ERROR SUMMARY' "$WORK/vg.log" || true
echo "ok: gpulsed ran clean under memcheck"
