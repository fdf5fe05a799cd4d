#!/usr/bin/env bash
# CPU of `gpulse top` at its default 1 s refresh against gpulsed with 8
# fake GPUs (the fake NVML replicating the real H200 recording, at speed
# 1, with 8 processes on every GPU and the rule pack's alerts), drawn in a
# tmux terminal of 120x40 (and 80x24) for SECONDS each. The anchor, in the
# same run and the same terminal: procps `top -d 1` (a terminal monitor
# refreshing every second, as nvtop and htop users know it).
#   bench/top_cpu.sh BUILD_DIR [SECONDS]
# CPU time is read from /proc/PID/task/*/schedstat (nanoseconds on CPU,
# every thread, exact, unlike the 10 ms ticks of /proc/PID/stat), from
# after start-up to the end of the window.
set -euo pipefail
B=$(cd "${1:?build dir}" && pwd)
SECS=${2:-60}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PORT=${PORT:-9467}
WORK=$(mktemp -d /tmp/gpulse-topcpu.XXXXXX)
TM=(tmux -S "$WORK/tmux.sock" -f /dev/null)
sleeps=()
for i in 1 2 3 4 5 6 7 8; do sleep 100000 & sleeps+=($!); done
procs=""
for i in "${!sleeps[@]}"; do procs+="${procs:+,}${sleeps[$i]}:$((1000 * (i + 1))):$((10 * i))"; done
cleanup() {
	"${TM[@]}" kill-server 2>/dev/null || true
	kill "${sleeps[@]}" 2>/dev/null || true
	[ -n "${DPID:-}" ] && kill "$DPID" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
cat >"$WORK/g.yml" <<YML
storage:
  path: "$WORK/db"
rule_files: ["$ROOT/deploy/rules/gpulse.rules.yml"]
YML
GPULSE_FAKE_NVML_RECORDING="$ROOT/data/recordings/h200-phases-10hz.csv" GPULSE_FAKE_NVML_GPUS=8 \
GPULSE_FAKE_NVML_PROCESSES="$procs" \
	"$B/gpulsed" --listen "127.0.0.1:$PORT" --config "$WORK/g.yml" \
	--nvml-library "$B/fake_nvml/libnvidia-ml.so.1" --log-level warn 2>"$WORK/d.log" &
DPID=$!
for _ in $(seq 1 100); do curl -sf "127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done

cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%.0f", s}'; }
# measure NAME W H CMD...: CPU share of one core of CMD in a W x H pane.
measure() {
	local name=$1 w=$2 h=$3
	shift 3
	"${TM[@]}" new-session -d -s "$name" -x "$w" -y "$h" "$@"
	local pid
	pid=$("${TM[@]}" display-message -p -t "$name" '#{pane_pid}')
	sleep 3 # start-up, first fetches, first full draw
	local c0 t0 c1 t1
	c0=$(cpu_ns "$pid"); t0=$(date +%s.%N)
	sleep "$SECS"
	c1=$(cpu_ns "$pid"); t1=$(date +%s.%N)
	"${TM[@]}" capture-pane -p -t "$name" >"$WORK/$name.txt"
	"${TM[@]}" kill-session -t "$name"
	awk -v n="$name" -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" 'BEGIN {
		cpu = (c1 - c0) / 1e9; wall = t1 - t0
		printf "%-28s %6.3f s CPU in %5.1f s = %6.3f%% of one core\n", n, cpu, wall, 100 * cpu / wall
		print 100 * cpu / wall > "/dev/stderr" }' 2>"$WORK/$name.pct"
}
echo "8 fake GPUs, 8 processes each, rule pack; $SECS s per run; $(nproc) CPUs, $(uname -r)"
measure "gpulse-top-120x40" 120 40 env TERM=screen LANG=C.UTF-8 "$B/gpulse" top --url "http://127.0.0.1:$PORT"
measure "gpulse-top-80x24" 80 24 env TERM=screen LANG=C.UTF-8 "$B/gpulse" top --url "http://127.0.0.1:$PORT"
measure "anchor-procps-top-120x40" 120 40 env TERM=screen LANG=C.UTF-8 top -d 1
a=$(cat "$WORK/anchor-procps-top-120x40.pct")
for n in gpulse-top-120x40 gpulse-top-80x24; do
	awk -v n="$n" -v x="$(cat "$WORK/$n.pct")" -v a="$a" 'BEGIN {
		printf "%-28s %.2fx procps top\n", n, (a > 0 ? x / a : 0) }'
done
echo "--- the 120x40 screen at the end:"
cat "$WORK/gpulse-top-120x40.txt"
