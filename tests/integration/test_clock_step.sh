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

faketime_gpulsed
base=$FAKETIME_BASE
set_offset() { faketime_offset "$1"; }

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
