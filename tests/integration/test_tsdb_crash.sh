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
for i in $(seq 1 20); do
	starts=$(count_starts)
	"$HELPER" write "$WORK/store.db" "$WORK/progress.log" "$FLUSH_MS" 2>>"$WORK/writer.log" &
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
done
echo "ok: 20 kills, database intact, nothing lost that a completed flush held"
