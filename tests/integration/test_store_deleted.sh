# The store deleted under a running gpulsed: noticed at the next flush,
# logged once, counted (gpulse_storage_file_lost_total), and a new store
# made at the path, which holds what comes from then on (it survives a
# restart); its -wal deleted: the store is opened again and nothing that
# was flushed is lost. Before, gpulsed went on writing into the deleted
# file (gpulse_storage_available 1, no log) and the history was gone at
# the next start.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

DB="$WORK/store.db"
printf 'storage:\n  path: %s\n  flush_interval: 200ms\n' "$DB" >"$WORK/gpulsed.yml"
start_daemon del --config "$WORK/gpulsed.yml" --replay "$REC"
# count_at EXPR-RANGE TIME : count_over_time of gpu 0's power over the
# given range at TIME (seconds), 0 when none.
count_at() {
	local body
	body=$(curl -sf --max-time 5 --data-urlencode "query=count_over_time(gpulse_gpu_power_watts{gpu=\"0\"}[$1])" \
		--data-urlencode "time=$2" "$URL/api/v1/query") || { echo 0; return; }
	python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)' <<<"$body"
}
wait_for '[ "$(count_at 1h "$(date +%s)")" -ge 3 ]' || fail "nothing stored"

rm -f "$DB"
deleted=$(date +%s)
wait_for '[ "$(metric gpulse_storage_file_lost_total)" = 1 ]' || fail "the deletion was not counted"
wait_for '[ -s "$DB" ]' || fail "no new store made at the path"
[ "$(metric gpulse_storage_available)" = 1 ] || fail "the new store is not available"
[ "$(grep -c 'was deleted while the store was open' "$WORK/del.log")" = 1 ] ||
	fail "the deletion is not logged exactly once"
wait_for "[ \"\$(count_at 1h \$(date +%s))\" -ge 3 ]" || fail "nothing stored in the new store"

# The -wal deleted: opened again, what was flushed before stays.
wait_for '[ -e "$DB-wal" ]' || fail "no -wal"
t=$(date +%s)
before=$(count_at 1h "$t")
rm -f "$DB-wal"
wait_for '[ "$(metric gpulse_storage_file_lost_total)" = 2 ]' || fail "the -wal deletion was not counted"
grep -q 'store.db-wal was deleted while the store was open' "$WORK/del.log" || fail "the -wal deletion is not logged"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "gpulsed did not stop cleanly"

# What the new store took survives a restart.
start_daemon again --config "$WORK/gpulsed.yml" --replay "$REC"
after=$(count_at 1h "$t")
[ "$after" -ge "$before" ] || fail "samples flushed before the -wal was deleted are gone ($after of $before)"
[ "$(count_at "$((t - deleted + 1))s" "$t")" -ge 1 ] || fail "nothing from after the deletion survived the restart"
echo "ok: $before samples before the -wal was deleted, $after after the restart"
