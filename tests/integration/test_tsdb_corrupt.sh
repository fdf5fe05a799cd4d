# A damaged chunk in gpulsed's store (issue 14, item 5): one chunk of
# gpulse_gpu_power_watts overwritten with random bytes (the issue's
# `UPDATE chunks SET data = randomblob(...)`, which made every query of the
# series answer 500 "parse error" for the 48 h of retention). gpulsed
# skips it: the query answers 200 with the other chunks' samples,
# /metrics counts it once in gpulse_storage_corrupt_chunks_total however
# often it is read, and the log names the file and the series once.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
need sqlite3
DB=$WORK/store.db
printf 'storage:\n  path: %s\n  flush_interval: 200ms\n' "$DB" >"$WORK/cfg.yml"

# Two runs: the second continues the series in a chunk of its own.
for run in 1 2; do
	start_daemon "run$run" --config "$WORK/cfg.yml" --replay "$REC"
	wait_for '[ "$(metric gpulse_storage_samples_appended_total)" -gt 200 ]' || fail "run $run stored nothing"
	sleep 1
	kill -TERM "$DAEMON_PID"
	wait "$DAEMON_PID" || fail "run $run did not stop cleanly"
done
power_chunks="SELECT c.id FROM chunks c JOIN series s ON s.id = c.series_id
  WHERE instr(s.labels, CAST('gpulse_gpu_power_watts' AS BLOB)) > 0 ORDER BY c.mint"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM ($power_chunks)")" -ge 2 ] || fail "want two chunks of the power series"
sqlite3 "$DB" "UPDATE chunks SET data = randomblob(length(data)) WHERE id = ($power_chunks LIMIT 1)"

start_daemon run3 --config "$WORK/cfg.yml" --replay "$REC"
q='/api/v1/query?query=count_over_time(gpulse_gpu_power_watts%5B1h%5D)'
for i in 1 2 3; do
	code=$(curl -s --max-time 5 -o "$WORK/body" -w '%{http_code}' "$URL$q")
	[ "$code" = 200 ] || fail "query $i answered $code: $(cat "$WORK/body")"
	n=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["data"]["result"]; print(int(float(r[0]["value"][1])) if r else 0)' "$WORK/body")
	[ "$n" -gt 0 ] || fail "query $i: no samples from the sound chunks: $(cat "$WORK/body")"
done
[ "$(metric gpulse_storage_corrupt_chunks_total)" = 1 ] ||
	fail "gpulse_storage_corrupt_chunks_total is $(metric gpulse_storage_corrupt_chunks_total), want 1"
[ "$(grep -c 'damaged chunk skipped' "$WORK/run3.log")" = 1 ] || fail "want one log line about the chunk"
grep -q "tsdb: $DB: damaged chunk skipped (.*): series {__name__=\"gpulse_gpu_power_watts\"" "$WORK/run3.log" ||
	fail "the log line does not name the file and the series: $(grep damaged "$WORK/run3.log")"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "gpulsed did not stop cleanly"
echo "ok: a damaged chunk is skipped (200 with the other chunks' $n samples), counted once and logged once with its series"
