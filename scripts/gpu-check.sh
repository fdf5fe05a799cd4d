#!/usr/bin/env bash
# Every GPU check and benchmark in one call on the GPU machine (H200), with
# a short table at the end. Build first, here: scripts/bundle-device.sh;
# then run this there with .device carried. Writes logs and files to $OUT.
#   1. NVML ABI conformance: our declarations against the real nvml.h
#   2. cost of each NVML call (wall and CPU, back to back and spaced)
#   3. gpulsed on the real driver while a PyTorch bf16 matmul runs:
#      /metrics and `gpulse status` must show real GPM values
#   4. gpulse record during matmul, copy and PCIe phases (a real recording)
#   5. CPU per GPU-sample: gpulsed vs nvidia-smi vs a pynvml loop
# Never changes clocks, power limits, persistence or MIG; never resets.
#   scripts/gpu-check.sh [SECTION...]   sections: conformance costs live record phases cpu
set -u
cd "$(dirname "$0")/.."
want() { [ $# -eq 0 ] || [ -z "$SECTIONS" ] || [[ " $SECTIONS " == *" $1 "* ]]; }
SECTIONS="$*"
OUT=${OUT:-/tmp/gpulse-gpu-check}
mkdir -p "$OUT"
D=$PWD/.device
B=$D/bin   # wrappers that give our programs the bundled libraries
PORT=9401
declare -a TABLE
row() { TABLE+=("$(printf '%-34s %-5s %s' "$1" "$2" "$3")"); }

nvidia-smi --query-gpu=name,driver_version,pstate,power.limit,clocks.max.sm --format=csv | tee "$OUT/device.txt"
DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n1)

# 1. conformance
if want conformance; then
if cc -I/usr/local/cuda/include -Isrc/nvml tests/gpu/nvml_conformance.c -o /tmp/nvml_conformance 2>"$OUT/conformance-build.log" &&
	/tmp/nvml_conformance | tee "$OUT/conformance.txt"; then
	row "nvml ABI conformance" PASS "$(tail -n1 "$OUT/conformance.txt" | sed 's/nvml_conformance: //')"
else
	row "nvml ABI conformance" FAIL "see conformance.txt / conformance-build.log"
fi
fi

# 2. call costs
if want costs; then
"$D/bench_nvml_costs" 10 | tee "$OUT/nvml-costs.txt"
row "nvml call costs" INFO "nvml-costs.txt"
fi

# 3. gpulsed live under a bf16 matmul
if want live; then
"$B/gpulsed" --listen 127.0.0.1:$PORT 2>"$OUT/gpulsed.log" &
GP=$!
python3 bench/gpu_load.py matmul 25 >"$OUT/load-matmul.txt" 2>&1 &
LP=$!
sleep 12
curl -s "http://127.0.0.1:$PORT/metrics" >"$OUT/metrics-h200.txt"
"$B/gpulse" status --url "http://127.0.0.1:$PORT" --no-color >"$OUT/status-h200.txt" 2>&1
"$B/gpulse" status --url "http://127.0.0.1:$PORT" --json >"$OUT/status-h200.json" 2>&1
val() { awk -v n="$1" -v m="${2:-}" '$0 !~ /^#/ { split($0,a," "); k=a[1]; sub(/\{.*/,"",k); if (k==n && index($0,m)>0) { print $NF; exit } }' "$OUT/metrics-h200.txt"; }
sm=$(val gpulse_gpu_sm_active_ratio); tensor=$(val gpulse_gpu_tensor_active_ratio)
power=$(val gpulse_gpu_power_watts); util=$(val gpulse_gpu_utilization_ratio)
procmem=$(val gpulse_process_gpu_memory_bytes 'comm="python3"')
if awk -v s="${sm:-0}" -v t="${tensor:-0}" 'BEGIN{exit !(s>0.5 && t>0.3)}'; then
	row "gpulsed GPM under matmul" PASS "sm_active=$sm tensor=$tensor util=$util power=${power}W"
else
	row "gpulsed GPM under matmul" FAIL "sm_active=${sm:-none} tensor=${tensor:-none}"
fi
[ -n "$procmem" ] && row "per-process metrics" PASS "python3 uses $procmem bytes" ||
	row "per-process metrics" FAIL "no gpulse_process_gpu_memory_bytes for python3"
grep -q 'H200' "$OUT/status-h200.txt" && row "gpulse status" PASS "status-h200.txt" || row "gpulse status" FAIL "status-h200.txt"
wait $LP
kill -TERM $GP; wait $GP; rc=$?
[ $rc = 0 ] && row "gpulsed SIGTERM" PASS "exit 0" || row "gpulsed SIGTERM" FAIL "exit $rc"
fi

# 4. a real recording across phases
if want record; then
"$B/gpulse" record -o "$OUT/h200-record.csv" --hz 10 --seconds 26 2>"$OUT/record.log" &
RP=$!
sleep 1
for k in matmul copy pcie; do python3 bench/gpu_load.py $k 6 >>"$OUT/load-phases.txt" 2>&1; sleep 1; done
wait $RP && row "gpulse record" PASS "$(wc -l <"$OUT/h200-record.csv") lines" || row "gpulse record" FAIL "record.log"
fi

# 4b. a labelled recording of our own workloads (for diagnosis tests)
if want phases; then
"$B/gpulse" record -o "$OUT/h200-mixed-10hz.csv" --hz 10 --seconds 150 2>"$OUT/record-mixed.log" &
RP=$!
sleep 3
python3 bench/gpu_phases.py "$OUT/h200-mixed-labels.csv" 10 >"$OUT/phases.txt" 2>&1
sleep 2
kill -INT $RP; wait $RP
row "labelled recording" INFO "$(wc -l <"$OUT/h200-mixed-labels.csv") phases, $(wc -l <"$OUT/h200-mixed-10hz.csv") rows"
fi

# 5. CPU per sample, side by side
if want cpu; then
python3 bench/cpu_compare.py "$B/gpulsed" 30 9477 | tee "$OUT/cpu-compare.txt"
row "cpu per GPU-sample" INFO "$(awk '/gpulsed/{print $(NF-1) " ms, " $NF "x nvidia-smi"}' "$OUT/cpu-compare.txt")"
fi

# At most 8 files come back from the GPU machine: keep the small ones in one.
(cd "$OUT" && tar czf results.tar.gz --exclude results.tar.gz --exclude '*10hz.csv' --exclude h200-record.csv * 2>/dev/null &&
	find . -maxdepth 1 -type f ! -name results.tar.gz ! -name '*10hz.csv' ! -name h200-record.csv ! -name '*labels.csv' -delete)
echo
echo "== gpulse GPU checks, $(date -u +%F), driver $DRIVER =="
printf '%s\n' "${TABLE[@]}"
