# gpulsed started on a full disk (issue 14, item 4): an existing store
# (WAL, closed cleanly) and a new one on a 1 MiB tmpfs that a filler file
# has filled to the last byte. gpulsed starts anyway, without history: it
# logs why ("storage.path: FILE: disk full (SQLITE_FULL) ..." or "...: I/O
# error ..."), serves /metrics and the live GPUs, exports
# gpulse_storage_available 0 and counts its attempts, the query API
# answers 503 "storage unavailable: ...", and once space is freed the
# store opens within storage.retry_interval (1s here): available 1, the
# query API serves what is ingested from then on. Meanwhile an alerting
# rule over a range (it needs history) fires from the in-memory history,
# as without storage, and a recording rule fails, counted; once the store
# opens, the rules, the profiling server and the anomaly detector write
# to it. A truncated or foreign
# file still stops it with exit 2. Needs `mount -t tmpfs`: CI runs as
# root, so it runs there; where mount is refused it says so and passes
# (test_tsdb's test_open_full_disk covers the store's side).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
MNT=$(mktemp -d /tmp/gpulse-tsdb-fullopen.XXXXXX)
# The daemons go first (cleanup kills them), then the mount.
umount_mnt() {
	cleanup
	for p in "${PIDS[@]:-}"; do
		[ -n "$p" ] && wait "$p" 2>/dev/null || true
	done
	umount "$MNT" 2>/dev/null || true
	rmdir "$MNT" 2>/dev/null || true
}
trap umount_mnt EXIT

if ! mount -t tmpfs -o size=1m tmpfs "$MNT" 2>/dev/null; then
	skip_or_fail "cannot mount a tmpfs here (needs root); covered by test_tsdb (test_open_full_disk)"
fi

# A store written by a gpulsed that stopped cleanly.
start_daemon first --replay "$REC" --storage-path "$MNT/store.db"
wait_for '[ "$(metric gpulse_storage_db_bytes)" != "" ] && [ "$(metric gpulse_storage_db_bytes)" != 0 ]' ||
	fail "the first gpulsed wrote nothing"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "the first gpulsed did not stop cleanly"
[ -s "$MNT/store.db" ] || fail "no store written"
cp "$MNT/store.db" "$WORK/sound.db"

cat >"$WORK/alerts.yml" <<'YML'
groups:
  - name: pending
    interval: 1s
    rules:
      - alert: GpuPowerSustained
        expr: avg_over_time(gpulse_gpu_power_watts[10s]) > 0 and count_over_time(gpulse_gpu_power_watts[10s]) >= 3
        for: 2s
  - name: rec
    interval: 1s
    rules:
      - record: gpu:power:max
        expr: max(gpulse_gpu_power_watts)
YML

fill() {
	dd if=/dev/zero of="$MNT/filler" bs=4k status=none 2>/dev/null || true
	dd if=/dev/zero of="$MNT/filler2" bs=1 status=none 2>/dev/null || true
}

# status_of PATH : the HTTP status of GET PATH; the body into $WORK/body.
status_of() { curl -s --max-time 5 -o "$WORK/body" -w '%{http_code}' "$URL$1"; }

