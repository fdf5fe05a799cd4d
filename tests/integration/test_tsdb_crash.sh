# The store survives kill -9 at any moment: a writer appending about
# 400,000 samples/s with a 200 ms flush interval is killed with SIGKILL 20
# times at random moments; after each kill PRAGMA integrity_check is ok,
# every series is an exact prefix of what was written, and nothing appended
# before the last completed flush began is missing (counted in flushes, not
# in time: the check holds however slowly a loaded machine runs the
# flusher). Each restart continues after what the file holds.
set -euo pipefail
: "${GPULSE_BUILD_DIR:?}"
HELPER="$GPULSE_BUILD_DIR/tests/tsdb_crash_helper"
WORK=$(mktemp -d /tmp/gpulse-tsdb-crash.XXXXXX)
PID=""
cleanup() {
	[ -n "$PID" ] && kill -9 "$PID" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	tail -n 20 "$WORK/writer.log" >&2 2>/dev/null || true
	exit 1
}

count_starts() { awk '/^start/ { n++ } END { print n + 0 }' "$WORK/progress.log"; }
touch "$WORK/progress.log"

FLUSH_MS=200
replayed=0
# Runs 1-20 append fast: the open chunks are written whole at each flush.
# Runs 21-30 append a sample to each series every 20 ms, 10 between
# flushes: the flushes between checkpoints write them to the head log,
# which the next open replays into the chunks.
for i in $(seq 1 30); do
	starts=$(count_starts)
	pace=""
	[ "$i" -gt 20 ] && pace=20
	"$HELPER" write "$WORK/store.db" "$WORK/progress.log" "$FLUSH_MS" $pace 2>>"$WORK/writer.log" &
	PID=$!
	# Wait until it writes (opening a large store takes a moment under
	# sanitizers), then 0.3 to 2.3 s: before the first flush, between
	# flushes, during one.
	for _ in $(seq 1 300); do
		[ "$(count_starts)" -gt "$starts" ] && break
		kill -0 "$PID" 2>/dev/null || fail "run $i: the writer exited by itself"
		sleep 0.1
	done
	sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.3f", 0.3 + (r % 2000) / 1000 }')"
	kill -0 "$PID" 2>/dev/null || fail "run $i: the writer exited by itself"
	kill -9 "$PID"
	wait "$PID" 2>/dev/null || true
	PID=""
	"$HELPER" check "$WORK/store.db" "$WORK/progress.log" "$FLUSH_MS" >"$WORK/check.out" 2>&1 ||
		fail "run $i: $(cat "$WORK/check.out")"
	echo "run $i: $(cat "$WORK/check.out")"
	if [ "$i" -gt 20 ] && grep -q 'head log rows replayed: [1-9]' "$WORK/check.out"; then
		replayed=$((replayed + 1))
	fi
done
# The paced runs must have used the log (most kills fall between
# checkpoints, after the first flush).
[ "$replayed" -ge 1 ] || fail "no paced run left head log rows to replay"
echo "$replayed of 10 paced runs replayed head log rows"
echo "ok: 30 kills, database intact, nothing lost that a completed flush held"
