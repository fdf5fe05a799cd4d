#!/usr/bin/env bash
# gpulsed's CPU with remote write configured, against the same gpulsed
# without it (the anchor), on one fake GPU (the fake NVML serving the H200
# recording) at the default tiers with storage on: remote write's share of
# a core (goal: <= 1%) at 1 sample/s/GPU (write_relabel_configs keep one
# series of the 1 s tier, gpulse_gpu_temperature_celsius: every stored
# sample still passes the append hook and the relabelling), and, as a
# harder case, sending every stored series. The receiver is a python3 http.server answering
# 204 on loopback (its CPU is its own, not counted). Runs alternate,
# anchor first, ROUNDS times, so drift on a shared machine hits both.
#   [ROUNDS=2] bench/remote_write_cpu.sh BUILD_DIR [SECONDS]
# CPU is every thread of gpulsed from /proc/PID/task/*/schedstat
# (nanoseconds on CPU, exact), over SECONDS after 5 s of start-up. The
# remote-write rate is prometheus_remote_storage_samples_total over the
# same window, per GPU.
set -euo pipefail
B=$(cd "${1:?build dir}" && pwd)
SECS=${2:-60}
ROUNDS=${ROUNDS:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/gpulse-rwcpu.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT
cat >"$WORK/sink.py" <<'PY'
import http.server, os, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1] + ".tmp", "w").write(str(s.server_address[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
s.serve_forever()
PY
python3 "$WORK/sink.py" "$WORK/sink.port" &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$WORK/sink.port" ] && break; sleep 0.1; done
SINK=$(cat "$WORK/sink.port")
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%.0f", s}'; }
sent() { curl -s "127.0.0.1:$1/metrics" | awk '/^prometheus_remote_storage_samples_total\{/ {s += $NF} END {printf "%.0f", s}'; }

# run NAME RW: RW 0 none, 1 one series per GPU, all every series; prints
# "NAME cpu_s wall_s samples_sent".
run() {
	local name=$1 rw=$2 port
	port=$(free_port)
	mkdir -p "$WORK/$name"
	{
		echo "storage:"
		echo "  path: $WORK/$name/db"
		if [ "$rw" != 0 ]; then
			echo "remote_write:"
			echo "  - url: http://127.0.0.1:$SINK/api/v1/write"
			echo "    name: bench"
		fi
		if [ "$rw" = 1 ]; then
			echo "    write_relabel_configs:"
			echo "      - source_labels: [__name__]"
			echo "        regex: gpulse_gpu_temperature_celsius"
			echo "        action: keep"
		fi
	} >"$WORK/$name/g.yml"
	GPULSE_FAKE_NVML_RECORDING="$ROOT/data/recordings/h200-phases-10hz.csv" GPULSE_FAKE_NVML_GPUS=1 \
		"$B/gpulsed" --listen "127.0.0.1:$port" --config "$WORK/$name/g.yml" \
		--nvml-library "$B/fake_nvml/libnvidia-ml.so.1" --log-level warn 2>"$WORK/$name/d.log" &
	local pid=$!
	PIDS+=("$pid")
	for _ in $(seq 1 100); do curl -sf "127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
	sleep 5
	local c0 t0 s0 c1 t1 s1
	s0=$(sent "$port"); c0=$(cpu_ns "$pid"); t0=$(date +%s.%N)
	sleep "$SECS"
	c1=$(cpu_ns "$pid"); t1=$(date +%s.%N); s1=$(sent "$port")
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	awk -v n="$name" -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v s0="$s0" -v s1="$s1" \
		'BEGIN { printf "%s %.4f %.3f %d\n", n, (c1 - c0) / 1e9, t1 - t0, s1 - s0 }'
}

echo "1 fake GPU, default tiers, storage on; $SECS s per run, $ROUNDS round(s); $(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$ROUNDS"); do
	run "anchor-$r" 0
	run "rw-1/s-$r" 1
	run "rw-all-$r" all
done >"$WORK/results"
awk '
	{ cpu[$1] = $2; wall[$1] = $3; smp[$1] = $4; pct = 100 * $2 / $3
	  printf "%-16s %8.3f s CPU in %6.1f s = %6.3f%% of one core", $1, $2, $3, pct
	  if ($1 ~ /^rw-/) printf "; %.2f samples/s/GPU sent", $4 / $3
	  printf "\n"; share[$1] = pct }
	END {
	  for (k in share) if (k ~ /^anchor-/) { r = substr(k, 8); a = share[k]; n++; sa += a
	    for (m = 1; m <= 2; m++) { v = (m == 1 ? "rw-1/s" : "rw-all"); w = share[v "-" r]; sw[v] += w
	      printf "round %s: %-6s %.3f%% - anchor %.3f%% = %+.3f%% of one core (ratio %.3f)\n", r, v, w, a, w - a, (a > 0 ? w / a : 0) } }
	  if (n) for (m = 1; m <= 2; m++) { v = (m == 1 ? "rw-1/s" : "rw-all")
	    printf "mean %-6s: %.3f%% vs anchor %.3f%%: remote write %+.3f%% of one core (goal <= 1%%), ratio %.3f\n", v, sw[v] / n, sa / n, (sw[v] - sa) / n, (sa > 0 ? sw[v] / sa : 0) }
	}' "$WORK/results"