# start_full NAME DB : gpulsed on DB on the full disk, retrying every
# second; checks it serves without history.
start_full() {
	local name=$1 db=$2
	printf 'storage:\n  path: %s\n  retry_interval: 1s\n  flush_interval: 200ms\nrule_files:\n  - %s\nanomaly:\n  warmup: 0s\nprofiling:\n  socket: %s\n  store_interval: 1s\n' \
		"$db" "$WORK/alerts.yml" "$WORK/run/$name.sock" >"$WORK/$name.yml"
	start_daemon "$name" --config "$WORK/$name.yml" --replay "$REC"
	grep -Eq "storage\.path: $db: (disk full \(SQLITE_FULL\)|I/O error).*starting without history" "$WORK/$name.log" ||
		fail "$name: no disk-full or I/O error line: $(cat "$WORK/$name.log")"
	! grep -Eq "not a gpulse database|damaged|truncated" "$WORK/$name.log" ||
		fail "$name: a full disk reported as a bad file: $(cat "$WORK/$name.log")"
	wait_for '[ "$(metric gpulse_gpu_power_watts)" != "" ]' || fail "$name: no live data on /metrics"
	[ "$(metric gpulse_storage_available)" = 0 ] || fail "$name: gpulse_storage_available is not 0"
	[ "$(metric gpulse_storage_open_attempts_total)" -ge 1 ] || fail "$name: attempts not counted"
	[ "$(metric gpulse_storage_open_failures_total)" -ge 1 ] || fail "$name: failures not counted"
	local code
	code=$(status_of '/api/v1/query?query=gpulse_gpu_power_watts')
	[ "$code" = 503 ] || fail "$name: history query answered $code, want 503: $(cat "$WORK/body")"
	grep -Eq '"error":"storage unavailable: [^"]*(disk full|I/O error)' "$WORK/body" ||
		fail "$name: 503 without the reason: $(cat "$WORK/body")"
	# A rule that reads a range fires from the in-memory history.
	wait_for 'curl -s --max-time 5 "$URL/api/v1/alerts" | grep -q "\"alertname\":\"GpuPowerSustained\".*\"state\":\"firing\""' ||
		fail "$name: the range rule does not fire while the store is shut: $(curl -s "$URL/api/v1/alerts")"
	[ "$(metric gpulse_rule_evaluation_failures_total 'pending"')" = 0 ] ||
		fail "$name: alerting rule evaluations failed while the store is shut"
	# A recording rule has nowhere to write: it fails, counted.
	wait_for '[ "$(metric gpulse_rule_evaluation_failures_total "rec\"")" -ge 1 ]' ||
		fail "$name: recording rule failures not counted while the store is shut"
	# Still down after a few retries, each counted.
	wait_for '[ "$(metric gpulse_storage_open_failures_total)" -ge 3 ]' || fail "$name: no retries counted"
	[ "$(metric gpulse_storage_available)" = 0 ] || fail "$name: available on a full disk"
}

mkdir -p "$WORK/run"
fill
start_full existing "$MNT/store.db"
# A profiled process while the store is shut (the synthetic library).
FAKE="${GPULSE_BUILD_DIR:-/nonexistent}/tests/fake_inject_client"
if [ -x "$FAKE" ]; then
	"$FAKE" "$WORK/run/existing.sock" basic >"$WORK/fake.out" 2>&1 &
	PIDS+=($!)
	wait_for '[ "$(metric gpulse_process_kernel_launches_total kernel=\"gemm_kernel\")" = 200 ]' ||
		fail "the profiled process is not on /metrics"
fi
# Space again: the store opens within the retry interval, ingestion
# starts and the query API serves the history.
rm -f "$MNT/filler" "$MNT/filler2"
t0=$(date +%s.%N)
wait_for '[ "$(metric gpulse_storage_available)" = 1 ]' || fail "the store did not open once space returned"
t1=$(date +%s.%N)
# The retry interval (1 s), the main thread's wake (1 s), and 2 s for a
# loaded or sanitizer build's open and our polling.
python3 -c "import sys; sys.exit(0 if $t1 - $t0 < 4 else 1)" ||
	fail "the store took $(python3 -c "print(round($t1 - $t0, 2))") s to open, over 1s retry + 1s wake + 2s"
echo "the store opened $(python3 -c "print(round($t1 - $t0, 2))") s after space returned"
grep -q "storage: keeping samples, anomaly scores, profiling series and diagnosis windows in $MNT/store.db from now on" "$WORK/existing.log" ||
	fail "no line saying the store opened"
wait_for '[ "$(status_of "/api/v1/query?query=count_over_time(gpulse_gpu_power_watts%5B1m%5D)")" = 200 ] && grep -q "\"result\":\[{" "$WORK/body"' ||
	fail "no history served after the store opened: $(cat "$WORK/body")"
# The rules take the store: the recording rule's series and the alert's
# ALERTS series are written to it.
wait_for '[ "$(status_of "/api/v1/query?query=gpu:power:max")" = 200 ] && grep -q "\"result\":\[{" "$WORK/body"' ||
	fail "the recording rule writes nothing once the store opened: $(cat "$WORK/body")"
wait_for '[ "$(status_of "/api/v1/query?query=ALERTS%7Balertname%3D%22GpuPowerSustained%22%7D")" = 200 ] && grep -q "\"result\":\[{" "$WORK/body"' ||
	fail "no ALERTS series once the store opened: $(cat "$WORK/body")"
# The profiling server, started without the store, appends to it now.
if [ -x "$FAKE" ]; then
	wait_for '[ "$(status_of "/api/v1/query?query=gpulse_process_kernel_launches_total%7Bkernel%3D%22gemm_kernel%22%7D")" = 200 ] && grep -q "\"result\":\[{" "$WORK/body"' ||
		fail "no profiling series stored once the store opened: $(cat "$WORK/body")"
fi
# The anomaly detector, created without the store, writes its scores there now.
wait_for '[ "$(status_of "/api/v1/query?query=count(gpulse_anomaly_score)")" = 200 ] && grep -q "\"result\":\[{" "$WORK/body"' ||
	fail "no anomaly scores stored after the store opened: $(cat "$WORK/body")"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "gpulsed did not stop cleanly"

# A new store on a full disk: the same, and a clean stop while pending.
fill
start_full new "$MNT/new.db"
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || fail "gpulsed without its store did not stop cleanly"
rm -f "$MNT/filler" "$MNT/filler2" "$MNT/new.db" "$MNT/new.db.lock"

# The file at fault still stops gpulsed (exit 2): truncated, or not ours.
expect_refused() {
	local name=$1 db=$2 want=$3 rc
	set +e
	timeout 20 "$GPULSED" --listen 127.0.0.1:0 --replay "$REC" --storage-path "$db" 2>"$WORK/$name.log"
	rc=$?
	set -e
	[ "$rc" = 2 ] || fail "$name: exit $rc, want 2: $(cat "$WORK/$name.log")"
	grep -Eq "storage\.path: $db: $want" "$WORK/$name.log" ||
		fail "$name: want \"$want\": $(cat "$WORK/$name.log")"
}
cp "$WORK/sound.db" "$WORK/cut.db"
truncate -s 3000 "$WORK/cut.db"
expect_refused truncated "$WORK/cut.db" "truncated"
head -c 8192 /dev/urandom >"$WORK/noise.db"
expect_refused foreign "$WORK/noise.db" "not a gpulse database"
echo "ok: on a full disk gpulsed serves without history (available 0, 503 with the reason) and opens the store within the retry interval once space returns; truncated and foreign files exit 2"
