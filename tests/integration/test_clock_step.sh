# The wall clock steps 60 s ahead and back while gpulsed runs (an NTP
# step after a clock that ran ahead): samples keep being stored and the
# recording rule keeps being evaluated and stored through both steps (the
# store takes samples older than a series' newest within its out-of-order
# window; rule groups are scheduled on the monotonic clock), and each
# step is logged once and counted (gpulse_clock_steps_total). Before, the
# step back stopped every sample and every rule until the clock passed
# its old maximum, silently. gpulsed's clock is libfaketime's, moved
# through FAKETIME_TIMESTAMP_FILE (the monotonic clock stays real).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

lib=$(dpkg -L libfaketime 2>/dev/null | grep -m1 '/libfaketimeMT\.so\.1$' || true)
if [ -z "$lib" ]; then
	[ "${CI:-}" = true ] && fail "libfaketime is not installed (make deps)"
	echo "skipped: libfaketime is not installed"
	exit 77
fi

# The offset the shifted-clock stages of scripts/test.sh give every test
# (FAKETIME=+400d), in seconds: the steps go on top of it.
base=$(python3 -c '
import re, sys
m = re.fullmatch(r"([+-]?\d+(?:\.\d+)?)([smhdy]?)", sys.argv[1].strip() or "0")
if not m: sys.exit("unknown FAKETIME offset: " + sys.argv[1])
k = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "y": 31536000}[m.group(2)]
print(int(float(m.group(1)) * k))' "${FAKETIME:-0}")
CLOCK="$WORK/faketime"
set_offset() { printf '%+ds\n' "$((base + $1))" >"$CLOCK.new" && mv "$CLOCK.new" "$CLOCK"; }
set_offset 0

cat >"$WORK/rules.yml" <<'YML'
groups:
  - name: step
    interval: 1s
    rules:
      - record: step:power:max
        expr: max(gpulse_gpu_power_watts)
YML
printf 'storage:\n  path: %s\n  flush_interval: 200ms\nrule_files:\n  - %s\n' \
	"$WORK/store.db" "$WORK/rules.yml" >"$WORK/gpulsed.yml"

real="$GPULSED"
GPULSED="$WORK/gpulsed-faketime"
cat >"$GPULSED" <<SH
#!/bin/sh
unset FAKETIME
export ASAN_OPTIONS="$(preload_asan_options)"
export LD_PRELOAD="$lib" FAKETIME_TIMESTAMP_FILE="$CLOCK" FAKETIME_CACHE_DURATION=0 \
	FAKETIME_NO_CACHE=1 FAKETIME_DONT_FAKE_MONOTONIC=1 FAKETIME_FORCE_MONOTONIC_FIX=0
exec "$real" "\$@"
SH
chmod +x "$GPULSED"
start_daemon clock --config "$WORK/gpulsed.yml" --replay "$REC"

# gpulsed's wall clock now, in seconds: the real clock (date without the
# clock stages' libfaketime, which would add the base offset twice) plus
# the base offset plus $1.
now_s() { echo $(($(env -u LD_PRELOAD date +%s) + base + $1)); }
# stored S : how many samples of the recording rule's series the store
# holds (over the last hour of gpulsed's clock, and the minute ahead).
stored() {
	local body
	body=$(curl -sf --max-time 5 --data-urlencode 'query=count_over_time(step:power:max[2h])' \
		--data-urlencode "time=$(now_s $1)" "$URL/api/v1/query") || { echo 0; return; }
	python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)' <<<"$body"
}
appended() { metric gpulse_storage_samples_appended_total; }

wait_for '[ "$(stored 120)" -ge 3 ]' || fail "the recording rule stored nothing"

# 60 s ahead: stored at the new times.
set_offset 60
wait_for '[ "$(metric gpulse_clock_steps_total)" = 1 ]' || fail "the step ahead was not counted"
n=$(stored 120)
wait_for "[ \"\$(stored 120)\" -ge $((n + 3)) ]" || fail "the rule stopped after the step ahead"

# Back 60 s: samples and the rule go on, older than what the step ahead wrote.
set_offset 0
wait_for '[ "$(metric gpulse_clock_steps_total)" = 2 ]' || fail "the step back was not counted"
n=$(stored 120)
a=$(appended)
wait_for "[ \"\$(stored 120)\" -ge $((n + 5)) ]" ||
	fail "the recording rule's series got no new samples after the step back ($(stored 120), was $n)"
wait_for "[ \"\$(appended)\" -gt $a ]" || fail "no sample stored after the step back"
ooo=$(metric gpulse_storage_samples_out_of_order_total)
[ "${ooo:-0}" -gt 0 ] || fail "no sample counted out of order after the step back"
[ "$(grep -c 'wall clock stepped back' "$WORK/clock.log")" = 1 ] ||
	fail "the step back is not logged exactly once: $(grep 'wall clock' "$WORK/clock.log")"
[ "$(grep -c 'wall clock stepped forward' "$WORK/clock.log")" = 1 ] ||
	fail "the step ahead is not logged exactly once"
# The rule's evaluations are stamped by the wall clock: the newest one is
# at gpulsed's time now, not a minute ahead.
body=$(curl -sf --max-time 5 --data-urlencode 'query=timestamp(step:power:max)' \
	--data-urlencode "time=$(now_s 0)" "$URL/api/v1/query")
python3 -c '
import json, sys
v = float(json.load(sys.stdin)["data"]["result"][0]["value"][1])
now = float(sys.argv[1])
sys.exit(0 if now - 30 <= v <= now + 1 else "newest evaluation at %.0f, gpulsed clock at %.0f" % (v, now))' \
	"$(now_s 0)" <<<"$body" || fail "the rule's newest evaluation is not at the clock's time"
echo "ok: $(stored 120) rule samples, $ooo out of order, $(metric gpulse_clock_steps_total) steps"
