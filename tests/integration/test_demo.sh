# gpulsed --demo (what `make run` starts), with no NVIDIA driver: the first
# log line says it replays the bundled recording, the last start-up line
# says where it listens and what to try; history goes to a temporary store
# (removed at exit) and the shipped rule pack runs, so the query API, the
# rules, `gpulse alerts`, `gpulse query` and `gpulse diagnose --since 10m`
# answer within 30 s instead of 503.
source "$(dirname "$0")/lib.sh"

: "${GPULSE_SOURCE_DIR:?}"
PACK="$GPULSE_SOURCE_DIR/deploy/rules/gpulse.rules.yml"
q() { curl -s --max-time 5 "$URL$1"; }
jcheck() { python3 -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($1) else 1)"; }
# wait_long CMD... : retry a condition for up to 30 s.
wait_long() {
	for _ in $(seq 1 300); do
		if eval "$*"; then return 0; fi
		sleep 0.1
	done
	return 1
}

mkdir -p "$WORK/tmp"
export TMPDIR="$WORK/tmp"
unset GPULSE_DATA_DIR
# An NVML that cannot load: the demo replays whatever the machine has.
start_daemon demo --demo --nvml-library "$WORK/no-libnvidia-ml.so.1"

head -n1 "$WORK/demo.log" | grep -q '^gpulsed: warning: demo: no usable NVIDIA driver .*REPLAYING the bundled real H200 recording' ||
	fail "first line does not say it replays: $(head -n1 "$WORK/demo.log")"
grep -q "storage: keeping samples in $WORK/tmp/gpulse-demo\..*/gpulse.db (a temporary store" "$WORK/demo.log" ||
	fail "no temporary store: $(cat "$WORK/demo.log")"
# The last start-up line (before anything the running daemon logs later).
serving=$(grep -n 'serving http' "$WORK/demo.log" | tail -n1)
grep -Eq "serving http://127.0.0.1:0 port $PORT \(gpulsed [^)]*\); try: [^ ]*gpulse --url http://127.0.0.1:$PORT status.*; dashboard: http://127.0.0.1:$PORT/$" <<<"$serving" ||
	fail "last start-up line: $serving"

wait_long '[ "$(q "/api/v1/query?query=gpulse_gpu_up" | jcheck "d[\"status\"]==\"success\" and len(d[\"data\"][\"result\"])==1 and d[\"data\"][\"result\"][0][\"value\"][1]==\"1\"" && echo y)" = y ]' ||
	fail "/api/v1/query?query=gpulse_gpu_up: $(q "/api/v1/query?query=gpulse_gpu_up")"
want=$(sed -n 's/^  - name: \(.*\)$/\1/p' "$PACK" | paste -sd, -)
[ -n "$want" ] || fail "no groups read from $PACK"
q /api/v1/rules | jcheck "[g[\"name\"] for g in d[\"data\"][\"groups\"]] == \"$want\".split(\",\") and all(g[\"file\"].endswith(\"gpulse.rules.yml\") for g in d[\"data\"][\"groups\"])" ||
	fail "/api/v1/rules lacks the pack's groups ($want): $(q /api/v1/rules | head -c 600)"
"$GPULSE" alerts --url "$URL" >"$WORK/alerts.out" 2>&1 || fail "gpulse alerts: $(cat "$WORK/alerts.out")"
"$GPULSE" query --url "$URL" gpulse_gpu_up >"$WORK/query.out" 2>&1 || fail "gpulse query: $(cat "$WORK/query.out")"
grep -q 'gpulse_gpu_up' "$WORK/query.out" || fail "gpulse query: $(cat "$WORK/query.out")"
"$GPULSE" diagnose --url "$URL" --since 10m >"$WORK/diag.out" 2>&1 || fail "gpulse diagnose --since 10m: $(cat "$WORK/diag.out")"

# SIGTERM: a clean stop that takes the temporary store with it.
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "gpulsed --demo did not stop cleanly"
[ -z "$(ls -A "$WORK/tmp")" ] || fail "temporary store left behind: $(ls -A "$WORK/tmp")"

# With storage.path given, --demo keeps history there, and nothing
# temporary is made.
start_daemon demo2 --demo --nvml-library "$WORK/no-libnvidia-ml.so.1" --storage-path "$WORK/kept.db"
grep -q "storage: keeping samples in $WORK/kept.db$" "$WORK/demo2.log" || fail "storage.path not used: $(cat "$WORK/demo2.log")"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "gpulsed --demo --storage-path did not stop cleanly"
[ -f "$WORK/kept.db" ] || fail "the given store is gone"
[ -z "$(ls -A "$WORK/tmp")" ] || fail "temporary store made beside storage.path: $(ls -A "$WORK/tmp")"
echo PASS
