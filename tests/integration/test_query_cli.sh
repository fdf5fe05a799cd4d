# `gpulse query` against a gpulsed replaying a recording into its store:
# an instant query prints the series and a number, a range query a row
# with min/max/last, --json the daemon's answer, a bad query the daemon's
# parse error (exit 1), a bad flag exit 2.
source "$(dirname "$0")/lib.sh"

start_daemon query --replay "$REC" --storage-path "$WORK/db"
# The output is taken whole first: grep -q leaving early must not break
# the pipe under pipefail (lib.sh, has).
# shellcheck disable=SC2016
wait_for '[[ "$("$GPULSE" query --url "$URL" gpulse_gpu_power_watts 2>/dev/null)" == *"gpulse_gpu_power_watts{"* ]]' ||
	fail "no power sample through gpulse query"
sleep 6

# Instant: the series with its labels, then a number.
out=$("$GPULSE" query --url "$URL" 'gpulse_gpu_power_watts') || fail "instant query: exit $?"
grep -Eq '^gpulse_gpu_power_watts\{.*gpu="0".*\} +[0-9.e+-]+$' <<<"$out" || fail "instant query: $out"
head -n1 <<<"$out" | grep -q '^SERIES .*VALUE$' || fail "instant header: $out"

# The global options work too, and so does an expression with characters
# that need encoding.
out=$("$GPULSE" --url "$URL" query 'sum by (gpu) (gpulse_gpu_power_watts + 0)') || fail "encoded query"
grep -Eq '^\{gpu="0"\} +[0-9.e+-]+$' <<<"$out" || fail "sum by (gpu): $out"
[ "$("$GPULSE" query --url "$URL" '1+1')" = 2 ] || fail "scalar"

# Range: one row, min <= last <= max, and a sparkline on request.
out=$("$GPULSE" query --url "$URL" --range 5s --step 1s 'gpulse_gpu_utilization_ratio') || fail "range query"
head -n1 <<<"$out" | grep -Eq '^SERIES +MIN +MAX +LAST$' || fail "range header: $out"
row=$(grep '^gpulse_gpu_utilization_ratio{' <<<"$out") || fail "range row: $out"
python3 -c '
import sys
f=sys.argv[1].split("}")[-1].split(); lo,hi,last=map(float,f[:3])
assert 0<=lo<=last<=hi<=1, f' "$row" || fail "min/max/last: $row"
out=$(LC_ALL=C.UTF-8 "$GPULSE" query --url "$URL" --range 5s --step 1s --sparkline 'gpulse_gpu_utilization_ratio') ||
	fail "sparkline"
grep -q '[▁▂▃▄▅▆▇█]' <<<"$out" || fail "no sparkline: $out"
out=$(LC_ALL=C "$GPULSE" query --url "$URL" --range 5s --sparkline 'gpulse_gpu_utilization_ratio') ||
	fail "ascii sparkline"
grep -Eq 'TREND$' <<<"$out" || fail "no TREND column: $out"
grep -Eq ' [_.=#-]+$' <<<"$out" || fail "no ASCII sparkline: $out"

# --json: the daemon's JSON.
"$GPULSE" query --url "$URL" --json 'gpulse_gpu_power_watts' |
	python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["data"]["resultType"]=="vector"' ||
	fail "--json instant"
"$GPULSE" query --url "$URL" --json --range 5s 'gpulse_gpu_power_watts' |
	python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["data"]["resultType"]=="matrix"' ||
	fail "--json range"

# A bad query: the daemon's error, exit 1.
set +e
"$GPULSE" query --url "$URL" 'sum(' >"$WORK/bad.out" 2>"$WORK/bad.err"
rc=$?
set -e
[ "$rc" = 1 ] || fail "bad query: exit $rc, want 1"
grep -q '^gpulse: bad_data: .*parse error' "$WORK/bad.err" || fail "bad query: $(cat "$WORK/bad.err")"
[ ! -s "$WORK/bad.out" ] || fail "bad query printed to stdout: $(cat "$WORK/bad.out")"

# Usage errors: exit 2.
for args in "--bogus up" "--range 5x up" "--step 1s up" ""; do
	set +e
	# shellcheck disable=SC2086
	"$GPULSE" query --url "$URL" $args >/dev/null 2>"$WORK/usage.err"
	rc=$?
	set -e
	[ "$rc" = 2 ] || fail "gpulse query $args: exit $rc, want 2"
done

# Unreachable: exit 1.
kill -TERM "$DAEMON_PID"
wait "$DAEMON_PID" || true
set +e
"$GPULSE" query --url "$URL" up >/dev/null 2>&1
rc=$?
set -e
[ "$rc" = 1 ] || fail "unreachable: exit $rc, want 1"
echo PASS
