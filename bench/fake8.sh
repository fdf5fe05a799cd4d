#!/usr/bin/env bash
# gpulsed with fake GPUs (the fake NVML serving the real H200 recording)
# at the default tiers: CPU share of one core, CPU per GPU-sample and
# resident memory over a steady-state window, for each GPU count in GPUS
# (default "8"; GPUS="1 2 4 8" shows how the cost per GPU falls), then,
# for the last count, /metrics throughput under wrk on loopback.
#   [GPUS="1 2 4 8"] bench/fake8.sh BUILD_DIR [SECONDS]
# A GPU-sample is one fast-tier read of one GPU (gpulse_samples_total,
# tier="fast"); the CPU is every thread of gpulsed (all tiers, the HTTP
# server idle). The fake NVML's own cost runs inside gpulsed, so the CPU
# figures are an upper bound for gpulsed's share.
set -euo pipefail
B=${1:?build dir}
SECS=${2:-60}
GPUS=${GPUS:-8}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PORT=${PORT:-9466}
export GPULSE_FAKE_NVML_RECORDING="$ROOT/data/recordings/h200-phases-10hz.csv"
PID=
trap '[ -n "$PID" ] && kill $PID 2>/dev/null' EXIT
# Nanoseconds on CPU summed over every thread (schedstat: exact, unlike
# the 10 ms ticks of /proc/PID/stat).
cpu() { cat /proc/$PID/task/*/schedstat | awk '{s += $1} END {printf "%.0f", s}'; }
fast() { curl -s "127.0.0.1:$PORT/metrics" | awk '/^gpulse_samples_total\{/ && /tier="fast"/ {s += $NF} END {printf "%.0f", s}'; }
printf '%-5s %-9s %-12s %-16s %-14s %s\n' gpus seconds "CPU % core" "µs/GPU-sample" "µs/GPU/s" "RSS MB"
for n in $GPUS; do
	GPULSE_FAKE_NVML_GPUS=$n "$B/gpulsed" --listen 127.0.0.1:$PORT \
		--nvml-library "$B/fake_nvml/libnvidia-ml.so.1" --log-level warn &
	PID=$!
	sleep 3
	s0=$(fast); c0=$(cpu); t0=$(date +%s.%N)
	sleep "$SECS"
	s1=$(fast); c1=$(cpu); t1=$(date +%s.%N)
	rss_kb=$(awk '/VmRSS/{print $2}' "/proc/$PID/status")
	awk -v n="$n" -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v s0="$s0" -v s1="$s1" -v rss="$rss_kb" 'BEGIN {
		cpu = (c1 - c0) / 1e9; wall = t1 - t0; smp = s1 - s0
		per = 0; if (smp > 0) per = cpu * 1e6 / smp
		printf "%-5d %-9.0f %-12.3f %-16.1f %-14.1f %.1f\n", n, wall, 100 * cpu / wall,
			per, cpu * 1e6 / wall / n, rss / 1024 }'
	if [ "$n" != "${GPUS##* }" ]; then
		kill $PID; wait $PID 2>/dev/null || true; PID=
	fi
done
if command -v wrk >/dev/null; then
	# The anchor: the same server answering a 3-byte route, same run.
	echo "--- /healthz (anchor)"
	wrk -t1 -c16 -d10s "http://127.0.0.1:$PORT/healthz" | grep -E 'Requests/sec|Latency'
	echo "--- /metrics (${GPUS##* } GPUs)"
	wrk -t1 -c16 -d10s "http://127.0.0.1:$PORT/metrics" | grep -E 'Requests/sec|Latency|read'
fi
