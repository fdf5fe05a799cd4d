#!/usr/bin/env bash
# gpulsed with 8 fake GPUs (the fake NVML serving the real H200 recording)
# at the default tiers: CPU share of one core and resident memory over a
# steady-state window, then /metrics throughput under wrk on loopback.
#   bench/fake8.sh BUILD_DIR [SECONDS]
# The fake NVML's own cost runs inside gpulsed, so the CPU figure is an
# upper bound for gpulsed's share.
set -euo pipefail
B=${1:?build dir}
SECS=${2:-60}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PORT=${PORT:-9466}
export GPULSE_FAKE_NVML_RECORDING="$ROOT/data/recordings/h200-phases-10hz.csv" GPULSE_FAKE_NVML_GPUS=8
"$B/gpulsed" --listen 127.0.0.1:$PORT --nvml-library "$B/fake_nvml/libnvidia-ml.so.1" --log-level warn &
PID=$!
trap 'kill $PID 2>/dev/null' EXIT
sleep 3
# Nanoseconds on CPU summed over every thread (schedstat: exact, unlike
# the 10 ms ticks of /proc/PID/stat).
cpu() { cat /proc/$PID/task/*/schedstat | awk '{s += $1} END {printf "%.0f", s}'; }
c0=$(cpu); t0=$(date +%s.%N)
sleep "$SECS"
c1=$(cpu); t1=$(date +%s.%N)
rss_kb=$(awk '/VmRSS/{print $2}' "/proc/$PID/status")
hwm_kb=$(awk '/VmHWM/{print $2}' "/proc/$PID/status")
samples=$(curl -s "127.0.0.1:$PORT/metrics" | awk '/^gpulse_samples_total\{/ && /tier="fast"/ {s += $NF} END {print s}')
awk -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v rss="$rss_kb" -v hwm="$hwm_kb" 'BEGIN {
	cpu = (c1 - c0) / 1e9; wall = t1 - t0
	printf "8 fake GPUs, default tiers, %.0f s: CPU %.3f s = %.3f%% of one core; RSS %.1f MB (peak %.1f MB)\n",
		wall, cpu, 100 * cpu / wall, rss / 1024, hwm / 1024 }'
echo "fast-tier samples so far (all GPUs): $samples"
if command -v wrk >/dev/null; then
	# The anchor: the same server answering a 3-byte route, same run.
	echo "--- /healthz (anchor)"
	wrk -t1 -c16 -d10s "http://127.0.0.1:$PORT/healthz" | grep -E 'Requests/sec|Latency'
	echo "--- /metrics (8 GPUs)"
	wrk -t1 -c16 -d10s "http://127.0.0.1:$PORT/metrics" | grep -E 'Requests/sec|Latency|read'
fi
