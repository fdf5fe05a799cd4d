# A store that cannot be written, under a gpulsed that is not root (root
# passes every mode: as root the daemon runs as nobody through setpriv).
# Started on a store made 0444: gpulse_storage_available 0, the query API
# 503 "storage unavailable: …", the samples wait in memory; the mode given
# back: the store is written again within storage.retry_interval and every
# sample taken meanwhile is in it. Then 0444 under the running daemon:
# available 0 again, and once the mode returns nothing taken meanwhile is
# missing. Before, recovery never came (the -shm made 0444 with the store
# kept every new connection read-only) and a mode changed under the
# running daemon went unnoticed.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

if [ "$(id -u)" = 0 ]; then
	need setpriv "util-linux"
	# nobody must reach the binary and the store's directory.
	chmod 755 "$WORK"
	cat >"$WORK/gpulsed-nobody" <<EOF
#!/bin/sh
exec setpriv --reuid=nobody --regid=nogroup --clear-groups "$GPULSED" "\$@"
EOF
	chmod 755 "$WORK/gpulsed-nobody"
	setpriv --reuid=nobody --regid=nogroup --clear-groups test -x "$GPULSED" ||
		fail "$GPULSED cannot be run by nobody"
	GPULSED="$WORK/gpulsed-nobody"
	mkdir "$WORK/store"
	chown nobody:nogroup "$WORK/store"
else
	mkdir "$WORK/store"
fi
DB="$WORK/store/store.db"
printf 'storage:\n  path: %s\n  flush_interval: 200ms\n  retry_interval: 1s\n' "$DB" >"$WORK/gpulsed.yml"

# count_at RANGE TIME : count_over_time of gpu 0's power over RANGE at
# TIME (seconds), 0 when none or when the query fails.
count_at() {
	local body
	body=$(curl -sf --max-time 5 --data-urlencode "query=count_over_time(gpulse_gpu_power_watts{gpu=\"0\"}[$1])" \
		--data-urlencode "time=$2" "$URL/api/v1/query") || { echo 0; return; }
	python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)' <<<"$body"
}
now() { date +%s.%N; }
# ms_since T : milliseconds from T (now's format) to now.
ms_since() { python3 -c 'import sys,time; print(int((time.time()-float(sys.argv[1]))*1000))' "$1"; }
# gpu 0's fast samples so far: each is one sample of its power
sweeps() { metric gpulse_samples_total 'gpu="0"' 'tier="fast"'; }
# samples the store refused as they came (a repeat of a series' newest
# time: two samples in one millisecond under load), not lost by the fault
refused() { metric gpulse_storage_samples_dropped_total; }
# span_ms FROM TO : the range, in whole milliseconds, that reaches FROM at TO
span_ms() { python3 -c 'import sys,math; print(math.ceil((float(sys.argv[2])-float(sys.argv[1]))*1000))' "$1" "$2"; }
unavailable_503() {
	local code
	code=$(curl -s -o "$WORK/q.json" -w '%{http_code}' --max-time 5 "$URL/api/v1/query?query=up")
	[ "$code" = 503 ] && grep -q '"storage unavailable: ' "$WORK/q.json"
}

# ---- a store made by the daemon, then 0444 before it starts again.
start_daemon first --config "$WORK/gpulsed.yml" --replay "$REC"
wait_for '[ "$(count_at 1h "$(date +%s)")" -ge 3 ]' || fail "nothing stored"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "gpulsed did not stop cleanly"
chmod 0444 "$DB"

t0=$(now)
start_daemon ro --config "$WORK/gpulsed.yml" --replay "$REC"
[ "$(metric gpulse_storage_available)" = 0 ] || fail "a 0444 store is reported available"
unavailable_503 || fail "the query API did not answer 503 storage unavailable: $(cat "$WORK/q.json")"
grep -q "not writable" "$WORK/ro.log" || fail "the unwritable store is not logged"
# Retries meanwhile (retry_interval 1s): still unavailable, samples held.
wait_for '[ "$(sweeps)" -ge 30 ]' || fail "no samples collected"
[ "$(metric gpulse_storage_available)" = 0 ] || fail "available while still 0444"
[ "$(metric gpulse_storage_head_bytes)" -gt 0 ] || fail "no samples held in memory"
n1=$(( $(sweeps) - $(refused) ))
t1=$(now)
chmod 0644 "$DB"
wait_for '[ "$(metric gpulse_storage_available)" = 1 ]' ||
	fail "not available again after the mode came back: $(fetch /metrics | grep gpulse_storage_ || true)"
rec1=$(ms_since "$t1")
# Every sample this daemon took (and did not refuse) before the mode came back is stored (the
# range reaches to its start, after the first daemon's last sample).
span=$(span_ms "$t0" "$t1")
wait_for "[ \"\$(count_at ${span}ms $t1)\" -ge $n1 ]" ||
	fail "samples of the unwritable period missing: $(count_at "${span}ms" "$t1") stored of $n1 taken"
got1=$(count_at "${span}ms" "$t1")

# ---- 0444 under the running daemon, then back.
t2=$(now)
n2=$(( $(sweeps) - $(refused) ))
chmod 0444 "$DB"
wait_for '[ "$(metric gpulse_storage_available)" = 0 ]' || fail "a store made 0444 while running stays available"
unavailable_503 || fail "the query API did not answer 503 storage unavailable: $(cat "$WORK/q.json")"
wait_for "[ \"\$(sweeps)\" -ge $((n2 + 30)) ]" || fail "no samples collected while 0444"
[ "$(metric gpulse_storage_available)" = 0 ] || fail "available while still 0444"
n3=$(( $(sweeps) - $(refused) ))
t3=$(now)
chmod 0644 "$DB"
wait_for '[ "$(metric gpulse_storage_available)" = 1 ]' || fail "not available again after the mode came back"
rec2=$(ms_since "$t3")
# The samples taken between t2 and t3 (one counted after t2 may have
# been stamped just before it).
span=$(span_ms "$t2" "$t3")
want=$((n3 - n2 - 1))
wait_for "[ \"\$(count_at ${span}ms $t3)\" -ge $want ]" ||
	fail "samples of the unwritable period missing: $(count_at "${span}ms" "$t3") stored of $want taken"
got2=$(count_at "${span}ms" "$t3")
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "gpulsed did not stop cleanly"
echo "ok: started 0444: $got1 samples stored of $n1 taken, available again ${rec1} ms after chmod 0644;" \
	"0444 while running: $got2 stored of $want, available again ${rec2} ms after (retry 1s)"
