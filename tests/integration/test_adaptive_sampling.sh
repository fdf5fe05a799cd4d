# Adaptive sampling through the fake NVML (issue 37, item 3): a recording
# with a steady stretch, a moving one, steady again, and an XID at time T.
#  - steady: memory, the dearest fast read, is asked of NVML (counted by
#    the daemon's NVML call counter, i.e. through the stand-in) about once
#    per 10 fast sweeps: its 1 s floor;
#  - moving: at every fast sweep (its 100 ms ceiling), the move counted
#    with its cause;
#  - steady again once the quiet period has passed;
#  - the XID moves the GPU again.
# Every measure is taken against the collector's own sweep count, not
# the clock, so a slow machine changes nothing but the time it takes.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

# 10 Hz rows: 0-20 s idle, 20-28 s moving (utilization and power swing
# every row, memory grows every second), then idle to 70 s; XID at 45 s.
python3 - "$WORK/rec.csv" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("t_s,gpu_util,mem_util,mem_used_mib,mem_total_mib,power_w,temp_c,sm_clock_mhz,"
            "mem_clock_mhz,clocks_event_reasons,pstate,proc_count\n")
    t0 = 1795965289.0
    mem = 1000
    for k in range(700):
        t = k / 10
        if 20 <= t < 28:
            util, power = (90, 300) if k % 2 else (10, 120)
            if k % 10 == 0:
                mem += 8000
        else:
            util, power = 0, 80
        f.write(f"{t0 + t:.3f},{util},0,{mem},143771,{power},40,1980,2619,1,0,0\n")
PY

cat >"$WORK/g.yml" <<'YML'
sampling:
  fast: 100ms
  normal: 1s
  fast_floor: 1s
  quiet: 5s
YML
export GPULSE_FAKE_NVML_RECORDING="$WORK/rec.csv" GPULSE_FAKE_NVML_GPUS=1 GPULSE_FAKE_NVML_SPEED=1
export GPULSE_FAKE_NVML_FAULTS="xid:gpu=0:at=45:code=79"
start_daemon adapt --config "$WORK/g.yml" --nvml-library "$FAKE_NVML"

sweeps() { metric gpulse_collector_sweeps_total 'tier="fast"'; }
memcalls() {
	fetch /metrics | awk '/^gpulse_nvml_calls_total\{.*nvmlDeviceGetMemoryInfo/ { c += $NF } END { print c + 0 }'
}
# sample: the memory calls and the counted memory reads, from one
# exposition (two fetches would let a read fall between them).
sample() {
	fetch /metrics | awk '
		/^gpulse_nvml_calls_total\{.*nvmlDeviceGetMemoryInfo/ { c += $NF }
		/^gpulse_collector_adaptive_reads_total\{group="memory"\}/ { r = $NF }
		END { print c + 0, r + 0 }'
}
moving() { metric gpulse_collector_gpus_moving; }
moves() { local v; v=$(metric gpulse_collector_moves_total "cause=\"$1\""); echo "${v:-0}"; }
# wait_sweeps N: until the fast tier has swept N more times (60 s at most).
wait_sweeps() {
	local target=$(($(sweeps) + $1))
	for _ in $(seq 1 600); do
		[ "$(sweeps)" -ge "$target" ] && return 0
		sleep 0.1
	done
	fail "the fast tier did not sweep $1 times"
}
# wait_until COND: a shell condition, for up to 60 s.
wait_until() {
	for _ in $(seq 1 600); do
		if eval "$*"; then return 0; fi
		sleep 0.1
	done
	return 1
}

# Steady: after the first reads, 40 sweeps make about 4 memory reads.
wait_sweeps 5
s0=$(sweeps)
read -r c0 r0 < <(sample)
wait_sweeps 40
s1=$(sweeps)
read -r c1 r1 < <(sample)
[ "$(moves change)" = 0 ] || fail "a steady stretch moved the GPU (the machine took over 20 s to get here?)"
ds=$((s1 - s0)) dc=$((c1 - c0)) dr=$((r1 - r0))
echo "steady: $ds sweeps, $dc memory calls, $dr memory reads counted"
[ "$dc" = "$dr" ] || fail "memory calls ($dc) and counted reads ($dr) disagree"
[ "$dc" -ge $((ds / 10 - 1)) ] && [ "$dc" -le $((ds / 10 + 2)) ] ||
	fail "steady: $dc memory reads in $ds sweeps, not one per 10 (the 1 s floor)"

# Moving: every sweep reads memory.
wait_until '[ "$(moving)" = 1 ]' || fail "the moving stretch never moved the GPU"
[ "$(moves change)" -ge 1 ] || fail "the move was not counted as a change"
s0=$(sweeps) c0=$(memcalls)
wait_sweeps 30
s1=$(sweeps) c1=$(memcalls)
ds=$((s1 - s0)) dc=$((c1 - c0))
echo "moving: $ds sweeps, $dc memory calls"
[ "$dc" -ge $((ds - 1)) ] || fail "moving: $dc memory reads in $ds sweeps, not one per sweep"
# The memory the recording grew to is what /metrics says (seen while moving).
wait_until '[ "$(metric gpulse_gpu_memory_used_bytes)" = "$(( (1000 + 8 * 8000) * 1048576 ))" ]' ||
	fail "memory used never reached the recording's last value: $(metric gpulse_gpu_memory_used_bytes)"

# Steady again after the quiet period: the floor.
wait_until '[ "$(moving)" = 0 ]' || fail "the GPU never went back to its floor"
s0=$(sweeps) c0=$(memcalls)
wait_sweeps 30
s1=$(sweeps) c1=$(memcalls)
ds=$((s1 - s0)) dc=$((c1 - c0))
echo "steady again: $ds sweeps, $dc memory calls"
if [ "$(moves xid)" = 0 ]; then
	[ "$dc" -le $((ds / 10 + 2)) ] || fail "steady again: $dc memory reads in $ds sweeps"
fi
# No false staleness while memory is read at its floor.
[ "$(metric gpulse_gpu_stale)" = 0 ] || fail "the GPU is stale while steady"
has /metrics '^gpulse_gpu_memory_used_bytes\{' || fail "memory left /metrics while read at its floor"

# The XID at 45 s moves the GPU.
wait_until '[ "$(moves xid)" -ge 1 ]' || fail "the XID did not move the GPU"
echo PASS
