# Repeating a query that the limits refuse does not grow gpulsed's
# resident memory without bound (docs/RELIABILITY.md, "Memory"). Each
# query's memory is freed, but glibc kept it: in each query thread's
# malloc arena, and under the mmap threshold it raises after each large
# free; four repetitions of one refused query took RSS from 105 to 257 MB.
# src/api/query.c fixes the threshold at 1 MiB and trims after every
# query.
#
# The control is the store: it must not grow while the queries run, or
# its growth is counted against them. So gpulsed collects from the fake
# NVML with the replay frozen at one row (GPULSE_FAKE_NVML_SPEED=0): a
# constant, small stream of samples. The query is a range query of every
# series (about 750) at 1 ms steps over 10 s: 10,001 points a series, 7.5 M
# in all, refused with 422 by the 5 M sample bound once loaded that far
# (about 115 MB at its peak, VmHWM). Fewer series would make its answer
# over the 16 MB response bound, also 422 after its evaluation: either
# refusal counts. RSS is read after the first refused query, which leaves
# what any query keeps (the store's caches, the query threads' stacks
# and arenas), and after 20 more.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"
# Under a sanitizer the allocator is the sanitizer's (no glibc arenas, no
# malloc_trim; freed memory held in quarantine), so RSS says nothing of
# the fix, and each query is several times slower: a real skip there.
if grep -q '^GPULSE_\(SANITIZE\|TSAN\):BOOL=ON' "${GPULSE_BUILD_DIR:-/nonexistent}/CMakeCache.txt" 2>/dev/null; then
	echo "SKIP: a sanitizer's allocator replaces glibc's, whose arenas this test measures"
	exit 77
fi

export GPULSE_FAKE_NVML_RECORDING="$REC" GPULSE_FAKE_NVML_SPEED=0
cat >"$WORK/gpulse.yml" <<YML
storage:
  path: $WORK/db
profiling:
  enabled: false
YML
start_daemon mem --config "$WORK/gpulse.yml" --nvml-library "$FAKE_NVML"

enc() { python3 -c 'import sys,urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$DAEMON_PID/status"; }
# refused: runs the query over the 10 s before now; true when it is 422
# for the response bound. Its body is kept in $WORK/refused.json.
refused() {
	local now
	now=$(date +%s)
	[ "$(curl -s -o "$WORK/refused.json" -w '%{http_code}' --max-time 60 \
		"$URL/api/v1/query_range?query=$(enc '{__name__=~".+"}')&start=$((now - 10))&end=$now&step=0.001")" = 422 ] &&
		grep -Eq 'too many samples|response size bound' "$WORK/refused.json"
}

# Until the store holds 10 s of every series, the answer fits.
for _ in $(seq 1 60); do
	refused && break
	sleep 1
done
refused || fail "the query is not refused for its size: $(head -c 300 "$WORK/refused.json")"
first=$(rss_kb)
for i in $(seq 1 20); do
	refused || fail "repetition $i not refused: $(head -c 300 "$WORK/refused.json")"
done
last=$(rss_kb)
growth=$((last - first))
echo "RSS after the first refused query ${first} kB, after 20 more ${last} kB (${growth} kB)"
# The bound: 16 MB, a seventh of one query's peak (about 115 MB), so
# that keeping the memory of even part of one more query fails, and ten
# times what the frozen collection, the HTTP connections and the
# self-metrics added in the 20 queries' time (measured: 24.3 to 26.0 MB;
# with the mmap threshold and malloc_trim lines of api.c removed, 93.6 to
# 157.0 MB, and the test fails).
[ "$growth" -lt $((16 * 1024)) ] ||
	fail "RSS grew ${growth} kB over 20 refused queries (from ${first} kB), over 16 MB"
echo ok
