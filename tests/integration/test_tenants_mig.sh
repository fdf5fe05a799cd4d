# Issue 36 on MIG: each MIG instance's GPM figures are split across the
# processes that run in it, apart from the other instances'. The fake
# NVML's MIG layout (GPULSE_FAKE_NVML_MIG=1: GI 1 with the GPU's activity,
# GI 2 with half of it, GI 5 idle) with two tenants in GI 1 (stand-in
# libraries: bf16 GEMMs 40% of the time, elementwise kernels 40%) and
# one in GI 2 (alone there: all of its instance's figures, source
# "sole"): every process's series carries its gpu_instance, the parts of
# each instance sum to that instance's gpulse_mig_* figures, and the
# tensor work of GI 1 is the GEMM tenant's.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}" "${GPULSE_BUILD_DIR:?}"
FAKE="$GPULSE_BUILD_DIR/tests/fake_inject_client"
[ -x "$FAKE" ] || fail "$FAKE is not built"

python3 - "$WORK/rec.csv" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("t_s,gpu,gpu_util,mem_util,mem_used_mib,mem_total_mib,power_w,"
            "sm_util,tensor_util,dram_bw_util\n")
    for i in range(100):
        f.write(f"{i / 10:.1f},0,90,40,8192,81559,300,80,30,40\n")
PY

SOCK="$WORK/mig.inject.sock"
tenant() { # NAME KIND PERCENT
	bash -c 'while [ ! -S "$0" ]; do sleep 0.05; done; exec "$1" "$0" tenant "$2" "$3"' \
		"$SOCK" "$FAKE" "$2" "$3" >"$WORK/$1.out" 2>&1 &
	PIDS+=("$!")
	eval "$1=$!"
}
tenant T1 tensor 40
tenant T2 memory 40
tenant T3 other 30
export GPULSE_FAKE_NVML_RECORDING="$WORK/rec.csv" GPULSE_FAKE_NVML_SPEED=1 GPULSE_FAKE_NVML_MIG=1
export GPULSE_FAKE_NVML_PROCESSES="$T1:1000:40:0:1:5,$T2:1000:40:0:1:35,$T3:1000:30:0:2:10"
printf 'profiling:\n  socket: "%s"\n' "$SOCK" >"$WORK/m.yml"
start_daemon mig --config "$WORK/m.yml" --nvml-library "$FAKE_NVML"

cat >"$WORK/check.py" <<'PY'
import re, sys
t1, t2, t3 = sys.argv[1:4]
mig, part, src = {}, {}, {}
for line in sys.stdin:
    m = re.match(r'^(\w+)\{(.*)\} (\S+)$', line)
    if not m:
        continue
    name, lab, v = m.group(1), dict(re.findall(r'(\w+)="([^"]*)"', m.group(2))), float(m.group(3))
    k = {"gpulse_mig_sm_active_ratio": "sm", "gpulse_mig_tensor_active_ratio": "tensor",
         "gpulse_mig_dram_active_ratio": "dram"}.get(name)
    if k:
        mig[(lab["gpu_instance"], k)] = v
    k = {"gpulse_process_sm_active_ratio": "sm", "gpulse_process_tensor_active_ratio": "tensor",
         "gpulse_process_dram_bandwidth_ratio": "dram"}.get(name)
    if k:
        assert "gpu_instance" in lab, f"no gpu_instance on {line.strip()}"
        part[(lab["pid"], k)] = (lab["gpu_instance"], v)
        src[lab["pid"]] = lab["source"]
for pid, gi in ((t1, "1"), (t2, "1"), (t3, "2")):
    for k in ("sm", "tensor", "dram"):
        assert part.get((pid, k), ("?",))[0] == gi, f"pid {pid} {k}: {part.get((pid, k))}, want GI {gi}"
for gi, pids in (("1", (t1, t2)), ("2", (t3,))):
    for k in ("sm", "tensor", "dram"):
        s = sum(part[(p, k)][1] for p in pids)
        assert abs(s - mig[(gi, k)]) < 1e-6, f"GI {gi} {k}: parts {s}, instance {mig[(gi, k)]}"
assert src[t1] == "kernels" and src[t2] == "kernels" and src[t3] == "sole", src
share = part[(t1, "tensor")][1] / mig[("1", "tensor")]
assert share > 0.9, f"T1 holds {share:.2f} of GI 1's tensor activity"
PY
# until_deadline SECONDS CMD...: retry CMD every half second for at most
# SECONDS of wall time (a loaded machine makes each try slow: a count of
# tries would stretch past the test's timeout without a word).
until_deadline() {
	local end=$((SECONDS + $1))
	shift
	while [ $SECONDS -lt $end ]; do
		"$@" && return 0
		sleep 0.5
	done
	return 1
}
check() {
	local body
	body=$(fetch /metrics) || return 1
	python3 "$WORK/check.py" "$T1" "$T2" "$T3" <<<"$body" 2>"$WORK/check.err"
}
until_deadline 90 check ||
	fail "MIG split: $(cat "$WORK/check.err"); $(fetch /metrics | grep -E '^gpulse_(process_(sm_active|tensor|dram)|mig_(sm_active|tensor|dram))')"
echo PASS
