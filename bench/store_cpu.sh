#!/usr/bin/env bash
# gpulsed's CPU with the embedded store against without it (issue 37): one
# fake GPU replaying the real H200 recording at speed 1, default settings,
# for SECONDS after a warm-up, as the deployed unit runs it (--storage-path)
# and with no store (--storage-path ""). Prints the daemon's CPU per second
# (every thread, from /proc/PID/task/*/schedstat: nanoseconds on CPU) and
# the store's flusher thread (gpulse-flusher) alone.
#   bench/store_cpu.sh GPULSED [SECONDS [WARMUP]]
# GPULSED is a gpulsed binary (its build's fake_nvml/ beside it), so that
# two builds can be compared in the same run.
set -euo pipefail
D=$(cd "$(dirname "${1:?gpulsed binary}")" && pwd)/$(basename "$1")
B=$(dirname "$D")
SECS=${2:-60}
WARM=${3:-15}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PORT=${PORT:-9471}
WORK=$(mktemp -d /tmp/gpulse-storecpu.XXXXXX)
DPID=""
cleanup() {
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%.0f", s}'; }
flusher_ns() {
	local s=0 t
	for t in /proc/"$1"/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = gpulse-flusher ] && s=$((s + $(awk '{print $1}' "$t/schedstat")))
	done
	echo "$s"
}
run() {
	local name=$1 store=$2
	GPULSE_FAKE_NVML_RECORDING="$ROOT/data/recordings/h200-mixed-10hz.csv" GPULSE_FAKE_NVML_GPUS=1 \
	GPULSE_FAKE_NVML_SPEED=1 \
		"$D" --listen "127.0.0.1:$PORT" --storage-path "$store" \
		--nvml-library "$B/fake_nvml/libnvidia-ml.so.1" --log-level warn 2>"$WORK/$name.log" &
	DPID=$!
	for _ in $(seq 1 100); do curl -sf "127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
	sleep "$WARM"
	local c0 f0 t0 c1 f1 t1
	c0=$(cpu_ns "$DPID"); f0=$(flusher_ns "$DPID"); t0=$(date +%s.%N)
	sleep "$SECS"
	c1=$(cpu_ns "$DPID"); f1=$(flusher_ns "$DPID"); t1=$(date +%s.%N)
	kill "$DPID"
	wait "$DPID" 2>/dev/null || true
	DPID=""
	awk -v n="$name" -v c0="$c0" -v c1="$c1" -v f0="$f0" -v f1="$f1" -v t0="$t0" -v t1="$t1" 'BEGIN {
		w = t1 - t0
		printf "%-10s %7.3f ms CPU/s (flusher thread %6.3f ms/s) over %.1f s\n", n,
		       (c1 - c0) / 1e6 / w, (f1 - f0) / 1e6 / w, w }'
}
echo "gpulsed $D; 1 fake GPU, h200-mixed-10hz at speed 1; $SECS s after $WARM s; $(nproc) CPUs"
run "no-store" ""
run "store" "$WORK/db"
