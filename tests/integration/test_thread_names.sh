# Every thread of gpulsed carries a name of its own (pthread_setname_np),
# so a CPU breakdown per thread (bench/cpu_compare.py reads
# /proc/PID/task/TID/comm) says what each costs: only the main thread is
# "gpulsed". Default configuration with the store, rules and self-scrape
# on, on two fake GPUs.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

export GPULSE_FAKE_NVML_RECORDING="$REC" GPULSE_FAKE_NVML_GPUS=2
start_daemon names --nvml-library "$FAKE_NVML" --storage-path "$WORK/db"
wait_for 'has /metrics "^gpulse_gpu_power_watts"' || fail "no samples served"
sleep 1
names=$(for t in /proc/"$DAEMON_PID"/task/*; do cat "$t/comm"; done)
echo "$names" | sort | uniq -c
[ "$(echo "$names" | grep -c '^gpulsed$')" = 1 ] ||
	fail "threads without a name of their own: $(echo "$names" | grep -c '^gpulsed$') named gpulsed"
# The collector's and the store's threads are there under their names.
for want in gpulse-lane gpulse-watchdog gpulse-ingest gpulse-flusher; do
	echo "$names" | grep -q "^$want" || fail "no thread named $want*: $(echo "$names" | tr '\n' ' ')"
done
echo PASS
