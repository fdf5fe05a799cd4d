# gpulsed on the fake NVML serving a slice of the real H200 recording
# (frozen in time): /metrics must carry the recorded values in base units,
# absent fields must be absent, and promtool must accept the exposition.
source "$(dirname "$0")/lib.sh"
: "${FAKE_NVML:?}"

# A slice from inside the bf16 tensor phase, so GPM counters are non-zero
# and the software power cap bit (0x4) is set.
python3 - "$REC" "$WORK/slice.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head, body = rows[0], rows[1:]
t = head.index("t_s"); r = head.index("clocks_event_reasons")
pick = [x for x in body if 1795965320.0 <= float(x[t]) <= 1795965324.0 and int(x[r]) & 4]
assert pick, "no power-capped rows in the bf16 phase"
w = csv.writer(open(sys.argv[2], "w", newline=""), lineterminator="\n")
w.writerow(head); w.writerows(pick)
PY

export GPULSE_FAKE_NVML_RECORDING="$WORK/slice.csv" GPULSE_FAKE_NVML_SPEED=0
start_daemon fake --nvml-library "$FAKE_NVML"
wait_for '[ -n "$(metric gpulse_gpu_sm_active_ratio gpu=\"0\")" ]' || fail "no GPM metric after 15 s"

# Expected values from the first row of the slice, converted here.
eval "$(python3 - "$WORK/slice.csv" <<'PY'
import csv, sys
rd = csv.DictReader(open(sys.argv[1])); row = next(rd)
f = lambda k: float(row[k])
print(f"E_UTIL={f('gpu_util')/100!r}")
print(f"E_MEMUSED={f('mem_used_mib')*1048576!r}")
print(f"E_MEMTOTAL={f('mem_total_mib')*1048576!r}")
print(f"E_POWER={f('power_w')!r}")
print(f"E_SMCLK={f('sm_clock_mhz')*1e6!r}")
print(f"E_TEMP={f('temp_c')!r}")
print(f"E_SM={f('sm_util')/100!r}")
print(f"E_TENSOR={f('tensor_util')/100!r}")
print(f"E_DRAM={f('dram_bw_util')/100!r}")
print(f"E_PCIE_TX={f('pcie_tx_mbps')*1048576!r}")
print(f"E_PSTATE={f('pstate')!r}")
PY
)"

check() { # NAME EXPECTED [REL]
	local got
	got=$(metric "$1" 'gpu="0"')
	[ -n "$got" ] || fail "$1 missing"
	approx "$got" "$2" "${3:-1e-6}" || fail "$1 = $got, recorded $2"
}
check gpulse_gpu_utilization_ratio "$E_UTIL"
check gpulse_gpu_memory_used_bytes "$E_MEMUSED"
check gpulse_gpu_memory_total_bytes "$E_MEMTOTAL"
check gpulse_gpu_power_watts "$E_POWER" 1e-3
check gpulse_gpu_sm_clock_hertz "$E_SMCLK"
check gpulse_gpu_temperature_celsius "$E_TEMP"
check gpulse_gpu_sm_active_ratio "$E_SM"
check gpulse_gpu_tensor_active_ratio "$E_TENSOR"
check gpulse_gpu_dram_bandwidth_ratio "$E_DRAM"
check gpulse_gpu_pcie_tx_bytes_per_second "$E_PCIE_TX" 1e-6
check gpulse_gpu_pstate "$E_PSTATE"

[ "$(metric gpulse_gpu_throttle_active 'reason="sw_power_cap"')" = 1 ] || fail "sw_power_cap not active"
[ "$(metric gpulse_gpu_throttle_active 'reason="hw_slowdown"')" = 0 ] || fail "hw_slowdown should be 0"
[ "$(metric gpulse_gpu_up 'gpu="0"')" = 1 ] || fail "gpu not up"
has /metrics '^gpulse_gpu_info\{.*uuid="GPU-fa4e.*model="NVIDIA H200"' || fail "gpulse_gpu_info lacks identity"
# The recording has no NVLink or memory-temperature column: those must be
# absent, not zero.
has /metrics '^gpulse_gpu_nvlink_tx_bytes_per_second\{' && fail "nvlink metric present without data"
has /metrics '^gpulse_gpu_memory_temperature_celsius\{' && fail "memory temperature present without data"
# NVML call statistics are exported.
[ -n "$(metric gpulse_nvml_calls_total 'call="nvmlDeviceGetPowerUsage"')" ] || fail "no NVML call counter"

fetch /metrics >"$WORK/metrics.txt"
promtool check metrics <"$WORK/metrics.txt" >"$WORK/promtool.log" 2>&1 ||
	fail "promtool check metrics: $(cat "$WORK/promtool.log")"
curl -sf -H 'Accept: application/openmetrics-text; version=1.0.0' "$URL/metrics" >"$WORK/om.txt"
tail -n1 "$WORK/om.txt" | grep -qx '# EOF' || fail "OpenMetrics output does not end in # EOF"

# The status JSON carries the same value.
fetch /api/v1/gpus | python3 -c '
import json, sys
d = json.load(sys.stdin)["data"]
g = d["gpus"][0]
assert d["mode"] == "nvml", d["mode"]
assert abs(g["fields"]["gpu_util"] - float(sys.argv[1])) < 1e-9, g["fields"]["gpu_util"]
assert "mem_temp" not in g["fields"]
assert "sw_power_cap" in g["throttle_reasons"]
' "$E_UTIL" || fail "status JSON disagrees"

kill -TERM "$DAEMON_PID"
wait_for '! kill -0 $DAEMON_PID 2>/dev/null' || fail "gpulsed did not stop on SIGTERM"
echo "PASS"
