# Per-process SM and memory shares against the GPU's own utilization,
# through the fake NVML's per-process sample buffer (a sample per process
# per 1/6 s period, as the driver keeps them):
#  - one process alone on GPU 0: its shares are the GPU's utilization and
#    memory utilization over the window (within 5 points), though every
#    single sample reads 100% or 20%;
#  - two processes sharing GPU 1 (2:1): their shares add up to the GPU's,
#    and their SM and memory shares tell the same split;
#  - the same holds for the second window, which starts where the first
#    ended.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

# 100% for half a second, 20% for the next: any whole second means 60%,
# memory utilization half of it. GPU 0 runs one process, GPU 1 two.
python3 - "$WORK/wave.csv" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("t_s,gpu,gpu_util,mem_util,mem_used_mib,mem_total_mib,power_w,proc_count\n")
    for i in range(40):
        u = 100 if (i // 5) % 2 == 0 else 20
        for g, n in ((0, 1), (1, 2)):
            f.write(f"{i / 10:.1f},{g},{u},{u / 2},4096,81559,300,{n}\n")
PY
export GPULSE_FAKE_NVML_RECORDING="$WORK/wave.csv" GPULSE_FAKE_NVML_SPEED=1
start_daemon putil --nvml-library "$FAKE_NVML"
ME=$DAEMON_PID   # the fake's first process on each GPU is its caller

calls() { metric gpulse_nvml_calls_total 'call="nvmlDeviceGetProcessUtilization"'; }
check() {
	local body
	body=$(fetch /metrics) || fail "no /metrics"
	python3 "$WORK/check.py" "$ME" "$1" <<<"$body" ||
		fail "shares, $1 window: $(grep '^gpulse_process_.*utilization' <<<"$body")"
}
cat >"$WORK/check.py" <<'PY'
import re, sys
me, which = sys.argv[1], sys.argv[2]
v = {}
for line in sys.stdin:
    m = re.match(r'^(gpulse_process_(sm|memory)_utilization_ratio)\{gpu="(\d)".*pid="(\d+)".*\} (\S+)$', line)
    if m:
        v[(m.group(2), m.group(3), m.group(4))] = float(m.group(5))
GPU, MEM = 0.60, 0.30   # the GPU's own utilization and memory utilization
def near(a, b, what):
    assert abs(a - b) <= 0.05, f"{what}: {a:.3f}, the GPU's {b:.3f} (window {which})"
near(v[("sm", "0", me)], GPU, "lone process, SM")
near(v[("memory", "0", me)], MEM, "lone process, memory")
a, b = ("sm", "1", me), ("sm", "1", "4000001")
near(v[a] + v[b], GPU, "two processes, SM sum")
near(v[("memory", "1", me)] + v[("memory", "1", "4000001")], MEM, "two processes, memory sum")
sm_split = v[a] / v[b]
mem_split = v[("memory", "1", me)] / v[("memory", "1", "4000001")]
assert 1.7 < sm_split < 2.3 and 1.7 < mem_split < 2.3 and abs(sm_split - mem_split) < 0.3, \
    f"split: SM {sm_split:.2f}, memory {mem_split:.2f}"
PY

wait_for '[ -n "$(metric gpulse_process_sm_utilization_ratio gpu=\"1\" pid=\"4000001\")" ]' ||
	fail "no per-process shares"
check first
# The next read comes 10 s after the first (its cost keeps it that rare).
n0=$(calls)
for _ in $(seq 1 150); do
	[ "$(calls)" -ge $((n0 + 2)) ] && break
	sleep 0.1
done
[ "$(calls)" -ge $((n0 + 2)) ] || fail "no second per-process read ($n0 -> $(calls) calls)"
check second
[ -z "$(metric gpulse_nvml_errors_total 'call="nvmlDeviceGetProcessUtilization"')" ] ||
	fail "per-process utilization errors: $(metric gpulse_nvml_errors_total 'call="nvmlDeviceGetProcessUtilization"')"
echo PASS
